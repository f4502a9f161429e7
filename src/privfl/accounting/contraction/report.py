"""The labelled last-iterate report of a run, Corollary 1's run, and the all-iterates baseline.

:func:`run_report` turns a :class:`~privfl.accounting.contraction.run.ProjectedNoisySGD` into
:class:`~privfl.accounting.results.PrivacyResult` rows: the contraction bounds of Asoodeh et al.
(2021) (plain and sharpened), then the composition accountants on the same run with every iterate
released (:func:`all_iterates_event`). :func:`corollary1` builds the paper's Corollary 1 run
(eta_t = 1/(lambda t)); :func:`corollary1_utility_bound` is its utility bound (Rakhlin, Shamir
and Sridharan 2012).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from privfl._validation import (
    check_choice,
    check_delta,
    check_int,
    check_nonnegative,
    check_positive,
)
from privfl.accounting.contraction.run import ProjectedNoisySGD
from privfl.accounting.events import (
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    Unit,
)
from privfl.accounting.methods import (
    AccountingOptions,
    account,
    build_accountant,
    resolve_methods,
)
from privfl.accounting.results import PrivacyResult, sampling_label

BASELINES = ("one-pass", "independent-rounds")

_RELEASE_LABEL = {
    "last": "last iterate only",
    "random-stop": "randomly stopped iterate only (W_tau, tau ~ Uniform{1..T}, secret)",
}


def corollary1(
    users: int,
    batch_size: int,
    lipschitz: float,
    radius: float,
    strong_convexity: float,
    noise: float,
    *,
    convex: bool = False,
    smooth: float | None = None,
) -> ProjectedNoisySGD:
    """Corollary 1's run: eta_t = 1/(lambda t), constant sigma, T = n/m.

    Its ``delta`` is the corrected exact sum
    ``(1/T) sum_t theta(2L/(sqrt(m) sigma)) prod_{j>t} theta(2 rho lambda j sqrt(m)/sigma)``
    (the paper prints sqrt(lambda m j); docs/accountants/last-iterate.md, "Where privfl departs
    from the paper, and why", item 2) and its
    ``uniform_bound_delta`` is bound (11). With ``convex=True`` the step-size condition
    eta_1 = 1/lambda <= 2/beta must hold (beta <= 2 lambda); otherwise it is refused, and
    ``convex=False`` gives the relaxed diameter 2 (rho + eta_j L).
    """
    lam = check_positive("strong_convexity", strong_convexity)
    if convex and smooth is not None and check_nonnegative("smooth", smooth) < lam:
        raise ValueError(
            f"strong_convexity = {lam!r} is out of range: must be <= smooth = {smooth!r} (a "
            "lambda-strongly convex, beta-smooth function has lambda <= beta)"
        )
    n = check_int("users", users, minimum=1)
    m = check_int("batch_size", batch_size, minimum=1)
    rounds = max(n // m, 1)
    lr = [1.0 / (lam * t) for t in range(1, rounds + 1)]
    return ProjectedNoisySGD(n, m, lipschitz, radius, lr, noise, convex=convex, smooth=smooth)


def corollary1_utility_bound(
    smooth: float,
    strong_convexity: float,
    rounds: int,
    batch_size: int,
    grad_bound: float,
    grad_variance: float,
    noise: float,
    dim: int = 1,
) -> float:
    """Corollary 1's utility bound: ``E[F(W_T)] - min F <= 2 beta (D^2 + (G^2 + d sigma^2)/m)
    / (lambda^2 T)``.

    Rakhlin, Shamir and Sridharan (2012, Theorem 1) applied by Asoodeh et al. (2021) to
    Algorithm 1 with ``eta_t = 1/(lambda t)``: users i.i.d. from the distribution of F, so every
    round's averaged noisy gradient is unbiased with second moment ``<= D^2 + (G^2 + d
    sigma^2)/m``. ``smooth`` (beta) and ``strong_convexity`` (lambda) are those of F, which must
    be beta-smooth with respect to its minimiser over the ball (true when the minimiser is
    inside the ball); ``grad_bound`` D >= sup ‖grad F‖ and ``grad_variance`` G^2 >= the
    variance of one user's gradient, both over ball(rho); ``noise`` is the paper's per-user
    sigma. The paper prints sigma^2 where isotropic noise in R^d has second moment d sigma^2
    (docs/experiments/asoodeh2021.md, "3. Corollary 1: the optimality gap against its bound"):
    ``dim=1`` gives the printed bound, ``dim=d`` the correct one.
    """
    beta = check_positive("smooth", smooth)
    lam = check_positive("strong_convexity", strong_convexity)
    rounds = check_int("rounds", rounds, minimum=1)
    m = check_int("batch_size", batch_size, minimum=1)
    d_sq = check_nonnegative("grad_bound", grad_bound) ** 2
    g_sq = check_nonnegative("grad_variance", grad_variance)
    noise = check_nonnegative("noise", noise)
    dim = check_int("dim", dim, minimum=1)
    return 2.0 * beta * (d_sq + (g_sq + dim * noise**2) / m) / (lam**2 * rounds)


def _group(values: np.ndarray) -> list[tuple[float, int]]:
    groups: list[tuple[float, int]] = []
    for value in values.tolist():
        if groups and groups[-1][0] == value:
            groups[-1] = (value, groups[-1][1] + 1)
        else:
            groups.append((value, 1))
    return groups


def all_iterates_event(
    run: ProjectedNoisySGD, schedule: str = "one-pass", *, unit: Unit | str = Unit.RECORD
) -> PrivacyEvent:
    """The same run with every iterate W_1..W_T released, for composition accountants.

    ``schedule="one-pass"`` (valid for Algorithm 1): each user's record enters exactly one round,
    so by parallel composition the whole transcript is one unsampled Gaussian step with noise
    multiplier z = min_t sigma_t sqrt(m) / L under replace-one neighbours (sensitivity 2L of the
    sum; (2/z)-GDP = theta(r1)), whatever the assignment. ``schedule="independent-rounds"``: T
    rounds, each a fresh uniform size-m subset without replacement (q = m/n), replace-one: what a
    practitioner running standard sampling would account. It is **not** the paper's one-pass
    partition, and composition accountants are not proven valid for the partition
    (docs/accountants/last-iterate.md, "Next to it: the all-iterates numbers"); for a run with
    ``run.schedule == "independent"`` it is exactly what ran (then the only baseline allowed).
    ``unit`` labels the event (``"client"`` when a user holds a whole local dataset, as in
    :mod:`privfl.algorithms.projected_sgd`).
    """
    if not isinstance(run, ProjectedNoisySGD):
        raise ValueError(f"run = {run!r} is not a ProjectedNoisySGD")
    schedule = check_choice("schedule", schedule, BASELINES)
    unit = Unit(unit)
    z = run.noise_multipliers
    if run.schedule == "independent" and schedule == "one-pass":
        raise ValueError(
            "schedule = 'one-pass' is not allowed for a run with schedule = 'independent': its "
            "users take part in several rounds; use 'independent-rounds'"
        )
    if math.isinf(run.rounds):
        raise ValueError(
            "rounds = inf: releasing infinitely many iterates has no finite composition bound"
        )
    if schedule == "one-pass":
        step = NoisyStep(float(np.min(z)), 1.0, Sampling.NONE)
        return PrivacyEvent(
            ((step, 1),),
            neighbouring=Neighbouring.REPLACE_ONE,
            unit=unit,
            release="all iterates",
            description=(
                f"one pass over a random partition of {run.users} users into {run.rounds} "
                f"rounds of {run.batch_size}: each record enters one Gaussian step "
                "(parallel composition)"
            ),
        )
    q = run.sampling_rate
    groups = _group(z) if z.size > 1 else [(float(z[0]), int(run.rounds))]
    steps = tuple(
        (NoisyStep(value, q, Sampling.WITHOUT_REPLACEMENT), count) for value, count in groups
    )
    which = ("the run's own schedule" if run.schedule == "independent"
             else "not Algorithm 1's one-pass partition")
    return PrivacyEvent(
        steps,
        neighbouring=Neighbouring.REPLACE_ONE,
        unit=unit,
        release="all iterates",
        description=(
            f"{run.rounds} rounds, each a fresh uniform subset of {run.batch_size} of "
            f"{run.users} users ({which})"
        ),
    )


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------

_THREAT_MODEL = (
    "valid against an observer of the released model only (clients that receive intermediate "
    "models are not covered); needs a uniformly random user-to-round partition kept secret, "
    "honest isotropic Gaussian noise added before the projection onto ball(rho), and every "
    "update's gradient norm <= L"
)


def last_iterate_report(
    users: int,
    batch_size: int,
    lipschitz: float,
    radius: float | None,
    lr: float | Sequence[float],
    noise: float | Sequence[float],
    delta: float,
    *,
    convex: bool = False,
    smooth: float | None = None,
    release: str = "last",
    secret_assignment: bool = True,
    methods: str | Iterable[str] = ("rdp", "pld"),
    baselines: Iterable[str] | None = None,
    options: AccountingOptions | None = None,
    schedule: str = "one-pass",
    rounds: int | float | None = None,
) -> list[PrivacyResult]:
    """Epsilon at ``delta`` of projected noisy SGD when only the last model is released.

    Builds the :class:`ProjectedNoisySGD` run from the arguments and returns
    :func:`run_report` of it (``baselines`` default: ``("one-pass",)`` for the one-pass
    schedule, ``("independent-rounds",)`` for ``schedule="independent"``).
    """
    run = ProjectedNoisySGD(
        users, batch_size, lipschitz, radius, lr, noise, convex=convex, smooth=smooth,
        rounds=rounds, schedule=schedule,
    )
    return run_report(
        run, delta, release=release, secret_assignment=secret_assignment, methods=methods,
        baselines=baselines, options=options,
    )


@lru_cache(maxsize=64)
def _account(
    event: PrivacyEvent, delta: float, methods: tuple[str, ...], options: AccountingOptions | None
) -> Any:
    """:func:`account` of an all-iterates event, cached: a one-pass run's event is the same
    single Gaussian step whatever the number of rounds, and a training run asks every round."""
    return account(event, delta=delta, methods=methods, options=options)


def _sampling_text(run: ProjectedNoisySGD, secret: bool) -> str:
    who = "secret" if secret else "public"
    if run.schedule == "one-pass":
        part = "" if run.rounds == run.partition_rounds else (
            f" of {run.partition_rounds} batches (the users of the rest never take part)")
        return (f"one-pass random partition (m={run.batch_size} of n={run.users} per round, "
                f"T={run.rounds}{part}, {who} assignment)")
    return (f"independent uniform subsets without replacement (m={run.batch_size} of "
            f"n={run.users} per round, q={run.sampling_rate:.6g}, T={run.rounds}, {who} batches)")


def run_report(
    run: ProjectedNoisySGD,
    delta: float,
    *,
    release: str = "last",
    secret_assignment: bool = True,
    methods: str | Iterable[str] = ("rdp", "pld"),
    baselines: Iterable[str] | None = None,
    options: AccountingOptions | None = None,
    unit: Unit | str = Unit.RECORD,
) -> list[PrivacyResult]:
    """The labelled last-iterate guarantees of ``run``, then the all-iterates comparison.

    Returns, in order: ``contraction`` (Theorem 2, Corollary 3 for ``release="random-stop"``, or
    the multi-round extension for ``run.schedule == "independent"``), ``contraction-sharpened``
    (the sharpened chain rule), then for each baseline in ``baselines`` the composition accountants
    ``methods`` on the same run with all iterates released (:func:`all_iterates_event`). The
    contraction results are bounds (the proofs of Theorem 2, Corollary 3, the sharpened rule and the
    multi-round extension of docs/accountants/last-iterate.md hold under the checked assumptions)
    labelled with ``unit``, neighbouring "replace-one" and the run's sampling. Baselines for
    ``"independent-rounds"`` of a one-pass run are returned with kind "estimate": they assume a
    sampling scheme that differs from the run's; for an independent run they are what ran (kind as
    the accountant says). A run with ``rounds = inf`` has no all-iterates baseline. ``methods`` may
    be empty.
    """
    if not isinstance(run, ProjectedNoisySGD):
        raise ValueError(f"run = {run!r} is not a ProjectedNoisySGD")
    delta = check_delta("delta", delta)
    unit = Unit(unit)
    _, release, secret_assignment = ProjectedNoisySGD._options(False, release, secret_assignment)
    independent = run.schedule == "independent"
    if independent and release != "last":
        raise ValueError(
            f"release = {release!r} is not allowed with schedule = 'independent': random "
            "stopping (Corollary 3) is defined for the one-pass partition only"
        )
    method_names = () if not methods else resolve_methods(methods)
    if baselines is None:
        baselines = ("independent-rounds",) if independent else ("one-pass",)
    baseline_names = [check_choice("baselines", b, BASELINES) for b in baselines]
    if independent and "one-pass" in baseline_names:
        raise ValueError(
            "baselines = 'one-pass' is not allowed with schedule = 'independent': users take "
            "part in several rounds; use 'independent-rounds'"
        )
    T = run.rounds
    sampling = _sampling_text(run, secret_assignment)
    if independent:
        theorem = ("multi-round extension of Theorem 2 (independent rounds; derived by privfl, "
                   "docs/accountants/last-iterate.md; not in Asoodeh et al. 2021)")
    else:
        theorem = "Theorem 2" if release == "last" else "Corollary 3 (random stopping)"
    reference: dict[str, Any] = {}
    if not independent:
        reference["one_shot_epsilon"] = run.one_shot_epsilon(delta)
    elif run.is_constant:
        reference["saturation_epsilon"] = run.saturation_epsilon(delta)
    threat = _THREAT_MODEL if not independent else _THREAT_MODEL.replace(
        "user-to-round partition", "choice of every round's users")
    results: list[PrivacyResult] = []
    for method, sharpened in (("contraction", False), ("contraction-sharpened", True)):
        eps = run.epsilon(
            delta, sharpened=sharpened, release=release, secret_assignment=secret_assignment
        )
        diag = run.diagnostics(
            eps if math.isfinite(eps) else 0.0,
            sharpened=sharpened,
            release=release,
            secret_assignment=secret_assignment,
        )
        rule = "sharpened chain rule (docs/accountants/last-iterate.md) applied to " if (
            sharpened) else ""
        source = "" if independent else " of Asoodeh et al. (ISIT 2021)"
        note = f"{rule}{theorem}{source}; {threat}"
        if not secret_assignment:
            note += ("; public assignment: worst user position (max_t delta_t)" if not independent
                     else "; public batches: worst inclusion pattern (user in the last round)")
        if diag["contraction_coefficient"] > 0.999:
            note += (
                f"; contraction coefficient theta(rc) = {diag['contraction_coefficient']:.6g} > "
                "0.999: hidden-state accounting gives < 0.1% over the all-iterates bound "
                "(shrink the radius relative to lr*noise/sqrt(batch_size) for a gain)"
            )
        extras = {**diag, "theorem": theorem, "sharpened": sharpened, **reference}
        if sharpened and "saturation_epsilon" in reference:
            extras["saturation_epsilon"] = run.saturation_epsilon(delta, sharpened=True)
        results.append(
            PrivacyResult(
                method=method,
                kind="bound",
                epsilon=eps,
                delta=delta,
                unit=unit.value,
                neighbouring=Neighbouring.REPLACE_ONE.value,
                sampling=sampling,
                release=_RELEASE_LABEL[release],
                steps=T,
                extras=extras,
                note=note,
            )
        )
    if not method_names or math.isinf(T):
        return results
    for baseline in baseline_names:
        event = all_iterates_event(run, baseline, unit=unit)
        if baseline == "one-pass":
            report = _account(event, delta, method_names, options)
            label = "one-pass random partition, each user in exactly one round"
            note = (
                "all iterates released; each record enters one round, so the transcript is one "
                "Gaussian step with sensitivity 2L/m (parallel composition)"
            )
            kind = None
        else:
            # methods that cannot account sampling without replacement are left out
            supported = tuple(
                name
                for name in method_names
                if build_accountant(name, options).unsupported_reason(event) is None
            )
            if not supported:
                continue
            report = _account(event, delta, supported, options)
            label = sampling_label(event)
            if independent:
                note = ("all iterates released; the run's own independent rounds (fixed-size "
                        "sampling without replacement, replace-one)")
                kind = None
            else:
                note = (
                    "all iterates released, assuming independent per-round sampling without "
                    "replacement; Algorithm 1 uses a one-pass partition, for which this "
                    "composition is not a proven bound (shuffled batches can be less private)"
                )
                kind = "estimate"
        for result in report.results:
            if result.method not in method_names:
                continue
            results.append(
                replace(
                    result,
                    kind=kind or result.kind,
                    sampling=label,
                    extras={**result.extras, "baseline": baseline, "rounds": T},
                    note="; ".join(part for part in (result.note, note) if part),
                )
            )
    return results
