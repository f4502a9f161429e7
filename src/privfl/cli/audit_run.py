"""`privfl audit run CONFIG`: train once with canaries, compare an empirical lower bound on
epsilon with the run's proven bound (:mod:`privfl.runs.canary_audit`; issue 47, dp-fedavg so far).

Writes ``audit.json`` in ``--out`` (created if missing; an existing audit.json is refused) and
prints the numbers. Exit status: 0 ``consistent``, 1 ``VIOLATED`` (the lower bound exceeds the
proven bound: the code is not as private as the proof says), 2 an input error.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer

from privfl.cli.common import JsonOpt

AUDIT_FILE = "audit.json"


def _number(value: Any) -> Any:
    """JSON has no infinity: an infinite bound is written as the string "inf"."""
    return "inf" if isinstance(value, float) and math.isinf(value) else value


def _text(result: dict[str, Any]) -> str:
    estimate = result["epsilon_estimate"]
    return "\n".join([
        f"audit of {result['algorithm']} ({result['rounds']} rounds, "
        f"{result['canaries']} canaries, {result['canaries_inserted']} inserted), "
        f"delta = {result['delta']:g}, "
        f"{result['unit']}-level, {result['neighbouring']}, {result['sampling']}",
        f"  epsilon_lower    = {result['epsilon_lower']:.4g}  (BOUND from below: "
        f"{result['epsilon_lower_method']})",
        f"  epsilon_lower_cp = {result['epsilon_lower_clopper_pearson']:.4g}  (Clopper-Pearson, "
        "threshold on a held-out half)",
        "  epsilon_estimate = "
        + ("n/a" if estimate is None else f"{estimate:.4g}")
        + f"  ({result['epsilon_estimate_method']})",
        f"  epsilon_bound    = {result['epsilon_bound']:.4g}  (proven upper bound, "
        f"{result['epsilon_bound_method']})",
        f"verdict: {result['verdict']}",
    ])


def audit_run_command(
    config: Annotated[Path, typer.Argument(help="YAML configuration of the run to audit.")],
    canaries: Annotated[int, typer.Option(help="Number of canary clients (each present with "
                                          "probability 1/2).")] = 1000,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one key, e.g. --set federated.rounds=10 "
                     "(dotted keys, YAML values; repeatable).", show_default=False),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Directory for audit.json.")] = Path("."),
    seed: Annotated[int, typer.Option(help="Seed of the canary directions and bits.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Train once with canary clients and check the proven bound from the outside."""
    from privfl.config import load_config
    from privfl.runs.canary_audit import VIOLATED, audit_config

    path = Path(out) / AUDIT_FILE
    if path.exists():
        raise ValueError(f"--out = {str(out)!r} already holds {AUDIT_FILE}: choose another "
                         "directory (an audit never overwrites one)")
    result = audit_config(load_config(config, list(set_ or [])), canaries=canaries, seed=seed)
    written = {key: _number(value) for key, value in result.items()}
    Path(out).mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(written))
    else:
        typer.echo(_text(result))
        typer.echo(f"wrote {path}")
    if result["verdict"] == VIOLATED:
        raise typer.Exit(1)
