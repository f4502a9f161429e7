"""Participation schemes and the L2 sensitivity of a correlated-noise encoder ``C``.

A matrix-factorization mechanism releases ``C x + Z`` (``Z`` i.i.d. Gaussian, std ``z`` per
coordinate) where row ``t`` of ``x`` (T x d) is step t's sum of clipped client updates (each of
L2 norm at most 1). Neighbouring relation: **replace-with-zero** (zero-out): one client's
contributions ``g_i`` (||g_i|| <= 1) at the steps ``pi`` where it participates are replaced by
zeros. The output moves by ``sum_{i in pi} C[:, i] g_i^T`` whose squared Frobenius norm is
``sum_{i, j in pi} X_ij <g_i, g_j>`` with the Gram matrix ``X = C^T C``. The sensitivity is
the max of its square root over the allowed patterns ``pi`` and contributions.

Participation schemes (:class:`Participation`):

* ``single``: each client at most once in T steps (k = 1).
* ``any`` schedule with at most ``k`` participations, consecutive ones at least ``b`` steps
  apart ("min separation b").
* ``cyclic`` with period ``b``: participation at ``i, i + b, i + 2b, ...`` for an offset
  ``i < b`` (multi-epoch training with b steps per epoch), ``k = ceil(T / b)``.

How the sensitivity is computed (:func:`sensitivity`); each answer says whether it is exact:

* k = 1: ``max_i ||C[:, i]||`` — exact for any C.
* ``X_ij = 0`` for every pair ``|i - j| >= b`` (e.g. lower-triangular C with band <= b): the
  cross terms vanish, so the squared sensitivity is the largest sum of ``X_ii`` over an
  allowed pattern — exact for any sign, found by dynamic programming (:func:`max_separated_sum`).
* ``X >= 0`` entrywise (e.g. C >= 0): the max is attained with all ``g_i`` equal
  (Choquette-Choo et al. 2023, "Multi-Epoch Matrix Factorization Mechanisms for Private
  Machine Learning", ICML, Thm 2), so it is ``max_pi sqrt(1^T X_pi 1)`` — exact by enumeration
  for cyclic schedules (b patterns) or when the patterns are few (``brute_force_limit``).
* otherwise a sound **upper bound**: ``sum_{i,j in pi} |X_ij| <= sum_{i in pi} r_i`` with
  ``r_i = |X_ii| + (sum of the k - 1 largest |X_ij| over |i - j| >= b)``, maximised over the
  patterns by the same dynamic programme. (For cyclic schedules with mixed signs, the bound is
  ``max_pi sqrt(sum |X_pi|)``.)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from privfl._validation import check_choice, check_int

Schedule = Literal["any", "cyclic"]
SCHEDULES = ("any", "cyclic")


@dataclass(frozen=True)
class Participation:
    """How often one client may contribute over ``steps`` rounds (see the module docstring).

    ``max_participations`` k >= 1; ``min_separation`` b >= 1 (consecutive participations at
    least b steps apart); ``schedule`` ``"any"`` (every pattern meeting the two bounds) or
    ``"cyclic"`` (offsets ``i, i + b, ...``; then k must be ``ceil(T / b)``).
    """

    steps: int
    max_participations: int = 1
    min_separation: int = 1
    schedule: Schedule = "any"

    def __post_init__(self) -> None:
        steps = check_int("steps", self.steps, minimum=1)
        k = check_int("max_participations", self.max_participations, minimum=1)
        b = check_int("min_separation", self.min_separation, minimum=1)
        check_choice("schedule", self.schedule, SCHEDULES)
        most = -(-steps // b)
        if k > most:
            raise ValueError(
                f"max_participations = {k} cannot be met with min_separation = {b} in "
                f"steps = {steps}: allowed range 1..{most} (= ceil(steps / min_separation))"
            )
        if self.schedule == "cyclic" and k != most:
            raise ValueError(
                f"max_participations = {k} with schedule 'cyclic': must be ceil(steps / "
                f"min_separation) = {most}"
            )

    @classmethod
    def single(cls, steps: int) -> Participation:
        """Each client at most once in ``steps`` rounds."""
        steps = check_int("steps", steps, minimum=1)
        return cls(steps, 1, steps, "any")

    @classmethod
    def cyclic(cls, steps: int, period: int) -> Participation:
        """Every ``period`` rounds from an unknown offset (multi-epoch, ``period`` per epoch)."""
        steps = check_int("steps", steps, minimum=1)
        period = check_int("period", period, minimum=1, maximum=steps)
        return cls(steps, -(-steps // period), period, "cyclic")

    @classmethod
    def groups(cls, steps: int, groups: int) -> Participation:
        """Clients in ``groups`` balanced groups, group ``t mod groups`` at step t: cyclic with
        period ``groups``, or single when ``groups >= steps`` (one step per client)."""
        steps = check_int("steps", steps, minimum=1)
        groups = check_int("groups", groups, minimum=1)
        return cls.single(steps) if groups >= steps else cls.cyclic(steps, groups)

    @property
    def label(self) -> str:
        """A one-line description for privacy labels."""
        if self.max_participations == 1:
            return f"at most 1 participation per client in {self.steps} rounds"
        if self.schedule == "cyclic":
            return (
                f"cyclic: every {self.min_separation} rounds from a fixed offset, "
                f"{self.max_participations} participations in {self.steps} rounds"
            )
        return (
            f"at most {self.max_participations} participations per client in {self.steps} "
            f"rounds, at least {self.min_separation} rounds apart (any schedule)"
        )

    def patterns(self) -> Iterator[tuple[int, ...]]:
        """Every maximal allowed pattern (0-based steps); with X >= 0 only these matter."""
        t, k, b = self.steps, self.max_participations, self.min_separation
        if self.schedule == "cyclic":
            for offset in range(b):
                yield tuple(range(offset, t, b))
            return
        yield from _separated(0, t, k, b)

    def pattern_count(self) -> int:
        """How many patterns :meth:`patterns` yields (cheap dynamic programme)."""
        if self.schedule == "cyclic":
            return self.min_separation
        t, k, b = self.steps, self.max_participations, self.min_separation
        count = 0
        for j in range(1, k + 1):
            free = t - (j - 1) * (b - 1)  # stars and bars: choose j of `free` slots
            if free >= j:
                count += math.comb(free, j)
        return count


def _separated(start: int, t: int, k: int, b: int) -> Iterator[tuple[int, ...]]:
    """Non-empty patterns within ``[start, t)`` of at most k steps with gaps >= b."""
    for first in range(start, t):
        yield (first,)
        if k > 1:
            for rest in _separated(first + b, t, k - 1, b):
                yield (first, *rest)


@dataclass(frozen=True)
class Sensitivity:
    """L2 sensitivity of C under a participation scheme, in units of the clip norm."""

    value: float
    exact: bool
    method: str

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {"sensitivity": self.value, "exact": self.exact, "method": self.method}


def _check_matrix(name: str, matrix: object, columns: int | None = None) -> np.ndarray:
    array = np.asarray(matrix, dtype=float)
    if array.ndim != 2 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be a finite non-empty 2-D matrix, got shape {array.shape}")
    if columns is not None and array.shape[1] != columns:
        raise ValueError(
            f"{name} has {array.shape[1]} columns: must equal steps = {columns} of the "
            "participation"
        )
    return array


def max_separated_sum(weights: object, k: int, b: int) -> float:
    """Largest ``sum_{i in pi} w_i`` over patterns of at most k indices with gaps >= b.

    Weights must be non-negative. Dynamic programme over "at most j picks among the first s
    steps": ``best[j][s] = max(best[j][s-1], w[s-1] + best[j-1][max(s-b, 0)])`` in O(k T).
    """
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be a non-empty 1-D array of finite values >= 0")
    t = w.size
    k = check_int("k", k, minimum=1)
    b = check_int("b", b, minimum=1)
    previous = np.zeros(t + 1)  # at most j - 1 picks
    for _ in range(k):
        current = np.zeros(t + 1)
        for s in range(1, t + 1):
            current[s] = max(current[s - 1], w[s - 1] + previous[max(s - b, 0)])
        previous = current
    return float(previous[t])


def sensitivity(
    encoder: object, participation: Participation, *, brute_force_limit: int = 20_000
) -> Sensitivity:
    """The L2 sensitivity of ``C`` (``encoder``, n x T) under ``participation``.

    Exact where the module docstring says so, a sound upper bound otherwise (``exact`` says
    which). ``brute_force_limit`` caps the patterns enumerated for an exact answer when
    ``C^T C >= 0`` and the schedule is ``"any"``.
    """
    if not isinstance(participation, Participation):
        raise ValueError(
            f"participation = {participation!r}: must be a privfl.mechanisms.sensitivity."
            "Participation"
        )
    c = _check_matrix("encoder", encoder, participation.steps)
    limit = check_int("brute_force_limit", brute_force_limit, minimum=0)
    gram = c.T @ c
    return sensitivity_from_gram(gram, participation, brute_force_limit=limit)


def sensitivity_from_gram(
    gram: np.ndarray, participation: Participation, *, brute_force_limit: int = 20_000
) -> Sensitivity:
    """:func:`sensitivity` from the Gram matrix ``X = C^T C`` (T x T, symmetric)."""
    x = _check_matrix("gram", gram, participation.steps)
    if x.shape[0] != x.shape[1] or not np.allclose(x, x.T, rtol=1e-10, atol=1e-12):
        raise ValueError(f"gram must be a symmetric square matrix, got shape {x.shape}")
    t, k, b = participation.steps, participation.max_participations, participation.min_separation
    diag = np.clip(np.diag(x), 0.0, None)
    if k == 1:
        return Sensitivity(float(math.sqrt(diag.max())), True, "max column norm")
    far = np.abs(np.subtract.outer(np.arange(t), np.arange(t))) >= b
    nonnegative = bool(np.all(x >= -1e-12 * max(1.0, float(diag.max()))))
    if participation.schedule == "cyclic":
        values = x if nonnegative else np.abs(x)
        best = max(float(values[np.ix_(p, p)].sum()) for p in participation.patterns())
        method = "max over the b cyclic patterns" + ("" if nonnegative else " of |X| (bound)")
        return Sensitivity(math.sqrt(max(best, 0.0)), nonnegative, method)
    if not np.any(x[far]):
        best = max_separated_sum(diag, k, b)
        return Sensitivity(math.sqrt(best), True, "banded Gram: dynamic programme over diag")
    if nonnegative and participation.pattern_count() <= brute_force_limit:
        best = max(float(x[np.ix_(p, p)].sum()) for p in participation.patterns())
        return Sensitivity(math.sqrt(best), True, "X >= 0: max over every pattern")
    magnitude = np.abs(np.where(far, x, 0.0))
    top = np.sort(magnitude, axis=1)[:, ::-1][:, : k - 1].sum(axis=1)
    best = max_separated_sum(diag + top, k, b)
    return Sensitivity(math.sqrt(best), False, "bound: diag + top-(k-1) |X_ij| per column")


def sensitivity_brute_force(encoder: object, participation: Participation) -> float:
    """``max_pi sqrt(1^T X_pi 1)`` over every pattern (tests; exact when ``C^T C >= 0``)."""
    c = _check_matrix("encoder", encoder, participation.steps)
    gram = c.T @ c
    best = max(float(gram[np.ix_(p, p)].sum()) for p in participation.patterns())
    return math.sqrt(max(best, 0.0))


def sign_brute_force(encoder: object, participation: Participation) -> float:
    """Max over patterns and signs ``g_i in {-1, +1}`` of ``||sum_i g_i C[:, i]||`` (1-D truth;
    tests compare it with the bound for C with mixed signs)."""
    c = _check_matrix("encoder", encoder, participation.steps)
    best = 0.0
    for p in participation.patterns():
        cols = c[:, list(p)]
        for signs in itertools.product((-1.0, 1.0), repeat=len(p)):
            best = max(best, float(np.linalg.norm(cols @ np.asarray(signs))))
    return best
