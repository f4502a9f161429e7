"""When a run of :class:`~privfl.runs.experiment.Experiment` stops.

Before the next round: all rounds ran, the target accuracy was reached, the next round would
exceed the privacy budget (``stop.epsilon`` on the tightest rigorous bound of the plan's primary
scope, ``stop.mu`` on its largest Gaussian-DP mu, ``privacy.epsilon_budget`` on its filter,
:mod:`privfl.runs.budget`; that round is not run), or ``run.max_rounds``
rounds ran in this invocation. After every round: it diverged (:func:`first_nonfinite`: a
non-finite training loss, or a non-finite parameter of the global model, which any non-finite
update makes non-finite); its state is never checkpointed and no model.pt is written.

What the guarantee covers after each stop (:func:`guarantee_rounds`): the budget, the planned
rounds and ``run.max_rounds`` depend only on public settings, so the rounds that ran are the
mechanism. A stop on ``stop.target_accuracy`` or on a divergence reads released results: the
round it stops at depends on the data, so epsilon for the rounds that ran is an after-the-fact
value, not a bound for the mechanism "run up to R rounds, stop on accuracy". Its guarantee is
the bound for every round the public rules allowed: ``federated.rounds``, fewer only where
``stop.epsilon`` / ``stop.mu`` would have stopped earlier.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from privfl._search import first_round_where
from privfl.algorithms.base import budget_results, finite, tightest_bound
from privfl.runs.rounding import format_bound
from privfl.runs.rundir import logged_number

#: ``stop_reason`` of a run whose training diverged (:func:`first_nonfinite`)
DIVERGED = "diverged"
#: ``stop_reason`` of a stop decided by released results (``stop.target_accuracy``, divergence)
DATA_DEPENDENT_STOPS = ("target", DIVERGED)


def first_nonfinite(row: Mapping[str, Any], params: Mapping[str, Any] | None = None
                    ) -> str | None:
    """The first non-finite quantity of a round, in words (None if all are finite): the
    training loss of a metrics ``row`` whose round had clients, then the global model's
    ``params`` (``name -> tensor``; a non-finite update makes them non-finite)."""
    if not isinstance(row, Mapping):
        raise ValueError(f"row = {type(row).__name__} is not allowed: must be a metrics row")
    if params is not None and not isinstance(params, Mapping):
        raise ValueError(f"params = {type(params).__name__} is not allowed: must be a mapping "
                         "name -> tensor")
    loss = logged_number(row.get("train_loss"))
    clients = row.get("cohort_size", row.get("participants", 1))
    if isinstance(loss, float) and not math.isfinite(loss) and clients:
        return f"the training loss is {loss}"
    for name, tensor in (params or {}).items():
        if not bool(torch.isfinite(tensor).all()):
            kind = "NaN" if bool(torch.isnan(tensor).any()) else "inf"
            return f"the global model's parameters are not finite ({kind} in {name!r})"
    return None


def recorded_stop(config: Any, metrics: list[dict[str, Any]], written: Any = None) -> str:
    """The stop reason of a finished run as check-privacy reads it from its files: ``target``
    when the last row reached ``stop.target_accuracy``, :data:`DIVERGED` when the last row is
    not finite or summary.json's ``stop_reason`` (``written``) says so (a non-finite model is
    not written, so only the runner saw it; reading it as data-dependent only widens the
    guarantee), else ``other``."""
    last = metrics[-1] if metrics else None
    if target_reached(config.stop, last):
        return "target"
    if written == DIVERGED or (last and first_nonfinite(last) is not None):
        return DIVERGED
    return "other"


def target_reached(stop: Any, row: Mapping[str, Any] | None) -> bool:
    """Whether a metrics ``row`` reaches ``stop.target_accuracy`` on ``stop.target_metric``."""
    if stop.target_accuracy is None or not row:
        return False
    value = row.get(f"{stop.target_metric}_accuracy")
    return finite(value) and value >= stop.target_accuracy


def guarantee_rounds(reason: str, ran: int, planned: int,
                     exceeds_budget: Callable[[int], bool]) -> int:
    """The rounds the printed guarantee covers after a stop for ``reason`` with ``ran`` rounds
    completed: ``ran``, or after a data-dependent stop (:data:`DATA_DEPENDENT_STOPS`) the
    largest ``r`` in ``ran..planned`` that ``exceeds_budget(r)`` allows (the budget stop is
    public, and epsilon grows with the rounds, so a bisection finds it)."""
    if reason not in DATA_DEPENDENT_STOPS:
        return ran
    if not 0 <= ran <= planned:
        raise ValueError(f"ran = {ran} is out of range: must be in 0..planned = {planned}")
    return first_round_where(ran, planned + 1, exceeds_budget) - 1


def accounted_rounds(config: Any, plan: Any, metrics: list[dict[str, Any]], ran: int,
                     redrawn_rounds: list[Any], written: Any = None, budget: Any = None) -> int:
    """The rounds a finished run's guarantee covers, recomputed from its files (check-privacy):
    those that ran, or after a data-dependent stop (:func:`recorded_stop`; ``written``:
    summary.json's ``stop_reason``) every round the public stop rules allowed
    (:func:`guarantee_rounds`; ``budget``: the run's privacy filter,
    :func:`privfl.runs.budget.run_budget`, or None), re-drawn rounds composed as the runner
    composes them (:func:`~privfl.algorithms.base.released_results`)."""
    from privfl.algorithms.base import released_results

    reason = recorded_stop(config, metrics, written)
    return guarantee_rounds(
        reason, ran, max(ran, config.federated.rounds),
        lambda rounds: (budget is not None and not budget.allows(rounds, redrawn_rounds))
        or budget_problem(
            config.stop, plan, rounds,
            lambda r, full: released_results(plan, r, redrawn_rounds, full=full)) is not None)


def budget_problem(stop: Any, plan: Any, rounds: int,
                   privacy: Callable[[int, bool], list[Any]]) -> str | None:
    """Why running up to ``rounds`` rounds would exceed the budget of ``stop`` (None if it
    would not); ``privacy(rounds, full)``: the plan's results after ``rounds`` rounds, every
    accountant (``full``) or the per-round set.

    The budget applies to the results of every accountant in the plan's primary scope:
    ``stop.epsilon`` to the tightest rigorous bound among them, ``stop.mu`` to the largest
    Gaussian-DP mu among them. Without ``stop.mu``, a bound of the per-round set
    (:mod:`privfl.algorithms.cadence`) within ``stop.epsilon`` settles it (the tightest
    is no larger), so the accountants recomputed from scratch run only near the budget.
    """
    if stop.epsilon is None and stop.mu is None:
        return None
    if stop.mu is None:
        cheap = tightest_bound(budget_results(plan, privacy(rounds, False)))
        if cheap is not None and cheap.epsilon <= stop.epsilon:
            return None
    primary = budget_results(plan, privacy(rounds, True))
    scope = f", {plan.primary_scope}" if plan.primary_scope else ""
    if stop.mu is not None:
        with_mu = [r for r in primary if "mu" in r.extras]
        if with_mu:
            worst = max(with_mu, key=lambda r: r.extras["mu"])
            mu = worst.extras["mu"]
            if mu > stop.mu:
                return (f"round {rounds} would reach mu = {format_bound(mu)} ({worst.method} "
                        f"{worst.kind}{scope}) > stop.mu = {stop.mu:g}")
    if stop.epsilon is not None:
        tightest = tightest_bound(primary)
        if tightest is not None and tightest.epsilon > stop.epsilon:
            return (f"round {rounds} would spend epsilon = {format_bound(tightest.epsilon)} "
                    f"({tightest.method} bound{scope}, delta = {tightest.delta:g}) > "
                    f"stop.epsilon = {stop.epsilon:g}")
    return None


class StoppingRules:
    """The stopping rules of :class:`~privfl.runs.experiment.Experiment` (a part of its run loop,
    holding the experiment as ``run``; it reads the experiment's ``config``, ``dir``, ``data``,
    ``algorithm`` and ``metrics``)."""

    def __init__(self, run: Any) -> None:
        self.run = run


    def diverged(self, metrics: dict[str, Any]) -> tuple[str, str] | None:
        """``(DIVERGED, one line)`` if the round of ``metrics`` left something non-finite
        (:func:`first_nonfinite` of what it released: the row as written, the global model
        unless the plan keeps it hidden before the last round), else None."""
        algo = self.run.algorithm
        hidden = bool(getattr(algo.plan, "hidden_state", False))
        params = (algo.global_params() if callable(getattr(algo, "global_params", None))
                  and (not hidden or algo.round >= self.run.config.federated.rounds) else None)
        what = first_nonfinite(self.run.outputs.split_rows([metrics])[0][0], params)
        if what is None:
            return None
        return DIVERGED, f"round {metrics['round']}: {what}; {self._divergence_advice(hidden)}"

    def _divergence_advice(self, hidden: bool) -> str:
        """The cause (the step sizes, the optimizer) and what to do: resume from the last
        finite checkpoint with a lower step size the accounting does not read, else start
        again."""
        from privfl.runs.run_resume import (
            STEP_SIZE_KEYS,
            step_size_problem,
            with_step_sizes,
        )

        dump = self.run.config.model_dump(mode="json")
        used, lowerable = [], []
        for key in STEP_SIZE_KEYS:
            section, _, name = key.partition(".")
            value = dump[section].get(name)
            if value is None:
                continue
            try:
                lower = with_step_sizes(self.run.config, {key: value / 10})
            except ValueError:  # the algorithm does not take it (e.g. DP-DSGD's training.lr)
                continue
            used.append(f"{key} = {value:g}" + (f", optimizer {self.run.config.training.optimizer}"
                                                if key == "training.lr" else ""))
            if step_size_problem(self.run.config, lower, self.run.data,
                                 (self.run.config.federated.rounds,)) is None:
                lowerable.append(key)
        cause = (f"the local steps diverged: the usual cause is a step size too high for this "
                 f"model ({'; '.join(used) or 'its optimizer'}): lower it")
        saved = self.run.dir.list_checkpoints()
        if hidden or not saved:
            return f"{cause}; no finite checkpoint is kept: start a new run with --out NEW_DIR"
        if not lowerable:
            return (f"{cause}; the privacy accounting reads the step size, so a resume cannot "
                    "change it: start a new run with --out NEW_DIR")
        if not self.run.config.privacy.secure:  # issue 44, item 3 (run_resume)
            return (f"{cause}; this seeded run released round {self.run.algorithm.round}, and a "
                    "resume would run it again on the same noise draws with another step size "
                    "(two releases that share one noise draw are covered by no composition): "
                    "start a new run with --out NEW_DIR (a run with privacy.secure: true can "
                    "resume from its last finite checkpoint with a lower step size: the round "
                    "is re-drawn and composed again)")
        return (f"{cause}; the last finite checkpoint is round {saved[-1][0]}: privfl run "
                f"--resume {self.run.dir.path} --set {lowerable[0]}=LOWER")

    def _target_reached(self) -> bool:
        metrics = self.run.metrics
        return target_reached(self.run.config.stop, metrics[-1] if metrics else None)

    def guarantee_rounds(self, reason: str) -> int:
        """The rounds the guarantee covers after a stop for ``reason`` (:func:`guarantee_rounds`
        with this run's budget)."""
        return guarantee_rounds(reason, self.run.algorithm.round, self.run.config.federated.rounds,
                                lambda rounds: self.budget_exceeded(rounds) is not None)

    def budget_exceeded(self, rounds: int) -> str | None:
        """Why running up to ``rounds`` rounds would exceed the budget (None if it would not):
        :func:`budget_problem` with this run's accountants (re-drawn rounds included)."""
        filtered = getattr(self.run, "budget", None)
        algo = self.run.algorithm
        return (filtered.problem(rounds, algo.redrawn_rounds) if filtered is not None
                else None) or budget_problem(self.run.config.stop, algo.plan, rounds,
                                             lambda r, full: algo.privacy(r, full=full))

    def next_stop(self, ran: int) -> tuple[str, str] | None:
        """``(reason, detail)`` if the run must stop before the next round, else None."""
        algo, config = self.run.algorithm, self.run.config
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
