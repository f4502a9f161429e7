"""``privfl check-privacy RUN_DIR``: a run's logged privacy against its saved configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privfl.cli.common import JsonOpt, user_errors

__all__ = ["check_privacy_command"]


@user_errors
def check_privacy_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `privfl run`.",
                                            show_default=False)],
    every: Annotated[int, typer.Option(
        help="Check every EVERY-th round (the first and the last always).")] = 1,
    rtol: Annotated[float, typer.Option(help="Relative tolerance per number.")] = 1e-9,
    json_output: JsonOpt = False,
) -> None:
    """Recompute every round's privacy from the run's config.yaml (the algorithm's privacy plan:
    the settings the training derived its noise, clipping, sampling and steps from) and compare
    it with metrics.jsonl and privacy.json; recompute the headline, results, card, outputs table
    and config digest of summary.json, report.md and report.html and compare them too. Exit
    status 0 when everything agrees, 1 otherwise, 2 for an unreadable run directory."""
    from privfl.runs.check import check_run_privacy

    report = check_run_privacy(run_dir, every=every, rtol=rtol)
    if json_output:
        from privfl.cli.output import print_json

        print_json(report.to_dict())
    else:
        typer.echo(f"privfl check-privacy {run_dir} ({report.algorithm}): "
                   f"{len(report.rows)} rounds checked, rtol {rtol:g}")
        agree = [row for row in report.rows if row["ok"]]
        if agree:  # one line for the rounds that agree; each mismatch on its own lines
            worst = max(row["max_rel_diff"] for row in agree)
            typer.echo(f"  {len(agree)} of {len(report.rows)} rounds ok "
                       f"({_round_ranges([row['round'] for row in agree])}; max relative "
                       f"difference {worst:.3g})")
        for row in report.rows:
            if row["ok"]:
                continue
            typer.echo(f"  round {row['round']}: MISMATCH (max relative difference "
                       f"{row['max_rel_diff']:.3g})")
            for problem in row["problems"]:
                typer.echo(f"    {problem}")
        released = report.released
        if not released["ok"]:
            typer.echo("  privacy.json (every released round): MISMATCH")
            for problem in released["problems"]:
                typer.echo(f"    {problem}")
        if not report.pinned["ok"]:
            typer.echo("  run.json (settings pinned at round 1): MISMATCH")
            for problem in report.pinned["problems"]:
                typer.echo(f"    {problem}")
        files = report.files
        if not files["ok"]:
            typer.echo("  the files written at the stop (summary.json, privacy.json, report.md, "
                       "report.html): MISMATCH")
            for problem in files["problems"]:
                typer.echo(f"    {problem}")
        if not report.ledger["ok"]:
            typer.echo("  the run's files against its release ledger (ledger.jsonl): MISMATCH")
            for problem in report.ledger["problems"]:
                typer.echo(f"    {problem}")
        typer.echo("all rounds agree" if report.ok else "logged privacy DIFFERS from the "
                   "configuration")
    if not report.ok:
        raise typer.Exit(code=1)


def _round_ranges(rounds: list[int]) -> str:
    """``rounds 1-4, 7, 9-10``: consecutive rounds as ranges."""
    spans: list[list[int]] = []
    for r in sorted(rounds):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    text = ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)
    return ("rounds " if len(rounds) > 1 else "round ") + text
