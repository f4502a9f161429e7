"""A run's first plan: what was fixed when it was created (the planned rounds, the budget).

:func:`first_plan_record` writes it (run.json's ``plan``, at creation) and :func:`first_plan`
reads it: the one place that knows where it lives (a release ledger's creation record may
replace run.json later). :func:`extension_note` words what it means for a run without a
budget that was extended: its bound is the bound of a run planned that long from the start,
which assumes that the decision to extend did not read the results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["FirstPlan", "extension_note", "first_plan", "first_plan_record"]


@dataclass(frozen=True)
class FirstPlan:
    """``rounds``: ``federated.rounds`` at creation; ``epsilon_budget``: the budget (None
    without one); ``filter``: the budget's filter as fixed at creation (None without one)."""

    rounds: int
    epsilon_budget: float | None = None
    filter: dict[str, Any] | None = None


def first_plan_record(config: Any, budget: Any = None) -> dict[str, Any]:
    """run.json's ``plan`` for a run created with ``config`` (``budget``: its
    :class:`~privfl.runs.budget.PlanFilter`, or None)."""
    record: dict[str, Any] = {"rounds": int(config.federated.rounds),
                              "epsilon_budget": config.privacy.epsilon_budget}
    if budget is not None:
        record["filter"] = budget.record()
    return record


def first_plan(directory: Any) -> FirstPlan | None:
    """The first plan of the run in ``directory`` (a
    :class:`~privfl.runs.rundir.RunDirectory`); None for a run made before it was recorded."""
    plan = directory.run_record().get("plan")
    if not isinstance(plan, dict):
        return None
    rounds = plan.get("rounds")
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        return None
    budget = plan.get("epsilon_budget")
    budget = float(budget) if isinstance(budget, (int, float)) and not isinstance(
        budget, bool) else None
    recorded = plan.get("filter")
    return FirstPlan(rounds, budget, recorded if isinstance(recorded, dict) else None)


def extension_note(plan: FirstPlan | None, rounds: int) -> str | None:
    """The note of a run without a budget whose ``federated.rounds`` is now ``rounds``, more
    than its first plan's (None otherwise)."""
    if plan is None or plan.epsilon_budget is not None or rounds <= plan.rounds:
        return None
    return (f"First plan: {plan.rounds} rounds at creation, extended to {rounds}. The bound "
            f"is that of a run planned for {rounds} rounds from the start: it assumes the "
            "decision to extend did not read the results. To train, look and train more, "
            "create the run with privacy.epsilon_budget (a privacy filter then covers "
            "extensions decided on the results).")
