"""The audit of a claimed (epsilon, delta) on one pair of laws, and its report.

Audit (:func:`audit`)
---------------------
:func:`audit` reports both directions, the larger one, and ``violated``:

* with an exact divergence: ``max_direction E_g - delta > tolerance``, ``tolerance`` = the
  numerical error bound plus ``rtol * delta`` (default rtol = 1e-9, so a claim that equals the
  truth up to the rounding of the claimant's own numerics is not flagged);
* Monte Carlo only: the lower end of the interval exceeds delta in some direction (a violation at
  confidence >= 1 - (1 - c)/2 for the Bernstein interval).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfl._validation import check_choice, check_epsilon, check_int, check_range
from privfl.accounting.audit.exact import exact_divergence
from privfl.accounting.audit.laws import (
    Law,
    ProductLaw,
    UnsupportedAuditError,
    aligned_factors,
    check_law,
)
from privfl.accounting.audit.monte_carlo import INTERVALS, MonteCarloEstimate, _monte_carlo


@dataclass(frozen=True)
class AuditReport:
    """Result of checking a claimed (epsilon, delta) on one pair of output laws.

    ``delta_forward`` = E_g(P || Q), ``delta_backward`` = E_g(Q || P) (``None`` when no exact
    value is available), ``delta`` their max, the pair's true delta(epsilon); ``error`` bounds
    the numerical error of the exact values; ``monte_carlo`` maps direction labels to estimates.
    ``violated`` is decided on the exact values when present (``basis = "exact"``), else on the
    lower ends of the Monte Carlo intervals (``basis = "monte-carlo"``).
    """

    epsilon: float
    claimed_delta: float
    violated: bool
    basis: str
    delta: float | None
    delta_forward: float | None
    delta_backward: float | None
    error: float | None
    tolerance: float
    worst_direction: str
    directions: tuple[str, str]
    monte_carlo: dict[str, MonteCarloEstimate] = field(default_factory=dict)
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    worst_case: bool | None = None
    note: str = ""

    @property
    def margin(self) -> float | None:
        """delta(epsilon) - claimed delta (positive = violated, up to tolerance)."""
        if self.delta is not None:
            return self.delta - self.claimed_delta
        if self.monte_carlo:
            return max(m.lower for m in self.monte_carlo.values()) - self.claimed_delta
        return None

    @property
    def monte_carlo_consistent(self) -> bool | None:
        """Whether every exact value lies inside its Monte Carlo interval (None if not both)."""
        if self.delta is None or not self.monte_carlo:
            return None
        exact = dict(zip(self.directions, (self.delta_forward, self.delta_backward), strict=True))
        return all(
            m.lower - self.tolerance <= exact[d] <= m.upper + self.tolerance
            for d, m in self.monte_carlo.items()
        )

    @property
    def conclusive(self) -> bool:
        """False when only Monte Carlo is available and an interval straddles the claim."""
        if self.basis == "exact" or self.violated:
            return True
        return all(m.upper <= self.claimed_delta for m in self.monte_carlo.values())

    @property
    def summary(self) -> str:
        what = self.description or "this pair"
        claim = f"(epsilon = {self.epsilon:.6g}, delta = {self.claimed_delta:.6g})"
        if self.basis == "exact":
            assert self.delta is not None and self.error is not None
            other = [
                f"{d}: {v:.6g}"
                for d, v in zip(
                    self.directions, (self.delta_forward, self.delta_backward), strict=True
                )
            ]
            found = f"exact delta(epsilon) = {self.delta:.6g} [{'; '.join(other)}]"
            numerics = f"numerical error <= {self.error:.2g}"
        else:
            found = f"Monte Carlo delta(epsilon) {self._monte_carlo_text()}"
            numerics = "no exact value for this pair"
        if self.violated:
            verdict = (
                f"VIOLATED: the claim {claim} fails on {what}: {found} exceeds the claimed delta "
                f"by {self.margin:.3g} ({numerics}). One violating instance disproves the "
                "claimed bound."
            )
        elif not self.conclusive:
            verdict = (
                f"INCONCLUSIVE: the claim {claim} is not disproved on {what}, but {found} "
                f"contains the claimed delta; more samples would be needed to decide."
            )
        elif self.worst_case and self.basis == "exact":
            verdict = (
                f"holds: the claim {claim} is consistent with {what}: {found} ({numerics}). "
                "This pair is a known dominating pair of the mechanism, so this is the "
                "mechanism's own delta(epsilon)."
            )
        else:
            verdict = (
                f"holds on this instance: the claim {claim} is consistent with {what}: {found} "
                f"({numerics}). Passing on one instance does not prove the bound."
            )
        if self.note:
            verdict += f" Note: {self.note}."
        if self.basis == "exact" and self.monte_carlo:
            verdict += f" Monte Carlo check: {self._monte_carlo_text()}."
        if self.monte_carlo_consistent is False:
            verdict += " WARNING: the exact value lies outside a Monte Carlo interval."
        return verdict

    def _monte_carlo_text(self) -> str:
        parts = [
            f"{d}: {m.estimate:.4g} in [{m.lower:.4g}, {m.upper:.4g}]"
            for d, m in self.monte_carlo.items()
        ]
        first = next(iter(self.monte_carlo.values()))
        return (
            f"[{'; '.join(parts)}] ({first.interval} interval, confidence {first.confidence:g}, "
            f"{first.samples} samples per direction)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "claimed_delta": self.claimed_delta,
            "violated": self.violated,
            "conclusive": self.conclusive,
            "basis": self.basis,
            "delta": self.delta,
            "delta_forward": self.delta_forward,
            "delta_backward": self.delta_backward,
            "directions": list(self.directions),
            "worst_direction": self.worst_direction,
            "error": self.error,
            "tolerance": self.tolerance,
            "margin": self.margin,
            "method": self.method,
            "monte_carlo": {d: m.to_dict() for d, m in self.monte_carlo.items()},
            "monte_carlo_consistent": self.monte_carlo_consistent,
            "description": self.description,
            "parameters": dict(self.parameters),
            "worst_case": self.worst_case,
            "note": self.note,
            "summary": self.summary,
        }


def audit(
    P: Law,
    Q: Law,
    epsilon: float,
    delta: float,
    *,
    monte_carlo_samples: int | None = None,
    seed: int | None = 0,
    confidence: float = 0.99,
    interval: str = "bernstein",
    rtol: float = 1e-9,
    directions: tuple[str, str] = ("P||Q", "Q||P"),
    description: str = "",
    parameters: dict[str, Any] | None = None,
) -> AuditReport:
    """Check the claim "(epsilon, delta)-DP" on the neighbouring output laws P and Q.

    Computes ``E_g(P || Q)`` and ``E_g(Q || P)`` exactly where possible (1-D laws, compositions of
    Gaussian shifts) and, if ``monte_carlo_samples`` is given, Monte Carlo estimates of both with
    intervals (see :func:`monte_carlo_hockey_stick`; the two directions use independent streams
    spawned from ``seed``). The claim is ``violated`` when the exact delta(epsilon) exceeds
    ``delta`` by more than the numerical error bound plus ``rtol * delta`` or, without an exact
    value, when a Monte Carlo interval lies entirely above ``delta``. A composition without an
    exact value needs ``monte_carlo_samples``.
    """
    P = check_law("P", P)
    Q = check_law("Q", Q)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_range("delta", delta, 0.0, 1.0, high_open=True)
    rtol = check_range("rtol", rtol, 0.0, 1.0)
    confidence = check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)
    interval = check_choice("interval", interval, INTERVALS)
    if monte_carlo_samples is not None:
        monte_carlo_samples = check_int("monte_carlo_samples", monte_carlo_samples, minimum=2)
    if (
        not isinstance(directions, tuple)
        or len(directions) != 2
        or not all(isinstance(d, str) for d in directions)
        or directions[0] == directions[1]
    ):
        raise ValueError(f"directions = {directions!r} is not allowed: must be two distinct labels")
    if isinstance(P, ProductLaw) or isinstance(Q, ProductLaw):
        aligned_factors(P, Q)  # raises on mismatched shapes
    try:
        forward = exact_divergence(P, Q, epsilon)
        backward = exact_divergence(Q, P, epsilon)
    except UnsupportedAuditError:
        if monte_carlo_samples is None:
            raise UnsupportedAuditError(
                "monte_carlo_samples = None is out of range: this composition has no exact "
                "hockey-stick divergence here, so it must be audited by Monte Carlo (give an "
                "integer >= 2)"
            ) from None
        forward = backward = None

    mc: dict[str, MonteCarloEstimate] = {}
    if monte_carlo_samples is not None:
        seed_value: int | None = None
        if seed is not None:
            seed_value = check_int("seed", seed, minimum=0)
        streams = np.random.SeedSequence(seed_value).spawn(2)
        for label, (a, b), stream in zip(directions, ((P, Q), (Q, P)), streams, strict=True):
            mc[label] = _monte_carlo(
                a,
                b,
                epsilon,
                monte_carlo_samples,
                np.random.default_rng(stream),
                confidence,
                interval,
                seed_value,
            )

    if forward is not None and backward is not None:
        worst = max(forward.value, backward.value)
        error = max(forward.error, backward.error)
        tolerance = error + rtol * delta
        violated = worst - delta > tolerance
        worst_direction = directions[0] if forward.value >= backward.value else directions[1]
        return AuditReport(
            epsilon=epsilon,
            claimed_delta=delta,
            violated=violated,
            basis="exact",
            delta=worst,
            delta_forward=forward.value,
            delta_backward=backward.value,
            error=error,
            tolerance=tolerance,
            worst_direction=worst_direction,
            directions=directions,
            monte_carlo=mc,
            description=description,
            parameters=dict(parameters or {}),
            method=forward.method,
        )
    tolerance = rtol * delta
    worst_direction = max(mc, key=lambda d: mc[d].lower)
    violated = mc[worst_direction].lower - delta > tolerance
    return AuditReport(
        epsilon=epsilon,
        claimed_delta=delta,
        violated=violated,
        basis="monte-carlo",
        delta=None,
        delta_forward=None,
        delta_backward=None,
        error=None,
        tolerance=tolerance,
        worst_direction=worst_direction,
        directions=directions,
        monte_carlo=mc,
        description=description,
        parameters=dict(parameters or {}),
        method=f"Monte Carlo ({interval} interval)",
    )
