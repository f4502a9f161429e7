"""report.md of a run: what ran, the privacy card, final accuracies, plots, how to resume."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from privfl.accounting.results import PrivacyResult
from privfl.runs.card import card_markdown, format_number, format_percent

__all__ = ["STOP_TEXT", "files_paragraphs", "headline_markdown", "outputs_markdown",
           "run_report_markdown"]

#: why a run stopped (summary.json's ``stop_reason``), in words
STOP_TEXT = {
    "rounds": "all planned rounds ran",
    "target": "the target accuracy was reached",
    "budget": "the next round would have exceeded the privacy budget (it was not run)",
    "max_rounds": "run.max_rounds rounds ran in this invocation (continue with --resume)",
    "interrupted": "interrupted (continue with --resume)",
}


def run_report_markdown(
    summary: Mapping[str, Any],
    card: Mapping[str, Any],
    results: Sequence[PrivacyResult],
    metrics: Sequence[Mapping[str, Any]],
    *,
    setup: Mapping[str, Any],
    outputs: Sequence[Mapping[str, Any]] = (),
    headline: Any = None,
) -> str:
    """The Markdown text of report.md (``outputs``: privacy.json's classified outputs;
    ``headline``: a :class:`~privfl.runs.headline.Headline`, printed first)."""
    final = summary.get("final", {})
    lines = [f"# privfl run: {summary.get('name', '')}", ""]
    if headline is not None:
        lines += headline_markdown(headline)
    lines += [
        str(summary.get("description", "")).strip(),
        "",
        "## What ran",
        "",
        "| | |",
        "|---|---|",
    ]
    for key, value in setup.items():
        lines.append(f"| {key} | {format_number(value)} |")
    stop = summary.get("stop_reason", "")
    lines += [
        "",
        f"Rounds completed: **{summary.get('rounds_completed')}** of "
        f"{summary.get('rounds_planned')} planned — {STOP_TEXT.get(stop, stop)}.",
        "",
        "## Results",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    labels = dict(summary.get("metric_labels") or {"global_accuracy": "global model"})
    last = final.get("round", summary.get("rounds_completed"))
    for key, label in labels.items():
        lines.append(f"| {label}, last round ({last}: the released model) | "
                     f"{format_percent(final.get(key))} |")
    if summary.get("target_accuracy") is not None:
        reached = summary.get("rounds_to_target")
        lines.append(
            f"| first round with {summary.get('target_metric')} accuracy >= "
            f"{format_percent(summary['target_accuracy'])} | "
            f"{reached if reached else 'not reached'} |"
        )
    lines += [
        "",
        "Accuracies are measured without noise on held-out test data (as each metric's label "
        "says) at the last round, whose model is the one released; no round is picked by its "
        "test accuracy (a \"best round\" chosen on the test set would overstate the accuracy "
        "of the released model). Whether the guarantee covers each one is in the table of "
        "outputs below.",
        "",
        "![accuracy per round](accuracy.png)",
        "",
        "Health signals (training loss, clipped fraction, ...; each panel says whether the "
        "guarantee covers it):",
        "",
        "![health signals per round](health.png)",
        "",
        f"## Privacy after {summary.get('rounds_completed')} rounds",
        "",
        card_markdown(card, results),
        "",
        "A **bound** is a rigorous upper bound on epsilon; an **estimate** (e.g. a central-limit "
        "Gaussian-DP mu) can be below the truth; a **reference** is rigorous for a different, "
        "more private mechanism. Report bounds.",
        "",
        "![privacy per round](privacy.png)",
        "",
        *outputs_markdown(outputs),
        "## Files",
        "",
        *(line for paragraph in files_paragraphs(summary) for line in (paragraph, "")),
        *_provenance_markdown(summary),
    ]
    return "\n".join(lines)


def _provenance_markdown(summary: Mapping[str, Any]) -> list[str]:
    """summary.json's provenance (and wall time) as a table."""
    rows = dict(summary.get("provenance") or {})
    wall = summary.get("wall_seconds")
    if isinstance(wall, (int, float)) and math.isfinite(wall):
        rows["wall time"] = f"{wall:.1f} s"
    if not rows:
        return []
    return ["## Provenance", "", "| | |", "|---|---|",
            *(f"| {key} | {format_number(value)} |" for key, value in rows.items()), ""]


def files_paragraphs(summary: Mapping[str, Any]) -> list[str]:
    """The Files section of report.md and report.html (names in backticks): what the run
    directory holds with the check-privacy pointer, then how to continue the run."""
    return [
        "`config.yaml` (resolved configuration), `metrics.jsonl` (one JSON line per round), "
        "`privacy.json` (labelled results, the format of `privfl account --json`), "
        "`summary.json`, `accuracy.png`, `privacy.png`, `health.png` (training health signals), "
        "`report.md` and `report.html` (this report; report.html with interactive plots, one "
        "self-contained file), `checkpoints/`. "
        f"`privfl check-privacy {summary.get('run_dir', 'DIR')}` recomputes every round's "
        "privacy from config.yaml and compares it with metrics.jsonl.",
        _resume_line(summary)]


def _resume_line(summary: Mapping[str, Any]) -> str:
    where = summary.get("run_dir", "DIR")
    if summary.get("private_state") == "deleted":
        return ("This run released only its final model: its checkpoints (intermediate models, "
                "the secret schedule, generator states) were deleted when it finished, so it "
                "cannot be continued; `model.pt` holds the released model.")
    return (f"Continue or extend this run with `privfl run --resume {where}` (add `--set "
            "federated.rounds=N` to extend it).")


def headline_markdown(headline: Any) -> list[str]:
    """report.md's lines of a :class:`~privfl.runs.headline.Headline`: the sentence in bold,
    the advice and the plain-words reading (each followed by an empty line)."""
    lines = [f"**{headline.sentence}**", ""]
    for paragraph in (headline.advice, headline.reading):
        if paragraph:
            lines += [paragraph, ""]
    return lines


def outputs_markdown(outputs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table of what the run wrote and whether the guarantee covers it."""
    if not outputs:
        return []
    lines = ["## What the guarantee covers", "",
             "Everything a run writes is a release. Outputs marked **no** are outside the "
             "printed guarantee: do not publish them with it (`run.outputs: guarantee-only` "
             "keeps them out of the run directory).", "",
             "| output | kind | covered | why |", "|---|---|---|---|"]
    for o in outputs:
        lines.append(f"| `{o['name']}` | {o['kind']} | {'yes' if o['covered'] else '**no**'} "
                     f"| {o['reason']} |")
    return lines + [""]
