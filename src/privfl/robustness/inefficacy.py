"""Certified attack inefficacy (Xie et al. 2023, Theorem 6) and the minimum number of attackers
for a target effect (Corollary 7); Theorem 4 extends both to instance level.

An attack's effect is measured by a cost ``C(theta)`` of the trained model (e.g. the mean
cross-entropy of the attacker's target label on triggered test inputs; the attacker wants it
small), with ``|C(theta)| <= C_bar`` for EVERY model theta, and ``J(D) = E[C(M(D))]`` over the
training randomness. If M is (eps, delta)-DP at the unit that k attackers change, group privacy
(:func:`privfl.robustness.certify.group_delta`) gives, with ``delta_k = delta (e^{k eps} - 1) /
(e^eps - 1)``:

* C >= 0: ``max{e^{-k eps} (J(D) - delta_k C_bar), 0} <= J(D') <= min{e^{k eps} J(D) +
  delta_k C_bar, C_bar}``;
* C <= 0: ``max{e^{k eps} J(D) - delta_k C_bar, -C_bar} <= J(D') <= min{e^{-k eps} (J(D) +
  delta_k C_bar), 0}``.

(``e^{-k eps} delta_k = (1 - e^{-k eps}) delta / (e^eps - 1)``, the paper's form.) Proof: for a
[0, C_bar]-valued g, ``E[g(M(D))] <= e^{k eps} E[g(M(D'))] + delta_k C_bar`` in both directions.

Corollary 7: an attack with k attackers can reach ``J(D') <= J(D)/tau`` (C >= 0, tau >= 1) only if
``k >= ln[((e^eps - 1) J tau + C_bar delta tau) / ((e^eps - 1) J + C_bar delta tau)] / eps``, and
``J(D') <= tau J(D)`` (C <= 0, 1 <= tau <= -C_bar/J) only if
``k >= ln[((e^eps - 1) J tau - C_bar delta) / ((e^eps - 1) J - C_bar delta)] / eps``; pure DP:
``ln(tau) / eps``.

Raw cross-entropy is unbounded: a valid certificate needs a bounded cost (per-sample losses
clipped to [0, C_bar], or 1 - attack success rate with C_bar = 1). J(D) from M models is
calibrated by a two-sided Hoeffding interval (:func:`certify_attack_inefficacy`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from privfl._validation import (
    as_scalar_or_array,
    check_choice,
    check_positive,
    check_range,
    check_range_array,
)
from privfl.robustness.calibration import check_confidence, hoeffding_radius
from privfl.robustness.certify import (
    UNITS,
    CertificationPrivacy,
    adversary_text,
    certification_privacy,
    check_budget,
    expm1,
    group_delta,
    steps_per_adversary,
    theorem,
)

__all__ = [
    "SIGNS",
    "InefficacyCertificate",
    "attack_inefficacy_bounds",
    "certify_attack_inefficacy",
    "min_attackers",
]

#: The sign of the cost C: ``nonnegative`` (a loss, 0 <= C <= C_bar) or ``nonpositive``.
SIGNS = ("nonnegative", "nonpositive")


def _cost_range(sign: str, cost_bound: float) -> tuple[float, float]:
    return (0.0, cost_bound) if sign == "nonnegative" else (-cost_bound, 0.0)


def _check_clean(clean: object, cost_bound: object, sign: object) -> tuple[float, float, str]:
    sign = check_choice("sign", sign, SIGNS)
    cost_bound = check_positive("cost_bound", cost_bound)
    low, high = _cost_range(sign, cost_bound)
    return check_range("clean", clean, low, high), cost_bound, sign


def attack_inefficacy_bounds(
    clean: float,
    epsilon: float,
    delta: float,
    cost_bound: float,
    k: object,
    *,
    sign: str = "nonnegative",
) -> tuple[float | np.ndarray, float | np.ndarray]:
    """(lower, upper) bounds of J(D') with k attackers given J(D) = ``clean`` (Theorem 6).

    ``clean`` in [0, C_bar] (``sign="nonnegative"``) or [-C_bar, 0]; ``cost_bound`` C_bar > 0;
    ``epsilon`` > 0, ``delta`` in [0, 1) of one model's whole training; ``k`` >= 0 (scalar or
    array; the theorem is for integers, a real k evaluates the formula). Both equal J(D) at k = 0.
    """
    epsilon, delta = check_budget(epsilon, delta)
    clean, cost_bound, sign = _check_clean(clean, cost_bound, sign)
    ks, scalar = check_range_array("k", k, 0.0, math.inf, high_open=True)
    slack = np.asarray(group_delta(epsilon, delta, ks)) * cost_bound  # delta_k C_bar, maybe inf
    with np.errstate(over="ignore", invalid="ignore"):
        grow = np.exp(ks * epsilon)
        # e^{-k eps} delta_k C_bar = (1 - e^{-k eps}) delta C_bar / (e^eps - 1), no inf * 0
        shrunk_slack = -np.expm1(-ks * epsilon) / expm1(epsilon) * delta * cost_bound
        grown = np.where(clean == 0.0, 0.0, grow * clean)
        shrunk = np.exp(-ks * epsilon) * clean
    if sign == "nonnegative":
        lower = np.maximum(shrunk - shrunk_slack, 0.0)
        upper = np.minimum(grown + slack, cost_bound)
    else:
        lower = np.maximum(grown - slack, -cost_bound)
        upper = np.minimum(shrunk + shrunk_slack, 0.0)
    return as_scalar_or_array(lower, scalar), as_scalar_or_array(upper, scalar)


def min_attackers(
    clean: float,
    epsilon: float,
    delta: float,
    cost_bound: float,
    tau: object,
    *,
    sign: str = "nonnegative",
) -> float | np.ndarray:
    """Corollary 7: the real k below which no attack reaches the target effect ``tau``.

    ``sign="nonnegative"``: target ``J(D') <= J(D)/tau``, tau >= 1. ``"nonpositive"``: target
    ``J(D') <= tau J(D)``, 1 <= tau <= -C_bar/J(D). Any attack reaching the target needs at least
    ``ceil`` of this many attackers. 0 when J(D) = 0 (the target is the trivial J(D') <= 0 side).
    """
    epsilon, delta = check_budget(epsilon, delta)
    clean, cost_bound, sign = _check_clean(clean, cost_bound, sign)
    high = -cost_bound / clean if sign == "nonpositive" and clean < 0.0 else math.inf
    taus, scalar = check_range_array("tau", tau, 1.0, high)
    # ratio - 1 = |J| (tau - 1) / (|J| + a / (e^eps - 1)), a = C_bar delta tau (C >= 0) or
    # C_bar delta (C <= 0): log1p of it stays accurate at tiny and huge epsilon
    a = cost_bound * delta * (taus if sign == "nonnegative" else 1.0)
    size = abs(clean)
    with np.errstate(over="ignore", under="ignore"):
        x = size * (taus - 1.0) / (size + a / expm1(epsilon)) if clean else np.zeros_like(taus)
    k = np.log1p(x) / epsilon
    return as_scalar_or_array(k, scalar)


@dataclass(frozen=True)
class InefficacyCertificate:
    """Theorem 6 bounds over k from M models' costs, and what they are."""

    k: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    clean_estimate: float
    clean_lower: float
    clean_upper: float
    cost_bound: float
    sign: str
    method: str
    kind: str
    confidence: float | None
    privacy: CertificationPrivacy
    theorem: str
    note: str
    adversary: str = "add-remove"
    steps_per_adversary: int = 1

    def min_attackers(self, tau: object) -> float | np.ndarray:
        """Corollary 7 at every J(D) in [clean_lower, clean_upper]: the smallest k_min (k_min is
        monotone in J(D), so the minimum is at an end), in adversaries (steps divided by
        ``steps_per_adversary``)."""
        args = (self.privacy.epsilon, self.privacy.delta, self.cost_bound, tau)
        ends = [min_attackers(j, *args, sign=self.sign) for j in (self.clean_lower,
                                                                   self.clean_upper)]
        low = np.minimum(*ends) if isinstance(ends[0], np.ndarray) else min(ends)
        return low / self.steps_per_adversary

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(k=self.k.tolist(), lower=self.lower.tolist(), upper=self.upper.tolist(),
                    privacy=self.privacy.to_dict(),
                    adversary_note=adversary_text(self.adversary, self.privacy.neighbouring,
                                                  self.privacy.unit))
        return data


def certify_attack_inefficacy(
    costs: object,
    cost_bound: float,
    epsilon: float,
    delta: float,
    k: object,
    *,
    sign: str = "nonnegative",
    method: str = "hoeffding",
    confidence: float = 0.99,
    unit: str = "user",
    adversary: str = "add-remove",
    neighbouring: str = "add-remove",
) -> InefficacyCertificate:
    """Theorem 6 (Theorem 4 at ``unit="instance"``) from ``costs``, C(theta_o) of M models
    trained on the clean data, each in [0, C_bar] (or [-C_bar, 0]).

    ``k`` counts adversaries (``adversary``: ``add-remove``, Xie et al. 2023's reading, or
    ``replace``), each :func:`~privfl.robustness.certify.steps_per_adversary` steps of the
    ``neighbouring`` relation of (epsilon, delta): the bounds are Theorem 6's at k times that.

    ``method="hoeffding"``: J(D) in ``mean +- C_bar sqrt(ln(2/(1 - confidence)) / (2M))``
    (two-sided); the lower bound of J(D') uses the interval's lower end, the upper bound its upper
    end, so both hold together with probability >= ``confidence`` (each alone >= (1 +
    confidence)/2). ``method="estimate"``: the plain mean (not a guarantee).
    """
    method = check_choice("method", method, ("hoeffding", "estimate"))
    sign = check_choice("sign", sign, SIGNS)
    unit = check_choice("unit", unit, UNITS)
    cost_bound = check_positive("cost_bound", cost_bound)
    confidence = check_confidence(confidence)
    low, high = _cost_range(sign, cost_bound)
    values, _ = check_range_array("costs", costs, low, high)
    values = np.atleast_1d(values)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"costs has shape {values.shape}: must be one cost per model (M,)")
    privacy = certification_privacy(epsilon, delta, values.size, unit, neighbouring)
    steps = steps_per_adversary(adversary, privacy.neighbouring)
    mean = float(values.mean())
    if method == "hoeffding":
        radius = hoeffding_radius(values.size, (1.0 - confidence) / 2.0, width=cost_bound)
        j_low, j_high = max(mean - radius, low), min(mean + radius, high)
        note = (f"J(D) from {values.size} models by a two-sided Hoeffding interval; both bounds "
                f"hold together with probability >= {confidence:g}")
    else:
        j_low = j_high = mean
        note = "estimate: Theorem 6 at the Monte Carlo mean of J(D), not a guarantee"
    ks = np.atleast_1d(check_range_array("k", k, 0.0, math.inf, high_open=True)[0])
    args = (privacy.epsilon, privacy.delta, cost_bound, ks * steps)
    lower = attack_inefficacy_bounds(j_low, *args, sign=sign)[0]
    upper = attack_inefficacy_bounds(j_high, *args, sign=sign)[1]
    return InefficacyCertificate(
        k=ks,
        lower=np.asarray(lower),
        upper=np.asarray(upper),
        clean_estimate=mean,
        clean_lower=j_low,
        clean_upper=j_high,
        cost_bound=cost_bound,
        sign=sign,
        method=method,
        kind="bound" if method == "hoeffding" else "estimate",
        confidence=confidence if method == "hoeffding" else None,
        privacy=privacy,
        theorem=theorem(unit, inefficacy=True),
        note=note + "; assumes |C(theta)| <= C_bar for every model theta",
        adversary=adversary,
        steps_per_adversary=steps,
    )
