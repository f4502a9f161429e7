"""Adversarial pairs: the output laws of one concrete pair of neighbouring inputs.

The pair builders (:func:`gaussian_pair`, :func:`laplace_pair`, :func:`subsampled_gaussian_pair`,
:func:`participation_pair`, :func:`pair_for_event`) return an :class:`AdversarialPair` that labels
what each direction means (e.g. "remove the record" vs "add the record").

A pair marked ``worst_case`` dominates its mechanism (its delta(epsilon) *is* the
mechanism's); any other pair is one instance, whose delta(epsilon) is a lower bound.
:func:`audit_accountants` audits each accountant's claim on a :class:`PrivacyEvent`'s pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy import special, stats

from privfl._validation import check_choice, check_int, check_positive, check_range, check_rate
from privfl.accounting.audit.laws import (
    Law,
    MixtureLaw,
    ProductLaw,
    UnsupportedAuditError,
    compose,
    gaussian,
    laplace,
    make_mixture,
    mixture,
)
from privfl.accounting.audit.verdict import AuditReport, audit
from privfl.accounting.events import (
    Neighbouring,
    Noise,
    PrivacyEvent,
    Sampling,
    UnsupportedEventError,
)

_BINOMIAL_CUTOFF = 80.0  # participation: drop binomial terms e^-80 below the largest


@dataclass(frozen=True, eq=False)
class AdversarialPair:
    """Output laws ``P = M(D)`` and ``Q = M(D')`` of one concrete neighbouring pair.

    ``directions`` labels ``E(P || Q)`` and ``E(Q || P)``; ``worst_case`` says whether the pair is
    known to dominate the mechanism (then its delta(epsilon) *is* the mechanism's, and a passing
    audit is tight evidence), or is only one instance (a lower bound on the mechanism's delta).
    ``truncation`` is a bound on the total-variation change made when building the laws (e.g.
    dropped binomial terms); :meth:`audit` adds ``(1 + e^epsilon) truncation`` to the tolerance.
    """

    P: Law
    Q: Law
    name: str
    parameters: dict[str, Any]
    directions: tuple[str, str] = ("P||Q", "Q||P")
    worst_case: bool = False
    note: str = ""
    truncation: float = 0.0

    @property
    def description(self) -> str:
        params = ", ".join(
            f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in self.parameters.items()
        )
        return f"{self.name} ({params})"

    def compose(self, times: int) -> AdversarialPair:
        """The same pair over ``times`` independent steps (product laws)."""
        times = check_int("times", times, minimum=1)
        params = dict(self.parameters)
        params["steps"] = params.get("steps", 1) * times
        return AdversarialPair(
            compose(self.P, times),
            compose(self.Q, times),
            self.name,
            params,
            self.directions,
            self.worst_case,
            self.note,
            self.truncation * times,
        )

    def audit(self, epsilon: float, delta: float, **options: Any) -> AuditReport:
        """:func:`audit` of this pair (labels and parameters filled in)."""
        report = audit(
            self.P,
            self.Q,
            epsilon,
            delta,
            directions=self.directions,
            description=self.description,
            parameters=self.parameters,
            **options,
        )
        report = replace(report, worst_case=self.worst_case, note=self.note)
        if self.truncation > 0.0 and report.basis == "exact":
            extra = (1.0 + math.exp(min(report.epsilon, 700.0))) * self.truncation
            tolerance = report.tolerance + extra
            violated = report.delta - report.claimed_delta > tolerance  # type: ignore[operator]
            report = replace(
                report, tolerance=tolerance, violated=violated, error=report.error + extra
            )  # type: ignore[operator]
        return report


def gaussian_pair(sensitivity: float = 1.0, std: float = 1.0) -> AdversarialPair:
    """Gaussian mechanism: ``N(sensitivity, std^2)`` vs ``N(0, std^2)`` (worst case, mu = s/std).

    Every pair of inputs whose outputs' means differ by at most ``sensitivity`` (L2) is dominated
    by this pair, so its delta(epsilon) is the mechanism's (Balle & Wang 2018).
    """
    return _shift_pair(gaussian, "gaussian mechanism", sensitivity, "std", std)


def laplace_pair(sensitivity: float = 1.0, scale: float = 1.0) -> AdversarialPair:
    """Laplace mechanism in 1-D: ``Laplace(sensitivity, scale)`` vs ``Laplace(0, scale)``."""
    return _shift_pair(laplace, "laplace mechanism", sensitivity, "scale", scale)


def _shift_pair(
    law: Callable[[float, float], MixtureLaw],
    name: str,
    sensitivity: object,
    width_name: str,
    width: object,
) -> AdversarialPair:
    """Worst-case pair ``law(sensitivity, width)`` vs ``law(0, width)`` of a 1-D mechanism."""
    sensitivity = check_positive("sensitivity", sensitivity)
    width = check_positive(width_name, width)
    return AdversarialPair(
        law(sensitivity, width),
        law(0.0, width),
        name,
        {"sensitivity": sensitivity, width_name: width},
        ("P||Q", "Q||P"),
        worst_case=True,
    )


def subsampled_gaussian_pair(
    sampling_rate: float,
    noise_multiplier: float,
    *,
    neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
) -> AdversarialPair:
    """Worst-case pair of one Poisson-subsampled Gaussian step (units of the clip norm C).

    Add/remove: ``P = (1 - q) N(0, z^2) + q N(1, z^2)`` (with the record) vs ``Q = N(0, z^2)``
    (without); ``E(P || Q)`` is the "remove" direction and ``E(Q || P)`` the "add" direction of
    dp-accounting. Replace-one: ``(1 - q) N(0, z^2) + q N(1, z^2)`` vs
    ``(1 - q) N(0, z^2) + q N(-1, z^2)`` (the antipodal pair, see privfl.accounting.pld.accountant).
    Both are dominating pairs of the step (others' contributions are post-processing).
    """
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    value = neighbouring.value if isinstance(neighbouring, Neighbouring) else neighbouring
    relation = Neighbouring(check_choice("neighbouring", value, [n.value for n in Neighbouring]))
    base = gaussian(0.0, z)
    with_record = mixture([base, gaussian(1.0, z)], [1.0 - q, q]) if q < 1.0 else gaussian(1.0, z)
    params = {"sampling_rate": q, "noise_multiplier": z, "neighbouring": relation.value}
    if relation is Neighbouring.ADD_REMOVE:
        return AdversarialPair(
            with_record,
            base,
            "poisson-subsampled gaussian",
            params,
            ("remove the record: P||Q", "add the record: Q||P"),
            worst_case=True,
        )
    other = mixture([base, gaussian(-1.0, z)], [1.0 - q, q]) if q < 1.0 else gaussian(-1.0, z)
    return AdversarialPair(
        with_record,
        other,
        "poisson-subsampled gaussian",
        params,
        ("replace v by -v: P||Q", "replace -v by v: Q||P"),
        worst_case=True,
    )


def participation_pair(
    participation_rate: float,
    sampling_rate: float,
    local_size: int,
    std: float,
    *,
    clip_norm: float = 1.0,
    scale: float = 1.0,
) -> AdversarialPair:
    """Random participation (Hasircioglu and Gunduz 2022, Theorem 4.1): aligned gradients.

    The instance behind docs/accountants/random-participation.md, "Why Theorem 4.1 is only an
    estimate".

    Client 1 holds ``local_size`` = d records besides x'; it participates with probability
    ``participation_rate`` p, then keeps each record with probability ``sampling_rate`` q; the
    server adds N(0, std^2) to the sum of clipped gradients. In this instance x' has gradient
    ``clip_norm * e`` and client 1's other records ``scale * clip_norm * e`` (aligned), all other
    clients' gradients are 0. With ``b_i`` the Binomial(d, q) pmf and ``a = scale``:

        xi  = (1 - p) N(0, s^2) + p sum_i b_i [(1 - q) N(i a C, s^2) + q N((i a + 1) C, s^2)]
        xi' = (1 - p) N(0, s^2) + p sum_i b_i N(i a C, s^2)

    ``P = xi`` (with x'), ``Q = xi'``; ``E(P || Q)`` is "add x'". At ``scale = 1`` the exact
    E(xi || xi') equals the paper's Theorem 4.1 delta; at ``scale = 0`` it is centralized
    sampling at rate p q. It is one instance, so its delta(epsilon) is a *lower* bound on the
    scheme's. Binomial terms more than e^-80 below the largest are dropped (their mass is
    recorded in ``truncation``).
    """
    p = check_rate("participation_rate", participation_rate)
    q = check_rate("sampling_rate", sampling_rate)
    d = check_int("local_size", local_size, minimum=0)
    std = check_positive("std", std)
    c = check_positive("clip_norm", clip_norm)
    a = check_range("scale", scale, 0.0, 1.0)
    i = np.arange(d + 1)
    log_b = stats.binom.logpmf(i, d, q) if q < 1.0 else np.where(i == d, 0.0, -np.inf)
    keep = log_b >= np.max(log_b) - _BINOMIAL_CUTOFF
    dropped = float(np.exp(special.logsumexp(log_b[~keep]))) if np.any(~keep) else 0.0
    i, log_b = i[keep], log_b[keep] - special.logsumexp(log_b[keep])
    with np.errstate(divide="ignore"):
        log_p, log_1mp = math.log(p), math.log1p(-p) if p < 1.0 else -math.inf
        log_q, log_1mq = math.log(q), math.log1p(-q) if q < 1.0 else -math.inf
    means = i * a * c
    n = means.size
    kinds = np.zeros(2 * n + 1, dtype=np.int8)
    scales = np.full(2 * n + 1, std)
    with_x = make_mixture(
        kinds,
        np.concatenate([[0.0], means, means + c]),
        scales,
        np.concatenate([[log_1mp], log_p + log_1mq + log_b, log_p + log_q + log_b]),
    )
    without_x = make_mixture(
        kinds[: n + 1],
        np.concatenate([[0.0], means]),
        scales[: n + 1],
        np.concatenate([[log_1mp], log_p + log_b]),
    )
    params = {
        "participation_rate": p,
        "sampling_rate": q,
        "local_size": d,
        "std": std,
        "clip_norm": c,
        "scale": a,
    }
    return AdversarialPair(
        with_x,
        without_x,
        "random participation, aligned gradients",
        params,
        ("add x': xi||xi'", "remove x': xi'||xi"),
        worst_case=False,
        note="one configuration: a lower bound on the scheme's delta(epsilon)",
        truncation=p * dropped,
    )


def _step_laws(
    step_noise: Noise, z: float, q: float, sampling: Sampling, relation: Neighbouring
) -> tuple[MixtureLaw, MixtureLaw, bool]:
    make = gaussian if step_noise is Noise.GAUSSIAN else laplace
    base = make(0.0, z)
    if sampling is Sampling.NONE:
        shift = 2.0 if relation is Neighbouring.REPLACE_ONE else 1.0
        return make(shift, z), base, True
    up = mixture([base, make(1.0, z)], [1.0 - q, q])
    if relation is Neighbouring.ADD_REMOVE:
        if sampling is Sampling.WITHOUT_REPLACEMENT:
            raise UnsupportedAuditError(
                "sampling = 'without-replacement' with add/remove neighbours has no adversarial "
                "pair here (the batch composition changes with the dataset size)"
            )
        return up, base, step_noise is Noise.GAUSSIAN
    down = mixture([base, make(-1.0, z)], [1.0 - q, q])
    # Poisson replace-one: the antipodal pair dominates (Gaussian; privfl.accounting.pld).
    # For fixed-size batches it is the instance "others contribute 0", not necessarily the worst.
    worst = step_noise is Noise.GAUSSIAN and sampling is Sampling.POISSON
    return up, down, worst


def pair_for_event(event: PrivacyEvent) -> AdversarialPair:
    """The adversarial pair of a :class:`PrivacyEvent` in units of the clip norm (one record).

    Each group of steps contributes its 1-D pair (see :func:`subsampled_gaussian_pair`; Laplace
    steps use the same shapes with Laplace noise of scale z; unsampled steps the shift 1 or 2),
    repeated ``count`` times; the event's pair is their product. ``worst_case`` is True when
    every step's pair is a known dominating pair (Gaussian, no sampling or Poisson).
    """
    if not isinstance(event, PrivacyEvent):
        raise ValueError(f"event = {event!r} is not a PrivacyEvent")
    p_factors: list[tuple[MixtureLaw, int]] = []
    q_factors: list[tuple[MixtureLaw, int]] = []
    worst = True
    for step, count in event.steps:
        if count == 0:
            continue
        up, down, step_worst = _step_laws(
            step.noise,
            step.noise_multiplier,
            step.sampling_rate,
            step.effective_sampling,
            event.neighbouring,
        )
        worst = worst and step_worst
        p_factors.append((up, count))
        q_factors.append((down, count))
    if not p_factors:
        raise UnsupportedEventError("event = an event with no steps releases nothing to audit")
    if len(p_factors) == 1 and p_factors[0][1] == 1:
        P: Law = p_factors[0][0]
        Q: Law = q_factors[0][0]
    else:
        P, Q = ProductLaw(tuple(p_factors)), ProductLaw(tuple(q_factors))
    directions = (
        ("remove the record: P||Q", "add the record: Q||P")
        if event.neighbouring is Neighbouring.ADD_REMOVE
        else ("replace: P||Q", "replace back: Q||P")
    )
    params = {
        "steps": event.total_steps,
        "neighbouring": event.neighbouring.value,
        "sampling": event.sampling_label,
    }
    return AdversarialPair(P, Q, "privacy event", params, directions, worst_case=worst)


def audit_accountants(
    event: PrivacyEvent,
    delta: float,
    *,
    methods: str | Sequence[str] = ("rdp", "pld"),
    monte_carlo_samples: int | None = None,
    seed: int | None = 0,
    confidence: float = 0.99,
    interval: str = "bernstein",
) -> dict[str, AuditReport]:
    """Ask each accountant for epsilon at ``delta`` and audit that claim on the event's pair.

    Returns ``{method: AuditReport}``. Compositions that have no exact divergence need
    ``monte_carlo_samples``. A violation of a method labelled ``bound`` is a bug in it.
    """
    from privfl.accounting.methods import account

    delta = check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    pair = pair_for_event(event)
    report = account(event, delta=delta, methods=methods)
    audits: dict[str, AuditReport] = {}
    for result in report.results:
        audits[result.method] = pair.audit(
            result.epsilon,
            delta,
            monte_carlo_samples=monte_carlo_samples,
            seed=seed,
            confidence=confidence,
            interval=interval,
        )
    return audits
