"""The base class :class:`TradeOff` and the validation and numerical helpers its subclasses share.

A trade-off function ``f = T(P, Q)`` (Dong, Roth, Su 2019 [DRS19]) maps a type I error ``alpha``
to the smallest type II error of a test of ``P`` against ``Q`` at that level. :class:`TradeOff`
evaluates ``f`` on scalars or arrays and derives, numerically unless a subclass has a closed
form, its generalised inverse (bisection), fixed point, (epsilon, delta) profile
(``delta(epsilon) = 1 - min_alpha (f(alpha) + e^epsilon alpha)``, [DRS19] Prop. 2.12, by
golden-section search) and the smallest epsilon for a delta.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from privfl._validation import as_scalar_or_array, check_delta, check_range_array
from privfl.accounting.safe_epsilon import smallest_safe_epsilon

_BISECTION_STEPS = 64  # halving [0, 1] 64 times reaches the spacing of doubles
_GOLDEN_STEPS = 120


def _alpha(name: str, value: object) -> tuple[np.ndarray, bool]:
    return check_range_array(name, value, 0.0, 1.0)


def _epsilons(value: object) -> tuple[np.ndarray, bool]:
    return check_range_array("epsilon", value, 0.0, math.inf, high_open=True)


def check_tradeoff(name: str, value: object) -> TradeOff:
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


def exp_epsilon_times(epsilon: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """e^epsilon * alpha with 0 * inf := 0."""
    with np.errstate(over="ignore", invalid="ignore"):
        product = np.exp(epsilon) * alpha
    return np.where(alpha == 0.0, 0.0, product)


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
            return self._evaluate(alpha) + exp_epsilon_times(eps, alpha)

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
