"""A run's privacy budget (``privacy.epsilon_budget``), enforced by a privacy filter.

The budget E (at ``privacy.delta``) is fixed when the run is created. The run may then be
extended (``--resume --set federated.rounds=...``) and its stop rules changed any number of
times, after reading anything it released; it stops (reason ``budget``) before the round that
would pass the filter (:mod:`privfl.accounting.filters`), and its headline is the filter's
bound: epsilon = E at delta, for that fully adaptive use.

Which filter a plan gets (:func:`plan_filter`):

* a plan whose rounds are one :class:`~privfl.accounting.events.PrivacyEvent` of independent
  noisy steps that the RDP accountant answers (DP-FedAvg), or the worst record over clients of
  such events (InsDP-FedSGD / -FedAvg's per-client accountants, :func:`worst_rdp`): a Rényi
  filter (Feldman and Zrnic 2021) at the order fixed at creation
  (:func:`~privfl.accounting.filters.choose_order`: the best order for the horizon E affords
  under fixed-horizon RDP); a round costs its RDP at that order (the worst record's), a
  re-drawn round one more;
* an unsampled correlated-noise plan (DP-FTRL, BandMF without amplification), mu-GDP after
  any number of rounds: a Gaussian filter (Smith and Thakurta 2022; Whitehouse et al. 2023);
  the rounds cost ``mu(r)^2``, the square of the plan's exact mu after r rounds (its re-drawn
  attempts composed), which bounds the sum of the rounds' conditional ``mu_i^2`` for every
  neighbouring pair;
* any other plan (PriFedSync's federated f-DP scopes, DP-DSGD's random participation, the
  last-iterate contraction of projected SGD, sampled BandMF) is refused: no filter here covers
  its accountant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfl.accounting.events import (
    CorrelatedNoiseRelease,
    PrivacyEvent,
    Scope,
    WorstOverClients,
)
from privfl.accounting.filters import GaussianFilter, RenyiFilter, choose_order, rounds_within
from privfl.accounting.results import PrivacyResult

__all__ = ["PlanFilter", "budget_note", "plan_filter", "run_budget", "run_filter", "worst_rdp"]

#: the method name of a filter's bound
METHODS = {"renyi": "rdp-filter", "gdp": "gdp-filter"}


@dataclass(frozen=True)
class PlanFilter:
    """A plan's budget: the filter (:class:`RenyiFilter` or :class:`GaussianFilter`) and
    what a number of rounds spends on it (:meth:`spent`)."""

    plan: Any
    filter: RenyiFilter | GaussianFilter
    horizon: int  # rounds the fixed-horizon RDP / GDP of the plan affords within E

    @property
    def kind(self) -> str:
        return "renyi" if isinstance(self.filter, RenyiFilter) else "gdp"

    def spent(self, rounds: int, redrawn: Sequence[int] = ()) -> float:
        """What ``rounds`` rounds and the re-drawn rounds ``redrawn`` spend: the RDP at the
        filter's order (Rényi), or the composed mu (Gaussian)."""
        if self.kind == "renyi":
            from privfl.accounting.rdp.accountant import RdpAccountant

            released = rounds + len(redrawn)
            if released == 0:
                return 0.0
            return float(worst_rdp(self.plan.event(released),
                                   RdpAccountant(orders=[self.filter.order]))[0])
        return _gdp_mu(self.plan, rounds, redrawn)

    def allows(self, rounds: int, redrawn: Sequence[int] = ()) -> bool:
        """Whether running up to ``rounds`` rounds stays within the budget."""
        return self.filter.allows(self.spent(rounds, redrawn))

    def problem(self, rounds: int, redrawn: Sequence[int] = ()) -> str | None:
        """Why running up to ``rounds`` rounds would pass the budget (None if it would not)."""
        spent = self.spent(rounds, redrawn)
        if self.filter.allows(spent):
            return None
        what = (f"RDP {spent:.6g} at order {self.filter.order:g} > its budget "
                f"{self.filter.budget:.6g}" if self.kind == "renyi"
                else f"mu = {spent:.6g} > its budget mu_B = {self.filter.mu_budget:.6g}")
        return (f"round {rounds} would pass privacy.epsilon_budget = {self.filter.epsilon:g} "
                f"(delta = {self.filter.delta:g}): {METHODS[self.kind]} {what}")

    def rounds_allowed(self, redrawn: Sequence[int] = ()) -> int:
        """The most rounds the budget allows (with the re-drawn rounds ``redrawn``)."""
        return rounds_within(lambda r: self.allows(r, redrawn))

    def result(self, template: PrivacyResult | None = None) -> PrivacyResult:
        """The headline's bound: epsilon = E at delta, labelled as a filter's bound for fully
        adaptive use (unit, neighbouring, sampling and release from ``template``, one of the
        plan's results)."""
        f = self.filter
        how = (f"a Rényi filter (Feldman and Zrnic 2021) at order {f.order:g}, fixed when the "
               f"run was created, with RDP budget {f.budget:.6g}, converted (Balle et al. 2020)"
               if self.kind == "renyi" else
               f"a Gaussian-DP filter (Smith and Thakurta 2022; Whitehouse et al. 2023) with "
               f"mu_B = {f.mu_budget:.6g}, exact conversion (Balle and Wang 2018)")
        note = (f"privacy budget E = {f.epsilon:g} at delta = {f.delta:g}, fixed when the run "
                f"was created, enforced by {how}: a bound for fully adaptive use (the run may "
                "be extended and its stop rules changed after reading its results, and it "
                "stops before a round would pass E)")
        extras = {"filter": self.kind, **({"order": f.order, "rdp_budget": f.budget}
                                          if self.kind == "renyi" else {"mu": f.mu_budget})}
        extras["scope"] = getattr(self.plan, "primary_scope", "")  # the filter's events
        return PrivacyResult(
            method=METHODS[self.kind], kind="bound", epsilon=f.epsilon, delta=f.delta,
            unit=template.unit if template else "", neighbouring=template.neighbouring
            if template else "", sampling=template.sampling if template else "",
            release=template.release if template else "", steps=template.steps
            if template else 0, extras=extras, note=note)

    def record(self) -> dict[str, Any]:
        """What is fixed at creation (run.json's plan record): the filter and its horizon."""
        return {**self.filter.to_dict(), "horizon": self.horizon}

    def card_rows(self, rounds: int, redrawn: Sequence[int] = ()) -> dict[str, str]:
        """The privacy card's budget rows for ``rounds`` rounds (at most those it allows)."""
        f = self.filter
        spent = self.spent(rounds, redrawn)
        share = (spent / f.budget if self.kind == "renyi" else (spent / f.mu_budget) ** 2)
        fixed = (f"order {f.order:g}" if self.kind == "renyi" else f"mu_B {f.mu_budget:.4g}")
        return {"privacy budget": (
            f"epsilon_budget = {f.epsilon:g} at delta = {f.delta:g}, fixed at creation; "
            f"{METHODS[self.kind]} ({fixed}); "
            f"{100 * share:.1f} % of it for {rounds} rounds; at most "
            f"{self.rounds_allowed(redrawn)} rounds (fixed-horizon "
            f"{'RDP' if self.kind == 'renyi' else 'Gaussian DP'} at E: {self.horizon})")}


def budget_note(plan: Any, results: Sequence[PrivacyResult]) -> str:
    """The headline's note of a budgeted run: the filter's bound is the headline; the
    fixed-horizon bound of what ran is shown for reference only (``results``: the plan's)."""
    from privfl.algorithms.base import budget_results, tightest_bound

    best = tightest_bound(budget_results(plan, results))
    fixed = (f"; the fixed-horizon bound of the rounds accounted, epsilon = {best.epsilon:.4g} "
             f"({best.method}), holds only if the number of rounds was fixed before any result "
             "was read" if best is not None else "")
    return ("The headline is the privacy budget's filter bound: it holds however the run was "
            f"extended or its stops changed after reading its results{fixed}.")


def _gdp_mu(plan: Any, rounds: int, redrawn: Sequence[int]) -> float:
    """The exact mu of a correlated-noise plan after ``rounds`` rounds and its re-drawn
    attempts (:func:`~privfl.algorithms.base.lost_attempts`), composed in squares."""
    from privfl.algorithms.base import lost_attempts

    ran = [*lost_attempts(redrawn), *([rounds] if rounds else [])]
    events = [plan.event(r) for r in ran]
    return math.sqrt(sum((e.sensitivity / e.noise_multiplier) ** 2 for e in events))


def worst_rdp(node: Any, accountant: Any) -> np.ndarray:
    """The RDP curve (at ``accountant.orders``) of the worst record of an event tree: a
    :class:`~privfl.accounting.events.PrivacyEvent` itself; a
    :class:`~privfl.accounting.events.Scope` its event; a worst-over-clients node (InsDP's
    per-client accountants, parallel composition) the largest of its clients' curves and of
    each shared record's sum over its holders. An upper bound of every record's curve at every
    order, so a filter on it is a filter for each record (Feldman and Zrnic 2021, individual
    filters). A ValueError for any other node."""
    if isinstance(node, PrivacyEvent):
        return accountant.rdp_curve(node)
    if isinstance(node, Scope):
        return worst_rdp(node.event, accountant)
    if isinstance(node, WorstOverClients):
        cache: dict[PrivacyEvent, np.ndarray] = {}

        def curve(event: PrivacyEvent) -> np.ndarray:
            if event not in cache:
                cache[event] = accountant.rdp_curve(event)
            return cache[event]

        worst = np.max([curve(e) for e in node.events], axis=0)
        for holders in getattr(node, "holder_sets", ()):
            shared = np.sum([curve(node.client_event(j, len(holders))) for j in holders], axis=0)
            worst = np.maximum(worst, shared)
        return worst
    raise ValueError(f"{type(node).__name__} is not a composition of noisy steps")


def _refusal(plan: Any) -> str | None:
    """Why no filter covers ``plan``'s accountant (None if one does)."""
    if not getattr(plan, "private", False) or getattr(plan, "delta", None) is None:
        return "the run is not private"
    if getattr(plan, "hidden_state", False):
        return ("its guarantee is a last-iterate bound (Asoodeh et al. 2021), which does not "
                "compose round by round")
    event = getattr(plan, "event", None)
    if not callable(event):
        return "its plan has no per-round event"
    one = event(1)
    if isinstance(one, CorrelatedNoiseRelease):
        return (None if one.sampling_rate >= 1.0 else
                "its amplified accountant (cyclic Poisson sampling) is not a Gaussian-DP "
                "composition; use federated.sampling_rate: 1")
    from privfl.accounting.rdp.accountant import RdpAccountant

    if hasattr(plan, "restarted_results"):
        return "its re-drawn rounds restart a correlated noise that the Rényi filter does not read"
    try:
        worst_rdp(one, RdpAccountant())
    except ValueError as error:
        return (f"its accountant ({type(one).__name__}) is not a composition of noisy steps "
                f"that the Rényi filter covers ({error})")
    from privfl.algorithms.base import budget_results, tightest_bound

    if tightest_bound(budget_results(plan, plan.results(1))) is None:
        return "it has no rigorous bound (only estimates)"
    return None


def plan_filter(plan: Any, epsilon: float, delta: float, algorithm: str = "") -> PlanFilter:
    """The filter of ``plan`` with budget ``epsilon`` at ``delta`` (module docstring); a
    ValueError naming ``privacy.epsilon_budget`` when no filter covers the plan's accountant or
    the budget affords no round."""
    reason = _refusal(plan)
    name = f"federated.algorithm = {algorithm!r}" if algorithm else "this plan"
    if reason:
        raise ValueError(f"privacy.epsilon_budget = {epsilon:g} is not allowed for {name}: "
                         f"{reason}; the budget's filter supports DP-FedAvg and InsDP (Rényi "
                         "filter), DP-FTRL and unsampled BandMF (Gaussian-DP filter); use "
                         "stop.epsilon (a fixed-horizon stop, not for extensions decided on "
                         "the results)")
    try:
        if isinstance(plan.event(1), CorrelatedNoiseRelease):
            f = GaussianFilter(epsilon, delta)
            horizon = rounds_within(lambda r: f.allows(_gdp_mu(plan, r, ())))
            if horizon == 0:
                raise ValueError(f"epsilon = {epsilon:g} is out of range: one round already "
                                 f"costs mu = {_gdp_mu(plan, 1, ()):.6g} > mu_B = "
                                 f"{f.mu_budget:.6g}; the budget must afford at least one round")
            return PlanFilter(plan, f, horizon)
        from privfl.accounting.rdp.accountant import RdpAccountant

        accountant = RdpAccountant()
        order, horizon = choose_order(lambda r: worst_rdp(plan.event(r), accountant),
                                      accountant.orders, epsilon, delta)
        return PlanFilter(plan, RenyiFilter(order, epsilon, delta), horizon)
    except ValueError as error:
        raise ValueError(f"privacy.epsilon_budget = {epsilon:g}: {error}") from None


def run_filter(config: Any, plan: Any, recorded: dict[str, Any] | None = None
               ) -> PlanFilter | None:
    """The budget's filter of a run (``config.privacy.epsilon_budget``; None without one).
    ``recorded``: the filter as fixed at creation (run.json, :mod:`privfl.runs.first_plan`):
    its order and horizon are kept, never chosen again."""
    budget = config.privacy.epsilon_budget
    if budget is None:
        return None
    fresh = plan_filter(plan, budget, config.privacy.delta, config.federated.algorithm)
    if not recorded or recorded.get("filter") != fresh.kind:
        return fresh
    if fresh.kind == "renyi":
        return PlanFilter(plan, RenyiFilter(float(recorded["order"]), budget,
                                            config.privacy.delta), int(recorded["horizon"]))
    return PlanFilter(plan, fresh.filter, int(recorded["horizon"]))


def run_budget(config: Any, plan: Any, directory: Any) -> PlanFilter | None:
    """The budget's filter of the run in ``directory`` (:func:`run_filter` with the filter
    recorded at its creation, :func:`~privfl.runs.first_plan.first_plan`)."""
    from privfl.runs.first_plan import first_plan

    recorded = first_plan(directory)
    return run_filter(config, plan, recorded.filter if recorded else None)
