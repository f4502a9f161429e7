"""A rigorous piecewise-linear lower bound of any trade-off function (:func:`lower_tabulation`).

``f`` is evaluated on an adaptive grid and bounded below by neighbouring secants (valid because a
trade-off function is convex); the result is never above ``f`` and within a certified gap of it,
so (epsilon, delta) read from it are sound.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from privfl._validation import check_int, check_positive
from privfl.accounting.fdp.base import TradeOff, check_tradeoff
from privfl.accounting.fdp.tabulated import TabulatedTradeOff, lower_hull


def _secant_lower(
    x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Piecewise-linear lower bound of a convex non-increasing f from its values y on grid x.

    On cell [x_i, x_{i+1}] convexity gives f >= L_i = max(l_{i-1}, l_{i+1}, 0), where l_j is the
    secant through grid points j and j + 1 (a secant lies below a convex function outside its own
    cell), while the cell's own secant l_i lies above f. Returns, per cell, 5 candidate abscissae
    containing every breakpoint of L_i, the values of L_i there, the certified vertical gap
    max_cell (l_i - L_i) >= max_cell (f - L_i) and a certified horizontal gap: the graph of f is
    reached from that of L_i moving right by at most min(cell width, vertical gap / |s_{i+1}|).
    """
    slope = np.diff(y) / np.diff(x)
    intercept = y[:-1] - slope * x[:-1]
    n = slope.size
    cells = np.arange(n)
    neighbours = []
    for offset in (-1, 1):
        j = cells + offset
        valid = (j >= 0) & (j < n)
        jj = np.clip(j, 0, n - 1)
        neighbours.append(
            (np.where(valid, slope[jj], np.nan), np.where(valid, intercept[jj], np.nan))
        )
    (s1, c1), (s2, c2) = neighbours
    with np.errstate(divide="ignore", invalid="ignore"):
        raw = np.stack([x[:-1], x[1:], (c1 - c2) / (s2 - s1), -c1 / s1, -c2 / s2], axis=1)
    low_end, high_end = x[:-1, None], x[1:, None]
    cand = np.clip(np.where(np.isfinite(raw), raw, low_end), low_end, high_end)
    with np.errstate(invalid="ignore"):
        v1 = np.where(np.isnan(s1)[:, None], -np.inf, s1[:, None] * cand + c1[:, None])
        v2 = np.where(np.isnan(s2)[:, None], -np.inf, s2[:, None] * cand + c2[:, None])
    lower = np.minimum(np.maximum(np.maximum(v1, v2), 0.0), y[:-1, None])
    chord = slope[:, None] * cand + intercept[:, None]
    vertical = np.maximum(np.max(chord - lower, axis=1), 0.0)
    flattest = np.abs(np.where(np.isnan(s2), slope, s2))
    with np.errstate(divide="ignore", invalid="ignore"):
        horizontal = np.minimum(np.diff(x), np.where(vertical > 0, vertical / flattest, 0.0))
    return cand, lower, vertical, horizontal


def _tabulate_points(
    f: TradeOff, right: float, tol: float, max_points: int, horizontal: bool
) -> tuple[np.ndarray, np.ndarray, float]:
    """Adaptive secant lower bound of f on [0, right]: candidate points and the certified gap."""
    top = float(special.ndtri(right)) if right < 1.0 else 38.0
    x = np.concatenate(
        [np.linspace(0.0, right, 129), special.ndtr(np.linspace(-38.0, top, 153)), [right]]
    )
    x = np.unique(np.clip(x, 0.0, right))
    y = np.clip(f._evaluate(x), 0.0, 1.0)
    while True:
        cand, lower, vertical, across = _secant_lower(x, y)
        gap = np.maximum(vertical, across) if horizontal else vertical
        bad = gap > tol
        if not np.any(bad) or x.size >= max_points:
            break
        middle = 0.5 * (x[:-1][bad] + x[1:][bad])
        middle = middle[(middle > x[:-1][bad]) & (middle < x[1:][bad])]
        if middle.size == 0:
            break  # cells at the resolution of doubles
        x = np.concatenate([x, middle])
        y = np.concatenate([y, np.clip(f._evaluate(middle), 0.0, 1.0)])
        order = np.argsort(x, kind="stable")
        x, y = x[order], y[order]
    return cand.ravel(), lower.ravel(), float(np.max(gap))


def lower_tabulation(
    f: TradeOff, tol: float = 1e-8, *, max_points: int = 400_000
) -> TabulatedTradeOff:
    """A piecewise-linear trade-off function ``L <= f``, within a certified ``L.gap`` of f.

    ``f`` is evaluated on an adaptive grid and bounded below by neighbouring secants (valid
    because f is convex); ``L`` is the lower convex hull of that bound. The grid is refined until
    ``L >= f - tol`` and (so that reflecting L is safe) the graph of ``L`` lies within ``tol`` of
    that of ``f`` horizontally too, or until it has ``max_points`` points; the certified gap
    reached is stored in ``L.gap``. A symmetric f is tabulated on [0, x*] (where its slope is
    <= -1) and completed by reflection, so the result is symmetric and ``L^{-1}`` is as accurate
    as ``L``. Tabulated ``f`` are returned unchanged. Vertex count grows like sqrt(1/tol).
    """
    f = check_tradeoff("f", f)
    tol = check_positive("tol", tol)
    max_points = check_int("max_points", max_points, minimum=16)
    if isinstance(f, TabulatedTradeOff):
        return f
    if f.symmetric:
        x_star = min(max(f.fixed_point(), 0.0), 0.5)
        if x_star <= 0.0:  # symmetric with f(0) = 0: f = 0
            xs, ys, gap = np.array([0.0, 1.0]), np.array([0.0, 0.0]), 0.0
        else:
            xs, ys, gap = _tabulate_points(f, x_star, tol, max_points, horizontal=False)
            xs, ys = np.concatenate([xs, ys, [1.0]]), np.concatenate([ys, xs, [0.0]])
    else:
        xs, ys, gap = _tabulate_points(f, 1.0, tol, max_points, horizontal=True)
    hx, hy = lower_hull(xs, ys)
    table = TabulatedTradeOff(hx, np.minimum(hy, 1.0 - hx), symmetric=True if f.symmetric else None)
    table.gap = gap
    return table
