"""Correlated-noise mechanisms as one Gaussian mechanism: DP-FTRL's tree aggregation (Kairouz
et al. 2021) and banded matrix factorization (BandMF; Choquette-Choo et al. 2023), with the
amplification of BandMF by sampling. The sensitivities come from
:mod:`privfl.mechanisms.sensitivity`; :mod:`~privfl.accounting.correlated.accountant` turns them
into labelled results and calibrates their noise.
"""

from privfl.accounting.correlated.accountant import (
    account_correlated_noise,
    bandmf_amplified_results,
    calibrate_bandmf_noise,
    calibrate_noise_multiplier,
    gaussian_mechanism_results,
    tree_aggregation_results,
)

__all__ = [
    "account_correlated_noise",
    "bandmf_amplified_results",
    "calibrate_bandmf_noise",
    "calibrate_noise_multiplier",
    "gaussian_mechanism_results",
    "tree_aggregation_results",
]
