"""`privfl audit ...`: check a claimed (epsilon, delta) on a concrete pair of neighbouring inputs.

Every subcommand builds a one-dimensional adversarial pair (privfl.accounting.audit), computes the
exact hockey-stick divergence in both directions (and a Monte Carlo interval with --monte-carlo),
and prints whether the claim holds. A violation on one pair disproves a claimed bound; passing on
some pairs proves nothing unless the pair is a known dominating pair (the report says which).

Exit status, so scripts can use the verdict: 0 the claim holds (on this pair), 1 it is VIOLATED,
3 INCONCLUSIVE (only a Monte Carlo interval that contains the claimed delta), 2 an input error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from typing import Annotated, Any

import typer

from privfl._validation import check_positive
from privfl.accounting.events import Neighbouring, Sampling, dpsgd_event
from privfl.cli.audit_run import audit_run_command
from privfl.cli.common import F, JsonOpt, user_errors

EXIT_HELP = (
    "Exit status: 0 the claim holds, 1 it is VIOLATED, 3 inconclusive (Monte Carlo only), "
    "2 an input error."
)
audit_app = typer.Typer(
    help=f"Check a claimed (epsilon, delta) on concrete neighbouring inputs. {EXIT_HELP}"
)

#: Exit statuses of `privfl audit ...` (2, an input error, comes from ``user_errors``).
EXIT_HOLDS, EXIT_VIOLATED, EXIT_INCONCLUSIVE = 0, 1, 3


class Interval(str, Enum):
    bernstein = "bernstein"
    clt = "clt"


EpsilonOpt = Annotated[float, typer.Option(help="Claimed epsilon.")]
DeltaOpt = Annotated[float, typer.Option(help="Claimed delta.")]
StepsOpt = Annotated[int, typer.Option(help="T: compose the pair T times.")]
NoiseMultiplierOpt = Annotated[
    float, typer.Option(help="z: noise multiplier, the noise std on the sum / clip norm C.")
]
RelationOpt = Annotated[Neighbouring, typer.Option(help="Neighbouring relation.")]
MonteCarloOpt = Annotated[
    int | None, typer.Option("--monte-carlo", help="Also estimate by N Monte Carlo samples.")
]
SeedOpt = Annotated[int, typer.Option(help="Seed of the Monte Carlo generator.")]
ConfidenceOpt = Annotated[float, typer.Option(help="Confidence level of the MC interval.")]
IntervalOpt = Annotated[
    Interval,
    typer.Option(help="MC interval: empirical Bernstein (rigorous) or CLT (approximate)."),
]


#: the most Monte Carlo draws (samples x steps x 2 directions) one audit may take (about a
#: quarter of an hour on one core at the few million draws per second numpy manages)
MAX_MONTE_CARLO_DRAWS = 2 * 10**9


def _draw_rate() -> float:
    """Monte Carlo draws per second on this machine: one Gaussian draw and its privacy loss,
    timed on 2^18 draws (the kernel of :func:`privfl.accounting.audit.monte_carlo_hockey_stick`)."""
    import time

    import numpy as np

    rng, n = np.random.default_rng(0), 1 << 18
    started = time.perf_counter()
    x = rng.standard_normal(n)
    loss = 0.5 * ((x - 1.0) ** 2 - x * x)
    np.where(loss > 1.0, -np.expm1(1.0 - loss), 0.0).mean()
    return n / max(time.perf_counter() - started, 1e-9)


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600),
                       ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:,.3g} {unit}"
    return f"{seconds:.3g} s"


def _check_monte_carlo(samples: int | None, steps: int) -> None:
    """Refuse (naming --monte-carlo, with a cost estimate) more than
    :data:`MAX_MONTE_CARLO_DRAWS` draws."""
    if samples is None or samples < 2 or steps < 1:
        return  # the audit's own validation names these
    draws = 2 * samples * steps
    if draws <= MAX_MONTE_CARLO_DRAWS:
        return
    rate = _draw_rate()
    raise ValueError(
        f"--monte-carlo = {samples} is out of range: must be <= "
        f"{MAX_MONTE_CARLO_DRAWS // (2 * steps):,} with {steps} step(s) ({draws:,} draws, "
        f"2 directions x samples x steps, would take at least {_duration(draws / rate)} at the "
        f"{rate:.3g} draws/s measured here)")


def _mc_options(
    monte_carlo: int | None, seed: int, confidence: float, interval: Interval, steps: int = 1,
) -> dict[str, Any]:
    _check_monte_carlo(monte_carlo, steps)
    return {
        "monte_carlo_samples": monte_carlo,
        "seed": seed,
        "confidence": confidence,
        "interval": interval.value,
    }


def _command(name: str) -> Callable[[F], F]:
    """Register `privfl audit NAME`, a ValueError as exit status 2."""

    def register(command: F) -> F:
        return audit_app.command(name, epilog=EXIT_HELP)(user_errors(command))

    return register


def exit_status(reports: Iterable[Any]) -> int:
    """1 if any claim is violated, else 3 if any verdict is inconclusive, else 0."""
    reports = list(reports)
    if any(report.violated for report in reports):
        return EXIT_VIOLATED
    if not all(report.conclusive for report in reports):
        return EXIT_INCONCLUSIVE
    return EXIT_HOLDS


def _finish(reports: Iterable[Any]) -> None:
    """End the command with the verdict's exit status (0 holds, 1 violated, 3 inconclusive)."""
    code = exit_status(reports)
    if code != EXIT_HOLDS:
        raise typer.Exit(code=code)


def _print(report: Any, as_json: bool) -> None:
    if as_json:
        from privfl.cli.output import print_json

        print_json(report.to_dict())
    else:
        typer.echo(report.summary)
    _finish([report])


def _run(pair: Any, steps: int, epsilon: float, delta: float, options: dict, as_json: bool) -> None:
    if steps != 1:
        pair = pair.compose(steps)
    _print(pair.audit(epsilon, delta, **options), as_json)


@_command("gaussian")
def audit_gaussian(
    sensitivity: Annotated[float, typer.Option(help="L2 sensitivity.")],
    std: Annotated[float, typer.Option(help="Noise standard deviation.")],
    epsilon: EpsilonOpt,
    delta: DeltaOpt,
    steps: StepsOpt = 1,
    monte_carlo: MonteCarloOpt = None,
    seed: SeedOpt = 0,
    confidence: ConfidenceOpt = 0.99,
    interval: IntervalOpt = Interval.bernstein,
    as_json: JsonOpt = False,
) -> None:
    """Gaussian mechanism: N(sensitivity, std^2) vs N(0, std^2) (its worst case)."""
    from privfl.accounting.audit import gaussian_pair

    options = _mc_options(monte_carlo, seed, confidence, interval, steps)
    _run(gaussian_pair(sensitivity, std), steps, epsilon, delta, options, as_json)


@_command("laplace")
def audit_laplace(
    sensitivity: Annotated[float, typer.Option(help="L1 sensitivity.")],
    scale: Annotated[float, typer.Option(help="Laplace scale b.")],
    epsilon: EpsilonOpt,
    delta: DeltaOpt,
    steps: StepsOpt = 1,
    monte_carlo: MonteCarloOpt = None,
    seed: SeedOpt = 0,
    confidence: ConfidenceOpt = 0.99,
    interval: IntervalOpt = Interval.bernstein,
    as_json: JsonOpt = False,
) -> None:
    """Laplace mechanism: Lap(sensitivity, b) vs Lap(0, b)."""
    from privfl.accounting.audit import laplace_pair

    options = _mc_options(monte_carlo, seed, confidence, interval, steps)
    _run(laplace_pair(sensitivity, scale), steps, epsilon, delta, options, as_json)


@_command("subsampled-gaussian")
def audit_subsampled_gaussian(
    sampling_rate: Annotated[float, typer.Option(help="q: Poisson sampling rate.")],
    noise_multiplier: NoiseMultiplierOpt,
    epsilon: EpsilonOpt,
    delta: DeltaOpt,
    neighbouring: RelationOpt = Neighbouring.ADD_REMOVE,
    steps: StepsOpt = 1,
    monte_carlo: MonteCarloOpt = None,
    seed: SeedOpt = 0,
    confidence: ConfidenceOpt = 0.99,
    interval: IntervalOpt = Interval.bernstein,
    as_json: JsonOpt = False,
) -> None:
    """Poisson-subsampled Gaussian: its dominating pair (T > 1 needs --monte-carlo)."""
    from privfl.accounting.audit import subsampled_gaussian_pair

    pair = subsampled_gaussian_pair(sampling_rate, noise_multiplier, neighbouring=neighbouring)
    options = _mc_options(monte_carlo, seed, confidence, interval, steps)
    _run(pair, steps, epsilon, delta, options, as_json)



@_command("participation")
def audit_participation(
    participation_rate: Annotated[float, typer.Option(help="p: client participation rate.")],
    sampling_rate: Annotated[float, typer.Option(help="q: record rate inside a client.")],
    local_size: Annotated[int, typer.Option(help="d: client's records besides x'.")],
    epsilon: EpsilonOpt,
    delta: DeltaOpt,
    noise_multiplier: Annotated[
        float | None, typer.Option(help="z: noise std on the sum / C. Or --std.")
    ] = None,
    std: Annotated[
        float | None,
        typer.Option(help="Instead of --noise-multiplier: sigma, the noise std on the sum = z C."),
    ] = None,
    clip_norm: Annotated[float, typer.Option(help="C: clip norm (x' has gradient C).")] = 1.0,
    scale: Annotated[
        float, typer.Option(help="a: the client's other gradients are a*C, aligned.")
    ] = 1.0,
    monte_carlo: MonteCarloOpt = None,
    seed: SeedOpt = 0,
    confidence: ConfidenceOpt = 0.99,
    interval: IntervalOpt = Interval.clt,
    as_json: JsonOpt = False,
) -> None:
    """Random participation (Hasircioglu and Gunduz 2022): the aligned-gradient configuration,
    where client 1's other records have gradients a*C aligned with x'."""
    from privfl.accounting.audit import participation_pair

    if noise_multiplier is None and std is None:
        raise ValueError("the noise is missing: give --noise-multiplier (noise std / C on the sum) "
                         "or --std (the noise std on the sum)")
    if noise_multiplier is not None and std is not None:
        raise ValueError(f"--noise-multiplier = {noise_multiplier!r} and --std = {std!r}: both "
                         "given; give exactly one (std = noise multiplier * C)")
    if std is None:
        z = check_positive("--noise-multiplier", noise_multiplier)
        std = z * check_positive("clip_norm", clip_norm)
    pair = participation_pair(
        participation_rate, sampling_rate, local_size, std, clip_norm=clip_norm, scale=scale
    )
    options = _mc_options(monte_carlo, seed, confidence, interval)
    _run(pair, 1, epsilon, delta, options, as_json)


@_command("dpsgd")
def audit_dpsgd(
    noise_multiplier: NoiseMultiplierOpt,
    sampling_rate: Annotated[float, typer.Option(help="q: sampling rate.")],
    steps: Annotated[int, typer.Option(help="T: steps.")],
    delta: DeltaOpt,
    methods: Annotated[str, typer.Option(help="Comma list of accountants to audit.")] = "rdp,pld",
    neighbouring: RelationOpt = Neighbouring.ADD_REMOVE,
    monte_carlo: MonteCarloOpt = None,
    seed: SeedOpt = 0,
    confidence: ConfidenceOpt = 0.99,
    interval: IntervalOpt = Interval.bernstein,
    as_json: JsonOpt = False,
) -> None:
    """Audit privfl's own accountants: their epsilon at delta, checked on the worst-case pair."""
    from privfl.accounting.audit import audit_accountants

    event = dpsgd_event(
        noise_multiplier, sampling_rate, steps, sampling=Sampling.POISSON, neighbouring=neighbouring
    )
    reports = audit_accountants(
        event, delta, methods=[m.strip() for m in methods.split(",") if m.strip()],
        **_mc_options(monte_carlo, seed, confidence, interval, steps),
    )
    if as_json:
        from privfl.cli.output import print_json

        print_json({method: report.to_dict() for method, report in reports.items()})
    else:
        for method, report in reports.items():
            typer.echo(f"{method}: {report.summary}")
    _finish(reports.values())


_command("run")(audit_run_command)
