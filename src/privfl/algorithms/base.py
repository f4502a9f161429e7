"""The algorithm seam: one small protocol that every federated algorithm of privfl implements.

Modelled on pfl-research's ``FederatedAlgorithm``, TensorFlow Federated's learning process and
Flower's strategies. A round is four stages, run by :meth:`RoundAlgorithm.run_round`::

    cohort  <- select_cohort()              who takes part (the sampling the accountant assumes)
    updates <- local_work(cohort)           the clients' work, on the vectorised engine
    aggregate(cohort, updates)              the server's step (a DP wrapper may clip and noise)
    metrics <- evaluate(cohort, updates)    monitoring values (not covered by the guarantee)

and the algorithm's privacy is one :class:`PrivacyPlan`: the settings object from which both the
training (noise, clipping, sampling, step counts) and the accountant's events are derived, so
the two cannot disagree (design principle 1). The runner (:mod:`privfl.runs.experiment`,
``privfl run``, ``privfl compare``, ``privfl check-privacy``, the privacy card and report.md)
only knows this protocol; nothing in it names an algorithm, an accountant or a paper's metric.

Per-round privacy metrics are generic (:func:`privacy_metrics`): ``metrics["privacy"]`` is a list
of ``{"method", "kind", "scope", "epsilon", "delta"[, "mu"]}``, ``metrics["epsilon"]`` is the
rigorous bound of one accountant across the rows (:func:`series_accountant`: one series, the
same in two runs of one plan of different lengths; ``metrics["epsilon_method"]`` names it) and
``metrics["mu"]`` the largest Gaussian-DP mu there, when an accountant gives one.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from privfl.accounting.results import PrivacyResult, zero_rounds
from privfl.algorithms.cadence import FULL, PER_ROUND, AccountingCadence

if TYPE_CHECKING:  # pragma: no cover
    from privfl.config.schema import ExperimentConfig
    from privfl.data.datasets import FederatedDataset

__all__ = [
    "FederatedAlgorithm",
    "PrivacyPlan",
    "RoundAlgorithm",
    "as_replace_one",
    "budget_results",
    "headline_scopes",
    "lost_attempts",
    "redrawn_of",
    "privacy_metrics",
    "row_privacy_metrics",
    "series_accountant",
    "privacy_entries",
    "released_results",
    "tightest_bound",
    "zero_rounds",
]


@runtime_checkable
class PrivacyPlan(Protocol):
    """An algorithm's privacy: what the accountant is told, derived from the training settings.

    Attributes
    ----------
    private
        False for a non-private baseline (``results`` is then empty).
    secure
        Secure mode: the randomness the guarantee relies on comes from ``os.urandom``.
    unit
        ``"record"`` or ``"client"``.
    primary_scope
        The ``extras["scope"]`` of the results that budgets and headline numbers use (``""``
        when the results carry no scope, e.g. one guarantee per run). A plan may also name
        ``headline_scopes``: every scope whose results are valid bounds for what is released
        (default: the primary scope alone); the headline is the tightest bound among them.
    hidden_state
        Optional (default False): the guarantee assumes the intermediate state (models,
        schedule, generator states) is never published, as a last-iterate release does; the
        runner then deletes that state when the run finishes (:mod:`.outputs`).
    delta
        The delta of the reported (epsilon, delta) pairs (None: accounting off).

    A plan that composes accountants whose answer is recomputed from scratch for every round
    count (the sampled PLD) also defines ``round_results(rounds)`` and ``round_skips``: what a
    per-round metrics row carries and what it leaves out
    (:mod:`privfl.algorithms.plan_results`, :mod:`privfl.algorithms.cadence`).

    A plan whose events may be re-read under replace-one neighbours (certification of
    privfl's replacing attackers, Xie et al. 2023 with the replace adversary) also defines
    ``replace_one_events(rounds)``: its primary scope's events with the relation set to
    replace-one (:func:`as_replace_one`). A plan without it declares that its analysis fixes
    the relation (e.g. DP-DSGD's random participation), so only the 2k add/remove reading
    applies.
    """

    private: bool
    secure: bool
    unit: str
    primary_scope: str
    delta: float | None

    def results(self, rounds: int) -> list[PrivacyResult]:
        """Labelled guarantees after ``rounds`` rounds (empty when not private)."""
        ...

    def card(self, rounds: int) -> dict[str, Any]:
        """Privacy-card rows (unit, neighbouring, sampling, noise, steps, release, ...)."""
        ...


@runtime_checkable
class FederatedAlgorithm(Protocol):
    """What the runner needs from an algorithm (see the module docstring).

    Class attributes: ``name`` (the ``federated.algorithm`` registry key), ``title`` (method
    and authors, for reports), ``metric_labels`` (accuracy-like metric keys -> labels; the
    first is the headline; ``stop.target_metric`` names one of them without ``_accuracy``),
    ``local_only`` (``None`` when the local work goes through :func:`privfl.backends.train_clients`
    and a distributed backend may shard it, else the reason it runs in the driver's process).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    metric_labels: ClassVar[Mapping[str, str]]
    local_only: ClassVar[str | None]
    round: int
    plan: PrivacyPlan

    @classmethod
    def from_config(cls, config: ExperimentConfig, data: FederatedDataset) -> FederatedAlgorithm:
        ...

    @classmethod
    def privacy_plan(cls, config: ExperimentConfig, data: FederatedDataset) -> PrivacyPlan:
        """The plan alone (no model, no training): ``privfl check-privacy`` uses it."""
        ...

    def run_round(self) -> dict[str, Any]: ...

    def setup(self) -> dict[str, str]:
        """"What ran" rows for report.md (algorithm settings beyond data/model/training)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class RoundAlgorithm:
    """Base class implementing :meth:`run_round` from the four stages and the plan.

    Subclasses set ``name``, ``title``, ``metric_labels``, ``self.plan`` and ``self.round`` and
    implement :meth:`select_cohort`, :meth:`local_work`, :meth:`aggregate`, :meth:`evaluate`
    (plus ``from_config``, ``privacy_plan``, ``setup``, ``state_dict``, ``load_state_dict``).
    """

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    metric_labels: ClassVar[Mapping[str, str]] = {"global_accuracy": "global model"}
    local_only: ClassVar[str | None] = None
    plan: PrivacyPlan
    round: int = 0
    #: the rounds that produced output, were lost with their checkpoint and ran again with
    #: fresh randomness (a resumed secure run; redrawn.jsonl's order, :func:`redrawn_of`):
    #: each is one more release, composed by :meth:`privacy` (:func:`released_results`)
    redrawn_rounds: tuple[int | tuple[int, int], ...] = ()
    #: client-side protection of every upload (:mod:`privfl.algorithms.protection`; set by
    #: :func:`~privfl.algorithms.protection.attach_protection` from the ``protection``
    #: section) and its resolved settings for the report; None: no protection
    protection: Any = None
    protection_config: Any = None
    #: whether :meth:`local_work` applies :attr:`protection` (an algorithm that does not
    #: refuses the ``protection`` section instead of ignoring it)
    applies_protection: ClassVar[bool] = False
    #: which rounds' metrics rows carry every accountant (:mod:`.cadence`; the runner sets it
    #: from the configuration); None: every row does
    cadence: AccountingCadence | None = None

    # the four stages ---------------------------------------------------------------------
    def select_cohort(self) -> Any:
        """The clients (or their indices) that take part in the next round."""
        raise NotImplementedError

    def local_work(self, cohort: Any) -> Any:
        """The cohort's local work; returns what the server aggregates."""
        raise NotImplementedError

    def aggregate(self, cohort: Any, updates: Any) -> None:
        """The server's step: fold the updates into the model state."""
        raise NotImplementedError

    def evaluate(self, cohort: Any, updates: Any) -> dict[str, Any]:
        """Monitoring metrics of the round (computed without noise; not private)."""
        raise NotImplementedError

    def round_info(self, cohort: Any) -> dict[str, Any]:
        """Per-round facts about the cohort (size, redraws, ...); override to add some."""
        return {}

    #: Whether the printed guarantee covers each metrics key this algorithm writes
    #: (``key -> (covered, reason)``, on top of :data:`.outputs.GENERIC_METRICS`).
    METRIC_OUTPUTS: ClassVar[Mapping[str, tuple[bool, str]]] = {}

    def output_classes(self) -> dict[str, tuple[bool, str]]:
        """``metrics key -> (covered, reason)`` for this run (see :mod:`.outputs`); override
        when a key's status depends on the settings."""
        return dict(self.METRIC_OUTPUTS)

    def replica(self, seed: int, init_params: dict[str, Any] | None = None) -> RoundAlgorithm:
        """Optional: a Monte Carlo replica (:mod:`privfl.robustness.montecarlo`) that shares
        this algorithm's model, trainer, data and plan and owns the state the constructor would
        give it with ``seed`` and ``init_params`` (starting parameters, ``name -> tensor``)."""
        raise NotImplementedError(f"federated.algorithm = {self.name!r} has no Monte Carlo "
                                  "replicas (replica() is not implemented)")

    # optional: canary clients of an empirical audit (privfl.runs.canary_clients) ---------
    def canary_cohort(self, canaries: int, uniforms: Any) -> tuple[Any, Any]:
        """Optional (client-level audits, issue 47): which of ``canaries`` extra clients may
        take part in the round about to run, and which do, as two boolean arrays
        ``[canaries]``. *May* is public (the schedule: every round for Poisson sampling, the
        canary's group's rounds for cyclic groups); *do* applies the plan's own secret client
        sampling to them, canary j joining iff ``uniforms[j] < q`` (``uniforms``: one in
        [0, 1) per canary, the auditor's). A canary is then a client as the accountant
        assumes one: same sampling, same participation bound. Raises ValueError naming the
        setting when this algorithm's canaries would not be such clients."""
        raise NotImplementedError(f"federated.algorithm = {self.name!r} has no canary clients "
                                  "(canary_cohort() is not implemented)")

    def add_canaries(self, updates: Any, directions: Any, factor: float) -> None:
        """Optional (with :meth:`canary_cohort`): add the joining canaries' uploads to the
        round's :meth:`local_work` result ``updates`` before :meth:`aggregate`: canary i sends
        ``factor`` times the round's clip norm ``S_t`` times its unit direction
        ``directions[i]`` (a torch tensor ``[k, d]``), clipped and summed by the algorithm's
        own server code (so, with ``factor`` >= 1, its sensitivity is one client's exactly if
        the clipping works; Andrew et al. 2024's random canary clients send ``factor`` 1)."""
        raise NotImplementedError(f"federated.algorithm = {self.name!r} has no canary clients "
                                  "(add_canaries() is not implemented)")

    # the template ------------------------------------------------------------------------
    @property
    def private(self) -> bool:
        return self.plan.private

    @property
    def secure(self) -> bool:
        return self.plan.secure

    @property
    def redrawn(self) -> int:
        """How many rounds were re-drawn (:attr:`redrawn_rounds`)."""
        return len(self.redrawn_rounds)

    def released_rounds(self, rounds: int | None = None) -> int:
        """The noisy rounds released once ``rounds`` rounds (default: those completed) have run:
        ``rounds`` plus the re-drawn ones (:attr:`redrawn`)."""
        return (self.round if rounds is None else rounds) + self.redrawn

    def privacy(self, rounds: int | None = None, *, full: bool = True) -> list[PrivacyResult]:
        """The plan's labelled guarantees after ``rounds`` rounds (default: those completed),
        composed over every released round (:meth:`released_rounds`): every accountant, or
        (``full`` False) a per-round row's set (``plan.round_results`` where the plan has one,
        :mod:`.cadence`). The time spent in the plan's accountants adds up in
        :attr:`accounting_seconds` (summary.json reports it)."""
        started = time.perf_counter()
        try:
            return released_results(self.plan, self.round if rounds is None else rounds,
                                    self.redrawn_rounds, full=full)
        finally:
            self.accounting_seconds = (getattr(self, "accounting_seconds", 0.0)
                                       + time.perf_counter() - started)

    def epsilon_series(self) -> tuple[str, str] | None:
        """``(method, scope)`` of the rows' ``epsilon`` (:func:`series_accountant` on what a
        row carries after two and three rounds under :attr:`cadence`; cached)."""
        if "_epsilon_series" not in self.__dict__:
            every_row_full = self.cadence is None or self.cadence.every == 1
            try:
                rows = [released_results(self.plan, r, full=every_row_full) for r in (2, 3)]
            except ValueError:  # a plan whose schedule ends after one round
                rows = [released_results(self.plan, 1, full=every_row_full)] * 2
            self._epsilon_series = series_accountant(self.plan, *rows)
        return self._epsilon_series

    def run_round(self) -> dict[str, Any]:
        """Run round ``self.round + 1``: select, local work, aggregate, evaluate, account."""
        started = time.perf_counter()
        r = self.round + 1
        cohort = self.select_cohort()
        metrics: dict[str, Any] = {"round": r, **self.round_info(cohort)}
        updates = self.local_work(cohort)
        self.aggregate(cohort, updates)
        self.round = r
        metrics.update(self.evaluate(cohort, updates))
        full = self.cadence is None or self.cadence.full(r)
        metrics.update(row_privacy_metrics(self.plan, self.privacy(r, full=full),
                                           self.epsilon_series()))
        if metrics.get("privacy") and getattr(self.plan, "round_skips", ()):
            metrics["privacy_methods"] = FULL if full else PER_ROUND
        if self.redrawn:
            metrics["released_rounds"] = self.released_rounds(r)
        metrics["seconds"] = time.perf_counter() - started
        return metrics


# ------------------------------------------------------------------------ what was released
def redrawn_of(rows: Iterable[Mapping[str, Any]]) -> tuple[tuple[Any, Any], ...]:
    """The re-drawn rounds of redrawn.jsonl's ``rows`` (in order) as :func:`lost_attempts`
    reads them: ``(round, released_rounds)`` of each row (``released_rounds`` is ``round``
    where the row has none: it was logged before any round was re-drawn). The runner, its
    resume and ``check-privacy`` all read the rows with it."""
    rows = list(rows)
    bad = next((row for row in rows if not isinstance(row, Mapping)), None)
    if bad is not None:
        raise ValueError(f"rows: re-drawn row {bad!r} is not allowed: every row of "
                         "redrawn.jsonl must be a JSON object (a logged metrics row)")
    return tuple((row.get("round"), row.get("released_rounds", row.get("round")))
                 for row in rows)


def lost_attempts(redrawn: Sequence[int | tuple[int, int]]) -> tuple[int, ...]:
    """The lost attempts of a resumed run, each by its last round, from the re-drawn rounds in
    the order they were lost (redrawn.jsonl): an attempt is a run of consecutive rounds lost
    back to one checkpoint, and a round that does not continue the previous one (round
    ``r != previous + 1``: the rounds restart, repeat, or jump forward past a gap, i.e. a
    second kill after a later checkpoint: re-drawn rounds 3, 4, 6 are attempts ending at 4
    and 6) starts another. Each item is a round number or, from :func:`redrawn_of`, the pair
    ``(round, released_rounds)`` of its row: ``released_rounds - round`` is the number of
    rounds re-drawn before its attempt ran, the same for every round of one attempt and larger
    for every later one, so a change of it starts another attempt as well. Round numbers alone
    cannot show an attempt that continues the one before (rounds 3, 4 lost back to checkpoint
    2, then round 5 back to checkpoint 4: attempts ending at 4 and 5, not one ending at 5).
    Attempt ``L`` released rounds ``1..L`` (its rounds before the checkpoint it started from
    are those of the run that continued, counted again: an over-count)."""
    attempts: list[int] = []
    previous: tuple[int, int | None] | None = None
    for item in redrawn:
        r, released = item if isinstance(item, tuple) and len(item) == 2 else (item, None)
        if not isinstance(r, int) or isinstance(r, bool) or r < 1:
            raise ValueError(f"redrawn = {list(redrawn)!r}: every re-drawn round must be an "
                             "int >= 1")
        if released is not None and (not isinstance(released, int)
                                     or isinstance(released, bool) or released < r):
            raise ValueError(f"redrawn = {list(redrawn)!r}: every re-drawn round's "
                             "released_rounds must be an int >= its round")
        before = None if released is None else released - r
        if previous is not None and r == previous[0] + 1 and before == previous[1]:
            attempts[-1] = r
        else:
            attempts.append(r)
        previous = (r, before)
    return tuple(attempts)


def released_results(plan: PrivacyPlan, rounds: int,
                     redrawn: Sequence[int | tuple[int, int]] = (), *,
                     full: bool = True) -> list[PrivacyResult]:
    """The plan's results once ``rounds`` rounds ran and the rounds ``redrawn`` (redrawn.jsonl's
    order: round numbers or :func:`redrawn_of`'s pairs) were released as well and drawn
    again: the one place the
    runner, the per-round rows and ``check-privacy`` compose re-drawn rounds. A plan whose
    noise is correlated across rounds restarts it with the checkpoint, so each lost attempt is
    its own release: it defines ``restarted_results(rounds, attempts)``
    (:func:`lost_attempts`). Any other plan's rounds are independent releases:
    ``rounds + len(redrawn)`` of them (``full`` False: a per-round row's set,
    ``plan.round_results``, where the plan has one)."""
    if redrawn and hasattr(plan, "restarted_results"):
        return plan.restarted_results(rounds, lost_attempts(redrawn))
    released = rounds + len(redrawn)
    if not full and hasattr(plan, "round_results"):
        return plan.round_results(released)
    return plan.results(released)


# ------------------------------------------------------------------------ generic privacy metrics
def privacy_entries(results: Iterable[PrivacyResult]) -> list[dict[str, Any]]:
    """Compact per-round records: method, kind, scope, epsilon, delta (and mu when given)."""
    entries = []
    for r in results:
        entry: dict[str, Any] = {"method": r.method, "kind": r.kind,
                                 "scope": str(r.extras.get("scope", "")),
                                 "epsilon": float(r.epsilon), "delta": float(r.delta)}
        if "mu" in r.extras:
            entry["mu"] = float(r.extras["mu"])
        entries.append(entry)
    return entries


def headline_scopes(plan: PrivacyPlan) -> tuple[str, ...]:
    """The scopes whose results bound what is released: ``plan.headline_scopes`` if the plan
    names them, else its primary scope alone."""
    return tuple(getattr(plan, "headline_scopes", None) or (plan.primary_scope,))


def as_replace_one(events: Iterable[Any]) -> list[Any]:
    """The same privacy events under replace-one neighbours (every other field kept)."""
    from privfl.accounting.events import Neighbouring

    return [dataclasses.replace(event, neighbouring=Neighbouring.REPLACE_ONE) for event in events]


def budget_results(plan: PrivacyPlan, results: Sequence[PrivacyResult]) -> list[PrivacyResult]:
    """The results valid for what is released (:func:`headline_scopes`): what budgets and
    headlines use."""
    scopes = headline_scopes(plan)
    return [r for r in results if str(r.extras.get("scope", "")) in scopes]


def tightest_bound(results: Sequence[PrivacyResult]) -> PrivacyResult | None:
    """The rigorous bound with the smallest epsilon (None if there is no bound)."""
    bounds = [r for r in results if r.kind == "bound"]
    return min(bounds, key=lambda r: r.epsilon) if bounds else None


def series_accountant(plan: PrivacyPlan, first: Sequence[PrivacyResult],
                      second: Sequence[PrivacyResult]) -> tuple[str, str] | None:
    """``(method, scope)`` of the one bound a run's metrics rows give as ``epsilon``: among the
    rigorous bounds valid for what is released that a row carries after two rounds (``first``)
    and after three (``second``), the tightest after two; None when there is none. Rounds 2
    and 3, not 1: a plan may report per-iteration numbers after one round and compose from the
    second on (DP-DSGD: ``wcs`` at round 1, ``wcs-rdp`` after), and the series is the
    composition (such a run's first row has no ``epsilon``). It depends on the plan and the
    cadence only, so two runs of one plan of different lengths log the same series."""
    def keyed(results: Sequence[PrivacyResult]) -> dict[tuple[str, str], float]:
        return {(r.method, str(r.extras.get("scope", ""))): float(r.epsilon)
                for r in budget_results(plan, results) if r.kind == "bound"}

    one, two = keyed(first), keyed(second)
    common = [key for key in one if key in two]
    return min(common, key=lambda key: (one[key], key)) if common else None


def row_privacy_metrics(plan: PrivacyPlan, results: Sequence[PrivacyResult],
                        series: tuple[str, str] | None) -> dict[str, Any]:
    """A metrics row's :func:`privacy_metrics`, with ``epsilon`` / ``epsilon_method`` from the
    run's one series (:func:`series_accountant`; none without one): the rows' epsilons never
    switch accountants, and a full row's tighter from-scratch bound (the sampled PLD at the
    last planned round) stays in ``privacy`` and is the headline's (summary.json)."""
    out = privacy_metrics(plan, results)
    out.pop("epsilon", None)
    out.pop("epsilon_method", None)
    found = [r for r in results if series is not None and r.kind == "bound"
             and (r.method, str(r.extras.get("scope", ""))) == series]
    if found:
        out["epsilon"] = float(found[0].epsilon)
        out["epsilon_method"] = found[0].method
    return out


def privacy_metrics(plan: PrivacyPlan, results: Sequence[PrivacyResult]) -> dict[str, Any]:
    """Per-round privacy metrics (empty for a non-private run): ``privacy`` (every result,
    :func:`privacy_entries`), ``epsilon`` / ``epsilon_method`` (the tightest rigorous bound in
    the plan's primary scope), ``mu`` / ``mu_method`` (the largest Gaussian-DP mu there, if
    any result carries one) and ``scope`` (the primary scope)."""
    if not results:
        return {}
    primary = budget_results(plan, results)
    out: dict[str, Any] = {"privacy": privacy_entries(results), "scope": plan.primary_scope}
    best = tightest_bound(primary)
    if best is not None:
        out["epsilon"] = float(best.epsilon)
        out["epsilon_method"] = best.method
    with_mu = [r for r in primary if "mu" in r.extras]
    if with_mu:
        worst = max(with_mu, key=lambda r: r.extras["mu"])
        out["mu"] = float(worst.extras["mu"])
        out["mu_method"] = f"{worst.method} {worst.kind}"
    return out


def finite(value: Any) -> bool:
    """A real, finite number (not a bool)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))
