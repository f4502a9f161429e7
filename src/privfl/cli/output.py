"""Printing results: a human-readable privacy card and table, or one JSON object."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from privfl.accounting.results import PrivacyResult
from privfl.runs.card import kind_cell
from privfl.runs.rounding import format_bound

#: One line per kind, printed under a table that shows it (README "Reading a privacy number").
KIND_LEGEND = {
    "bound": "bound: a rigorous upper bound for what ran",
    "estimate": "estimate: an approximation that can be below the truth, not a guarantee",
    "reference": (
        "reference: rigorous only for a different, more private mechanism; a lower reference "
        "here (the truth is at least this), not a guarantee"
    ),
}
EXTRA_COLUMNS = ("scope", "mu", "order", "conversion", "noise")


def _format_number(value: Any) -> str:
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        return f"{value:.6g}" if abs(value) < 1e5 else f"{value:.4e}"
    return str(value)


def _json_safe(value: Any) -> Any:
    """JSON has no infinity: write it as the string "inf" so every consumer can parse the output."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, Mapping):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return value


def print_json(payload: Mapping[str, Any]) -> None:
    print(json.dumps(_json_safe(payload), indent=2))


def print_report(
    title: str,
    setting: Mapping[str, Any],
    results: Sequence[PrivacyResult],
    *,
    unsupported: Mapping[str, str] | None = None,
    footnotes: Sequence[str] = (),
) -> None:
    """A privacy card (what ran) followed by one row per accountant: its kind (bound, estimate,
    reference) and the number of steps it covers (1 for a per-iteration row, T when composed)."""
    console = Console()
    _print_card(console, title, setting)

    extras = [c for c in EXTRA_COLUMNS if any(c in r.extras for r in results)]
    table = _result_table(results, extras)
    shared: list[str] = []
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
    if natural > console.width and len(results) > 1:
        # too wide: an extra that every row carrying it shares moves under the table
        shared = [c for c in extras if len({repr(r.extras.get(c)) for r in results
                                            if c in r.extras}) == 1]
        table = _result_table(results, [c for c in extras if c not in shared])
    console.print(table)
    for column in shared:
        value = next(r.extras[column] for r in results if column in r.extras)
        methods = [r.method for r in results if column in r.extras]
        others = [r.method for r in results if column not in r.extras]
        which = (
            ", ".join(methods)
            if len(methods) <= len(others)
            else "every row" + (f" but {', '.join(others)}" if others else "")
        )
        shown = format_bound(value) if column == "mu" else _format_number(value)
        console.print(f"{column} = {shown} ({which})")
    for method, reason in (unsupported or {}).items():
        console.print(f"[dim]{escape(method)}: not applicable — {escape(reason)}[/dim]")
    _print_legend(console, [r.kind for r in results])
    notes = list(dict.fromkeys(r.note for r in results if r.note)) + list(footnotes)
    for note in notes:
        console.print(f"[dim]• {escape(note)}[/dim]")


def _result_table(results: Sequence[PrivacyResult], extras: Sequence[str]) -> Table:
    columns = ("method", "kind", "steps", "epsilon", "delta", *extras)
    rows = [
        [
            result.method,
            result.kind,
            _format_number(result.steps),
            format_bound(result.epsilon, kind=result.kind),
            format_bound(result.delta, kind=result.kind),
            *(format_bound(result.extras.get(c, ""), kind=result.kind) if c == "mu"
              else _format_number(result.extras.get(c, "")) for c in extras),
        ]
        for result in results
    ]
    table = Table(show_lines=False)
    for index, column in enumerate(columns):
        essential = index < 5  # never shortened: the number and what it is
        width = max([len(column), *(len(row[index]) for row in rows)])
        table.add_column(
            column,
            justify="right" if column in ("steps", "epsilon", "delta", "mu") else "left",
            no_wrap=essential,
            min_width=width if essential else None,
            overflow="fold",
        )
    for row in rows:
        table.add_row(row[0], kind_cell(row[1]), *row[2:])
    return table


def print_noise_table(title: str, setting: Mapping[str, Any], rows: Sequence[Any]) -> None:
    """Calibrated noise per scheme (rows with ``method``, ``kind``, ``noise``, ``neighbouring``,
    ``note``, e.g. :class:`privfl.accounting.participation.NoiseCalibration`)."""
    console = Console()
    _print_card(console, title, setting)
    table = Table(show_lines=False)
    table.add_column("method", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("noise (sigma)", justify="right", no_wrap=True)
    table.add_column("neighbouring", no_wrap=True)
    for row in rows:
        table.add_row(
            row.method,
            kind_cell(row.kind),
            "unreachable" if row.noise is None else _format_number(row.noise),
            row.neighbouring,
        )
    console.print(table)
    for row in rows:
        console.print(f"[dim]• {row.method}: {row.note}[/dim]")


def _print_card(console: Console, title: str, setting: Mapping[str, Any]) -> None:
    card = Table(title=title, show_header=False, title_justify="left", box=None, pad_edge=False)
    card.add_column(style="bold")
    card.add_column()
    for key, value in setting.items():
        card.add_row(key, _format_number(value))
    console.print(card)


def _print_legend(console: Console, kinds: Sequence[str]) -> None:
    for kind in dict.fromkeys(kinds):
        if kind in KIND_LEGEND:
            console.print(f"[dim]{KIND_LEGEND[kind]}[/dim]")
