"""When a run of :class:`~privfl.report.experiment.Experiment` stops, before its next round.

All rounds ran, the target accuracy was reached, the next round would exceed the privacy budget
(``stop.epsilon`` on the tightest rigorous bound of the plan's primary scope, ``stop.mu`` on its
largest Gaussian-DP mu; that round is not run), or ``run.max_rounds`` rounds ran in this
invocation.
"""

from __future__ import annotations

from privfl.fl.algorithms.base import budget_results, finite, tightest_bound


class StoppingRules:
    """The stopping rules of :class:`~privfl.report.experiment.Experiment` (a mixin: it uses
    the experiment's ``config``, ``algorithm`` and ``metrics``)."""

    def _target_reached(self) -> bool:
        target = self.config.stop.target_accuracy
        if target is None or not self.metrics:
            return False
        value = self.metrics[-1].get(f"{self.config.stop.target_metric}_accuracy")
        return finite(value) and value >= target

    def budget_exceeded(self, rounds: int) -> str | None:
        """Why running up to ``rounds`` rounds would exceed the budget (None if it would not).

        The budget applies to the results of every accountant in the plan's primary scope:
        ``stop.epsilon`` to the tightest rigorous bound among them, ``stop.mu`` to the largest
        Gaussian-DP mu among them. Without ``stop.mu``, a bound of the per-round set
        (:mod:`privfl.fl.algorithms.cadence`) within ``stop.epsilon`` settles it (the tightest
        is no larger), so the accountants recomputed from scratch run only near the budget.
        """
        stop = self.config.stop
        if stop.epsilon is None and stop.mu is None:
            return None
        plan = self.algorithm.plan
        if stop.mu is None:
            cheap = tightest_bound(budget_results(plan, self.algorithm.privacy(rounds,
                                                                                full=False)))
            if cheap is not None and cheap.epsilon <= stop.epsilon:
                return None
        primary = budget_results(plan, self.algorithm.privacy(rounds))
        scope = f", {plan.primary_scope}" if plan.primary_scope else ""
        if stop.mu is not None:
            with_mu = [r for r in primary if "mu" in r.extras]
            if with_mu:
                worst = max(with_mu, key=lambda r: r.extras["mu"])
                mu = worst.extras["mu"]
                if mu > stop.mu:
                    return (f"round {rounds} would reach mu = {mu:.6g} ({worst.method} "
                            f"{worst.kind}{scope}) > stop.mu = {stop.mu:g}")
        if stop.epsilon is not None:
            tightest = tightest_bound(primary)
            if tightest is not None and tightest.epsilon > stop.epsilon:
                return (f"round {rounds} would spend epsilon = {tightest.epsilon:.6g} "
                        f"({tightest.method} bound{scope}, delta = {tightest.delta:g}) > "
                        f"stop.epsilon = {stop.epsilon:g}")
        return None

    def next_stop(self, ran: int) -> tuple[str, str] | None:
        """``(reason, detail)`` if the run must stop before the next round, else None."""
        algo, config = self.algorithm, self.config
        if algo.round >= config.federated.rounds:
            return "rounds", f"all {config.federated.rounds} rounds ran"
        if self._target_reached():
            return "target", (f"{config.stop.target_metric} accuracy reached "
                              f"{config.stop.target_accuracy:g}")
        reason = self.budget_exceeded(algo.round + 1)
        if reason:
            return "budget", reason
        if config.run.max_rounds is not None and ran >= config.run.max_rounds:
            return "max_rounds", f"run.max_rounds = {config.run.max_rounds} rounds ran"
        return None
