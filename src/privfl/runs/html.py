"""Self-contained HTML pages (report.html): jinja2 template, plotly figures with plotly.js inlined.

A page is a title, an optional headline (:mod:`privfl.runs.headline`) and a list of
:class:`Section` s, each with paragraphs, interactive figures and tables. The page loads nothing
from the network: plotly.js is inlined in a ``<script>`` element, figures are plain JSON given to
``Plotly.newPlot``, and a Content-Security-Policy (``default-src 'none'``, inline scripts and
styles only) makes the browser refuse any request a future change might add. Every figure has a
linear/log toggle on its y axis (plotly ``updatemenus``) and legend entries that show and hide
their traces; traces marked ``hidden`` start hidden (``visible: "legendonly"``).

The builders of each page (a run's, :mod:`privfl.runs.html_run`; ``privfl compare``'s,
:mod:`privfl.runs.html_compare`) only assemble sections; this module renders them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Cell", "Figure", "HtmlTable", "Row", "Section", "line_figure", "outputs_table",
           "render_page", "table", "write_page"]


@dataclass(frozen=True)
class Cell:
    """One table cell: its text (escaped when rendered) and an optional CSS class."""

    text: str
    cls: str = ""


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]
    cls: str = ""  #: "outside" highlights a row outside the guarantee


@dataclass(frozen=True)
class HtmlTable:
    header: tuple[str, ...]
    rows: tuple[Row, ...]
    id: str = ""


@dataclass(frozen=True)
class Figure:
    """A plotly figure: ``data`` (traces), ``layout``; ``note`` is printed under it."""

    id: str
    data: list[dict[str, Any]]
    layout: dict[str, Any]
    note: str = ""

    @property
    def traces(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class Section:
    id: str
    title: str
    text: tuple[str, ...] = ()
    figures: tuple[Figure, ...] = ()
    tables: tuple[HtmlTable, ...] = ()
    notes: tuple[str, ...] = ()


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, id: str = "",
          row_classes: Sequence[str] | None = None, numeric: Sequence[int] = ()) -> HtmlTable:
    """An :class:`HtmlTable` from plain values (cells already :class:`Cell` are kept; the
    columns ``numeric`` are right-aligned)."""
    classes = list(row_classes or [""] * len(rows))
    if len(classes) != len(rows):
        raise ValueError(f"row_classes has {len(classes)} entries: must have one per row "
                         f"({len(rows)})")
    built = []
    for values, cls in zip(rows, classes, strict=True):
        cells = tuple(v if isinstance(v, Cell) else Cell(str(v), "num" if i in numeric else "")
                      for i, v in enumerate(values))
        built.append(Row(cells, cls))
    return HtmlTable(tuple(header), tuple(built), id)


def outputs_table(outputs: Sequence[Mapping[str, Any]]) -> HtmlTable:
    """The classified outputs (``Output.to_dict()`` rows of :mod:`privfl.algorithms.outputs`)
    as a table: output, kind, covered, why; the rows outside the guarantee highlighted."""
    rows = [(o["name"], o["kind"], "yes" if o["covered"] else "no", o["reason"])
            for o in outputs]
    return table(("output", "kind", "covered", "why"), rows, id="outputs",
                 row_classes=["" if o["covered"] else "outside" for o in outputs])


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]


def line_figure(id: str, traces: Sequence[Mapping[str, Any]], *, title: str, ytitle: str,
                xtitle: str = "round", log: bool | None = None,
                yrange: Sequence[float] | None = None, note: str = "") -> Figure:
    """A line chart of ``traces`` (each ``{"name", "x", "y"}`` plus optional ``"dash": True``,
    ``"hidden": True``, ``"group"``) with a linear/log toggle. ``log=None``: log when the
    positive values span more than a factor 30."""
    data = []
    values: list[float] = []
    for trace in traces:
        ys = [float(y) if isinstance(y, (int, float)) and math.isfinite(y) else None
              for y in trace["y"]]
        values += _finite([y for y in ys if y is not None])
        data.append({
            "type": "scatter", "mode": "lines+markers" if len(ys) < 60 else "lines",
            "name": str(trace["name"]), "x": list(trace["x"]), "y": ys,
            "line": {"dash": "dash" if trace.get("dash") else "solid"},
            "marker": {"size": 4},
            "visible": "legendonly" if trace.get("hidden") else True,
            **({"legendgroup": trace["group"], "legendgrouptitle": {"text": trace["group"]}}
               if trace.get("group") else {}),
        })
    positive = [v for v in values if v > 0]
    if log is None:
        log = bool(positive) and max(positive) / min(positive) > 30
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}},
        "xaxis": {"title": {"text": xtitle}},
        "yaxis": {"title": {"text": ytitle}, "type": "log" if log else "linear",
                  **({"range": list(yrange)} if yrange is not None and not log else {})},
        "showlegend": True,
        "legend": {"orientation": "v", "groupclick": "toggleitem"},
        "margin": {"t": 60, "r": 20},
        "height": 420,
        "updatemenus": [{
            "type": "buttons", "direction": "right", "x": 0, "xanchor": "left", "y": 1.16,
            "yanchor": "top", "showactive": True, "active": 1 if log else 0,
            "buttons": [
                {"label": "linear", "method": "relayout",
                 "args": [{"yaxis.type": "linear", "yaxis.autorange": True}]},
                {"label": "log", "method": "relayout",
                 "args": [{"yaxis.type": "log", "yaxis.autorange": True}]},
            ],
        }],
    }
    if not data:
        layout["annotations"] = [{"text": "nothing to plot", "showarrow": False,
                                  "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}]
    return Figure(id, data, layout, note)


def _script_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element (no ``</``, no ``<!--``); non-finite floats are
    null (JSON has none; plotly skips them)."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, Mapping):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    text = json.dumps(clean(value), allow_nan=False)
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


def _environment() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("privfl.runs", "templates"),
                              autoescape=True, trim_blocks=True, lstrip_blocks=True,
                              undefined=jinja2.StrictUndefined)


def render_page(title: str, sections: Sequence[Section], *, headline: Any = None,
                description: str = "") -> str:
    """The page's HTML text. ``headline``: a :class:`~privfl.runs.headline.Headline` (or
    None)."""
    import markupsafe
    from plotly.offline import get_plotlyjs

    import privfl

    ids = [f.id for s in sections for f in s.figures]
    if len(ids) != len(set(ids)):
        raise ValueError(f"figure ids {ids!r} are not unique")
    figures = {f.id: {"data": f.data, "layout": f.layout,
                      "config": {"displaylogo": False, "responsive": True}}
               for s in sections for f in s.figures}
    head = None if headline is None else {
        "sentence": headline.sentence, "advice": headline.advice,
        "reading": headline.reading, "bound": headline.result is not None}
    template = _environment().get_template("report.html.j2")
    return template.render(
        title=title, description=description, headline=head, sections=sections,
        version=privfl.__version__,
        plotly_js=markupsafe.Markup(get_plotlyjs().replace("</script", "<\\/script")),
        figures_json=markupsafe.Markup(_script_json(figures)))


def write_page(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (never through a link at ``path``)."""
    from privfl.runs.rundir import write_atomically

    path = Path(path)
    write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))
    return path
