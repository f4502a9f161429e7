"""The worst instance of a family of adversarial pairs: maximise the exact delta over one free
parameter.

An audit of one concrete pair gives a *lower* bound on a mechanism's delta(epsilon); a family of
pairs indexed by a free parameter (the scale ``a`` of the other records' gradients in
:func:`~privfl.accounting.audit.pairs.participation_pair`) gives the largest lower bound at the
parameter that maximises it. :func:`maximise_delta` finds it in two stages: the exact
``E_g(P || Q)`` (:func:`~privfl.accounting.audit.exact.hockey_stick`, the "add" direction) on a
uniform grid of ``grid`` points over ``[low, high]``, then Brent's bounded scalar search
(``scipy.optimize.minimize_scalar``, ``method="bounded"``) between the best grid point's two
neighbours, to ``xatol``. The delta of the maximiser is then taken in both directions
(:func:`~privfl.accounting.audit.exact.hockey_stick_both`). A grid fine enough that the best
cell holds the global maximum is the one assumption (the deltas here are smooth and unimodal
in ``a``); every evaluation is returned, so a caller can show the curve.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privfl._validation import check_int, check_positive
from privfl.accounting.audit.pairs import AdversarialPair

__all__ = ["WorstCase", "maximise_delta"]


@dataclass(frozen=True)
class WorstCase:
    """The maximiser ``parameter`` of the family's delta at ``epsilon``, its delta (the larger
    of the two directions), and every ``(parameter, delta in the add direction)`` evaluated."""

    parameter: float
    delta: float
    epsilon: float
    low: float
    high: float
    evaluations: tuple[tuple[float, float], ...]

    def grid_best(self) -> tuple[float, float]:
        """The best ``(parameter, delta)`` of the evaluations."""
        return max(self.evaluations, key=lambda e: e[1])


def maximise_delta(family: Callable[[float], AdversarialPair], low: float, high: float,
                   epsilon: float, *, grid: int = 11, xatol: float = 1e-3) -> WorstCase:
    """The parameter in ``[low, high]`` at which the pair ``family(parameter)`` has the largest
    exact delta at ``epsilon`` (module docstring: a grid of ``grid`` points, then Brent's
    bounded search between the best point's neighbours to ``xatol``)."""
    from scipy.optimize import minimize_scalar

    from privfl.accounting.audit.exact import hockey_stick, hockey_stick_both

    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ValueError(f"[low, high] = [{low!r}, {high!r}] is not allowed: must be a finite "
                         "interval with low < high")
    grid = check_int("grid", grid, minimum=3)
    xatol = check_positive("xatol", xatol)
    epsilon = check_positive("epsilon", epsilon)
    evaluations: list[tuple[float, float]] = []

    def delta(parameter: float) -> float:
        pair = family(float(parameter))
        value = hockey_stick(pair.P, pair.Q, epsilon)
        evaluations.append((float(parameter), float(value)))
        return value

    points = np.linspace(low, high, grid)
    values = [delta(x) for x in points]
    best = int(np.argmax(values))
    left, right = points[max(best - 1, 0)], points[min(best + 1, grid - 1)]
    minimize_scalar(lambda x: -delta(x), bounds=(left, right), method="bounded",
                    options={"xatol": xatol})
    parameter, _ = max(evaluations, key=lambda e: e[1])  # Brent's or a grid point, the larger
    pair = family(parameter)
    both = hockey_stick_both(pair.P, pair.Q, epsilon)[2]
    return WorstCase(parameter, float(both), epsilon, float(low), float(high),
                     tuple(sorted(evaluations)))
