"""``privfl flower new CONFIG --out DIR``: write a Flower app project that runs a privfl
configuration with ``flwr run DIR`` (privfl.flower.project; docs/flower.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privfl.cli.common import user_errors

__all__ = ["flower_app"]

flower_app = typer.Typer(
    help="privfl inside Flower: write a Flower app project of a configuration (run it with "
    "flwr run DIR; needs pip install 'privfl\\[flower]'; docs/flower.md).")


@flower_app.command("new")
@user_errors
def new_command(
    config: Annotated[Path, typer.Argument(help="YAML configuration (dp-fedavg, insdp-fedavg, "
                                           "insdp-fedsgd or prifedsync).", show_default=False)],
    out: Annotated[Path, typer.Option("--out", help="Project directory to create (must not "
                                      "exist or be empty).", show_default=False)],
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override one key, e.g. --set federated.rounds=10 (repeatable).",
        show_default=False)] = None,
    run_dir: Annotated[Path | None, typer.Option(
        "--run-dir", help="The privfl run directory the ServerApp writes (default "
        "OUT/runs/NAME).", show_default=False)] = None,
) -> None:
    """Write a Flower app project (pyproject with [tool.flwr.app], privfl's ServerApp and
    ClientApp) of CONFIG into OUT; run it with: flwr run OUT."""
    from privfl.config import load_config
    from privfl.flower.project import write_project

    resolved = load_config(config, list(set_ or []))
    where = write_project(resolved, out, run_dir)
    typer.echo(f"wrote the Flower app {where} ({resolved.data.clients} SuperNodes, one per "
               f"client); run it with: flwr run {where}")
