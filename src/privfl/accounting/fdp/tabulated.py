"""Convex piecewise-linear trade-off functions, exact in every operation.

:class:`TabulatedTradeOff` holds the vertices of ``f``; its evaluation, inverse and
(epsilon, delta) profile are exact. :func:`from_epsilon_delta` is the trade-off function of a
set of (epsilon, delta)-DP guarantees, ``max_i f_{eps_i, delta_i}`` (Dong, Roth, Su 2019,
Prop. 2.5), the upper envelope of lines. The lower convex hull and the upper envelope used by
the other modules live here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

from privfl._validation import check_nonnegative, check_probability
from privfl.accounting.fdp.base import TradeOff, exp_epsilon_times

#: the largest epsilon of a pair :func:`from_epsilon_delta` takes: e^epsilon is a finite float
MAX_PAIR_EPSILON = math.log(np.finfo(float).max)


def _turn(ax: float, ay: float, bx: float, by: float, px: float, py: float) -> float:
    """The sign of the turn a -> b -> p (> 0: left), exact: the float cross product where it is
    far from 0, else the same product in rationals (floats are exact rationals), so that nearly
    collinear vertices (a mixture with p within rounding of 1) are kept or dropped correctly
    and a symmetric point set keeps a symmetric hull."""
    first, second = (bx - ax) * (py - ay), (by - ay) * (px - ax)
    cross = first - second
    if abs(cross) > 1e-12 * (abs(first) + abs(second)):
        return cross
    fa, fb, fp = (Fraction(ax), Fraction(ay)), (Fraction(bx), Fraction(by)), (Fraction(px),
                                                                              Fraction(py))
    exact = (fb[0] - fa[0]) * (fp[1] - fa[1]) - (fb[1] - fa[1]) * (fp[0] - fa[0])
    return float((exact > 0) - (exact < 0))


def lower_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lower convex hull (monotone chain) of points; x ascending in the output, x unique."""
    order = np.lexsort((y, x))
    x, y = np.asarray(x, float)[order], np.asarray(y, float)[order]
    keep = np.ones(x.shape, bool)
    keep[1:] = x[1:] != x[:-1]  # for equal x keep the lowest y (first after lexsort)
    x, y = x[keep], y[keep]
    hx: list[float] = []
    hy: list[float] = []
    for px, py in zip(x.tolist(), y.tolist(), strict=True):
        while len(hx) >= 2:
            if _turn(hx[-2], hy[-2], hx[-1], hy[-1], px, py) <= 0:
                # not a strict left turn: drop the middle point
                hx.pop()
                hy.pop()
            else:
                break
        hx.append(px)
        hy.append(py)
    return np.asarray(hx), np.asarray(hy)


class TabulatedTradeOff(TradeOff):
    """A convex piecewise-linear trade-off function through the vertices ``(alphas, betas)``.

    Requirements (checked, with tolerance ``tol`` for rounding): ``alphas`` strictly increasing
    from 0 to 1, ``betas`` in [0, 1], non-increasing, convex and ``<= 1 - alpha``. The stored
    function is then the lower convex hull of the points with ``beta`` capped at ``1 - alpha``
    (so rounding never raises it). Evaluation, inverse and (epsilon, delta) profile are exact.
    ``symmetric`` is detected (f equal to its inverse to ``tol``) unless given.

    For a sound privacy statement the table must be a LOWER bound on the true trade-off function
    (see :func:`lower_tabulation`).
    """

    def __init__(
        self,
        alphas: Iterable[float],
        betas: Iterable[float],
        *,
        tol: float = 1e-9,
        symmetric: bool | None = None,
    ) -> None:
        tol = check_nonnegative("tol", tol)
        a = self._vector("alphas", alphas)
        b = self._vector("betas", betas)
        if a.size != b.size or a.size < 2:
            raise ValueError(
                f"alphas and betas have {a.size} and {b.size} entries: must be equal and >= 2"
            )
        if a[0] != 0.0 or a[-1] != 1.0 or np.any(np.diff(a) <= 0):
            raise ValueError(f"alphas = {a!r} is out of range: must increase strictly from 0 to 1")
        for name, bad, allowed in (
            ("betas", (b < 0) | (b > 1), "in [0, 1]"),
            ("betas", b > 1.0 - a + tol, "<= 1 - alpha (a trade-off function)"),
        ):
            if np.any(bad):
                index = int(np.argmax(bad))
                raise ValueError(
                    f"{name} = {b[index]!r} at alpha = {a[index]!r} is out of range: must be "
                    f"{allowed}"
                )
        if np.any(np.diff(b) > tol):
            index = int(np.argmax(np.diff(b) > tol))
            raise ValueError(
                f"betas = {b[index + 1]!r} at alpha = {a[index + 1]!r} is out of range: must be "
                f"<= the previous beta {b[index]!r} (non-increasing)"
            )
        slopes = np.diff(b) / np.diff(a)
        if slopes.size > 1:
            # convexity: the increase of beta over linear interpolation must stay within tol
            chord = b[:-2] + (b[2:] - b[:-2]) * ((a[1:-1] - a[:-2]) / (a[2:] - a[:-2]))
            if np.any(b[1:-1] - chord > tol):
                index = int(np.argmax(b[1:-1] - chord > tol)) + 1
                raise ValueError(
                    f"betas = {b[index]!r} at alpha = {a[index]!r} is out of range: must be "
                    "convex (on or below the chord of its neighbours)"
                )
        b = np.minimum(b, 1.0 - a)
        b[-1] = 0.0
        hx, hy = lower_hull(a, b)
        self._alphas, self._betas = hx, np.clip(hy, 0.0, 1.0)
        # strictly decreasing part (up to the first zero) for the inverse
        first_zero = int(np.argmax(self._betas <= 0.0))
        self._dec_alphas = self._alphas[: first_zero + 1]
        self._dec_betas = self._betas[: first_zero + 1]
        if symmetric is None:
            grid = np.unique(np.concatenate([self._alphas, self._betas]))
            symmetric = bool(np.max(np.abs(self._evaluate(grid) - self._inverse(grid))) <= tol)
        self.symmetric = bool(symmetric)
        self.gap: float | None = None  # set by lower_tabulation: certified sup(f - table)

    @staticmethod
    def _vector(name: str, values: Iterable[float]) -> np.ndarray:
        try:
            array = np.array(values, dtype=float).ravel()
        except (TypeError, ValueError) as error:
            raise ValueError(f"{name} = {values!r} is not a list of numbers") from error
        if not np.all(np.isfinite(array)):
            bad = array[~np.isfinite(array)][0]
            raise ValueError(f"{name} contains {bad!r}: must be finite numbers, not NaN")
        return array

    @property
    def alphas(self) -> np.ndarray:
        return self._alphas.copy()

    @property
    def betas(self) -> np.ndarray:
        return self._betas.copy()

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return np.interp(alpha, self._alphas, self._betas)

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        beta = np.asarray(beta, float)
        result = np.interp(beta, self._dec_betas[::-1], self._dec_alphas[::-1])
        return np.where(beta >= self._betas[0], 0.0, result)

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        eps = np.asarray(epsilon, float)[..., None]
        values = self._betas + exp_epsilon_times(eps, self._alphas)
        return 1.0 - values.min(axis=-1)

    def __repr__(self) -> str:
        return f"TabulatedTradeOff({self._alphas.size} vertices, symmetric={self.symmetric})"


def from_epsilon_delta(pairs: Iterable[tuple[float, float]]) -> TabulatedTradeOff:
    """The trade-off function of (epsilon_i, delta_i)-DP for every pair: max_i f_{eps_i, delta_i}.

    ``f_{eps, delta}(alpha) = max{0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)}``
    ([DRS19] Prop. 2.5). The maximum is computed exactly as the upper envelope of lines. Here
    ``delta`` may be 0 (pure DP); ``delta`` must be < 1; ``epsilon`` must be at most
    :data:`MAX_PAIR_EPSILON` = log(float max) ~ 709.78, where the slope -e^epsilon of the
    envelope's steep line still is a float (beyond it the line is not representable: refused
    with a ValueError, never an OverflowError or a silently rounded line).
    """
    try:
        items = list(pairs)
    except TypeError as error:
        raise ValueError(f"pairs = {pairs!r} is not a list of (epsilon, delta) pairs") from error
    if not items:
        raise ValueError("pairs = [] is out of range: must hold at least one (epsilon, delta)")
    intercepts, slopes = [0.0], [0.0]
    for item in items:
        try:
            eps, delta = item
        except (TypeError, ValueError) as error:
            raise ValueError(f"pairs entry {item!r} is not an (epsilon, delta) pair") from error
        eps = check_nonnegative("epsilon", eps)
        if eps > MAX_PAIR_EPSILON:
            raise ValueError(
                f"epsilon = {eps!r} is out of range: must be at most log(float max) = "
                f"{MAX_PAIR_EPSILON:.6g} (the trade-off line of slope -e^epsilon overflows); "
                "an (epsilon, delta) pair with a larger epsilon constrains almost nothing")
        delta = check_probability("delta", delta)
        if delta >= 1.0:
            raise ValueError(f"delta = {delta!r} is out of range: must be in [0, 1)")
        intercepts += [1.0 - delta, math.exp(-eps) * (1.0 - delta)]
        slopes += [-math.exp(eps), -math.exp(-eps)]
    alphas, betas = upper_envelope(np.asarray(slopes), np.asarray(intercepts))
    return TabulatedTradeOff(alphas, betas, symmetric=True)


def upper_envelope(slopes: np.ndarray, intercepts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices on [0, 1] of max_i (intercepts_i + slopes_i alpha) (convex piecewise linear)."""
    order = np.lexsort((intercepts, slopes))
    lines: list[tuple[float, float]] = []
    for slope, intercept in zip(slopes[order].tolist(), intercepts[order].tolist(), strict=True):
        if lines and lines[-1][0] == slope:
            lines.pop()  # same slope: the later (larger intercept) wins
        while len(lines) >= 2:
            (s1, c1), (s2, c2) = lines[-2], lines[-1]
            # line 2 is useless if line 1 meets the new line no later than it meets line 2
            # (abscissae compared directly: no overflowing cross-multiplication)
            if (c1 - intercept) / (slope - s1) <= (c1 - c2) / (s2 - s1):
                lines.pop()
            else:
                break
        lines.append((slope, intercept))
    # lines now sorted by increasing slope; on [0, 1] the steepest (first) wins at alpha = 0.
    xs = [0.0]
    for (s1, c1), (s2, c2) in zip(lines[:-1], lines[1:], strict=True):
        xs.append((c1 - c2) / (s2 - s1))
    xs.append(1.0)
    xs_arr = np.clip(np.asarray(xs), 0.0, 1.0)
    slopes_arr = np.asarray([s for s, _ in lines])
    intercepts_arr = np.asarray([c for _, c in lines])
    values = np.max(intercepts_arr[None, :] + slopes_arr[None, :] * xs_arr[:, None], axis=1)
    keep = np.concatenate([[True], np.diff(xs_arr) > 0])
    return xs_arr[keep], values[keep]
