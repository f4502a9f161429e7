"""`privfl calibrate participation | dpsgd | fedfdp`: solve for what a budget allows.

Each command solves for the missing setting (a noise, a number of steps, a sampling rate) under
an (epsilon, delta) or mu target and prints it with the result it spends and its kind (a bound,
or an estimate solved on a paper's formula); the options shared with ``privfl account`` are in
:mod:`privfl.cli.accounting_options`. :func:`register` adds the commands to the ``calibrate``
group (``dp-ftrl`` and ``bandmf`` come from :mod:`privfl.cli.correlated`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from privfl.accounting.events import Neighbouring, Sampling, Unit
from privfl.accounting.methods import AccountingOptions
from privfl.cli import accounting_options as opt
from privfl.cli.common import JsonOpt, TargetDeltaOpt, user_errors
from privfl.runs.rounding import format_bound

BoundMethod = opt.choices("BoundMethod", "rdp", "pld")


@user_errors
def calibrate_participation_command(
    client_rate: opt.ClientRateOpt,
    record_rate: opt.RecordRateOpt,
    records: opt.RecordsOpt,
    epsilon: Annotated[float, typer.Option(help="Per-iteration target epsilon.")],
    delta: Annotated[float, typer.Option(help="Per-iteration target delta.")],
    clip_norm: opt.ClipOpt = 1.0,
    server: opt.ServerOpt = opt.Server.trusted,
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
        client_rate, record_rate, records, epsilon, delta, clip_norm=clip_norm, server=server.value
    )
    card = opt.participation_card(
        client_rate, record_rate, records, server, target=f"({epsilon:g}, {delta:g}) per iteration",
        noise=f"sigma, the std on the sum; noise multiplier z = sigma / C (C = {clip_norm:g})",
    )
    if as_json:
        from privfl.cli.output import print_json

        results = [
            {**row.to_dict(),
             "noise_multiplier": None if row.noise is None else row.noise / clip_norm}
            for row in rows
        ]
        print_json({"command": "calibrate participation", "setting": card, "results": results})
        return
    from privfl.cli.output import print_noise_table

    print_noise_table("privfl calibrate participation", card, rows)


@user_errors
def calibrate_dpsgd(
    epsilon: Annotated[float, typer.Option(help="Target epsilon.")],
    delta: TargetDeltaOpt,
    sampling_rate: Annotated[float | None, typer.Option(help="q (omit to solve for it).")] = None,
    noise_multiplier: Annotated[
        float | None, typer.Option(help=f"{opt.Z_HELP} Omit to solve for it.")
    ] = None,
    steps: Annotated[int | None, typer.Option(help="T (omit to solve for it).")] = None,
    method: Annotated[
        BoundMethod,
        typer.Option(
            help="Accountant (a bound). pld, the default, is the tightest; rdp is 7-15% looser "
            "in noise for Poisson sampling and 1.7-2x for fixed-size batches."
        ),
    ] = BoundMethod.pld,
    orders: opt.OrdersOpt = "default",
    conversion: opt.ConversionOpt = opt.Conversion.improved,
    neighbouring: opt.NeighbouringOpt = Neighbouring.ADD_REMOVE,
    sampling: opt.SamplingOpt = Sampling.POISSON,
    discretization: opt.DiscretizationOpt = 1e-4,
    unit: opt.UnitOpt = Unit.RECORD,
    as_json: JsonOpt = False,
) -> None:
    """Solve for the one of --noise-multiplier, --steps, --sampling-rate that is omitted.

    With all three given, reports the epsilon they spend and the budget left (exit status 1
    when they spend more than --epsilon, as `privfl audit` for VIOLATED). An answer that is
    a search cap rather than a solution (e.g. --steps at its limit of 1e9, or where the
    accountant cannot evaluate further) is flagged: a 'privfl: warning:' line on stderr and a
    'warning' field in --json.
    """
    from privfl.accounting.calibrate import solve as cal

    template = {
        "method": method.value,
        "sampling": sampling,
        "neighbouring": neighbouring,
        "unit": unit,
        "options": opt.accountant_options(orders, conversion, discretization),
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
        footnotes = (f"over budget: spends {format_bound(spent)} > target {epsilon:.6g}",)
    if calibration.warning:
        footnotes += (f"warning: {calibration.warning}",)
    opt.emit(
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


@user_errors
def calibrate_fedfdp(
    records: opt.RecordsPerClientOpt,
    batch_size: opt.BatchSizeOpt,
    local_steps: opt.LocalStepsOpt,
    rounds: opt.RoundsOpt,
    mu: Annotated[
        float | None, typer.Option(help="Target CLT mu (Theorem 2 estimate); or give --epsilon.")
    ] = None,
    epsilon: Annotated[float | None, typer.Option(help="Target epsilon (PLD bound).")] = None,
    delta: Annotated[float | None, typer.Option(help="Target delta with --epsilon.")] = None,
    discretization: opt.DiscretizationOpt = 1e-4,
    as_json: JsonOpt = False,
) -> None:
    """The noise for a per-client target of PriFedSync: a CLT mu, or (epsilon, delta).

    The answer is the noise multiplier z = noise std / C on the sum of clipped gradients, and
    Zheng et al. 2021's sigma = z / 2. With --mu it solves the paper's CLT formula (Theorem 2; an
    estimate). With --epsilon and --delta it is the smallest noise whose pessimistic PLD bound on
    C_{B/n}(G_{2/z})^{KR} meets the target (a bound).
    """
    from privfl.accounting.calibrate import solve as cal
    from privfl.accounting.fdp.federated import ClientTraining, noise_multiplier_for_mu

    if (mu is None) == (epsilon is None):
        raise ValueError("give exactly one target: --mu, or --epsilon with --delta")
    warning = ""
    if mu is not None:
        z = noise_multiplier_for_mu(
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
        z = calibration.value
        method, kind = "pld", calibration.kind
        target = f"epsilon = {epsilon:g} at delta = {delta:g}"
        warning = calibration.warning
    from privfl.accounting.fdp.federated import FederatedSetting, federated_fdp

    setting = FederatedSetting.homogeneous(
        clients=2,
        records=records,
        batch_size=batch_size,
        local_steps=local_steps,
        noise_multiplier=z,
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
        "noise_multiplier": z,
        "sigma": z / 2,
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
    opt.emit(
        as_json,
        "calibrate fedfdp",
        card,
        results,
        extra={"sigma": z / 2, "noise_multiplier": z,
               "calibration": {"method": method, "kind": kind}},
        warning=warning,
    )


def register(calibrate_app: typer.Typer) -> None:
    """Add ``participation``, ``dpsgd`` and ``fedfdp`` to the ``calibrate`` command group, in
    this order (``--help`` lists them so)."""
    calibrate_app.command("participation")(calibrate_participation_command)
    calibrate_app.command("dpsgd")(calibrate_dpsgd)
    calibrate_app.command("fedfdp")(calibrate_fedfdp)
