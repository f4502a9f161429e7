"""The privacy card: what a run's privacy numbers mean, printed at the start and end of a run.

A card lists the unit of privacy, the neighbouring relation, how records and clients are
sampled, the noise and clipping, how many steps are composed, delta and the release/threat
model, followed by one row per accountant result labelled ``bound`` or ``estimate``
(design principle 1). Each algorithm's privacy plan builds its rows (``plan.card(rounds)``, from
the same settings the trainer runs); :func:`render_card` prints them with rich;
:func:`card_markdown` writes them for report.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from privfl.accounting.results import PrivacyResult
from privfl.runs.rounding import format_bound

__all__ = [
    "KIND_STYLE",
    "kind_cell",
    "card_markdown",
    "format_number",
    "format_percent",
    "render_card",
    "results_rows",
]

KIND_STYLE = {"bound": "green", "estimate": "yellow", "reference": "cyan"}


def format_number(value: Any) -> str:
    """Floats with 6 significant digits (``inf`` for infinity), anything else as ``str``."""
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        if math.isnan(value):
            return "nan"
        return f"{value:.6g}" if abs(value) < 1e5 else f"{value:.4e}"
    return str(value)


def format_percent(value: Any, suffix: str = " %") -> str:
    """A fraction as a percentage with 2 decimals (``0.5 -> "50.00 %"``); ``n/a`` if not finite."""
    if isinstance(value, (int, float)) and math.isfinite(value):
        return f"{100 * value:.2f}{suffix}"
    return "n/a"


def kind_cell(kind: str) -> str:
    """The kind with its colour markup (bound green, estimate yellow, reference cyan)."""
    style = KIND_STYLE.get(kind)
    return f"[{style}]{escape(kind)}[/{style}]" if style else escape(kind)


def results_rows(results: Sequence[PrivacyResult]) -> list[dict[str, Any]]:
    """One dict per result with the columns shown on cards."""
    rows = []
    for r in results:
        rows.append({
            "method": r.method,
            "kind": r.kind,
            "scope": r.extras.get("scope", ""),
            "steps": r.steps,
            "epsilon": r.epsilon,
            "delta": r.delta,
            "mu": r.extras.get("mu", ""),
        })
    return rows


def render_card(
    console: Console,
    title: str,
    rows: Mapping[str, Any],
    results: Sequence[PrivacyResult],
    *,
    footnotes: Sequence[str] = (),
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Print the card's rows and a table of labelled results to ``console``; return what was
    shown (``{"rows": ..., "notes": ...}``).

    ``previous``: what an earlier call on the same console returned (the planned card of a
    run, printed before its spent card). Rows whose values are unchanged and notes already
    printed are left out, with one line saying so, instead of printing the card twice.
    """
    rows = dict(rows)
    seen_rows = dict(previous.get("rows", {})) if previous else {}
    seen_notes = set(previous.get("notes", ())) if previous else set()
    shown = {key: value for key, value in rows.items()
             if key not in seen_rows or seen_rows[key] != value}
    card = Table(title=title, show_header=False, title_justify="left", box=None, pad_edge=False)
    card.add_column(style="bold", no_wrap=True)
    card.add_column(overflow="fold")
    for key, value in shown.items():
        card.add_row(escape(str(key)), escape(format_number(value)))
    if len(shown) < len(rows):
        card.add_row("", f"[dim]{len(rows) - len(shown)} more rows as in the card above[/dim]")
    console.print(card)
    if results:
        table = Table(show_lines=False)
        for column in ("method", "kind", "scope", "steps", "epsilon", "delta", "mu"):
            table.add_column(column, justify="right" if column in (
                "steps", "epsilon", "delta", "mu") else "left")
        for row in results_rows(results):
            table.add_row(
                escape(row["method"]), kind_cell(row["kind"]),
                escape(str(row["scope"])), format_number(row["steps"]),
                *(format_bound(row[key], kind=row["kind"]) for key in ("epsilon", "delta", "mu")),
            )
        console.print(table)
    notes = list(dict.fromkeys([*(r.note for r in results if r.note), *footnotes]))
    for note in notes:
        if note not in seen_notes:
            console.print(f"[dim]• {escape(note)}[/dim]")
    return {"rows": rows, "notes": [*seen_notes, *notes]}


def card_markdown(rows: Mapping[str, Any], results: Sequence[PrivacyResult]) -> str:
    """The card as Markdown tables (for report.md)."""
    lines = ["| | |", "|---|---|"]
    for key, value in rows.items():
        lines.append(f"| {key} | {format_number(value)} |")
    if results:
        lines += ["", "| method | kind | scope | steps | epsilon | delta | mu |",
                  "|---|---|---|---|---|---|---|"]
        for row in results_rows(results):
            lines.append(
                f"| {row['method']} | **{row['kind']}** | {row['scope']} | "
                f"{format_number(row['steps'])} | "
                + " | ".join(format_bound(row[key], kind=row["kind"])
                             for key in ("epsilon", "delta", "mu")) + " |"
            )
        notes = list(dict.fromkeys(r.note for r in results if r.note))
        if notes:
            lines.append("")
            lines += [f"* {note}" for note in notes]
    return "\n".join(lines)
