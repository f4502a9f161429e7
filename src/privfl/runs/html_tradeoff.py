"""report.html of ``privfl tradeoff`` (:mod:`privfl.runs.tradeoff_report`): one self-contained
page (:mod:`privfl.runs.html`) with the measured leakage against utility loss per protection
mechanism (Zhang, Chen and Yang 2022), the table of points, and the outputs of the directory,
each classified (:func:`tradeoff_outputs`): these are Monte Carlo measurements, not a privacy
guarantee."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from privfl.algorithms.outputs import Output
from privfl.runs.html import Section, line_figure, render_page, table
from privfl.runs.html_certify import outputs_section

__all__ = ["tradeoff_html", "tradeoff_outputs"]

_MEASURED = (False, "Monte Carlo measurements (leakage, utility loss, accuracies) of protection "
             "mechanisms on models trained from the data: no differential-privacy guarantee "
             "covers them")


def tradeoff_outputs() -> list[Output]:
    """The files of a ``privfl tradeoff`` directory, each classified (all outside a guarantee:
    the experiment measures, it does not bound)."""
    return [Output(name, "file", *_MEASURED) for name in
            ("tradeoff.json", "frontier.png", "report.md", "report.html")]


def _number(value: Any, digits: int = 3) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.{digits}g}"
    return "—"


def tradeoff_html(result: Mapping[str, Any]) -> str:
    """The HTML text of ``privfl tradeoff``'s result (:func:`privfl.runs.tradeoff_run.
    run_tradeoff`)."""
    by_mechanism: dict[str, list[Mapping[str, Any]]] = {}
    for point in result["points"]:
        by_mechanism.setdefault(point["mechanism"], []).append(point)
    traces = []
    for mechanism, points in by_mechanism.items():
        ordered = sorted(points, key=lambda p: p["eps_p"])
        traces.append({"name": mechanism, "x": [p["eps_p"] for p in ordered],
                       "y": [p["eps_u"] for p in ordered]})
    frontier = Section("frontier", "Leakage against utility loss", text=(
        "Each point is one protection mechanism at one parameter: the measured privacy "
        "leakage eps_p and utility loss eps_u (Zhang, Chen and Yang 2022). Monte Carlo "
        "estimates for one finite attacker, not privacy guarantees.",),
        figures=(line_figure("plot-frontier", traces, title="eps_u against eps_p",
                             ytitle="utility loss eps_u", xtitle="privacy leakage eps_p"),))
    rows = [(p["mechanism"], f"{p['parameter']} = {_number(p['value'], 6)}",
             _number(p["eps_p"]), _number(p["eps_u"]), _number(p["tv"]),
             _number(p["accuracy"], 4)) for p in result["points"]]
    points = Section("points", "Points", tables=(table(
        ("mechanism", "parameter", "eps_p", "eps_u", "TV", "accuracy, 1 round"), rows,
        id="points", numeric=(2, 3, 4, 5)),))
    files = outputs_section(tradeoff_outputs())
    return render_page(f"privfl tradeoff: {result['name']}", [frontier, points, files],
                       description=str(result.get("description") or ""))
