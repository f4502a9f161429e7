"""Bisection over the rounds: the first round at which a monotone yes/no question turns yes.

Epsilon grows with the rounds, so "does r rounds reach this epsilon" (the ledger's floor,
:mod:`privfl.runs.ledger_guarantee`) and "would r rounds exceed the budget" (a data-dependent
stop's guarantee, :mod:`privfl.runs.run_stops`) are both false up to some round and true after.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["first_round_where"]


def first_round_where(after: int, upto: int, holds: Callable[[int], bool]) -> int:
    """The smallest ``r`` in ``after + 1 .. upto`` with ``holds(r)``, for a ``holds`` that is
    false at ``after`` and monotone (false, then true); ``upto`` when no smaller round holds
    (``holds(upto)`` is taken as true, not asked). O(log(upto - after)) calls."""
    for name, value in (("after", after), ("upto", upto)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} = {value!r} is not allowed: must be an int")
    if upto <= after:
        raise ValueError(f"upto = {upto} is out of range: must be > after = {after}")
    low, high = after, upto
    while high - low > 1:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle
    return high
