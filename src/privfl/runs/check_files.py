"""Check what a finished run wrote beside its metrics against a fresh computation.

:func:`privfl.runs.check.check_run_privacy` compares every logged round and privacy.json's
results; this module checks the rest of what the run wrote when it stopped, recomputed by the
same code that wrote it (:class:`~privfl.runs.run_finish.RunArtefacts` and
:class:`~privfl.runs.run_outputs.RunOutputs` on the algorithm rebuilt from config.yaml, no
training):

* summary.json: ``headline`` (every field), ``final.epsilon`` and ``final.epsilon_method``,
  ``privacy`` (epsilon, delta and mu of every result), ``setting`` (the privacy card),
  ``outputs``, ``rounds_completed`` / ``rounds_released`` and ``provenance.config_sha256``
  (the digest of config.yaml's resolved settings, :func:`privfl.runs.provenance.config_digest`);
* privacy.json: ``outputs``, ``setting`` and ``private``;
* report.md: the headline, the privacy card with its results table, and the outputs table;
* report.html: the headline sentence, the scope advice and the plain-words reading
  (:func:`privfl.runs.reading.plain_reading`).

The outputs table is re-derived from the configuration and the run's files: the metrics keys
of metrics.jsonl (and of the private one in ``run.outputs: guarantee-only``), redrawn.jsonl,
the settings; whether checkpoints or memory-mapped client state were on disk when the run
stopped is taken from the written tables (and from the checkpoints still on disk), since those
folders may be gone since. Each problem names the file and the field.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privfl.runs.budget import run_budget
from privfl.runs.check_entries import compare_entries, relative_difference
from privfl.runs.ledger_guarantee import written_accounted
from privfl.runs.run_finish import RunArtefacts
from privfl.runs.run_outputs import RunOutputs
from privfl.runs.run_stops import recorded_stop

__all__ = ["check_run_files"]

#: summary.json ``headline`` fields that are numbers (compared within ``rtol``)
_NUMBERS = ("epsilon", "delta")


class _Rebuilt:
    """What the run's own parts read, rebuilt from config.yaml and the run's files (no
    training), with the parts themselves: the outputs table, the card and the results come
    from their code."""

    def __init__(self, config: Any, directory: Any, data: Any, algorithm: Any,
                 metrics: list[dict[str, Any]], redrawn: list[dict[str, Any]]) -> None:
        self.config, self.dir, self.data, self.algorithm = config, directory, data, algorithm
        self.metrics, self.redrawn = metrics, redrawn
        self.outputs = RunOutputs(self)
        self.artefacts = RunArtefacts(self)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_json(path: Path, problems: list[str]) -> dict[str, Any] | None:
    """The JSON object in ``path`` (None if absent; a problem if unreadable)."""
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        problems.append(f"{path.name} is unreadable ({error})")
        return None
    if not isinstance(value, dict):
        problems.append(f"{path.name} is not a JSON object")
        return None
    return value


def _field(where: str, written: Mapping[str, Any], fresh: Mapping[str, Any], key: str,
           rtol: float, numbers: Sequence[str] = ()) -> str | None:
    """A problem (or None) for ``written[key]`` against ``fresh[key]``: a field missing on
    either side is one; ``numbers`` are compared within ``rtol``, the rest exactly."""
    name = f"{where}.{key}"
    if key not in written and key not in fresh:
        return None
    if key not in written:
        return f"{name}: missing (fresh {fresh[key]!r})"
    if key not in fresh:
        return f"{name}: written {written[key]!r} but not derived from the config"
    a, b = written[key], fresh[key]
    if key in numbers and _is_number(b):
        if not _is_number(a):
            return f"{name}: written {a!r}, fresh {b!r}"
        diff = relative_difference(float(a), float(b))
        if diff > rtol:
            return f"{name}: written {a!r}, fresh {b!r} (relative difference {diff:.3g})"
        return None
    if a != b:
        return f"{name}: written {a!r}, fresh {b!r}"
    return None


def _mapping(where: str, written: Any, fresh: Mapping[str, Any], rtol: float,
             numbers: Sequence[str] = (), *, every: bool = True) -> list[str]:
    """The fields of ``fresh`` (``every``: and of ``written``, a mapping) compared by
    :func:`_field`."""
    if not isinstance(written, Mapping):
        return [f"{where}: written {written!r}, must be an object"]
    keys = dict.fromkeys([*fresh, *written]) if every else fresh
    return [problem for key in keys
            if (problem := _field(where, written, fresh, key, rtol, numbers)) is not None]


def _outputs(where: str, written: Any, fresh: Sequence[Mapping[str, Any]]) -> list[str]:
    """A written outputs table against the fresh one, row by row (by name)."""
    if not isinstance(written, list) or not all(isinstance(o, Mapping) and "name" in o
                                                for o in written):
        return [f"{where}: missing or malformed (must be a list of named outputs)"]
    problems = []
    names = [o["name"] for o in written]
    for name in dict.fromkeys(n for n in names if names.count(n) > 1):
        problems.append(f"{where}[{name}]: written {names.count(name)} times")
    old = {o["name"]: o for o in written}
    new = {o["name"]: o for o in fresh}
    for name in dict.fromkeys([*new, *old]):
        if name not in old:
            problems.append(f"{where}[{name}]: missing (fresh {dict(new[name])!r})")
        elif name not in new:
            problems.append(f"{where}[{name}]: written but not derived from the config and "
                            "the run's files")
        else:
            problems += _mapping(f"{where}[{name}]", old[name], new[name], 0.0)
    return problems


def _fragment(file: str, what: str, text: str, expected: Sequence[str]) -> list[str]:
    """``expected`` (lines written together) must appear in ``text`` as they are."""
    if "\n".join(expected) in text:
        return []
    missing = next((line for line in expected if line and line not in text), None)
    detail = (f"line {missing!r} is missing or altered" if missing is not None
              else "its lines are out of order")
    return [f"{file} {what}: differs from a fresh computation ({detail})"]


def _merged_rows(directory: Any, rounds: int) -> list[dict[str, Any]]:
    """The metrics rows of rounds 1..``rounds`` as the run held them: metrics.jsonl, joined
    with the private metrics.jsonl of ``run.outputs: guarantee-only`` (round by round)."""
    rows = [r for r in directory.read_metrics()
            if isinstance(r, dict) and isinstance(r.get("round"), int) and r["round"] <= rounds]
    if not directory.separate_private:
        return rows
    private = {r.get("round"): r for r in directory.read_metrics(directory.private_metrics)
               if isinstance(r, dict)}
    return [{**private.get(r["round"], {}), **r} for r in rows]


def _ordered_like(fresh: list[dict[str, Any]], written: Any) -> list[dict[str, Any]]:
    """``fresh`` in the written table's order where the names are the same (the order of the
    metrics keys depends on the rows the run held; the private ones are apart)."""
    if not isinstance(written, list):
        return fresh
    order = {o.get("name"): i for i, o in enumerate(written) if isinstance(o, Mapping)}
    if set(order) != {o["name"] for o in fresh}:
        return fresh
    return sorted(fresh, key=lambda o: order[o["name"]])


def check_run_files(directory: Any, config: Any, data: Any, *, rtol: float) -> dict[str, Any]:
    """summary.json, privacy.json's outputs and card, report.md and report.html against a fresh
    computation (see the module docstring): ``{"ok": bool, "problems": [str, ...]}``.

    ``directory``: the run's :class:`~privfl.runs.rundir.RunDirectory` (its private
    directory set for ``run.outputs: guarantee-only``); ``config``: its loaded config.yaml;
    ``data``: the dataset built from it; ``rtol``: relative tolerance of every number."""
    from markupsafe import escape

    from privfl.algorithms.base import privacy_entries, privacy_metrics, redrawn_of
    from privfl.algorithms.builders import build_algorithm
    from privfl.config import ExperimentConfig
    from privfl.data.datasets import FederatedDataset
    from privfl.fl.client_store import state_directory
    from privfl.runs.card import card_markdown
    from privfl.runs.markdown import headline_markdown, outputs_markdown
    from privfl.runs.provenance import config_digest
    from privfl.runs.rundir import RunDirectory

    if not isinstance(directory, RunDirectory):
        raise ValueError(f"directory = {type(directory).__name__} is not allowed: must be a "
                         "privfl.runs.rundir.RunDirectory")
    if not isinstance(config, ExperimentConfig):
        raise ValueError(f"config = {type(config).__name__} is not allowed: must be the run's "
                         "loaded ExperimentConfig")
    if not isinstance(data, FederatedDataset):
        raise ValueError(f"data = {type(data).__name__} is not allowed: must be the "
                         "FederatedDataset built from the run's config")
    if not _is_number(rtol) or not 0.0 <= rtol <= 1.0:
        raise ValueError(f"rtol = {rtol!r} is out of range: must be a number in [0, 1]")
    problems: list[str] = []
    summary = _read_json(directory.summary, problems)
    saved = _read_json(directory.privacy, problems)
    if summary is None and saved is None:
        return {"ok": not problems, "problems": problems}
    rounds = (saved or {}).get("rounds", (summary or {}).get("rounds_completed"))
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
        problems.append(f"privacy.json rounds / summary.json rounds_completed = {rounds!r}: "
                        "must be the number of rounds that ran")
        return {"ok": False, "problems": problems}
    redrawn = directory.read_metrics(directory.redrawn)
    with tempfile.TemporaryDirectory() as scratch, state_directory(scratch):
        algorithm = build_algorithm(config, data)
    algorithm.redrawn_rounds = redrawn_of(redrawn)
    rows = _merged_rows(directory, rounds)
    run = _Rebuilt(config, directory, data, algorithm, rows, redrawn)
    # after a data-dependent stop (a target accuracy, a divergence) the guarantee covers every
    # round the public stop rules allowed (run_stops.accounted_rounds), as the runner wrote it
    written = (summary or {}).get("stop_reason")
    accounted, why = written_accounted(directory.path, config, algorithm.plan, rows, rounds,
                                       list(algorithm.redrawn_rounds), written,
                                       run_budget(config, algorithm.plan, directory))
    results, headline, card, _ = run.artefacts.guarantee(rounds, accounted,
                                               recorded_stop(config, rows, written), why)
    card = json.loads(json.dumps(card))
    tables = [t.get("outputs") for t in (saved, summary) if t is not None]
    names = {str(o.get("name")) for t in tables if isinstance(t, list) for o in t
             if isinstance(o, Mapping)}
    outputs = run.outputs.table(
        checkpoints=any(n.endswith("checkpoints/") for n in names)
        or bool(directory.list_checkpoints()),
        model_file=run.artefacts.releases_model(str(written)),
        client_state=any(n.endswith("client-state/") for n in names))
    fresh_results = privacy_entries(results)

    if saved is not None:
        problems += _outputs("privacy.json outputs", saved.get("outputs"), outputs)
        problems += _mapping("privacy.json setting", saved.get("setting"), card, rtol)
        problems += _mapping("privacy.json", saved, {"private": algorithm.private}, rtol,
                             every=False)
    if summary is not None:
        problems += _mapping("summary.json headline", summary.get("headline"),
                             headline.to_dict(), rtol, _NUMBERS)
        final = privacy_metrics(algorithm.plan, results)
        fresh_final = ({"epsilon": final["epsilon"], "epsilon_method": final["epsilon_method"]}
                       if rounds > 0 and "epsilon" in final else {})
        written_final = summary.get("final")
        problems += [p for key in ("epsilon", "epsilon_method")
                     if (p := _field("summary.json final", written_final if isinstance(
                         written_final, Mapping) else {}, fresh_final, key, rtol,
                         ("epsilon",))) is not None]
        compared = compare_entries(summary.get("privacy", []), fresh_results, rtol)
        problems += [f"summary.json privacy: {p}" for p in compared["problems"]]
        problems += _mapping("summary.json", summary, {
            "rounds_completed": rounds, "rounds_released": algorithm.released_rounds(rounds),
            "private": algorithm.private}, rtol, every=False)
        problems += _mapping("summary.json setting", summary.get("setting"), card, rtol)
        problems += _outputs("summary.json outputs", summary.get("outputs"), outputs)
        provenance = summary.get("provenance")
        problems += _mapping(
            "summary.json provenance",
            {"config_sha256": provenance.get("config_sha256")} if isinstance(
                provenance, Mapping) and "config_sha256" in provenance else {},
            {"config_sha256": config_digest(config.model_dump(mode="json"))}, rtol)
    shown = _ordered_like(outputs, (saved or summary or {}).get("outputs"))
    if directory.report.is_file():
        text = directory.report.read_text(encoding="utf-8")
        problems += _fragment("report.md", "headline", text, headline_markdown(headline))
        problems += _fragment("report.md", "privacy card and results", text,
                              card_markdown(card, results).split("\n"))
        problems += _fragment("report.md", "outputs table", text, outputs_markdown(shown))
    if directory.report_html.is_file():
        text = directory.report_html.read_text(encoding="utf-8")
        # each part as report.html.j2 writes it, named in the problem (the advice and the
        # plain-words reading are rendered by the headline's own code, never a copy)
        html_parts = {"headline": headline.sentence, "advice": headline.advice,
                      "reading": headline.reading}
        for key, value in html_parts.items():
            if value:
                problems += _fragment("report.html", key, text, [f'id="{key}">{escape(value)}</p>'])
    return {"ok": not problems, "problems": problems}
