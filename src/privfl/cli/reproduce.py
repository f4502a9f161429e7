"""``privfl reproduce PAPER``: regenerate a paper's computable numbers and compare them with the
paper's (:mod:`privfl.reproduce`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privfl.cli.common import JsonOpt, user_errors

__all__ = ["REPRODUCE_HELP", "reproduce_command"]

REPRODUCE_HELP = (
    "Reproduce a paper's numbers: its privacy tables and figures in full, its training at a "
    "scale this machine allows.\n\n"
    "PAPER is one of zheng2021, zhang2022, xie2023, hasircioglu2022, asoodeh2021 (--list says "
    "what each covers). Prints a table: each quantity, the paper's value (with its table or "
    "figure), privfl's, their relative difference, a tolerance and a verdict: match, or differs "
    "with the reason (the paper's error, another dataset or scale, a bound privfl proves "
    "tighter, an estimate the paper presents as a bound). Each row has a basis: printed (the "
    "paper prints it), derived (privfl's conversion of a printed number), check (a formula "
    "evaluated twice) or extension (privfl's own); only printed rows that match count as "
    "reproduced, and the summary counts by basis.\n\n"
    "--scale quick (default): the accounting in full, training reduced, on built-in or Debian "
    "data, at --seeds seeds (default 3); at most a few minutes on 2 cores. A training row "
    "gives the seeds' mean, spread and 95 % prediction interval, and matches only when the "
    "paper's number lies in that interval at the paper's scale, or when the paper's ordering "
    "holds in every seed at the paper's settings. --scale paper: the paper's clients, rounds "
    "and models from configs/ (hours; a GPU is advised where the paper used one); --dry-run "
    "prints what would run and how long, and which data are missing. --out DIR writes "
    "table.md, rows.json and report.html (the table and the regenerated figures)."
)


def _list(as_json: bool) -> None:
    from privfl.reproduce.papers import PAPERS

    if as_json:  # plain json: --list stays free of torch (privfl.cli.output imports it)
        import json

        typer.echo(json.dumps({"command": "reproduce", "papers": [
            {"name": e.name, "title": e.title, "covers": e.covers} for e in PAPERS.values()]},
            indent=1))
        return
    for entry in PAPERS.values():
        typer.echo(f"{entry.name:<16} {entry.title}")
        typer.echo(f"{'':<16} covers: {entry.covers}")


def _print(rep) -> None:  # noqa: ANN001 - a Reproduction
    from privfl.reproduce.rows import basis_summary, cells

    typer.echo(f"privfl reproduce {rep.paper} --scale {rep.scale}: {rep.title}")
    for row in rep.rows:
        quantity, source, basis, paper, privfl, diff, tolerance, verdict, reason = cells(row)
        typer.echo(f"{verdict:<7} {quantity}")
        typer.echo(f"        paper {paper} ({source}; basis {basis}); privfl {privfl}; "
                   f"rel. diff {diff}, tolerance {tolerance}")
        if reason:
            typer.echo(f"        {'why' if verdict == 'differs' else 'note'}: {reason}")
    for note in rep.notes:
        typer.echo(f"note: {note}")
    if rep.plan:
        typer.echo("paper-scale runs:")
        for line in rep.plan:
            typer.echo(f"  {line}")
    counts = rep.counts()
    typer.echo(f"{len(rep.rows)} rows: {counts['match']} match, {counts['differs']} differ; "
               f"{rep.wall_seconds:.0f} s")
    typer.echo(f"by basis: {basis_summary(rep.counts_by_basis())}")


@user_errors
def reproduce_command(
    paper: Annotated[str | None, typer.Argument(
        help="zheng2021, zhang2022, xie2023, hasircioglu2022 or asoodeh2021.",
        show_default=False)] = None,
    scale: Annotated[str, typer.Option(
        help="quick (reduced training, minutes) or paper (the paper's runs, hours).")] = "quick",
    out: Annotated[Path | None, typer.Option(
        "--out", help="Write table.md, rows.json and report.html (and the training runs, "
        "under runs/) into this folder.", show_default=False)] = None,
    markdown: Annotated[Path | None, typer.Option(
        "--markdown", help="Also write the table as a Markdown section to this file.",
        show_default=False)] = None,
    no_training: Annotated[bool, typer.Option(
        "--no-training", help="The accounting rows only (seconds).")] = False,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="With --scale paper: plan the training runs, do not train.")] = False,
    seeds: Annotated[int, typer.Option(
        "--seeds", help="Training seeds of the quick scale (at least 2): each training row "
        "gives their mean, spread and 95 % prediction interval.")] = 3,
    list_papers: Annotated[bool, typer.Option(
        "--list", help="Name the papers and what each reproduction covers (with --json: as "
        "JSON), and exit.")] = False,
    as_json: JsonOpt = False,
) -> None:
    if list_papers:
        _list(as_json)
        return
    if paper is None:
        raise ValueError("PAPER is missing: give one of zheng2021, zhang2022, xie2023, "
                         "hasircioglu2022, asoodeh2021 (privfl reproduce --list)")
    from privfl.reproduce.papers import SCALES
    from privfl.reproduce.papers import paper as known

    known(paper)  # an unknown name fails before anything heavy is imported
    if scale not in SCALES:
        raise ValueError(f"scale = {scale!r} is not allowed: must be one of {', '.join(SCALES)}")
    if dry_run and scale != "paper":
        raise ValueError("--dry-run plans the paper-scale runs: use it with --scale paper")
    from privfl.reproduce.report import markdown as to_markdown
    from privfl.reproduce.report import reproduce

    rep = reproduce(paper, scale, out, training=not no_training, dry_run=dry_run,
                    progress=lambda line: typer.echo(line, err=True), seeds=seeds)
    if markdown is not None:
        markdown.write_text(to_markdown(rep, command=f"privfl reproduce {paper} --scale {scale}"),
                            encoding="utf-8")
    if as_json:
        from privfl.cli.output import print_json

        print_json({"command": "reproduce", **rep.to_dict(),
                    **({"out": str(out)} if out is not None else {})})
        return
    _print(rep)
    if out is not None:
        typer.echo(f"wrote {out / 'table.md'}, {out / 'rows.json'}, {out / 'report.html'}")
