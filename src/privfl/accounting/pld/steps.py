"""Step PMFs of the PLD accountant: the dominating pair of each supported step, discretised
pessimistically (the composition and the answers are in
:mod:`~privfl.accounting.pld.accountant`, whose docstring sets the notation: PLD, privacy
profile, domination, the noise multiplier z).

Supported steps (``step.effective_sampling``)
---------------------------------------------
* Gaussian, Poisson (rate q), add/remove: dp-accounting's pair with sensitivity 1,
  ``REMOVE: ((1-q) N(0, z^2) + q N(-1, z^2), N(0, z^2))`` and
  ``ADD: (N(0, z^2), (1-q) N(0, z^2) + q N(1, z^2))``. The two directions have different
  profiles and the guarantee is the max over the two, each composed on its own (a neighbouring
  pair is one direction for the whole run). Both are kept: no proof that one direction dominates
  the other after composition is used (dp-accounting only claims it for a single step).
* Gaussian, Poisson, replace-one: dp-accounting's REPLACE pair with sensitivity 1,
  ``((1-q) N(0, z^2) + q N(-1, z^2), (1-q) N(0, z^2) + q N(1, z^2))``; see "Why the antipodal
  pair is the worst case" below.
* Gaussian, no sampling: the T-fold composition of ``N(0, z^2)`` vs ``N(s, z^2)`` is exactly
  mu-GDP with ``mu = s sqrt(T) / z`` (s = 1 add/remove, s = 2 replace-one, where the sum moves
  by ``v' - v`` with ``||v' - v|| <= 2``); all unsampled Gaussian steps of an event are merged
  into one Gaussian PLD with ``mu^2 = sum count s^2 / z^2`` (no composition error), and an
  event made of such steps only is answered in closed form, from the exact mu-GDP profile with
  no grid and no FFT (:mod:`privfl.accounting.gdp.closed_form`).
* Gaussian, fixed-size batches without replacement (B of n, q = B/n), replace-one: the step is
  ``C_q(G_{2/z})``-DP (Dong, Roth & Su 2019, Thm 4.2: an f-DP mechanism run on a uniformly random
  size-B subset is C_{B/n}(f)-DP under replace-one; the unsampled step is G_{2/z}). Zheng et
  al. 2021 (Theorem 2) write this ``C_{B/n}(G_{1/sigma})`` with ``sigma = z / 2``. Its PLD is
  built here from a symmetric dominating pair, derived below.
* Laplace (scale z), no sampling or Poisson, add/remove: dp-accounting's
  ``LaplacePrivacyLoss(parameter=z, sensitivity=1, sampling_prob=q)`` pairs (PMFs built here as
  for the Gaussian, see :func:`_connect_dots`); replace-one without
  sampling uses sensitivity 2. This is dp-accounting's scalar pair with the maximal shift: it
  covers a one-dimensional sum with ``|v| <= C``, taking the shift C as the worst case as
  dp-accounting does. For vector sums with per-coordinate Laplace noise and L1 clipping it is
  used as the per-step pair without a proof here that a one-coordinate shift is the worst case
  over the L1 ball.
* Anything else (without replacement under add/remove, Laplace with replace-one and Poisson, or
  Laplace without replacement) is refused by :meth:`PldAccountant.unsupported_reason`.

Why the antipodal pair is the worst case (Poisson, replace-one)
----------------------------------------------------------------
A DP-SGD step on D releases ``Y = S + b v + N`` and on the neighbour D' (record x replaced by
x') ``Y' = S + b v' + N``, with ``b ~ Bernoulli(q)`` the inclusion of the replaced record, S the
clipped sum of the other sampled records (same law in both worlds, independent of b and N),
``N ~ N(0, z^2 I)`` and ``||v||, ||v'|| <= 1``. Adding the independent S is post-processing, so
it suffices to dominate ``(M_v, M_v')`` with ``M_u = (1-q) N(0, z^2 I) + q N(u, z^2 I)``. With
``Y0 ~ N(0, z^2 I)`` and ``l_u(y) = dM_u/dN(0) = 1 - q + q exp(X_u)``,
``X_u = <u, y>/z^2 - ||u||^2/(2 z^2)``,

    H_g(M_v || M_v') = E[F(X_v, X_v')],  F(x1, x2) = (q e^{x1} - g q e^{x2} + (1-q)(1-g))_+,

where (X_v, X_v') is jointly Gaussian with means ``-a^2/2, -b^2/2``, variances ``a^2, b^2`` and
covariance ``rho a b`` (``a = ||v||/z``, ``b = ||v'||/z``, rho the cosine of their angle). F is
a convex non-decreasing function of ``q e^{x1} - g q e^{x2}``, so (in the sense of distributions)
``F_12 <= 0``, ``F_11 - F_1 >= 0`` and ``F_22 - F_2 >= 0``. By the Gaussian interpolation
(Plackett) identity, ``d/drho E[F] = a b E[F_12] <= 0``, so lowering rho to -1 can only increase
every H_g; at ``rho = -1``, ``d/da E[F] = a E[F_11 - F_1] - b E[F_12] >= 0`` and likewise in b,
so raising a and b to ``1/z`` can only increase it further. The maximum over the allowed v, v' is
therefore at ``v' = -v``, ``||v|| = 1``: the one-dimensional pair
``((1-q) N(0, z^2) + q N(1, z^2), (1-q) N(0, z^2) + q N(-1, z^2))``, which (reflected) is
dp-accounting's REPLACE pair with sensitivity 1. (The same argument with ``v' = 0`` gives the
add/remove pairs above.)

The dominating pair of ``C_q(G_mu)`` (fixed-size batches, replace-one)
---------------------------------------------------------------------
Let ``mu = 2/z``, ``M = (1-q) N(0,1) + q N(mu,1)`` and ``g(x) = log(1 - q + q e^{mu x - mu^2/2})``
(the log likelihood ratio dM/dN(0,1), increasing in x). Then
``f_q = q G_mu + (1-q) Id = T(N(0,1), M)``: for a test phi of level alpha under N(0,1), its type
II error under M is ``(1-q)(1-alpha) + q (1 - E_{N(mu,1)} phi)``, minimised by Neyman-Pearson.
Define the pair (A, B) by its PLD under the upper law A (dp-accounting's convention):

* positive part: ``L = g(X)``, X ~ M restricted to ``X > mu/2``; mass ``(1-q) Phi(-mu/2) + q
  Phi(mu/2)``;
* an atom ``L = 0`` with the remaining mass ``1 - (2-q) Phi(-mu/2) - q Phi(mu/2)`` (>= 0, linear
  in q, zero at q = 1);
* negative part: ``L = -g(Y)``, Y ~ N(0,1) restricted to ``Y > mu/2``; mass ``Phi(-mu/2)``.

Under B the law of L is ``e^{-l}`` times this, i.e. the mirror image (``omega(-l) = e^{-l}
omega(l)``): the PLD is symmetric, so T(B, A) is a symmetric trade-off function (the
same PLD also describes the pair in the other order). Its Neyman-Pearson curve, rejecting in
decreasing order of L:

* losses > 0 are the outcomes x > mu/2 of the pair (N(0,1), M) with the same likelihood ratios,
  so the curve is ``f_q`` on ``[0, x*]`` with ``x* = Phi(-mu/2)`` (B-mass of the positive part),
  ending at ``f_q(x*) = 1 - (1-q) Phi(-mu/2) - q Phi(mu/2)``; this is where ``f_q' = -1``
  (``g(mu/2) = 0``);
* the atom (likelihood ratio 1) is a segment of slope -1 from ``(x*, f_q(x*))`` to
  ``(f_q(x*), x*)``;
* by symmetry the rest is the reflection, ``f_q^{-1}`` on ``[f_q(x*), 1]``.

That is exactly the closed form of ``C_q(G_mu) = min{f_q, f_q^{-1}}**`` (Zheng et al. 2021,
Section 3.4), so ``T(B, A) = C_q(G_mu)``: the pair is tight, not just dominating. Its profile is
``delta(eps) = max(H(M||N), H(N||M)) = H_{e^eps}(M || N(0,1)) = q delta_{G_mu}(eps')`` for
``eps >= 0`` with ``eps' = log(1 + (e^eps - 1)/q)`` (the conjugate of a minimum is the maximum of
the conjugates, and the double conjugate does not change the conjugate), and
``delta(-eps) = 1 - e^{-eps} + e^{-eps} delta(eps)`` by symmetry. For q = 1 it is G_mu, and
T steps give ``G_{mu sqrt T}``.

Discretisation
--------------
* Discretisation (grid ``value_discretization_interval``): by default every step PLD is the
  pessimistic *connect-the-dots* PMF (Doroshenko et al. 2022, dp-accounting's default): on the
  grid it reproduces the exact profile and in between it is the chord of the profile as a convex
  function of e^eps, which lies above it, for every real eps; the mass above the grid goes to
  +inf. With ``connect_dots=False`` losses are instead rounded *up* to the grid ("privacy
  buckets"; rounding up can only increase ``E[(1 - e^{eps - sum L})_+]``), mass above the grid
  at +inf and mass below it on the lowest grid point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from dp_accounting.pld import privacy_loss_mechanism as dp_plm
from scipy import special

from privfl._validation import check_positive, check_range
from privfl.accounting.events import Neighbouring, Noise, NoisyStep, Sampling
from privfl.accounting.pld.compose import MAX_FFT_LENGTH

__all__ = [
    "PrivacyLossDistribution",
    "clear_cache",
    "without_replacement_gaussian_delta",
    "without_replacement_gaussian_pld",
]

PrivacyLossDistribution = dp_pld.PrivacyLossDistribution
_Adjacency = dp_plm.AdjacencyType

#: ln of the noise tail mass put at +inf when a Gaussian step PMF is built (dp-accounting's).
_LOG_MASS_TRUNCATION_BOUND = -50.0

# --------------------------------------------------------------------------------------------
# Dense PMF helpers (dp-accounting's DensePLDPmf keeps its arrays in private attributes; all
# access goes through these two functions).
# --------------------------------------------------------------------------------------------


def _dense(interval: float, lower: int, probs: np.ndarray, infinity_mass: float) -> pld_pmf.PLDPmf:
    return pld_pmf.DensePLDPmf(interval, int(lower), probs, float(infinity_mass), True)


def _arrays(pmf: pld_pmf.PLDPmf) -> tuple[int, np.ndarray, float]:
    """``(lower index, probabilities, infinity mass)`` of a (sparse or dense) PMF."""
    dense = pmf.to_dense_pmf()
    return (
        int(dense._lower_loss),
        np.asarray(dense._probs, dtype=float),
        float(dense._infinity_mass),
    )


def _directions(pld: PrivacyLossDistribution) -> tuple[pld_pmf.PLDPmf, pld_pmf.PLDPmf | None]:
    """The REMOVE PMF and, for an asymmetric PLD, the ADD PMF."""
    remove = pld._pmf_remove
    return remove, (None if pld._symmetric else pld._pmf_add)


_U = float(np.finfo(float).eps) / 2.0  # unit round-off of float64
#: Relative accuracy of a computed privacy-profile value (its affine part 1 - e^eps removed).
#: Measured against mpmath: at most 1.4e-11 relative (tests/accounting/test_pld_soundness.py);
#: the PMF is built from the profile raised by 1e-9 relative, so rounding never lowers it.
_PROFILE_RELATIVE_ERROR = 1e-9


def _connect_dots(interval: float, lower: int, w: np.ndarray) -> pld_pmf.PLDPmf:
    """Pessimistic connect-the-dots PMF on ``lower .. lower + len(w) - 1`` (which holds eps = 0).

    ``w`` is the exact privacy profile without its affine part: ``w(eps) = delta(eps)`` for
    eps >= 0 and ``w(eps) = delta(eps) - (1 - e^eps) = e^eps delta_swap(-eps)`` for eps < 0
    (``delta_swap`` the profile of the pair with its two laws exchanged). The connect-the-dots
    masses (Doroshenko et al. 2022) reproduce the profile at the grid points and are linear in
    it apart from a constant; they vanish on any piece affine in e^eps, so ``1 - e^eps``
    contributes exactly one unit of mass at eps = 0, and the rest comes from w, whose
    differences carry rounding relative to their own size (the same masses computed from
    ``delta ~ 1`` at negative eps are pure rounding noise, ~1e-11 per point).

    Soundness under rounding: the masses are built from ``w (1 + _PROFILE_RELATIVE_ERROR)``,
    which is above the exact profile, so its chords are too; negative masses are set to 0 and
    each mass gets the rounding bound of its own formula (``4u (|dw_k| + e^d |dw_{k-1}|) /
    (e^d - 1)``). Both only add mass, which can only raise the profile.
    """
    w = np.asarray(w, dtype=float) * (1.0 + _PROFILE_RELATIVE_ERROR)
    zero = -lower
    if w.size == 1:
        return _dense(interval, lower, np.array([max(1.0 - w[0], 0.0)]), min(w[0], 1.0))
    em1, ep = math.expm1(interval), math.exp(interval)
    diffs = np.diff(w)
    probs = np.empty_like(w)
    probs[0] = -w[0] + diffs[0] / em1
    probs[1:-1] = (diffs[1:] - diffs[:-1] * ep) / em1
    probs[-1] = diffs[-1] / math.expm1(-interval)
    probs[zero] += 1.0
    size = np.abs(diffs)
    rounding = np.empty_like(w)
    rounding[0] = 4.0 * _U * (abs(w[0]) + size[0] / em1)
    rounding[1:-1] = 4.0 * _U * (size[1:] + ep * size[:-1]) / em1
    rounding[-1] = 4.0 * _U * size[-1] / em1
    rounding += 4.0 * _U * np.abs(probs)
    probs = np.maximum(probs, 0.0) + rounding
    return _dense(interval, lower, probs, min(float(w[-1]), 1.0))


# --------------------------------------------------------------------------------------------
# Gaussian step PMFs (vectorised version of dp-accounting's from_gaussian_mechanism)
# --------------------------------------------------------------------------------------------


def _log_sub_exp(a: np.ndarray, b: float) -> np.ndarray:
    """``log(exp(a) - exp(b))`` for ``a > b``: dp-accounting's ``_log_sub`` formula kept as it is
    (not :func:`privfl.accounting.logspace.logsubexp`) so that the step PMFs equal
    dp-accounting's ``from_gaussian_mechanism`` bit for bit (tests/accounting/test_pld.py)."""
    return a + np.log1p(-np.exp(b - a))


def _gaussian_inverse_loss(loss: dp_plm.GaussianPrivacyLoss, eps: np.ndarray) -> np.ndarray:
    """Vectorised ``loss.inverse_privacy_loss``: the largest x whose privacy loss is >= eps."""
    q, s = loss.sampling_prob, loss.sensitivity
    var = loss.standard_deviation**2
    adjacency = loss.adjacency_type
    eps = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if adjacency is _Adjacency.REPLACE:
            if q == 1.0:
                x = -eps * var / s / 2.0
            else:
                log_alpha = 0.5 * (s / loss.standard_deviation) ** 2 + math.log1p(-q) - math.log(q)
                half = np.abs(eps) / 2.0
                log_sinh = half + np.log1p(-np.exp(-2.0 * half)) - math.log(2.0)
                term = log_alpha + log_sinh
                asinh = -np.sign(eps) * np.logaddexp(0.5 * np.logaddexp(0.0, 2.0 * term), term)
                x = var / s * (asinh - eps / 2.0)
            return np.where(eps == 0.0, 0.0, x)
        if q == 1.0:
            base = -0.5 * s - eps * var / s
            return base + s if adjacency is _Adjacency.ADD else base
        log_c = math.log(1.0 / q - 1.0)
        if adjacency is _Adjacency.REMOVE:
            w = _log_sub_exp(eps + math.log(1.0 / q), log_c)
            w = np.where(eps == 0.0, math.log(1.0), w)
            x = -0.5 * s - w * var / s
            return np.where(np.isclose(eps, math.log1p(-q), rtol=1e-9, atol=0.0), np.inf, x)
        w = -_log_sub_exp(-eps + math.log(1.0 / q), log_c)
        w = np.where(eps == 0.0, 0.0, w)
        x = s + (-0.5 * s - w * var / s)
        return np.where(np.isclose(eps, -math.log1p(-q), rtol=1e-9, atol=0.0), -np.inf, x)


def _gaussian_profile(loss: dp_plm.GaussianPrivacyLoss, eps: np.ndarray) -> np.ndarray:
    """Vectorised ``loss.get_delta_for_epsilon`` (same formula and case split)."""
    q = loss.sampling_prob
    eps = np.asarray(eps, dtype=float)
    deltas = np.zeros_like(eps)
    if q == 1.0 or loss.adjacency_type is _Adjacency.REPLACE:
        use = np.ones(eps.shape, dtype=bool)
    elif loss.adjacency_type is _Adjacency.ADD:
        use = eps < -math.log1p(-q)
    else:
        use = eps > math.log1p(-q)
        deltas[~use] = -np.expm1(eps[~use])
    x = _gaussian_inverse_loss(loss, eps[use])
    with np.errstate(over="ignore", divide="ignore"):
        deltas[use] = _upper_cdf(loss, x) - np.exp(eps[use] + _lower_log_cdf(loss, x))
    return np.clip(deltas, 0.0, 1.0)


def _upper_cdf(loss: dp_plm.GaussianPrivacyLoss, x: np.ndarray) -> np.ndarray:
    """dp-accounting's ``mu_upper_cdf`` with ``special.ndtr`` (no scipy.stats overhead)."""
    sd, s, q = loss.standard_deviation, loss.sensitivity, loss.sampling_prob
    if loss.adjacency_type is _Adjacency.ADD:
        return special.ndtr(x / sd)
    if q == 1.0:
        return special.ndtr((x + s) / sd)
    return (1.0 - q) * special.ndtr(x / sd) + q * special.ndtr((x + s) / sd)


def _lower_log_cdf(loss: dp_plm.GaussianPrivacyLoss, x: np.ndarray) -> np.ndarray:
    """dp-accounting's ``mu_lower_log_cdf`` with ``special.log_ndtr``."""
    sd, s, q = loss.standard_deviation, loss.sensitivity, loss.sampling_prob
    if loss.adjacency_type is _Adjacency.REMOVE:
        return special.log_ndtr(x / sd)
    if q == 1.0:
        return special.log_ndtr((x - s) / sd)
    return np.logaddexp(
        math.log1p(-q) + special.log_ndtr(x / sd), math.log(q) + special.log_ndtr((x - s) / sd)
    )


def _gaussian_pmf(
    noise_std: float, sensitivity: float, q: float, adjacency: _Adjacency, interval: float
) -> pld_pmf.PLDPmf:
    """Pessimistic connect-the-dots Gaussian PMF of dp-accounting's pair, built vectorised."""

    def privacy_loss(kind: _Adjacency) -> dp_plm.GaussianPrivacyLoss:
        return dp_plm.GaussianPrivacyLoss(
            noise_std,
            sensitivity=sensitivity,
            pessimistic_estimate=True,
            log_mass_truncation_bound=_LOG_MASS_TRUNCATION_BOUND,
            sampling_prob=q,
            adjacency_type=kind,
        )

    loss = privacy_loss(adjacency)
    swap = {_Adjacency.REMOVE: _Adjacency.ADD, _Adjacency.ADD: _Adjacency.REMOVE}
    swapped = privacy_loss(swap.get(adjacency, adjacency))
    return _pmf_from_profiles(
        loss.connect_dots_bounds(),
        lambda eps: _gaussian_profile(loss, eps),
        lambda eps: _gaussian_profile(swapped, eps),
        interval,
    )


def _pmf_from_profiles(bounds, profile, swapped_profile, interval: float) -> pld_pmf.PLDPmf:
    """Connect-the-dots PMF on the grid covering ``bounds`` (and 0) from a pair's profile
    (eps >= 0) and its swapped pair's profile (for eps < 0, as ``e^eps delta_swap(-eps)``)."""
    upper = max(math.ceil(bounds.epsilon_upper / interval), 0)
    lower = min(math.floor(bounds.epsilon_lower / interval), 0)
    _check_grid(upper - lower + 1)
    eps = np.arange(lower, upper + 1) * interval
    negative = eps < 0.0
    w = np.empty_like(eps)
    w[~negative] = profile(eps[~negative])
    w[negative] = np.exp(eps[negative]) * np.asarray(swapped_profile(-eps[negative]))
    return _connect_dots(interval, lower, w)


def gaussian_pld(
    noise_std: float,
    sensitivity: float,
    q: float,
    replace: bool,
    interval: float,
    connect_dots: bool,
) -> PrivacyLossDistribution:
    """Gaussian step PLD: REPLACE pair, or the REMOVE (and for q < 1 also ADD) pairs."""
    if not connect_dots:
        relation = (
            dp_pld.NeighborRel.REPLACE_ONE if replace else dp_pld.NeighborRel.ADD_OR_REMOVE_ONE
        )
        return dp_pld.from_gaussian_mechanism(
            noise_std,
            sensitivity=sensitivity,
            pessimistic_estimate=True,
            value_discretization_interval=interval,
            log_mass_truncation_bound=_LOG_MASS_TRUNCATION_BOUND,
            sampling_prob=q,
            use_connect_dots=False,
            neighboring_relation=relation,
        )
    if replace:
        return PrivacyLossDistribution(
            _gaussian_pmf(noise_std, sensitivity, q, _Adjacency.REPLACE, interval)
        )
    remove = _gaussian_pmf(noise_std, sensitivity, q, _Adjacency.REMOVE, interval)
    if q == 1.0:
        return PrivacyLossDistribution(remove)
    return PrivacyLossDistribution(
        remove, _gaussian_pmf(noise_std, sensitivity, q, _Adjacency.ADD, interval)
    )


# --------------------------------------------------------------------------------------------
# Fixed-size batches without replacement: C_q(G_mu)
# --------------------------------------------------------------------------------------------


def _gdp_delta(eps: np.ndarray, mu: float) -> np.ndarray:
    """Exact profile of mu-GDP, ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (stable)."""
    eps = np.asarray(eps, dtype=float)
    log_a = special.log_ndtr(-eps / mu + mu / 2.0)
    log_b = eps + special.log_ndtr(-eps / mu - mu / 2.0)
    return np.exp(log_a) * -np.expm1(np.minimum(log_b - log_a, 0.0))


def _wor_profile(eps: np.ndarray, mu: float, q: float) -> np.ndarray:
    """Exact privacy profile of ``C_q(G_mu)`` at every real ``eps`` (see module docstring)."""
    eps = np.asarray(eps, dtype=float)
    a = np.abs(eps)
    if q == 1.0:
        inner = a
    else:  # log(1 + (e^a - 1)/q); for a > 1 as a + log1p((q - 1) e^-a) - log q (no overflow)
        small = a <= 1.0
        inner = np.empty_like(a)
        inner[small] = np.log1p(np.expm1(a[small]) / q)
        big = a[~small]
        inner[~small] = big + np.log1p((q - 1.0) * np.exp(-big)) - math.log(q)
    positive = np.clip(q * _gdp_delta(inner, mu), 0.0, 1.0)
    negative = -np.expm1(-a) + np.exp(-a) * positive  # delta(-a) = 1 - e^-a + e^-a delta(a)
    return np.where(eps >= 0.0, positive, np.clip(negative, 0.0, 1.0))


def _wor_loss_bound(mu: float, q: float) -> tuple[float, float]:
    """``(x_max, E)``: M puts at most ``exp(-50)/2`` above x_max, and ``E = g(x_max)``."""
    x_max = mu - float(special.ndtri(0.5 * math.exp(_LOG_MASS_TRUNCATION_BOUND)))
    if q == 1.0:
        return x_max, mu * x_max - mu * mu / 2.0
    return x_max, float(np.logaddexp(math.log1p(-q), math.log(q) + mu * x_max - mu * mu / 2.0))


def _wor_inverse_g(loss: np.ndarray, mu: float, q: float) -> np.ndarray:
    """``g^{-1}(loss)`` for ``loss >= 0``: ``(log(1 + expm1(loss)/q) + mu^2/2) / mu``."""
    inner = loss if q == 1.0 else np.log1p(np.expm1(loss) / q)
    return (inner + mu * mu / 2.0) / mu


def _wor_pmf_round_up(mu: float, q: float, interval: float) -> pld_pmf.PLDPmf:
    """Privacy-buckets PMF of the C_q(G_mu) pair: every loss rounded up to the grid.

    Index ``i`` of the result is the loss ``(i - n) * interval``.
    """
    _, top = _wor_loss_bound(mu, q)
    n = math.ceil(top / interval)
    _check_grid(2 * n + 1)
    x = _wor_inverse_g(np.arange(0, n + 1) * interval, mu, q)  # g(x[k]) = k d; x[0] = mu/2
    # positive part, X ~ M: L in ((k-1)d, kd] <=> X in (x[k-1], x[k]] -> loss point k (k = 1..n);
    # X > x[n] (at most exp(-50)/2, since g(x_max) <= n d) -> +inf
    sf_pos = (1.0 - q) * special.ndtr(-x) + q * special.ndtr(mu - x)
    # negative part, Y ~ N(0, 1): L = -g(Y) in (-(j+1)d, -jd] <=> Y in [x[j], x[j+1]) -> loss
    # point -j (j = 0..n-1); Y >= x[n] means L <= -n d -> the lowest point -n
    sf_neg = special.ndtr(-x)
    atom = 1.0 - (2.0 - q) * special.ndtr(-mu / 2.0) - q * special.ndtr(mu / 2.0)
    probs = np.zeros(2 * n + 1)
    probs[n + 1 :] = sf_pos[:-1] - sf_pos[1:]
    probs[1 : n + 1] = (sf_neg[:-1] - sf_neg[1:])[::-1]
    probs[0] = sf_neg[-1]
    probs[n] += max(atom, 0.0)
    return _dense(interval, -n, np.maximum(probs, 0.0), float(sf_pos[-1]))


def _wor_pmf_connect_dots(mu: float, q: float, interval: float) -> pld_pmf.PLDPmf:
    """Pessimistic connect-the-dots PMF of the C_q(G_mu) pair on ``-n d .. n d``.

    The fixed-gap connect-the-dots masses are linear in the profile apart from a constant, and
    vanish on any piece of the profile that is affine in e^eps. For eps < 0 the profile is
    ``1 - e^eps + w(eps)`` with ``w(eps) = e^eps delta(-eps)``; the affine part ``1 - e^eps``
    (with the constant) contributes exactly one unit of mass at eps = 0. The masses are
    therefore computed from ``w`` alone (``w = delta`` for eps >= 0), whose differences carry
    rounding errors relative to their own size, instead of from ``delta ~ 1`` at very negative
    eps, whose second differences are pure rounding noise (~1e-12 per grid point).
    """
    _, top = _wor_loss_bound(mu, q)
    n = math.ceil(top / interval)
    _check_grid(2 * n + 1)
    eps = np.arange(-n, n + 1) * interval
    positive = _wor_profile(np.abs(eps), mu, q)
    return _connect_dots(interval, -n, np.where(eps < 0.0, np.exp(np.minimum(eps, 0.0)) * positive,
                                                positive))


def _wor_pmf(mu: float, q: float, interval: float, connect_dots: bool) -> pld_pmf.PLDPmf:
    if connect_dots:
        return _wor_pmf_connect_dots(mu, q, interval)
    return _wor_pmf_round_up(mu, q, interval)


def without_replacement_gaussian_delta(
    epsilon: float | Sequence[float] | np.ndarray, noise_multiplier: float, sampling_rate: float
) -> float | np.ndarray:
    """Exact single-step profile delta(epsilon) of ``C_q(G_{2/z})`` (any real epsilon).

    One Gaussian step with noise multiplier ``z`` on a fixed-size batch (q = B/n) drawn without
    replacement, replace-one neighbours. For ``epsilon >= 0`` it equals ``q delta_{G_{2/z}}(
    log(1 + (e^epsilon - 1)/q))``.
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    q = check_range("sampling_rate", sampling_rate, 0.0, 1.0, low_open=True)
    eps = np.asarray(epsilon, dtype=float)
    if np.any(np.isnan(eps)):
        raise ValueError(f"epsilon = {epsilon!r} is out of range: must be real numbers, not NaN")
    result = _wor_profile(eps, 2.0 / z, q)
    return float(result) if result.ndim == 0 else result


def without_replacement_gaussian_pld(
    noise_multiplier: float,
    sampling_rate: float,
    *,
    value_discretization_interval: float = 1e-4,
    connect_dots: bool = True,
) -> PrivacyLossDistribution:
    """Pessimistic PLD of one fixed-size-batch Gaussian step under replace-one: ``C_q(G_{2/z})``.

    ``connect_dots=True`` (default) uses the pessimistic connect-the-dots discretisation of the
    exact profile; ``False`` rounds every loss up to the grid. ``sampling_rate = 1`` gives the
    plain Gaussian ``G_{2/z}`` (used to check the construction).
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    q = check_range("sampling_rate", sampling_rate, 0.0, 1.0, low_open=True)
    interval = check_positive("value_discretization_interval", value_discretization_interval)
    return PrivacyLossDistribution(_wor_pmf(2.0 / z, q, interval, bool(connect_dots)))


# --------------------------------------------------------------------------------------------
# Step PLDs (cached) and the accountant
# --------------------------------------------------------------------------------------------


def unsupported_step(step: NoisyStep, relation: Neighbouring) -> str | None:
    sampling = step.effective_sampling
    replace = relation is Neighbouring.REPLACE_ONE
    if step.noise is Noise.GAUSSIAN:
        if sampling is Sampling.WITHOUT_REPLACEMENT and not replace:
            return (
                "fixed-size batches (sampling without replacement) are defined for replace-one "
                "neighbours, but the event uses add-remove; use Poisson sampling for add-remove"
            )
        return None
    if sampling is Sampling.WITHOUT_REPLACEMENT:
        return (
            "Laplace noise with fixed-size batches (sampling without replacement) is not supported"
        )
    if sampling is Sampling.POISSON and replace:
        return (
            "Poisson-subsampled Laplace noise is only supported under add-remove neighbours, "
            "not replace-one"
        )
    return None


@lru_cache(maxsize=32)
def _step_pld(
    step: NoisyStep, relation: Neighbouring, interval: float, connect_dots: bool
) -> PrivacyLossDistribution:
    """PLD of one (sampled) step; unsampled Gaussian steps are handled by :func:`gaussian_gdp`."""
    z, q = step.noise_multiplier, step.sampling_rate
    sampling = step.effective_sampling
    replace = relation is Neighbouring.REPLACE_ONE
    if step.noise is Noise.LAPLACE:
        sensitivity = 2.0 if (replace and sampling is Sampling.NONE) else 1.0
        rate = 1.0 if sampling is Sampling.NONE else q
        if not connect_dots:
            return dp_pld.from_laplace_mechanism(
                z,
                sensitivity=sensitivity,
                pessimistic_estimate=True,
                value_discretization_interval=interval,
                sampling_prob=rate,
                use_connect_dots=False,
            )
        return _laplace_pld(z, sensitivity, rate, interval)
    if sampling is Sampling.WITHOUT_REPLACEMENT:
        return PrivacyLossDistribution(_wor_pmf(2.0 / z, q, interval, connect_dots))
    if sampling is Sampling.NONE:
        return gaussian_gdp(2.0 / z if replace else 1.0 / z, interval, connect_dots)
    return gaussian_pld(z, 1.0, q, replace, interval, connect_dots)


def _laplace_pld(
    b: float, sensitivity: float, q: float, interval: float
) -> PrivacyLossDistribution:
    """Laplace step PLD (add/remove; both directions when sampled): dp-accounting's pairs, with
    the connect-the-dots masses formed from the profile without its affine part."""

    def loss(adjacency: _Adjacency) -> dp_plm.LaplacePrivacyLoss:
        return dp_plm.LaplacePrivacyLoss(
            b, sensitivity=sensitivity, sampling_prob=q, adjacency_type=adjacency
        )

    def pmf(adjacency: _Adjacency, swapped: _Adjacency) -> pld_pmf.PLDPmf:
        return _pmf_from_profiles(
            loss(adjacency).connect_dots_bounds(),
            loss(adjacency).get_delta_for_epsilon,
            loss(swapped).get_delta_for_epsilon,
            interval,
        )

    remove = pmf(_Adjacency.REMOVE, _Adjacency.ADD)
    if q == 1.0:
        return PrivacyLossDistribution(remove)
    return PrivacyLossDistribution(remove, pmf(_Adjacency.ADD, _Adjacency.REMOVE))


@lru_cache(maxsize=32)
def gaussian_gdp(mu: float, interval: float, connect_dots: bool) -> PrivacyLossDistribution:
    """PLD of mu-GDP (the Gaussian pair N(0, 1/mu^2) vs N(1, 1/mu^2))."""
    return gaussian_pld(1.0 / mu, 1.0, 1.0, False, interval, connect_dots)


def clear_cache() -> None:
    """Forget the cached step PLDs (for benchmarks that must start cold)."""
    _step_pld.cache_clear()
    gaussian_gdp.cache_clear()



def _check_grid(points: int) -> None:
    """A step grid longer than the FFT budget is refused (as a MemoryError the accountant words)."""
    if points > MAX_FFT_LENGTH:
        raise MemoryError(points)


def step_spread(step: NoisyStep, relation: Neighbouring) -> tuple[float, float]:
    """``(spread, width)`` of one sampled step's privacy loss: a scale of its losses (2.5 times
    its total variation delta(0), which is about E[L_+], so about the standard deviation of
    small losses) and the width of the loss range its PMF spans."""
    z, q = step.noise_multiplier, step.sampling_rate
    replace = relation is Neighbouring.REPLACE_ONE
    if step.noise is Noise.LAPLACE:
        sensitivity = 2.0 if (replace and step.effective_sampling is Sampling.NONE) else 1.0
        rate = 1.0 if step.effective_sampling is Sampling.NONE else q
        losses = [
            dp_plm.LaplacePrivacyLoss(z, sensitivity=sensitivity, sampling_prob=rate,
                                      adjacency_type=kind)
            for kind in (_Adjacency.REMOVE, _Adjacency.ADD)
        ]
        tv = max(float(loss.get_delta_for_epsilon(0.0)) for loss in losses)
    elif step.effective_sampling is Sampling.WITHOUT_REPLACEMENT:
        mu = 2.0 / z
        tv = float(_wor_profile(np.array([0.0]), mu, q)[0])
        return 2.5 * tv, 2.0 * _wor_loss_bound(mu, q)[1]
    else:
        kinds = (_Adjacency.REPLACE,) if replace else (_Adjacency.REMOVE, _Adjacency.ADD)
        losses = [
            dp_plm.GaussianPrivacyLoss(z, sensitivity=1.0, pessimistic_estimate=True,
                                       log_mass_truncation_bound=_LOG_MASS_TRUNCATION_BOUND,
                                       sampling_prob=q, adjacency_type=kind)
            for kind in kinds
        ]
        tv = max(float(_gaussian_profile(loss, np.array([0.0]))[0]) for loss in losses)
    bounds = [loss.connect_dots_bounds() for loss in losses]
    width = max(b.epsilon_upper - b.epsilon_lower for b in bounds)
    return 2.5 * tv, width
