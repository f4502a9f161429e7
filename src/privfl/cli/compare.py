"""``privfl compare``: runs side by side at the rounds they all completed."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privfl.cli.common import JsonOpt, user_errors

__all__ = ["compare_command"]


@user_errors
def compare_command(
    runs: Annotated[list[Path], typer.Argument(
        help="Run directories written by `privfl run` (e.g. a private run and its "
             "non-private baseline).", show_default=False)],
    every: Annotated[int, typer.Option(
        help="Compare every EVERY-th common round (the first and last always).")] = 5,
    out: Annotated[Path | None, typer.Option(
        help="Also write the Markdown table to this file.")] = None,
    plot: Annotated[Path | None, typer.Option(
        help="Also write a PNG of every run's accuracy per round.")] = None,
    html: Annotated[Path | None, typer.Option(
        "--html", help="Also write a self-contained report.html: headlines, interactive "
        "accuracy, epsilon and accuracy-vs-epsilon plots, the table.")] = None,
    json_output: JsonOpt = False,
) -> None:
    """Compare run directories (any algorithms) at the same rounds: each run's headline
    accuracies and, for private ones, the tightest epsilon bound (with its accountant and unit)
    and any Gaussian-DP mu estimate. A run whose files disagree with a fresh computation from
    its config.yaml (`privfl check-privacy`) is named in a warning."""
    from privfl.runs.compare import (
        common_rounds,
        comparison_markdown,
        comparison_notes,
        comparison_rows,
        disagreement_notes,
        distinct_labels,
        load_run,
        plot_comparison,
    )

    loaded = distinct_labels([load_run(path) for path in runs])  # same names: by directory
    notes = comparison_notes(loaded) + disagreement_notes(loaded)
    for note in notes:
        typer.echo(f"privfl: warning: {note}", err=True)
    rows = comparison_rows(loaded, common_rounds(loaded, every))
    text = comparison_markdown(loaded, rows)
    if out is not None:
        out.write_text(text)
    if plot is not None:
        plot_comparison(loaded, plot)
    if html is not None:
        from privfl.runs.html import write_page
        from privfl.runs.html_compare import comparison_html

        write_page(html, comparison_html(loaded, rows))
    if json_output:
        from privfl.cli.output import print_json

        print_json({"command": "compare", "runs": [
            {"name": r.name, "path": str(r.path), "algorithm": r.algorithm, "dataset": r.dataset,
             "private": r.private, "delta": r.delta, "unit": r.unit, "sampling": r.sampling,
             "metrics": dict(r.metric_labels), "headline": r.final}
            for r in loaded], "rows": rows, "warnings": notes})
    else:
        typer.echo(text, nl=False)
