"""The artefacts of a run of :class:`~privfl.runs.experiment.Experiment` when it stops.

:class:`RunArtefacts` writes privacy.json, summary.json, model.pt, the plots, report.md and
report.html, and makes the privacy card and the setup rows they show; a finished run whose
guarantee assumes its intermediate state hidden (a last-iterate release) deletes its
checkpoints first. It returns an :class:`~privfl.runs.result.ExperimentResult`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from privfl.accounting.results import PrivacyResult
from privfl.algorithms.base import (
    budget_results,
    finite,
    headline_scopes,
    privacy_metrics,
    tightest_bound,
)
from privfl.runs.ledger import file_digests
from privfl.runs.result import ExperimentResult, PrivateState, released_model
from privfl.runs.rounding import format_bound
from privfl.runs.run_stops import DIVERGED
from privfl.runs.rundir import write_atomically


def _rounds_text(rows: list[dict[str, Any]]) -> str:
    """``"4, 5"``: the round indices of metrics rows."""
    return ", ".join(str(row.get("round")) for row in rows)


def headline_record(headline: Any, rounds: int, accounted: int, reason: str
                    ) -> dict[str, Any]:
    """A ledger ``headline`` entry (:mod:`privfl.runs.ledger`): the headline's numbers, the
    rounds that ran and those it covers, the stop reason and the sentence."""
    best = headline.result
    return {"epsilon": None if best is None else float(best.epsilon),
            "delta": None if best is None else float(best.delta),
            "method": None if best is None else best.method, "rounds": rounds,
            "rounds_accounted": accounted, "stop_reason": reason,
            "sentence": headline.sentence}


class RunArtefacts:
    """The final artefacts of :class:`~privfl.runs.experiment.Experiment` (a part of its run loop,
    holding the experiment as ``run``; it reads the experiment's ``config``, ``dir``, ``data``,
    ``algorithm``, ``metrics``, ``redrawn``, ``warnings`` and ``resumed_from``)."""

    def __init__(self, run: Any) -> None:
        self.run = run


    def card(self, rounds: int) -> dict[str, Any]:
        """The privacy card's rows after ``rounds`` rounds: the plan's, a simulated attack's
        (:func:`privfl.attacks.poisoning.attack_card_rows`), the pretraining data's
        (:func:`privfl.runs.model_card.model_card_rows`) and a text vocabulary's
        (:func:`privfl.data.text.vocabulary_card_rows`)."""
        from privfl.attacks.poisoning import attack_card_rows, attack_of
        from privfl.data.text import vocabulary_card_rows
        from privfl.runs.model_card import model_card_rows

        algo = self.run.algorithm
        released = algo.released_rounds(rounds)
        rows = {**algo.plan.card(released), **attack_card_rows(attack_of(self.run.data)),
                **model_card_rows(self.run.config.model,
                                  getattr(getattr(algo, "trainer", None), "template", None)),
                **vocabulary_card_rows(self.run.data.info)}
        budget = self.budget()
        if budget is not None and algo.private:  # its filter caps the rounds at any plan
            rows.update(budget.card_rows(min(rounds, budget.rounds_allowed(
                algo.redrawn_rounds)), algo.redrawn_rounds))
        if self.run.redrawn:
            rows["released rounds"] = (
                f"{released}: {rounds} rounds + {len(self.run.redrawn)} released twice "
                f"(rounds {_rounds_text(self.run.redrawn)} were logged, lost with their checkpoint "
                "and drawn again in secure mode); the accountant composes every release")
        return rows

    def budget(self) -> Any:
        """The run's privacy budget filter (:mod:`privfl.runs.budget`; None without one): the
        experiment's, or rebuilt from the run directory (check-privacy)."""
        from privfl.runs.budget import run_budget

        if hasattr(self.run, "budget"):
            return self.run.budget
        return run_budget(self.run.config, self.run.algorithm.plan, self.run.dir)

    def planned_privacy(self) -> list[PrivacyResult]:
        """The guarantee if all configured rounds run (what the start card shows)."""
        return self.run.algorithm.privacy(self.run.config.federated.rounds)

    def setup(self) -> dict[str, Any]:
        """What ran, for report.md and the summary: data, then the algorithm's own rows."""
        c, algo = self.run.config, self.run.algorithm
        sizes = self.run.data.client_sizes
        rows = {
            "dataset": f"{c.data.dataset}: {self.run.data.name}",
            "clients": f"{self.run.data.num_clients} (n_j = {int(sizes.min())}..{int(sizes.max())}"
            f" train, {int(self.run.data.test_sizes.min())}..{int(self.run.data.test_sizes.max())} "
            "test)",
            "algorithm": f"{c.federated.algorithm}: {algo.title}",
        }
        rows.update(algo.setup())
        from privfl.attacks.poisoning import attack_of

        attack = attack_of(self.run.data)
        if attack is not None:
            rows["attack (simulated)"] = attack.text()
        if getattr(algo, "protection_config", None) is not None:
            rows["protection (client-side)"] = algo.protection_config.text()
        rows["seed"] = f"{c.seed} (" + (
            "partition, initialisation; cohorts, batches, noise and dropout from os.urandom"
            if c.privacy.secure else "partition, initialisation, cohorts, batches, noise") + ")"
        return rows

    def finish(self, reason: str, detail: str, seconds: float) -> ExperimentResult:
        """Write privacy.json, summary.json, model.pt (not after a divergence,
        :meth:`releases_model`), the plots and report.md; return the result. A finished run
        whose guarantee assumes its intermediate state hidden (a last-iterate release) deletes
        its checkpoints first."""
        from privfl.runs.html_run import run_report_html
        from privfl.runs.markdown import run_report_markdown
        from privfl.runs.plots import plot_accuracy, plot_health, plot_privacy
        from privfl.runs.provenance import run_provenance

        algo, config = self.run.algorithm, self.run.config
        # the accountants' share of the loop that wall_seconds times (the planned card is not)
        accounting = (float(getattr(algo, "accounting_seconds", 0.0))
                      - getattr(self.run, "_accounting_start", 0.0))
        rounds = algo.round
        finished = reason != "max_rounds"
        # a stop that read a released metric: the guarantee covers every round it allowed;
        # never fewer than the ledger's floor (released rows, earlier headlines, the creation
        # plan's data-dependent stop: privfl.runs.ledger_guarantee)
        accounted, why = self.accounted(rounds, reason, finished)
        results, headline, card, after_the_fact = self.guarantee(rounds, accounted, reason,
                                                                 why)
        self.run.ledger.append("headline", headline_record(headline, rounds, accounted,
                                                           reason))
        released = {"rounds_released": algo.released_rounds(rounds),
                    "redrawn_rounds": [row.get("round") for row in self.run.redrawn],
                    "rounds_accounted": accounted}
        deleted = (bool(getattr(algo.plan, "hidden_state", False)) and finished
                   and rounds > 0)
        if deleted:
            self.run.dir.delete_private_state()
        model = self.releases_model(reason)
        if not model:  # e.g. one written by an earlier invocation of this run
            self.run.dir.model.unlink(missing_ok=True)
        outputs = self.run.outputs.table(
            checkpoints=not deleted and bool(self.run.dir.list_checkpoints()),
                               model_file=model)
        guarantee_only = self.run.dir.separate_private
        state = PrivateState(deleted, "" if deleted else (
            f"{self.run.dir.private.name}/checkpoints/" if guarantee_only else "checkpoints/"),
            guarantee_only)
        covered = self.run.outputs.covered_metrics()
        # guarantee-only: the covered keys only
        shown = self.run.outputs.split_rows(self.run.metrics)[0]
        labels = {k: v for k, v in algo.metric_labels.items()
                  if not guarantee_only or k in covered}
        last = shown[-1] if shown else {}
        target = config.stop.target_accuracy
        key = f"{config.stop.target_metric}_accuracy"
        reached = next((m["round"] for m in shown
                        if target is not None and finite(m.get(key)) and m[key] >= target), None)
        # every accountant, whether or not the last row carried them all (.cadence)
        final_privacy = privacy_metrics(algo.plan, results)
        summary: dict[str, Any] = {
            "command": "run",
            "headline": headline.to_dict(),
            "name": config.name,
            "description": config.description,
            "run_dir": str(self.run.dir.path),
            "algorithm": config.federated.algorithm,
            "private": algo.private,
            "rounds_planned": config.federated.rounds,
            "rounds_completed": rounds,
            **released,
            "stop_reason": reason,
            "stop_detail": detail,
            "finished": finished,
            "resumed_from_round": self.run.resumed_from,
            "warnings": list(self.run.warnings),
            "wall_seconds": seconds,
            "training_seconds": sum(m.get("seconds", 0.0) for m in self.run.metrics),
            "accounting_seconds": accounting,
            "final": {
                "round": last.get("round", 0),
                **{k: last.get(k, math.nan) for k in labels},
                **({"epsilon": final_privacy["epsilon"],
                    "epsilon_method": final_privacy["epsilon_method"]}
                   if last and "epsilon" in final_privacy else {}),
            },
            "metric_labels": labels,
            "target_accuracy": target,
            "target_metric": config.stop.target_metric,
            "rounds_to_target": reached,
            **({"after_the_fact": after_the_fact} if after_the_fact is not None else {}),
            "setting": card,
            "privacy": [r.to_dict() for r in results],
            "private_state": state.text,
            "outputs": outputs,
            "provenance": run_provenance(config.model_dump(mode="json")),
        }
        self.run.dir.write_json(self.run.dir.privacy, {
            "command": "run",
            "setting": card,
            "rounds": rounds,
            **released,
            "private": algo.private,
            "results": [r.to_dict() for r in results],
            **({"after_the_fact": after_the_fact} if after_the_fact is not None else {}),
            "outputs": outputs,
        })
        written = dict(summary)
        if guarantee_only:  # timings grow with realised counts; warnings read unnoised losses
            for name in ("warnings", "wall_seconds", "training_seconds",
                         "accounting_seconds"):
                written.pop(name)
        self.run.dir.write_json(self.run.dir.summary, written)
        if model:
            self._write_model()
        title = f"{config.name}: {self.run.data.name}"
        plot_accuracy(shown, self.run.dir.accuracy_plot, labels, title=title, target=target)
        plot_privacy(shown, self.run.dir.privacy_plot,
                     delta=config.privacy.delta if algo.private else None, title=title,
                     headline_scopes=[s for s in headline_scopes(algo.plan) if s])
        covered_now = {o["name"]: o["covered"] for o in outputs if o["kind"] == "metric"}
        plot_health(shown, self.run.dir.health_plot, self.run.outputs.health_keys(),
                    covered=covered_now,
                    title=title)
        setup = self.setup()
        self.run.dir.write_text(self.run.dir.report, run_report_markdown(
            written, card, results, shown, setup=setup, outputs=outputs, headline=headline))
        self.run.dir.write_text(self.run.dir.report_html, run_report_html(
            written, card, results, shown, setup=setup, outputs=outputs, headline=headline))
        self.run.ledger.append("files", {"files": file_digests(self.run.dir.path)})
        if guarantee_only:  # the file times would give away the wall time the mode drops
            self.run.dir.fix_times()
        trained, note = released_model(algo, model, reason)
        personal = getattr(algo, "client_params", None) if trained is not None else None
        return ExperimentResult(summary, list(self.run.metrics), results, card, self.run.dir.path,
                                reason, state, model=trained, model_note=note,
                                headline_parts=headline,
                                client_params=personal if callable(personal) else None)

    def accounted(self, rounds: int, reason: str, finished: bool) -> tuple[int, str]:
        """``(accounted, why)``: the rounds the guarantee of a run stopped for ``reason``
        after ``rounds`` rounds covers: its stop rules' count
        (:meth:`StoppingRules.guarantee_rounds`), raised to the ledger's floor
        (:func:`~privfl.runs.ledger_guarantee.ledger_floor`; ``why`` says why, "" when the
        floor did not raise it)."""
        from privfl.runs.ledger_guarantee import ledger_floor

        algo = self.run.algorithm
        accounted = self.run.stops.guarantee_rounds(reason)
        floor, why = ledger_floor(self.run.ledger.entries(), algo.plan, rounds,
                                  finished=finished, stop_reason=reason,
                                  privacy=lambda r, full: algo.privacy(r, full=full))
        return (floor, why) if floor > accounted else (accounted, "")

    def guarantee(self, rounds: int, accounted: int, reason: str, why: str = ""
                  ) -> tuple[list[PrivacyResult], Any, dict[str, Any], dict[str, Any] | None]:
        """``(results, headline, card, after_the_fact)`` of a run stopped for ``reason`` after
        ``rounds`` rounds whose guarantee covers ``accounted`` (more after a data-dependent
        stop, or where the ledger's floor says ``why``; the card and the headline's advice
        then carry the after-the-fact note): what the run writes, and what ``check-privacy``
        recomputes (:mod:`privfl.runs.check_files`)."""
        from privfl.runs.budget import budget_note
        from privfl.runs.first_plan import extension_note, first_plan
        from privfl.runs.plan_headline import plan_headline

        algo = self.run.algorithm
        results = algo.privacy(accounted)
        after = (self.after_the_fact(rounds, accounted, reason, why)
                 if accounted != rounds and algo.private else None)
        card = self.card(accounted)
        budget = self.budget()
        notes = []
        if budget is not None and algo.private:  # the filter's bound is the headline
            bound = budget.result(tightest_bound(budget_results(algo.plan, results)))
            headline = plan_headline(algo.plan, results, bound=bound)
            notes.append(budget_note(algo.plan, results))
        else:
            headline = plan_headline(algo.plan, results)
            extended = extension_note(first_plan(self.run.dir), self.run.config.federated.rounds)
            if extended is not None and algo.private:
                card["first plan"] = extended
                notes.append(extended)
        if after is not None:
            card["data-dependent stop"] = after["note"]
            notes.append(after["note"])
        if notes:
            headline = replace(headline, advice=" ".join([headline.advice, *notes]).strip())
        return results, headline, card, after

    def releases_model(self, reason: str) -> bool:
        """Whether a run stopped for ``reason`` writes model.pt: not a diverged run (its model
        is not finite), nor a paused run (``run.max_rounds``) whose guarantee hides its
        intermediate state, since W_t of a pause is an intermediate iterate (and with
        random-stop or the independent schedule, a model before the end tells part of the
        secret)."""
        return reason != DIVERGED and not (
            bool(getattr(self.run.algorithm.plan, "hidden_state", False))
            and reason == "max_rounds")

    def after_the_fact(self, rounds: int, accounted: int, reason: str, why: str = ""
                       ) -> dict[str, Any]:
        """The rounds-run value of a run whose stop (``reason``) read released results, or
        whose ledger raised the rounds covered (``why``), labelled as what it is: epsilon for
        the rounds that ran, not a bound for the mechanism (whose guarantee covers
        ``accounted`` rounds, :meth:`accounted`)."""
        from privfl.algorithms.base import budget_results, tightest_bound
        from privfl.runs.headline import method_name

        ran = self.run.algorithm.privacy(rounds)
        best = tightest_bound(budget_results(self.run.algorithm.plan, ran))
        value = (f"epsilon = {format_bound(best.epsilon, 4)} ({method_name(best.method)})"
                 if best is not None else "no rigorous bound")
        stop = self.run.config.stop
        if why:
            note = (f"The guarantee covers {accounted} rounds although {rounds} ran in this "
                    f"run's current trajectory: {why}; {value} for the {rounds} rounds is "
                    "an after-the-fact value, not a bound for this run.")
        else:
            stopped = ("a non-finite result (it diverged)" if reason == DIVERGED else
                       f"stop.target_accuracy = {stop.target_accuracy:g} "
                       f"({stop.target_metric} accuracy)")
            note = (f"The run stopped on {stopped} after {rounds} of up to "
                    f"{accounted} rounds: the stop depends on the data, so the guarantee "
                    f"covers the {accounted} rounds the stop rules allowed; {value} for the "
                    f"{rounds} rounds that ran is an after-the-fact value, not a bound for this "
                    "run.")
        return {"rounds": rounds, "kind": "after-the-fact", "note": note,
                "epsilon": None if best is None else float(best.epsilon),
                "method": None if best is None else best.method,
                "results": [r.to_dict() for r in ran]}

    def _write_model(self) -> None:
        """model.pt: the final released model (``name -> tensor``, torch.save), for algorithms
        that offer ``global_params()``."""
        if not callable(getattr(self.run.algorithm, "global_params", None)):
            return
        params = {k: v.detach().cpu() for k, v in self.run.algorithm.global_params().items()}
        write_atomically(self.run.dir.model, lambda stream: torch.save(params, stream))
