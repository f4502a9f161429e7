"""RDP of one Gaussian step on a fixed-size batch drawn without replacement (replace-one).

The Gaussian-specific bound of Wang, Balle & Kasiviswanathan 2019, Theorem 27
(:func:`rdp_without_replacement_gaussian`, base RDP ``2 alpha / z^2``: the replace-one
sensitivity of the clipped sum is 2C). Its terms are the even forward differences of
``g(i) = e^{c i (i-1)}`` (Pearson-Vajda moments of the Gaussian pair), computed in log space
where that is accurate and in exact integer arithmetic where it cancels.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from privfl._validation import check_positive, check_rate
from privfl.accounting.logspace import logsumexp
from privfl.accounting.rdp.log_terms import log_abs_expm1, log_binom
from privfl.accounting.rdp.orders import check_subsampled_orders, orders_array

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
    log_terms = np.where(i <= lcol, log_binom(lcol, i) + c * i * (i - 1.0), -np.inf)
    positive = (lcol - i) % 2.0 == 0.0
    log_p = logsumexp(np.where(positive, log_terms, -np.inf), axis=1)
    log_n = logsumexp(np.where(positive, -np.inf, log_terms), axis=1)
    ratio = log_n - log_p
    with np.errstate(divide="ignore", invalid="ignore"):
        out[2::2] = log_p + np.log(-np.expm1(np.minimum(ratio, 0.0)))
    out[2] = float(log_abs_expm1(np.array([2.0 * c]))[0])  # Delta^2 g(0) = e^{2c} - 1
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
    log2_e2m1 = float(log_abs_expm1(np.array([2.0 * c]))[0]) / math.log(2.0)
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
            out[2] = float(log_abs_expm1(np.array([2.0 * c]))[0])
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
    log_e2m1 = float(log_abs_expm1(np.array([2.0 * c]))[0])
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
            jf[None, :] <= a, (moment + jf * log_q)[None, :] + log_binom(a, jf[None, :]), -np.inf
        )
        out[exact] = np.logaddexp(0.0, logsumexp(terms, axis=1))
    for k in np.nonzero(~exact)[0]:
        a = float(alphas[k])
        jf = np.arange(2.0, a + 1.0)
        moment = math.log(2.0) + c * jf * (jf - 1.0)
        moment[0] = second
        terms = moment + jf * log_q + log_binom(a, jf)
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
    alphas = orders_array(orders)
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    c = (2.0 / z) / z  # 1 / (2 sigma^2) with sigma = z / 2; inf below z ~ 1e-154
    if q == 1.0:
        with np.errstate(over="ignore", invalid="ignore"):
            return c * alphas
    check_subsampled_orders(alphas)
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
