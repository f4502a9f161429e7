"""Trade-off functions: the f-DP view of privacy (Dong, Roth, Su 2019 [DRS19]; seed 000 section 3).

A trade-off function ``f = T(P, Q)`` maps a type I error ``alpha`` to the smallest type II error
of a test of ``P`` against ``Q`` at that level. ``f`` is a trade-off function iff it is convex,
continuous, non-increasing and ``f(alpha) <= 1 - alpha`` ([DRS19] Prop. 2.2). Larger is more
private; ``Id(alpha) = 1 - alpha`` is perfect privacy.

Objects here
------------
* :class:`TradeOff`: base class; call it on scalars or arrays of alpha in [0, 1]. Methods
  :meth:`~TradeOff.inv` (generalised inverse), :meth:`~TradeOff.fixed_point`,
  :meth:`~TradeOff.delta` (the (epsilon, delta) profile) and :meth:`~TradeOff.epsilon`.
* :class:`GaussianTradeOff` ``G_mu`` (closed forms throughout); :func:`identity` is ``G_0``.
* :class:`TabulatedTradeOff`: convex piecewise-linear ``f`` given by its vertices. Everything about
  it is exact: its inverse, its (epsilon, delta) profile, its subsampling and its tensor product
  (a piecewise-linear trade-off function is exactly that of a pair of discrete distributions).
* :func:`mixture` ``f_p``, :func:`inverse`, :func:`subsample` ``C_p``, :func:`compose` (tensor
  product), :func:`client_sampling_lower_bound` (seed 000 Lemma 3.8), :func:`from_epsilon_delta`,
  :func:`lower_tabulation` (a rigorous piecewise-linear lower bound of any trade-off function).

Soundness convention: whenever a trade-off function is approximated (tabulation, coarsening of a
tensor product), the approximation is a LOWER bound on the true one, so it never overstates
privacy; closed forms and root finders are exact up to floating-point rounding (~1e-15). A
tabulation is within a certified absolute gap (``TabulatedTradeOff.gap``, default 1e-8) of the
function: (epsilon, delta) read from it are sound, but only tight for delta well above that gap.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable

import numpy as np
from scipy import special

from privfl._validation import (
    as_scalar_or_array,
    check_delta,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_range_array,
)
from privfl.accounting.gdp import (
    gdp_compose,
    gdp_delta,
    gdp_epsilon,
)
from privfl.accounting.safe_epsilon import smallest_safe_epsilon

__all__ = [
    "ClientSampledTradeOff",
    "GaussianTradeOff",
    "InverseTradeOff",
    "MixtureTradeOff",
    "SubsampledGaussianTradeOff",
    "TabulatedTradeOff",
    "TradeOff",
    "client_sampling_lower_bound",
    "compose",
    "epsilon_delta_profile",
    "epsilon_for_delta",
    "from_epsilon_delta",
    "identity",
    "inverse",
    "is_convex",
    "is_symmetric",
    "lower_tabulation",
    "mixture",
    "subsample",
    "tensor_power",
    "total_variation_bound",
]

#: the largest epsilon of a pair :func:`from_epsilon_delta` takes: e^epsilon is a finite float
MAX_PAIR_EPSILON = math.log(np.finfo(float).max)
_BISECTION_STEPS = 64  # halving [0, 1] 64 times reaches the spacing of doubles
_GOLDEN_STEPS = 120


def _alpha(name: str, value: object) -> tuple[np.ndarray, bool]:
    return check_range_array(name, value, 0.0, 1.0)


def _epsilons(value: object) -> tuple[np.ndarray, bool]:
    return check_range_array("epsilon", value, 0.0, math.inf, high_open=True)


def _check_tradeoff(name: str, value: object) -> TradeOff:
    if not isinstance(value, TradeOff):
        raise ValueError(f"{name} = {value!r} is not a TradeOff")
    return value


def _bisect_inverse(function, beta: np.ndarray) -> np.ndarray:
    """Generalised inverse inf{t in [0, 1] : function(t) <= beta} of a non-increasing function."""
    beta = np.asarray(beta, dtype=float)
    low = np.zeros_like(beta)  # invariant: function(low) > beta (unless answer is 0)
    high = np.ones_like(beta)  # invariant: function(high) <= beta (function(1) = 0 <= beta)
    at_zero = function(np.zeros_like(beta)) <= beta
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        below = function(middle) <= beta
        high = np.where(below, middle, high)
        low = np.where(below, low, middle)
    return np.where(at_zero, 0.0, high)


def _exp_epsilon_times(epsilon: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """e^epsilon * alpha with 0 * inf := 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        product = np.exp(epsilon) * alpha
    return np.where(alpha == 0.0, 0.0, product)


def _mixed_epsilon(epsilon: np.ndarray, p: float) -> np.ndarray:
    """epsilon' with e^epsilon' = 1 + (e^epsilon - 1) / p, computed without overflow."""
    return epsilon + np.log(np.exp(-epsilon) + (-np.expm1(-epsilon)) / p)


# =========================================================================== base class
class TradeOff(ABC):
    """A trade-off function f: [0, 1] -> [0, 1] (convex, continuous, non-increasing, <= 1 - alpha).

    Subclasses implement :meth:`_evaluate` on validated float arrays and may override the numerical
    defaults of :meth:`_inverse`, :meth:`_delta`, :meth:`fixed_point` with closed forms.
    ``symmetric`` is True when ``f`` equals its generalised inverse (``T(P, Q) = T(Q, P)``).
    """

    symmetric: bool = False

    def __call__(self, alpha: float | np.ndarray) -> float | np.ndarray:
        """f(alpha) for alpha in [0, 1] (scalar or array)."""
        a, scalar = _alpha("alpha", alpha)
        return as_scalar_or_array(np.clip(self._evaluate(a), 0.0, 1.0), scalar)

    def inv(self, beta: float | np.ndarray) -> float | np.ndarray:
        """Generalised inverse f^{-1}(beta) = inf{t in [0, 1] : f(t) <= beta}, beta in [0, 1]."""
        b, scalar = _alpha("beta", beta)
        return as_scalar_or_array(np.clip(self._inverse(b), 0.0, 1.0), scalar)

    def fixed_point(self) -> float:
        """The x* in [0, 1] with f(x*) = x* (unique since f is non-increasing)."""
        low, high = 0.0, 1.0
        for _ in range(_BISECTION_STEPS):
            middle = 0.5 * (low + high)
            if float(self._evaluate(np.asarray(middle))) > middle:
                low = middle
            else:
                high = middle
        return 0.5 * (low + high)

    def delta(self, epsilon: float | np.ndarray) -> float | np.ndarray:
        """(epsilon, delta) profile: f-DP => (epsilon, delta(epsilon))-DP for every epsilon >= 0.

        ``delta(epsilon) = 1 + f*(-e^epsilon) = 1 - inf_alpha (f(alpha) + e^epsilon alpha)``
        ([DRS19] Prop. 2.12); the equivalence is two-way for symmetric f.
        """
        eps, scalar = _epsilons(epsilon)
        return as_scalar_or_array(np.clip(self._delta(eps), 0.0, 1.0), scalar)

    def epsilon(self, delta: float) -> float:
        """Smallest epsilon >= 0 with delta(epsilon) <= delta (root finding on the profile, on
        the safe side: :func:`~privfl.accounting.safe_epsilon.smallest_safe_epsilon`).

        Returns ``inf`` when no finite epsilon reaches ``delta`` (delta below 1 - f(0)) or none up
        to :data:`~privfl.accounting.safe_epsilon.EPSILON_MAX` (the float range) does.
        """
        delta = check_delta("delta", delta)
        return self._epsilon(delta)

    # ------------------------------------------------------------------ numerical defaults
    @abstractmethod
    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        """f on a validated array of alphas in [0, 1]."""

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        return _bisect_inverse(self._evaluate, beta)

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        """1 - min_alpha (f(alpha) + e^eps alpha) by golden-section search (the sum is convex).

        The minimum is over evaluated points, so this can only fall short of the true delta, by
        rounding-level amounts (the minimiser lies in [0, 1/2] where doubles are dense).
        """
        eps = np.asarray(epsilon, dtype=float)

        def objective(alpha: np.ndarray) -> np.ndarray:
            return self._evaluate(alpha) + _exp_epsilon_times(eps, alpha)

        ratio = (math.sqrt(5.0) - 1.0) / 2.0
        low, high = np.zeros_like(eps), np.ones_like(eps)
        best = np.minimum(objective(low), objective(high))
        for _ in range(_GOLDEN_STEPS):
            x1, x2 = high - ratio * (high - low), low + ratio * (high - low)
            f1, f2 = objective(x1), objective(x2)
            best = np.minimum(best, np.minimum(f1, f2))
            left = f1 <= f2  # convex: the minimum lies in [low, x2] or in [x1, high]
            high = np.where(left, x2, high)
            low = np.where(left, low, x1)
        return 1.0 - best

    def _epsilon(self, delta: float) -> float:
        if float(self._delta(np.asarray(0.0))) <= delta:
            return 0.0
        limit = 1.0 - float(self._evaluate(np.asarray(0.0)))  # delta(inf) = 1 - f(0)
        if limit > delta:
            return math.inf

        def log_delta(eps: float) -> float:
            value = float(self._delta(np.asarray(eps)))
            return math.log(value) if value > 0.0 else -math.inf

        return smallest_safe_epsilon(log_delta, delta)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# =========================================================================== Gaussian
class GaussianTradeOff(TradeOff):
    """G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu) = T(N(0, 1), N(mu, 1)); mu >= 0.

    Symmetric (its inverse is G_mu); fixed point Phi(-mu/2); (epsilon, delta) profile
    :func:`~privfl.accounting.gdp.gdp_delta`.
    ``G_0`` is the identity ``1 - alpha``.
    """

    symmetric = True

    def __init__(self, mu: float) -> None:
        self.mu = check_nonnegative("mu", mu)

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        # Phi^{-1}(1 - alpha) = -Phi^{-1}(alpha): accurate for small alpha.
        return special.ndtr(-special.ndtri(alpha) - self.mu)

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        return self._evaluate(beta)

    def fixed_point(self) -> float:
        return float(special.ndtr(-self.mu / 2.0))

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        return np.asarray(gdp_delta(epsilon, self.mu), dtype=float)

    def _epsilon(self, delta: float) -> float:
        return float(gdp_epsilon(delta, self.mu))

    def __repr__(self) -> str:
        return f"GaussianTradeOff(mu={self.mu!r})"


def identity() -> GaussianTradeOff:
    """Id(alpha) = 1 - alpha (perfect privacy), represented as G_0."""
    return GaussianTradeOff(0.0)


def total_variation_bound(f: TradeOff) -> float:
    """sup_E |P(E) - Q(E)| allowed by f: delta(0) = 1 - min_alpha (f(alpha) + alpha).

    Every test has type I + type II error >= 1 - this. For G_mu it is 2 Phi(mu/2) - 1.
    """
    f = _check_tradeoff("f", f)
    return float(f.delta(0.0))


# =========================================================================== tabulated
def _lower_hull(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
            cross = (hx[-1] - hx[-2]) * (py - hy[-2]) - (hy[-1] - hy[-2]) * (px - hx[-2])
            if cross <= 0:  # not a strict left turn: drop the middle point
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
        hx, hy = _lower_hull(a, b)
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
        values = self._betas + _exp_epsilon_times(eps, self._alphas)
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
    alphas, betas = _upper_envelope(np.asarray(slopes), np.asarray(intercepts))
    return TabulatedTradeOff(alphas, betas, symmetric=True)


def _upper_envelope(slopes: np.ndarray, intercepts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    f = _check_tradeoff("f", f)
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
    hx, hy = _lower_hull(xs, ys)
    table = TabulatedTradeOff(hx, np.minimum(hy, 1.0 - hx), symmetric=True if f.symmetric else None)
    table.gap = gap
    return table


# =========================================================================== operators
class MixtureTradeOff(TradeOff):
    """f_p = p f + (1 - p) Id (seed 000 section 3.4); the p-mixture of f with perfect privacy."""

    def __init__(self, f: TradeOff, p: float) -> None:
        self.f = _check_tradeoff("f", f)
        self.p = check_probability("p", p)
        self.symmetric = self.p == 0.0 or (self.p == 1.0 and f.symmetric)

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return self.p * self.f._evaluate(alpha) + (1.0 - self.p) * (1.0 - alpha)

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        # f_p + e^eps alpha = (1 - p) + p (f + e^eps' alpha) with p e^eps' = e^eps - 1 + p.
        if self.p == 0.0:
            return np.zeros_like(np.asarray(epsilon, float))
        return self.p * self.f._delta(_mixed_epsilon(np.asarray(epsilon, float), self.p))

    def __repr__(self) -> str:
        return f"MixtureTradeOff({self.f!r}, p={self.p!r})"


def mixture(f: TradeOff, p: float) -> MixtureTradeOff:
    """f_p(alpha) = p f(alpha) + (1 - p)(1 - alpha), p in [0, 1]."""
    return MixtureTradeOff(f, p)


class InverseTradeOff(TradeOff):
    """The generalised inverse f^{-1}(alpha) = inf{t : f(t) <= alpha}: T(Q, P) when f = T(P, Q)."""

    def __init__(self, f: TradeOff) -> None:
        self.f = _check_tradeoff("f", f)
        self.symmetric = f.symmetric

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return self.f._inverse(alpha)

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        return self.f._evaluate(beta)

    def __repr__(self) -> str:
        return f"InverseTradeOff({self.f!r})"


def inverse(f: TradeOff) -> TradeOff:
    """The generalised inverse of f as a trade-off function (f itself when f is symmetric)."""
    f = _check_tradeoff("f", f)
    if f.symmetric:
        return f
    if isinstance(f, TabulatedTradeOff):
        return _reflect_tabulated(f)
    return InverseTradeOff(f)


def _reflect_tabulated(f: TabulatedTradeOff) -> TabulatedTradeOff:
    # reflected vertices, plus (1, 0): the inverse is 0 on [f(0), 1]; at beta = 0 the hull keeps
    # the lowest reflected alpha, the first zero of f
    xs = np.concatenate([f.betas, [1.0]])
    ys = np.concatenate([f.alphas, [0.0]])
    hx, hy = _lower_hull(xs, ys)
    return TabulatedTradeOff(hx, np.minimum(hy, 1.0 - hx))


class SubsampledGaussianTradeOff(TradeOff):
    """C_p(G_mu) in closed form ([DRS19] Thm 4.2 / seed 000 section 3.4), p in [0, 1].

    With x* = Phi(-mu/2) the fixed point of G_mu and f_p = p G_mu + (1 - p) Id:
    ``C_p(alpha) = f_p(alpha)`` on [0, x*], ``x* + f_p(x*) - alpha`` on [x*, f_p(x*)] and
    ``f_p^{-1}(alpha)`` on [f_p(x*), 1]. f_p^{-1} is evaluated by bisection to double precision.
    The (epsilon, delta) profile is exact: ``delta(eps) = p delta_mu(eps')`` with
    ``e^eps' = 1 + (e^eps - 1)/p`` (privacy amplification by subsampling of G_mu).
    This is the trade-off of one step of an f-DP mechanism on a uniformly random subset of fixed
    size p n without replacement, replace-one neighbours.
    """

    symmetric = True

    def __init__(self, mu: float, p: float) -> None:
        self.mu = check_nonnegative("mu", mu)
        self.p = check_probability("p", p)
        self.base = GaussianTradeOff(self.mu)
        self.mixture = MixtureTradeOff(self.base, self.p)
        self.x_star = self.base.fixed_point()
        self.y_star = float(self.mixture._evaluate(np.asarray(self.x_star)))

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        alpha = np.asarray(alpha, float)
        result = self.x_star + self.y_star - alpha
        left = alpha <= self.x_star
        right = alpha >= self.y_star
        if np.any(left):
            result = np.where(left, self.mixture._evaluate(np.where(left, alpha, 0.0)), result)
        if np.any(right):
            result = np.where(right, self.mixture._inverse(np.where(right, alpha, 1.0)), result)
        return result

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        return self._evaluate(beta)

    def fixed_point(self) -> float:
        return 0.5 * (self.x_star + self.y_star)

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        eps = np.asarray(epsilon, float)
        if self.p == 0.0 or self.mu == 0.0:
            return np.zeros_like(eps)
        return self.p * np.asarray(gdp_delta(_mixed_epsilon(eps, self.p), self.mu))

    def _epsilon(self, delta: float) -> float:
        if self.p == 0.0 or self.mu == 0.0 or delta / self.p >= 1.0:
            return 0.0
        inner = float(gdp_epsilon(delta / self.p, self.mu))
        # e^eps = 1 + p (e^eps' - 1), without overflow
        return inner + math.log(self.p + (1.0 - self.p) * math.exp(-inner))

    def __repr__(self) -> str:
        return f"SubsampledGaussianTradeOff(mu={self.mu!r}, p={self.p!r})"


def subsample(f: TradeOff, p: float) -> TradeOff:
    """The subsampling operator C_p(f) = min{f_p, f_p^{-1}}** (seed 000 section 3.4), symmetric.

    * ``GaussianTradeOff``: closed form :class:`SubsampledGaussianTradeOff` (accurate to ~1e-15);
    * ``TabulatedTradeOff``: exact (the lower convex hull of the vertices of f_p and f_p^{-1});
    * anything else: the same hull built from :func:`lower_tabulation` of f_p, a rigorous lower
      bound on C_p(f) within its certified gap (1e-8 vertically and horizontally).

    ``p = 0`` gives Id; ``p = 1`` gives f for symmetric f (min{f, f^{-1}}** otherwise).
    """
    f = _check_tradeoff("f", f)
    p = check_probability("p", p)
    if p == 0.0:
        return identity()
    if isinstance(f, GaussianTradeOff):
        return f if (p == 1.0 or f.mu == 0.0) else SubsampledGaussianTradeOff(f.mu, p)
    if p == 1.0 and f.symmetric:
        return f
    if isinstance(f, TabulatedTradeOff):
        a, b = f.alphas, f.betas
        mixed = p * b + (1.0 - p) * (1.0 - a)
    else:
        table = lower_tabulation(MixtureTradeOff(f, p))
        a, mixed = table.alphas, table.betas
    # graph of f_p plus its reflection (the graph of f_p^{-1}, with its vertical parts)
    xs = np.concatenate([a, mixed, [0.0, 1.0]])
    ys = np.concatenate([mixed, a, [1.0, 0.0]])
    hx, hy = _lower_hull(xs, ys)
    hy = np.minimum(hy, 1.0 - hx)
    return TabulatedTradeOff(hx, hy, symmetric=True)


class ClientSampledTradeOff(TradeOff):
    """g(alpha) = max(f(alpha), 1 - alpha - p^2): seed 000 Lemma 3.8 (see that function)."""

    def __init__(self, f: TradeOff, p: float) -> None:
        self.f = _check_tradeoff("f", f)
        self.p = check_probability("p", p)
        self.symmetric = f.symmetric

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return np.maximum(self.f._evaluate(alpha), 1.0 - alpha - self.p**2)

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        # {t : max(f, h)(t) <= beta} is the intersection of two upper intervals
        return np.maximum(self.f._inverse(beta), np.maximum(0.0, 1.0 - self.p**2 - beta))

    def __repr__(self) -> str:
        return f"ClientSampledTradeOff({self.f!r}, p={self.p!r})"


def client_sampling_lower_bound(f: TradeOff, p: float) -> ClientSampledTradeOff:
    """Seed 000 Lemma 3.8: one round with Poisson client sampling at rate p is g-DP,
    ``g(alpha) = max(f(alpha), 1 - alpha - p^2)``.

    Setting: a federated round where client j's local training is f-DP and each client is sampled
    independently with probability p; the attacked record's client j and the observing client i
    are both sampled with probability p^2, the only event in which the two output laws differ
    (Lemma B.1: a mixture differing on an event of mass p_E is max{f, 1 - alpha - p_E}-DP). g is
    convex, so it is a trade-off function. Note that seed 000 Theorem 2 drops the p^2 branch.
    """
    return ClientSampledTradeOff(f, p)


# =========================================================================== composition
def _atoms(f: TabulatedTradeOff) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A discrete pair (P, Q) with T(P, Q) = f: masses P, Q and log likelihood ratios log Q/P.

    Segment k of f carries P mass d alpha_k and Q mass -d beta_k (the Neyman-Pearson test rejects
    atoms in decreasing order of Q/P); f(0) < 1 adds an atom with P mass 0 and Q mass 1 - f(0).
    """
    a, b = f._alphas, f._betas
    p_mass = np.diff(a)
    q_mass = np.maximum(-np.diff(b), 0.0)
    if b[0] < 1.0:
        p_mass = np.concatenate([[0.0], p_mass])
        q_mass = np.concatenate([[1.0 - b[0]], q_mass])
    with np.errstate(divide="ignore"):
        log_ratio = np.log(q_mass) - np.log(p_mass)
    return p_mass, q_mass, log_ratio


def _supporting_envelope(
    alphas: np.ndarray,
    betas: np.ndarray,
    slopes: np.ndarray,
    max_vertices: int,
    symmetric: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Max of at most ~max_vertices supporting lines of a convex piecewise-linear function.

    Segment k starts at vertex (alphas[k], betas[k]) and has slope ``slopes[k]`` (<= 0); its line
    supports the function, so any maximum of such lines (and of 0) is a LOWER bound. Segments are
    picked evenly along s = alpha - beta (shape), along log(-slope) = epsilon (so the
    (epsilon, delta) profile is kept: epsilon(delta) grows by at most the epsilon spacing) and
    along log(1 - intercept) = log delta(epsilon). For a symmetric function only slopes <= -1 are
    picked and their reflections added, keeping the result symmetric. ``betas`` must be accurate
    relative to their size near 0 (the reflection divides by small slopes).
    """
    usable = np.isfinite(slopes) & (slopes < 0)
    if symmetric:
        usable &= slopes <= -1.0
    index = np.flatnonzero(usable)
    if index.size == 0:
        if symmetric:  # only flat parts: the symmetric function is min(1 - alpha, ...) -> keep 0
            return np.array([0.0, 1.0]), np.array([0.0, 0.0])
        return np.array([0.0, 1.0]), np.array([0.0, 0.0])
    slope = slopes[index]
    intercept = betas[index] - slope * alphas[index]
    per_rule = max((max_vertices // (2 if symmetric else 1)) // 3, 2)
    keys = [
        alphas[index] - betas[index],  # non-decreasing along the segments
        -np.log(-slope),  # non-decreasing
        -np.log(np.maximum(1.0 - intercept, 1e-300)),  # non-decreasing
    ]
    picks = [np.array([0, index.size - 1])]
    for key in keys:
        targets = np.linspace(key[0], key[-1], per_rule)
        picks.append(np.searchsorted(key, targets, side="left").clip(0, index.size - 1))
    chosen = np.unique(np.concatenate(picks))
    line_slopes, line_intercepts = slope[chosen], intercept[chosen]
    if symmetric:  # reflection about beta = alpha of beta = c + s alpha: alpha = c + s beta
        reflected_intercepts = alphas[index][chosen] - betas[index][chosen] / line_slopes
        line_slopes = np.concatenate([line_slopes, 1.0 / line_slopes])
        line_intercepts = np.concatenate([line_intercepts, reflected_intercepts])
    return _upper_envelope(
        np.concatenate([line_slopes, [0.0]]), np.concatenate([line_intercepts, [0.0]])
    )


def _coarsen(f: TabulatedTradeOff, max_vertices: int) -> TabulatedTradeOff:
    """f itself if small enough, else a lower bound with about ``max_vertices`` vertices."""
    if f._alphas.size <= max_vertices:
        return f
    slopes = np.diff(f._betas) / np.diff(f._alphas)
    xs, ys = _supporting_envelope(f._alphas[:-1], f._betas[:-1], slopes, max_vertices, f.symmetric)
    return TabulatedTradeOff(
        xs, np.minimum(ys, 1.0 - xs), tol=1e-7, symmetric=True if f.symmetric else None
    )


def _tensor_tabulated(
    f: TabulatedTradeOff, g: TabulatedTradeOff, max_vertices: int
) -> TabulatedTradeOff:
    """Exact f (x) g from the product of the discrete pairs, then coarsened (lower bound)."""
    fp, fq, fr = _atoms(_coarsen(f, max_vertices))
    gp, gq, gr = _atoms(_coarsen(g, max_vertices))
    p_mass = np.multiply.outer(fp, gp).ravel()
    q_mass = np.multiply.outer(fq, gq).ravel()
    with np.errstate(invalid="ignore"):
        log_ratio = np.add.outer(fr, gr).ravel()
    keep = (p_mass > 0) | (q_mass > 0)  # drops the only inf - inf (mass 0 x mass 0) atoms
    p_mass, q_mass, log_ratio = p_mass[keep], q_mass[keep], log_ratio[keep]
    order = np.argsort(-log_ratio, kind="stable")
    p_mass, q_mass, log_ratio = p_mass[order], q_mass[order], log_ratio[order]
    alphas = np.clip(np.concatenate([[0.0], np.cumsum(p_mass)]), 0.0, 1.0)
    # beta_k = 1 - sum_{j<k} q_j = sum_{j>=k} q_j: the tail sum keeps small betas accurate
    head = 1.0 - np.concatenate([[0.0], np.cumsum(q_mass)])
    tail = np.concatenate([np.cumsum(q_mass[::-1])[::-1], [0.0]])
    betas = np.clip(np.where(head > 0.5, head, tail), 0.0, 1.0)
    alphas[-1], betas[-1] = 1.0, 0.0
    symmetric = f.symmetric and g.symmetric
    if log_ratio.size > max_vertices:
        with np.errstate(over="ignore"):
            slopes = np.where(p_mass > 0, -np.exp(log_ratio), -np.inf)
        xs, ys = _supporting_envelope(alphas[:-1], betas[:-1], slopes, max_vertices, symmetric)
        return TabulatedTradeOff(
            xs, np.minimum(ys, 1.0 - xs), tol=1e-7, symmetric=True if symmetric else None
        )
    # equal alphas (P = 0 atoms, or P mass below rounding): keep the last, lowest, beta
    last = np.concatenate([alphas[1:] != alphas[:-1], [True]])
    alphas, betas = alphas[last], betas[last]
    alphas[0] = 0.0
    return TabulatedTradeOff(
        alphas, np.minimum(betas, 1.0 - alphas), tol=1e-7, symmetric=True if symmetric else None
    )


def compose(f: TradeOff, *others: TradeOff, max_vertices: int = 2000) -> TradeOff:
    """Tensor product f (x) g (x) ...: trade-off of the (adaptive) composition ([DRS19] Thm 3.2).

    * all Gaussian: exact, G_mu1 (x) G_mu2 = G_sqrt(mu1^2 + mu2^2); Id (= G_0) is neutral;
    * otherwise each factor is made piecewise linear (:func:`lower_tabulation`, a rigorous lower
      bound, for non-tabulated factors) and the product is computed EXACTLY from the equivalent
      discrete pairs (P, Q): product measures, atoms sorted by likelihood ratio.
      If that has more than ``max_vertices`` segments it is replaced by the maximum of
      ``max_vertices`` of its supporting lines, again a lower bound (never overstates privacy).

    Cost: the product of the vertex counts (memory and time), so keep ``max_vertices`` moderate.
    For many-fold compositions of subsampled Gaussians prefer the PLD accountant.
    """
    max_vertices = check_int("max_vertices", max_vertices, minimum=4)
    result = _check_tradeoff("f", f)
    for index, other in enumerate(others):
        other = _check_tradeoff(f"others[{index}]", other)
        if isinstance(result, GaussianTradeOff) and isinstance(other, GaussianTradeOff):
            result = GaussianTradeOff(gdp_compose(result.mu, other.mu))
        elif isinstance(other, GaussianTradeOff) and other.mu == 0.0:
            continue
        elif isinstance(result, GaussianTradeOff) and result.mu == 0.0:
            result = other
        else:
            result = _tensor_tabulated(
                lower_tabulation(result), lower_tabulation(other), max_vertices
            )
    return result


def tensor_power(f: TradeOff, k: int, *, max_vertices: int = 2000) -> TradeOff:
    """f^{(x) k}, the k-fold composition (exact for Gaussians: G_{sqrt(k) mu}); see :func:`compose`.

    Uses repeated squaring, so a tabulated f costs O(log k) products.
    """
    f = _check_tradeoff("f", f)
    k = check_int("k", k, minimum=0)
    if k == 0:
        return identity()
    if isinstance(f, GaussianTradeOff):
        return GaussianTradeOff(math.sqrt(k) * f.mu)
    result: TradeOff | None = None
    square: TradeOff = f
    while k:
        if k & 1:
            result = (
                square if result is None else compose(result, square, max_vertices=max_vertices)
            )
        k >>= 1
        if k:
            square = compose(square, square, max_vertices=max_vertices)
    assert result is not None
    return result


# =========================================================================== conversion
def epsilon_delta_profile(f: TradeOff, epsilons: float | np.ndarray) -> float | np.ndarray:
    """delta(epsilon) = 1 + f*(-e^epsilon) = 1 - inf_alpha (f(alpha) + e^epsilon alpha).

    f-DP implies (epsilon, delta(epsilon))-DP for every epsilon >= 0 ([DRS19] Prop. 2.12; an
    equivalence for symmetric f). Closed form for Gaussians (and C_p of Gaussians), exact over the
    vertices for tabulated f, golden-section search (absolute accuracy ~1e-12) otherwise.
    """
    return _check_tradeoff("f", f).delta(epsilons)


def epsilon_for_delta(f: TradeOff, delta: float) -> float:
    """Smallest epsilon >= 0 with delta(epsilon) <= delta; ``inf`` if none (delta < 1 - f(0))."""
    return _check_tradeoff("f", f).epsilon(delta)


# =========================================================================== checks
def _check_grid(grid: object) -> np.ndarray:
    if grid is None:
        return np.linspace(0.0, 1.0, 1001)
    return _alpha("grid", grid)[0].ravel()


def is_symmetric(f: TradeOff, grid: object = None, tol: float = 1e-9) -> bool:
    """Whether f equals its generalised inverse on ``grid`` (default 1001 points) to ``tol``."""
    f = _check_tradeoff("f", f)
    tol = check_nonnegative("tol", tol)
    alphas = _check_grid(grid)
    return bool(np.max(np.abs(f(alphas) - f.inv(alphas))) <= tol)


def is_convex(f: TradeOff, grid: object = None, tol: float = 1e-9) -> bool:
    """Whether f lies on or below the chord of neighbouring grid points (to ``tol``)."""
    f = _check_tradeoff("f", f)
    tol = check_nonnegative("tol", tol)
    a = np.unique(_check_grid(grid))
    if a.size < 3:
        return True
    b = np.asarray(f(a), float)
    chord = b[:-2] + (b[2:] - b[:-2]) * ((a[1:-1] - a[:-2]) / (a[2:] - a[:-2]))
    return bool(np.all(b[1:-1] - chord <= tol))
