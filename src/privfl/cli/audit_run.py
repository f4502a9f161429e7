"""`privfl audit run CONFIG`: train once with canaries, compare an empirical lower bound on
epsilon with the run's proven bound (:mod:`privfl.runs.canary_audit`; issue 47).

The canaries follow the guarantee's unit (:func:`sources`: client-level algorithms get canary
clients, :class:`~privfl.runs.canary_clients.ClientCanaries`; a record-level source plugs in by
one more entry). Writes ``audit.json`` and ``report.html`` (the audit section: score histogram,
ROC) in ``--out`` (created if missing; a directory already holding either is refused) and
prints the numbers. Exit status: 0 ``consistent``, 1 ``VIOLATED`` (the lower bound exceeds the
proven bound: the code is not as private as the proof says), 2 an input error (a device this
machine does not have included).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from privfl.cli.common import JsonOpt

AUDIT_FILE = "audit.json"


def sources(config: Any = None, design: str = "auto") -> dict[str, Callable[[], Any]]:
    """A guarantee's unit (the first word of ``plan.unit``) -> the canary source that audits
    it (:class:`~privfl.runs.canary_source.CanarySource`): canary clients, or, for the
    record-level algorithms of ``config`` (:data:`~privfl.runs.record_canaries.RECORD_LEVEL`),
    canary records of ``design`` (:class:`~privfl.runs.record_canaries.RecordCanaries`, under
    the plan's unit: projected SGD's users hold one record each). Client canaries have one
    design: any ``design`` but "auto" is refused for them."""
    from privfl.runs.canary_clients import ClientCanaries
    from privfl.runs.record_canaries import RECORD_LEVEL, RecordCanaries

    if config is not None and config.federated.algorithm in RECORD_LEVEL:
        source = RecordCanaries(config, design)
        return {source.unit: lambda: source}
    if design != "auto":
        raise ValueError(f"canary_design = {design!r} is not allowed for client canaries: "
                         "record designs apply to record-level algorithms only (use 'auto')")
    return {"client": ClientCanaries}


def _number(value: Any) -> Any:
    """JSON has no infinity: an infinite value is written as the string "inf"."""
    return "inf" if isinstance(value, float) and math.isinf(value) else value


def _text(result: dict[str, Any]) -> str:
    estimate = result["epsilon_estimate"]
    return "\n".join([
        f"audit of {result['algorithm']} ({result['rounds']} rounds, device "
        f"{result['device']}, {result['canaries']} {result['unit']} canaries, "
        f"{result['canaries_inserted']} inserted), delta = {result['delta']:g}, "
        f"{result['unit']}-level, {result['neighbouring']}; {result['sampling']}",
        f"  epsilon_lower    = {result['epsilon_lower']:.4g}  ({result['epsilon_lower_method']};"
        f" at most {result['epsilon_lower_max']:.4g} with {result['canaries']} canaries)",
        f"  epsilon_lower_cp = {result['epsilon_lower_clopper_pearson']:.4g}  (Clopper-Pearson, "
        "threshold on a held-out half)",
        "  epsilon_estimate = "
        + ("n/a" if estimate is None else f"{estimate:.4g}")
        + f"  ({result['epsilon_estimate_method']})",
        f"  epsilon_bound    = {result['epsilon_bound']:.4g}  (proven upper bound: "
        f"{result['epsilon_bound_method']})",
        f"verdict: {result['verdict']}",
    ])


def audit_run_command(
    config: Annotated[Path, typer.Argument(help="YAML configuration of the run to audit.")],
    canaries: Annotated[int, typer.Option(help="Number of canaries (each inserted with "
                                          "probability 1/2).")] = 1000,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one key, e.g. --set federated.rounds=10 "
                     "(dotted keys, YAML values; repeatable).", show_default=False),
    ] = None,
    out: Annotated[Path, typer.Option("--out", help="Directory for audit.json and "
                                      "report.html.")] = Path("."),
    seed: Annotated[int, typer.Option(help="Seed of the canaries and their bits.")] = 0,
    canary_design: Annotated[str, typer.Option(
        help="Record canaries (record-level algorithms): auto, mislabelled, ood, random, "
        "ood-pair or random-pair (docs/audit.md; the pairs are the strongest).")] = "auto",
    device: Annotated[str | None, typer.Option(
        help="Train on this device (sets run.device: cpu, cuda, cuda:N, mps); refused where "
        "this machine has none.", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Train once with canaries and check the proven bound from the outside."""
    from privfl.config import load_config
    from privfl.runs.canary_audit import AUDIT_FILES, VIOLATED, audit_config, audit_outputs
    from privfl.runs.html import write_page
    from privfl.runs.html_audit import audit_html

    present = [name for name in AUDIT_FILES if (Path(out) / name).exists()]
    if present:
        raise ValueError(f"--out = {str(out)!r} already holds {', '.join(present)}: choose "
                         "another directory (an audit never overwrites one)")
    overrides = list(set_ or []) + ([f"run.device={device}"] if device is not None else [])
    loaded = load_config(config, overrides)
    result = audit_config(loaded, sources(loaded, canary_design), canaries=canaries,
                          seed=seed)
    written = {key: _number(value) for key, value in result.items()}
    Path(out).mkdir(parents=True, exist_ok=True)
    path = Path(out) / AUDIT_FILE
    path.write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    write_page(Path(out) / "report.html",
               audit_html(result, audit_outputs(bool(loaded.privacy.secure))))
    if as_json:
        typer.echo(json.dumps(written))
    else:
        typer.echo(_text(result))
        typer.echo(f"wrote {path} and {Path(out) / 'report.html'}")
    if result["verdict"] == VIOLATED:
        raise typer.Exit(1)
