"""Printing results: a human-readable privacy card and table, or one JSON object."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from privfl.accounting.results import PrivacyResult

KIND_STYLE = {"bound": "green", "estimate": "yellow"}
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
    """A privacy card (what ran) followed by one row per accountant, labelled bound/estimate."""
    console = Console()
    card = Table(title=title, show_header=False, title_justify="left", box=None, pad_edge=False)
    card.add_column(style="bold")
    card.add_column()
    for key, value in setting.items():
        card.add_row(key, _format_number(value))
    console.print(card)

    extras = [c for c in EXTRA_COLUMNS if any(c in r.extras for r in results)]
    table = Table(show_lines=False)
    for column in ("method", "kind", "epsilon", "delta", *extras):
        table.add_column(
            column, justify="right" if column in ("epsilon", "delta", "mu") else "left"
        )
    for result in results:
        style = KIND_STYLE.get(result.kind, "")
        cells = [
            result.method,
            f"[{style}]{result.kind}[/{style}]",
            _format_number(result.epsilon),
            _format_number(result.delta),
            *(_format_number(result.extras.get(c, "")) for c in extras),
        ]
        table.add_row(*cells)
    console.print(table)
    for method, reason in (unsupported or {}).items():
        console.print(f"[dim]{method}: not applicable — {reason}[/dim]")
    notes = list(dict.fromkeys(r.note for r in results if r.note)) + list(footnotes)
    for note in notes:
        console.print(f"[dim]• {note}[/dim]")
