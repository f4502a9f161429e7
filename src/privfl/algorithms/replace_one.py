"""A plan's replace-one reading: the tightest rigorous epsilon of its own privacy events with the
neighbouring relation changed to replace-one (its ``replace_one_events``), through its own
accountants at its delta. The replica statement of certified robustness
(:mod:`privfl.robustness.replica_privacy`) and the record-canary audit
(:mod:`privfl.runs.record_canaries`) both read it."""

from __future__ import annotations

from typing import Any

from privfl.accounting.events import AccountingLimitError, UnsupportedEventError
from privfl.accounting.parallel import worst_client_results
from privfl.algorithms.base import tightest_bound

__all__ = ["replace_one_reading"]


def replace_one_reading(plan: Any, rounds: int) -> tuple[float | None, str | None, str]:
    """The tightest rigorous replace-one (epsilon, method) of the plan's own events (its primary
    scope, re-read by the plan's ``replace_one_events``) through its accountants at its delta,
    or (None, None, why not)."""
    reread = getattr(plan, "replace_one_events", None)
    if reread is None:  # the plan declares none: e.g. DP-DSGD's random participation
        return None, None, (f"{type(plan).__name__} declares no replace-one reading of its "
                            "privacy events (its analysis fixes the neighbouring relation): only "
                            "the 2k add/remove reading applies")
    events = reread(rounds)
    results, reasons = [], []
    for method in plan.accountants:
        try:
            results += worst_client_results(events, plan.delta, methods=method,
                                            options=plan.options)
        except (UnsupportedEventError, AccountingLimitError) as error:
            reasons.append(str(error))
    best = tightest_bound(results)
    if best is None:
        return None, None, "; ".join(reasons) or "no accountant of the plan gives a bound"
    return float(best.epsilon), best.method, ""
