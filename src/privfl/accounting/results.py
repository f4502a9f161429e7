"""A privacy number together with everything needed to read it correctly (design principle 1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from privfl.accounting.events import PrivacyEvent

Kind = Literal["bound", "estimate"]


@dataclass(frozen=True)
class PrivacyResult:
    """One accountant's answer.

    ``kind`` is ``"bound"`` for a rigorous upper bound (RDP, pessimistic PLD, a theorem whose proof
    holds) and ``"estimate"`` for an approximation (CLT / GDP, paper formulas shown unsound).
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
        if self.kind not in ("bound", "estimate"):
            raise ValueError(f"kind = {self.kind!r} is not allowed: must be 'bound' or 'estimate'")

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
        """Fill the labels (unit, relation, sampling, release, steps) from the event."""
        return cls(
            method=method,
            kind=kind,
            epsilon=float(epsilon),
            delta=float(delta),
            unit=event.unit.value,
            neighbouring=event.neighbouring.value,
            sampling=event.sampling_label,
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
