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
* Zheng et al. 2021 write sigma for noise std / (2C); their sigma equals z / 2
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
    REPLACE_WITH_ZERO = "replace-with-zero"  # one client's contributions zeroed (DP-FTRL, MF)


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


def noise_multiplier_from_paper_sigma(paper_sigma: float) -> float:
    """Zheng et al. 2021's sigma (noise std / 2C) to the noise multiplier z = 2 sigma: the
    conversion of ``privfl account fedfdp --paper-sigma`` (docs/papers.md)."""
    return 2.0 * check_positive("paper_sigma", paper_sigma)


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


# ------------------------------------------------------------------------------ the event tree
# A :class:`PrivacyEvent` is a leaf: a composition of noisy steps that the numerical accountants
# (rdp, pld, gdp-clt) answer. The nodes below describe what the papers' runs release on top of
# it; :func:`privfl.accounting.dispatch.evaluate` reads every node, and the accountants that
# interpret the paper-specific leaves are registered by name (:mod:`privfl.accounting.registry`).


@dataclass(frozen=True)
class WorstOverClients:
    """Parallel composition: each record belongs to one client, whose release is ``events[j]``;
    the record-level guarantee is the worst client's (Zheng et al. 2021 Theorem 2's mu_max,
    Xie et al. 2023 section 3.5). Repeated events are accounted once."""

    events: tuple[PrivacyEvent, ...]
    note: str = "max over clients of the per-client composition"

    def __post_init__(self) -> None:
        events = tuple(self.events) if isinstance(self.events, (tuple, list)) else None
        if not events or not all(isinstance(e, PrivacyEvent) for e in events):
            raise ValueError(f"events = {self.events!r} is not allowed: must be a non-empty "
                             "sequence of PrivacyEvent, one per client")
        object.__setattr__(self, "events", events)

    def client_event(self, client: int, holders: int) -> PrivacyEvent:
        """Client position ``client``'s event (every record has one holder here, so
        ``holders`` does not change it; :class:`HeldByClients` reads it)."""
        return self.events[client]


@dataclass(frozen=True)
class HeldByClients(WorstOverClients):
    """A record held by up to k clients (an overlapping partition): each record composes its
    holders' events; ``holder_sets`` lists the sets of client positions that share a record
    (empty: :class:`WorstOverClients`). The guarantee is the worst record's.

    Client position j's event is ``events[j]`` when it holds a record alone. ``by_holders``
    holds ``(h, events_h)`` pairs for a release whose client event depends on the holder count
    h (InsDP-FedSGD's global model: the mean's m noises are split among the holders in the
    cohort, Xie et al. 2023 Proposition 2): ``events_h[j]`` is client j's event when it is one
    of h holders of a record (:meth:`client_event`); a count not listed uses ``events``."""

    holder_sets: tuple[tuple[int, ...], ...] = ()
    by_holders: tuple[tuple[int, tuple[PrivacyEvent, ...]], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "holder_sets", tuple(tuple(s) for s in self.holder_sets))
        pairs = []
        for entry in self.by_holders:
            if not (isinstance(entry, (tuple, list)) and len(entry) == 2):
                raise ValueError(f"by_holders entry {entry!r} is not a (holders, events) pair")
            holders, events = entry
            holders = check_int("by_holders", holders, minimum=2, maximum=MAX_COUNT)
            events = tuple(events) if isinstance(events, (tuple, list)) else None
            if events is None or len(events) != len(self.events) or not all(
                    isinstance(e, PrivacyEvent) for e in events):
                raise ValueError(
                    f"by_holders entry for holders = {holders} is not allowed: must be a "
                    f"sequence of {len(self.events)} PrivacyEvent, one per client (as events)")
            if holders in dict(pairs):
                raise ValueError(f"by_holders lists holders = {holders} twice")
            pairs.append((holders, events))
        object.__setattr__(self, "by_holders", tuple(pairs))

    def client_event(self, client: int, holders: int) -> PrivacyEvent:
        """Client position ``client``'s event when it is one of ``holders`` holders of a
        record: ``by_holders``' events for that count, else ``events``."""
        return dict(self.by_holders).get(holders, self.events)[client]


@dataclass(frozen=True)
class Scope:
    """``event`` as seen by one adversary (``name``: e.g. ``"weak"``, ``"run"``): every result
    of ``event`` carries ``extras["scope"] = name``."""

    name: str
    event: object

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name = {self.name!r} is not allowed: must be a non-empty string")


@dataclass(frozen=True)
class Scopes:
    """Several scopes of one run, answered method by method (for each method every scope, in
    order), as a plan's results list them."""

    scopes: tuple[Scope, ...]

    def __post_init__(self) -> None:
        scopes = tuple(self.scopes) if isinstance(self.scopes, (tuple, list)) else ()
        if not scopes or not all(isinstance(s, Scope) for s in scopes):
            raise ValueError(f"scopes = {self.scopes!r} is not allowed: must be a non-empty "
                             "sequence of Scope")
        object.__setattr__(self, "scopes", scopes)


@dataclass(frozen=True)
class RandomParticipationStep:
    """``iterations`` iterations of DP-DSGD with random client participation (Hasircioglu and
    Gunduz 2022): each of ``records`` records' clients takes part with probability
    ``client_rate`` and each record with ``record_rate``; the server adds N(0, noise^2 I) to the
    sum of gradients clipped to ``clip_norm``. ``schemes`` are the participation accountants to ask
    (per iteration), ``composition`` the composition accountants (rdp, pld) over the
    iterations, ``basic_composition`` whether schemes without a dominating pair
    (per-s1-convexity, theorem-4.1) are composed by basic composition; ``server`` the threat
    model. Answered by the ``participation`` accountant."""

    client_rate: float
    record_rate: float
    records: int
    noise: float
    clip_norm: float = 1.0
    iterations: int = 1
    schemes: tuple[str, ...] | str = "all"
    composition: tuple[str, ...] = ("rdp", "pld")
    server: str = "trusted"
    basic_composition: bool = True

    def __post_init__(self) -> None:
        check_int("iterations", self.iterations, minimum=1, maximum=MAX_COUNT)
        if not isinstance(self.basic_composition, bool):
            raise ValueError(f"basic_composition = {self.basic_composition!r} is not allowed: "
                             "must be true or false")
        if not isinstance(self.schemes, str):
            object.__setattr__(self, "schemes", tuple(self.schemes))
        object.__setattr__(self, "composition", tuple(self.composition))


@dataclass(frozen=True)
class LastIterateRelease:
    """Only the last model of projected noisy SGD is released (Asoodeh et al. 2021): ``run`` is a
    :class:`privfl.accounting.contraction.ProjectedNoisySGD`; ``release`` ``"last"`` or
    ``"random-stop"``; ``baselines`` the all-iterates comparisons, each under the step
    accountants ``methods``. Answered by the ``contraction`` accountant."""

    run: object
    release: str = "last"
    secret_assignment: bool = True
    baselines: tuple[str, ...] | None = None
    unit: Unit = Unit.RECORD
    methods: tuple[str, ...] = ("rdp", "pld")

    def __post_init__(self) -> None:
        object.__setattr__(self, "unit", Unit(self.unit))
        object.__setattr__(self, "methods", tuple(self.methods))
        if self.baselines is not None:
            object.__setattr__(self, "baselines", tuple(self.baselines))


@dataclass(frozen=True)
class CorrelatedNoiseRelease:
    """Every iterate of a correlated-noise mechanism without sampling (DP-FTRL's tree, (Band)MF):
    ``C x + N(0, z^2)`` over ``steps`` rounds, ``sensitivity`` the L2 sensitivity of C under the
    participation bound ``participation`` (a label saying exact or bound), replace-with-zero,
    client level; ``sampling_rate`` < 1: BandMF's cyclic Poisson amplification in ``band``
    groups. Answered by the ``correlated-noise`` accountant
    (:mod:`privfl.accounting.correlated.accountant`)."""

    noise_multiplier: float
    sensitivity: float
    steps: int
    participation: str
    sampling_rate: float = 1.0
    band: int = 1
    max_column_norm: float = 1.0
    methods: tuple[str, ...] = ("gdp", "pld", "rdp")
    neighbouring: Neighbouring = Neighbouring.REPLACE_WITH_ZERO

    def __post_init__(self) -> None:
        check_int("steps", self.steps, minimum=1, maximum=MAX_COUNT)
        check_positive("noise_multiplier", self.noise_multiplier)
        check_positive("sensitivity", self.sensitivity)
        check_rate("sampling_rate", self.sampling_rate)
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "neighbouring", Neighbouring(self.neighbouring))


#: Every node :func:`privfl.accounting.dispatch.evaluate` reads.
EVENT_TYPES = (PrivacyEvent, WorstOverClients, HeldByClients, Scope, Scopes,
               RandomParticipationStep, LastIterateRelease, CorrelatedNoiseRelease)
