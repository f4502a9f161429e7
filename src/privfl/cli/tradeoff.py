"""``privfl tradeoff``: the empirical utility-privacy trade-off of Zhang, Chen and Yang 2022 on a
federated model trained here (:mod:`privfl.runs.tradeoff_run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privfl.cli.common import JsonOpt, user_errors

__all__ = ["tradeoff_command"]

TRADEOFF_HELP = (
    "Measure the utility-privacy trade-off of protection mechanisms (Zhang, Chen and Yang "
    "2022) on a real federated model.\n\n"
    "Trains the base model with FedAvg (CONFIG: a privfl run configuration with a 'tradeoff' "
    "section; omit it for the built-in default, configs/tradeoff-default.yaml: logistic "
    "regression on the MNIST 5k subset, 10 clients, well under a minute on 2 cores), applies "
    "Gaussian distortion, the paper's and the exact noise calibration, a random mask and record "
    "sampling over their grids, measures leakage (a Bayesian attacker, Monte Carlo), TV and "
    "utility loss, and reports which of the paper's bounds held.\n\n"
    "Writes tradeoff.json (every point), frontier.png and report.md into --out. The numbers are "
    "estimates for one finite attacker, not privacy guarantees."
)


@user_errors
def tradeoff_command(
    config: Annotated[Path | None, typer.Argument(
        help="YAML configuration (a privfl run config plus a 'tradeoff' section); omit it for "
             "the built-in default.", show_default=False)] = None,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override one key, e.g. --set tradeoff.replicas=96 (repeatable).",
        show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Folder for tradeoff.json, frontier.png, report.md (default "
        "runs/NAME-TIME).", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    from privfl.cli.run import default_out  # runs/NAME-TIME, as privfl run
    from privfl.data.errors import DatasetNotFoundError
    from privfl.runs.tradeoff_config import load_tradeoff
    from privfl.runs.tradeoff_report import write_outputs
    from privfl.runs.tradeoff_run import run_tradeoff

    experiment, settings = load_tradeoff(config, tuple(set_ or ()))
    folder = out or default_out(experiment.name)
    try:
        result = run_tradeoff(experiment, settings,
                              progress=lambda message: typer.echo(message, err=True))
    except DatasetNotFoundError as error:
        raise ValueError(" ".join(str(error).split())) from None
    files = write_outputs(result, folder)
    if as_json:
        from privfl.cli.output import print_json

        print_json({"command": "tradeoff", **result, "files": files})
        return
    typer.echo(f"\nwhich bounds held ({settings.replicas} draws per client and point; "
               "cases = points x clients):")
    for row in result["bounds"]:
        kind = row.get("kind", "test").split(":")[0]
        typer.echo(f"  {row['name']:<36} held {row['held']:>4}/{row['cases']:<4} clear "
                   f"violations {row['clear_violations']:>4}  hypothesis held "
                   f"{row['hypothesis']:>4}  ({kind})")
    from privfl.distortion.orderings import largest_unresolved

    unresolved = [row for row in result["leakage_orderings"] if row["within_one_se"]]
    typer.echo(f"\nleakage orderings within one standard error of their difference (paired "
               f"draws; not resolved by {settings.replicas} draws; set tradeoff.replicas): "
               f"{len(unresolved)} of {len(result['leakage_orderings'])}"
               + (f"; each differs by less than {largest_unresolved(unresolved):.2g} "
                  "(|difference| + one s.e.)" if unresolved else ""))
    for row in unresolved:
        typer.echo(f"  {row['first']} vs {row['second']}: difference {row['difference']:+.2g}"
                   f", s.e. {row['se']:.2g} (about {row['draws_to_resolve']:.2g} draws to "
                   "resolve)")
    typer.echo(f"\nwrote {files['json']}, {files['plot']}, {files['report']} "
               f"({result['seconds']['total']:.1f} s)")


tradeoff_command.__doc__ = TRADEOFF_HELP
