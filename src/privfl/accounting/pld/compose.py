"""Sound FFT composition of privacy loss distributions: exponential tilting and an error bound.

The PLD accountant (:mod:`~privfl.accounting.pld.accountant`) composes each step's pessimistic PMF
``count`` times. A plain float64 FFT composition leaves absolute round-off of about ``T u`` times
the peak of the composed PMF at *every* grid point (u = 2^-53, T steps): at delta = 1e-12 with T =
1e6 that noise is larger than the tail that delta is read from, so a plain composition can report an
epsilon below the truth (or a delta of 0), or far above it. This module makes the composition sound
at every delta:

Exponential tilting (Koskela et al. 2021 use the same device for PRV composition)
-------------------------------------------------------------------------------
For a PMF p on indices i and a tilt t >= 0, ``p_t(i) = p(i) e^{t i - K(t)}`` with
``K(t) = log sum_i p(i) e^{t i}``. Tilting commutes with convolution:
``(p1 * p2)_t = (p1)_t * (p2)_t``, so the composed PMF is recovered exactly as

    P(i) = P_t(i) exp(K_total(t) - t i),    K_total = sum_j count_j K_j(t).

The FFT computes ``P_t``, whose bulk sits where the tilt puts it. With t chosen at the saddle
point of the loss that delta is read at, the absolute FFT error ``eta`` of ``P_t`` becomes a
*relative* error of about ``eta / P_t`` near that loss, instead of an absolute error swamping a
1e-12 tail. The tilt is chosen per query (:func:`epsilon_upper`, :func:`delta_upper`).

Error bound (added to the masses, so that every answer stays an upper bound)
--------------------------------------------------------------------------
The composition returns *upper masses* ``m(i) >= P(i)`` for every grid point, so delta(eps)
computed from them (monotone in every mass) is an upper bound on the exact composed delta:

    m(i) = min(1, (max(C(i), 0) + eta) exp(K_total - t i) (1 + rho)),

with C the computed circular convolution of the tilted PMFs, and

* ``eta``: a bound on ``|C(i) - P_t(i)|`` from the FFT. Forward transforms: componentwise
  ``|X^ - X| <= gamma_n sum_i |x_i|`` with ``gamma_n = n u / (1 - n u)``, ``n = 8 (log2 N + 1)``
  (the componentwise Cooley-Tukey bound, Higham 2002 section 24.1, with a safety factor for
  mixed radices); powers are taken as ``exp(sum_j count_j log X_j)``, whose exponent is off by
  at most ``sum_j count_j (-log(1 - E_j/|X_j|) + 2u(|log X_j| + 1))``; coefficients below
  ``e^-745`` (or within ``2 E_j`` of 0) are dropped and their largest possible value is added;
  the inverse transform adds ``gamma_n (1/N) sum_k |Y_k|``. ``eta = (1/N) sum_k |dY_k| + ...``.
* ``rho``: the relative error of tilting each entry (``u (|log p| + |t i| + |K| + 4)``),
  compounded over all ``sum count`` factors, and of the untilting weight.
* Circular aliasing: the window holds all but ``tail/2`` of the tilted mass on each side
  (Chernoff). Mass folded into the window only adds (conservative); the true mass above the
  window, at most ``(tail/2) exp(K_total - t (hi + 1))``, is added to the +inf atom; the mass
  below it is put at the window's lowest loss (raising a loss never lowers delta).

The model's constants (the FFT's ``gamma_n``, one-ulp ``exp``/``log``) are those of IEEE float64
and pocketfft's Cooley-Tukey transforms; the tests check that the realised error (float64 against
an extended-precision composition) stays far below ``eta``. ``docs/accountants/pld.md`` has the
measured numbers.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import fft as sp_fft

__all__ = [
    "MAX_FFT_LENGTH",
    "ComposedUpper",
    "StepPmf",
    "compose_upper",
    "delta_for_epsilon",
    "delta_upper",
    "epsilon_for_delta",
    "epsilon_upper",
]

_U = float(np.finfo(float).eps) / 2.0  # unit round-off of float64, 2^-53
_LOG_TINY = -745.0  # exp below this underflows to 0 in float64
_TINY = 5e-324  # the smallest positive float64 (an underflowed entry is below it)
#: Chernoff orders are limited so that exp(t * index) stays inside float64's normal range.
_MAX_EXPONENT = 700.0
#: Longest FFT the accountant will run (2^25 points: ~1.5 GB of working memory).
MAX_FFT_LENGTH = 1 << 25
#: Largest tilt per grid step: at e^-30 per step the tilted mass already sits at the top index.
_MAX_TILT = 30.0
#: Tilted mass a first, tilted composition may leave below its window (folded in at e^{-tN} of
#: its weight; the full ``tail`` window is used if that costs too much).
_WINDOW_TAIL = 1e-4
#: A tilted answer whose numerical slack exceeds this share of delta is recomputed, re-tilted.
_RETILT_SLACK = 1e-6


@dataclass(frozen=True)
class StepPmf:
    """One step's PMF on losses ``(lower + i) * interval``, composed ``count`` times."""

    lower: int
    probs: np.ndarray
    infinity: float
    count: int


@dataclass(frozen=True)
class ComposedUpper:
    """Upper masses of a composed PLD: ``masses[i] >= P(loss = (lower + i) * interval)``.

    ``infinity`` bounds the +inf atom (including truncated tails); ``eta`` and ``rho`` are the
    absolute (tilted) and relative error allowances of the FFT; ``tilt`` is t per grid step;
    ``tilted`` holds the computed tilted composition and ``log_w0`` the log of the untilting
    weight at index 0 (``weight_i = exp(log_w0 - tilt i)``); ``slack`` bounds what the +inf
    allowance and the mass folded in from below the window add to delta.
    """

    interval: float
    lower: int
    masses: np.ndarray
    tilted: np.ndarray
    log_w0: float
    infinity: float
    tilt: float
    eta: float
    rho: float
    slack: float = 0.0

    def point_masses(self) -> np.ndarray:
        """The masses without the allowances (a point estimate, not a bound)."""
        with np.errstate(over="ignore", invalid="ignore"):
            weights = _weights(self.log_w0, self.tilt, self.tilted.size)
            point = np.maximum(self.tilted, 0.0) * weights
        return np.minimum(np.nan_to_num(point, nan=0.0), 1.0)


def _gamma(n: float) -> float:
    return n * _U / (1.0 - n * _U)


def _fft_gamma(size: int) -> float:
    return _gamma(8.0 * (math.ceil(math.log2(max(size, 2))) + 1.0))


# --------------------------------------------------------------------------------------------
# Cumulants of the tilted composition
# --------------------------------------------------------------------------------------------


def _log_probs(probs: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.maximum(probs, 0.0))


def _tilted(log_p: np.ndarray, t: float) -> tuple[float, np.ndarray, int]:
    """``(kappa, p_t, r)`` for one PMF given as log-probabilities (indices 0..n-1).

    ``p_t(i) = exp(log p(i) + t (i - r) - kappa)`` with ``r`` the index of the largest tilted
    weight, so that the exponents stay small where p_t is not negligible; the log-MGF is
    ``K(t) = t r + kappa``.
    """
    idx = np.arange(log_p.size, dtype=float)
    ref = int(np.argmax(log_p + t * idx))
    lw = log_p + t * (idx - ref)
    top = float(lw[ref])
    if not math.isfinite(top):
        return -math.inf, np.zeros_like(lw), ref
    kappa = top + math.log(float(np.sum(np.exp(lw - top))))
    return kappa, np.exp(lw - kappa), ref


def _cumulants(logs: Sequence[tuple[np.ndarray, int]], t: float) -> tuple[float, float, float]:
    """``(K, mean, variance)`` of the composed (relative) index under tilt ``t``."""
    k_total = mean = variance = 0.0
    for log_p, count in logs:
        kappa, p_t, ref = _tilted(log_p, t)
        log_mgf = t * ref + kappa
        idx = np.arange(p_t.size, dtype=float)
        m = float(np.sum(p_t * idx))
        k_total += count * log_mgf
        mean += count * m
        variance += count * float(np.sum(p_t * (idx - m) ** 2))
    return k_total, mean, variance


def _newton_tilt(fn, target: float, start: float, tolerance: float) -> float:
    """Root ``t >= 0`` of the increasing ``fn(t) = target`` (``fn`` returns value, derivative).

    Newton's method inside a bracket that halves (geometrically) whenever a step leaves it.
    The tilt need not be exact: any tilt gives a valid bound; this one only makes it tight.
    """
    lo, hi = 0.0, math.inf
    t = min(max(start, 1e-12), _MAX_TILT)
    for _ in range(100):
        value, slope = fn(t)
        if abs(value - target) <= tolerance:
            return t
        if value < target:
            lo = t
        else:
            hi = t
        step = t + (target - value) / slope if slope > 0.0 else math.nan
        if math.isfinite(hi):
            inside = lo < step < hi
            t = step if inside else (math.sqrt(lo * hi) if lo > 0.0 else hi / 8.0)
        else:
            t = step if (math.isfinite(step) and step > t) else t * 8.0
        if t >= _MAX_TILT:
            if lo >= _MAX_TILT:
                return _MAX_TILT
            t = _MAX_TILT
            lo = min(lo, _MAX_TILT)
        if math.isfinite(hi) and hi - lo <= 1e-6 * hi:
            return hi
    return t


def _tilt_for_index(logs: Sequence[tuple[np.ndarray, int]], target: float) -> float:
    """Tilt ``t >= 0`` whose tilted mean of the composed relative index is ``target``."""
    top = sum(count * (log_p.size - 1) for log_p, count in logs)
    _, mean0, var0 = _cumulants(logs, 0.0)
    if mean0 >= target or var0 <= 0.0:
        return 0.0
    target = min(target, top - 0.5)  # the tilted mean never reaches the top index

    def mean(t: float) -> tuple[float, float]:
        _, m, v = _cumulants(logs, t)
        return m, v

    return _newton_tilt(mean, target, (target - mean0) / var0, 0.25 * math.sqrt(var0))


def _tilt_for_tail(logs: Sequence[tuple[np.ndarray, int]], log_delta: float) -> float:
    """Tilt at the saddle point whose tail is about ``e^log_delta``.

    Saddle-point approximation of ``-log P(S >= mean_t)``: ``t mean_t - K(t) + log(t sd_t
    sqrt(2 pi))``, increasing in t with slope about ``t var_t``. Only a starting point for the
    composition: any tilt gives a valid bound.
    """
    _, _, var0 = _cumulants(logs, 0.0)
    if var0 <= 0.0:
        return 0.0

    def minus_log_tail(t: float) -> tuple[float, float]:
        k, m, v = _cumulants(logs, t)
        spread = math.log(max(t * math.sqrt(2.0 * math.pi * max(v, 1e-300)), 1.0))
        return t * m - k + spread, t * v

    if minus_log_tail(0.0)[0] >= -log_delta:
        return 0.0
    start = math.sqrt(2.0 * -log_delta / var0)
    return _newton_tilt(minus_log_tail, -log_delta, start, 0.05)


# --------------------------------------------------------------------------------------------
# Chernoff window of the tilted composition
# --------------------------------------------------------------------------------------------


def _log_mgf_of(weights: np.ndarray, t: float) -> float:
    n = len(weights)
    shift = t * (n - 1) if t > 0 else 0.0
    total = float(np.sum(weights * np.exp(t * np.arange(n, dtype=float) - shift)))
    return shift + math.log(total) if total > 0.0 else -math.inf


def _chernoff_window(
    parts: Sequence[tuple[np.ndarray, int]], tail: float, lower_tail: float | None = None
) -> tuple[int, int]:
    """Indices ``lo <= hi`` of the summed index with at most ``tail/2`` mass above hi and
    ``lower_tail/2`` (default ``tail/2``) below lo.

    Chernoff: ``P(S >= a) <= exp(K(s) - s a)`` for every ``s > 0`` (K the log-MGF of S), and
    likewise below; a geometric walk from the Gaussian guess minimises the (unimodal) bound.
    """
    top = sum(count * (len(p) - 1) for p, count in parts)
    variance = 0.0
    for p, count in parts:
        idx = np.arange(len(p), dtype=float)
        total = float(np.sum(p))
        if total > 0.0:
            m = float(np.sum(p * idx)) / total
            variance += count * float(np.sum(p * (idx - m) ** 2)) / total
    if tail <= 0.0 or variance <= 0.0 or top == 0:
        return 0, top
    log_terms = {1.0: math.log(2.0 / tail), -1.0: math.log(2.0 / (lower_tail or tail))}
    s_max = _MAX_EXPONENT / max(len(p) - 1 for p, _ in parts)
    ratio = 2.0**0.25

    def bound(s: float, sign: float) -> float:
        log_mgf = sum(count * _log_mgf_of(p, sign * s) for p, count in parts)
        return (log_mgf + log_terms[sign]) / s if math.isfinite(log_mgf) else math.inf

    best = {}
    for sign in (1.0, -1.0):
        s_start = min(math.sqrt(2.0 * log_terms[sign] / variance), s_max)
        s, value = s_start, bound(s_start, sign)
        for step in (ratio, 1.0 / ratio):
            trial_s, trial = s, value
            for _ in range(64):
                next_s = min(trial_s * step, s_max)
                if next_s == trial_s:
                    break
                next_value = bound(next_s, sign)
                if next_value >= trial:
                    break
                trial_s, trial = next_s, next_value
            if trial < value:
                s, value = trial_s, trial
                break
        best[sign] = value
    hi = top if not math.isfinite(best[1.0]) else min(top, math.ceil(best[1.0]) + 1)
    lo = 0 if not math.isfinite(best[-1.0]) else max(0, math.floor(-best[-1.0]) - 1)
    return (0, top) if lo > hi else (lo, hi)


# --------------------------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------------------------


def _fft_length(parts: Sequence[StepPmf], length: int) -> int:
    size = sp_fft.next_fast_len(max(length, *(len(p.probs) for p in parts)), real=True)
    if size > MAX_FFT_LENGTH:
        raise MemoryError(size)
    return size


def compose_upper(
    parts: Sequence[StepPmf],
    interval: float,
    tail: float,
    tilt: float = 0.0,
    window_tail: float = 0.0,
) -> ComposedUpper:
    """Upper masses of the composition of ``parts`` (see the module docstring).

    Raises ``MemoryError(size)`` if the FFT would be longer than :data:`MAX_FFT_LENGTH`.
    """
    parts = [p for p in parts if p.count > 0]
    log_finite = sum(p.count * math.log1p(-min(p.infinity, 1.0)) for p in parts)
    infinity = -math.expm1(log_finite)
    if not parts:
        return _trivial(interval, 0, 0.0)
    lower = sum(p.count * p.lower for p in parts)
    tilted, rho_parts, kappa_total, ref_total = [], 0.0, [], 0
    for p in parts:
        log_p = _log_probs(p.probs)
        kappa, p_t, ref = _tilted(log_p, tilt)
        if not math.isfinite(kappa):  # no finite mass at all
            return _trivial(interval, lower, 1.0)
        alive = np.flatnonzero(p_t > 0.0)  # underflowed entries are below _TINY (in eta)
        worst = float(np.max(np.abs(log_p[alive]) + tilt * np.abs(alive - ref))) + abs(kappa)
        rho_parts += p.count * math.log1p(_U * (worst + 4.0))
        tilted.append((p_t, p.count))
        kappa_total.append(p.count * kappa)
        ref_total += p.count * ref
    lo, hi = _window(tilted, tilt, tail, window_tail)
    length = hi - lo + 1
    size = _fft_length(parts, length)
    values, eta = _fft_compose(tilted, size)
    start = lo % size
    if start + length <= size:
        window = values[start : start + length]
    else:  # the window wraps around the end of the circular buffer
        window = np.concatenate((values[start:], values[: start + length - size]))
    # P(i) = P_t(i) exp(K_total - t i), K_total = sum count kappa + t sum count ref
    kappa_sum = math.fsum(kappa_total)
    log_w0 = kappa_sum - tilt * (lo - ref_total)  # the largest weight, at lo
    spread = max(abs(lo - ref_total), abs(hi + 1 - ref_total))
    exponent_error = _U * (2.0 * abs(kappa_sum) + 2.0 * tilt * (spread + length) + 4.0)
    exponent_error += _U * math.fsum(abs(k) for k in kappa_total) * (len(parts) + 1)
    rho = math.expm1(rho_parts + exponent_error + 8.0 * _U)
    weight = _weights(log_w0, tilt, length)
    with np.errstate(over="ignore", invalid="ignore"):
        masses = np.maximum(window, 0.0)
        masses += eta
        masses *= weight
        masses *= 1.0 + rho
    if log_w0 > 0.0:  # masses can exceed 1 (or be 0 * inf): at most 1 each
        masses[np.isnan(masses)] = 1.0
        np.minimum(masses, 1.0, out=masses)
    # mass below the window: at most 1 under tilting (tail/2 untilted), put at its lowest loss
    masses[0] = min(1.0, masses[0] + (tail / 2.0 if tilt == 0.0 else 1.0))
    log_above = kappa_sum - tilt * (hi + 1 - ref_total)
    above = (tail / 2.0) * math.exp(min(log_above, 0.0)) * (1.0 + rho)
    folded = math.exp(-tilt * size) if tilt > 0.0 else 0.0
    point_infinity = infinity
    infinity = min(1.0, infinity * (1.0 + 8.0 * _U) + above)
    slack = (infinity - point_infinity) + folded
    return ComposedUpper(
        interval, lower + lo, masses, window, log_w0, infinity, tilt, eta, rho, slack
    )


def _weights(log_w0: float, tilt: float, length: int) -> np.ndarray:
    """``exp(log_w0 - tilt i)`` for ``i = 0..length-1`` (overflow becomes inf)."""
    with np.errstate(over="ignore"):
        weight = np.arange(length, dtype=float)
        weight *= -tilt
        weight += log_w0
        return np.exp(weight, out=weight)


def _window(
    tilted: Sequence[tuple[np.ndarray, int]], tilt: float, tail: float, window_tail: float
) -> tuple[int, int]:
    """Window ``lo..hi`` of the composed index to compute.

    Above hi: at most ``tail/2`` of the tilted mass (Chernoff); its untilted value,
    ``(tail/2) e^{K - t(hi+1)}``, goes to the +inf atom. Below lo nothing is needed for
    soundness: that mass is put at the lowest loss, and what the circular convolution folds from
    below into the window only adds mass, at ``e^{-t N}`` times its true weight (N the FFT
    length; counted in the slack). So with a tilt, lo keeps only all but ``window_tail/2`` of the
    tilted mass (the read is near the tilted mean). (Mass folded from *above* is weighted up by
    ``e^{t N}``; the upper side therefore keeps the full ``tail`` window.)
    """
    lower_tail = tail if tilt <= 0.0 else max(tail, window_tail)
    return _chernoff_window(tilted, tail, lower_tail)


def _trivial(interval: float, lower: int, infinity: float) -> ComposedUpper:
    one = np.array([1.0 - infinity])
    return ComposedUpper(interval, lower, one, one.copy(), 0.0, infinity, 0.0, 0.0, 0.0, 0.0)


def _fft_compose(tilted: Sequence[tuple[np.ndarray, int]], size: int) -> tuple[np.ndarray, float]:
    """Circular convolution of ``count`` copies of each tilted PMF, and its error bound eta.

    Real-valued bookkeeping (moduli, the bound on every coefficient) runs over the whole
    spectrum; complex logs and exponentials only over the coefficients that survive the power.
    """
    gamma = _fft_gamma(size)
    half = size // 2 + 1
    coeffs_list, errs = [], []
    log_bound = np.zeros(half)  # log of the largest possible |Y_k| (true coefficients)
    alive = np.ones(half, dtype=bool)
    single = len(tilted) == 1
    for p_t, count in tilted:
        coeffs = sp_fft.rfft(p_t, size)
        err = gamma * float(np.sum(p_t)) + p_t.size * _TINY
        modulus = np.abs(coeffs)
        if single:  # alive iff count log(|X| + err) > LOG_TINY and |X| > 2 err
            threshold = max(math.exp(_LOG_TINY / count) - err, 2.0 * err)
            alive = modulus > threshold
            # every dropped coefficient is at most (threshold + err)^count
            single_log_bound = count * math.log(threshold + err)
        else:
            log_bound += count * np.log(modulus + err)
            alive &= modulus > 2.0 * err
        coeffs_list.append(coeffs)
        errs.append(err)
    if not single:
        alive &= log_bound > _LOG_TINY
    idx = np.flatnonzero(alive)
    log_y = np.zeros(idx.size, dtype=complex)
    phi = np.zeros(idx.size)  # bound on the error of the exponent log Y
    for (_, count), coeffs, err in zip(tilted, coeffs_list, errs, strict=True):
        c = coeffs[idx]
        log_c = np.log(c)
        ratio = err / np.abs(c)
        phi += count * (-np.log1p(-ratio) + 2.0 * _U * (np.abs(log_c) + 1.0))
        log_y += count * log_c
    keep = log_y.real > _LOG_TINY
    idx, log_y, phi = idx[keep], log_y[keep], phi[keep]
    phi += 2.0 * _U * (np.abs(log_y) + 1.0)
    spectrum = np.zeros(half, dtype=complex)
    spectrum[idx] = np.exp(log_y)
    modulus_y = np.exp(log_y.real)
    weights = np.full(idx.size, 2.0)
    weights[idx == 0] = 1.0
    if size % 2 == 0:
        weights[idx == half - 1] = 1.0
    with np.errstate(over="ignore"):
        alive_error = float(np.sum(weights * modulus_y * np.expm1(phi)))
    # dropped coefficients: each at most e^{log_bound}; below e^-745 count them at e^-745
    if single:
        dead_error = 2.0 * (half - idx.size) * math.exp(min(single_log_bound, 0.0))
    else:
        log_bound[idx] = -np.inf
        large = np.flatnonzero(log_bound > _LOG_TINY)
        n_small = half - idx.size - large.size
        dead_error = 2.0 * float(np.sum(np.exp(np.minimum(log_bound[large], 0.0))))
        dead_error += 2.0 * n_small * math.exp(_LOG_TINY)
    inverse_error = gamma * float(np.sum(weights * modulus_y))
    eta = (alive_error + dead_error + inverse_error) / size
    values = sp_fft.irfft(spectrum, size)
    return values, eta * (1.0 + 16.0 * _U) + _TINY


# --------------------------------------------------------------------------------------------
# Reading epsilon and delta off upper masses
# --------------------------------------------------------------------------------------------


def epsilon_for_delta(
    interval: float, lower: int, masses: np.ndarray, infinity: float, delta: float,
    block: int = 1 << 15,
) -> float:
    """Smallest ``eps >= 0`` with ``delta(eps) <= delta`` for masses on ``(lower + i) interval``.

    ``delta(eps) = infinity + sum_{l > eps} m_l (1 - e^{eps - l})`` is non-increasing in eps
    for any non-negative masses. Walking down from the largest loss with ``U`` (+inf atom and
    mass strictly above) and ``W`` (the same weighted by e^-loss), stop at the first loss l
    with ``U > delta`` and ``log((U - delta) / W) >= l`` (dp-accounting's rule, vectorised).
    """
    if infinity > delta:
        return math.inf
    probs = masses
    first = max(0, -lower + 1)  # first index with a strictly positive loss
    upper_mass, lower_mass = infinity, 0.0
    end = len(probs)
    while end > first:
        start = max(first, end - block)
        p = probs[start:end]
        losses = (lower + start + np.arange(p.size)) * interval
        e_neg = np.exp(-losses)
        pw = p * e_neg
        incl_u = np.cumsum(p[::-1])[::-1]
        incl_w = np.cumsum(pw[::-1])[::-1]
        above_u = upper_mass + np.append(incl_u[1:], 0.0)
        above_w = lower_mass + np.append(incl_w[1:], 0.0)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            hit = (above_u > delta) & (above_w > 0.0) & (above_u - delta >= above_w / e_neg)
        # where e^-loss underflows: mass >= delta with no weighted mass yet
        zero = (upper_mass + incl_u >= delta) & (lower_mass + incl_w == 0.0)
        hits, zeros = np.flatnonzero(hit), np.flatnonzero(zero)
        if zeros.size and (not hits.size or zeros[-1] > hits[-1]):
            return max(0.0, float(losses[zeros[-1]]))
        if hits.size:
            j = hits[-1]
            return max(0.0, math.log((above_u[j] - delta) / above_w[j]))
        upper_mass += float(incl_u[0])
        lower_mass += float(incl_w[0])
        end = start
    if upper_mass <= lower_mass + delta:
        return 0.0
    return max(0.0, math.log((upper_mass - delta) / lower_mass))


def delta_for_epsilon(
    interval: float, lower: int, masses: np.ndarray, infinity: float, epsilon: float
) -> float:
    """``infinity + sum_{l > eps} m_l (1 - e^{eps - l})`` (capped at 1)."""
    first = min(max(0, math.floor(epsilon / interval) - lower), len(masses))
    losses = (lower + first + np.arange(len(masses) - first)) * interval
    keep = losses > epsilon
    tail = masses[first:][keep]
    return min(1.0, infinity + float(np.sum(-np.expm1(epsilon - losses[keep]) * tail)))


def _delta_of(c: ComposedUpper, epsilon: float) -> float:
    return delta_for_epsilon(c.interval, c.lower, c.masses, c.infinity, epsilon)


def _epsilon_of(c: ComposedUpper, delta: float) -> float:
    return epsilon_for_delta(c.interval, c.lower, c.masses, c.infinity, delta)


def _logs(parts: Sequence[StepPmf]) -> list[tuple[np.ndarray, int]]:
    return [(_log_probs(p.probs), p.count) for p in parts if p.count > 0]


def _relative_target(parts: Sequence[StepPmf], interval: float, loss: float) -> float:
    lower = sum(p.count * p.lower for p in parts if p.count > 0)
    return loss / interval - lower


def _log_geometric(x: float, start: int, stop: int) -> float:
    """``log sum_{i=start}^{stop-1} e^{-x i}`` for ``x >= 0`` (``-inf`` if empty)."""
    n = stop - start
    if n <= 0:
        return -math.inf
    if x == 0.0:
        return math.log(n)
    return -x * start + math.log(-math.expm1(-x * n)) - math.log(-math.expm1(-x))


#: log of the largest float: math.exp above it overflows
_LOG_FLOAT_MAX = math.log(sys.float_info.max)


def _slack(c: ComposedUpper, epsilon: float, delta: float) -> float:
    """What the error allowances add to delta at ``epsilon`` (an estimate to decide whether to
    recompose, not part of the bound): ``eta (1 + rho) sum_{l > eps} w_l (1 - e^{eps - l}) +
    rho delta + slack``, the sum in closed form (w and e^{-l} are geometric in the index)."""
    first = min(max(0, math.floor(epsilon / c.interval) - c.lower + 1), c.masses.size)
    end = c.masses.size
    with np.errstate(over="ignore"):
        plain = c.log_w0 + _log_geometric(c.tilt, first, end)
        shifted = c.log_w0 + epsilon - c.lower * c.interval
        shifted += _log_geometric(c.tilt + c.interval, first, end)
        if not math.isfinite(plain):
            gain = 0.0
        elif plain > _LOG_FLOAT_MAX:  # beyond floats (e.g. a rate near 0): recompose
            gain = math.inf
        else:
            gain = math.exp(plain) - math.exp(min(shifted, plain))
    return c.eta * (1.0 + c.rho) * max(gain, 0.0) + c.rho * delta + c.slack


def epsilon_upper(
    parts: Sequence[StepPmf], interval: float, tail: float, delta: float
) -> tuple[float, ComposedUpper]:
    """A rigorous upper bound on epsilon(delta) of the composition, and the composition used.

    First: tilt at the saddle point whose tail is ``delta``, on a window that keeps all but
    ``_WINDOW_TAIL`` of the tilted mass. If the allowances then cost more than
    :data:`_RETILT_SLACK` of delta, compose again, re-tilted at the answer, on the full
    ``tail`` window, and keep the smaller bound (both are valid).
    """
    logs = _logs(parts)
    tilt = _tilt_for_tail(logs, math.log(delta)) if logs else 0.0
    composed = compose_upper(parts, interval, tail, tilt, _WINDOW_TAIL)
    epsilon = _epsilon_of(composed, delta)
    slack = _slack(composed, epsilon, delta) if math.isfinite(epsilon) and logs else 0.0
    if slack > _RETILT_SLACK * delta:
        retilt = _tilt_for_index(logs, _relative_target(parts, interval, epsilon))
        second = compose_upper(parts, interval, tail, retilt)
        eps2 = _epsilon_of(second, delta)
        if eps2 < epsilon:
            return eps2, second
    return epsilon, composed


def delta_upper(
    parts: Sequence[StepPmf], interval: float, tail: float, epsilon: float
) -> tuple[float, ComposedUpper]:
    """A rigorous upper bound on delta(epsilon) of the composition (tilted at ``epsilon``)."""
    logs = _logs(parts)
    tilt = _tilt_for_index(logs, _relative_target(parts, interval, epsilon)) if logs else 0.0
    composed = compose_upper(parts, interval, tail, tilt, _WINDOW_TAIL)
    delta = _delta_of(composed, epsilon)
    if logs and _slack(composed, epsilon, delta) > _RETILT_SLACK * delta:
        second = compose_upper(parts, interval, tail, tilt)
        return min((delta, composed), (_delta_of(second, epsilon), second), key=lambda a: a[0])
    return delta, composed
