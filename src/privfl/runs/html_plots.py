"""What a run's report.html plots show on open, and how their lines are named.

Privacy (:func:`privacy_traces`): one trace per accountant, kind and scope of the rows'
``privacy`` entries, in a legend group per scope (the headline's first). Shown on open: the
headline's own series (a value logged at the last round only is a marker named "final PLD bound
(headline)": what it is, not a per-round series), then the per-round bounds of the headline's
scope (estimates and references when it has no bound), at most :data:`SHOWN` in all; the others
start hidden. :func:`privacy_note` says what solid, dashed and markers mean for the traces
there are. Health (:func:`health_traces`): the training loss and the clipped fraction shown (or
the first signal that varies), the rest hidden.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from privfl.runs.headline import method_name
from privfl.runs.plots import _series, privacy_series
from privfl.runs.rounding import round_bound

__all__ = ["HEALTH_SHOWN", "SHOWN", "health_traces", "hover_values", "privacy_note",
           "privacy_traces"]

#: the most privacy traces shown on open; the health signals shown on open when the run has them
SHOWN = 4
HEALTH_SHOWN = ("train_loss", "clipped_fraction")
_FINAL = {"size": 11, "symbol": "diamond", "line": {"width": 1, "color": "#222"}}


def _last_round(metrics: Sequence[Mapping[str, Any]]) -> int | None:
    rounds = [int(row["round"]) for row in metrics if "round" in row]
    return max(rounds) if rounds else None


def privacy_traces(metrics: Sequence[Mapping[str, Any]], field: str, headline: Any, *,
                   mark_headline: bool = True) -> list[dict[str, Any]]:
    """:func:`~privfl.runs.html.line_figure` traces of ``field`` (``epsilon`` or ``mu``):
    grouped by scope, named, and shown or hidden on open (module docstring). ``headline``: a
    :class:`~privfl.runs.headline.Headline` or None; ``mark_headline``: name its series."""
    result = getattr(headline, "result", None)
    head_method = result.method if result is not None and result.kind == "bound" else None
    head_scope = str(result.extras.get("scope", "")) if result is not None else ""
    last = _last_round(metrics)
    series = privacy_series(list(metrics), field)
    scoped = any(scope for _, _, scope in series)

    def is_head(key: tuple[str, str, str]) -> bool:
        return key[0] == head_method and key[1] == "bound" and key[2] == head_scope

    def in_scope(key: tuple[str, str, str]) -> bool:
        return not head_scope or key[2] == head_scope

    def tightest(keys: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        return sorted(keys, key=lambda k: series[k][1][-1])

    shown = [k for k in series if is_head(k)]
    per_round = [k for k in series if in_scope(k) and len(series[k][0]) > 1]
    bounds = tightest([k for k in per_round if k[1] == "bound"])
    others = tightest([k for k in per_round if k[1] != "bound"])
    for key in bounds or others or list(series):
        if len(shown) < SHOWN and key not in shown:
            shown.append(key)
    position = {key: index for index, key in enumerate(dict.fromkeys([*shown, *series]))}
    traces = []
    for key in sorted(series, key=lambda k: (k[2] != head_scope, position[k])):
        method, kind, scope = key
        xs, ys = series[key]
        final = len(xs) == 1 and xs[0] == last and len(metrics) > 1
        name = f"{'final ' if final else ''}{method_name(method)} {kind}"
        headline_trace = mark_headline and is_head(key)
        name += " (headline)" if headline_trace else ""
        group = f"{scope} scope" + (" (headline)" if scope == head_scope else "")
        traces.append({"name": name, "x": xs, "y": hover_values(ys, kind), "kind": kind,
                       "final": final,
                       "headline": headline_trace,
                       "dash": kind != "bound", "hidden": key not in shown,
                       **({"marker": _FINAL} if final else {}),
                       **({"group": group} if scoped and scope else {})})
    return traces


def hover_values(values: Sequence[Any], kind: str = "bound") -> list[Any]:
    """A privacy series as plotted: each number rounded as printed numbers are
    (:func:`~privfl.runs.rounding.round_bound` at 6 significant digits, the hover's ``~g``), so
    that hovering a bound never shows less than the bound."""
    return [round_bound(v, 6, kind=kind) if isinstance(v, float) else v for v in values]


def privacy_note(traces: Sequence[Mapping[str, Any]], quantity: str = "epsilon") -> str:
    """The caption of a privacy plot: what its line styles and markers mean, for the kinds of
    trace it has, and how to show the hidden ones."""
    kinds = {t["kind"] for t in traces}
    meaning = {"bound": "(solid) are rigorous upper bounds",
               "estimate": f"(dashed) are approximations that can be below the true {quantity}",
               "reference": "(dashed) are rigorous for a different, more private mechanism"}
    parts = [f"entries named {kind} {text}" for kind, text in meaning.items() if kind in kinds]
    text = "E" + "; ".join(parts)[1:] + "." if parts else ""
    if any(t["final"] for t in traces):
        text += (" A diamond at the last round is a value computed once, at the end of the run "
                 "(such as a final PLD bound), not a per-round series.")
    if any(t["headline"] for t in traces):
        text += " The entry marked (headline) is the headline's number."
    hidden = sum(bool(t.get("hidden")) for t in traces)
    if hidden:
        text += (f" {hidden} more line{'s start' if hidden > 1 else ' starts'} hidden: click a "
                 "legend entry to show or hide its line.")
    return (text + " The buttons switch the y axis between linear and log.").strip()


def health_traces(metrics: Sequence[Mapping[str, Any]], keys: Sequence[str],
                  covered: Mapping[str, bool]) -> list[dict[str, Any]]:
    """One trace per health signal of ``keys``, named "(outside the guarantee)" unless
    ``covered``; the training loss and clipped fraction shown on open (or the first signal
    that varies, else the first), the others hidden."""
    xy = {key: _series(list(metrics), key) for key in keys}
    shown = [key for key in HEALTH_SHOWN if key in xy]
    if not shown and keys:
        shown = [next((k for k in keys if len(set(xy[k][1])) > 1), keys[0])]
    outside = " (outside the guarantee)"
    return [{"name": key + ("" if covered.get(key, False) else outside), "key": key,
             "x": xy[key][0],
             "y": xy[key][1], "hidden": key not in shown} for key in keys]
