"""``privfl certify ...``: certified robustness against poisoning (Xie et al. 2023).

``privfl certify radius`` evaluates the certified number of adversaries K of Eq. 6 for given
top-class and runner-up probabilities (:mod:`privfl.robustness.certify`).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from typer.core import TyperGroup

from privfl.cli.backend_options import AddressOpt, BackendOpt, WorkersOpt, select_backend
from privfl.cli.common import JsonOpt, user_errors

__all__ = ["certify_app", "certify_recompute_command", "certify_run_command", "radius_command"]

class _ConfigOrCommand(TyperGroup):
    """``privfl certify CONFIG ...`` runs the hidden ``run`` command; ``privfl certify radius``
    (or any other subcommand name) runs that command."""

    def resolve_command(self, ctx, args):
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().resolve_command(ctx, args)


certify_app = typer.Typer(
    cls=_ConfigOrCommand,
    help="Certified robustness against poisoning from differential privacy (Xie et al. 2023): "
    "privfl certify CONFIG --models M [--attack KIND --attackers K] (short for privfl certify "
    "run CONFIG ...; its options: privfl certify run --help) trains M DP models and "
    "certifies them; privfl certify radius evaluates Eq. 6 for given probabilities.",
)


class UnitChoice(str, Enum):
    user = "user"
    instance = "instance"


class NeighbouringChoice(str, Enum):
    add_remove = "add-remove"
    replace_one = "replace-one"


class AdversaryChoice(str, Enum):
    replace = "replace"
    add_remove = "add-remove"


RADIUS_HELP = (
    "Certified number of adversaries K (Xie et al. 2023, Eq. 6): the prediction A is unchanged "
    "for every k < K adversarial users (or poisoned records) if the whole training is "
    "(epsilon, delta)-DP at that unit. K = ln[(F_A (e^eps - 1) + delta) / (F_B (e^eps - 1) + "
    "delta)] / (2 eps). A rigorous certificate needs F_A to be the expected top-class "
    "probability or a lower bound of it and F_B the runner-up's or an upper bound (Monte Carlo "
    "means must be calibrated first)."
)


@certify_app.command("radius", help=RADIUS_HELP)
@user_errors
def radius_command(
    top: Annotated[float, typer.Option(
        "--top", help="F_A: expected probability of the top class, in [0, 1].")],
    runner_up: Annotated[float, typer.Option(
        "--runner-up", help="F_B: expected probability of the runner-up class, in [0, F_A].")],
    epsilon: Annotated[float, typer.Option(
        help="Epsilon of one model's whole training, > 0.")],
    delta: Annotated[float, typer.Option(
        help="Delta of one model's whole training, in [0, 1) (0: pure DP).")],
    unit: Annotated[UnitChoice, typer.Option(
        help="What the (epsilon, delta) protects and k counts: 'user' (user-level DP, "
        "adversarial clients) or 'instance' (instance-level DP, poisoned records).")
    ] = UnitChoice.user,
    adversary: Annotated[AdversaryChoice, typer.Option(
        help="What one adversary does: 'add-remove' (adds or removes one unit; Xie et al. "
        "2023's reading) or 'replace' (replaces one unit's data: 2 add/remove steps or 1 "
        "replace-one step).")] = AdversaryChoice.add_remove,
    neighbouring: Annotated[NeighbouringChoice, typer.Option(
        help="Neighbouring relation of the (epsilon, delta).")
    ] = NeighbouringChoice.add_remove,
    as_json: JsonOpt = False,
) -> None:
    from privfl.robustness.certify import certify_prediction

    result = certify_prediction(top, runner_up, epsilon, delta, unit=unit.value,
                                adversary=adversary.value, neighbouring=neighbouring.value)
    if as_json:
        from privfl.cli.output import print_json

        print_json({
            "command": "certify radius",
            "certified_k": result.certified_k,
            "k_max": result.k_max,
            "max_attackers": result.max_attackers,
            "theorem2_holds": result.theorem2_holds,
            "theorem": result.theorem,
            "adversary": result.adversary,
            "neighbouring": result.neighbouring,
            "steps_per_adversary": result.steps_per_adversary,
            "adversary_note": result.adversary_note,
            "kind": result.kind,
            "note": result.note,
            "inputs": {"top": top, "runner_up": runner_up, "epsilon": epsilon, "delta": delta,
                       "unit": unit.value},
        })
        return
    who = ("adversarial users" if unit is UnitChoice.user else "poisoned records") + (
        f" ({adversary.value})")
    attackers = (
        "none (K <= 0: not even the unpoisoned prediction)"
        if result.max_attackers is None and result.certified_k <= 0
        else "any number" if result.max_attackers is None
        else str(result.max_attackers)
    )
    typer.echo(f"privfl certify radius: {result.theorem}")
    typer.echo(f"  top F_A = {top:g}, runner-up F_B = {runner_up:g}, "
               f"epsilon = {epsilon:g}, delta = {delta:g}")
    typer.echo(f"  certified K = {result.certified_k:.6g}: the prediction holds for every "
               f"k < K {who}")
    typer.echo(f"  {result.adversary_note}")
    typer.echo(f"  largest integer k certified = {attackers}")
    typer.echo(f"  K_max = {result.k_max:.6g} (the most any prediction can get at this "
               "epsilon, delta)")
    typer.echo(f"  Theorem 2 (one adversary): {'holds' if result.theorem2_holds else 'fails'}")
    typer.echo(f"  kind: {result.kind}; {result.note}")


class AttackChoice(str, Enum):
    backdoor = "backdoor"
    label_flip = "label-flip"
    dba = "dba"
    scaling = "scaling"


class MethodChoice(str, Enum):
    hoeffding = "hoeffding"
    clopper_pearson = "clopper-pearson"
    estimate = "estimate"


ADVERSARY_HELP = (
    "What k counts: 'replace' (each attacker replaces one client's or record's data, as "
    "privfl's attacks do; the tighter of 2k add/remove steps and k replace-one steps) or "
    "'add-remove' (Xie et al. 2023's reading: each adversary adds or removes one; does not "
    "certify privfl's replacing attacks).")
AdversaryOpt = Annotated[AdversaryChoice, typer.Option(help=ADVERSARY_HELP)]
CE_HELP = ("C_bar of the cross-entropy cost of Theorem 6 (Xie et al. 2023's cost): each attack "
           "test sample's target-label cross-entropy is clipped to [0, C_bar] so that the cost "
           "is bounded for every model, > 0.")


@certify_app.command("run")
@user_errors
def certify_run_command(
    config: Annotated[Path, typer.Argument(help="YAML configuration of dp-fedavg, insdp-fedavg "
                                           "or insdp-fedsgd (its attack: section sets the "
                                           "attack's target and trigger).", show_default=False)],
    models: Annotated[int, typer.Option(help="M: DP models trained (independent noise).")] = 100,
    attack: Annotated[AttackChoice | None, typer.Option(
        help="Also train M models per k = 1..K attackers with this attack.")] = None,
    attackers: Annotated[int, typer.Option(help="K: the most attackers tried.")] = 0,
    method: Annotated[MethodChoice, typer.Option(
        help="Calibration of the Monte Carlo estimates: hoeffding (any scores), clopper-pearson "
        "(hard votes), estimate (uncalibrated, not a guarantee).")] = MethodChoice.hoeffding,
    confidence: Annotated[float, typer.Option(help="Confidence of every certificate.")] = 0.99,
    adversary: AdversaryOpt = AdversaryChoice.replace,
    cross_entropy_bound: Annotated[float, typer.Option(help=CE_HELP)] = 5.0,
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="Override a key of CONFIG (as privfl run).", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        help="Directory for certify.json, the plots and report.md (default runs/certify-NAME-"
        "TIME).", show_default=False)] = None,
    backend: BackendOpt = "local",
    address: AddressOpt = None,
    workers: WorkersOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Train M DP models of CONFIG together and certify them (Xie et al. 2023): certified
    accuracy vs k, and the attack-inefficacy bounds vs the measured attack success."""
    import contextlib

    from rich.console import Console

    from privfl.config import load_config

    console = Console(stderr=True)
    resolved = load_config(config, list(set_ or []))  # a typo is answered before torch loads
    from privfl.backends import check_options
    from privfl.robustness.pipeline import run_certification
    from privfl.runs.certify import write_certification

    check_options(backend, address, workers)
    directory = _new_directory(out, resolved.name)

    def progress(stage: str, done: int, total: int) -> None:
        if done == total or done % max(1, total // 4) == 0:
            console.print(f"  {stage}: {done}/{total} models", highlight=False)

    with contextlib.ExitStack() as stack:  # a local Ray instance stops when it closes
        select_backend(stack, backend, address, workers, console)
        result = run_certification(
            resolved, models, attack=None if attack is None else attack.value,
            attackers=attackers, method=method.value, confidence=confidence, progress=progress,
            replicas=directory / "replicas", adversary=adversary.value,
            cross_entropy_bound=cross_entropy_bound)
    write_certification(result, directory)
    _show(result, directory, as_json, extra=", replicas/")


@certify_app.command("recompute")
@user_errors
def certify_recompute_command(
    directory: Annotated[Path, typer.Argument(
        help="Directory of a privfl certify run (its certify.json and replicas/).",
        show_default=False)],
    method: Annotated[MethodChoice, typer.Option(
        help="Calibration: hoeffding, clopper-pearson (hard votes, binary tasks) or estimate "
        "(uncalibrated, not a guarantee).")] = MethodChoice.hoeffding,
    confidence: Annotated[float, typer.Option(help="Confidence of every certificate.")] = 0.99,
    adversary: AdversaryOpt = AdversaryChoice.replace,
    cross_entropy_bound: Annotated[float | None, typer.Option(
        help=CE_HELP + " Default: the run's own.", show_default=False)] = None,
    out: Annotated[Path | None, typer.Option(
        help="Directory for the new certify.json, plots and report.md (default "
        "runs/certify-NAME-TIME).", show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Certify the saved models of a privfl certify run again, with another calibration,
    confidence or adversary, without training. The per-model epsilon, delta, unit and
    neighbouring relation are re-derived from the stored configuration through the accountant,
    and any difference from the stored ones is refused; every array and the metadata are
    checked against their SHA-256 digests. The digests have no secret key: they detect
    accidental damage, not forgery (whoever can rewrite the files can rewrite the digests)."""
    import json

    from privfl.robustness.recompute import check_about, recompute_certification
    from privfl.runs.certify import write_certification

    source = directory / "certify.json"
    try:
        about = json.loads(source.read_text())
    except FileNotFoundError:
        raise ValueError(f"directory = {str(directory)!r} holds no certify.json: give the "
                         "--out directory of a privfl certify run") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{source} is not valid JSON: {error}") from None
    about = check_about(about, str(source))
    target = _new_directory(out, str(about["name"]))
    if cross_entropy_bound is None:
        stored = about.get("inefficacy_cross_entropy")
        cross_entropy_bound = (stored.get("cost_bound", 5.0) if isinstance(stored, dict)
                               else 5.0)
    result = recompute_certification(directory / "replicas", about, method=method.value,
                                     confidence=confidence, adversary=adversary.value,
                                     cross_entropy_bound=cross_entropy_bound)
    write_certification(result, target)
    _show(result, target, as_json)


def _new_directory(out: Path | None, name: str) -> Path:
    from privfl.cli.run import default_out  # runs/NAME-TIME, as privfl run

    directory = out or default_out(f"certify-{name}")
    if directory.exists() and any(directory.iterdir()):
        raise ValueError(f"out = {str(directory)!r} is not empty: choose another --out")
    return directory


def _show(result, directory: Path, as_json: bool, extra: str = "") -> None:
    """Print a certification (one JSON object with --json); ``extra``: more files written."""
    from privfl.runs.certify import certification_lines

    if as_json:
        from privfl.cli.output import print_json

        print_json({**result.to_dict(), "out": str(directory)})
        return
    typer.echo(f"privfl certify {result.name}: M = {result.models} {result.algorithm} models, "
               f"unit {result.unit}, {result.method} at confidence {result.confidence:g}")
    for line in result.privacy_lines:
        typer.echo(f"  {line}")
    for line in certification_lines(result.to_dict()):
        typer.echo(f"  {line}")
    typer.echo(f"  written: {directory} (certify.json, certified_accuracy.png, "
               f"attack_inefficacy.png, report.md{extra})")
