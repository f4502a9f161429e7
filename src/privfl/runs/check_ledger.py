"""Check a run's files against its release ledger (``privfl check-privacy``, issue 44 item 5).

:mod:`privfl.runs.check` recomputes every logged privacy number from config.yaml and
:mod:`privfl.runs.check_files` the files written at the stop; this module checks what a reader
sees against the ledger (:mod:`privfl.runs.ledger`), each failure a problem naming the file:

* ledger.jsonl: present, its chain intact (an edited, removed or reordered entry), no torn last
  line, a creation record first whose run id is run.json's and whose fixed settings
  (:func:`~privfl.runs.run_resume.fixed_part`) and pins are those config.yaml gives;
* every file the ledger's latest ``files`` entry records (config.yaml, run.json, summary.json,
  privacy.json, report.md, report.html, the plots, model.pt, redrawn.jsonl, ...): missing, or
  changed since the run wrote it; a file in the run directory that it does not record
  (an added file) is a problem too;
* metrics.jsonl: each row equal to the latest row the ledger recorded for its round, no
  released round below the last one missing; redrawn.jsonl: the rows the ledger's
  ``redrawn`` entries moved, in their order;
* the headlines the ledger recorded never go down, and summary.json's headline and
  ``rounds_accounted`` are the last one's;
* summary.json's final accuracies and ``rounds_to_target``, recomputed from the rows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from privfl.runs.ledger import LEDGER, Entry, LedgerError, file_digests, read_entries
from privfl.runs.rundir import RunDirectory, logged_number

__all__ = ["check_ledger"]


def _same(a: Any, b: Any) -> bool:
    """JSON values equal, numbers within 1e-12 relative (a row read back is bit-identical;
    the tolerance only absorbs a float written through another route)."""
    a, b = logged_number(a), logged_number(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) \
            and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isnan(a) and math.isnan(b):
            return True
        return a == b or (math.isfinite(a) and math.isfinite(b)
                          and abs(a - b) <= 1e-12 * max(abs(a), abs(b)))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _creation(entries: list[Entry], directory: RunDirectory, config: Any, plan: Any
              ) -> list[str]:
    """The creation record against run.json, config.yaml and the plan's pins."""
    from privfl.config import config_from_dict
    from privfl.runs.run_resume import fixed_part

    if not entries or entries[0].kind != "creation":
        return [f"{LEDGER}: its first entry is not the creation record"]
    creation = entries[0].payload
    problems = []
    run = _read(directory.run_file)
    if isinstance(run, dict) and run.get("run_id") != creation.get("run_id"):
        problems.append(f"run.json: run_id = {run.get('run_id')!r}, but the ledger's creation "
                        f"record says {creation.get('run_id')!r}")
    try:
        created = fixed_part(config_from_dict(creation["config"]), steps=False)
    except (KeyError, TypeError, ValueError) as error:
        return [*problems, f"{LEDGER}: the creation record's configuration is unreadable "
                           f"({error})"]
    now = fixed_part(config, steps=False)
    for section in dict.fromkeys([*created, *now]):
        if created.get(section) != now.get(section):
            problems.append(f"config.yaml: its {section} section differs from the one the run "
                            "was created with (ledger.jsonl's creation record)")
    pins = getattr(plan, "pins", None)
    if pins is not None and not creation.get("reconstructed"):
        fresh = json.loads(json.dumps(pins()))
        if fresh != creation.get("pins", {}):
            problems.append(f"config.yaml: the plan's pins {fresh!r} differ from those the "
                            f"run was created with {creation.get('pins')!r}")
    return problems


def _files(entries: list[Entry], directory: RunDirectory) -> list[str]:
    """Every recorded file present and unchanged; no file added."""
    found = [e for e in entries if e.kind == "files"]
    if not found:
        return [f"{LEDGER}: records no files"]
    recorded = found[-1].payload.get("files", {})
    now = file_digests(directory.path)
    problems = []
    for name, digest in recorded.items():
        if name not in now:
            problems.append(f"{name}: missing (the run wrote it; {LEDGER} records its digest)")
        elif now[name] != digest:
            problems.append(f"{name}: changed since the run wrote it (its sha256 is not the "
                            f"one {LEDGER} records)")
    for name in now:
        if name not in recorded:
            problems.append(f"{name}: not written by the run ({LEDGER} does not record it; "
                            "the outputs table does not list it)")
    return problems


def _rows(entries: list[Entry], directory: RunDirectory) -> list[str]:
    """metrics.jsonl and redrawn.jsonl against the ledger's rows."""
    moved = [i for e in entries if e.kind == "redrawn" for i in e.payload.get("indices", ())]
    by_index = {e.index: e for e in entries}
    latest: dict[int, dict[str, Any]] = {}
    for entry in entries:
        if entry.kind == "row" and entry.index not in moved:
            latest[int(entry.payload["round"])] = entry.payload["row"]
    problems = []
    try:
        rows = directory.read_metrics()
        redrawn = directory.read_metrics(directory.redrawn)
    except ValueError as error:
        return [str(error)]
    shown = set()
    for row in rows:
        r = row.get("round") if isinstance(row, dict) else None
        if r not in latest:
            problems.append(f"metrics.jsonl: a row of round {r!r} that {LEDGER} does not "
                            "record as released")
            continue
        shown.add(r)
        if not _same(row, latest[r]):
            keys = sorted(k for k in set(row) | set(latest[r])
                          if not _same(row.get(k), latest[r].get(k)))
            problems.append(f"metrics.jsonl: round {r} differs from the row {LEDGER} recorded "
                            f"before it was shown ({', '.join(keys)}; e.g. {keys[0]}: written "
                            f"{row.get(keys[0])!r}, released {latest[r].get(keys[0])!r})")
    last = max(shown, default=0)
    missing = sorted(r for r in latest if r < last and r not in shown)
    if missing:
        problems.append(f"metrics.jsonl: the released rows of rounds {missing} are missing "
                        f"({LEDGER} records them)")
    expected = [by_index[i].payload["row"] for i in moved if i in by_index]
    if not _same(redrawn, expected):
        problems.append(f"redrawn.jsonl: holds {len(redrawn)} row(s), but {LEDGER} records "
                        f"{len(expected)} re-drawn row(s) (rounds "
                        f"{[row.get('round') for row in expected]})")
    return problems


def _headlines(entries: list[Entry], summary: Any) -> list[str]:
    """Headlines never go down; summary.json's headline is the last one."""
    problems = []
    best = None
    headlines = [e for e in entries if e.kind == "headline"]
    for entry in headlines:
        epsilon = entry.payload.get("epsilon")
        if isinstance(epsilon, (int, float)) and best is not None and epsilon < best:
            problems.append(f"{LEDGER}: headline {entry.index} (epsilon = {epsilon:.6g}) is "
                            f"below one printed before (epsilon = {best:.6g})")
        if isinstance(epsilon, (int, float)):
            best = epsilon if best is None else max(best, epsilon)
    if not isinstance(summary, dict) or not headlines:
        return problems
    last = headlines[-1].payload
    written = summary.get("headline") if isinstance(summary.get("headline"), dict) else {}
    if not _same(written.get("epsilon"), last.get("epsilon")):
        problems.append(f"summary.json: headline epsilon = {written.get('epsilon')!r}, but the "
                        f"last headline {LEDGER} recorded is {last.get('epsilon')!r}")
    if summary.get("rounds_accounted") != last.get("rounds_accounted"):
        problems.append(f"summary.json: rounds_accounted = {summary.get('rounds_accounted')!r},"
                        f" but the last headline {LEDGER} recorded covers "
                        f"{last.get('rounds_accounted')!r}")
    return problems


def _summary(summary: Any, rows: list[dict[str, Any]], config: Any) -> list[str]:
    """summary.json's final accuracies and rounds_to_target, recomputed from the rows."""
    if not isinstance(summary, dict):
        return []
    problems = []
    rounds = summary.get("rounds_completed")
    ran = [row for row in rows if isinstance(row.get("round"), int)
           and (not isinstance(rounds, int) or row["round"] <= rounds)]
    last = ran[-1] if ran else {}
    final = summary.get("final") if isinstance(summary.get("final"), dict) else {}
    for key in summary.get("metric_labels") or {}:
        if key in last and not _same(final.get(key), last.get(key)):
            problems.append(f"summary.json: final {key} = {final.get(key)!r}, but the last "
                            f"released row (round {last.get('round')}) has {last.get(key)!r}")
    target = config.stop.target_accuracy
    key = f"{config.stop.target_metric}_accuracy"
    reached = next((row["round"] for row in ran if target is not None
                    and isinstance(logged_number(row.get(key)), (int, float))
                    and logged_number(row[key]) >= target), None)
    if summary.get("rounds_to_target") != reached:
        problems.append(f"summary.json: rounds_to_target = {summary.get('rounds_to_target')!r}"
                        f", but the released rows reach the target at {reached!r}")
    return problems


def check_ledger(directory: RunDirectory, config: Any, plan: Any) -> dict[str, Any]:
    """The run's files against its ledger (see the module docstring): ``{"ok", "problems"}``.
    ``directory``: the run directory; ``config``: its config.yaml; ``plan``: the privacy plan
    built from it."""
    if not isinstance(directory, RunDirectory):
        raise ValueError(f"directory = {type(directory).__name__} is not allowed: must be a "
                         "privfl.runs.rundir.RunDirectory")
    path = directory.path / LEDGER
    if not path.is_file():
        return {"ok": False, "problems": [
            f"{LEDGER}: missing (every run records its releases there; deleted, or a run made "
            "by a privfl before the ledger: resume it once to start one)"]}
    try:
        entries, torn = read_entries(path)
    except LedgerError as error:
        return {"ok": False, "problems": [f"{LEDGER}: {error}"]}
    problems = _creation(entries, directory, config, plan)
    if torn:
        problems.append(f"{LEDGER}: ends in a torn line ({len(torn)} bytes; a kill in the "
                        "middle of an append): resume the run once to record it")
    problems += _files(entries, directory)
    problems += _rows(entries, directory)
    summary = _read(directory.summary)
    problems += _headlines(entries, summary)
    try:
        rows = directory.read_metrics()
    except ValueError:
        rows = []
    problems += _summary(summary, [r for r in rows if isinstance(r, dict)], config)
    return {"ok": not problems, "problems": problems}
