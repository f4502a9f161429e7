"""Which rounds' metrics rows carry every configured accountant, and which only the per-round set.

A privacy plan that composes accountants whose answer for r rounds is recomputed from scratch
(the sampled PLD's FFT composition, DP-DSGD's basic compositions; see
:mod:`privfl.algorithms.plan_results`) gives two lists: ``results(r)`` (every accountant) and
``round_results(r)`` (those whose round costs one step: RDP, closed forms, CLT estimates,
per-iteration numbers). A run's metrics row of round r carries ``results(r)`` when
:meth:`AccountingCadence.full` says so and ``round_results(r)`` otherwise, and says which in
its ``privacy_methods`` key (``"all"`` or ``"per-round"``). Full rows: the last planned round
(``federated.rounds``; its results are the planned card's, computed before round 1) and every
``privacy.full_accounting_every``-th round (1: every round, the cost of a PLD composition
each). privacy.json, summary.json's headline and ``check-privacy``'s final check always take
every accountant, and a budget stop (``stop.epsilon``) decides on every accountant too: it asks
the full set only when no per-round bound already stays within the budget
(:meth:`privfl.runs.run_stops.StoppingRules.budget_exceeded`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from privfl._validation import check_int

__all__ = ["FULL", "PER_ROUND", "AccountingCadence"]

#: the ``privacy_methods`` value of a row with every configured accountant
FULL = "all"
#: the ``privacy_methods`` value of a row with the per-round set (``plan.round_results``)
PER_ROUND = "per-round"


@dataclass(frozen=True)
class AccountingCadence:
    """Full rows: round ``planned_rounds`` and (``every`` not None) every ``every``-th round."""

    planned_rounds: int
    every: int | None = None

    def __post_init__(self) -> None:
        check_int("planned_rounds", self.planned_rounds, 1)
        if self.every is not None:
            check_int("every", self.every, 1)

    @classmethod
    def from_config(cls, config: Any) -> AccountingCadence:
        """The cadence of an :class:`~privfl.config.ExperimentConfig`: ``federated.rounds``
        and ``privacy.full_accounting_every`` (the runner and ``check-privacy`` both use it)."""
        return cls(config.federated.rounds, config.privacy.full_accounting_every)

    def full(self, rounds: int) -> bool:
        """Whether the row of round ``rounds`` carries every configured accountant."""
        rounds = check_int("rounds", rounds, 0)
        return rounds >= self.planned_rounds or (
            self.every is not None and rounds % self.every == 0)
