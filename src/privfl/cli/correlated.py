"""`privfl account dp-ftrl | bandmf` and `privfl calibrate dp-ftrl | bandmf`.

Correlated-noise mechanisms without sampling (:mod:`privfl.accounting.correlated_noise`,
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


#: how the CLI's BandMF sensitivity m sqrt(k) is obtained
BAND_NOTE = (
    "sensitivity m sqrt(k): band <= separation, so a client's columns never share a row "
    "(exact when its columns have norm m)"
)


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


def _tree_sensitivity(rounds: int, participation: Any) -> tuple[float, str]:
    from privfl.mechanisms.sensitivity import sensitivity
    from privfl.mechanisms.tree import tree_encoder, tree_sensitivity

    if participation.max_participations == 1:
        return tree_sensitivity(rounds), "exact, sqrt(ceil(log2(T + 1)))"
    if rounds > 2048:
        raise ValueError(
            f"--rounds {rounds} with --participations > 1: allowed range 1..2048 (the tree's "
            "T x T Gram matrix)"
        )
    found = sensitivity(tree_encoder(rounds), participation)
    return found.value, ("exact" if found.exact else "upper bound") + f", {found.method}"


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
    method: MethodOpt = Method.all,
    as_json: JsonOpt = False,
) -> None:
    """Epsilon of DP-FTRL with tree aggregation (Kairouz et al. 2021): one Gaussian mechanism
    on the tree's sensitivity, sqrt(ceil(log2(T + 1))) for one participation."""
    from privfl.accounting.correlated_noise import gaussian_mechanism_results

    participation = _participation(rounds, participations, min_separation, schedule)
    s, how = _tree_sensitivity(rounds, participation)
    results = gaussian_mechanism_results(
        noise_multiplier,
        s,
        delta,
        steps=rounds,
        participation=f"{participation.label}; sensitivity {how}",
        methods=_methods(method),
    )
    setting = {
        "mechanism": "tree aggregation",
        "rounds": rounds,
        "noise_multiplier": noise_multiplier,
        "sensitivity": s,
        "delta": delta,
    }
    _emit(as_json, "account dp-ftrl", setting, results)


def _bandmf_sensitivity(rounds: int, band: int, participation: Any, norm: float) -> float:
    if participation.max_participations > 1 and participation.min_separation < band:
        raise ValueError(
            f"--min-separation {participation.min_separation} is below --band {band}: the "
            "columns overlap, compute the sensitivity of your C with privfl.mechanisms."
            "sensitivity.sensitivity"
        )
    return norm * participation.max_participations**0.5


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
    from privfl.accounting.correlated_noise import (
        bandmf_amplified_results,
        gaussian_mechanism_results,
    )

    setting: dict[str, Any] = {
        "mechanism": f"banded MF (band {band})",
        "rounds": rounds,
        "noise_multiplier": noise_multiplier,
        "delta": delta,
    }
    if sampling_rate is not None:
        if method is Method.gdp:
            raise ValueError("--method gdp with --sampling-rate: allowed methods pld, rdp, all")
        methods = ("pld", "rdp") if method is Method.all else (method.value,)
        results = bandmf_amplified_results(
            rounds,
            band,
            sampling_rate,
            noise_multiplier,
            delta,
            max_column_norm=max_column_norm,
            methods=methods,
        )
    else:
        participation = _participation(rounds, participations, min_separation, schedule)
        s = _bandmf_sensitivity(rounds, band, participation, max_column_norm)
        setting["sensitivity"] = s
        results = gaussian_mechanism_results(
            noise_multiplier,
            s,
            delta,
            steps=rounds,
            participation=f"{participation.label}; {BAND_NOTE}",
            methods=_methods(method),
        )
    _emit(as_json, "account bandmf", setting, results)


@user_errors
def calibrate_dp_ftrl(
    rounds: Annotated[int, typer.Option(help=ROUNDS_HELP)],
    epsilon: TargetEpsilonOpt,
    delta: TargetDeltaOpt,
    participations: ParticipationsOpt = 1,
    min_separation: SeparationOpt = None,
    schedule: ScheduleOpt = Schedule.any,
    as_json: JsonOpt = False,
) -> None:
    """Smallest noise multiplier z = std / clip norm for DP-FTRL (tree) at (epsilon, delta),
    exact GDP."""
    from privfl.accounting.correlated_noise import (
        calibrate_noise_multiplier,
        gaussian_mechanism_results,
    )

    participation = _participation(rounds, participations, min_separation, schedule)
    s, how = _tree_sensitivity(rounds, participation)
    z = calibrate_noise_multiplier(epsilon, delta, s)
    results = gaussian_mechanism_results(
        z, s, delta, steps=rounds, participation=f"{participation.label}; sensitivity {how}"
    )
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
    from privfl.accounting.correlated_noise import (
        bandmf_amplified_results,
        calibrate_bandmf_noise,
        calibrate_noise_multiplier,
        gaussian_mechanism_results,
    )

    setting: dict[str, Any] = {
        "mechanism": f"banded MF (band {band})",
        "rounds": rounds,
        "target_epsilon": epsilon,
        "delta": delta,
    }
    if sampling_rate is not None:
        z = calibrate_bandmf_noise(
            epsilon, delta, rounds, band, sampling_rate, max_column_norm=max_column_norm
        )
        results = bandmf_amplified_results(
            rounds, band, sampling_rate, z, delta, max_column_norm=max_column_norm
        )
    else:
        participation = _participation(rounds, participations, min_separation, schedule)
        s = _bandmf_sensitivity(rounds, band, participation, max_column_norm)
        z = calibrate_noise_multiplier(epsilon, delta, s)
        results = gaussian_mechanism_results(
            z,
            s,
            delta,
            steps=rounds,
            participation=f"{participation.label}; {BAND_NOTE}",
        )
    setting["noise_multiplier"] = z
    _emit(as_json, "calibrate bandmf", setting, results)


def register(account_app: typer.Typer, calibrate_app: typer.Typer) -> None:
    """Add ``dp-ftrl`` and ``bandmf`` to the ``account`` and ``calibrate`` command groups."""
    account_app.command("dp-ftrl")(account_dp_ftrl)
    account_app.command("bandmf")(account_bandmf)
    calibrate_app.command("dp-ftrl")(calibrate_dp_ftrl)
    calibrate_app.command("bandmf")(calibrate_bandmf)
