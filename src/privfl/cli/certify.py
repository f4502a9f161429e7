"""``privfl certify ...``: certified robustness against poisoning (Xie et al. 2023).

``privfl certify radius`` evaluates the certified number of adversaries K of Eq. 6 for given
top-class and runner-up probabilities (:mod:`privfl.robustness.certify`).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from privfl.cli.common import JsonOpt, user_errors

__all__ = ["certify_app", "radius_command"]

certify_app = typer.Typer(
    help="Certified robustness against poisoning from differential privacy (Xie et al. 2023)."
)


class UnitChoice(str, Enum):
    user = "user"
    instance = "instance"


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
    as_json: JsonOpt = False,
) -> None:
    from privfl.robustness.certify import certify_prediction

    result = certify_prediction(top, runner_up, epsilon, delta, unit=unit.value)
    if as_json:
        from privfl.cli.output import print_json

        print_json({
            "command": "certify radius",
            "certified_k": result.certified_k,
            "k_max": result.k_max,
            "max_attackers": result.max_attackers,
            "theorem2_holds": result.theorem2_holds,
            "theorem": result.theorem,
            "kind": result.kind,
            "note": result.note,
            "inputs": {"top": top, "runner_up": runner_up, "epsilon": epsilon, "delta": delta,
                       "unit": unit.value},
        })
        return
    who = "adversarial users" if unit is UnitChoice.user else "poisoned records"
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
    typer.echo(f"  largest integer k certified = {attackers}")
    typer.echo(f"  K_max = {result.k_max:.6g} (the most any prediction can get at this "
               "epsilon, delta)")
    typer.echo(f"  Theorem 2 (one adversary): {'holds' if result.theorem2_holds else 'fails'}")
    typer.echo(f"  kind: {result.kind}; {result.note}")
