"""One-crossing Gaussian integrals ``int [P phi(t) - sum_j N_j phi(t + h_j)]_+ dt`` in log space
(Newton from a closed-form lower bracket, then the Mills-ratio form), and the exact Gaussian
mechanism delta of Balle and Wang 2018 built on them. Used by every per-iteration delta of random
participation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import special

from privfl._validation import check_epsilon, check_positive
from privfl.accounting.logspace import logsubexp, logsumexp

LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(0.5 * math.pi)
_SQRT2 = math.sqrt(2.0)
MILLS_MIN = -30.0  # below this, tail masses are ~1 and the direct form is accurate
_NEWTON_STEPS = 200


def mills(x: np.ndarray) -> np.ndarray:
    """Mills ratio ``SF(x) / phi(x)`` (finite for x >= -37)."""
    return _SQRT_HALF_PI * special.erfcx(x / _SQRT2)


def log_positive_part(log_p: np.ndarray, log_n: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Row-wise ``log int [P phi(t) - sum_j N_j phi(t + h_j)]_+ dt`` with all ``h_j > 0``.

    ``log_p`` has shape (n,), ``log_n`` and ``h`` shape (n, J) (``-inf`` entries of ``log_n`` are
    absent terms). The ratio of the negative part to ``P phi(t)`` is
    ``exp(G(t))``, ``G(t) = log sum_j exp(a_j - h_j t)``, ``a_j = log(N_j/P) - h_j^2/2``: convex and
    strictly decreasing, so there is exactly one crossing t* and the positive region is
    ``t > t*``. ``t* >= max_j a_j / h_j`` (each term is <= 1 at the root); Newton's method from
    there increases monotonically to t*.
    """
    log_p = np.atleast_1d(np.asarray(log_p, dtype=float))
    log_n = np.atleast_2d(np.asarray(log_n, dtype=float))
    h = np.broadcast_to(np.asarray(h, dtype=float), log_n.shape)
    out = np.full(log_p.shape, -np.inf)
    present = np.isfinite(log_n)
    has_p = np.isfinite(log_p)
    no_neg = has_p & ~present.any(axis=1)
    out[no_neg] = log_p[no_neg]
    rows = np.flatnonzero(has_p & present.any(axis=1))
    if rows.size == 0:
        return out
    H = np.where(present[rows], h[rows], 1.0)
    A = np.where(present[rows], log_n[rows] - log_p[rows, None] - 0.5 * H * H, -np.inf)
    with np.errstate(invalid="ignore"):
        t = np.max(np.where(np.isfinite(A), A / H, -np.inf), axis=1)
    for _ in range(_NEWTON_STEPS):
        e = A - H * t[:, None]
        top = np.max(e, axis=1)
        w = np.exp(e - top[:, None])
        s = np.sum(w, axis=1)
        g = top + np.log(s)
        slope = np.sum(w * H, axis=1) / s  # -G'(t) > 0
        step = g / slope
        t = t + step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(t))):
            break
    e = A - H * t[:, None]
    top = np.max(e, axis=1)
    w = np.exp(e - top[:, None])
    w /= np.sum(w, axis=1)[:, None]
    result = np.full(rows.size, -np.inf)
    mills_rows = t >= MILLS_MIN
    if np.any(mills_rows):
        tm = t[mills_rows]
        Hm = H[mills_rows]
        bracket = np.sum(w[mills_rows] * (mills(tm)[:, None] - mills(tm[:, None] + Hm)), axis=1)
        with np.errstate(divide="ignore"):
            result[mills_rows] = (
                log_p[rows][mills_rows] - 0.5 * tm * tm - LOG_SQRT_2PI + np.log(bracket)
            )
    for r in np.flatnonzero(~mills_rows):
        # t* < -30: SF(t*) ~ 1, no tiny quantities; subtract in log space
        row = rows[r]
        lp = float(special.log_ndtr(-t[r]))
        mask = present[row]
        ln = logsumexp(log_n[row][mask] - log_p[row] + special.log_ndtr(-(t[r] + H[r][mask])))
        result[r] = log_p[row] + logsubexp(lp, ln) if lp > ln else -np.inf
    out[rows] = result
    return out


def log_term(log_p: float, log_n: Sequence[float], h: Sequence[float]) -> float:
    return float(log_positive_part(np.array([log_p]), np.array([log_n]), np.array([h]))[0])


def gaussian_delta(epsilon: float, noise: float, clip_norm: float = 1.0) -> float:
    """Exact Gaussian-mechanism delta (Balle & Wang 2018, Thm 8; the paper's Theorem 2.4):
    ``Phi(C/(2 sigma) - eps sigma / C) - e^eps Phi(-C/(2 sigma) - eps sigma / C)``."""
    eps = check_epsilon("epsilon", epsilon)
    z = check_positive("noise", noise) / check_positive("clip_norm", clip_norm)
    return math.exp(log_term(0.0, [eps], [1.0 / z]))
