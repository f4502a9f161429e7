"""Self-contained HTML pages (report.html): jinja2 template, plotly figures with plotly.js inlined.

A page is a title, an optional headline (:mod:`privfl.runs.headline`) and a list of
:class:`Section` s, each with paragraphs, interactive figures and tables. The page loads nothing
from the network: plotly.js (the vendored basic bundle, ``vendor/README.md``) is inlined in a
``<script>`` element, figures are plain JSON given to ``Plotly.newPlot``, and a
Content-Security-Policy (``default-src 'none'``, inline scripts and styles only) makes the
browser refuse any request a future change might add. Every figure has a linear/log toggle on
its y axis (plotly ``updatemenus``; every tick labelled in full, ``0.2`` or ``20`` where plotly
would write a bare ``2`` on a log axis: :data:`TICK_FORMAT`) and legend entries that show and
hide their traces; traces marked ``hidden`` start hidden (``visible: "legendonly"``); a figure
is tall enough for its legend never to scroll.

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

__all__ = ["PLOTLY_BASIC_VERSION", "TRACE_TYPES", "Cell", "Figure", "HtmlTable", "Row",
           "Section", "TICK_FORMAT", "line_figure", "outputs_table", "plotly_js", "render_page",
           "table", "write_page"]

#: the vendored plotly.js bundle (vendor/plotly-basic.min.js) and the trace types it draws
PLOTLY_BASIC_VERSION = "4.1.1"
TRACE_TYPES = frozenset({"scatter", "bar", "pie"})
#: d3 format of the y axes' tick labels (and hover values): 6 significant digits, no trailing
#: zeros; with it, plotly's log ticks keep their places but each reads as the full number
TICK_FORMAT = "~g"


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


def _legend_height(data: Sequence[Mapping[str, Any]]) -> int:
    """A figure height whose plot area holds the whole legend (one line per trace, a title and
    a gap per group), so that the legend never scrolls."""
    groups = len({d["legendgroup"] for d in data if "legendgroup" in d})
    return max(420, 160 + 21 * len(data) + 32 * groups)


def line_figure(id: str, traces: Sequence[Mapping[str, Any]], *, title: str, ytitle: str,
                xtitle: str = "round", log: bool | None = None,
                yrange: Sequence[float] | None = None, tozero: bool = False,
                note: str = "") -> Figure:
    """A line chart of ``traces`` (each ``{"name", "x", "y"}`` plus optional ``"dash": True``,
    ``"hidden": True``, ``"group"`` (a legend group titled so), ``"marker"`` (plotly marker
    settings)) with a linear/log toggle. ``log=None``: log when the positive values of the
    traces shown on open span more than a factor 30. ``tozero``: the linear axis starts at 0."""
    data = []
    shown: list[float] = []
    for trace in traces:
        ys = [float(y) if isinstance(y, (int, float)) and math.isfinite(y) else None
              for y in trace["y"]]
        shown += [] if trace.get("hidden") else _finite([y for y in ys if y is not None])
        data.append({
            "type": "scatter", "mode": "lines+markers" if len(ys) < 60 else "lines",
            "name": str(trace["name"]), "x": list(trace["x"]), "y": ys,
            "line": {"dash": "dash" if trace.get("dash") else "solid"},
            "marker": {"size": 4, **trace.get("marker", {})},
            "visible": "legendonly" if trace.get("hidden") else True,
            **({"legendgroup": trace["group"], "legendgrouptitle": {"text": trace["group"]}}
               if trace.get("group") else {}),
        })
    positive = [v for v in shown if v > 0]
    if log is None:
        log = bool(positive) and max(positive) / min(positive) > 30
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}},
        "xaxis": {"title": {"text": xtitle}},
        "yaxis": {"title": {"text": ytitle}, "type": "log" if log else "linear",
                  "tickformat": TICK_FORMAT,
                  **({"rangemode": "tozero"} if tozero else {}),
                  **({"range": list(yrange)} if yrange is not None and not log else {})},
        "showlegend": True,
        "legend": {"orientation": "v", "groupclick": "toggleitem"},
        "hoverlabel": {"namelength": -1},
        "margin": {"t": 60, "r": 20},
        "height": _legend_height(data),
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


def plotly_js() -> str:
    """The plotly.js inlined in every page: the vendored basic bundle (``vendor/``); if an
    install lost it, plotly's full bundle (four times larger) with a warning."""
    from importlib import resources

    try:
        return (resources.files("privfl.runs") / "vendor" / "plotly-basic.min.js").read_text(
            encoding="utf-8")
    except OSError:
        import warnings

        from plotly.offline import get_plotlyjs

        warnings.warn("privfl/runs/vendor/plotly-basic.min.js is missing (a broken install): "
                      "report.html inlines plotly's full bundle (about 4.8 MB)", stacklevel=2)
        return get_plotlyjs()


def render_page(title: str, sections: Sequence[Section], *, headline: Any = None,
                description: str = "") -> str:
    """The page's HTML text. ``headline``: a :class:`~privfl.runs.headline.Headline` (or
    None)."""
    import markupsafe

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
        plotly_js=markupsafe.Markup(plotly_js().replace("</script", "<\\/script")),
        figures_json=markupsafe.Markup(_script_json(figures)))


def write_page(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (never through a link at ``path``)."""
    from privfl.runs.rundir import write_atomically

    path = Path(path)
    write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))
    return path
