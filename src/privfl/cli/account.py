"""`privfl account dpsgd | fedfdp | last-iterate | participation`: the privacy of what ran.

Each command builds the event of its setting and prints the accountants' results (text, or one
``--json`` object) with the setting they hold for; the options shared with ``privfl calibrate``
are in :mod:`privfl.cli.accounting_options`. :func:`register` adds the commands to the
``account`` group (``dp-ftrl`` and ``bandmf`` come from :mod:`privfl.cli.correlated`).
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from privfl._validation import check_int, check_positive
from privfl.accounting.events import (
    AccountingLimitError,
    Neighbouring,
    Sampling,
    Unit,
    dpsgd_event,
    noise_multiplier_from_paper_sigma,
)
from privfl.accounting.methods import ALIASES, account
from privfl.accounting.registry import registered
from privfl.cli import accounting_options as opt
from privfl.cli.common import JsonOpt, TargetDeltaOpt, user_errors
from privfl.cli.noise import one_noise

#: the step accountants of privfl.accounting.registry, their aliases and "all"
MethodChoice = opt.choices("MethodChoice", *registered(nodes=False), *ALIASES, "all")


@user_errors
def account_dpsgd(
    sampling_rate: Annotated[float, typer.Option(help="q: sampling rate per step.")],
    noise_multiplier: Annotated[float, typer.Option(help=opt.Z_HELP)],
    steps: Annotated[int, typer.Option(help="T: number of noisy steps, all released.")],
    delta: TargetDeltaOpt,
    method: Annotated[MethodChoice, typer.Option(help="Accountant(s) to use.")] = MethodChoice.all,
    orders: opt.OrdersOpt = "default",
    conversion: opt.ConversionOpt = opt.Conversion.improved,
    neighbouring: opt.NeighbouringOpt = Neighbouring.ADD_REMOVE,
    sampling: opt.SamplingOpt = Sampling.POISSON,
    discretization: opt.DiscretizationOpt = 1e-4,
    unit: opt.UnitOpt = Unit.RECORD,
    fdp_curve: opt.FdpCurveOpt = None,
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
    options = opt.accountant_options(orders, conversion, discretization)
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
    opt.emit(as_json, "account dpsgd", setting, report.results, unsupported=report.unsupported)
    opt.write_fdp_curves(fdp_curve, "account dpsgd", setting, event, delta,
                         [r.method for r in report.results], options)


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


@user_errors
def account_fedfdp(
    records: opt.RecordsPerClientOpt,
    batch_size: opt.BatchSizeOpt,
    local_steps: opt.LocalStepsOpt,
    rounds: opt.RoundsOpt,
    clients: Annotated[int, typer.Option(help="m: number of clients.")],
    delta: TargetDeltaOpt,
    noise_multiplier: Annotated[
        float | None, typer.Option(help=f"{opt.Z_HELP} Or --paper-sigma.")
    ] = None,
    paper_sigma: Annotated[
        float | None,
        typer.Option(help=f"Instead of --noise-multiplier: {ZHENG_SIGMA} (so z = 2 sigma)."),
    ] = None,
    deprecated_sigma: Annotated[  # deprecated: --paper-sigma
        float | None, typer.Option("--sigma", hidden=True)
    ] = None,
    client_rate: Annotated[
        float, typer.Option(help="p: client sampling rate (does not enter Theorem 2).")
    ] = 1.0,
    method: Annotated[MethodChoice, typer.Option(
        help="Accountant(s) to use (all: PriFedSync's default ones).")] = MethodChoice.all,
    multiplicity: Annotated[int, typer.Option(
        help="k: the most clients holding one record (1: every record belongs to one client, "
        "Theorem 2's assumption; an overlapping partition: a record's k holders compose).",
    )] = 1,
    orders: opt.OrdersOpt = "default",
    conversion: opt.ConversionOpt = opt.Conversion.improved,
    discretization: opt.DiscretizationOpt = 1e-4,
    fdp_curve: opt.FdpCurveOpt = None,
    as_json: JsonOpt = False,
) -> None:
    from privfl.accounting.fdp.federated import FederatedSetting, federated_fdp, setting_event
    from privfl.config.algorithms.prifedsync import PriFedSyncConfig

    noise = one_noise(noise_multiplier, paper_sigma, paper_meaning=ZHENG_SIGMA,
                      deprecated=("--sigma", deprecated_sigma))
    z, paper = noise.convert(noise.value, noise_multiplier_from_paper_sigma, lambda z: z / 2.0)
    setting = FederatedSetting.homogeneous(
        clients=clients,
        records=records,
        batch_size=batch_size,
        local_steps=local_steps,
        noise_multiplier=z,
        rounds=rounds,
        client_rate=client_rate,
        multiplicity=multiplicity,
    )
    all_methods = PriFedSyncConfig.DEFAULT_ACCOUNTANTS
    methods = all_methods if method is MethodChoice.all else (method.value,)
    results, refused = [], {}
    options = opt.accountant_options(orders, conversion, discretization)
    for name in methods:
        try:
            results += federated_fdp(setting, delta, methods=(name,), options=options)
        except AccountingLimitError as error:  # --method all: report the others, say why not
            if method is not MethodChoice.all:
                raise
            refused[name] = str(error)
    if not results:
        raise AccountingLimitError("; ".join(f"{m}: {r}" for m, r in refused.items()))
    card = {
        "unit": "record",
        "neighbouring": "replace-one",
        "sampling": f"without-replacement (B/n = {batch_size}/{records}), clients Poisson "
        f"(p = {client_rate:g}, not used by the bound)",
        "noise": f"noise multiplier {z:g} (Zheng et al. 2021's sigma {paper:g})",
        "noise_multiplier": z,
        "paper_sigma": paper,
        "steps": f"K*R = {local_steps}*{rounds} = {local_steps * rounds}",
        "clients": clients,
        "record multiplicity": multiplicity,
        "release": "helper models sent to clients (weak: one client; strong: all colluding)",
        "delta": delta,
    }
    opt.emit(as_json, "account fedfdp", card, results, unsupported=refused)
    opt.write_fdp_curves(fdp_curve, "account fedfdp", card, setting_event(setting), delta,
                         sorted({r.method for r in results}), options)


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
    """``(z, paper sigma)`` of `account last-iterate`, each a number or a per-round list."""
    noise = one_noise(multiplier, paper, paper_meaning=ASOODEH_SIGMA,
                      deprecated=("--noise", deprecated))
    root = math.sqrt(check_int("batch_size", m, 1))  # the conversion needs m and L: check them
    lipschitz = check_positive("lipschitz", lipschitz)
    values = _float_list(noise.option, noise.value)
    pairs = [
        noise.convert(v, lambda s: s * root / lipschitz, lambda z: z * lipschitz / root)
        for v in (values if isinstance(values, list) else [values])
    ]
    z, paper = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    return (z, paper) if isinstance(values, list) else (z[0], paper[0])


Release = opt.choices("Release", "last", "random-stop")
Baseline = opt.choices("Baseline", "one-pass", "independent-rounds")
CompositionMethod = opt.choices("CompositionMethod", "rdp", "pld", "all", "none")
Schedule = opt.choices("Schedule", "one-pass", "independent")


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
    z, paper = _last_iterate_noise(noise_multiplier, paper_sigma, noise, batch_size, lipschitz)
    run = ProjectedNoisySGD(users, batch_size, lipschitz, radius, _float_list("lr", lr), paper,
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
        "noise": f"noise multiplier {_show(z)} (Asoodeh et al. 2021's sigma {_show(paper)})",
        "noise_multiplier": z,
        "paper_sigma": paper,
        "release": f"{release.value} model only (contraction); all iterates (rdp, pld)",
        "assumptions": "convex, smooth" if convex else "none (relaxed diameter 2(rho + eta L))",
        "delta": delta,
    }
    opt.emit(as_json, "account last-iterate", card, results)



#: what Hasircioglu and Gunduz 2022's sigma is, for --help and error messages
HASIRCIOGLU_SIGMA = (
    "Hasircioglu and Gunduz 2022's sigma, the noise std on the sum itself (untrusted server: "
    "each client's own noise std), so z = sigma / C"
)



@user_errors
def account_participation(
    client_rate: opt.ClientRateOpt,
    record_rate: opt.RecordRateOpt,
    records: opt.RecordsOpt,
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
    clip_norm: opt.ClipOpt = 1.0,
    epsilon: Annotated[float | None, typer.Option(help="Give delta at this epsilon.")] = None,
    delta: Annotated[float | None, typer.Option(help="Give epsilon at this delta.")] = None,
    iterations: Annotated[
        int, typer.Option(help="T: iterations; T > 1 adds composed rdp/pld bounds.")
    ] = 1,
    server: opt.ServerOpt = opt.Server.trusted,
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
    clip_norm = check_positive("clip", clip_norm)  # the conversion needs C
    z, noise_std = choice.convert(choice.value, lambda s: s / clip_norm, lambda z: z * clip_norm)
    # epsilon at delta or delta at epsilon (a clear error for both / neither): the run's path
    results = evaluate(RandomParticipationStep(client_rate, record_rate, records, noise_std,
                                               clip_norm=clip_norm, iterations=iterations,
                                               server=server.value), delta, epsilon=epsilon)
    card = opt.participation_card(
        client_rate,
        record_rate,
        records,
        server,
        noise=f"noise multiplier {z:g} (sigma = {noise_std:g} on the sum, clip C = {clip_norm:g})",
        noise_multiplier=z,
        paper_sigma=noise_std,
        iterations=iterations,
        query=f"delta at epsilon = {epsilon:g}" if epsilon is not None else f"epsilon at "
        f"delta = {delta:g}",
    )
    opt.emit(as_json, "account participation", card, results)



def register(account_app: typer.Typer) -> None:
    """Add ``dpsgd``, ``fedfdp``, ``last-iterate`` and ``participation`` to the ``account``
    command group, in this order (``--help`` lists them so)."""
    account_app.command("dpsgd")(account_dpsgd)
    account_app.command("fedfdp", help=FEDFDP_HELP)(account_fedfdp)
    account_app.command("last-iterate")(account_last_iterate)
    account_app.command("participation")(account_participation)
