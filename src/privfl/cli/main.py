"""The ``privfl`` command line.

Errors in the user's input (a ``ValueError`` from validation, an unsupported combination) are
printed as one line on stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import math
import sys
from enum import Enum
from typing import Annotated, Any

import typer

from privfl._validation import check_int, check_positive
from privfl.accounting.events import (
    AccountingLimitError,
    Neighbouring,
    Sampling,
    Unit,
    dpsgd_event,
)
from privfl.accounting.methods import AccountingOptions, account
from privfl.cli.audit import audit_app
from privfl.cli.certify import certify_app
from privfl.cli.common import JsonOpt, TargetDeltaOpt, user_errors
from privfl.cli.correlated import register as register_correlated
from privfl.cli.noise import one_noise
from privfl.config.algorithms import register_builtin_algorithms

# the application: every command validates configurations of the built-in algorithms, whose
# models (privfl.config.algorithms) import no torch, so a typo is answered before torch loads
register_builtin_algorithms()

app = typer.Typer(
    help="privfl: differentially private federated learning with trustworthy privacy numbers.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
account_app = typer.Typer(help="Compute privacy guarantees (epsilon, delta) of what ran.")
calibrate_app = typer.Typer(help="Solve for noise, steps or sampling rate under a budget.")
app.add_typer(account_app, name="account")
app.add_typer(calibrate_app, name="calibrate")
register_correlated(account_app, calibrate_app)  # dp-ftrl, bandmf (privfl.cli.correlated)
app.add_typer(audit_app, name="audit")
app.add_typer(certify_app, name="certify")


def _choices(name: str, *values: str) -> Any:
    """The ``str`` Enum of a choice option: its values in the order --help lists them.

    A member's name is its value with '-' as '_' (``gdp-clt`` is ``.gdp_clt``).
    """
    members = [(value.replace("-", "_"), value) for value in values]
    return Enum(name, members, type=str, module=__name__)


MethodChoice = _choices("MethodChoice", "rdp", "pld", "gdp", "gdp-clt", "all")
BoundMethod = _choices("BoundMethod", "rdp", "pld")
FedMethod = _choices("FedMethod", "gdp", "gdp-clt", "pld", "rdp", "all")
Conversion = _choices("Conversion", "improved", "classic")

NeighbouringOpt = Annotated[
    Neighbouring,
    typer.Option(help="Neighbouring datasets: add/remove one record, or replace one record."),
]
SamplingOpt = Annotated[
    Sampling,
    typer.Option(
        help="Poisson (each record independently with rate q) or fixed-size batches drawn "
        "uniformly without replacement (q = B/n)."
    ),
]
OrdersOpt = Annotated[
    str,
    typer.Option(
        help="RDP orders: 'default', 'legacy' ({1.1,...,10.9} U {12,...,63}) or a comma list."
    ),
]
ConversionOpt = Annotated[
    Conversion,
    typer.Option(
        help="RDP to (eps, delta): 'improved' (Balle et al. 2020) or 'classic' "
        "(eps = rdp + log(1/delta)/(a-1))."
    ),
]
UnitOpt = Annotated[
    Unit,
    typer.Option(
        help="Unit of privacy (the label of the results): 'record' (DP-SGD: z and q are per "
        "record) or 'client' (user-level DP: each client's whole update is clipped to C, z is "
        "the noise std / C on the sum of clipped updates, q the rate clients are sampled at)."
    ),
]
DiscretizationOpt = Annotated[
    float, typer.Option(help="PLD value discretisation interval (smaller: tighter, slower).")
]

#: --noise-multiplier, the one name of the noise setting in every command
Z_HELP = (
    "z: noise multiplier, the std of the Gaussian noise on the sum of clipped gradients divided "
    "by the clipping norm C (Opacus / TF Privacy)."
)


def _options(orders: str, conversion: Conversion, discretization: float) -> AccountingOptions:
    return AccountingOptions(
        orders=orders, conversion=conversion.value, discretization=discretization
    )


def _emit(
    as_json: bool,
    command: str,
    setting: dict[str, Any],
    results: list,
    *,
    unsupported: dict[str, str] | None = None,
    footnotes: tuple[str, ...] = (),
    extra: dict[str, Any] | None = None,
    warning: str = "",
) -> None:
    """Print a report (text or ``--json``). A ``warning`` also goes to stderr as one line
    ``privfl: warning: ...`` and into the JSON as a ``warning`` field."""
    from privfl.cli.output import print_json, print_report

    if warning:
        typer.echo(f"privfl: warning: {warning}", err=True)
    if as_json:
        payload: dict[str, Any] = {"command": command, "setting": setting}
        if warning:
            payload["warning"] = warning
        payload.update(extra or {})
        payload["results"] = [r.to_dict() for r in results]
        if unsupported:
            payload["unsupported"] = unsupported
        print_json(payload)
    else:
        print_report(
            f"privfl {command}", setting, results, unsupported=unsupported, footnotes=footnotes
        )


@account_app.command("dpsgd")
@user_errors
def account_dpsgd(
    sampling_rate: Annotated[float, typer.Option(help="q: sampling rate per step.")],
    noise_multiplier: Annotated[float, typer.Option(help=Z_HELP)],
    steps: Annotated[int, typer.Option(help="T: number of noisy steps, all released.")],
    delta: TargetDeltaOpt,
    method: Annotated[MethodChoice, typer.Option(help="Accountant(s) to use.")] = MethodChoice.all,
    orders: OrdersOpt = "default",
    conversion: ConversionOpt = Conversion.improved,
    neighbouring: NeighbouringOpt = Neighbouring.ADD_REMOVE,
    sampling: SamplingOpt = Sampling.POISSON,
    discretization: DiscretizationOpt = 1e-4,
    unit: UnitOpt = Unit.RECORD,
    as_json: JsonOpt = False,
) -> None:
    """Epsilon of DP-SGD: T steps of a subsampled Gaussian, noise multiplier z.

    With --unit client the same numbers are a user-level guarantee (the sampled units are
    clients, each client's whole update clipped to C), as in user-level DP-FedAvg.
    """
    from privfl.accounting.results import sampling_label

    event = dpsgd_event(
        noise_multiplier,
        sampling_rate,
        steps,
        sampling=sampling,
        neighbouring=neighbouring,
        unit=unit,
    )
    options = _options(orders, conversion, discretization)
    report = account(event, delta=delta, methods=method.value, options=options)
    setting = {
        "unit": event.unit.value,
        "neighbouring": event.neighbouring.value,
        "sampling": sampling_label(event),
        "noise_multiplier": noise_multiplier,
        "steps": steps,
        "release": event.release,
        "delta": delta,
    }
    _emit(as_json, "account dpsgd", setting, report.results, unsupported=report.unsupported)


FEDFDP_HELP = (
    "Record-level federated f-DP of PriFedSync with noisy SGD (Zheng et al. 2021, Theorem 2). "
    "Give the noise as --noise-multiplier z (noise std = z*C on the sum of clipped per-example "
    "gradients) or as the paper's --paper-sigma (sigma = z/2: noise std = 2*sigma*C, since a "
    "replaced record moves the sum by up to 2C); neighbours replace one record of one client; "
    "local batches of B records are drawn without replacement; every round counts (K*R steps) "
    "whatever the client sampling rate."
)
#: what Zheng et al. 2021's sigma is, for --help and error messages
ZHENG_SIGMA = "Zheng et al. 2021's sigma = z / 2, noise std / (2C) on the sum"

RecordsPerClientOpt = Annotated[int, typer.Option(help="n: records per client.")]
BatchSizeOpt = Annotated[int, typer.Option(help="B: local batch size (without replacement).")]
LocalStepsOpt = Annotated[int, typer.Option(help="K: local steps per round.")]
RoundsOpt = Annotated[int, typer.Option(help="R: synchronisation rounds.")]


@account_app.command("fedfdp", help=FEDFDP_HELP)
@user_errors
def account_fedfdp(
    records: RecordsPerClientOpt,
    batch_size: BatchSizeOpt,
    local_steps: LocalStepsOpt,
    rounds: RoundsOpt,
    clients: Annotated[int, typer.Option(help="m: number of clients.")],
    delta: TargetDeltaOpt,
    noise_multiplier: Annotated[float | None, typer.Option(help=f"{Z_HELP} Or --paper-sigma.")] = (
        None
    ),
    paper_sigma: Annotated[
        float | None,
        typer.Option(help=f"Instead of --noise-multiplier: {ZHENG_SIGMA} (so z = 2 sigma)."),
    ] = None,
    sigma: Annotated[float | None, typer.Option(hidden=True)] = None,  # deprecated: --paper-sigma
    client_rate: Annotated[
        float, typer.Option(help="p: client sampling rate (does not enter Theorem 2).")
    ] = 1.0,
    method: Annotated[FedMethod, typer.Option(help="Accountant(s) to use.")] = FedMethod.all,
    multiplicity: Annotated[int, typer.Option(
        help="k: the most clients holding one record (1: every record belongs to one client, "
        "Theorem 2's assumption; an overlapping partition: a record's k holders compose).",
    )] = 1,
    orders: OrdersOpt = "default",
    conversion: ConversionOpt = Conversion.improved,
    discretization: DiscretizationOpt = 1e-4,
    as_json: JsonOpt = False,
) -> None:
    from privfl.accounting.federated import FederatedSetting, federated_fdp

    noise = one_noise(noise_multiplier, paper_sigma, paper_meaning=ZHENG_SIGMA,
                      deprecated=("--sigma", sigma))
    z, sigma = noise.convert(noise.value, lambda s: 2.0 * s, lambda z: z / 2.0)
    setting = FederatedSetting.homogeneous(
        clients=clients,
        records=records,
        batch_size=batch_size,
        local_steps=local_steps,
        sigma=sigma,
        rounds=rounds,
        client_rate=client_rate,
        multiplicity=multiplicity,
    )
    methods = ("gdp-clt", "pld") if method is FedMethod.all else (method.value,)
    results, refused = [], {}
    for name in methods:
        try:
            options = _options(orders, conversion, discretization)
            results += federated_fdp(setting, delta, methods=(name,), options=options)
        except AccountingLimitError as error:  # --method all: report the others, say why not
            if method is not FedMethod.all:
                raise
            refused[name] = str(error)
    if not results:
        raise AccountingLimitError("; ".join(f"{m}: {r}" for m, r in refused.items()))
    card = {
        "unit": "record",
        "neighbouring": "replace-one",
        "sampling": f"without-replacement (B/n = {batch_size}/{records}), clients Poisson "
        f"(p = {client_rate:g}, not used by the bound)",
        "noise": f"noise multiplier {z:g} (Zheng et al. 2021's sigma {sigma:g})",
        "noise_multiplier": z,
        "paper_sigma": sigma,
        "steps": f"K*R = {local_steps}*{rounds} = {local_steps * rounds}",
        "clients": clients,
        "record multiplicity": multiplicity,
        "release": "helper models sent to clients (weak: one client; strong: all colluding)",
        "delta": delta,
    }
    _emit(as_json, "account fedfdp", card, results, unsupported=refused)


def _float_list(name: str, text: str) -> float | list[float]:
    """One number, or a comma-separated list of per-round numbers."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} = {text!r} is not a number or a comma-separated list") from None
    return values[0] if len(values) == 1 else values


#: what Asoodeh et al. 2021's sigma is, for --help and error messages
ASOODEH_SIGMA = (
    "Asoodeh et al. 2021's sigma, each user's own noise std (user j sends eta (g_j + sigma Z_j)), "
    "so z = sigma sqrt(m) / L"
)


def _show(value: float | list[float]) -> str:
    return f"{value:g}" if isinstance(value, float) else ",".join(f"{v:g}" for v in value)


def _last_iterate_noise(
    multiplier: str | None, paper: str | None, deprecated: str | None, m: int, lipschitz: float
) -> tuple[float | list[float], float | list[float]]:
    """``(z, sigma)`` of `account last-iterate`, each a number or a per-round list."""
    noise = one_noise(multiplier, paper, paper_meaning=ASOODEH_SIGMA,
                      deprecated=("--noise", deprecated))
    root = math.sqrt(check_int("batch_size", m, 1))  # the conversion needs m and L: check them
    lipschitz = check_positive("lipschitz", lipschitz)
    values = _float_list(noise.option, noise.value)
    pairs = [
        noise.convert(v, lambda s: s * root / lipschitz, lambda z: z * lipschitz / root)
        for v in (values if isinstance(values, list) else [values])
    ]
    z, sigma = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    return (z, sigma) if isinstance(values, list) else (z[0], sigma[0])


Release = _choices("Release", "last", "random-stop")
Baseline = _choices("Baseline", "one-pass", "independent-rounds")
CompositionMethod = _choices("CompositionMethod", "rdp", "pld", "all", "none")
Schedule = _choices("Schedule", "one-pass", "independent")


def _rounds(text: str | None) -> int | float | None:
    """``--rounds``: a positive integer, or ``inf``."""
    if text is None:
        return None
    if text.strip().lower() in ("inf", "infinity"):
        return float("inf")
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"rounds = {text!r} is not allowed: must be an integer >= 1 or 'inf'"
        ) from None


@account_app.command("last-iterate")
@user_errors
def account_last_iterate(
    users: Annotated[int, typer.Option(help="n: users (one record each).")],
    batch_size: Annotated[int, typer.Option(help="m: users per round (must divide n).")],
    lipschitz: Annotated[float, typer.Option(help="L: gradient norm bound (clip norm).")],
    radius: Annotated[float, typer.Option(help="rho: radius of the projection ball.")],
    lr: Annotated[str, typer.Option(help="eta: learning rate, or a comma list per round.")],
    delta: TargetDeltaOpt,
    noise_multiplier: Annotated[
        str | None,
        typer.Option(
            help="z: noise multiplier, the std of the noise on the sum of the m users' gradients "
            "(each of norm <= L) divided by L; or a comma list per round. Or --paper-sigma."
        ),
    ] = None,
    paper_sigma: Annotated[
        str | None,
        typer.Option(help=f"Instead of --noise-multiplier: {ASOODEH_SIGMA}; or a comma list."),
    ] = None,
    noise: Annotated[str | None, typer.Option(hidden=True)] = None,  # deprecated: --paper-sigma
    convex: Annotated[
        bool, typer.Option(help="Assert convex losses (needs --smoothness; diameter 2 rho).")
    ] = False,
    smoothness: Annotated[
        float | None, typer.Option(help="beta: smoothness, with --convex (lr <= 2/beta).")
    ] = None,
    release: Annotated[Release, typer.Option(help="Only the last model, or a random stop.")] = (
        Release.last
    ),
    public_assignment: Annotated[
        bool, typer.Option(help="The user-to-round partition is public (worst position).")
    ] = False,
    method: Annotated[
        CompositionMethod, typer.Option(help="All-iterates comparison accountant(s).")
    ] = CompositionMethod.all,
    baseline: Annotated[
        list[Baseline] | None,
        typer.Option(
            help="All-iterates baseline(s) to compare with (default: one-pass, or "
            "independent-rounds with --schedule independent)."
        ),
    ] = None,
    schedule: Annotated[
        Schedule,
        typer.Option(
            help="one-pass: the paper's secret random partition, each user once. independent: "
            "a fresh secret uniform subset of m users every round (the multi-round extension, "
            "derived by privfl with the paper's tools; not in the paper)."
        ),
    ] = Schedule.one_pass,
    rounds: Annotated[
        str | None,
        typer.Option(
            help="T: rounds (one-pass: at most n/m, default n/m; independent: required, an "
            "integer or 'inf' for the saturation limit)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Epsilon when only the final model of projected noisy SGD is released (Asoodeh et al.
    2021).

    Shows the contraction bounds (Theorem 2 / Corollary 3, or the multi-round extension with
    --schedule independent, and the sharpened chain rule) next to the composition bounds for
    releasing every iterate of the same run.
    """
    from privfl.accounting.contraction import ProjectedNoisySGD
    from privfl.accounting.dispatch import evaluate
    from privfl.accounting.events import LastIterateRelease

    methods = {"all": ("rdp", "pld"), "none": ()}.get(method.value, (method.value,))
    total = _rounds(rounds)
    z, sigma = _last_iterate_noise(noise_multiplier, paper_sigma, noise, batch_size, lipschitz)
    run = ProjectedNoisySGD(users, batch_size, lipschitz, radius, _float_list("lr", lr), sigma,
                            convex=convex, smooth=smoothness, rounds=total,
                            schedule=schedule.value)
    results = evaluate(
        LastIterateRelease(run, release=release.value,
                           secret_assignment=not public_assignment,
                           baselines=[b.value for b in baseline] if baseline else None,
                           methods=methods),
        delta,
    )
    contraction = results[0]
    if schedule.value == "one-pass":
        sampling = f"one-pass random partition, {batch_size} of {users} users per round"
    else:
        sampling = (f"independent uniform subsets, {batch_size} of {users} users per round "
                    "(multi-round extension)")
    card = {
        "unit": "record",
        "neighbouring": "replace-one",
        "sampling": sampling,
        "rounds": contraction.steps,
        "noise": f"noise multiplier {_show(z)} (Asoodeh et al. 2021's sigma {_show(sigma)})",
        "noise_multiplier": z,
        "paper_sigma": sigma,
        "release": f"{release.value} model only (contraction); all iterates (rdp, pld)",
        "assumptions": "convex, smooth" if convex else "none (relaxed diameter 2(rho + eta L))",
        "delta": delta,
    }
    _emit(as_json, "account last-iterate", card, results)


Server = _choices("Server", "trusted", "untrusted", "untrusted-participants-only")


ClientRateOpt = Annotated[float, typer.Option(help="p: probability a client participates.")]
RecordRateOpt = Annotated[float, typer.Option(help="q: Poisson rate of records in a client.")]
RecordsOpt = Annotated[
    int, typer.Option(help="d: records of the client holding x' (besides x'); use the largest.")
]
ClipOpt = Annotated[float, typer.Option(help="C: per-record clip norm.")]
ServerOpt = Annotated[Server, typer.Option(help="Who sees what (threat model).")]


#: what Hasircioglu and Gunduz 2022's sigma is, for --help and error messages
HASIRCIOGLU_SIGMA = (
    "Hasircioglu and Gunduz 2022's sigma, the noise std on the sum itself (untrusted server: "
    "each client's own noise std), so z = sigma / C"
)


def _participation_card(p: float, q: float, d: int, server: Server, **more: Any) -> dict:
    return {
        "unit": "record",
        "neighbouring": "add-remove (record x' of one client)",
        "sampling": f"random participation: clients p = {p:g}, records q = {q:g}, d = {d}",
        "server": server.value,
        **more,
    }


@account_app.command("participation")
@user_errors
def account_participation(
    client_rate: ClientRateOpt,
    record_rate: RecordRateOpt,
    records: RecordsOpt,
    noise_multiplier: Annotated[
        float | None,
        typer.Option(
            help="z: noise multiplier, the std of the Gaussian noise on the sum of clipped "
            "gradients divided by C (untrusted server: each client's own noise std / C). Or "
            "--paper-sigma."
        ),
    ] = None,
    paper_sigma: Annotated[
        float | None,
        typer.Option(help=f"Instead of --noise-multiplier: {HASIRCIOGLU_SIGMA} (C = --clip)."),
    ] = None,
    noise: Annotated[float | None, typer.Option(hidden=True)] = None,  # deprecated: --paper-sigma
    clip: ClipOpt = 1.0,
    epsilon: Annotated[float | None, typer.Option(help="Give delta at this epsilon.")] = None,
    delta: Annotated[float | None, typer.Option(help="Give epsilon at this delta.")] = None,
    iterations: Annotated[
        int, typer.Option(help="T: iterations; T > 1 adds composed rdp/pld bounds.")
    ] = 1,
    server: ServerOpt = Server.trusted,
    as_json: JsonOpt = False,
) -> None:
    """Per-iteration (and composed) privacy of DP-DSGD with random client participation
    (Hasircioglu and Gunduz 2022).

    Methods: theorem-4.1 (the paper's formula; an estimate), per-s1-convexity (tighter, proven
    in docs/accountants/random-participation.md), wcs, ols (bounds), cs (centralized sampling at
    rate p*q; kind 'reference': rigorous for that mechanism only, a lower reference for random
    participation). The steps column tells per-iteration rows (1) from composed ones (T).
    """
    from privfl.accounting.dispatch import evaluate
    from privfl.accounting.events import RandomParticipationStep

    choice = one_noise(noise_multiplier, paper_sigma, paper_meaning=HASIRCIOGLU_SIGMA,
                       deprecated=("--noise", noise))
    clip = check_positive("clip", clip)  # the conversion needs C
    z, sigma = choice.convert(choice.value, lambda s: s / clip, lambda z: z * clip)
    # epsilon at delta or delta at epsilon (a clear error for both / neither): the run's path
    results = evaluate(RandomParticipationStep(client_rate, record_rate, records, sigma,
                                               clip=clip, iterations=iterations,
                                               server=server.value), delta, epsilon=epsilon)
    card = _participation_card(
        client_rate,
        record_rate,
        records,
        server,
        noise=f"noise multiplier {z:g} (sigma = {sigma:g} on the sum, clip C = {clip:g})",
        noise_multiplier=z,
        paper_sigma=sigma,
        iterations=iterations,
        query=f"delta at epsilon = {epsilon:g}" if epsilon is not None else f"epsilon at "
        f"delta = {delta:g}",
    )
    _emit(as_json, "account participation", card, results)


@calibrate_app.command("participation")
@user_errors
def calibrate_participation_command(
    client_rate: ClientRateOpt,
    record_rate: RecordRateOpt,
    records: RecordsOpt,
    epsilon: Annotated[float, typer.Option(help="Per-iteration target epsilon.")],
    delta: Annotated[float, typer.Option(help="Per-iteration target delta.")],
    clip: ClipOpt = 1.0,
    server: ServerOpt = Server.trusted,
    as_json: JsonOpt = False,
) -> None:
    """Noise per scheme for a per-iteration (epsilon, delta) target, or 'unreachable'.

    The table's noise is Hasircioglu and Gunduz 2022's sigma, the std on the sum, whose noise
    multiplier z = sigma / C (--json gives both: 'noise' and 'noise_multiplier').

    Every row carries its kind: 'bound' (the noise provably meets the target), 'estimate'
    (theorem-4.1: solved on the paper's formula, which can be below the truth, so the noise may
    not meet the target) or 'reference' (cs: random participation needs at least this noise).
    """
    from privfl.accounting.participation import calibrate_participation_report

    rows = calibrate_participation_report(
        client_rate, record_rate, records, epsilon, delta, clip=clip, server=server.value
    )
    card = _participation_card(
        client_rate, record_rate, records, server, target=f"({epsilon:g}, {delta:g}) per iteration",
        noise=f"sigma, the std on the sum; noise multiplier z = sigma / C (C = {clip:g})",
    )
    if as_json:
        from privfl.cli.output import print_json

        results = [
            {**row.to_dict(), "noise_multiplier": None if row.noise is None else row.noise / clip}
            for row in rows
        ]
        print_json({"command": "calibrate participation", "setting": card, "results": results})
        return
    from privfl.cli.output import print_noise_table

    print_noise_table("privfl calibrate participation", card, rows)


@calibrate_app.command("dpsgd")
@user_errors
def calibrate_dpsgd(
    epsilon: Annotated[float, typer.Option(help="Target epsilon.")],
    delta: TargetDeltaOpt,
    sampling_rate: Annotated[float | None, typer.Option(help="q (omit to solve for it).")] = None,
    noise_multiplier: Annotated[
        float | None, typer.Option(help=f"{Z_HELP} Omit to solve for it.")
    ] = None,
    steps: Annotated[int | None, typer.Option(help="T (omit to solve for it).")] = None,
    method: Annotated[
        BoundMethod,
        typer.Option(
            help="Accountant (a bound). pld, the default, is the tightest; rdp is 7-15% looser "
            "in noise for Poisson sampling and 1.7-2x for fixed-size batches."
        ),
    ] = BoundMethod.pld,
    orders: OrdersOpt = "default",
    conversion: ConversionOpt = Conversion.improved,
    neighbouring: NeighbouringOpt = Neighbouring.ADD_REMOVE,
    sampling: SamplingOpt = Sampling.POISSON,
    discretization: DiscretizationOpt = 1e-4,
    unit: UnitOpt = Unit.RECORD,
    as_json: JsonOpt = False,
) -> None:
    """Solve for the one of --noise-multiplier, --steps, --sampling-rate that is omitted.

    With all three given, reports the epsilon they spend and the budget left (exit status 1
    when they spend more than --epsilon, as `privfl audit` for VIOLATED). An answer that is
    a search cap rather than a solution (e.g. --steps at its limit of 1e9, or where the
    accountant cannot evaluate further) is flagged: a 'privfl: warning:' line on stderr and a
    'warning' field in --json.
    """
    from privfl.accounting import calibrate as cal

    template = {
        "method": method.value,
        "sampling": sampling,
        "neighbouring": neighbouring,
        "unit": unit,
        "options": _options(orders, conversion, discretization),
    }
    missing = [
        name
        for name, value in (
            ("noise_multiplier", noise_multiplier),
            ("steps", steps),
            ("sampling_rate", sampling_rate),
        )
        if value is None
    ]
    if len(missing) > 1:
        raise ValueError(
            f"{' and '.join('--' + m.replace('_', '-') for m in missing)} are missing: "
            "omit at most one of --noise-multiplier, --steps, --sampling-rate"
        )
    if not missing:
        result = cal.DpSgdTemplate(delta=delta, **template).epsilon(
            noise_multiplier, sampling_rate, steps
        )
        calibration = cal.Calibration("epsilon", result.epsilon, epsilon, result)
    elif missing == ["noise_multiplier"]:
        calibration = cal.calibrate_noise(epsilon, delta, sampling_rate, steps, **template)
    elif missing == ["steps"]:
        calibration = cal.max_steps(epsilon, delta, sampling_rate, noise_multiplier, **template)
    else:
        calibration = cal.max_sampling_rate(epsilon, delta, noise_multiplier, steps, **template)
    spent = calibration.result.epsilon
    setting = {
        "solved": calibration.parameter,
        "value": calibration.value,
        "method": calibration.result.method,
        "kind": calibration.kind,
        "target_epsilon": epsilon,
        "epsilon_spent": spent,
        "epsilon_left": max(epsilon - spent, 0.0),
        "delta": delta,
        "unit": calibration.result.unit,
        "neighbouring": calibration.result.neighbouring,
        "sampling": calibration.result.sampling,
        "steps": calibration.result.steps,
    }
    footnotes: tuple[str, ...] = ()
    if calibration.parameter == "epsilon" and spent > epsilon:
        footnotes = (f"over budget: spends {spent:.6g} > target {epsilon:.6g}",)
    if calibration.warning:
        footnotes += (f"warning: {calibration.warning}",)
    _emit(
        as_json,
        "calibrate dpsgd",
        setting,
        [calibration.result],
        footnotes=footnotes,
        extra={"calibration": {k: v for k, v in calibration.to_dict().items() if k != "result"}},
        warning=calibration.warning,
    )
    if calibration.parameter == "epsilon" and spent > epsilon:
        raise typer.Exit(code=1)  # over budget, as audit exits 1 for VIOLATED


@calibrate_app.command("fedfdp")
@user_errors
def calibrate_fedfdp(
    records: RecordsPerClientOpt,
    batch_size: BatchSizeOpt,
    local_steps: LocalStepsOpt,
    rounds: RoundsOpt,
    mu: Annotated[
        float | None, typer.Option(help="Target CLT mu (Theorem 2 estimate); or give --epsilon.")
    ] = None,
    epsilon: Annotated[float | None, typer.Option(help="Target epsilon (PLD bound).")] = None,
    delta: Annotated[float | None, typer.Option(help="Target delta with --epsilon.")] = None,
    discretization: DiscretizationOpt = 1e-4,
    as_json: JsonOpt = False,
) -> None:
    """The noise for a per-client target of PriFedSync: a CLT mu, or (epsilon, delta).

    The answer is the noise multiplier z = noise std / C on the sum of clipped gradients, and
    Zheng et al. 2021's sigma = z / 2. With --mu it solves the paper's CLT formula (Theorem 2; an
    estimate). With --epsilon and --delta it is the smallest noise whose pessimistic PLD bound on
    C_{B/n}(G_{2/z})^{KR} meets the target (a bound).
    """
    from privfl.accounting import calibrate as cal
    from privfl.accounting.federated import ClientTraining, sigma_for_mu

    if (mu is None) == (epsilon is None):
        raise ValueError("give exactly one target: --mu, or --epsilon with --delta")
    warning = ""
    if mu is not None:
        sigma = sigma_for_mu(
            mu, records=records, batch_size=batch_size, local_steps=local_steps, rounds=rounds
        )
        delta = 1e-5 if delta is None else delta
        method, kind, target = "gdp-clt", "estimate", f"mu = {mu:g}"
    else:
        if delta is None:
            raise ValueError("--delta is missing: a target --epsilon needs a --delta")
        client = ClientTraining(records, batch_size, local_steps, 1.0)
        calibration = cal.calibrate_noise(
            epsilon,
            delta,
            client.sampling_rate,
            local_steps * rounds,
            method="pld",
            sampling=Sampling.WITHOUT_REPLACEMENT,
            neighbouring=Neighbouring.REPLACE_ONE,
            options=AccountingOptions(discretization=discretization),
        )
        sigma = calibration.value / 2.0
        method, kind = "pld", calibration.kind
        target = f"epsilon = {epsilon:g} at delta = {delta:g}"
        warning = calibration.warning
    from privfl.accounting.federated import FederatedSetting, federated_fdp

    setting = FederatedSetting.homogeneous(
        clients=2,
        records=records,
        batch_size=batch_size,
        local_steps=local_steps,
        sigma=sigma,
        rounds=rounds,
    )
    results = [
        r
        for r in federated_fdp(setting, delta, methods=("gdp-clt", "pld"))
        if r.extras["scope"] == "weak"
    ]
    card = {
        "solved": "noise multiplier z (noise std / C on the sum) and Zheng et al. 2021's "
        "sigma = z / 2",
        "noise_multiplier": 2 * sigma,
        "sigma": sigma,
        "target": f"{target} ({method})",
        "kind": (
            "estimate (solved on the CLT mu, which can be below the truth; the pld row is a bound "
            "at this sigma)"
            if kind == "estimate"
            else f"{kind} (solved on the pld bound)"
        ),
        "unit": "record",
        "neighbouring": "replace-one",
        "sampling": f"without-replacement (B/n = {batch_size}/{records})",
        "steps": local_steps * rounds,
    }
    _emit(
        as_json,
        "calibrate fedfdp",
        card,
        results,
        extra={"sigma": sigma, "noise_multiplier": 2 * sigma,
               "calibration": {"method": method, "kind": kind}},
        warning=warning,
    )


from privfl.cli.check_privacy import check_privacy_command  # noqa: E402
from privfl.cli.compare import compare_command  # noqa: E402
from privfl.cli.distortion import distortion_app  # noqa: E402
from privfl.cli.flower import flower_app  # noqa: E402
from privfl.cli.help_text import unwrap_app  # noqa: E402
from privfl.cli.info import init_command, list_command, version_callback  # noqa: E402
from privfl.cli.run import run_command  # noqa: E402
from privfl.cli.sweep import SWEEP_HELP, sweep_command  # noqa: E402
from privfl.cli.tradeoff import TRADEOFF_HELP, tradeoff_command  # noqa: E402

app.command("run", help=run_command.__doc__)(run_command)
app.command("sweep", help=SWEEP_HELP)(sweep_command)
app.command("list")(list_command)
app.command("init")(init_command)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option(
        "--version", callback=version_callback, is_eager=True,
        help="Print privfl's version (and torch's, python's) and exit.")] = False,
) -> None:
    """privfl: differentially private federated learning with trustworthy privacy numbers."""
app.command("compare")(compare_command)
app.command("check-privacy")(check_privacy_command)
app.command("tradeoff", help=TRADEOFF_HELP)(tradeoff_command)
app.add_typer(distortion_app, name="distortion")
app.add_typer(flower_app, name="flower")
unwrap_app(app)  # each paragraph of every help on one line: rich wraps it to the terminal


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point. Usage errors (an unknown option, a missing argument, a value
    outside a choice) are one line on stderr naming the command, exit status 2; ``--help``
    shows the usage."""
    try:  # typer >= 0.21 vendors click; older ones (Flower 1.42 pins typer < 0.21) use click
        from typer._click.exceptions import UsageError
    except ImportError:
        from click.exceptions import UsageError

    try:
        code = app(argv, standalone_mode=False)
    except UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else "privfl"
        message = " ".join(error.format_message().split())
        if message:  # empty: the help was asked for by giving no arguments, and is shown
            typer.echo(f"privfl: error: {message} (see: {where} --help)", err=True)
        code = 2
    except KeyboardInterrupt:
        typer.echo("privfl: interrupted", err=True)
        code = 130
    sys.exit(code or 0)


if __name__ == "__main__":
    main()
