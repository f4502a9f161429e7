"""theta_eps(r): the hockey-stick divergence of two Gaussians, in log space (Asoodeh et al. 2021).

``theta_eps(r) = E_{e^eps}(N(r, 1) || N(0, 1)) = Q(eps/r - r/2) - e^eps Q(eps/r + r/2)`` (paper
eq. 6, Q the standard normal survival function) is the delta(eps) of a Gaussian pair whose means
are r noise standard deviations apart; every bound of :mod:`privfl.accounting.contraction` is a
sum of products of such factors. Also here: Theorem 2's closed form for constant parameters,
``delta(eps) = (1/T) theta(r1) (1 - a^T)/(1 - a)`` with ``a = theta(rc)``, and the eps~ of the
sharpened chain rule (privfl's addition, docs/accountants/last-iterate.md),
``eps~ = log(1 + (e^eps - 1)/d)``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import erf, erfc, log_ndtr

from privfl._validation import check_epsilon, check_positive, check_range
from privfl.accounting.logspace import LOG_2, log1mexp

_ULP = 2.0**-52


#: Inputs with at most this many entries (one of epsilon, r a scalar) are evaluated entry by
#: entry (:func:`_log_theta_point`): numpy's per-call overhead dominates such short vectors.
_POINTWISE_MAX = 16


def log_theta(epsilon: Any, r: Any) -> Any:
    """log theta_eps(r), vectorised over numpy-broadcastable ``epsilon`` and ``r``.

    ``theta_eps(r) = Q(eps/r - r/2) - e^eps Q(eps/r + r/2)`` (paper eq. 6) is the hockey-stick
    divergence E_{e^eps}(N(m1, s^2 I) || N(m2, s^2 I)) with ``r = ‖m1 - m2‖ / s``. Computed as
    ``log Q(A) + log(1 - exp(eps + log Q(B) - log Q(A)))`` with ``log_ndtr``; at eps = 0 through
    ``erf(r / (2 sqrt 2))`` exactly. Edge cases: r = 0 gives -inf (theta = 0), r = inf gives 0
    (theta = 1), eps = inf gives -inf. Where the last digits cancel the result is rounded *up*
    (the error of the two log-tail values is added), so the value never understates theta by
    more than rounding. Arguments are not validated (internal building block; see :func:`theta`).

    Short inputs (a scalar and at most ``_POINTWISE_MAX`` entries: the per-round arguments of a
    short run, evaluated inside a root finder) go entry by entry through
    :func:`_log_theta_point`, which performs the same floating-point operations with the same
    ufuncs and so returns the same bits as the array path :func:`_log_theta_array`
    (tests/accounting/test_contraction_fast_path.py); repeated entries are computed once.
    """
    eps_arr = np.asarray(epsilon, dtype=float)
    r_arr = np.asarray(r, dtype=float)
    if eps_arr.ndim == 0 and r_arr.ndim == 0:
        return _log_theta_point(float(eps_arr), float(r_arr))
    if (eps_arr.ndim == 0 or r_arr.ndim == 0) and eps_arr.size * r_arr.size <= _POINTWISE_MAX:
        shape = r_arr.shape if eps_arr.ndim == 0 else eps_arr.shape
        pairs = (
            [(float(eps_arr), v) for v in r_arr.ravel().tolist()]
            if eps_arr.ndim == 0
            else [(v, float(r_arr)) for v in eps_arr.ravel().tolist()]
        )
        seen: dict[tuple[float, float], float] = {}
        values = []
        for pair in pairs:
            value = seen.get(pair)
            if value is None:
                value = seen[pair] = _log_theta_point(*pair)
            values.append(value)
        return np.array(values, dtype=float).reshape(shape)
    return _log_theta_array(eps_arr, r_arr)


def _log_theta_array(eps_arr: np.ndarray, r_arr: np.ndarray) -> Any:
    """:func:`log_theta` on arrays (the reference path): masks the edge cases, then computes
    every finite entry at once."""
    finite = (r_arr > 0) & np.isfinite(r_arr) & np.isfinite(eps_arr)
    if finite.ndim and finite.all() and not (eps_arr == 0).any():
        # no edge case (the sharpened chains of a long run): the arithmetic broadcasts
        return _log_theta_finite(eps_arr, r_arr)
    eps_arr, r_arr = np.broadcast_arrays(eps_arr, r_arr)
    out = np.full(eps_arr.shape, -np.inf)
    if np.any(finite):
        out[finite] = _log_theta_finite(eps_arr[finite], r_arr[finite])
    out[np.isposinf(r_arr) & np.isfinite(eps_arr)] = 0.0
    if out.ndim == 0:
        return float(out)
    return out


_TINY = float(np.finfo(float).tiny)


def _log_theta_finite(e: np.ndarray, rr: np.ndarray) -> np.ndarray:
    """:func:`_log_theta_array` on (non-empty) arrays of finite eps and finite r > 0."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = e / rr - rr / 2.0
        b = e / rr + rr / 2.0
        lqa = log_ndtr(-a)
        lqb = e + log_ndtr(-b)
        err = 8.0 * _ULP * (np.abs(lqa) + np.abs(lqb) + np.abs(e))
        diff = np.minimum(lqb - lqa - err, -_TINY)
        val = np.where(np.isfinite(lqa), lqa + log1mexp(diff), -np.inf)
        zero = e == 0
        if np.any(zero):
            x = rr[zero] / (2.0 * math.sqrt(2.0))
            val[zero] = np.where(x < 1.0, np.log(erf(x)), np.log1p(-erfc(x)))
    return val


def _log_theta_point(e: float, rr: float) -> float:
    """:func:`_log_theta_array` for one pair, bit for bit: the same operations in the same order
    (Python float arithmetic is the same IEEE double arithmetic; ``log_ndtr``, ``erf``,
    ``erfc``, ``log``, ``log1p``, ``expm1`` and ``exp`` are the same ufuncs, called on one value),
    and :func:`~privfl.accounting.logspace.log1mexp`'s array branch chosen as its ``where``
    chooses it."""
    if not (math.isfinite(e) and math.isfinite(rr) and rr > 0.0):
        return 0.0 if rr == math.inf and math.isfinite(e) else -math.inf
    if e == 0.0:
        x = rr / (2.0 * math.sqrt(2.0))
        with np.errstate(divide="ignore"):  # x = 0 (rr below 3e-324): log 0 = -inf
            return float(np.log(erf(x))) if x < 1.0 else float(np.log1p(-erfc(x)))
    a = e / rr - rr / 2.0
    b = e / rr + rr / 2.0
    lqa = float(log_ndtr(-a))
    if not math.isfinite(lqa):
        return -math.inf
    lqb = e + float(log_ndtr(-b))
    err = 8.0 * _ULP * (abs(lqa) + abs(lqb) + abs(e))
    diff = min(lqb - lqa - err, -_TINY)  # < 0: log1mexp's "arr >= 0" never applies
    if diff > -LOG_2:
        return lqa + float(np.log(-np.expm1(np.float64(diff))))
    return lqa + float(np.log1p(-np.exp(np.float64(diff))))


def log_theta_scalar(epsilon: float, r: float) -> float:
    """Scalar twin of :func:`log_theta` for finite eps >= 0 and finite r > 0 (hot loops)."""
    if epsilon == 0.0:
        x = r / (2.0 * math.sqrt(2.0))
        return math.log(math.erf(x)) if x < 1.0 else math.log1p(-math.erfc(x))
    if math.isinf(epsilon):
        return -math.inf
    a = epsilon / r - r / 2.0
    lqa = float(log_ndtr(-a))
    if lqa == -math.inf:
        return -math.inf
    lqb = epsilon + float(log_ndtr(-(a + r)))
    err = 8.0 * _ULP * (abs(lqa) + abs(lqb) + epsilon)
    diff = min(lqb - lqa - err, -np.finfo(float).tiny)
    return lqa + log1mexp(diff)


def theta(epsilon: Any, r: Any) -> Any:
    """theta_eps(r) (paper eq. 6), validated: ``epsilon >= 0`` and ``r >= 0`` (inf allowed).

    Vectorised like :func:`log_theta`; returns a float for scalar input.
    """
    eps_arr = np.asarray(epsilon, float)
    r_arr = np.asarray(r, float)
    if np.any(np.isnan(eps_arr)) or np.any(eps_arr < 0):
        bad = eps_arr[np.isnan(eps_arr) | (eps_arr < 0)].ravel()[0]
        raise ValueError(f"epsilon = {float(bad)!r} is out of range: must be in [0, inf]")
    if np.any(np.isnan(r_arr)) or np.any(r_arr < 0):
        bad = r_arr[np.isnan(r_arr) | (r_arr < 0)].ravel()[0]
        raise ValueError(f"r = {float(bad)!r} is out of range: must be in [0, inf]")
    with np.errstate(under="ignore"):
        return np.exp(log_theta(eps_arr, r_arr))


def sharpened_eps(log_em1: float, log_d: np.ndarray) -> np.ndarray:
    """eps~ = log(1 + (e^eps - 1)/d) (sharpened chain rule), overflow-safe; inf where d = 0."""
    if log_em1 == -math.inf:  # eps = 0: eps~ = 0
        return np.logaddexp(0.0, np.full(np.shape(log_d), -np.inf))
    x = log_em1 - log_d  # log_em1 > -inf and log_d <= 0: no inf - inf
    return np.logaddexp(0.0, np.where(log_d == -np.inf, np.inf, x))


def log_geometric(k: Any, log_a: float) -> Any:
    """log((1 - a^k)/(1 - a)) = log(1 + a + ... + a^{k-1}) for real k > 0 (k when a = 1)."""
    k = np.asarray(k, float)
    if log_a == 0.0:
        return np.log(k)
    if np.isneginf(log_a):
        return np.zeros_like(k)
    return log1mexp(k * log_a) - log1mexp(float(log_a))


def closed_form_delta(epsilon: float, entry_r: float, contraction_r: float, rounds: float) -> float:
    """Theorem 2 for constant parameters: ``(1/T) theta(r1) (1 - a^T)/(1 - a)``, a = theta(rc).

    ``rounds`` (T) may be any real >= 1: a non-integer T reproduces the paper's Figure 2 for
    q = 0.3 (T = 10/3; docs/accountants/last-iterate.md, "Where privfl departs from the paper, and
    why", item 3) and is **not** a guarantee for any
    algorithm; :class:`ProjectedNoisySGD` refuses batch sizes that do not divide n.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    entry_r = check_positive("entry_r", entry_r)
    contraction_r = check_positive("contraction_r", contraction_r)
    rounds = check_range("rounds", rounds, 1.0, math.inf, high_open=True)
    log_a = log_theta(epsilon, contraction_r)
    value = log_theta(epsilon, entry_r) - math.log(rounds) + log_geometric(rounds, log_a)
    return math.exp(float(value))
