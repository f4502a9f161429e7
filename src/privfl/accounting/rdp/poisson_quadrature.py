"""The quadrature regime of the Poisson-subsampled Gaussian RDP.

``A_alpha - 1 = E[f(L)]`` with the non-negative integrand ``f(L) = L^alpha - 1 - alpha (L - 1)``
(``L`` the likelihood ratio of Mironov, Talwar & Zhang 2019, at noise multiplier z: their
sigma, the noise std / sensitivity), integrated in log space with
composite 16-point Gauss-Legendre (:func:`log_a_minus_1_quad`). Used by
:mod:`privfl.accounting.rdp.poisson` at fractional orders where the signed series is
ill-conditioned; its docstring lists the regimes.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from scipy import integrate

from privfl.accounting.events import AccountingLimitError


def _make_log_integrand(q: float, z: float, alpha: float) -> Callable[[np.ndarray], np.ndarray]:
    """``x -> log(phi_z(x) f(L(x)))`` with ``L(x) = 1 + q expm1((2x - 1) / (2 z^2))``
    and ``f(L) = L^alpha - 1 - alpha (L - 1) >= 0``, accurate for ``L`` near 1 (series)."""
    lq, l1q = math.log(q), math.log1p(-q)
    s2 = z * z
    # f(1 + u) = sum_{k>=2} C(alpha, k) u^k; coefficients C(alpha, k), k = 2 .. 31
    ratios = (alpha - np.arange(2.0, 31.0)) / np.arange(3.0, 32.0)
    coeffs = np.cumprod(np.concatenate([[alpha * (alpha - 1.0) / 2.0], ratios]))
    log_norm = -0.5 * math.log(2.0 * math.pi) - math.log(z)
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


def log_a_minus_1_quad(q: float, z: float, alpha: float) -> float:
    """``log(A_alpha - 1)`` by quadrature of ``E[f(L)]``, ``f(L) = L^a - 1 - a (L - 1) >= 0``.

    ``f >= 0`` (convexity), so there is no cancellation. The integrand is below a sum of
    Gaussian bumps of width z centred at 0, 1 and alpha (``f(L) <= a`` for ``L < 1``,
    ``f(L) <= L^a`` above, and ``phi_s(x) L^a`` is a tilted Gaussian centred at alpha beyond the
    crossover z0 = z^2 log(1/q - 1) + 1/2), so it is integrated over the windows of
    +-40 z around 0, 1, 2, alpha and z0 (merged where they overlap: a single interval unless
    z is small next to the distances between those points). On each window the
    log-integrand is evaluated on a grid (spacing <= z/4), scaled by the overall maximum,
    and the range within e^-90 of that maximum is integrated with composite 16-point
    Gauss-Legendre, doubling the panels until two estimates agree to 1e-13 (scipy's adaptive
    ``quad`` as a last resort). The windows keep the grid fine for any z (a single grid over
    [0, alpha] cannot resolve bumps of width 1e-10).
    """
    log_g = _make_log_integrand(q, z, alpha)
    z0 = z * z * (math.log1p(-q) - math.log(q)) + 0.5
    centres = [0.0, 1.0, 2.0, alpha, z0]
    grids = []
    for lo, hi in _windows(centres, 40.0 * z):
        n = int(min(max(4001.0, 4.0 * (hi - lo) / z), 400001.0))
        grid = np.linspace(lo, hi, n)
        grids.append((grid, log_g(grid)))
    peak = max(float(np.max(values)) for _, values in grids)
    if not math.isfinite(peak):
        raise AccountingLimitError(
            f"the rdp accountant cannot evaluate order {alpha:g} at noise_multiplier = "
            f"{z:g}, sampling_rate = {q:g} (its integrand is {peak}); use other orders"
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
        total += _integrate_window(integrand, a, b, z, [c for c in centres if a < c < b])
    if not total > 0.0:
        raise AccountingLimitError(  # pragma: no cover - the peak's own window is positive
            f"the rdp accountant cannot evaluate order {alpha:g} at noise_multiplier = "
            f"{z:g}, sampling_rate = {q:g} (quadrature gave {total}); use other orders"
        )
    return peak + math.log(total)


def _integrate_window(
    integrand: Callable[[np.ndarray], np.ndarray],
    a: float,
    b: float,
    z: float,
    points: list[float],
) -> float:
    """Integral of ``integrand`` over [a, b]: composite 16-point Gauss-Legendre with panels
    doubled until two estimates agree to 1e-13, scipy's adaptive ``quad`` as a last resort."""
    panels = max(16, int(math.ceil(2.0 * (b - a) / z)))
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
