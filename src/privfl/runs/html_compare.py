"""report.html of ``privfl compare --html FILE``: the runs side by side, one self-contained page
(:mod:`privfl.runs.html`).

Sections: each run's headline (its summary.json ``headline``, when the run finished); the runs
(algorithm, unit, sampling, delta, rounds); accuracy per round, epsilon per round (log toggle)
and accuracy against epsilon (each private run's first headline accuracy at each round against
the epsilon spent by then: the privacy-utility trade-off); the table of the compared rounds.
Runs with different units (record or client) or datasets are flagged: their epsilons are not
comparable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from privfl.runs.compare import (
    EPSILON_NOTE,
    MISSING,
    MISSING_NOTE,
    RunRecord,
    accountant_series,
    comparison_notes,
    epsilon_cell,
    epsilon_series,
    final_point,
    percent_cell,
)
from privfl.runs.html import Cell, Section, line_figure, render_page, table
from privfl.runs.html_plots import hover_values
from privfl.runs.plots import _series
from privfl.runs.rounding import format_bound

__all__ = ["comparison_html"]


def _headline(run: RunRecord) -> str:
    try:
        summary = json.loads((run.path / "summary.json").read_text(encoding="utf-8"))
        return str(summary.get("headline", {}).get("sentence", "")) or "-"
    except (OSError, ValueError, AttributeError):
        return "- (the run has not finished: no summary.json)"


def _tradeoff(run: RunRecord, key: str, epsilons: Mapping[int, float]) -> dict[str, list[float]]:
    """(epsilon, accuracy) per round; a stopped run's final point at its headline
    (:func:`~privfl.runs.compare.final_point`)."""
    final = final_point(run)
    if final is not None:
        epsilons = {**epsilons, final[0]: float(final[1]["epsilon"])}
    xs, ys = [], []
    for row in run.metrics:
        eps, acc = epsilons.get(row["round"]), row.get(key)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (eps, acc)):
            xs.append(float(eps))
            ys.append(float(acc))
    return {"x": xs, "y": ys}


def _plotted(run: RunRecord, rows: Sequence[Mapping[str, Any]]) -> tuple[str, dict[int, float]]:
    """(label, round -> epsilon) of a run's plotted epsilon: the accountant and kind of its
    column in ``rows`` (so that the plot and the table agree), at every round that carries it;
    without compared rows, :func:`~privfl.runs.compare.epsilon_series`."""
    if not run.private:
        return "", {}
    if not rows:
        return epsilon_series(run)
    entry = rows[0][run.name]
    method, kind = entry.get("epsilon_method"), entry.get("epsilon_kind", "bound")
    return f"{method} {kind}", accountant_series(run, method, kind)


def comparison_html(runs: Sequence[RunRecord], rows: Sequence[Mapping[str, Any]], *,
                    datasets: Mapping[str, str] | None = None) -> str:
    """The HTML text (``rows``: :func:`privfl.runs.compare.comparison_rows`; ``datasets``:
    run name -> dataset, where it differs from the run's own ``dataset``)."""
    datasets = {run.name: run.dataset for run in runs} | dict(datasets or {})
    runs = [replace(run, dataset=datasets[run.name]) for run in runs]
    notes = [f"Warning: {note}." for note in comparison_notes(runs)]
    overview = Section("runs", "Runs", tables=(table(
        ("run", "headline", "algorithm", "dataset", "unit", "sampling", "delta", "rounds"),
        [(run.name, _headline(run), run.algorithm, datasets.get(run.name, "-"), run.unit,
          run.sampling, format_bound(run.delta) if run.private else "-",
          run.metrics[-1]["round"]) for run in runs], id="runs"),), notes=tuple(notes))
    accuracy, epsilon, tradeoff = [], [], []
    for run in runs:
        labels = dict(run.metric_labels)
        for index, key in enumerate(run.headline):
            xs, ys = _series(list(run.metrics), key)
            accuracy.append({"name": f"{run.name}: {labels[key]}", "x": xs, "y": ys,
                             "dash": index > 0})
        label, series = _plotted(run, rows)
        if series:  # the table's accountant of the run (compare.column_accountants); dashed:
            # an estimate
            estimate = label.endswith("estimate")
            epsilon.append({"name": f"{run.name} ({label})", "x": list(series),
                            "y": hover_values(list(series.values())), "dash": estimate})
            if run.headline:
                key = run.headline[0]
                tradeoff.append({"name": f"{run.name}: {labels[key]} ({label})",
                                 **_tradeoff(run, key, series), "dash": estimate})
    figures = [
        line_figure("plot-accuracy", accuracy, title="accuracy per round",
                    ytitle="test accuracy", log=False, yrange=(0, 1)),
        line_figure("plot-epsilon", epsilon,
                    title="epsilon per round (one accountant per run; an estimate dashed)",
                    ytitle="epsilon"),
        line_figure("plot-tradeoff", tradeoff, title="accuracy against epsilon spent",
                    xtitle="epsilon (each run's per-round series; a stopped run's last point: "
                    "its headline)", ytitle="test accuracy",
                    log=False, yrange=(0, 1)),
    ]
    header = ["round"]
    for run in runs:
        header += [f"{run.name} {dict(run.metric_labels)[k]} %" for k in run.headline]
        if run.private:
            header += [f"{run.name} eps"]
    cells = []
    for row in rows:
        line: list[Any] = [row["round"]]
        for run in runs:
            entry = row[run.name]
            line += [Cell(percent_cell(entry[k]), "num") for k in run.headline]
            if run.private:
                line.append(Cell(epsilon_cell(entry), "num"))
        cells.append(line)
    missing = any(isinstance(c, Cell) and c.text == MISSING for line in cells for c in line)
    compared = Section("rounds", "Compared rounds", figures=tuple(figures),
                       tables=(table(header, cells, id="compared"),),
                       notes=(EPSILON_NOTE, *((MISSING_NOTE,) if missing else ())))
    return render_page(f"privfl compare: {', '.join(run.name for run in runs)}",
                       [overview, compared])
