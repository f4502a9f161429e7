"""Renyi differential privacy (RDP) accounting: per-step curves, composition and conversion.

Everything here is numpy/scipy. An RDP curve is an array ``rdp[k]`` = RDP at ``orders[k]``;
composition adds curves order by order (Mironov 2017, Prop. 1) and a curve is turned into
(epsilon, delta) by :func:`epsilon_from_rdp` / :func:`delta_from_rdp`.

Poisson-subsampled Gaussian (:func:`rdp_poisson_gaussian`)
---------------------------------------------------------
One step releases ``sum of sampled clipped contributions + N(0, (z C)^2)``. Under add/remove
neighbours its RDP at order alpha is ``log(A_alpha) / (alpha - 1)`` with

    A_alpha = E_{x ~ N(0, z^2)} [ ((1 - q) + q exp((2x - 1) / (2 z^2)))^alpha ]

(Mironov, Talwar & Zhang 2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism",
Sec. 3). That is ``D_alpha(mu || mu0)`` with mu0 = N(0, z^2), mu = (1-q) mu0 + q N(1, z^2);
MTZ show it dominates the other direction ``D_alpha(mu0 || mu)``, so it is the RDP of the
add/remove relation (the maximum over both directions). Three evaluation regimes, all exact up
to rounding (relative error below about 1e-12 in ``log A``; the tests check 1e-8 against
mpmath quadrature):

* **integer alpha** - the binomial expansion, written as
  ``A - 1 = sum_{i>=2} C(alpha, i) (1-q)^(alpha-i) q^i expm1((i^2 - i) / (2 z^2))``,
  a sum of positive terms in log space (no cancellation, accurate even when A is close to 1).
* **fractional alpha, series** - the MTZ Sec. 3.3 two-sided series, with the *signs* of the
  generalised binomial coefficients kept (``C(alpha, i) < 0`` for odd ``i - floor(alpha)``
  beyond ``floor(alpha) + 1``). The binomial identity ``sum_i C(alpha,i) (1-q)^(alpha-i) q^i = 1``
  (for q <= 1/2; the mirrored identity for q > 1/2) is subtracted so that ``A - 1`` is
  computed directly. The first ``floor(alpha) + 2`` terms are summed exactly; the alternating
  tail is a Hausdorff moment sequence, summed with the Cohen-Rodriguez Villegas-Zagier (2000)
  acceleration whose error is at most ``2 * first term / 5.83^30``. The whole signed sum is
  done in log space and its condition number is measured.
* **fractional alpha, quadrature** - if that signed sum is ill-conditioned (estimated error of
  ``log A`` above 1e-11 of ``log A``), ``A - 1 = E[f(L)]`` with the non-negative integrand
  ``f(L) = L^alpha - 1 - alpha (L - 1)`` is integrated in log space (scaled by its maximum on a
  fine grid) with composite 16-point Gauss-Legendre, doubling the panels until two estimates
  agree to 1e-13. This happens where ``A - 1`` is tiny while the series' terms are not: large
  noise (z >~ 1) with q roughly in [0.1, 0.7] at orders close to 1 (e.g. q = 0.5, z = 8,
  alpha = 1.01); it costs about 1-2 ms per order. Small noise (z = 0.05 ... 0.5) with large q,
  where the signed series alternates hardest, stays well conditioned on the series.

* **tiny noise** - ``alpha/(2 z^2) + alpha log(q)/(alpha - 1) <= rdp <= alpha/(2 z^2)`` (the
  lower end from ``A >= E[(q r)^alpha]``, the upper by quasi-convexity of the Renyi divergence).
  Where that bracket is narrower than 1e-12 relative (``2 z^2 |log q| <= 1e-12 (alpha - 1)``,
  e.g. z <~ 1e-8), the upper end is used: a bound, equal to the exact value at the accuracy
  of the other regimes. (There the series' terms overflow and the quadrature's log-integrand,
  a difference of numbers of size ``x^2/(2 z^2)``, has lost every digit.) The quadrature
  integrates over windows of +-40 sigma around 0, 1, 2, alpha and the crossover, so that it
  resolves the integrand for any sigma down to that regime.

Measured against mpmath quadrature at 30 digits (300 random cases, q in [1e-6, 1), z in
[0.2, 50], fractional alpha in (1, 30)): max relative error 2.4e-13 (series) and 7e-14
(quadrature).

dp-accounting 0.6.0 adds ``|C(alpha, i)|`` for every term, which over-estimates fractional
orders; Opacus 0.x / TF Privacy (which produced the seed-2 tables) kept the signs, as we do.

Fixed-size batches (sampling without replacement, replace-one neighbours)
-----------------------------------------------------------------------
Gaussian steps use the Gaussian-specific Wang-Balle-Kasiviswanathan 2019 Theorem 27 bound
(:func:`rdp_without_replacement_gaussian`, base RDP ``2 alpha / z^2``: the replace-one
sensitivity of the clipped sum is 2C); :func:`rdp_without_replacement` is their generic
Theorem 9 bound for any base mechanism.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from scipy import integrate, special

from privfl._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_nonnegative,
    check_orders,
    check_positive,
    check_rate,
)
from privfl.accounting.base import Accountant
from privfl.accounting.events import (
    AccountingLimitError,
    Neighbouring,
    Noise,
    NoisyStep,
    PrivacyEvent,
    Sampling,
)
from privfl.accounting.logspace import log1mexp, log_expm1, logsumexp
from privfl.accounting.results import PrivacyResult

__all__ = [
    "CONVERSIONS",
    "DEFAULT_ORDERS",
    "LEGACY_ORDERS",
    "MAX_SUBSAMPLED_ORDER",
    "WOR_GAUSSIAN_EXACT_MAX_ORDER",
    "RdpAccountant",
    "delta_from_rdp",
    "epsilon_from_rdp",
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_poisson_gaussian",
    "rdp_without_replacement",
    "rdp_without_replacement_gaussian",
    "resolve_orders",
    "seed2_proposition2_epsilon",
]

# --------------------------------------------------------------------------------------------
# Order grids
# --------------------------------------------------------------------------------------------

#: The grid of seed 002 / Opacus 0.x: {1.1, 1.2, ..., 10.9} U {12, ..., 63} (11 is absent).
#: Note: that is 99 + 52 = 151 orders (the spec's "150" miscounts); it is Opacus's list exactly.
LEGACY_ORDERS: tuple[float, ...] = tuple(
    [1 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(12, 64)]
)

#: The default grid (268 orders): fine fractional orders near 1 (1.01 ... 1.99), 2.0 ... 11.9
#: in steps of 0.1, every integer 12 ... 64, then a sparse tail up to 1024 for very small
#: budgets / large noise.
DEFAULT_ORDERS: tuple[float, ...] = tuple(
    [1 + k / 100.0 for k in range(1, 100)]
    + [2 + k / 10.0 for k in range(0, 100)]
    + [float(a) for a in range(12, 65)]
    + [
        72.0,
        80.0,
        96.0,
        112.0,
        128.0,
        160.0,
        192.0,
        224.0,
        256.0,
        320.0,
        384.0,
        448.0,
        512.0,
        640.0,
        768.0,
        1024.0,
    ]
)

CONVERSIONS = ("improved", "classic")


def resolve_orders(spec: str | Sequence[float] | np.ndarray) -> np.ndarray:
    """Turn an order specification into a sorted array of unique orders (each > 1).

    Parameters
    ----------
    spec : ``"default"`` (:data:`DEFAULT_ORDERS`), ``"legacy"`` (:data:`LEGACY_ORDERS`), a
        comma-separated string such as ``"1.5,2,32"``, or a sequence of numbers.
    """
    if isinstance(spec, str):
        name = spec.strip().lower()
        if name == "default":
            return np.array(DEFAULT_ORDERS)
        if name == "legacy":
            return np.array(LEGACY_ORDERS)
        parts = [p.strip() for p in name.split(",") if p.strip()]
        try:
            values = [float(p) for p in parts]
        except ValueError as error:
            raise ValueError(
                f"orders = {spec!r} is not allowed: must be 'default', 'legacy' or a "
                "comma-separated list of numbers, each in (1, inf)"
            ) from error
        return check_orders("orders", values)
    return check_orders("orders", spec)


def _orders_array(orders: object) -> np.ndarray:
    """Validated 1-D float array of orders, in the caller's order (not sorted)."""
    check_orders("orders", orders)
    return np.asarray(orders, dtype=float)


#: The largest order at which the subsampled curves (:func:`rdp_poisson_gaussian`,
#: :func:`rdp_without_replacement_gaussian`, :func:`rdp_without_replacement`) are evaluated:
#: their cost grows linearly with the order (one term per integer up to it; about 0.3 s and
#: 60 MB at 1e5). The optimal order is about 2 log(1/delta) / epsilon, so this covers every
#: epsilon above ~2e-4 at delta = 1e-5. Unsubsampled and Laplace curves take any order.
MAX_SUBSAMPLED_ORDER = 1e5


def _check_subsampled_orders(alphas: np.ndarray) -> None:
    """Refuse orders above :data:`MAX_SUBSAMPLED_ORDER` (their cost grows with the order)."""
    top = float(np.max(alphas))
    if top > MAX_SUBSAMPLED_ORDER:
        raise AccountingLimitError(
            f"orders = {top:g} is out of range for a subsampled mechanism: each order must be "
            f"at most {MAX_SUBSAMPLED_ORDER:g} (the subsampled RDP sums one term per integer up "
            "to the order, so its time and memory grow with it); use smaller orders (the optimal "
            "order is about 2 log(1/delta) / epsilon), or the pld method"
        )


# --------------------------------------------------------------------------------------------
# Small numerical helpers
# --------------------------------------------------------------------------------------------


def _log_abs_expm1(c: np.ndarray) -> np.ndarray:
    """``log|expm1(c)|`` for an array (-inf at 0): :func:`~privfl.accounting.logspace.log_expm1`
    for ``c > 0`` and :func:`~privfl.accounting.logspace.log1mexp` for ``c < 0``."""
    c = np.asarray(c, dtype=float)
    return np.where(c > 0, log_expm1(c), log1mexp(c))


def _log_expm1_minus_x(x: float) -> float:
    """``log(expm1(x) - x)`` (the argument is positive for every ``x != 0``)."""
    if x == 0.0:
        return -math.inf
    if math.isinf(x):
        return x if x > 0 else math.inf  # expm1(-inf) - (-inf) = inf
    if abs(x) < 1e-150:  # x^2/2 would underflow: log(x^2/2) directly (relative error O(x))
        return 2.0 * math.log(abs(x)) - math.log(2.0)
    if abs(x) < 0.5:
        total, term, k = 0.0, x * x / 2.0, 2
        while True:  # sum_{k>=2} x^k / k!  (relative to x^2, converges fast for |x| < 1/2)
            total += term
            k += 1
            term *= x / k
            if abs(term) < 1e-18 * abs(total):
                return math.log(total)
    if x > 0:
        return x + math.log1p(-(1.0 + x) * math.exp(-x))
    return math.log(math.expm1(x) - x)


def _crvz_weights(n: int) -> np.ndarray:
    """Weights ``w`` with ``sum_k (-1)^k a_k ~= sum_k w_k a_k`` (Cohen, Rodriguez Villegas &
    Zagier 2000, Algorithm 1); error <= 2 a_0 / (3 + sqrt 8)^n for moment sequences a_k."""
    d = (3.0 + math.sqrt(8.0)) ** n
    d = (d + 1.0 / d) / 2.0
    b, c = -1.0, -d
    weights = np.empty(n)
    for k in range(n):
        c = b - c
        weights[k] = c / d
        b = (k + n) * (k - n) * b / ((k + 0.5) * (k + 1.0))
    return weights


_CRVZ_TERMS = 30
_CRVZ_WEIGHTS = _crvz_weights(_CRVZ_TERMS)
_CRVZ_REL_ERROR = 2.0 / (3.0 + math.sqrt(8.0)) ** _CRVZ_TERMS
#: The series is used when its estimated error in log(A) is below this fraction of log(A).
_SERIES_MAX_REL_ERROR = 1e-11


def _log_alternating_sums(log_terms: np.ndarray) -> np.ndarray:
    """Row-wise ``log sum_k (-1)^k a_k`` for decreasing moment sequences ``a = exp(log_terms)``
    (the sum lies in [a_0 / 2, a_0], so it is positive and well conditioned)."""
    top = log_terms[:, 0]
    safe = np.where(np.isfinite(top), top, 0.0)
    # overflow (terms that are not a decreasing moment sequence, tiny noise) gives NaN, which
    # the caller treats as an unreliable series
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        total = np.exp(log_terms - safe[:, None]) @ _CRVZ_WEIGHTS
        return np.where(np.isfinite(top), safe + np.log(total), -np.inf)


# --------------------------------------------------------------------------------------------
# Sampled Gaussian: log(A_alpha - 1)
# --------------------------------------------------------------------------------------------


def _log_binom(alpha: np.ndarray | float, i: np.ndarray) -> np.ndarray:
    """``log|C(alpha, i)|`` (gammaln returns log|Gamma| at negative non-integers)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_top = special.gammaln(alpha + 1.0)
        return log_top - special.gammaln(i + 1.0) - special.gammaln(alpha - i + 1.0)


def _log_a_minus_1_int(q: float, sigma: float, alphas: np.ndarray) -> np.ndarray:
    """``log(A_alpha - 1)`` at integer orders (vectorised), for 0 < q < 1:
    ``A - 1 = sum_{i=2}^{alpha} C(alpha,i) (1-q)^(alpha-i) q^i expm1((i^2-i)/(2 sigma^2))``,
    a sum of positive terms (the i = 0, 1 terms of the binomial identity cancel the 1)."""
    a = np.asarray(alphas, dtype=float)[:, None]
    i = np.arange(2.0, float(np.max(alphas)) + 1.0)[None, :]
    valid = i <= a
    terms = (
        _log_binom(a, i)
        + i * math.log(q)
        + (a - i) * math.log1p(-q)
        + _log_abs_expm1((i * i - i) / (2.0 * sigma * sigma))
    )
    return logsumexp(np.where(valid, terms, -np.inf), axis=1)


def _log_a_minus_1_series(
    q: float, sigma: float, alphas: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(log(A - 1), estimated |error of log A| / log A)`` at fractional orders (vectorised).

    The MTZ 2019 Sec. 3.3 series with signed coefficients: ``A = sum_i C(alpha, i) (a_i + b_i)``,
    ``a_i = (1-q)^(alpha-i) q^i e^{(i^2-i)/(2 s^2)} Phi((z0 - i)/s)``, ``b_i`` the same with
    ``i -> j = alpha - i``, ``q <-> 1-q`` and ``Phi((j - z0)/s)``; ``z0 = s^2 log(1/q-1) + 1/2``.
    ``1 = sum_i C(alpha,i) w_i`` (``w_i = (1-q)^(alpha-i) q^i``, converging for q <= 1/2; the
    mirrored ``v_i = q^(alpha-i) (1-q)^i`` for q > 1/2) is subtracted term by term. Terms
    ``i <= floor(alpha) + 1`` have positive coefficients and are summed directly; the rest
    alternate and form moment sequences, summed by CRVZ acceleration. The error estimate is
    rounding (64 ulp per term, plus the absolute error of each term's logarithm) amplified by
    the cancellation of the signed sum, plus the CRVZ truncation bound; it is ``inf`` when the
    sum is not positive.
    """
    alphas = np.asarray(alphas, dtype=float)
    s2 = sigma * sigma
    lq, l1q = math.log(q), math.log1p(-q)
    z0 = s2 * (l1q - lq) + 0.5
    a = alphas[:, None]
    first_negative = np.floor(alphas) + 2.0  # C(alpha, i) > 0 exactly for i < first_negative

    # Direct terms, i = 0 .. floor(alpha) + 1 (all coefficients positive).
    i = np.arange(float(np.max(first_negative)))[None, :]
    valid = i < first_negative[:, None]
    j = a - i
    log_c = np.where(valid, _log_binom(a, i), -np.inf)
    log_w = i * lq + j * l1q  # log (1-q)^(alpha-i) q^i
    log_v = j * lq + i * l1q  # log q^(alpha-i) (1-q)^i
    c_i = (i * i - i) / (2.0 * s2)
    c_j = (j * j - j) / (2.0 * s2)
    u_i = (z0 - i) / sigma
    u_j = (j - z0) / sigma
    ones = np.ones_like(log_c)
    if q <= 0.5:
        # w_i (M_i - 1), M_i - 1 = expm1(c_i) Phi(u_i) - Phi(-u_i); plus v_i N_i.
        parts = [
            (log_c + log_w + _log_abs_expm1(c_i) + special.log_ndtr(u_i), np.sign(c_i) * ones),
            (log_c + log_w + special.log_ndtr(-u_i), -ones),
            (log_c + log_v + c_j + special.log_ndtr(u_j), ones),
        ]
    else:
        # w_i M_i; plus v_i (N_i - 1), N_i - 1 = expm1(c_j) Phi(u_j) - Phi(-u_j).
        parts = [
            (log_c + log_w + c_i + special.log_ndtr(u_i), ones),
            (log_c + log_v + _log_abs_expm1(c_j) + special.log_ndtr(u_j), np.sign(c_j)),
            (log_c + log_v + special.log_ndtr(-u_j), -ones),
        ]

    # Alternating tail, i >= floor(alpha) + 2, where sign C(alpha, i) = (-1)^(i - floor(alpha) - 1).
    # |C(alpha, i)| = |sin(pi alpha)|/pi * B(i - alpha, alpha + 1), a_i, b_i and w_i (v_i) are
    # moment sequences in i, hence so are |C| (a + b) and |C| w; their alternating sums are
    # positive, so the tail contributes -T_ab + T_ref.
    k = first_negative[:, None] + np.arange(float(_CRVZ_TERMS))[None, :]
    jk = a - k
    log_ck = _log_binom(a, k)
    log_ak = k * lq + jk * l1q + (k * k - k) / (2.0 * s2) + special.log_ndtr((z0 - k) / sigma)
    log_bk = jk * lq + k * l1q + (jk * jk - jk) / (2.0 * s2) + special.log_ndtr((jk - z0) / sigma)
    tail_ab = _log_alternating_sums(log_ck + np.logaddexp(log_ak, log_bk))
    log_ref = k * lq + jk * l1q if q <= 0.5 else jk * lq + k * l1q
    tail_ref = _log_alternating_sums(log_ck + log_ref)

    logs = np.concatenate([p[0] for p in parts] + [tail_ab[:, None], tail_ref[:, None]], axis=1)
    signs = np.concatenate(
        [p[1] for p in parts] + [-np.ones((len(alphas), 1)), np.ones((len(alphas), 1))], axis=1
    )
    keep = np.isfinite(logs) & (signs != 0)
    logs = np.where(keep, logs, -np.inf)
    top = np.max(logs, axis=1)
    scaled = np.exp(logs - top[:, None])
    total = np.sum(signs * scaled, axis=1)
    # absolute rounding error of each term: 64 ulp + ulp * |its log| (+ the gammaln terms)
    ulp = np.finfo(float).eps
    weight = 64.0 + np.where(keep, np.abs(logs), 0.0) + 3.0 * special.gammaln(alphas + 1.0)[:, None]
    rounding = ulp * np.sum(scaled * weight, axis=1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        value = top + np.log(np.abs(total))
        rel_am1 = rounding / np.abs(total) + _CRVZ_REL_ERROR * np.exp(
            np.maximum(tail_ab, tail_ref) - value
        )
        log_a = np.logaddexp(0.0, value)
        error = rel_am1 * np.exp(value - log_a) / log_a
    # a NaN tail (its terms overflowed) would be dropped by ``keep`` above: never trust it
    bad = ~(total > 0) | ~np.isfinite(value) | np.isnan(tail_ab) | np.isnan(tail_ref)
    return np.where(bad, np.nan, value), np.where(bad, np.inf, error)


def _make_log_integrand(q: float, sigma: float, alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> log(phi_sigma(x) f(L(x)))`` with ``L(x) = 1 + q expm1((2x - 1) / (2 sigma^2))``
    and ``f(L) = L^alpha - 1 - alpha (L - 1) >= 0``, accurate for ``L`` near 1 (series)."""
    lq, l1q = math.log(q), math.log1p(-q)
    s2 = sigma * sigma
    # f(1 + u) = sum_{k>=2} C(alpha, k) u^k; coefficients C(alpha, k), k = 2 .. 31
    ratios = (alpha - np.arange(2.0, 31.0)) / np.arange(3.0, 32.0)
    coeffs = np.cumprod(np.concatenate([[alpha * (alpha - 1.0) / 2.0], ratios]))
    log_norm = -0.5 * math.log(2.0 * math.pi) - math.log(sigma)
    log_alpha = math.log(alpha)

    @np.errstate(divide="ignore", over="ignore", invalid="ignore")
    def log_integrand(x: np.ndarray) -> np.ndarray:
        x = np.atleast_1d(np.asarray(x, dtype=float))
        y = (2.0 * x - 1.0) / (2.0 * s2)
        u = q * np.expm1(np.minimum(y, 700.0))  # L - 1 (only used where it is moderate)
        log_l = np.logaddexp(l1q, lq + y)  # log L
        out = np.empty(x.shape)
        small = alpha * np.abs(u) <= 0.05
        pos = ~small & (y > 0)
        neg = ~small & (y <= 0)
        if small.any():
            us = u[small]
            out[small] = 2.0 * np.log(np.abs(us)) + np.log(np.polyval(coeffs[::-1], us))
        if pos.any():
            yp = y[pos]
            log_u = lq + yp + np.log(-np.expm1(-yp))
            log_1_au = np.logaddexp(0.0, log_alpha + log_u)
            ll = alpha * log_l[pos]
            out[pos] = ll + np.log(-np.expm1(log_1_au - ll))
        if neg.any():
            out[neg] = np.log(np.exp(alpha * log_l[neg]) - 1.0 - alpha * u[neg])
        return log_norm - x * x / (2.0 * s2) + out

    return log_integrand


_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


def _windows(centres: list[float], half_width: float) -> list[tuple[float, float]]:
    """The union of ``[c - half_width, c + half_width]`` over ``centres``, as disjoint
    intervals in increasing order."""
    merged: list[list[float]] = []
    for c in sorted(centres):
        if merged and c - half_width <= merged[-1][1]:
            merged[-1][1] = c + half_width
        else:
            merged.append([c - half_width, c + half_width])
    return [(a, b) for a, b in merged]


def _log_a_minus_1_quad(q: float, sigma: float, alpha: float) -> float:
    """``log(A_alpha - 1)`` by quadrature of ``E[f(L)]``, ``f(L) = L^a - 1 - a (L - 1) >= 0``.

    ``f >= 0`` (convexity), so there is no cancellation. The integrand is below a sum of
    Gaussian bumps of width sigma centred at 0, 1 and alpha (``f(L) <= a`` for ``L < 1``,
    ``f(L) <= L^a`` above, and ``phi_s(x) L^a`` is a tilted Gaussian centred at alpha beyond the
    crossover z0 = sigma^2 log(1/q - 1) + 1/2), so it is integrated over the windows of
    +-40 sigma around 0, 1, 2, alpha and z0 (merged where they overlap: a single interval unless
    sigma is small next to the distances between those points). On each window the
    log-integrand is evaluated on a grid (spacing <= sigma/4), scaled by the overall maximum,
    and the range within e^-90 of that maximum is integrated with composite 16-point
    Gauss-Legendre, doubling the panels until two estimates agree to 1e-13 (scipy's adaptive
    ``quad`` as a last resort). The windows keep the grid fine for any sigma (a single grid over
    [0, alpha] cannot resolve bumps of width 1e-10).
    """
    log_g = _make_log_integrand(q, sigma, alpha)
    z0 = sigma * sigma * (math.log1p(-q) - math.log(q)) + 0.5
    centres = [0.0, 1.0, 2.0, alpha, z0]
    grids = []
    for lo, hi in _windows(centres, 40.0 * sigma):
        n = int(min(max(4001.0, 4.0 * (hi - lo) / sigma), 400001.0))
        grid = np.linspace(lo, hi, n)
        grids.append((grid, log_g(grid)))
    peak = max(float(np.max(values)) for _, values in grids)
    if not math.isfinite(peak):
        raise AccountingLimitError(
            f"the rdp accountant cannot evaluate order {alpha:g} at noise_multiplier = "
            f"{sigma:g}, sampling_rate = {q:g} (its integrand is {peak}); use other orders"
        )

    def integrand(x: np.ndarray) -> np.ndarray:
        return np.exp(log_g(x) - peak)

    total = 0.0
    for grid, values in grids:
        inside = np.nonzero(values >= peak - 90.0)[0]
        if inside.size == 0:
            continue  # below e^-90 of the peak everywhere on this window
        n = grid.size
        a = float(grid[max(int(inside[0]) - 1, 0)])
        b = float(grid[min(int(inside[-1]) + 1, n - 1)])
        total += _integrate_window(integrand, a, b, sigma, [c for c in centres if a < c < b])
    if not total > 0.0:
        raise AccountingLimitError(  # pragma: no cover - the peak's own window is positive
            f"the rdp accountant cannot evaluate order {alpha:g} at noise_multiplier = "
            f"{sigma:g}, sampling_rate = {q:g} (quadrature gave {total}); use other orders"
        )
    return peak + math.log(total)


def _integrate_window(
    integrand: Callable[[np.ndarray], np.ndarray],
    a: float,
    b: float,
    sigma: float,
    points: list[float],
) -> float:
    """Integral of ``integrand`` over [a, b]: composite 16-point Gauss-Legendre with panels
    doubled until two estimates agree to 1e-13, scipy's adaptive ``quad`` as a last resort."""
    panels = max(16, int(math.ceil(2.0 * (b - a) / sigma)))
    previous = math.nan
    while panels <= 2**15:
        edges = np.linspace(a, b, panels + 1)
        half = (edges[1:] - edges[:-1]) / 2.0
        mid = (edges[1:] + edges[:-1]) / 2.0
        nodes = (mid[:, None] + half[:, None] * _GL_NODES[None, :]).ravel()
        total = float(np.sum((half[:, None] * _GL_WEIGHTS[None, :]).ravel() * integrand(nodes)))
        if abs(total - previous) <= 1e-13 * total:
            return total
        previous = total
        panels *= 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        total, _ = integrate.quad(
            lambda x: float(integrand(x)[0]),
            a,
            b,
            epsabs=0.0,
            epsrel=1e-12,
            limit=500,
            points=points or None,
        )
    return total


#: Above this noise multiplier the sampled-Gaussian RDP is bounded by the unsubsampled
#: ``alpha / (2 z^2) < 1e-280`` (the series and quadrature need ``z^2``, which overflows).
_HUGE_NOISE = 1e140

#: Orders whose rdp is known to this relative width without computing it use that value
#: (:func:`_log_a`, tiny noise); the regimes below are accurate to about this.
_GAUSSIAN_LIMIT_REL_WIDTH = 1e-12

#: Integer and series evaluations build (orders x terms) arrays, terms ~ the largest order; the
#: orders are evaluated in groups so that an array holds at most this many entries (~32 MB).
_MAX_TABLE_ENTRIES = 1 << 22


def _order_groups(alphas: np.ndarray) -> list[np.ndarray]:
    """Indices of ``alphas`` in groups of increasing order whose (size x largest order) stays
    within :data:`_MAX_TABLE_ENTRIES` (a single large order is a group of its own)."""
    groups: list[list[int]] = []
    for index in np.argsort(alphas, kind="stable"):
        width = float(alphas[index]) + 3.0
        if groups and (len(groups[-1]) + 1) * width <= _MAX_TABLE_ENTRIES:
            groups[-1].append(int(index))
        else:
            groups.append([int(index)])
    return [np.array(group, dtype=int) for group in groups]


def _log_a(q: float, sigma: float, alphas: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``(log A_alpha, regime per order)`` for the Poisson-sampled Gaussian, 0 < q < 1."""
    alphas = np.asarray(alphas, dtype=float)
    log_a = np.empty(alphas.shape)
    regimes = ["series"] * len(alphas)
    integer = np.array([float(a).is_integer() for a in alphas], dtype=bool)
    # Tiny noise: alpha/(2 s^2) + alpha log(q)/(alpha - 1) <= rdp <= alpha/(2 s^2) (the lower end
    # from A >= E[(q r)^alpha], the upper by quasi-convexity); where the bracket is narrower than
    # the accuracy the other regimes reach (1e-12 relative), the upper end is the answer.
    limit = 2.0 * sigma * sigma * abs(math.log(q)) <= _GAUSSIAN_LIMIT_REL_WIDTH * (alphas - 1.0)
    with np.errstate(over="ignore", divide="ignore"):
        log_a[limit] = alphas[limit] * (alphas[limit] - 1.0) / (2.0 * sigma * sigma)
    for n in np.nonzero(limit)[0]:
        regimes[n] = "gaussian-limit"
    integer &= ~limit
    integers = np.nonzero(integer)[0]
    for group in _order_groups(alphas[integers]):
        chosen = integers[group]
        log_a[chosen] = np.logaddexp(0.0, _log_a_minus_1_int(q, sigma, alphas[chosen]))
        for n in chosen:
            regimes[n] = "integer"
    fractionals = np.nonzero(~integer & ~limit)[0]
    for group in _order_groups(alphas[fractionals]):
        chosen = fractionals[group]
        values, errors = _log_a_minus_1_series(q, sigma, alphas[chosen])
        for n, value, error in zip(chosen, values, errors, strict=True):
            if not error <= _SERIES_MAX_REL_ERROR:  # NaN (an overflowed estimate) included
                value = _log_a_minus_1_quad(q, sigma, float(alphas[n]))
                regimes[n] = "quadrature"
            log_a[n] = np.logaddexp(0.0, value)
    return log_a, regimes


# --------------------------------------------------------------------------------------------
# Public per-mechanism RDP curves
# --------------------------------------------------------------------------------------------


def rdp_poisson_gaussian(
    orders: Sequence[float] | np.ndarray, sampling_rate: float, noise_multiplier: float
) -> np.ndarray:
    """RDP of ONE Poisson-subsampled Gaussian step under add/remove neighbours.

    ``rdp(alpha) = log(A_alpha) / (alpha - 1)`` with
    ``A_alpha = E_{x~N(0,z^2)}[((1-q) + q exp((2x-1)/(2 z^2)))^alpha]`` (Mironov, Talwar &
    Zhang 2019, Sec. 3). This is ``D_alpha(mu || mu0)``; MTZ 2019 (Sec. 3) show it dominates
    ``D_alpha(mu0 || mu)``, so it is the max over both directions, i.e. the add/remove RDP.
    Exact at integer and fractional orders (see the module docstring for the three regimes);
    ``q = 1`` gives the plain Gaussian ``alpha / (2 z^2)``.

    Parameters
    ----------
    orders : 1-D sequence of orders > 1 (results are returned in the same order).
    sampling_rate : q in (0, 1], the Poisson inclusion probability.
    noise_multiplier : z > 0, noise std / L2 sensitivity.
    """
    alphas = _orders_array(orders)
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    if q == 1.0:
        with np.errstate(over="ignore", divide="ignore"):  # inf beyond the float range
            return alphas / (2.0 * z * z)
    _check_subsampled_orders(alphas)
    if z > _HUGE_NOISE:
        # z^2 overflows the float range: the unsubsampled alpha / (2 z^2) (an upper bound, by
        # quasi-convexity) is below 1e-280, kept at least the smallest positive float
        return np.maximum(alphas / (2.0 * z) / z, np.nextafter(0.0, 1.0))
    return _log_a(q, z, alphas)[0] / (alphas - 1.0)


def rdp_gaussian(
    orders: Sequence[float] | np.ndarray, noise_multiplier: float, sensitivity: float = 1.0
) -> np.ndarray:
    """RDP of the Gaussian mechanism: ``alpha * s^2 / (2 z^2)`` (Mironov 2017, Prop. 7).

    ``noise_multiplier`` z is noise std / C and ``sensitivity`` s the L2 sensitivity in units
    of C (1 for add/remove, 2 for replace-one under the library's conventions).
    """
    alphas = _orders_array(orders)
    z = check_positive("noise_multiplier", noise_multiplier)
    s = check_positive("sensitivity", sensitivity)
    with np.errstate(over="ignore", divide="ignore"):  # inf beyond the float range
        return alphas * s * s / (2.0 * z * z)


def rdp_laplace(orders: Sequence[float] | np.ndarray, scale: float) -> np.ndarray:
    """RDP of the Laplace mechanism with scale b relative to L1 sensitivity 1 (Mironov 2017,
    Prop. 6): ``(1/(a-1)) log( a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b} )``.

    Evaluated as ``log1p(N / (2a - 1)) / (a - 1)`` with
    ``N = a g((a-1)/b) + (a-1) g(-a/b)``, ``g(x) = expm1(x) - x >= 0``: no cancellation, so
    the result keeps full relative accuracy even for very large b.
    """
    alphas = _orders_array(orders)
    b = check_positive("scale", scale)
    out = np.empty(alphas.shape)
    for n, a in enumerate(alphas):
        with np.errstate(over="ignore"):  # (a - 1)/b = inf for the tiniest b: rdp is inf
            log_n = np.logaddexp(
                math.log(a) + _log_expm1_minus_x((a - 1.0) / b),
                math.log(a - 1.0) + _log_expm1_minus_x(-a / b),
            )
        out[n] = float(np.logaddexp(0.0, log_n - math.log(2.0 * a - 1.0))) / (a - 1.0)
    return out


def rdp_without_replacement(
    orders: Sequence[float] | np.ndarray,
    sampling_rate: float,
    base_rdp: Callable[[float], float],
    *,
    base_rdp_inf: float = math.inf,
) -> np.ndarray:
    """Upper bound on the RDP of a mechanism run on a uniformly random fixed-size subset drawn
    without replacement (replace-one neighbours); Wang, Balle & Kasiviswanathan 2019
    (AISTATS, "Subsampled Renyi DP and analytical moments accountant"), Theorem 9.

    For integer ``alpha >= 2``, with ``g = sampling_rate`` (= m/n) and ``e(.) = base_rdp``::

        rdp'(alpha) <= 1/(alpha-1) log( 1 + g^2 C(alpha,2) min{4 (e^{e(2)} - 1),
                                                 e^{e(2)} min{2, (e^{e(inf)} - 1)^2}}
                        + sum_{j=3}^{alpha} g^j C(alpha,j) e^{(j-1) e(j)} min{2, (e^{e(inf)}-1)^j} )

    ``base_rdp_inf`` is ``e(inf)`` (infinite for the Gaussian, so each ``min{2, .}`` is 2).
    A fractional order uses the bound at ``ceil(alpha)`` (valid: Renyi divergence is
    non-decreasing in the order). ``g = 1`` returns ``base_rdp`` itself.

    Parameters
    ----------
    orders : 1-D sequence of orders > 1.
    sampling_rate : g in (0, 1].
    base_rdp : callable order -> RDP of the base mechanism under replace-one neighbours
        (for the Gaussian with multiplier z: ``lambda a: 2 * a / z**2``, sensitivity 2C).
    base_rdp_inf : the base mechanism's RDP at order infinity (>= 0, may be ``inf``).
    """
    alphas = _orders_array(orders)
    g = check_rate("sampling_rate", sampling_rate)
    if not callable(base_rdp):
        raise ValueError(f"base_rdp = {base_rdp!r} is not allowed: must be a callable order -> RDP")
    if not (isinstance(base_rdp_inf, (int, float)) and base_rdp_inf == math.inf):
        base_rdp_inf = check_nonnegative("base_rdp_inf", base_rdp_inf)

    def base(order: float) -> float:
        value = base_rdp(order)
        try:
            value = float(value)
        except (TypeError, ValueError) as error:
            raise ValueError(f"base_rdp({order:g}) = {value!r} is not a number") from error
        if math.isnan(value) or value < 0:
            raise ValueError(
                f"base_rdp({order:g}) = {value!r} is out of range: must be in [0, inf]"
            )
        return value

    if g == 1.0:
        return np.array([base(float(a)) for a in alphas])
    _check_subsampled_orders(alphas)
    top = int(math.ceil(float(alphas.max())))
    top = max(top, 2)
    base_values = {j: base(float(j)) for j in range(2, top + 1)}
    # log min{2, (e^{e(inf)} - 1)^j}
    if base_rdp_inf == math.inf:
        log_exp_inf_m1 = math.inf
    else:
        log_exp_inf_m1 = float(_log_abs_expm1(np.array([base_rdp_inf]))[0])

    def log_cap(power: int) -> float:
        return min(math.log(2.0), power * log_exp_inf_m1)

    out = np.empty(alphas.shape)
    cache: dict[int, float] = {}
    for n, a in enumerate(alphas):
        order = max(int(math.ceil(a)), 2)
        if order not in cache:
            e2 = base_values[2]
            log_second = min(
                math.log(4.0) + float(_log_abs_expm1(np.array([e2]))[0]),
                e2 + log_cap(2),
            )
            terms = [2 * math.log(g) + math.log(order * (order - 1) / 2.0) + log_second]
            if order >= 3:
                js = np.arange(3, order + 1, dtype=float)
                ej = np.array([base_values[int(j)] for j in js])
                caps = np.array([log_cap(int(j)) for j in js])
                terms.extend(js * math.log(g) + _log_binom(float(order), js) + (js - 1) * ej + caps)
            log_sum = logsumexp(np.array(terms))
            cache[order] = float(np.logaddexp(0.0, log_sum)) / (order - 1.0)
        out[n] = cache[order]
    return out


# --------------------------------------------------------------------------------------------
# Sampling without replacement, Gaussian-specific bound (WBK 2019, Theorem 27)
# --------------------------------------------------------------------------------------------

#: Orders up to this use the full Theorem 27 bound (as dp-accounting's ``max_alpha``); above
#: it every ``j >= 3`` term is the Theorem 9 term (still a valid upper bound, O(alpha) terms).
WOR_GAUSSIAN_EXACT_MAX_ORDER = 256
#: A floating-point forward difference ``P_l - N_l`` (positive / negative parts of the
#: alternating sum) is kept when ``N_l <= 0.9 P_l`` (cancellation <= 19x); every even order up
#: to the largest that fails is recomputed exactly in integer arithmetic.
_FD_FLOAT_MAX_RATIO = 0.9
#: Relative error target of the integer forward differences: 2^-70 (about 1e-21).
_FD_GUARD_BITS = 70


def _log_forward_diffs_float(c: float, m: int) -> tuple[np.ndarray, int]:
    """``(log Delta^l g(0) for l = 0..m (even l; NaN at odd l), largest unreliable l)``.

    ``Delta^l g(0) = P_l - N_l`` with ``P_l`` (``N_l``) the log-space sum of ``C(l,i) g(i)``
    over ``l - i`` even (odd). An even ``l >= 4`` is unreliable when ``N_l > 0.9 P_l`` (the
    difference cancels by more than 19x); the caller recomputes every ``l`` up to the largest
    such one exactly (0 if there is none). ``l = 2`` is ``log expm1(2c)`` directly.
    """
    out = np.full(m + 1, np.nan)
    out[0] = 0.0
    ls = np.arange(2.0, m + 1.0, 2.0)
    if ls.size == 0:
        return out, 0
    i = np.arange(m + 1.0)[None, :]
    lcol = ls[:, None]
    log_terms = np.where(i <= lcol, _log_binom(lcol, i) + c * i * (i - 1.0), -np.inf)
    positive = (lcol - i) % 2.0 == 0.0
    log_p = logsumexp(np.where(positive, log_terms, -np.inf), axis=1)
    log_n = logsumexp(np.where(positive, -np.inf, log_terms), axis=1)
    ratio = log_n - log_p
    with np.errstate(divide="ignore", invalid="ignore"):
        out[2::2] = log_p + np.log(-np.expm1(np.minimum(ratio, 0.0)))
    out[2] = float(_log_abs_expm1(np.array([2.0 * c]))[0])  # Delta^2 g(0) = e^{2c} - 1
    bad = np.nonzero(ratio[1:] > math.log(_FD_FLOAT_MAX_RATIO))[0]
    return out, (int(2 * (bad[-1] + 2)) if bad.size else 0)


def _fixed_point_exp(x: float, bits: int) -> int:
    """``exp(x) 2^bits`` rounded down, within 2 units, for a float ``x >= 0`` (Taylor series in
    integer arithmetic on the exact binary value of x; each truncation costs < 1 unit)."""
    num, den = x.as_integer_ratio()  # den is a power of two
    work = bits + 32
    term = total = 1 << work
    k = 0
    while term:
        k += 1
        term = term * num // (den * k)
        total += term
    return total >> 32


def _log_forward_diffs_exact(c: float, m: int) -> np.ndarray:
    """``log Delta^l g(0)`` for even ``l <= m`` with ``g(i) = e^{c i (i-1)}``, computed in exact
    integer arithmetic on fixed-point values of ``g(i)`` (``c`` is taken as the exact binary
    value of the float). Used where the floating-point sums cancel, i.e. small ``c``.

    ``G_i ~ g(i) 2^W`` comes from ``g(i+1) = g(i) r^i``, ``r = e^{2c}`` (each of ``r``, ``r^k``
    and ``G_i`` truncated to an integer); its relative error is below ``2 (i^2 + 2) 2^-W``, so
    the exact integer difference table has absolute error below ``2^(l+1) (l^2 + 2) g(l)``
    units. ``W`` is chosen so that this is ``2^-70`` of the lower bound
    ``Delta^l g(0) = E[(L - 1)^l] >= E[(L - 1)^2]^(l/2) = (e^{2c} - 1)^(l/2)`` (Lyapunov), and
    the bound is re-checked against the computed value (W doubles if it ever fails).
    """
    out = np.full(m + 1, np.nan)
    out[0] = 0.0
    log2_e2m1 = float(_log_abs_expm1(np.array([2.0 * c]))[0]) / math.log(2.0)
    need = 0.0
    for ell in range(2, m + 1, 2):
        need = max(
            need,
            ell
            + 2.0 * math.log2(ell + 2.0)
            + c * ell * (ell - 1.0) / math.log(2.0)
            - 0.5 * ell * log2_e2m1,
        )
    width = int(math.ceil(need)) + _FD_GUARD_BITS + 16
    while True:
        one = 1 << width
        r = _fixed_point_exp(2.0 * c, width)
        values = [one, one]
        ratio = r
        for _ in range(2, m + 1):
            values.append(values[-1] * ratio >> width)
            ratio = ratio * r >> width
        table = values
        ok = True
        for ell in range(1, m + 1):
            table = [b - a for a, b in zip(table, table[1:], strict=False)]
            if ell % 2 == 0:
                bound = (values[ell] >> width) + 1  # g(ell), rounded up
                error = (bound * 2 * (ell * ell + 2)) << ell
                if table[0] <= error << _FD_GUARD_BITS:
                    ok = False
                    break
                out[ell] = math.log(table[0]) - width * math.log(2.0)
        if ok:
            out[2] = float(_log_abs_expm1(np.array([2.0 * c]))[0])
            return out
        width *= 2  # pragma: no cover - the Lyapunov bound makes this unreachable


@functools.lru_cache(maxsize=256)
def _log_forward_diffs(c: float, m: int) -> np.ndarray:
    """``log Delta^l g(0)`` (even ``l <= m``; NaN at odd l) for ``g(i) = e^{c i (i-1)}``, i.e. the
    Pearson-Vajda moments ``E_{mu0}[(mu1/mu0 - 1)^l]`` of ``mu0 = N(0, s^2)``,
    ``mu1 = N(1, s^2)``, ``c = 1/(2 s^2)``. Read-only, cached on ``(c, m)``."""
    if c == 0.0:
        out = np.full(m + 1, -np.inf)
        out[0] = 0.0
        out[1::2] = np.nan
    else:
        out, unreliable = _log_forward_diffs_float(c, m)
        if unreliable:
            exact = _log_forward_diffs_exact(c, unreliable)
            out[: unreliable + 1] = exact
    out.setflags(write=False)
    return out


def _wor_gaussian_log_a(q: float, c: float, alphas: np.ndarray) -> np.ndarray:
    """``log A_alpha`` (the CGF ``(alpha - 1) rdp(alpha)``) of the WBK19 Theorem 27 bound at
    integer orders >= 2, for base Gaussian RDP ``e(alpha) = c alpha``, 0 < q < 1."""
    alphas = np.asarray(alphas, dtype=float)
    out = np.empty(alphas.shape)
    log_q = math.log(q)
    log_e2m1 = float(_log_abs_expm1(np.array([2.0 * c]))[0])
    second = min(math.log(4.0) + log_e2m1, math.log(2.0) + 2.0 * c)  # the j = 2 term
    exact = alphas <= WOR_GAUSSIAN_EXACT_MAX_ORDER
    if exact.any():
        a = alphas[exact][:, None]
        n = int(np.max(alphas[exact]))
        diffs = _log_forward_diffs(c, 2 * ((n + 1) // 2))
        j = np.arange(2, n + 1)
        lo, hi = 2 * (j // 2), 2 * ((j + 1) // 2)
        jf = j.astype(float)
        moment = np.minimum(
            math.log(4.0) + 0.5 * (diffs[lo] + diffs[hi]),
            math.log(2.0) + c * jf * (jf - 1.0),
        )
        moment[0] = second
        terms = np.where(
            jf[None, :] <= a, (moment + jf * log_q)[None, :] + _log_binom(a, jf[None, :]), -np.inf
        )
        out[exact] = np.logaddexp(0.0, logsumexp(terms, axis=1))
    for k in np.nonzero(~exact)[0]:
        a = float(alphas[k])
        jf = np.arange(2.0, a + 1.0)
        moment = math.log(2.0) + c * jf * (jf - 1.0)
        moment[0] = second
        terms = moment + jf * log_q + _log_binom(a, jf)
        out[k] = np.logaddexp(0.0, logsumexp(terms))
    return out


def rdp_without_replacement_gaussian(
    orders: Sequence[float] | np.ndarray, sampling_rate: float, noise_multiplier: float
) -> np.ndarray:
    """RDP of ONE Gaussian step on a fixed-size batch drawn without replacement, replace-one
    neighbours: the Gaussian-specific bound of Wang, Balle & Kasiviswanathan 2019 (AISTATS,
    arXiv:1808.00087), Theorem 27 - the bound dp-accounting 0.6.0 computes in
    ``_compute_rdp_sample_wor_gaussian`` and autodp in
    ``compose_subsampled_mechanism(..., improved_bound_flag=True)``.

    **Setting and sensitivity convention.** WBK19 draw a subset of fixed size ``m = g n``
    uniformly without replacement from a dataset of public size ``n``; neighbouring datasets
    differ by *replacing* one record, and the base mechanism's RDP ``e(alpha)`` is with respect
    to that same replace-one relation on the subsets. Theorem 27 applies to base mechanisms with
    one pair of neighbouring inputs that is worst-case at every order (their Definition 26);
    the Gaussian mechanism ``f(S) + N(0, sigma^2 Delta^2)``, ``Delta`` the L2 sensitivity of
    ``f`` *under replace-one*, is such a mechanism with ``e(alpha) = alpha / (2 sigma^2)``.
    Here ``f(S)`` is the sum of the batch's contributions clipped to norm C and the noise is
    ``N(0, (z C)^2)``: replacing one record changes the sum by ``x - x'`` with
    ``||x - x'|| <= 2C`` (attained by antipodal clipped contributions), so ``Delta = 2C``,
    ``sigma = z C / (2C) = z / 2`` and the base RDP is ``e(alpha) = 2 alpha / z^2`` - the same
    as :func:`rdp_gaussian` with sensitivity 2 and the PLD accountant's ``C_q(G_{2/z})``.
    In dp-accounting's terms this is ``_compute_rdp_sample_wor_gaussian(q, z / 2, orders)``.

    **The bound.** With ``g(i) = e^{(i-1) e(i)} = e^{c i (i-1)}``, ``c = 2 / z^2``, and
    ``B_l = Delta^l g(0) = sum_i (-1)^(l-i) C(l,i) g(i)`` (the l-th forward difference; for
    the Gaussian pair ``mu0 = N(0, sigma^2)``, ``mu1 = N(1, sigma^2)`` it is the Pearson-Vajda
    moment ``E_{mu0}[(mu1/mu0 - 1)^l] >= 0`` at even l), at integer ``alpha >= 2``::

        (alpha-1) rdp(alpha) <= log(1 + sum_{j=2}^{alpha} q^j C(alpha, j) M_j),
        M_j = min{ 4 sqrt(B_{2 floor(j/2)} B_{2 ceil(j/2)}),  2 e^{(j-1) e(j)} }

    (odd j: Cauchy-Schwarz between the neighbouring even moments; ``j = 2``:
    ``M_2 = min{4 (e^{e(2)} - 1), 2 e^{e(2)}}``). This is the formula as dp-accounting and
    autodp (the first author's library) implement it - the two agree term by term. The second
    argument of each min is the generic Theorem 9 term (``e(inf) = inf``), so the bound is
    never above :func:`rdp_without_replacement` with the same base, and equals it at
    ``alpha <= 2`` (only the ``j = 2`` term), where small-q, small-z settings often have their
    optimal order. For ``alpha > 256`` (:data:`WOR_GAUSSIAN_EXACT_MAX_ORDER`) only the
    Theorem 9 terms are used for ``j >= 3``, as in dp-accounting (its comment speaks of a
    "Stirling approximation", but its code, like ours, sums the exact Theorem 9 terms: a valid,
    looser bound). A fractional order uses WBK19 Corollary 10: the CGF
    ``K(alpha) = (alpha-1) rdp(alpha)`` is convex, so
    ``K(alpha) <= (1-t) K(floor alpha) + t K(ceil alpha)``, ``t = alpha - floor alpha``, with
    ``K(1) = 0`` (orders in (1, 2) thus get ``rdp = K(2)``). ``q = 1`` returns ``2 alpha / z^2``.

    **Numerics.** Everything is summed in log space. The even forward differences ``B_l``
    (``l <= 256``) alternate and cancel badly at large noise: dp-accounting's log-space
    differencing loses about 8 digits at z = 10 and all of them from z ~ 40 on, which makes its
    result up to ~20x too large at high orders (z = 100, q = 0.5, alpha = 128). Here ``B_l``
    comes from log-space positive / negative parts when those cancel by less than 19x, and is
    otherwise computed exactly in integer arithmetic (relative error < 2^-70, checked against
    the lower bound ``B_l >= (e^{2c} - 1)^(l/2)``); against a 300-digit mpmath evaluation of the
    formula the result is within a few 1e-13 (relative). Cached per ``(c, max order)``.

    Parameters
    ----------
    orders : 1-D sequence of orders > 1 (results in the same order).
    sampling_rate : q = m / n in (0, 1], the fixed batch fraction.
    noise_multiplier : z > 0, noise std / clipping norm C (NOT / the replace-one sensitivity).
    """
    alphas = _orders_array(orders)
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    c = (2.0 / z) / z  # 1 / (2 sigma^2) with sigma = z / 2; inf below z ~ 1e-154
    if q == 1.0:
        with np.errstate(over="ignore", invalid="ignore"):
            return c * alphas
    _check_subsampled_orders(alphas)
    if math.isinf(c):  # z below ~1e-154: even one step's RDP exceeds the float range
        return np.full(alphas.shape, math.inf)
    lower = np.floor(alphas)
    upper = np.ceil(alphas)
    needed = np.unique(np.concatenate([lower, upper]))
    needed = needed[needed >= 2.0]
    cgf = dict(zip(needed.tolist(), _wor_gaussian_log_a(q, c, needed).tolist(), strict=True))
    cgf[1.0] = 0.0
    out = np.empty(alphas.shape)
    for k, a in enumerate(alphas):
        f, u = float(lower[k]), float(upper[k])
        if f == u:
            out[k] = cgf[f] / (a - 1.0)
        else:
            t = a - f
            out[k] = ((1.0 - t) * cgf[f] + t * cgf[u]) / (a - 1.0)
    return out


# --------------------------------------------------------------------------------------------
# RDP -> (epsilon, delta)
# --------------------------------------------------------------------------------------------


def _curve(orders: object, rdp: object) -> tuple[np.ndarray, np.ndarray]:
    alphas = _orders_array(orders)
    try:
        values = np.asarray(rdp, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"rdp = {rdp!r} is not a list of numbers") from error
    if values.shape != alphas.shape:
        raise ValueError(
            f"rdp has shape {values.shape} but orders has shape {alphas.shape}: they must match"
        )
    bad = values[np.isnan(values) | (values < 0)]
    if bad.size:
        raise ValueError(f"rdp = {float(bad[0])!r} is out of range: must be in [0, inf]")
    return alphas, values


def epsilon_from_rdp(
    orders: Sequence[float] | np.ndarray,
    rdp: Sequence[float] | np.ndarray,
    delta: float,
    conversion: str = "improved",
) -> tuple[float, float]:
    """Smallest epsilon over the orders such that the RDP curve implies (epsilon, delta)-DP.

    * ``"classic"`` (Mironov 2017, Prop. 3): ``eps = rdp(a) + log(1/delta) / (a - 1)``.
    * ``"improved"`` (Balle et al. 2020, arXiv:2001.05990; Canonne-Kamath-Steinke 2020,
      arXiv:2004.00010, Prop. 12):
      ``eps = rdp(a) + log((a-1)/a) - (log delta + log a) / (a - 1)``, clipped at 0; in addition
      ``eps = 0`` when ``delta^2 > 1 - exp(-rdp(a))``: ``D_1 = KL <= D_a`` and the
      Bretagnolle-Huber inequality give ``TV <= sqrt(1 - exp(-KL)) <= delta``, and TV is the
      delta at epsilon 0 (same rule as dp-accounting's ``compute_epsilon``).

    In both, ``rdp(a) = 0`` means the two output distributions are equal (``eps = 0``) and
    infinite values are skipped. Returns ``(epsilon, optimal order)``; ``(inf, nan)`` if every
    value is infinite.
    """
    alphas, values = _curve(orders, rdp)
    delta = check_delta("delta", delta)
    conversion = check_choice("conversion", conversion, CONVERSIONS)
    finite = np.isfinite(values)
    if not finite.any():
        return math.inf, math.nan
    a, r = alphas[finite], values[finite]
    if conversion == "classic":
        eps = r - math.log(delta) / (a - 1.0)
    else:
        eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
        eps = np.where(delta * delta + np.expm1(-r) > 0, 0.0, eps)
        eps = np.maximum(eps, 0.0)
    eps = np.where(r == 0, 0.0, eps)
    best = int(np.argmin(eps))
    return float(eps[best]), float(a[best])


def delta_from_rdp(
    orders: Sequence[float] | np.ndarray,
    rdp: Sequence[float] | np.ndarray,
    epsilon: float,
    conversion: str = "improved",
) -> tuple[float, float]:
    """Smallest delta over the orders such that the RDP curve implies (epsilon, delta)-DP.

    * ``"classic"`` (Mironov 2017): ``delta = exp((a - 1)(rdp(a) - eps))``.
    * ``"improved"`` (Balle et al. 2020, arXiv:2001.05990):
      ``log delta = (a - 1)(rdp(a) - eps + log((a-1)/a)) - log a``, and also
      ``delta <= sqrt(1 - exp(-rdp(a)))`` (KL <= D_a with Bretagnolle-Huber, as above).

    ``rdp(a) = 0`` gives delta 0; infinite values are skipped; delta is capped at 1. Returns
    ``(delta, optimal order)``; ``(1.0, nan)`` if every value is infinite.
    """
    alphas, values = _curve(orders, rdp)
    epsilon = check_epsilon("epsilon", epsilon)
    conversion = check_choice("conversion", conversion, CONVERSIONS)
    finite = np.isfinite(values)
    if not finite.any():
        return 1.0, math.nan
    a, r = alphas[finite], values[finite]
    if conversion == "classic":
        log_delta = (a - 1.0) * (r - epsilon)
    else:
        log_delta = (a - 1.0) * (r - epsilon + np.log1p(-1.0 / a)) - np.log(a)
        with np.errstate(divide="ignore"):
            log_kl = 0.5 * np.log(-np.expm1(-r))
        log_delta = np.minimum(log_delta, log_kl)
    log_delta = np.where(r == 0, -np.inf, log_delta)
    best = int(np.argmin(log_delta))
    return float(min(math.exp(log_delta[best]), 1.0)), float(a[best])


# --------------------------------------------------------------------------------------------
# Seed 2, Proposition 2 as printed
# --------------------------------------------------------------------------------------------


def seed2_proposition2_epsilon(
    noise_multiplier: float,
    batch_rate: float,
    user_rate: float,
    users_per_round: int,
    rounds: int,
    delta: float,
    orders: Sequence[float] | np.ndarray | None = None,
) -> tuple[float, float]:
    """Epsilon of seed 2's Proposition 2 (InsDP-FedSGD) exactly as printed (spec seed2 Sec. 3.3).

    ``eps = min_a  T rdp'(a) + log((a-1)/a) - (log delta + log a) / (a - 1)`` where ``rdp'`` is
    the Wang-Balle-Kasiviswanathan 2019 Theorem 9 bound (:func:`rdp_without_replacement`) at
    sampling rate ``p q`` with the base ``e(a) = a / (2 m sigma^2)`` (Gaussian RDP at multiplier
    ``sigma sqrt(m)``, sensitivity 1 as the paper prints it) and ``e(inf) = inf``. Orders are
    the integers 2 ... 256 unless given (the bound is for integer orders).

    This reproduces the paper's formula, NOT its Figure 9: for sigma = 3, p = 0.4, q = 10/30,
    m = 10, T = 200 it gives 3.9697 at delta = 1e-4 (order 4), while the figure's 0.87 matches
    the Poisson sampled-Gaussian accountant. Returns ``(epsilon, optimal order)``.
    """
    sigma = check_positive("noise_multiplier", noise_multiplier)
    p = check_rate("batch_rate", batch_rate)
    q = check_rate("user_rate", user_rate)
    m = check_int("users_per_round", users_per_round, minimum=1)
    t = check_int("rounds", rounds, minimum=0)
    delta = check_delta("delta", delta)
    alphas = np.arange(2.0, 257.0) if orders is None else _orders_array(orders)
    z = sigma * math.sqrt(m)
    per_round = rdp_without_replacement(alphas, p * q, lambda a: a / (2.0 * z * z))
    return epsilon_from_rdp(alphas, t * per_round, delta, conversion="improved")


# --------------------------------------------------------------------------------------------
# The accountant
# --------------------------------------------------------------------------------------------


def _unsupported_step(step: NoisyStep, neighbouring: Neighbouring) -> str | None:
    sampling = step.effective_sampling
    relation = neighbouring.value
    if step.noise is Noise.GAUSSIAN:
        if sampling is Sampling.NONE:
            return None
        if sampling is Sampling.POISSON and neighbouring is Neighbouring.ADD_REMOVE:
            return None
        if sampling is Sampling.WITHOUT_REPLACEMENT and neighbouring is Neighbouring.REPLACE_ONE:
            return None
        if sampling is Sampling.POISSON:
            return (
                f"Poisson sampling (q={step.sampling_rate:g}) with {relation} neighbours is not "
                "supported (the sampled-Gaussian RDP is for add-remove neighbours)"
            )
        return (
            f"sampling without replacement (q={step.sampling_rate:g}) with {relation} neighbours "
            "is not supported (fixed-size batches are accounted under replace-one neighbours)"
        )
    if step.noise is Noise.LAPLACE and sampling is Sampling.NONE:
        return None
    return (
        f"{step.noise.value} noise with {sampling.value} sampling (q={step.sampling_rate:g}) is "
        "not supported (Laplace noise is only accounted without subsampling)"
    )


@functools.lru_cache(maxsize=4096)
def _step_curve(
    step: NoisyStep, neighbouring: Neighbouring, orders: tuple[float, ...]
) -> np.ndarray:
    """Per-step RDP curve (read-only, cached on the frozen step and the orders tuple)."""
    z = step.noise_multiplier
    replace_one = neighbouring is Neighbouring.REPLACE_ONE
    sampling = step.effective_sampling
    if step.noise is Noise.LAPLACE:
        curve = rdp_laplace(orders, z / 2.0 if replace_one else z)
    elif sampling is Sampling.NONE:
        curve = rdp_gaussian(orders, z, 2.0 if replace_one else 1.0)
    elif sampling is Sampling.POISSON:
        curve = rdp_poisson_gaussian(orders, step.sampling_rate, z)
    else:  # Gaussian, without replacement, replace-one
        curve = rdp_without_replacement_gaussian(orders, step.sampling_rate, z)
    curve = np.asarray(curve, dtype=float)
    curve.setflags(write=False)
    return curve


class RdpAccountant(Accountant):
    """Renyi-DP accountant: sums ``count x per-step RDP`` over an event's steps, then converts.

    Supported steps (``step.effective_sampling``):

    * Gaussian, Poisson, add-remove - :func:`rdp_poisson_gaussian` (MTZ 2019);
    * Gaussian, no sampling - :func:`rdp_gaussian`, sensitivity 1 (add-remove) / 2 (replace-one);
    * Gaussian, without replacement, replace-one - :func:`rdp_without_replacement_gaussian`
      (WBK 2019 Thm. 27, the Gaussian-specific bound; base ``2 a / z^2``, i.e. sigma = z/2
      relative to the replace-one sensitivity 2C);
    * Laplace, no sampling - :func:`rdp_laplace` with scale ``z`` (add-remove) / ``z/2``
      (replace-one); z is the Laplace scale over the (L1) clipping norm.

    Anything else (Poisson sampling with replace-one neighbours, fixed-size sampling with
    add-remove neighbours, subsampled Laplace) is refused by :meth:`unsupported_reason` with a
    sentence naming the combination. Per-step curves are cached (``functools.lru_cache`` on the
    frozen step, the relation and the orders), so repeated :meth:`rdp_curve` calls are cheap.

    Parameters
    ----------
    orders : ``"default"``, ``"legacy"``, a comma list or a sequence (see :func:`resolve_orders`).
    conversion : ``"improved"`` (Balle et al. 2020, default) or ``"classic"`` (Mironov 2017).
    """

    name = "rdp"
    kind = "bound"

    def __init__(self, orders: str | Sequence[float] = "default", conversion: str = "improved"):
        self.orders: tuple[float, ...] = tuple(float(a) for a in resolve_orders(orders))
        self.conversion = check_choice("conversion", conversion, CONVERSIONS)

    @classmethod
    def from_options(cls, options: Any) -> RdpAccountant:
        """The accountant configured by an :class:`~privfl.accounting.methods.AccountingOptions`
        (its ``orders`` and ``conversion``)."""
        return cls(orders=options.orders, conversion=options.conversion)

    def unsupported_reason(self, event: PrivacyEvent) -> str | None:
        return self._first_step_reason(event, _unsupported_step)

    def rdp_curve(self, event: PrivacyEvent) -> np.ndarray:
        """Total RDP of the event at ``self.orders`` (a new, writable array)."""
        self._require_supported(event)
        total = np.zeros(len(self.orders))
        for step, count in event.steps:
            if count:
                total += count * _step_curve(step, event.neighbouring, self.orders)
        return total

    def _note(self, order: float) -> str:
        if math.isnan(order):
            return (
                "the RDP of this event exceeds the float range (about 1.8e308) at every order: "
                "no finite guarantee can be stated"
            )
        if order == max(self.orders):
            return (
                "the optimal order is the largest of the grid; a grid with larger orders may "
                "give a smaller epsilon"
            )
        if len(self.orders) > 1 and order == min(self.orders):
            return (
                "the optimal order is the smallest of the grid; a grid with orders closer to 1 "
                "may give a smaller epsilon"
            )
        return ""

    def _result(
        self, event: PrivacyEvent, epsilon: float, delta: float, order: float
    ) -> PrivacyResult:
        """The labelled result of a conversion whose optimal order is ``order``."""
        return PrivacyResult.for_event(
            event,
            method=self.name,
            kind=self.kind,
            epsilon=epsilon,
            delta=delta,
            note=self._note(order),
            order=order,
            conversion=self.conversion,
        )

    def _epsilon(self, event: PrivacyEvent, delta: float) -> PrivacyResult:
        curve = self.rdp_curve(event)
        epsilon, order = epsilon_from_rdp(self.orders, curve, delta, self.conversion)
        return self._result(event, epsilon, delta, order)

    def _delta(self, event: PrivacyEvent, epsilon: float) -> PrivacyResult:
        curve = self.rdp_curve(event)
        delta, order = delta_from_rdp(self.orders, curve, epsilon, self.conversion)
        return self._result(event, epsilon, delta, order)
