"""The rounds a run's guarantee covers at least, read from its release ledger.

A run's headline is the plan's bound after ``accounted`` rounds (re-drawn rounds composed
again, :func:`~privfl.algorithms.base.released_results`). The stop rules of the current
configuration give one count (:func:`~privfl.runs.run_stops.guarantee_rounds`); the ledger
(:mod:`privfl.runs.ledger`) gives a floor that no later action lowers (design principle 7:
"a headline never goes down across any sequence of actions on a run"). The floor is the
largest of:

* the last round whose row the ledger records as released: rows logged before a kill and
  lost from metrics.jsonl or the checkpoint still count (issue 44, item 2); rows a secure
  resume moved to ``redrawn.jsonl`` are composed as re-drawn rounds instead;
* the fewest rounds whose bound reaches every headline printed before for the run
  (``headline`` entries; epsilon grows with the rounds and re-drawn rounds are never removed,
  so the rounds a printed headline covered always reach it), so the headline never goes
  down;
* after a stop that read released results (a ``stop.target_accuracy`` in the plan the run was
  created with, once the run finishes, or any data-dependent stop recorded in the ledger,
  :data:`~privfl.runs.run_stops.DATA_DEPENDENT_STOPS`), every round the *creation* plan's
  public rules allowed: ``rounds`` of the creation record, fewer only where its
  ``stop.epsilon`` / ``stop.mu`` would have stopped earlier. A resume that lowers
  ``federated.rounds`` or removes the stop afterwards does not change the mechanism that ran
  ("up to R rounds, stop on accuracy"; issue 44, item 1).

:func:`ledger_floor` returns it with the reason in words; the runner
(:class:`~privfl.runs.run_finish.RunArtefacts`) and ``check-privacy`` both call it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from privfl._search import first_round_where
from privfl.runs.ledger import Entry
from privfl.runs.run_stops import DATA_DEPENDENT_STOPS, budget_problem, guarantee_rounds

__all__ = ["before_last_headline", "ledger_floor", "written_accounted"]


def before_last_headline(entries: Sequence[Entry]) -> list[Entry]:
    """The entries the last ``headline`` entry was computed from (those before it; all of
    them without one): what ``check-privacy`` recomputes a written headline from."""
    last = max((e.index for e in entries if e.kind == "headline"), default=None)
    return list(entries) if last is None else [e for e in entries if e.index < last]


def _creation_floor(creation: dict[str, Any], ran: int, plan: Any,
                    privacy: Callable[[int, bool], list[Any]]) -> int:
    """Every round the creation plan's public rules allowed after ``ran`` rounds
    (:func:`~privfl.runs.run_stops.guarantee_rounds` of a data-dependent stop, with the
    creation record's ``rounds`` and budget)."""
    from privfl.config.schema import StopConfig

    stop = StopConfig.model_validate(creation.get("stop") or {})
    planned = int(creation.get("rounds") or 0)
    return guarantee_rounds(DATA_DEPENDENT_STOPS[0], ran, max(ran, planned),
                            lambda r: budget_problem(stop, plan, r, privacy) is not None)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _printed_floor(headlines: Sequence[dict[str, Any]], floor: int, plan: Any,
                   privacy: Callable[[int, bool], list[Any]]) -> int:
    """The fewest rounds, at least ``floor``, whose headline bound (re-drawn rounds composed)
    is not below any headline printed before: a bisection between ``floor`` and the rounds
    the largest printed one covered (epsilon grows with the rounds, and re-drawn rounds are
    never removed, so that many rounds reach it)."""
    from privfl.algorithms.base import budget_results, tightest_bound

    printed = [h for h in headlines if _is_number(h.get("epsilon"))]
    if not printed:
        return floor
    target = max(float(h["epsilon"]) for h in printed) * (1 - 1e-12)  # last-unit noise
    top = max(int(h.get("rounds_accounted") or 0) for h in printed)

    def reaches(rounds: int) -> bool:
        best = tightest_bound(budget_results(plan, privacy(rounds, True)))
        return best is not None and best.epsilon >= target

    if top <= floor or reaches(floor):
        return floor
    # reaches(top), or top is all the printed headlines knew of
    return first_round_where(floor, top, reaches)


def ledger_floor(entries: Sequence[Entry], plan: Any, ran: int, *, finished: bool,
                 privacy: Callable[[int, bool], list[Any]], stop_reason: str = ""
                 ) -> tuple[int, str]:
    """``(rounds, why)``: the fewest rounds the guarantee of a run may cover after ``ran``
    rounds, from its ledger ``entries`` (see the module docstring), and why in words ("" when
    the floor is ``ran``). ``finished``: the run stopped for good (not paused by
    ``run.max_rounds``); ``privacy(rounds, full)``: the plan's results after ``rounds`` rounds
    (re-drawn rounds composed); ``stop_reason``: this stop's reason."""
    if not isinstance(ran, int) or isinstance(ran, bool) or ran < 0:
        raise ValueError(f"ran = {ran!r} is out of range: must be an int >= 0")
    floor, why = ran, ""
    # rows a secure resume moved to redrawn.jsonl are composed as re-drawn rounds instead
    moved = {i for e in entries if e.kind == "redrawn" for i in e.payload.get("indices", ())}
    released = max((int(e.payload["round"]) for e in entries
                    if e.kind == "row" and e.index not in moved), default=0)
    if released > floor:
        floor, why = released, (
            f"ledger.jsonl records the rows of rounds 1..{released} as released (rows logged "
            "before an interruption count even when metrics.jsonl or the checkpoint lost them)")
    headlines = [e.payload for e in entries if e.kind == "headline"]
    printed = _printed_floor(headlines, floor, plan, privacy)
    if printed > floor:
        top = max(h["epsilon"] for h in headlines if _is_number(h.get("epsilon")))
        floor, why = printed, (f"a headline of epsilon = {top:.6g} was printed before for this "
                               "run (ledger.jsonl), and a run's headline never goes down")
    creation = next((e.payload for e in entries if e.kind == "creation"), None)
    stops = [h.get("stop_reason") for h in headlines] + [stop_reason]
    target = creation is not None and (creation.get("stop") or {}).get("target_accuracy")
    if creation is not None and ((finished and target)
                                 or any(s in DATA_DEPENDENT_STOPS for s in stops if s)):
        allowed = _creation_floor(creation, floor, plan, privacy)
        if allowed > floor:
            rule = (f"stop.target_accuracy = {target:g}" if target else
                    "a stop on a non-finite result (a divergence)")
            floor, why = allowed, (
                f"the run's mechanism is the one it was created with, up to "
                f"{creation.get('rounds')} rounds with {rule}, a stop that reads released "
                "results (ledger.jsonl's creation record): a later change of federated.rounds "
                "or stop.* does not change it")
    return floor, why


def written_accounted(run_dir: Any, config: Any, plan: Any, rows: list[dict[str, Any]],
                      ran: int, redrawn_rounds: list[Any], written: Any,
                      budget: Any = None) -> tuple[int, str]:
    """``(accounted, why)`` of a finished run recomputed from its files, as the runner
    computed it (:meth:`~privfl.runs.run_finish.RunArtefacts.accounted`): the stop rules'
    count (:func:`~privfl.runs.run_stops.accounted_rounds`) raised to the floor of the ledger
    entries its last headline was computed from (:func:`before_last_headline`; none where the
    ledger is missing or broken, which ``check-privacy`` reports by itself). ``written``:
    summary.json's ``stop_reason``; ``budget``: the run's privacy filter
    (:func:`privfl.runs.budget.run_budget`), or None."""
    from privfl.algorithms.base import released_results
    from privfl.runs.ledger import Ledger, LedgerError
    from privfl.runs.run_stops import accounted_rounds, recorded_stop

    accounted = accounted_rounds(config, plan, rows, ran, redrawn_rounds, written, budget)
    try:
        entries = before_last_headline(Ledger(run_dir).entries())
    except LedgerError:
        entries = []
    floor, why = ledger_floor(
        entries, plan, ran, finished=written != "max_rounds",
        stop_reason=recorded_stop(config, rows, written),
        privacy=lambda r, full: released_results(plan, r, redrawn_rounds, full=full))
    return (floor, why) if floor > accounted else (accounted, "")
