"""Check a run's logged privacy against a fresh computation from its saved configuration.

For every checked round r of ``RUN_DIR/metrics.jsonl`` the algorithm's privacy plan is rebuilt
from ``RUN_DIR/config.yaml`` (the same plan the training derives its noise, clipping, sampling
and step counts from; no model is built, nothing is trained) and asked for round r. Each logged
entry ``(method, kind, scope) -> epsilon, delta[, mu]`` must equal the fresh one within ``rtol``
and the two sets of entries must be the same: an entry deleted (or an emptied list), added or
logged twice is a problem naming it. A row whose ``privacy_methods`` is ``"per-round"`` is
compared with the plan's per-round set (``round_results``, :mod:`privfl.algorithms.cadence`),
and a round the cadence makes full must not be one. The logged rounds must be 1, 2, ..., n,
each once: a deleted or repeated round is a problem too; the first and the last round are
always checked. Works for every registered algorithm.

A resumed secure run may have released rounds twice (``redrawn.jsonl``,
:mod:`privfl.runs.experiment`): a row's ``released_rounds`` is then what its
accountant composed, and it must agree with that file (offsets never shrink, never exceed its
rows); ``privacy.json``'s ``rounds_released`` must be its ``rounds`` plus all of them, and its
results must equal a fresh computation for that many rounds (:attr:`PrivacyCheck.released`).

What the run wrote when it stopped is checked too (:attr:`PrivacyCheck.files`,
:mod:`privfl.runs.check_files`): summary.json's headline, final epsilon, results, card,
outputs table and config digest, privacy.json's outputs table and card, and the headline, card
and outputs table of report.md and report.html, each recomputed by the code that wrote it;
and every file against the run's release ledger (:attr:`PrivacyCheck.ledger`,
:mod:`privfl.runs.check_ledger`: a file missing, changed or added, a row or a headline that
differs from the one released).

A field missing on either side of a comparison (one round's epsilon deleted inside an entry,
in metrics.jsonl or privacy.json) is a problem naming the entry and the field.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privfl._validation import check_int, check_range
from privfl.algorithms.cadence import FULL, PER_ROUND, AccountingCadence
from privfl.runs.check_entries import compare_entries

__all__ = ["PrivacyCheck", "check_run_privacy"]


@dataclass
class PrivacyCheck:
    """The outcome: one row per checked round."""

    run_dir: Path
    algorithm: str
    rtol: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    #: privacy.json against a fresh computation over every released round (re-drawn included)
    released: dict[str, Any] = field(default_factory=lambda: {"ok": True, "problems": []})
    #: run.json's settings pinned at round 1 against the plan config.yaml gives
    pinned: dict[str, Any] = field(default_factory=lambda: {"ok": True, "problems": []})
    #: summary.json, privacy.json's outputs, report.md and report.html against a fresh
    #: computation (:func:`privfl.runs.check_files.check_run_files`)
    files: dict[str, Any] = field(default_factory=lambda: {"ok": True, "problems": []})
    #: the run's files against its release ledger (:func:`privfl.runs.check_ledger.check_ledger`)
    ledger: dict[str, Any] = field(default_factory=lambda: {"ok": True, "problems": []})

    @property
    def ok(self) -> bool:
        return (all(row["ok"] for row in self.rows) and self.released["ok"]
                and self.pinned["ok"] and self.files["ok"] and self.ledger["ok"])

    def to_dict(self) -> dict[str, Any]:
        return {"command": "check-privacy", "run_dir": str(self.run_dir),
                "algorithm": self.algorithm, "rtol": self.rtol, "ok": self.ok,
                "rounds_checked": len(self.rows), "rows": self.rows,
                "released": self.released, "pinned": self.pinned, "files": self.files,
                "ledger": self.ledger}


def check_run_privacy(run_dir: str | Path, *, every: int = 1, rtol: float = 1e-9,
                      ) -> PrivacyCheck:
    """Compare every ``every``-th round (and the first and last) with a fresh computation."""
    from privfl.algorithms.base import privacy_entries, redrawn_of, released_results
    from privfl.algorithms.builders import build_dataset, privacy_plan
    from privfl.algorithms.outputs import private_dir_of
    from privfl.config.loader import load_config
    from privfl.runs.budget import run_budget
    from privfl.runs.check_files import check_run_files
    from privfl.runs.check_ledger import check_ledger
    from privfl.runs.ledger_guarantee import written_accounted
    from privfl.runs.rundir import RunDirectory

    every = check_int("every", every, minimum=1)
    rtol = check_range("rtol", rtol, 0.0, 1.0)
    directory = RunDirectory(run_dir)
    if not directory.config.is_file():
        raise ValueError(f"run directory = {str(run_dir)!r} is not a privfl run: no config.yaml")
    config = load_config(directory.config)
    metrics = directory.read_metrics()
    if not metrics:
        raise ValueError(f"run directory = {str(run_dir)!r} has no completed rounds "
                         "(metrics.jsonl is empty or missing)")
    data = build_dataset(config)
    plan = privacy_plan(config, data)
    cadence = AccountingCadence.from_config(config)
    written_under = _row_cadences(directory, config)
    report = PrivacyCheck(Path(run_dir), config.federated.algorithm, rtol)
    valid = [row.get("round") for row in metrics if _round_index(row.get("round"))]
    last = max(valid, default=None)
    seen: set[int] = set()
    redrawn_rounds = list(redrawn_of(directory.read_metrics(directory.redrawn)))
    redrawn = len(redrawn_rounds)
    report.pinned = _check_pinned(directory.pinned(), plan)
    offset = 0
    for row in metrics:
        r = row.get("round")
        if not _round_index(r):
            report.rows.append({"round": r, "ok": False, "max_rel_diff": math.inf,
                                "problems": [f"round = {r!r} is not a round index"]})
            continue
        if r in seen:
            report.rows.append({"round": r, "ok": False, "max_rel_diff": math.inf,
                                "problems": [f"round {r} is logged more than once"]})
            continue
        seen.add(r)
        released = row.get("released_rounds", r)
        if (not isinstance(released, int) or isinstance(released, bool)
                or not offset <= released - r <= redrawn):
            report.rows.append({"round": r, "ok": False, "max_rel_diff": math.inf, "problems": [
                f"released_rounds = {released!r} is out of range: must be the round plus "
                f"{offset}..{redrawn} re-drawn rounds (redrawn.jsonl)"]})
            continue
        offset = released - r
        if r % every and r not in (1, last):
            continue
        methods = row.get("privacy_methods", FULL)
        problem = _methods_problem(methods, r, plan, cadence, written_under.get(r))
        if problem:
            report.rows.append({"round": r, "ok": False, "max_rel_diff": math.inf,
                                "problems": [problem]})
            continue
        fresh = privacy_entries(released_results(plan, r, redrawn_rounds[:released - r],
                                                 full=methods == FULL))
        outcome = compare_entries(row.get("privacy", []), fresh, rtol)
        report.rows.append({"round": r, **outcome})
    for r in sorted(set(range(1, (last or 0) + 1)) - seen):
        report.rows.append({"round": r, "ok": False, "max_rel_diff": math.inf,
                            "problems": [f"round {r} is missing from metrics.jsonl (rounds "
                                         f"run up to {last})"]})
    if directory.privacy.is_file():
        report.released = _check_released(
            directory, plan, redrawn_rounds, rtol,
            written_accounted(directory.path, config, plan, metrics, last or 0,
                              redrawn_rounds, _written_stop(directory),
                              run_budget(config, plan, directory))[0])
    report.ledger = check_ledger(directory, config, plan)
    if config.run.outputs == "guarantee-only":  # the uncovered metrics are kept apart
        directory = RunDirectory(run_dir, private_dir_of(Path(run_dir)))
    report.files = check_run_files(directory, config, data, rtol=rtol)
    return report


def _written_stop(directory: Any) -> Any:
    """summary.json's ``stop_reason`` (None when it cannot be read)."""
    try:
        summary = json.loads(directory.summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return summary.get("stop_reason") if isinstance(summary, dict) else None


def _check_pinned(pinned: Any, plan: Any) -> dict[str, Any]:
    """run.json's ``pinned`` (what the accountant assumed at round 1) against ``plan.pins()``
    from config.yaml: a config edited to claim another schedule (e.g. DP-FTRL's groups
    following an edited ``federated.rounds``) is a problem naming each setting."""
    pins = getattr(plan, "pins", None)
    if pins is None or pinned is None:
        return {"ok": True, "problems": []}
    fresh = pins()
    if not isinstance(pinned, dict):
        pinned = {}
    problems = [f"run.json: pinned {key} = {pinned.get(key)!r} at round 1, but config.yaml "
                f"gives {value!r}: the configuration claims another schedule than the one "
                "that ran" for key, value in fresh.items() if pinned.get(key) != value]
    return {"ok": not problems, "problems": problems}


def _row_cadences(directory: Any, config: Any) -> dict[int, AccountingCadence]:
    """``round -> the cadence of the plan in force when its row was written``, from the run's
    ledger: the creation record's ``federated.rounds``, then each resume's (its ``rounds``);
    empty without a ledger. A row logged per-round under a plan that a later resume lowered
    (e.g. round 5 of a run extended to 7, then cut back to 5) was right when it was written."""
    from privfl.runs.ledger import Ledger, LedgerError

    try:
        entries = Ledger(directory.path).entries()
    except LedgerError:  # reported by the ledger check
        return {}
    planned, out = None, {}
    for entry in entries:
        if entry.kind == "creation":
            planned = entry.payload.get("rounds")
        elif entry.kind == "resume" and "rounds" in entry.payload:
            planned = entry.payload["rounds"]
        elif entry.kind == "row" and isinstance(planned, int) and not isinstance(planned, bool) \
                and planned >= 1:
            out[int(entry.payload["round"])] = AccountingCadence(
                planned, config.privacy.full_accounting_every)
    return out


def _methods_problem(methods: Any, r: int, plan: Any, cadence: AccountingCadence,
                     created: AccountingCadence | None = None) -> str:
    """Why a row's ``privacy_methods`` is wrong ("" if it is not): a full row of the cadence
    (and of the ``created`` one, the plan in force when the row was written) must carry every
    accountant; a per-round row needs a plan that has a per-round set."""
    if methods not in (FULL, PER_ROUND):
        return (f"privacy_methods = {methods!r} is not allowed: must be {FULL!r} or "
                f"{PER_ROUND!r}")
    if methods == PER_ROUND and not getattr(plan, "round_skips", ()):
        return (f"privacy_methods = {PER_ROUND!r}, but this plan has no per-round set: every "
                "row carries every accountant")
    if methods == PER_ROUND and cadence.full(r) and (created is None or created.full(r)):
        return (f"privacy_methods = {PER_ROUND!r}, but round {r} must carry every accountant "
                f"(federated.rounds = {cadence.planned_rounds}, "
                f"privacy.full_accounting_every = {cadence.every})")
    return ""


def _round_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _check_released(directory: Any, plan: Any, redrawn_rounds: list[Any], rtol: float,
                    accounted: int) -> dict[str, Any]:
    """privacy.json: ``rounds_released`` = ``rounds`` + the re-drawn rounds, ``rounds_accounted``
    = ``accounted`` (the rounds the guarantee covers: more than ran after a data-dependent
    stop), and its results equal to a fresh computation of ``accounted`` rounds with the
    re-drawn ones (:func:`~privfl.algorithms.base.released_results`)."""
    from privfl.algorithms.base import privacy_entries, released_results

    redrawn = len(redrawn_rounds)

    try:
        saved = json.loads(directory.privacy.read_text(encoding="utf-8"))
        rounds = saved["rounds"]
        logged = saved.get("rounds_released", rounds)
        results = saved["results"]
    except (OSError, ValueError, TypeError, KeyError) as error:
        return {"ok": False, "max_rel_diff": math.inf,
                "problems": [f"privacy.json is unreadable ({error})"]}
    if not isinstance(rounds, int) or logged != rounds + redrawn:
        return {"ok": False, "max_rel_diff": math.inf, "problems": [
            f"privacy.json: rounds_released = {logged!r}, but {rounds!r} rounds ran and "
            f"redrawn.jsonl holds {redrawn} re-drawn round(s)"]}
    if saved.get("rounds_accounted", rounds) != accounted:
        return {"ok": False, "max_rel_diff": math.inf, "problems": [
            f"privacy.json: rounds_accounted = {saved.get('rounds_accounted', rounds)!r}, but "
            f"the guarantee covers {accounted} rounds (the rounds that ran, or after a "
            "data-dependent stop, on stop.target_accuracy or a divergence, every round the "
            "stop rules allowed)"]}
    return compare_entries(results, privacy_entries(
        released_results(plan, accounted, redrawn_rounds)), rtol)
