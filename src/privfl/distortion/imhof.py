"""Imhof's (1961) integrand for a weighted sum of chi-square(1) variables, at many nodes at once.

For ``T = sum_i k_i lam_i z_i^2`` (``z_i`` standard normal, ``k_i`` multiplicities) Imhof's
inversion integrates ``sin(theta(u)) / (u rho(u))`` with::

    theta(u) = (1/2) sum_i k_i (arctan(lam_i u) - lam_i u) + (1/2) u shift
    log rho(u) = (1/4) sum_i k_i log(1 + lam_i^2 u^2)

(:mod:`privfl.distortion.diagonal` explains ``shift``). Evaluated directly this costs two
transcendental functions per coordinate and node (:func:`terms_direct`), the whole cost of the
exact TV under per-coordinate variances. :class:`PowerSums` gives the same values with a
certified truncation bound at a fraction of the cost: with ``x = lam u`` and ``rho_s = 0.1``,

* ``|x| <= rho_s`` (most coordinates at most nodes): the alternating series
  ``arctan x - x = sum_{n>=1} (-1)^n x^{2n+1} / (2n+1)`` and
  ``log(1 + x^2) = sum_{n>=1} (-1)^{n+1} x^{2n} / n``, summed over the coordinates through
  prefix sums of ``k_i lam_i^m`` (coordinates sorted by ``|lam_i|``: the small ones at node
  ``u`` are a prefix);
* ``|x| >= 1 / rho_s``: ``arctan x = sign(x) pi / 2 - arctan(1/x)`` and
  ``log(1 + x^2) = 2 log|x| + log(1 + x^-2)``, the same series in ``1/x`` through suffix sums;
* the rest directly.

Both series alternate with terms decreasing in magnitude (``|x| <= 1``), so each truncation
error is at most the first omitted term; :meth:`PowerSums.terms` returns that bound per node
(summed over coordinates, ``rho_s^23 / 23`` per coordinate at most), propagated to the integrand
by ``|sin a - sin b| <= |a - b|`` and ``|e^-a - e^-b| <= e^-min(a, b) |a - b|``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SERIES_RADIUS", "SERIES_TERMS", "PowerSums", "terms_direct"]

#: Coordinates with ``|lam u| <= SERIES_RADIUS`` (or ``>= 1 / SERIES_RADIUS``) use the series.
SERIES_RADIUS = 0.1
#: Terms kept of each series: the first omitted one is ``|x|^23 / 23`` (arctan) at most.
SERIES_TERMS = 10
#: Above this ``max |lam| / min |lam|`` the powers could overflow: direct evaluation only.
_MAX_SPREAD = 1e12
#: Elements evaluated at once (memory of the direct part).
_CHUNK = 4_000_000


def terms_direct(lam: np.ndarray, shift: float, u: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``sin(theta(u)) / (u rho(u))`` at the nodes ``u > 0``, two transcendental functions per
    coordinate and node (the reference for :class:`PowerSums`)."""
    out = np.empty(u.size)
    chunk = max(1, _CHUNK // max(lam.size, 1))
    for start in range(0, u.size, chunk):
        uu = u[start:start + chunk, None]
        x = lam[None, :] * uu
        theta = 0.5 * ((np.arctan(x) - x) @ k) + 0.5 * uu[:, 0] * shift
        log_rho = 0.25 * (np.log1p(x * x) @ k)
        out[start:start + chunk] = np.sin(theta) * np.exp(-log_rho) / uu[:, 0]
    return out


def _cumulative(values: np.ndarray, reverse: bool = False) -> np.ndarray:
    """Prefix sums with a leading 0 (``[..., j]``: the first ``j`` columns), or suffix sums
    with a trailing 0 (``[..., j]``: columns ``j`` onwards)."""
    zeros = np.zeros(values.shape[:-1] + (1,))
    if reverse:
        return np.concatenate([np.cumsum(values[..., ::-1], axis=-1)[..., ::-1], zeros], -1)
    return np.concatenate([zeros, np.cumsum(values, axis=-1)], -1)


class PowerSums:
    """Imhof's integrand for fixed ``lam`` and multiplicities ``k`` (see the module docstring).

    ``series`` is False when the spread of ``|lam|`` is too large for the powers to be
    represented; :meth:`terms` then evaluates directly (error bound 0).
    """

    def __init__(self, lam: np.ndarray, k: np.ndarray) -> None:
        keep = lam != 0.0  # lam = 0 contributes nothing
        lam, k = np.asarray(lam, float)[keep], np.asarray(k, float)[keep]
        order = np.argsort(np.abs(lam), kind="stable")
        self.lam, self.k = lam[order], k[order]
        self.abs = np.abs(self.lam)
        self.series = bool(self.lam.size) and float(self.abs[-1]) <= _MAX_SPREAD * float(
            self.abs[0])
        if not self.series:
            return
        self.scale = float(self.abs[-1])
        y = self.lam / self.scale  # |y| <= 1
        n = SERIES_TERMS
        sign = np.sign(y)
        # powers 1 .. 2n+3 of |y| and of 1 / |y| by repeated products (row m - 1: power m)
        ya = np.cumprod(np.broadcast_to(np.abs(y), (2 * n + 3, y.size)), axis=0)
        za = np.cumprod(np.broadcast_to(1.0 / np.abs(y), (2 * n + 3, y.size)), axis=0)
        odd, even = slice(0, 2 * n + 1, 2), slice(1, 2 * n, 2)  # powers 1, 3, .., 2n+1; 2, .., 2n
        bounds = [2 * n + 2, 2 * n + 1]  # rows of the powers 2n+3 and 2n+2
        # small |x|: sum k y^m for m = 3 .. 2n+1 (odd, signed), 2 .. 2n (even); bounds at 2n+3, 2n+2
        self.small_odd = _cumulative(self.k * sign * ya[2:2 * n + 1:2])
        self.small_even = _cumulative(self.k * ya[even])
        self.small_bound = _cumulative(self.k * ya[bounds])
        # large |x|: sum k (1/y)^m for m = 1 .. 2n+1 (odd, signed), 2 .. 2n; bounds likewise
        self.large_odd = _cumulative(self.k * sign * za[odd], reverse=True)
        self.large_even = _cumulative(self.k * za[even], reverse=True)
        self.large_bound = _cumulative(self.k * za[bounds], reverse=True)
        self.large_fixed = _cumulative(self.k * np.stack([sign, self.lam, np.log(self.abs),
                                                          np.ones_like(y)]), reverse=True)

    def terms(self, shift: float, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(sin(theta(u)) / (u rho(u)), a bound on its truncation error)`` at nodes
        ``u > 0``."""
        u = np.asarray(u, dtype=float)
        if not self.series:
            return terms_direct(self.lam, shift, u, self.k), np.zeros(u.size)
        n, radius = SERIES_TERMS, SERIES_RADIUS
        v = self.scale * u
        j_small = np.searchsorted(self.abs, radius / u, side="right")
        j_large = np.searchsorted(self.abs, 1.0 / (radius * u), side="left")
        j_large = np.maximum(j_large, j_small)
        theta, log_rho, err_theta, err_log = self._series(v, u, j_small, j_large, n)
        mid_theta, mid_log = self._middle(u, j_small, j_large)
        theta = 0.5 * (theta + mid_theta) + 0.5 * u * shift
        log_rho = 0.25 * (log_rho + mid_log)
        envelope = np.exp(-log_rho + 0.25 * err_log) / u
        return (np.sin(theta) * np.exp(-log_rho) / u,
                (0.5 * err_theta + 0.25 * err_log) * envelope)

    def _series(self, v: np.ndarray, u: np.ndarray, j_small: np.ndarray, j_large: np.ndarray,
                n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The two series parts of ``sum k (arctan x - x)`` and ``sum k log(1 + x^2)`` and their
        truncation bounds, per node."""
        odd = np.arange(3, 2 * n + 2, 2)[:, None]
        even = np.arange(2, 2 * n + 1, 2)[:, None]
        has_small = j_small > 0
        vs = np.where(has_small, v, 0.0)  # no powers of v where nothing is small (overflow)
        a_coef = ((-1.0) ** ((odd - 1) // 2)) / odd  # arctan x - x: (-1)^n x^(2n+1) / (2n+1)
        l_coef = ((-1.0) ** (even // 2 + 1)) / (even // 2)  # log(1 + x^2): (-1)^(n+1) x^2n / n
        theta = np.sum(a_coef * vs ** odd * self.small_odd[:, j_small], 0)
        log_rho = np.sum(l_coef * vs ** even * self.small_even[:, j_small], 0)
        err_theta = vs ** (2 * n + 3) * self.small_bound[0, j_small] / (2 * n + 3)
        err_log = vs ** (2 * n + 2) * self.small_bound[1, j_small] / (n + 1)
        has_large = j_large < self.lam.size
        vl = 1.0 / np.where(has_large, v, 1.0)
        odd1 = np.arange(1, 2 * n + 2, 2)[:, None]
        sign_sum, lam_sum, log_sum, count = self.large_fixed[:, j_large]
        # arctan x - x = sign pi/2 - x - sum_{n>=0} (-1)^n x^-(2n+1) / (2n+1)
        inv_coef = ((-1.0) ** ((odd1 - 1) // 2)) / odd1
        theta += np.where(has_large, 0.5 * math.pi * sign_sum - u * lam_sum - np.sum(
            inv_coef * vl ** odd1 * self.large_odd[:, j_large], 0), 0.0)
        # log(1 + x^2) = 2 log|lam| + 2 log u + log(1 + x^-2)
        log_rho += np.where(has_large, 2.0 * log_sum + 2.0 * np.log(u) * count + np.sum(
            l_coef * vl ** even * self.large_even[:, j_large], 0), 0.0)
        err_theta += np.where(has_large, vl ** (2 * n + 3) * self.large_bound[0, j_large]
                              / (2 * n + 3), 0.0)
        err_log += np.where(has_large, vl ** (2 * n + 2) * self.large_bound[1, j_large]
                            / (n + 1), 0.0)
        return theta, log_rho, err_theta, err_log

    def _middle(self, u: np.ndarray, j_small: np.ndarray, j_large: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """``sum k (arctan x - x)`` and ``sum k log(1 + x^2)`` over the coordinates between the
        two series (evaluated directly), per node."""
        counts = j_large - j_small
        theta, log_rho = np.zeros(u.size), np.zeros(u.size)
        ends = np.cumsum(counts)
        start = 0
        while start < u.size:  # chunks of nodes with at most _CHUNK elements
            stop = int(np.searchsorted(ends, (ends[start - 1] if start else 0) + _CHUNK,
                                       side="right"))
            stop = max(stop, start + 1)
            c = counts[start:stop]
            total = int(c.sum())
            if total:
                node = np.repeat(np.arange(start, stop), c)
                offsets = np.repeat(np.cumsum(c) - c, c)
                index = np.arange(total) - offsets + np.repeat(j_small[start:stop], c)
                x = self.lam[index] * u[node]
                weight = self.k[index]
                theta[start:stop] = np.bincount(node - start, weight * (np.arctan(x) - x),
                                                minlength=stop - start)
                log_rho[start:stop] = np.bincount(node - start, weight * np.log1p(x * x),
                                                  minlength=stop - start)
            start = stop
        return theta, log_rho
