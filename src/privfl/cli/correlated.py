"""`privfl account dp-ftrl | bandmf` and `privfl calibrate dp-ftrl | bandmf`.

Correlated-noise mechanisms without sampling (:mod:`privfl.accounting.correlated.accountant`,
:mod:`privfl.mechanisms`): the whole release is one Gaussian mechanism on the sensitivity of
the encoder C under a participation bound, for the replace-with-zero relation; BandMF with
``--sampling-rate`` uses its amplification (cyclic Poisson sampling in ``band`` groups).
:func:`register` adds the commands to the ``account`` and ``calibrate`` groups.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer

from privfl.cli.common import JsonOpt, TargetDeltaOpt, TargetEpsilonOpt, user_errors

Z_HELP = "z: noise std on each coordinate of C x divided by the clip norm of each client update."
ROUNDS_HELP = "T: rounds (all noisy prefix sums / model iterates are released)."


class Schedule(str, Enum):
    any = "any"
    cyclic = "cyclic"


class Method(str, Enum):
    gdp = "gdp"
    pld = "pld"
    rdp = "rdp"
    all = "all"


ParticipationsOpt = Annotated[
    int, typer.Option(help="k: most participations of one client over the T rounds.")
]
SeparationOpt = Annotated[
    int | None,
    typer.Option(help="b: fewest rounds between two participations (default T when k = 1)."),
]
ScheduleOpt = Annotated[
    Schedule, typer.Option(help="'any' schedule meeting (k, b), or 'cyclic' every b rounds.")
]
MethodOpt = Annotated[Method, typer.Option(help="Accountant(s): exact GDP, PLD, RDP, or all.")]


def _methods(method: Method) -> tuple[str, ...]:
    return ("gdp", "pld", "rdp") if method is Method.all else (method.value,)


def _participation(rounds: int, k: int, separation: int | None, schedule: Schedule) -> Any:
    from privfl.mechanisms.sensitivity import Participation

    if schedule is Schedule.cyclic:
        if separation is None:
            raise ValueError("--schedule cyclic needs --min-separation b (the period)")
        return Participation.cyclic(rounds, separation)
    if k == 1 and separation is None:
        return Participation.single(rounds)
    if separation is None:
        raise ValueError(f"--participations {k} needs --min-separation b")
    return Participation(rounds, k, separation, "any")


def _bandmf_participation(rounds: int, band: int, k: int, separation: int | None,
                          schedule: Schedule, sampling_rate: float | None) -> Any:
    """BandMF's participation: with ``--sampling-rate`` and no participation option, the
    ``band`` cyclic groups' (the only one the sampling allows; a different one given is refused
    by :func:`~privfl.mechanisms.correlated_privacy.banded_release`)."""
    from privfl._validation import check_int
    from privfl.mechanisms.sensitivity import Participation

    if sampling_rate is not None and (k, separation, schedule) == (1, None, Schedule.any):
        return Participation.groups(rounds, check_int("band", band, minimum=1))
    return _participation(rounds, k, separation, schedule)


RestartOpt = Annotated[
    int, typer.Option(help="R: restart the tree every R rounds (0: one tree over the T rounds).")
]


def _tree(participation: Any, z: float, restart_every: int,
          methods: tuple[str, ...] = ("gdp", "pld", "rdp")) -> Any:
    from privfl.mechanisms.correlated_privacy import tree_release

    return tree_release(participation, z, restart_every=restart_every, methods=methods)


def _evaluate(event: Any, delta: float) -> list:
    from privfl.accounting.dispatch import evaluate

    return evaluate(event, delta)


def _emit(as_json: bool, command: str, setting: dict[str, Any], results: list) -> None:
    """Print the card (the labels every result shares first) and the results."""
    from privfl.cli.output import print_json, print_report

    first = results[0]
    card = {
        "unit": first.unit,
        "neighbouring": first.neighbouring,
        "sampling": first.sampling,
        "release": first.release,
        **setting,
    }
    if as_json:
        print_json({"command": command, "setting": card, "results": [r.to_dict() for r in results]})
    else:
        print_report(f"privfl {command}", card, results)


@user_errors
def account_dp_ftrl(
    rounds: Annotated[int, typer.Option(help=ROUNDS_HELP)],
    noise_multiplier: Annotated[float, typer.Option(help=Z_HELP)],
    delta: TargetDeltaOpt,
    participations: ParticipationsOpt = 1,
    min_separation: SeparationOpt = None,
    schedule: ScheduleOpt = Schedule.any,
    restart_every: RestartOpt = 0,
    method: MethodOpt = Method.all,
    as_json: JsonOpt = False,
) -> None:
    """Epsilon of DP-FTRL with tree aggregation (Kairouz et al. 2021): one Gaussian mechanism
    on the tree's sensitivity, sqrt(ceil(log2(T + 1))) for one participation."""
    participation = _participation(rounds, participations, min_separation, schedule)
    event = _tree(participation, noise_multiplier, restart_every, _methods(method))
    results = _evaluate(event, delta)
    setting = {
        "mechanism": "tree aggregation",
        "rounds": rounds,
        "noise_multiplier": noise_multiplier,
        "sensitivity": event.sensitivity,
        "delta": delta,
    }
    _emit(as_json, "account dp-ftrl", setting, results)


@user_errors
def account_bandmf(
    rounds: Annotated[int, typer.Option(help=ROUNDS_HELP)],
    band: Annotated[int, typer.Option(help="b: non-zero diagonals of the lower-triangular C.")],
    noise_multiplier: Annotated[float, typer.Option(help=Z_HELP)],
    delta: TargetDeltaOpt,
    sampling_rate: Annotated[
        float | None,
        typer.Option(
            help="q: Poisson rate within each of the b groups (amplification; needs secret "
            "sampling in deployment). Without it: the participation bound."
        ),
    ] = None,
    max_column_norm: Annotated[float, typer.Option(help="m: largest column norm of C.")] = 1.0,
    participations: ParticipationsOpt = 1,
    min_separation: SeparationOpt = None,
    schedule: ScheduleOpt = Schedule.any,
    method: MethodOpt = Method.all,
    as_json: JsonOpt = False,
) -> None:
    """Epsilon of banded matrix factorization (BandMF, Choquette-Choo et al. 2023)."""
    from privfl.mechanisms.correlated_privacy import banded_release

    setting: dict[str, Any] = {
        "mechanism": f"banded MF (band {band})",
        "rounds": rounds,
        "noise_multiplier": noise_multiplier,
        "delta": delta,
    }
    if sampling_rate is not None and sampling_rate < 1 and method is Method.gdp:
        raise ValueError("--method gdp with --sampling-rate below 1: allowed methods pld, rdp, "
                         "all")
    participation = _bandmf_participation(rounds, band, participations, min_separation,
                                          schedule, sampling_rate)
    event = banded_release(participation, band, noise_multiplier,
                           max_column_norm=max_column_norm, sampling_rate=sampling_rate,
                           methods=_methods(method))
    if event.sampling_rate == 1.0:  # the participation bound (q = 1 included)
        setting["sensitivity"] = event.sensitivity
    results = _evaluate(event, delta)
    _emit(as_json, "account bandmf", setting, results)


@user_errors
def calibrate_dp_ftrl(
    rounds: Annotated[int, typer.Option(help=ROUNDS_HELP)],
    epsilon: TargetEpsilonOpt,
    delta: TargetDeltaOpt,
    participations: ParticipationsOpt = 1,
    min_separation: SeparationOpt = None,
    schedule: ScheduleOpt = Schedule.any,
    restart_every: RestartOpt = 0,
    as_json: JsonOpt = False,
) -> None:
    """Smallest noise multiplier z = std / clip norm for DP-FTRL (tree) at (epsilon, delta),
    exact GDP."""
    from dataclasses import replace

    from privfl.accounting.correlated.accountant import calibrate_noise_multiplier

    participation = _participation(rounds, participations, min_separation, schedule)
    event = _tree(participation, 1.0, restart_every)
    s = event.sensitivity
    z = calibrate_noise_multiplier(epsilon, delta, s)
    results = _evaluate(replace(event, noise_multiplier=z), delta)
    setting = {
        "mechanism": "tree aggregation",
        "rounds": rounds,
        "target_epsilon": epsilon,
        "noise_multiplier": z,
        "sensitivity": s,
        "delta": delta,
    }
    _emit(as_json, "calibrate dp-ftrl", setting, results)


@user_errors
def calibrate_bandmf(
    rounds: Annotated[int, typer.Option(help=ROUNDS_HELP)],
    band: Annotated[int, typer.Option(help="b: non-zero diagonals of the lower-triangular C.")],
    epsilon: TargetEpsilonOpt,
    delta: TargetDeltaOpt,
    sampling_rate: Annotated[
        float | None, typer.Option(help="q: Poisson rate within each group (amplification).")
    ] = None,
    max_column_norm: Annotated[float, typer.Option(help="m: largest column norm of C.")] = 1.0,
    participations: ParticipationsOpt = 1,
    min_separation: SeparationOpt = None,
    schedule: ScheduleOpt = Schedule.any,
    as_json: JsonOpt = False,
) -> None:
    """Smallest noise multiplier z = std / clip norm for BandMF at (epsilon, delta): PLD with
    amplification, exact GDP on the participation bound without it."""
    from dataclasses import replace

    from privfl.accounting.correlated.accountant import (
        calibrate_bandmf_noise,
        calibrate_noise_multiplier,
    )
    from privfl.mechanisms.correlated_privacy import banded_release

    setting: dict[str, Any] = {
        "mechanism": f"banded MF (band {band})",
        "rounds": rounds,
        "target_epsilon": epsilon,
        "delta": delta,
    }
    participation = _bandmf_participation(rounds, band, participations, min_separation,
                                          schedule, sampling_rate)
    event = banded_release(participation, band, 1.0, max_column_norm=max_column_norm,
                           sampling_rate=sampling_rate)
    if event.sampling_rate < 1.0:  # amplified (q = 1: the participation bound of the groups)
        z = calibrate_bandmf_noise(
            epsilon, delta, rounds, band, sampling_rate, max_column_norm=max_column_norm
        )
    else:
        z = calibrate_noise_multiplier(epsilon, delta, event.sensitivity)
    results = _evaluate(replace(event, noise_multiplier=z), delta)
    setting["noise_multiplier"] = z
    _emit(as_json, "calibrate bandmf", setting, results)


def register(account_app: typer.Typer, calibrate_app: typer.Typer) -> None:
    """Add ``dp-ftrl`` and ``bandmf`` to the ``account`` and ``calibrate`` command groups."""
    account_app.command("dp-ftrl")(account_dp_ftrl)
    account_app.command("bandmf")(account_bandmf)
    calibrate_app.command("dp-ftrl")(calibrate_dp_ftrl)
    calibrate_app.command("bandmf")(calibrate_bandmf)
