"""The utility-privacy trade-off toolkit of Zhang, Chen and Yang 2022 ("Towards achieving
near-optimal utility for privacy-preserving federated learning via data generation and
parameter distortion"): measures, protection mechanisms, the paper's bounds and rules with what
is proven about them, corrected forms, and calibration.

* :mod:`~privfl.distortion.divergence` — sqrt-JS, total variation (discrete; exact for
  isotropic Gaussians; Devroye et al. 2018 bounds; random mask).
* :mod:`~privfl.distortion.diagonal` — TV between Gaussians with per-coordinate variances
  (exact, numerical with its error, a certified bracket, Monte Carlo) and the noise for a TV
  target under them.
* :mod:`~privfl.distortion.bayesian` — the finite Bayesian attacker: beliefs, leakage
  ``eps_p``, ``C1``, ``xi``, ``C2``.
* :mod:`~privfl.distortion.utility` — gap, utility loss (both sign conventions), the
  Appendix L proxy, bias-variance decomposition, variance reduction, parameter discrepancy.
* :mod:`~privfl.distortion.mechanisms` — Gaussian distortion, random mask, Poisson record
  sampling, aggregation, and :class:`ClientProtection`, the client-side hook algorithms take.
* :mod:`~privfl.distortion.bounds` — Theorem 6.1, Lemmas 6.3-6.7, Theorems 6.12-6.14, each a
  :class:`Bound` saying whether its hypothesis holds and whether it is proven.
* :mod:`~privfl.distortion.sampling` — Lemma 6.9, Theorem 6.10, the Theorem 6.11 solver, the
  ``sigma^2`` estimators.
* :mod:`~privfl.distortion.calibrate` — Lemma 6.8's noise rule and the exact calibration.
* :mod:`~privfl.runs.tradeoff_run` — the empirical trade-off on a trained federated model
  (``privfl tradeoff``).

Proofs of privfl's corrections and the counterexamples: ``docs/distortion.md``.
"""

from privfl.distortion.bayesian import BayesianAttacker, c2_from_xi, log_posteriors
from privfl.distortion.bounds import (
    Bound,
    c6_from_constants,
    c_d,
    gaussian_tv_sandwich,
    leakage_triangle_bounds,
    min_tv_for_budget,
    nfl_holds,
    nfl_lower_bound,
    optimal_tradeoff,
    privacy_leakage_upper_bound,
    tradeoff_upper_bound,
    utility_loss_upper_bound,
)
from privfl.distortion.calibrate import (
    AnisotropyWarning,
    NoiseCalibration,
    mask_keep_rate,
    noise_calibrations,
    noise_variance_exact,
    noise_variance_paper,
)
from privfl.distortion.diagonal import (
    DiagonalTV,
    noise_variance_diagonal,
    tv_diagonal_bracket,
    tv_diagonal_monte_carlo,
    tv_gaussian_diagonal,
)
from privfl.distortion.divergence import (
    js_divergence,
    sqrt_js,
    sqrt_js_rows,
    tv_discrete,
    tv_gaussian_devroye,
    tv_gaussian_isotropic,
    tv_random_mask,
)
from privfl.distortion.mechanisms import (
    ClientProtection,
    GaussianDistortion,
    PoissonRecordSampling,
    RandomMask,
    aggregate,
    sampled_mean_steps,
)
from privfl.distortion.sampling import (
    SamplingRule,
    expected_update,
    parameter_variance,
    sampling_probability,
    sampling_variance,
)
from privfl.distortion.utility import (
    expected_gap,
    federated_average,
    gap,
    proxy_utility_loss,
    utility_loss,
)

__all__ = [
    "AnisotropyWarning",
    "BayesianAttacker",
    "Bound",
    "ClientProtection",
    "DiagonalTV",
    "GaussianDistortion",
    "NoiseCalibration",
    "PoissonRecordSampling",
    "RandomMask",
    "SamplingRule",
    "aggregate",
    "c2_from_xi",
    "c6_from_constants",
    "c_d",
    "expected_gap",
    "expected_update",
    "federated_average",
    "gap",
    "gaussian_tv_sandwich",
    "js_divergence",
    "leakage_triangle_bounds",
    "log_posteriors",
    "mask_keep_rate",
    "min_tv_for_budget",
    "nfl_holds",
    "nfl_lower_bound",
    "noise_calibrations",
    "noise_variance_diagonal",
    "noise_variance_exact",
    "noise_variance_paper",
    "optimal_tradeoff",
    "parameter_variance",
    "privacy_leakage_upper_bound",
    "proxy_utility_loss",
    "sampled_mean_steps",
    "sampling_probability",
    "sampling_variance",
    "sqrt_js",
    "sqrt_js_rows",
    "tradeoff_upper_bound",
    "tv_diagonal_bracket",
    "tv_diagonal_monte_carlo",
    "tv_discrete",
    "tv_gaussian_devroye",
    "tv_gaussian_diagonal",
    "tv_gaussian_isotropic",
    "tv_random_mask",
    "utility_loss",
    "utility_loss_upper_bound",
]
