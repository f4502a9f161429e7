"""The privacy statement of M independently trained DP models of one configuration.

Every replica is one run of the same algorithm on the same data, so each model carries the
guarantee of the algorithm's own privacy plan (same sampling, noise, clipping and rounds): the
per-model ``(epsilon, delta)`` that the certificates of Xie et al. 2023 (Theorems 3 and 6) take.
A certification releases a function of all M models (the Monte Carlo mean of their softmax
outputs), which accesses the data M times; Xie et al. 2023 (Section 6.1.5) charge it by basic
composition::

    epsilon_cert = M epsilon,    delta_cert = M delta

(a valid bound for M mechanisms run independently on the same data; a tighter composition of
the M x R rounds, e.g. in RDP, is possible and not computed here).

Under add/remove neighbours the statement also carries the replace-one epsilon of the same
mechanism (the plan's own events with the relation changed, through the plan's accountants at
the same delta): an attacker who replaces one unit's data is one replace-one step away, which
can certify more than two add/remove steps (:mod:`privfl.robustness.adversary`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from privfl._validation import check_int
from privfl.algorithms.base import budget_results, privacy_entries, tightest_bound
from privfl.algorithms.replace_one import replace_one_reading

__all__ = ["ReplicaPrivacy", "replica_privacy"]

_COMPOSITION = "basic composition over the M models (Xie et al. 2023, Section 6.1.5)"


@dataclass(frozen=True)
class ReplicaPrivacy:
    """Per-model guarantee and the cost of a certification from ``models`` models.

    ``per_model`` holds every labelled result of the plan (``method``, ``kind`` (bound,
    estimate or reference), ``scope``, ``epsilon``, ``delta``); ``epsilon`` / ``delta`` /
    ``method`` are the tightest rigorous bound in the plan's primary scope (None when the
    training is not private or no bound was computed); ``paper_epsilon`` the number of Xie et
    al. 2023's own accounting (scope ``paper``) when the plan reports it, ``paper_kind`` what
    that number is (bound, estimate or reference). ``replace_epsilon`` / ``replace_method``:
    under add/remove neighbours, the tightest rigorous replace-one bound of the same mechanism at
    the same delta (None when the relation already is replace-one or no accountant of the plan
    bounds it; ``replace_note`` says why).
    """

    models: int
    unit: str
    neighbouring: str
    per_model: list[dict[str, Any]] = field(default_factory=list)
    epsilon: float | None = None
    delta: float | None = None
    method: str | None = None
    scope: str = ""
    paper_epsilon: float | None = None
    paper_kind: str = ""
    secure: bool = False
    replace_epsilon: float | None = None
    replace_method: str | None = None
    replace_note: str = ""

    @property
    def private(self) -> bool:
        return self.epsilon is not None

    @property
    def certification_epsilon(self) -> float | None:
        """``M epsilon`` (basic composition; None when not private)."""
        return None if self.epsilon is None else self.models * self.epsilon

    @property
    def certification_delta(self) -> float | None:
        """``M delta`` (basic composition; None when not private)."""
        return None if self.delta is None else self.models * self.delta

    def lines(self) -> list[str]:
        """Human-readable statement, one fact per line."""
        if not self.private:
            return ["not private: no rigorous (epsilon, delta) bound for one model, so no "
                    "certificate (the models are still Monte Carlo samples of the training)"]
        m = self.models
        lines = [
            f"per model: epsilon = {self.epsilon:.6g} at delta = {self.delta:.3g} ({self.method} "
            f"bound; unit: one {self.unit}; {self.neighbouring} neighbours"
            + (f"; scope {self.scope}" if self.scope else "") + ")",
            f"certification from M = {m} models: M x epsilon = {self.certification_epsilon:.6g},"
            f" M x delta = {self.certification_delta:.3g} ({_COMPOSITION}; a bound)",
        ]
        if self.replace_epsilon is not None:
            lines.append(f"per model, replace-one: epsilon = {self.replace_epsilon:.6g} at delta "
                         f"= {self.delta:.3g} ({self.replace_method} bound of the same "
                         "mechanism; for adversaries who replace a unit's data)")
        elif self.replace_note:
            lines.append(f"per model, replace-one: not computed ({self.replace_note})")
        if self.certification_delta >= 1:
            lines.append("M x delta >= 1: the composed guarantee is vacuous")
        if self.paper_epsilon is not None:
            lines.append(f"Xie et al. 2023's own accounting ({self.paper_kind}): epsilon = "
                         f"{self.paper_epsilon:.6g} per model, M x epsilon = "
                         f"{m * self.paper_epsilon:.6g}")
        lines.append("the certificates (Xie et al. 2023 Theorems 3 and 6) use the per-model "
                     "(epsilon, delta); M x epsilon is the privacy cost of releasing the "
                     "certification")
        if self.secure:
            lines.append("secure mode: cohorts, batches and noise came from os.urandom; the "
                         "models cannot be reproduced from their seeds")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """Plain values (JSON), with the certification numbers."""
        return {**asdict(self), "certification_epsilon": self.certification_epsilon,
                "certification_delta": self.certification_delta,
                "composition": _COMPOSITION}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ReplicaPrivacy:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in values.items() if k in names})


def replica_privacy(plan: Any, rounds: int, models: int) -> ReplicaPrivacy:
    """The statement for ``models`` replicas of ``rounds`` rounds of an algorithm with privacy
    plan ``plan`` (:class:`~privfl.algorithms.base.PrivacyPlan`)."""
    models = check_int("models", models, 1)
    rounds = check_int("rounds", rounds, 0)
    results = plan.results(rounds) if plan.private and plan.delta is not None else []
    best = tightest_bound(budget_results(plan, results))
    paper = min((r for r in results if str(r.extras.get("scope", "")) == "paper"),
                key=lambda r: r.epsilon, default=None)
    neighbouring = best.neighbouring if best is not None else ""
    replace = (replace_one_reading(plan, max(rounds, 1)) if neighbouring == "add-remove"
               else (None, None, ""))
    return ReplicaPrivacy(
        models=models, unit=str(plan.unit), neighbouring=str(neighbouring),
        per_model=privacy_entries(results),
        epsilon=None if best is None else float(best.epsilon),
        delta=None if best is None else float(best.delta),
        method=None if best is None else best.method, scope=str(plan.primary_scope),
        paper_epsilon=None if paper is None else float(paper.epsilon),
        paper_kind="" if paper is None else paper.kind, secure=bool(plan.secure),
        replace_epsilon=replace[0], replace_method=replace[1], replace_note=replace[2])
