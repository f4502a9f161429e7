"""RDP of the Poisson-subsampled Gaussian (:func:`rdp_poisson_gaussian`).

One step releases ``sum of sampled clipped contributions + N(0, (z C)^2)``. Under add/remove
neighbours its RDP at order alpha is ``log(A_alpha) / (alpha - 1)`` with

    A_alpha = E_{x ~ N(0, z^2)} [ ((1 - q) + q exp((2x - 1) / (2 z^2)))^alpha ]

(Mironov, Talwar & Zhang 2019, "Renyi Differential Privacy of the Sampled Gaussian Mechanism",
Sec. 3; their sigma is the noise multiplier z). That is ``D_alpha(mu || mu0)`` with
mu0 = N(0, z^2), mu = (1-q) mu0 + q N(1, z^2);
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
  integrates over windows of +-40 z around 0, 1, 2, alpha and the crossover, so that it
  resolves the integrand for any z down to that regime.

Measured against mpmath quadrature at 30 digits (300 random cases, q in [1e-6, 1), z in
[0.2, 50], fractional alpha in (1, 30)): max relative error 2.4e-13 (series) and 7e-14
(quadrature).

dp-accounting 0.6.0 adds ``|C(alpha, i)|`` for every term, which over-estimates fractional
orders; Opacus 0.x / TF Privacy (which produced the seed-2 tables) kept the signs, as we do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special

from privfl._validation import check_positive, check_rate
from privfl.accounting.logspace import logsumexp
from privfl.accounting.rdp.log_terms import log_abs_expm1, log_binom
from privfl.accounting.rdp.orders import check_subsampled_orders, orders_array
from privfl.accounting.rdp.poisson_quadrature import log_a_minus_1_quad


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


def _log_a_minus_1_int(q: float, z: float, alphas: np.ndarray) -> np.ndarray:
    """``log(A_alpha - 1)`` at integer orders (vectorised), for 0 < q < 1:
    ``A - 1 = sum_{i=2}^{alpha} C(alpha,i) (1-q)^(alpha-i) q^i expm1((i^2-i)/(2 z^2))``,
    a sum of positive terms (the i = 0, 1 terms of the binomial identity cancel the 1)."""
    a = np.asarray(alphas, dtype=float)[:, None]
    i = np.arange(2.0, float(np.max(alphas)) + 1.0)[None, :]
    valid = i <= a
    terms = (
        log_binom(a, i)
        + i * math.log(q)
        + (a - i) * math.log1p(-q)
        + log_abs_expm1((i * i - i) / (2.0 * z * z))
    )
    return logsumexp(np.where(valid, terms, -np.inf), axis=1)


def _log_a_minus_1_series(
    q: float, z: float, alphas: np.ndarray
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
    s2 = z * z
    lq, l1q = math.log(q), math.log1p(-q)
    z0 = s2 * (l1q - lq) + 0.5
    a = alphas[:, None]
    first_negative = np.floor(alphas) + 2.0  # C(alpha, i) > 0 exactly for i < first_negative

    # Direct terms, i = 0 .. floor(alpha) + 1 (all coefficients positive).
    i = np.arange(float(np.max(first_negative)))[None, :]
    valid = i < first_negative[:, None]
    j = a - i
    log_c = np.where(valid, log_binom(a, i), -np.inf)
    log_w = i * lq + j * l1q  # log (1-q)^(alpha-i) q^i
    log_v = j * lq + i * l1q  # log q^(alpha-i) (1-q)^i
    c_i = (i * i - i) / (2.0 * s2)
    c_j = (j * j - j) / (2.0 * s2)
    u_i = (z0 - i) / z
    u_j = (j - z0) / z
    ones = np.ones_like(log_c)
    if q <= 0.5:
        # w_i (M_i - 1), M_i - 1 = expm1(c_i) Phi(u_i) - Phi(-u_i); plus v_i N_i.
        parts = [
            (log_c + log_w + log_abs_expm1(c_i) + special.log_ndtr(u_i), np.sign(c_i) * ones),
            (log_c + log_w + special.log_ndtr(-u_i), -ones),
            (log_c + log_v + c_j + special.log_ndtr(u_j), ones),
        ]
    else:
        # w_i M_i; plus v_i (N_i - 1), N_i - 1 = expm1(c_j) Phi(u_j) - Phi(-u_j).
        parts = [
            (log_c + log_w + c_i + special.log_ndtr(u_i), ones),
            (log_c + log_v + log_abs_expm1(c_j) + special.log_ndtr(u_j), np.sign(c_j)),
            (log_c + log_v + special.log_ndtr(-u_j), -ones),
        ]

    # Alternating tail, i >= floor(alpha) + 2, where sign C(alpha, i) = (-1)^(i - floor(alpha) - 1).
    # |C(alpha, i)| = |sin(pi alpha)|/pi * B(i - alpha, alpha + 1), a_i, b_i and w_i (v_i) are
    # moment sequences in i, hence so are |C| (a + b) and |C| w; their alternating sums are
    # positive, so the tail contributes -T_ab + T_ref.
    k = first_negative[:, None] + np.arange(float(_CRVZ_TERMS))[None, :]
    jk = a - k
    log_ck = log_binom(a, k)
    log_ak = k * lq + jk * l1q + (k * k - k) / (2.0 * s2) + special.log_ndtr((z0 - k) / z)
    log_bk = jk * lq + k * l1q + (jk * jk - jk) / (2.0 * s2) + special.log_ndtr((jk - z0) / z)
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


def _log_a(q: float, z: float, alphas: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``(log A_alpha, regime per order)`` for the Poisson-sampled Gaussian, 0 < q < 1."""
    alphas = np.asarray(alphas, dtype=float)
    log_a = np.empty(alphas.shape)
    regimes = ["series"] * len(alphas)
    integer = np.array([float(a).is_integer() for a in alphas], dtype=bool)
    # Tiny noise: alpha/(2 s^2) + alpha log(q)/(alpha - 1) <= rdp <= alpha/(2 s^2) (the lower end
    # from A >= E[(q r)^alpha], the upper by quasi-convexity); where the bracket is narrower than
    # the accuracy the other regimes reach (1e-12 relative), the upper end is the answer.
    limit = 2.0 * z * z * abs(math.log(q)) <= _GAUSSIAN_LIMIT_REL_WIDTH * (alphas - 1.0)
    with np.errstate(over="ignore", divide="ignore"):
        log_a[limit] = alphas[limit] * (alphas[limit] - 1.0) / (2.0 * z * z)
    for n in np.nonzero(limit)[0]:
        regimes[n] = "gaussian-limit"
    integer &= ~limit
    integers = np.nonzero(integer)[0]
    for group in _order_groups(alphas[integers]):
        chosen = integers[group]
        log_a[chosen] = np.logaddexp(0.0, _log_a_minus_1_int(q, z, alphas[chosen]))
        for n in chosen:
            regimes[n] = "integer"
    fractionals = np.nonzero(~integer & ~limit)[0]
    for group in _order_groups(alphas[fractionals]):
        chosen = fractionals[group]
        values, errors = _log_a_minus_1_series(q, z, alphas[chosen])
        for n, value, error in zip(chosen, values, errors, strict=True):
            if not error <= _SERIES_MAX_REL_ERROR:  # NaN (an overflowed estimate) included
                value = log_a_minus_1_quad(q, z, float(alphas[n]))
                regimes[n] = "quadrature"
            log_a[n] = np.logaddexp(0.0, value)
    return log_a, regimes


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
    alphas = orders_array(orders)
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    if q == 1.0:
        with np.errstate(over="ignore", divide="ignore"):  # inf beyond the float range
            return alphas / (2.0 * z * z)
    check_subsampled_orders(alphas)
    if z > _HUGE_NOISE:
        # z^2 overflows the float range: the unsubsampled alpha / (2 z^2) (an upper bound, by
        # quasi-convexity) is below 1e-280, kept at least the smallest positive float
        return np.maximum(alphas / (2.0 * z) / z, np.nextafter(0.0, 1.0))
    return _log_a(q, z, alphas)[0] / (alphas - 1.0)
