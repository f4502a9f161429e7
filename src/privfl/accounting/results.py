"""A privacy number together with everything needed to read it correctly (design principle 1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from privfl.accounting.events import PrivacyEvent, Sampling, Unit

Kind = Literal["bound", "estimate", "reference"]
#: Every kind a result can carry (what each one promises: :class:`PrivacyResult`).
KINDS: tuple[str, ...] = ("bound", "estimate", "reference")


@dataclass(frozen=True)
class PrivacyResult:
    """One accountant's answer.

    ``kind`` says what the number promises about the mechanism that ran:

    * ``"bound"``: a rigorous upper bound on its true epsilon (or delta): RDP, pessimistic PLD, a
      theorem whose proof holds;
    * ``"estimate"``: an approximation that can fall below the truth (CLT / GDP, paper formulas
      shown unsound);
    * ``"reference"``: rigorous for a *different*, more private mechanism, hence a lower
      reference for this one: the truth is at least this large (e.g. centralised sampling at
      rate p q beside random client participation). Never a guarantee for what ran.

    ``extras`` carries method-specific fields such as ``mu``, ``order``, ``scope``, ``conversion``.
    """

    method: str
    kind: Kind
    epsilon: float
    delta: float
    unit: str
    neighbouring: str
    sampling: str
    release: str
    steps: int
    extras: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(
                f"kind = {self.kind!r} is not allowed: must be one of {', '.join(KINDS)}"
            )

    @classmethod
    def for_event(
        cls,
        event: PrivacyEvent,
        *,
        method: str,
        kind: Kind,
        epsilon: float,
        delta: float,
        note: str = "",
        **extras: Any,
    ) -> PrivacyResult:
        """Fill the labels (unit, relation, sampling, release, steps) from the event.

        For a client-level event the sampling label says that clients are what is sampled, e.g.
        ``"poisson (q=0.1) of clients"``.
        """
        return cls(
            method=method,
            kind=kind,
            epsilon=float(epsilon),
            delta=float(delta),
            unit=event.unit.value,
            neighbouring=event.neighbouring.value,
            sampling=sampling_label(event),
            release=event.release,
            steps=event.total_steps,
            extras=dict(extras),
            note=note,
        )

    def to_dict(self) -> dict[str, Any]:
        """A flat JSON-ready mapping: the labelled fields first, then the method's extras."""
        data: dict[str, Any] = {
            "method": self.method,
            "kind": self.kind,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "unit": self.unit,
            "neighbouring": self.neighbouring,
            "sampling": self.sampling,
            "release": self.release,
            "steps": self.steps,
        }
        data.update(self.extras)
        if self.note:
            data["note"] = self.note
        return data


def sampling_label(event: PrivacyEvent) -> str:
    """The event's sampling label, naming clients as the sampled unit at client level."""
    if event.unit is not Unit.CLIENT:
        return event.sampling_label
    labels: list[str] = []
    for step, _ in event.steps:
        scheme = step.effective_sampling
        if scheme is Sampling.NONE:
            label = "none (every client in every round)"
        else:
            label = f"{scheme.value} (q={step.sampling_rate:.6g}) of clients"
        if label not in labels:
            labels.append(label)
    return ", ".join(labels)


def zero_rounds(results: list[PrivacyResult] | tuple[PrivacyResult, ...]) -> list[PrivacyResult]:
    """The same labelled results with epsilon (and mu) 0 and 0 steps: before round 1."""
    return [
        PrivacyResult(r.method, r.kind, 0.0, r.delta, r.unit, r.neighbouring, r.sampling,
                      r.release, 0, {**r.extras, **({"mu": 0.0} if "mu" in r.extras else {})},
                      r.note)
        for r in results
    ]
