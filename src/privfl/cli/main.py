"""The ``privfl`` command line.

Errors in the user's input (a ``ValueError`` from validation, an unsupported combination) are
printed as one line on stderr and exit with status 2, without a traceback.
"""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated, Any

import typer

from privfl.accounting.events import (
    AccountingLimitError,
    Neighbouring,
    Sampling,
    Unit,
    dpsgd_event,
)
from privfl.accounting.methods import AccountingOptions, account
from privfl.cli.audit import audit_app
from privfl.cli.common import JsonOpt, user_errors

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
app.add_typer(audit_app, name="audit")


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
TargetDeltaOpt = Annotated[float, typer.Option(help="Target delta, in (0, 1).")]


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
    noise_multiplier: Annotated[
        float, typer.Option(help="z: noise std divided by the clipping norm (Opacus/TF).")
    ],
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
    "Convention: SIGMA is the paper's noise scale, noise std = 2*SIGMA*C on the sum of clipped "
    "per-example gradients (Opacus noise multiplier 2*SIGMA); neighbours replace one record of "
    "one client; local batches of B records are drawn without replacement; every round counts "
    "(K*R steps) whatever the client sampling rate."
)

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
    sigma: Annotated[float, typer.Option(help="Paper sigma: noise std / (2C) on the sum.")],
    clients: Annotated[int, typer.Option(help="m: number of clients.")],
    delta: TargetDeltaOpt,
    client_rate: Annotated[
        float, typer.Option(help="p: client sampling rate (does not enter Theorem 2).")
    ] = 1.0,
    method: Annotated[FedMethod, typer.Option(help="Accountant(s) to use.")] = FedMethod.all,
    orders: OrdersOpt = "default",
    conversion: ConversionOpt = Conversion.improved,
    discretization: DiscretizationOpt = 1e-4,
    as_json: JsonOpt = False,
) -> None:
    from privfl.accounting.federated import FederatedSetting, federated_fdp

    setting = FederatedSetting.homogeneous(
        clients=clients,
        records=records,
        batch_size=batch_size,
        local_steps=local_steps,
        sigma=sigma,
        rounds=rounds,
        client_rate=client_rate,
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
        "noise": f"paper sigma {sigma:g} (noise multiplier {2 * sigma:g})",
        "steps": f"K*R = {local_steps}*{rounds} = {local_steps * rounds}",
        "clients": clients,
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
    noise: Annotated[
        str, typer.Option(help="sigma: the paper's per-user noise std, or a comma list.")
    ],
    delta: TargetDeltaOpt,
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
            "derived in privfl's spec; not in the paper)."
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
    from privfl.accounting.contraction import last_iterate_report

    methods = {"all": ("rdp", "pld"), "none": ()}.get(method.value, (method.value,))
    total = _rounds(rounds)
    results = last_iterate_report(
        users,
        batch_size,
        lipschitz,
        radius,
        _float_list("lr", lr),
        _float_list("noise", noise),
        delta,
        convex=convex,
        smooth=smoothness,
        release=release.value,
        secret_assignment=not public_assignment,
        methods=methods,
        baselines=[b.value for b in baseline] if baseline else None,
        schedule=schedule.value,
        rounds=total,
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
    noise: Annotated[float, typer.Option(help="sigma: noise std on the sum (units of C).")],
    clip: ClipOpt = 1.0,
    epsilon: Annotated[float | None, typer.Option(help="Give delta at this epsilon.")] = None,
    delta: Annotated[float | None, typer.Option(help="Give epsilon at this delta.")] = None,
    iterations: Annotated[
        int, typer.Option(help="T: iterations; T > 1 adds composed rdp/pld bounds.")
    ] = 1,
    server: ServerOpt = Server.trusted,
    as_json: JsonOpt = False,
) -> None:
    """Per-iteration (and composed) privacy of DP-DSGD with random client participation (seed 003).

    Methods: theorem-4.1 (the paper's formula; an estimate), per-s1-convexity (tighter, proven
    in docs/accountants/random-participation.md), wcs, ols (bounds), cs (centralized sampling at
    rate p*q; kind 'reference': rigorous for that mechanism only, a lower reference for random
    participation). The steps column tells per-iteration rows (1) from composed ones (T).
    """
    from privfl.accounting.participation import participation_report

    results = participation_report(
        client_rate,
        record_rate,
        records,
        noise,
        clip=clip,
        epsilon=epsilon,
        delta=delta,
        iterations=iterations,
        server=server.value,
    )
    card = _participation_card(
        client_rate,
        record_rate,
        records,
        server,
        noise=f"sigma = {noise:g} on the sum, clip C = {clip:g}",
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
    """Noise sigma per scheme for a per-iteration (epsilon, delta) target, or 'unreachable'.

    Every row carries its kind: 'bound' (the noise provably meets the target), 'estimate'
    (theorem-4.1: solved on the paper's formula, which can be below the truth, so the noise may
    not meet the target) or 'reference' (cs: random participation needs at least this noise).
    """
    from privfl.accounting.participation import calibrate_participation_report

    rows = calibrate_participation_report(
        client_rate, record_rate, records, epsilon, delta, clip=clip, server=server.value
    )
    card = _participation_card(
        client_rate, record_rate, records, server, target=f"({epsilon:g}, {delta:g}) per iteration"
    )
    if as_json:
        from privfl.cli.output import print_json

        print_json(
            {
                "command": "calibrate participation",
                "setting": card,
                "results": [row.to_dict() for row in rows],
            }
        )
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
        float | None, typer.Option(help="z (omit to solve for it).")
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

    With all three given, reports the epsilon they spend and the budget left. An answer that is
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
    """The paper sigma (noise std / 2C) for a per-client target: a CLT mu, or (epsilon, delta).

    With --mu the answer solves seed 000's CLT formula (an estimate). With --epsilon and --delta
    it is the smallest sigma whose pessimistic PLD bound on C_{B/n}(G_{1/sigma})^{KR} meets the
    target (a bound).
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
        "solved": "sigma (paper convention: noise std / 2C on the sum)",
        "sigma": sigma,
        "noise_multiplier": 2 * sigma,
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
        extra={"sigma": sigma, "calibration": {"method": method, "kind": kind}},
        warning=warning,
    )


from privfl.cli.check_privacy import check_privacy_command  # noqa: E402
from privfl.cli.compare import compare_command  # noqa: E402
from privfl.cli.distortion import distortion_app  # noqa: E402
from privfl.cli.run import run_command  # noqa: E402
from privfl.cli.tradeoff import TRADEOFF_HELP, tradeoff_command  # noqa: E402

app.command("run", help=run_command.__doc__)(run_command)
app.command("compare")(compare_command)
app.command("check-privacy")(check_privacy_command)
app.command("tradeoff", help=TRADEOFF_HELP)(tradeoff_command)
app.add_typer(distortion_app, name="distortion")


def main() -> None:
    """Console-script entry point."""
    sys.exit(app())


if __name__ == "__main__":
    main()
