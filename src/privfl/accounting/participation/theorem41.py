"""The paper's Theorem 4.1 (Hasircioglu and Gunduz 2022, Eq. 6 and 7), as stated: the exact forward
delta of one aligned-gradient configuration, an estimate (docs/accountants/random-participation.md,
"Why Theorem 4.1 is only an estimate"). z* of Eq. (7) is a bracketed Brent root with a guarded
grid-scan fallback ("Numerics" there); Eq. (6) is evaluated in the Mills-ratio form, and literally
with CDFs for the tests."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from privfl.accounting.logspace import logsubexp, logsumexp
from privfl.accounting.participation.amplification import _constants
from privfl.accounting.participation.deltas import binomial_window
from privfl.accounting.participation.gaussian import LOG_SQRT_2PI, MILLS_MIN, mills
from privfl.accounting.participation.setting import Setting


def _theorem41_coefficients(
    eps: float, s: Setting
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Eq. (28) integrand grouped by mean j C: ``coef_j = b_{j-1} - k b_j`` (and ``- c`` at j=0).

    Returns ``(log|coef| of positive ones, their means, log|coef| of negative ones, means)``
    in units of C. The coefficients change sign exactly once (``b_{j-1}/b_j`` increases in j).
    """
    k = _constants(eps, s.p, s.q)
    i, log_b, _, _ = binomial_window(s.d, s.q)
    j = np.arange(int(i[0]), int(i[-1]) + 2)
    lb = np.full(j.size, -np.inf)
    lb[i - j[0]] = log_b
    prev = np.concatenate([[-np.inf], lb[:-1]])  # log b_{j-1}
    neg = k.log_k + lb
    if j[0] == 0:
        neg[0] = np.logaddexp(neg[0], k.log_c)
    pos_log, pos_m, neg_log, neg_m = [], [], [], []
    for jj, a, b in zip(j, prev, neg, strict=True):
        if a > b:
            pos_log.append(logsubexp(a, b))
            pos_m.append(float(jj))
        elif b > a:
            neg_log.append(logsubexp(b, a))
            neg_m.append(float(jj))
    return np.array(pos_log), np.array(pos_m), np.array(neg_log), np.array(neg_m)


def _mixture_log_ratio(y, log_w, m, z):
    """log sum_a w_a N(y; m_a, z^2) / N(y; 0, z^2)."""
    return logsumexp(log_w + (y * m - 0.5 * m * m) / (z * z))


def _scan_root(func: Callable[[float], float], lo: float, hi: float, n: int = 4001) -> float | None:
    """Guarded fallback: the first sign change of ``func`` on a grid, refined by Brent."""
    grid = np.linspace(lo, hi, n)
    values = np.array([func(float(y)) for y in grid])
    ok = np.isfinite(values)
    for a in range(n - 1):
        if ok[a] and ok[a + 1] and values[a] <= 0.0 < values[a + 1]:
            return float(optimize.brentq(func, grid[a], grid[a + 1], xtol=1e-14, rtol=1e-15))
    return None


def _theorem41_root(pos_log, pos_m, neg_log, neg_m, z) -> float:
    """z* of Eq. (7), in units of C: the root of the increasing log-ratio (bracket by doubling
    from [-1, 1], Brent; grid-scan fallback)."""

    def f(y: float) -> float:
        return _mixture_log_ratio(y, pos_log, pos_m, z) - _mixture_log_ratio(y, neg_log, neg_m, z)

    lo, hi = -1.0, 1.0
    for _ in range(200):
        if f(lo) < 0.0:
            break
        lo *= 2.0
    for _ in range(200):
        if f(hi) > 0.0:
            break
        hi *= 2.0
    flo, fhi = f(lo), f(hi)
    if flo < 0.0 < fhi:
        return float(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=500))
    span = max(abs(lo), abs(hi))
    root = _scan_root(f, -span, span)
    if root is None:
        raise ArithmeticError(
            "Theorem 4.1: no sign change of Eq. (7) found (numerical failure); please report"
        )
    return root


def log_theorem41(eps: float, s: Setting) -> tuple[float, float]:
    """(log delta of Eq. (6), z* / C)."""
    pos_log, pos_m, neg_log, neg_m = _theorem41_coefficients(eps, s)
    if pos_log.size == 0:
        return -math.inf, math.inf
    if neg_log.size == 0:
        return math.log(s.pq) + logsumexp(pos_log), -math.inf
    y = _theorem41_root(pos_log, pos_m, neg_log, neg_m, s.z)
    xp = (y - pos_m) / s.z
    xn = (y - neg_m) / s.z
    if min(float(np.min(xp)), float(np.min(xn))) >= MILLS_MIN:
        # Mills form: sum_a P_a SF(x_a) - sum_b N_b SF(x_b)
        #   = S [sum_a u_a M(x_a) - sum_b v_b M(x_b)]
        # with S the common density at the root, u, v the normalised density weights; all
        # positive means lie above all negative ones, so x_a <= x_ref <= x_b and the bracket is
        # a sum of non-negative terms around M(x_ref).
        lu = pos_log - 0.5 * xp * xp
        lv = neg_log - 0.5 * xn * xn
        log_s = logsumexp(lu)
        u = np.exp(lu - log_s)
        v = np.exp(lv - logsumexp(lv))
        ref = mills(np.array([np.max(xp)]))[0]
        bracket = float(np.sum(u * (mills(xp) - ref)) + np.sum(v * (ref - mills(xn))))
        log_value = log_s - LOG_SQRT_2PI + math.log(bracket) if bracket > 0 else -math.inf
    else:
        lp = logsumexp(pos_log + special.log_ndtr(-xp))
        ln = logsumexp(neg_log + special.log_ndtr(-xn))
        log_value = logsubexp(lp, ln) if lp > ln else -math.inf
    return math.log(s.pq) + log_value, y


def _theorem41_phi_form(eps: float, s: Setting) -> float:
    """The paper's Eq. (6) written literally with CDFs (for tests; cancels badly in tails)."""
    k = _constants(eps, s.p, s.q)
    _, zstar = log_theorem41(eps, s)
    i, log_b, _, _ = binomial_window(s.d, s.q)
    b = np.exp(log_b)
    a_c2 = math.exp(k.log_k)
    a_c1 = math.exp(k.log_c)
    z = s.z
    value = (
        1.0
        - a_c2
        + a_c1 * (special.ndtr(zstar / z) - 1.0)
        + float(
            np.sum(b * (a_c2 * special.ndtr((zstar - i) / z) - special.ndtr((zstar - i - 1.0) / z)))
        )
    )
    return s.pq * value
