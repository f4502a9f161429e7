"""report.html of a run: what report.md says, with interactive plots (:mod:`privfl.runs.html`).

Sections: the headline (:mod:`privfl.runs.headline`) first; what ran; the accuracies with a
plot per round; the privacy card and its results with epsilon (and Gaussian-DP mu) per round,
one trace per accountant and scope (bounds solid, estimates and references dashed; the
headline's series and scope shown on open, the rest hidden: :mod:`privfl.runs.html_plots`);
the health signals, every other number the rows carry (training loss and clipped fraction shown,
cohort size, ... hidden until their legend entry is clicked), each one marked *outside the
guarantee* where the run's output classification says so (:mod:`privfl.algorithms.outputs`);
the table of outputs; the files with the check-privacy pointer and the resume hint
(:func:`~privfl.runs.markdown.files_paragraphs`); provenance. It shows exactly what report.md
shows (the same rows, accuracies and results), so the run's classification treats the two files
alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from privfl.accounting.results import PrivacyResult
from privfl.runs.card import format_number, format_percent
from privfl.runs.html import Cell, Section, line_figure, outputs_table, render_page, table
from privfl.runs.html_plots import health_traces, privacy_note, privacy_traces
from privfl.runs.markdown import STOP_TEXT, files_paragraphs
from privfl.runs.plots import _number, _series, health_keys
from privfl.runs.rounding import format_bound

__all__ = ["run_report_html"]


def _xy(metrics: Sequence[Mapping[str, Any]], key: str) -> dict[str, list[Any]]:
    xs, ys = _series(list(metrics), key)
    return {"x": xs, "y": ys}


def _kind_cell(kind: str) -> Cell:
    return Cell(kind, f"kind-{kind}")


def run_report_html(summary: Mapping[str, Any], card: Mapping[str, Any],
                    results: Sequence[PrivacyResult], metrics: Sequence[Mapping[str, Any]], *,
                    setup: Mapping[str, Any], outputs: Sequence[Mapping[str, Any]],
                    headline: Any) -> str:
    """The HTML text of report.html (the arguments are report.md's, plus the headline)."""
    labels = dict(summary.get("metric_labels") or {"global_accuracy": "global model"})
    final = summary.get("final", {})
    rounds = summary.get("rounds_completed")
    stop = summary.get("stop_reason", "")
    covered = {o["name"]: bool(o["covered"]) for o in outputs if o.get("kind") == "metric"}
    delta = headline.result.delta if headline.result is not None else None

    what_ran = Section("what-ran", "What ran", text=(
        f"Rounds completed: {rounds} of {summary.get('rounds_planned')} planned: "
        f"{STOP_TEXT.get(stop, stop)}.",),
        tables=(table((), [(k, format_number(v)) for k, v in setup.items()],
                      id="setup"),))

    accuracy_rows = [(label, format_percent(final.get(key))) for key, label in labels.items()]
    accuracy = Section("results", "Results", text=(
        f"Final accuracies (round {final.get('round', 0)}), measured without noise on held-out "
        "test data; whether the guarantee covers each one is in the table of outputs.",),
        figures=(line_figure(
            "plot-accuracy",
            [{"name": label, **_xy(metrics, key)} for key, label in labels.items()],
            title="accuracy per round", ytitle="test accuracy", log=False, yrange=(0, 1)),),
        tables=(table(("metric", "value"), accuracy_rows, id="accuracy", numeric=(1,)),))

    result_rows = [(r.method, _kind_cell(r.kind), str(r.extras.get("scope", "")),
                    *(format_bound(value, kind=r.kind)
                      for value in (r.epsilon, r.delta, r.extras.get("mu", ""))))
                   for r in results]
    notes = tuple(dict.fromkeys(r.note for r in results if r.note))
    epsilon_traces = privacy_traces(metrics, "epsilon", headline)
    figures = [line_figure(
        "plot-epsilon", epsilon_traces, title="privacy spent per round",
        ytitle=f"epsilon at delta = {delta:g}" if delta else "epsilon",
        note=privacy_note(epsilon_traces))]
    mu_traces = privacy_traces(metrics, "mu", headline, mark_headline=False)
    if mu_traces:
        figures.append(line_figure("plot-mu", mu_traces, title="Gaussian-DP mu per round",
                                   ytitle="mu", note=privacy_note(mu_traces, "mu")))
    privacy = Section(
        "privacy", f"Privacy after {rounds} rounds",
        text=("A bound is a rigorous upper bound on epsilon; an estimate (e.g. a central-limit "
              "Gaussian-DP mu) can be below the truth; a reference is rigorous for a different, "
              "more private mechanism. Report bounds.",),
        figures=tuple(figures),
        tables=(table((), [(k, format_number(v)) for k, v in card.items()], id="card"),
                *((table(("method", "kind", "scope", "epsilon", "delta", "mu"), result_rows,
                         id="results", numeric=(3, 4, 5)),) if result_rows else ())),
        notes=notes)

    signals = health_traces(metrics, health_keys(metrics, list(labels)), covered)
    shown = " and ".join(t["key"] for t in signals if not t["hidden"])
    health = Section(
        "health", "Health signals",
        text=("Numbers the run logs to show how training went (training loss, the fraction of "
              f"clipped gradients, cohort sizes, ...). Shown: {shown or 'none'}; the others "
              "start hidden: click a legend entry to show or hide its line. Those marked "
              "outside the guarantee are computed from training data without noise: never "
              "publish them with the guarantee.",),
        figures=(line_figure("plot-health", signals, title="health signals per round",
                             ytitle="value", log=False, tozero=True),))

    output_section = Section(
        "outputs", "What the guarantee covers",
        text=("Everything a run writes is a release. Outputs marked no are outside the printed "
              "guarantee: do not publish them with it (run.outputs: guarantee-only keeps them "
              "out of the run directory).",),
        tables=(outputs_table(outputs),))

    files = Section("files", "Files", text=tuple(
        paragraph.replace("`", "") for paragraph in files_paragraphs(summary)))
    provenance = dict(summary.get("provenance") or {})
    if _number(summary.get("wall_seconds")):
        provenance["wall time"] = f"{summary['wall_seconds']:.1f} s"
    sections = [what_ran, accuracy, privacy, health, output_section, files]
    if provenance:
        sections.append(Section("provenance", "Provenance", tables=(table(
            ("", ""), [(k, format_number(v)) for k, v in provenance.items()],
            id="provenance"),)))
    return render_page(f"privfl run: {summary.get('name', '')}", sections, headline=headline,
                       description=str(summary.get("description", "")).strip())
