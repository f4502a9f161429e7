"""The interface every accountant implements: answer a :class:`PrivacyEvent`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable

from privfl._validation import check_delta, check_epsilon
from privfl.accounting.events import (
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    UnsupportedEventError,
)
from privfl.accounting.results import Kind, PrivacyResult


def check_event(event: object) -> PrivacyEvent:
    """``event`` itself if it is a :class:`PrivacyEvent`, else a ``ValueError`` saying so."""
    if not isinstance(event, PrivacyEvent):
        raise ValueError(
            f"event = {event!r} is not a PrivacyEvent: describe what ran with "
            "privfl.accounting.events.dpsgd_event(...) or PrivacyEvent(...)"
        )
    return event


class Accountant(ABC):
    """An accountant turns a description of what ran into a labelled (epsilon, delta).

    Subclasses set ``name`` (the method name printed in reports, e.g. ``"rdp"``) and ``kind``
    (``"bound"`` or ``"estimate"``), implement :meth:`unsupported_reason` and the two solvers.
    """

    name: str
    kind: Kind

    @abstractmethod
    def unsupported_reason(self, event: PrivacyEvent) -> str | None:
        """``None`` if the event can be accounted, else a sentence naming what is unsupported."""

    @staticmethod
    def _first_step_reason(
        event: PrivacyEvent, step_reason: Callable[[NoisyStep, Neighbouring], str | None]
    ) -> str | None:
        """The first ``step_reason(step, event.neighbouring)`` that is not ``None`` over the
        event's steps (groups with ``count = 0`` are skipped), else ``None``."""
        for step, count in event.steps:
            if count == 0:
                continue
            reason = step_reason(step, event.neighbouring)
            if reason is not None:
                return reason
        return None

    @classmethod
    def from_options(cls, options: object) -> Accountant:
        """The accountant configured by an :class:`~privfl.accounting.methods.AccountingOptions`
        (the registry's factory, :mod:`privfl.accounting.registry`); this default has no knob."""
        return cls()

    def supports(self, event: PrivacyEvent) -> bool:
        return self.unsupported_reason(check_event(event)) is None

    def _require_supported(self, event: PrivacyEvent) -> None:
        check_event(event)
        reason = self.unsupported_reason(event)
        if reason is not None:
            raise UnsupportedEventError(f"the {self.name} accountant cannot handle this: {reason}")

    def epsilon(self, event: PrivacyEvent, delta: float) -> PrivacyResult:
        """Smallest epsilon this method certifies (or estimates) at ``delta``."""
        delta = check_delta("delta", delta)
        self._require_supported(event)
        return self._epsilon(event, delta)

    def delta(self, event: PrivacyEvent, epsilon: float) -> PrivacyResult:
        """Smallest delta this method certifies (or estimates) at ``epsilon``."""
        epsilon = check_epsilon("epsilon", epsilon)
        self._require_supported(event)
        return self._delta(event, epsilon)

    @abstractmethod
    def _epsilon(self, event: PrivacyEvent, delta: float) -> PrivacyResult: ...

    @abstractmethod
    def _delta(self, event: PrivacyEvent, epsilon: float) -> PrivacyResult: ...
