"""Per-iteration log deltas of random participation's rigorous schemes, one direction at a time:
the Poisson-subsampled Gaussian (cs at rate p q, ols at rate q, wcs = p * ols) and privfl's
per-S1 convexity bound over a window of the Binomial(d, q) record count (Hasircioglu and Gunduz
2022; the per-S1 bound and the reverse direction are privfl's, proven in
docs/accountants/random-participation.md)."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from privfl.accounting.logspace import logsumexp
from privfl.accounting.participation.amplification import _constants, _deamp, _log_kappa
from privfl.accounting.participation.gaussian import log_positive_part, log_term
from privfl.accounting.participation.setting import Setting


def log_psg_forward(eps: float, g: float, z: float) -> float:
    """log delta of the Poisson(g)-subsampled Gaussian, with||without: g delta_G(deamp(eps, g))."""
    return math.log(g) + log_term(0.0, [_deamp(eps, g)], [1.0 / z])


def log_psg_reverse(eps: float, g: float, z: float) -> float:
    """log H(N(0) || (1-g) N(0) + g N(C)) = g int [kappa_g phi_1 - e^eps phi_0]_+ (reflected)."""
    log_kappa = _log_kappa(eps, g)
    if log_kappa == -math.inf:
        return -math.inf
    return math.log(g) + log_term(log_kappa, [eps], [1.0 / z])


def binomial_window(d: int, q: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Indices i, log b_i on a window of Binomial(d, q), and log masses below / above it."""
    if d == 0:
        return np.array([0]), np.array([0.0]), -math.inf, -math.inf
    if q == 1.0:
        return np.array([d]), np.array([0.0]), -math.inf, -math.inf
    mean = d * q
    half = 20.0 * math.sqrt(d * q * (1.0 - q)) + 40.0
    lo = max(0, int(math.floor(mean - half)))
    hi = min(d, int(math.ceil(mean + half)))
    i = np.arange(lo, hi + 1)
    log_b = stats.binom.logpmf(i, d, q)
    keep = np.isfinite(log_b)
    log_low = float(stats.binom.logcdf(lo - 1, d, q)) if lo > 0 else -math.inf
    log_high = float(stats.binom.logsf(hi, d, q)) if hi < d else -math.inf
    return i[keep], log_b[keep], log_low, log_high


def log_per_s1(eps: float, s: Setting, direction: str) -> float:
    """Variant B (per-S1 convexity), one direction; tails of the binomial outside the window
    are bounded by the monotonicity of the terms (rigorous)."""
    k = _constants(eps, s.p, s.q)
    i, log_b, log_low, log_high = binomial_window(s.d, s.q)
    h1 = 1.0 / s.z
    n = i.size
    if direction == "forward":
        # int [phi_{i+1} - k phi_i - c phi_0]_+ ; shifts 1/z and (i+1)/z
        log_p = np.zeros(n)
        log_n = np.column_stack([np.full(n, k.log_k), np.full(n, k.log_c)])
        h = np.column_stack([np.full(n, h1), (i + 1.0) * h1])
        sup = log_term(0.0, [k.log_k], [h1])  # the WCS inner term: limit as i -> inf
    else:
        # int [kappa phi_i - c phi_0 - e^eps phi_{i-1}]_+ ; i = 0 merges kappa and c at mean 0
        if k.log_kappa == -math.inf:
            return -math.inf
        log_p = np.full(n, k.log_kappa)
        log_n = np.column_stack([np.full(n, eps), np.full(n, k.log_c)])
        h = np.column_stack([np.full(n, h1), np.where(i > 0, i * h1, 1.0)])
        zero = i == 0
        log_p[zero] = k.log_kappa_pq
        log_n[zero, 1] = -np.inf
        sup = log_term(k.log_kappa, [eps], [h1])
    terms = log_positive_part(log_p, log_n, h)
    parts = [log_b + terms]
    if log_low > -math.inf:
        parts.append(np.array([log_low + terms[0]]))  # T_i <= T_lo for i < lo
    if log_high > -math.inf:
        parts.append(np.array([log_high + sup]))  # T_i <= sup for all i
    value = logsumexp(np.concatenate(parts))
    value = min(value, sup)  # <= WCS inner (proven); guards rounding
    return math.log(s.pq) + value
