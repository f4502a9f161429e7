"""What ran: an immutable description that every accountant reads.

A :class:`PrivacyEvent` is the single source of truth for a privacy report. Training code builds
it from the same settings that drive sampling and noise, and every accountant (RDP, PLD, GDP-CLT,
...) answers the same object or raises :class:`UnsupportedEventError` naming what it cannot handle.

Conventions
-----------
* ``noise_multiplier`` z is the noise standard deviation (Gaussian) or scale b (Laplace) divided
  by the clipping norm C, on the *sum* of clipped contributions (the Opacus / TF Privacy
  convention). Under add/remove neighbours the L2 sensitivity of the sum is C, so one unsampled
  Gaussian step is (1/z)-GDP; under replace-one it is 2C, so it is (2/z)-GDP.
* Seed 000 writes sigma for noise std / (2C); its sigma equals z / 2
  (:func:`noise_multiplier_from_paper_sigma`).
* ``sampling_rate`` is q: the Poisson inclusion probability, or B/n for fixed-size batches of B
  drawn uniformly without replacement from n records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

from privfl._validation import MAX_COUNT, check_int, check_positive, check_rate


class UnsupportedEventError(ValueError):
    """An accountant was asked about a combination it cannot bound; the message says which."""


class AccountingLimitError(ValueError):
    """An accountant supports the event but its numerics cannot answer it within their limits
    (a memory budget, the float range, a cost that grows with an argument). The message names
    the argument to change. ``account(..., methods="all")`` lists such a method under
    ``unsupported`` with this message and reports the others."""


class Neighbouring(str, Enum):
    """Which datasets are neighbours."""

    ADD_REMOVE = "add-remove"
    REPLACE_ONE = "replace-one"


class Sampling(str, Enum):
    """How the records (or clients) of one step are chosen."""

    POISSON = "poisson"
    WITHOUT_REPLACEMENT = "without-replacement"  # fixed size B, uniform without replacement
    NONE = "none"  # every record every step (q = 1)


class Unit(str, Enum):
    """What one neighbouring change protects: one record or one whole client."""

    RECORD = "record"
    CLIENT = "client"


class Noise(str, Enum):
    GAUSSIAN = "gaussian"
    LAPLACE = "laplace"


@dataclass(frozen=True)
class NoisyStep:
    """One release of a (sub)sampled sum of clipped contributions plus noise."""

    noise_multiplier: float
    sampling_rate: float = 1.0
    sampling: Sampling = Sampling.POISSON
    noise: Noise = Noise.GAUSSIAN

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier)
        )
        object.__setattr__(self, "sampling_rate", check_rate("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "sampling", Sampling(self.sampling))
        object.__setattr__(self, "noise", Noise(self.noise))
        if self.sampling is Sampling.NONE and self.sampling_rate != 1.0:
            raise ValueError(
                f"sampling_rate = {self.sampling_rate!r} is out of range: must be 1 when "
                "sampling is 'none'"
            )

    @property
    def effective_sampling(self) -> Sampling:
        """``NONE`` when every record is used (q = 1), whatever the nominal scheme."""
        return Sampling.NONE if self.sampling_rate == 1.0 else self.sampling


@dataclass(frozen=True)
class PrivacyEvent:
    """A composition of noisy steps, with the guarantee's unit, relation and release model.

    ``steps`` holds ``(step, count)`` pairs: ``count`` adaptive repetitions of ``step``.
    ``release`` says what the adversary sees, e.g. ``"all-iterates"`` for DP-SGD.
    """

    steps: tuple[tuple[NoisyStep, int], ...]
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    unit: Unit = Unit.RECORD
    release: str = "all-iterates"
    description: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.steps, (tuple, list)):
            raise ValueError(
                f"steps = {self.steps!r} is not a sequence of (NoisyStep, count) pairs"
            )
        if not self.steps:
            raise ValueError("steps = () is out of range: must hold at least one (step, count)")
        checked = []
        for entry in self.steps:
            if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
                raise ValueError(f"steps entry {entry!r} is not a (NoisyStep, count) pair")
            step, count = entry
            if not isinstance(step, NoisyStep):
                raise ValueError(f"steps entry {step!r} is not a NoisyStep")
            checked.append((step, check_int("steps", count, minimum=0, maximum=MAX_COUNT)))
        total = sum(count for _, count in checked)
        if total > MAX_COUNT:
            raise ValueError(
                f"steps = {total} in all is out of range: must be at most 2^63 - 1 = {MAX_COUNT}"
            )
        object.__setattr__(self, "steps", tuple(checked))
        object.__setattr__(self, "neighbouring", Neighbouring(self.neighbouring))
        object.__setattr__(self, "unit", Unit(self.unit))

    @property
    def total_steps(self) -> int:
        return sum(count for _, count in self.steps)

    @property
    def sampling_label(self) -> str:
        """A human label of the sampling scheme(s) involved, e.g. ``"poisson (q=0.01)"``."""
        labels = []
        for step, _ in self.steps:
            label = step.effective_sampling.value
            if step.effective_sampling is not Sampling.NONE:
                label += f" (q={step.sampling_rate:.6g})"
            if label not in labels:
                labels.append(label)
        return ", ".join(labels)


def dpsgd_event(
    noise_multiplier: float,
    sampling_rate: float,
    steps: int,
    *,
    sampling: Sampling | str = Sampling.POISSON,
    neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
    unit: Unit | str = Unit.RECORD,
    noise: Noise | str = Noise.GAUSSIAN,
) -> PrivacyEvent:
    """``steps`` identical DP-SGD steps (all iterates released)."""
    step = NoisyStep(noise_multiplier, sampling_rate, Sampling(sampling), Noise(noise))
    return PrivacyEvent(
        ((step, check_int("steps", steps, minimum=0, maximum=MAX_COUNT)),),
        neighbouring=Neighbouring(neighbouring),
        unit=Unit(unit),
    )


def noise_multiplier_from_paper_sigma(sigma: float) -> float:
    """Seed 000 sigma (noise std / 2C) to the Opacus noise multiplier z = 2 sigma (spec 3.2)."""
    return 2.0 * check_positive("sigma", sigma)


def compose_events(events: Sequence[PrivacyEvent]) -> PrivacyEvent:
    """The adaptive composition of ``events`` (identical steps merged into one count).

    All events must share the unit, neighbouring relation and release: the composition is
    what one adversary sees when the same neighbouring change enters every one of them (e.g.
    one record held by several clients, each releasing its own event).
    """
    events = list(events)
    if not events:
        raise ValueError("events = [] is out of range: must hold at least one event")
    first = events[0]
    counts: dict[NoisyStep, int] = {}
    for j, event in enumerate(events):
        if not isinstance(event, PrivacyEvent):
            raise ValueError(f"events[{j}] = {event!r} is not a PrivacyEvent")
        if (event.unit, event.neighbouring, event.release) != (
                first.unit, first.neighbouring, first.release):
            raise ValueError(
                f"events[{j}] has unit {event.unit.value}, neighbouring "
                f"{event.neighbouring.value}, release {event.release!r}: must match events[0] "
                f"({first.unit.value}, {first.neighbouring.value}, {first.release!r})")
        for step, count in event.steps:
            counts[step] = counts.get(step, 0) + count
    if len(events) == 1:
        return first
    return PrivacyEvent(tuple(counts.items()), neighbouring=first.neighbouring,
                        unit=first.unit, release=first.release,
                        description=first.description)
