"""Certified prediction against poisoning from differential privacy (Xie et al. 2023).

Setting. A training mechanism M is (epsilon, delta)-DP at one *unit* of privacy: a user (the
whole data of one client; user-level DP-FedAvg) or an instance (one record; instance-level
DP-FedSGD/FedAvg). The (epsilon, delta) is that of the *whole training* of one model (every
round composed). The model's scores ``f(theta, x)`` lie in the probability simplex (softmax
outputs or one-hot votes) and ``F_c(D, x) = E[f_c(M(D), x)]`` is their expectation over the
training randomness. The prediction is ``H(D, x) = argmax_c F_c(D, x)``, with top class A and
runner-up B.

Group privacy (Xie et al. 2023, Definition 2): an (epsilon, delta)-DP mechanism is
``(k epsilon, delta_k)``-DP for datasets k units apart, ``delta_k = delta (e^{k eps} - 1) /
(e^eps - 1)`` (:func:`group_delta`).

Certified prediction (Xie et al. 2023, Theorem 2 for k = 1, Theorem 3 for k users, Theorem 4
for k instances): ``H(D', x) = A`` for every D' at most k units from D whenever k < K, with

    K = 1/(2 eps) * ln[ (F_A (e^eps - 1) + delta) / (F_B (e^eps - 1) + delta) ]     (Eq. 6)

(:func:`certified_k`). It follows from ``E[g(M(D))] <= e^eps E[g(M(D'))] + delta`` for any
[0, 1]-valued g, applied at (k eps, delta_k) to ``f_A`` and ``f_B``. K is real-valued; with
F_A <= 1 and F_B >= 0 it never exceeds ``K_max = ln(1 + (e^eps - 1)/delta) / (2 eps)``
(:func:`k_max`). Pure DP (delta = 0): ``K = ln(F_A / F_B) / (2 eps)``.

What "k units apart" means: k steps of the neighbouring relation of the (epsilon, delta).
Every certificate names its *adversary* (:data:`ADVERSARIES`): ``add-remove`` (each adversary
adds or removes one unit: Xie et al. 2023's reading of k) or ``replace`` (each adversary
replaces the data of one existing unit, as privfl's simulated attacks do). Under add/remove-one
neighbours a replacement is 2 steps, under replace-one 1 (:func:`steps_per_adversary`); K in
adversaries is K in steps divided by the steps per adversary. An add/remove adversary is not
covered by a replace-one guarantee (it changes the number of units).

The certificate holds however (epsilon, delta) was obtained (any noise, clipping, sampling or
accountant), provided it is a valid DP guarantee of what ran. It is rigorous when F_A is the
true expectation or a lower bound of it and F_B the true runner-up expectation or an upper
bound; Monte Carlo estimates of them are calibrated in :mod:`privfl.robustness.calibration`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from privfl._validation import (
    as_scalar_or_array,
    check_choice,
    check_int,
    check_positive,
    check_range,
    check_range_array,
)
from privfl.accounting.logspace import log_expm1

__all__ = [
    "ADVERSARIES",
    "NEIGHBOURINGS",
    "UNITS",
    "CertificationPrivacy",
    "PredictionCertificate",
    "certification_privacy",
    "certified_k",
    "certified_k_from_bounds",
    "certify_prediction",
    "check_budget",
    "group_delta",
    "k_max",
    "max_attackers",
    "adversary_text",
    "steps_per_adversary",
    "theorem",
    "theorem2_holds",
]

#: Units of privacy a certificate counts: adversarial users or poisoned instances (records).
UNITS = ("user", "instance")
#: What one adversary does: add or remove one unit (Xie et al. 2023's reading), or replace the
#: data of one existing unit (privfl's simulated attacks).
ADVERSARIES = ("add-remove", "replace")
#: Neighbouring relations of the (epsilon, delta) a certificate uses.
NEIGHBOURINGS = ("add-remove", "replace-one")


def steps_per_adversary(adversary: str, neighbouring: str) -> int:
    """Neighbouring steps (the group size) per adversary: 2 for a replacement under add/remove
    neighbours, 1 otherwise. An add/remove adversary under replace-one neighbours is refused (a
    replace-one guarantee does not cover a change of the number of units)."""
    adversary = check_choice("adversary", adversary, ADVERSARIES)
    neighbouring = check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
    if neighbouring == "replace-one":
        if adversary == "add-remove":
            raise ValueError("adversary = 'add-remove' is not allowed with neighbouring = "
                             "'replace-one': a replace-one guarantee does not cover adding or "
                             "removing a unit; use adversary = 'replace'")
        return 1
    return 2 if adversary == "replace" else 1


def adversary_text(adversary: str, neighbouring: str, unit: str = "user") -> str:
    """One sentence: what k counts under this adversary and neighbouring relation."""
    steps = steps_per_adversary(adversary, neighbouring)
    unit = check_choice("unit", unit, UNITS)
    what = "user" if unit == "user" else "record"
    if adversary == "add-remove":
        return (f"adversary add-remove (Xie et al. 2023's reading of k): each adversary adds or "
                f"removes one {what}, 1 {neighbouring} step; it does not certify attackers who "
                f"replace existing {what}s' data (privfl's simulated attacks)")
    return (f"adversary replace: each adversary replaces the data of one existing {what}, "
            f"{steps} {neighbouring} step{'s' if steps > 1 else ''} (k adversaries are "
            f"{'k' if steps == 1 else f'{steps}k'} steps apart)")



def theorem(unit: str, *, inefficacy: bool = False) -> str:
    """The result of Xie et al. 2023 a certificate at this ``unit`` applies."""
    unit = check_choice("unit", unit, UNITS)
    what = "Theorem 6 (certified attack inefficacy)" if inefficacy else "Theorem 3 (Eq. 6)"
    if unit == "user":
        return f"Xie et al. 2023, {what}: user-level (epsilon, delta)-DP, k adversarial users"
    return (
        f"Xie et al. 2023, Theorem 4 ({what} at instance level): instance-level "
        "(epsilon, delta)-DP, k poisoned records"
    )


def check_budget(epsilon: object, delta: object) -> tuple[float, float]:
    """A per-model guarantee: ``epsilon`` in (0, inf), ``delta`` in [0, 1) (0 is pure DP)."""
    return check_positive("epsilon", epsilon), check_range("delta", delta, 0.0, 1.0,
                                                           high_open=True)


def _k_array(k: object) -> tuple[np.ndarray, bool]:
    return check_range_array("k", k, 0.0, math.inf, high_open=True)


def group_delta(epsilon: float, delta: float, k: object) -> float | np.ndarray:
    """delta_k = delta * (e^{k eps} - 1) / (e^eps - 1) = delta * sum_{j<k} e^{j eps}.

    Group privacy (Xie et al. 2023, Definition 2): an (eps, delta)-DP mechanism is
    (k eps, delta_k)-DP for datasets k units apart. Exact for integer k >= 0 (0 at k = 0, delta at
    k = 1); a real k evaluates the same formula. Values above 1 are vacuous; ``inf`` when
    ``e^{k eps}`` overflows. Pure DP (delta = 0): 0.
    """
    epsilon, delta = check_budget(epsilon, delta)
    ks, scalar = _k_array(k)
    if delta == 0.0:
        return as_scalar_or_array(np.zeros_like(ks), scalar)
    with np.errstate(over="ignore"):
        log_ratio = np.where(ks > 0, log_expm1(ks * epsilon), -np.inf) - log_expm1(epsilon)
        value = delta * np.exp(log_ratio)
    return as_scalar_or_array(value, scalar)


def expm1(x: float) -> float:
    """e^x - 1, ``inf`` instead of an OverflowError beyond x = 709.78."""
    if x < 709.0:
        return math.expm1(x)
    with np.errstate(over="ignore"):  # inf past x = 709.78, without a RuntimeWarning
        return float(np.expm1(x))


def k_max(epsilon: float, delta: float) -> float:
    """K_max = ln(1 + (e^eps - 1)/delta) / (2 eps): Eq. 6 at F_A = 1, F_B = 0, the largest K
    any prediction can get from an (eps, delta) guarantee (Xie et al. 2023, Theorem 3).
    ``inf`` for pure DP (delta = 0)."""
    epsilon, delta = check_budget(epsilon, delta)
    if delta == 0.0:
        return math.inf
    return float(np.logaddexp(0.0, log_expm1(epsilon) - math.log(delta))) / (2.0 * epsilon)


def _check_scores(top: object, runner_up: object) -> tuple[np.ndarray, np.ndarray, bool]:
    top_a, top_scalar = check_range_array("top", top, 0.0, 1.0)
    run_a, run_scalar = check_range_array("runner_up", runner_up, 0.0, 1.0)
    try:
        top_a, run_a = np.broadcast_arrays(top_a, run_a)
    except ValueError:
        raise ValueError(
            f"runner_up has shape {run_a.shape}, top has shape {top_a.shape}: they must "
            "broadcast together"
        ) from None
    bad = run_a > top_a
    if np.any(bad):
        index = np.argmax(bad)
        raise ValueError(
            f"runner_up = {float(run_a.flat[index])!r} is out of range: must be <= top = "
            f"{float(top_a.flat[index])!r} (the runner-up class has the second-largest score)"
        )
    return top_a, run_a, top_scalar and run_scalar


#: Ratios are formed directly when numerator and denominator are at least this (normal floats).
_NORMAL = 1e-290


def _eq6(top: np.ndarray, runner_up: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """Eq. 6 as ``ln(1 + x) / (2 eps)``, ``x = (F_A - F_B)(e^eps - 1) / (F_B (e^eps - 1) +
    delta)``: x formed directly (a few ulps) or, where that would over- or underflow, from logs;
    ``ln(1 + x)`` by log1p / softplus, so no difference of two large logarithms cancels."""
    e1 = expm1(epsilon)
    log_e1 = float(log_expm1(epsilon))
    top, runner_up = np.broadcast_arrays(np.asarray(top, float), np.asarray(runner_up, float))
    gap = top - runner_up
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        num, den = np.abs(gap) * e1, runner_up * e1 + delta
        direct = (np.isfinite(num) & np.isfinite(den) & (num >= _NORMAL) & (den >= _NORMAL)
                  & np.isfinite(num / den))  # the quotient itself may overflow (tiny delta)
        log_den = np.logaddexp(np.log(runner_up) + log_e1, math.log(delta) if delta else -np.inf)
        log_x = np.log(np.abs(gap)) + log_e1 - log_den
        up = np.where(direct, np.log1p(num / den), np.logaddexp(0.0, log_x))
        down = np.log1p(-np.where(direct, num / den, np.exp(log_x)))  # crossing bounds: K < 0
        k = np.where(gap > 0, up, np.where(gap < 0, down, 0.0)) / (2.0 * epsilon)
    return k


def certified_k_from_bounds(
    top_lower: object, runner_up_upper: object, epsilon: float, delta: float
) -> np.ndarray:
    """Eq. 6 at a lower bound of F_A and an upper bound of F_B (arrays in [0, 1] that
    broadcast). Unlike :func:`certified_k` the bounds may cross: K is then negative, meaning
    the bounds do not separate A from B and nothing is certified (not even k = 0)."""
    epsilon, delta = check_budget(epsilon, delta)
    low, _ = check_range_array("top_lower", top_lower, 0.0, 1.0)
    up, _ = check_range_array("runner_up_upper", runner_up_upper, 0.0, 1.0)
    return _eq6(low, up, epsilon, delta)


def certified_k(
    top: object, runner_up: object, epsilon: float, delta: float
) -> float | np.ndarray:
    """The certified number of adversaries K of Xie et al. 2023, Eq. 6 (Theorems 3 and 4).

    ``K = ln[(F_A (e^eps - 1) + delta) / (F_B (e^eps - 1) + delta)] / (2 eps)``: the prediction
    A is unchanged for every k < K units (users or records) changed, if the training is
    (eps, delta)-DP at that unit. ``top`` = F_A and ``runner_up`` = F_B (scalars or arrays that
    broadcast), in [0, 1] with F_B <= F_A; ``epsilon`` > 0; ``delta`` in [0, 1). Real-valued,
    0 when F_A = F_B, ``inf`` when F_B = delta = 0 < F_A.
    """
    epsilon, delta = check_budget(epsilon, delta)
    top_a, run_a, scalar = _check_scores(top, runner_up)
    return as_scalar_or_array(_eq6(top_a, run_a, epsilon, delta), scalar)


def theorem2_holds(
    top: object, runner_up: object, epsilon: float, delta: float
) -> bool | np.ndarray:
    """Xie et al. 2023, Theorem 2 (Eq. 5): one adversary cannot change the prediction when
    ``F_A > e^{2 eps} F_B + (1 + e^eps) delta``. Equivalent to K > 1 in Eq. 6."""
    epsilon, delta = check_budget(epsilon, delta)
    top_a, run_a, scalar = _check_scores(top, runner_up)
    with np.errstate(over="ignore", invalid="ignore"):  # e^{2 eps} = inf at huge epsilon
        scaled = np.where(np.asarray(run_a) > 0, np.exp(2.0 * epsilon) * run_a, 0.0)
        margin = (1.0 + np.exp(epsilon)) * delta if delta > 0 else 0.0
    holds = top_a > scaled + margin
    return bool(holds) if scalar else holds


def max_attackers(k: float) -> int | None:
    """The largest integer number of adversaries certified by a real K (Theorem 3: k < K):
    ``ceil(K) - 1`` for 0 < K < inf; ``None`` when K <= 0 (not even the unpoisoned prediction
    is certified) or K is infinite (every k)."""
    if not math.isfinite(k) or k <= 0.0:
        return None
    return math.ceil(k) - 1


@dataclass(frozen=True)
class CertificationPrivacy:
    """The privacy of one model and of a certification that trains ``models`` of them.

    A Monte Carlo certification re-uses the data ``models`` times; by basic composition it is
    (M eps, M delta)-DP, the cost Xie et al. 2023 charge (M x epsilon). The certificate itself
    uses the per-model (epsilon, delta), for ``neighbouring`` neighbours.
    """

    epsilon: float
    delta: float
    models: int
    unit: str
    certification_epsilon: float
    certification_delta: float
    composition: str = (
        "basic composition of the M models' (epsilon, delta) (Xie et al. 2023 charge M x "
        "epsilon); composing all M models' steps in one accountant is tighter (not computed)"
    )
    neighbouring: str = "add-remove"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def certification_privacy(
    epsilon: float, delta: float, models: int, unit: str = "user",
    neighbouring: str = "add-remove",
) -> CertificationPrivacy:
    """Per-model (epsilon, delta) for ``neighbouring`` neighbours and the certification's
    (M epsilon, M delta); an M delta >= 1 is vacuous and shown as it is."""
    epsilon, delta = check_budget(epsilon, delta)
    models = check_int("models", models, 1)
    unit = check_choice("unit", unit, UNITS)
    neighbouring = check_choice("neighbouring", neighbouring, NEIGHBOURINGS)
    return CertificationPrivacy(epsilon, delta, models, unit, models * epsilon, models * delta,
                                neighbouring=neighbouring)


@dataclass(frozen=True)
class PredictionCertificate:
    """Eq. 6 for one prediction: ``certified_k`` (K in adversaries, real: K in neighbouring
    steps divided by ``steps_per_adversary``), ``k_max`` (also in adversaries), the largest
    integer number of adversaries certified, and what the number rests on."""

    certified_k: float
    k_max: float
    max_attackers: int | None
    theorem2_holds: bool
    top: float
    runner_up: float
    epsilon: float
    delta: float
    unit: str
    theorem: str
    adversary: str = "add-remove"
    neighbouring: str = "add-remove"
    steps_per_adversary: int = 1
    adversary_note: str = ""
    kind: str = "bound"
    note: str = (
        "rigorous if top is the expected top-class score (or a lower bound of it) and runner_up "
        "the expected runner-up score (or an upper bound), and (epsilon, delta) is a DP "
        "guarantee of the whole training of one model at this unit for the stated "
        "neighbouring relation"
    )

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def certify_prediction(
    top: float, runner_up: float, epsilon: float, delta: float, unit: str = "user", *,
    adversary: str = "add-remove", neighbouring: str = "add-remove",
) -> PredictionCertificate:
    """Certified prediction for given top-class and runner-up scores (Xie et al. 2023,
    Theorem 3 for ``unit="user"``, Theorem 4 for ``unit="instance"``); see :func:`certified_k`.
    ``adversary`` and ``neighbouring`` (of the (epsilon, delta)): K counts adversaries, each
    :func:`steps_per_adversary` steps (default: Xie et al. 2023's add/remove reading)."""
    unit = check_choice("unit", unit, UNITS)
    steps = steps_per_adversary(adversary, neighbouring)
    k = float(certified_k(top, runner_up, epsilon, delta)) / steps
    return PredictionCertificate(
        certified_k=k,
        k_max=k_max(epsilon, delta) / steps,
        max_attackers=max_attackers(k),
        # Eq. 5 is one step; for a replacement of 2 steps, its equivalent K > 1 adversary
        theorem2_holds=(bool(theorem2_holds(top, runner_up, epsilon, delta)) if steps == 1
                        else k > 1.0),
        top=float(top),
        runner_up=float(runner_up),
        epsilon=float(epsilon),
        delta=float(delta),
        unit=unit,
        theorem=theorem(unit),
        adversary=adversary,
        neighbouring=neighbouring,
        steps_per_adversary=steps,
        adversary_note=adversary_text(adversary, neighbouring, unit),
    )
