"""Build and run any registered algorithm from a configuration, with a run directory and resume.

:class:`Experiment` turns an :class:`~privfl.config.ExperimentConfig` into data and the algorithm
``federated.algorithm`` names (:mod:`privfl.algorithms.registry`; the runner only knows the
protocol of :mod:`privfl.algorithms.base`), then runs rounds until a stop: all rounds
done, a target accuracy reached, the privacy budget would be exceeded by the next round (that
round is not run), ``run.max_rounds`` rounds ran in this invocation, or the round diverged (a
non-finite loss or model: ``stop_reason == "diverged"``, returned, not raised; its state is
never checkpointed). After every ``run.checkpoint_every`` rounds (and at the stop) it writes a
checkpoint holding the algorithm's state (its ``state_dict``: models, optimizer states,
generator states), torch's global RNG state, the round index and the metrics so far.

Resume (:meth:`Experiment.resume`) rebuilds the same objects from the saved ``config.yaml``,
loads the newest checkpoint whose digests verify (:mod:`privfl.runs.checkpoints`; skipped
ones are reported), truncates ``metrics.jsonl`` to it and continues: the result equals an
uninterrupted run with the same seed bit for bit on the same machine, whatever ``run.threads``
(client workers each use one torch thread; :mod:`privfl.fl.workers`). On resume only
execution keys (``run.*``), stops (``stop.*``), ``federated.rounds`` (to extend a run, never
below the rounds already completed) and the step sizes the privacy accounting does not read
(:data:`~privfl.runs.run_resume.STEP_SIZE_KEYS`, e.g. after a divergence) may be changed.
A run directory belongs to one run (``run.json``'s run id, carried by its checkpoints) and to
one process at a time (a lock).

A round logged after the last checkpoint (a kill between its metrics row and its checkpoint,
or ``run.checkpoint_every`` > 1) runs again from that checkpoint, or from round 0 when the run
was killed before its first checkpoint. A seeded run recomputes the same round bit for bit: the
new row is verified against the row the release ledger recorded before it is shown, and a
difference stops the run without releasing it (two releases on one noise draw); a resume that
changes a step size where such rows exist is refused. Secure mode
(``privacy.secure``) draws cohorts, batches and noise from ``os.urandom``, so the round run
again is a second, independent release: its logged row is kept in ``redrawn.jsonl`` and every
such round is composed once more by the accountant
(:meth:`~privfl.algorithms.base.RoundAlgorithm.released_rounds`), in the per-round metrics,
privacy.json, summary.json, report.md and ``privfl check-privacy``.

Every release (a metrics row, the headline, the files written) is recorded in the run's
release ledger ``ledger.jsonl`` before it is shown (:mod:`privfl.runs.ledger`), and the
headline is never below the ledger's floor (:mod:`privfl.runs.ledger_guarantee`): released
rows, headlines printed before, the creation plan's data-dependent stop.

This module builds the experiment and runs its loop; the loop calls four parts, one class in
a sibling module each, holding the experiment as ``run``: checkpoints and resume
(:attr:`Experiment.checkpoints`, :mod:`privfl.runs.run_resume`), the outputs table and metrics
rows (:attr:`Experiment.outputs`, :mod:`privfl.runs.run_outputs`), the stopping rules
(:attr:`Experiment.stops`, :mod:`privfl.runs.run_stops`) and the artefacts written at the stop
(:attr:`Experiment.artefacts`, :mod:`privfl.runs.run_finish`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from privfl.accounting.results import PrivacyResult
from privfl.algorithms.builders import (
    apply_attack,
    build_algorithm,
    build_dataset,
    build_model,
    build_spec,
    privacy_plan,
)
from privfl.algorithms.cadence import AccountingCadence
from privfl.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    config_from_dict,
    dump_config,
    read_yaml,
)
from privfl.data.datasets import FederatedDataset
from privfl.fl.client_store import state_directory
from privfl.runs.budget import run_budget
from privfl.runs.checkpoints import CheckpointStore
from privfl.runs.first_plan import first_plan, first_plan_record
from privfl.runs.ledger import Ledger, creation_payload, file_digests, open_ledger
from privfl.runs.progress import with_progress
from privfl.runs.result import ExperimentResult
from privfl.runs.run_finish import RunArtefacts
from privfl.runs.run_outputs import RunOutputs, private_root
from privfl.runs.run_resume import (
    RESUMABLE_KEYS,
    Checkpointing,
    check_private_state_kept,
    check_resumable,
    fixed_part,
)
from privfl.runs.run_stops import DIVERGED, StoppingRules
from privfl.runs.rundir import RunDirectory

__all__ = [
    "RESUMABLE_KEYS",
    "Experiment",
    "ExperimentResult",
    "RunCallbacks",
    "build_algorithm",
    "build_dataset",
    "build_model",
    "build_spec",
    "privacy_plan",
]


# ---------------------------------------------------------------------------------- running
class RunCallbacks:
    """Hooks for progress display; the default does nothing."""

    def on_start(self, experiment: Experiment) -> None:
        """Called once before the first round of this invocation."""

    def on_round(self, experiment: Experiment, metrics: dict[str, Any]) -> None:
        """Called after every round with its metrics."""

    def on_warning(self, experiment: Experiment, message: str) -> None:
        """Called when something in a round needs the user's attention (e.g. a re-run round
        that differs from its logged row)."""

    def on_finishing(self, experiment: Experiment, detail: str) -> None:
        """Called once when the run stops, before its final accounting and artefacts (the
        privacy card, report.md, report.html, the plots) are computed and written."""

    def on_end(self, experiment: Experiment, result: ExperimentResult) -> None:
        """Called once when the run stops (artefacts already written)."""


def check_device(device: str) -> None:
    """Refuse a ``run.device`` this machine does not have, naming the key."""
    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(device.partition(":")[2] or 0) >= count:
            raise ConfigError(f"run.device = {device!r} is not available on this machine "
                              f"({count} CUDA device(s) visible to torch): use 'cpu'")
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("run.device = 'mps' is not available on this machine: use 'cpu'")


class Experiment:
    """One run of any registered algorithm, backed by a run directory.

    Use :meth:`create` for a new run and :meth:`resume` to continue one; then :meth:`run`.
    The run loop calls four parts, each holding this experiment as ``run``: :attr:`outputs`
    (what the run writes, covered or not), :attr:`stops` (when it stops and what the guarantee
    then covers), :attr:`checkpoints` (saving and resuming) and :attr:`artefacts` (what it
    writes at the stop).
    """

    def __init__(self, config: ExperimentConfig, run_dir: RunDirectory,
                 data: FederatedDataset | None = None) -> None:
        self.config = config
        self.dir = run_dir
        self.store: CheckpointStore | None = None  # set once the run directory is locked
        #: the release ledger (:mod:`privfl.runs.ledger`): every release is appended before
        #: it is shown
        self.ledger = Ledger(run_dir.path)
        self._lock = None
        self._created = False  # this process made the run directory (Experiment.create)
        self.warnings: list[str] = []  # e.g. a re-run round that differs from its logged row
        check_device(config.run.device)
        if config.run.tensorboard:
            from privfl.runs.tensorboard import check_available

            check_available()
        self._tensorboard = None
        if config.run.mlflow:
            from privfl.runs.mlflow_log import check_available as check_mlflow

            check_mlflow()
        self._mlflow = None
        # run.threads sets the engine's client workers (builders.trainer_options); the server's
        # work runs on one torch thread, so no setting of run changes a result's bits
        torch.set_num_threads(1)
        if data is not None and config.data.dataset != "custom":
            raise ConfigError(f"data = {data.name!r} given from Python needs data.dataset: "
                              f"custom in the configuration (it says {config.data.dataset!r}),"
                              " so that config.yaml does not claim another dataset")
        if data is not None and not isinstance(data, FederatedDataset):
            raise ValueError(f"data = {type(data).__name__} is not allowed: must be a "
                             "privfl.data.FederatedDataset")
        # the configuration's dataset, or the caller's; poisoned if config.attack says so
        self.data = build_dataset(config) if data is None else apply_attack(config, data)
        self.algorithm = self._build_algorithm()
        self.outputs = RunOutputs(self)
        self.stops = StoppingRules(self)
        self.checkpoints = Checkpointing(self)
        self.artefacts = RunArtefacts(self)
        self.outputs.check_stops_read_covered()
        self.metrics: list[dict[str, Any]] = []
        self.resumed_from: int | None = None
        self.resume_warnings: list[str] = []  # unreadable checkpoints that were skipped
        self.resume_notes: list[str] = []  # what else the user should know about the resume
        self.redrawn: list[dict[str, Any]] = []  # rows released, lost and run again (secure)
        self._expected: dict[int, dict[str, Any]] = {}  # logged rows a seeded resume reproduces
        self.previous_fixed: dict[str, Any] | None = None  # config.yaml's before a resume
        self.steps_changed = False  # a resume changed a step size (run_resume.STEP_SIZE_KEYS)
        # privacy.epsilon_budget's filter, as fixed at creation (privfl.runs.budget)
        try:
            self.budget = run_budget(config, self.algorithm.plan, run_dir)
        except ValueError as error:
            raise ConfigError(str(error)) from None

    # ------------------------------------------------------------------ what callers read
    def card(self, rounds: int) -> dict[str, Any]:
        """The privacy card's rows after ``rounds`` rounds (:meth:`RunArtefacts.card`)."""
        return self.artefacts.card(rounds)

    def planned_privacy(self) -> list[PrivacyResult]:
        """The guarantee of the planned rounds (:meth:`RunArtefacts.planned_privacy`)."""
        return self.artefacts.planned_privacy()

    def covered_metrics(self) -> set[str]:
        """The metrics keys the guarantee covers (:meth:`RunOutputs.covered_metrics`)."""
        return self.outputs.covered_metrics()

    # ------------------------------------------------------------------ construction
    def _build_algorithm(self) -> Any:
        """The configuration's algorithm; a memory-mapped per-client store puts its files in
        the run's private ``client-state/`` folder (:mod:`privfl.fl.client_store`)."""
        with state_directory(self.dir.client_state):
            algorithm = build_algorithm(self.config, self.data)
        algorithm.cadence = AccountingCadence.from_config(self.config)
        return algorithm

    @classmethod
    def create(cls, config: ExperimentConfig, run_dir: str | Path,
               data: FederatedDataset | None = None) -> Experiment:
        """A new run in ``run_dir`` (must not already hold one); writes config.yaml.

        ``data``: your own :class:`~privfl.data.FederatedDataset` (``data.dataset: custom``);
        by default the configuration's dataset is built.
        """
        directory = RunDirectory(run_dir, private_root(config, run_dir))
        directory.check_new()
        experiment = cls(config, directory, data)
        # an accountant's refusal comes before any file is written
        experiment.artefacts.planned_privacy()
        pins = getattr(experiment.algorithm.plan, "pins", dict)()
        run_id = directory.create(pins, plan=first_plan_record(config, experiment.budget))
        experiment._created = True
        try:
            experiment._lock = directory.acquire_lock()
            experiment.store = CheckpointStore(directory, run_id)
            experiment.ledger.append("creation", creation_payload(config, run_id, pins))
            directory.write_text(directory.config, dump_config(config))
            experiment.outputs.write_metrics([])
            experiment.ledger.append("files", {"files": file_digests(directory.path)})
        except BaseException:  # e.g. a full disk: remove what was written
            experiment.discard_if_unstarted()
            raise
        return experiment

    @classmethod
    def resume(cls, run_dir: str | Path, overrides: Iterable[str] = (),
               data: FederatedDataset | None = None) -> Experiment:
        """Continue the run in ``run_dir`` from its newest verified checkpoint (``data``: the
        same dataset the run was created with, for ``data.dataset: custom``; a different
        partition is refused)."""
        directory = RunDirectory(run_dir)
        directory.require_existing()
        run_id = directory.run_id()
        lock = directory.acquire_lock()
        removed = directory.remove_temporary_files() + directory.remove_orphan_records()
        saved = read_yaml(directory.config)
        config = config_from_dict(apply_overrides(saved, check_resumable(overrides)))
        try:
            directory.private = private_root(config, run_dir) or directory.path
            check_private_state_kept(directory)
        except BaseException:
            lock.close()
            raise
        removed += [] if not directory.separate_private else directory.remove_temporary_files()
        directory.checkpoints.mkdir(parents=True, exist_ok=True)
        try:
            experiment = cls(config, directory, data)
        except BaseException:
            lock.close()
            raise
        experiment._lock = lock
        experiment.store = CheckpointStore(directory, run_id)
        created = first_plan(directory)
        if created is not None and created.epsilon_budget != config.privacy.epsilon_budget:
            experiment.release()
            raise ConfigError(
                f"privacy.epsilon_budget = {config.privacy.epsilon_budget!r} differs from the "
                f"budget this run was created with ({created.epsilon_budget!r}): the budget is "
                "fixed at creation; start a new run with --out NEW_DIR")
        experiment.previous_fixed = fixed_part(config_from_dict(saved))
        try:
            experiment.resume_notes += open_ledger(experiment, config_from_dict(saved), run_id)
        except BaseException:
            experiment.release()
            raise
        if removed:
            experiment.resume_notes.append(
                f"removed {len(removed)} file(s) left by an interrupted write (temporary files, "
                f"digest records without their checkpoint): {', '.join(sorted(removed))}")
        try:
            experiment.checkpoints.load_latest()
            done = experiment.algorithm.round
            if config.federated.rounds < done:
                raise ConfigError(
                    f"federated.rounds = {config.federated.rounds} is out of range: this run "
                    f"has already completed {done} rounds; must be >= {done}"
                )
            released = experiment.ledger.released_round()
            if config.federated.rounds < released:
                raise ConfigError(
                    f"federated.rounds = {config.federated.rounds} is out of range: the rows "
                    f"of rounds 1..{released} were released (ledger.jsonl) before this run was "
                    f"interrupted, and a resume never plans fewer; must be >= {released}")
            experiment.ledger.append("resume", {"overrides": list(overrides),
                                                "resumed_from": experiment.resumed_from,
                                                "rounds": config.federated.rounds})
            directory.write_text(directory.config, dump_config(config))
            experiment.ledger.append("files", {"files": file_digests(directory.path)})
        except BaseException:
            experiment.release()
            raise
        return experiment

    def discard_if_unstarted(self) -> bool:
        """After a failure: remove a run directory this process created whose run completed no
        round (nothing in it would be worth resuming); True if it was removed."""
        if not self._created or self.algorithm.round > 0 or self.dir.list_checkpoints():
            return False
        self.release()
        self.dir.discard()
        return True

    def release(self) -> None:
        """Give up the run directory's lock (done at the end of :meth:`run`)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    # ------------------------------------------------------------------ the loop
    def run(self, callbacks: RunCallbacks | None = None, *,
            progress: bool | None = None) -> ExperimentResult:
        """Run rounds until a stop; write checkpoints, metrics and the final artefacts.

        ``progress``: show a progress bar (rounds, clients) on stderr or in the notebook
        (:mod:`privfl.runs.progress`); None (default) shows it in a terminal or a notebook when
        no ``callbacks`` are given, False never. Returns an :class:`ExperimentResult` with the
        trained ``model``, the ``headline`` and its ``epsilon`` and ``delta``.
        """
        if self.store is None:
            raise ValueError("run needs a run directory: use Experiment.create or "
                             "Experiment.resume")
        from privfl.backends import active_backend, check_algorithm

        # inside use_backend(RayBackend(...)): refuse an algorithm that would run locally anyway
        check_algorithm(active_backend(), self.algorithm)
        callbacks, display = with_progress(callbacks, progress)
        try:
            return self._run(callbacks or RunCallbacks())
        finally:
            if display is not None:
                display.close()
            self.release()

    def _run(self, callbacks: RunCallbacks) -> ExperimentResult:
        started = time.perf_counter()
        self._accounting_start = float(getattr(self.algorithm, "accounting_seconds", 0.0))
        if self.config.run.tensorboard:
            from privfl.runs.tensorboard import TensorBoardLog

            self._tensorboard = TensorBoardLog(self.dir.private / "tensorboard",
                                               purge_step=self.algorithm.round + 1)
        if self.config.run.mlflow:
            self._mlflow = self._start_mlflow()
        status = "FAILED"
        try:
            result = self._rounds(callbacks, started)
            if self._mlflow is not None:
                self._mlflow.finish(result.privacy, self.dir.path)
            status = "FINISHED"
            return result
        finally:
            if self._tensorboard is not None:
                self._tensorboard.close()
                self._tensorboard = None
            if self._mlflow is not None:
                self._mlflow.close(status)
                self._mlflow = None

    def _start_mlflow(self) -> Any:
        """The MLflow run of this privfl run (privfl.runs.mlflow_log): a new one, or the one
        tagged with this run directory's id (resume). guarantee-only: covered keys only."""
        from privfl.runs.mlflow_log import MlflowLog, tracking_uri

        return MlflowLog(
            tracking_uri(self.config.run.mlflow, self.dir.path), self.config.name,
            self.dir.run_id(), self.config.model_dump(mode="json"),
            covered=self.outputs.covered_metrics() if self.dir.separate_private else None,
            run_name=self.dir.path.name)

    def _rounds(self, callbacks: RunCallbacks, started: float) -> ExperimentResult:
        callbacks.on_start(self)
        ran = 0
        every = self.config.run.checkpoint_every
        stop = self.stops.next_stop(ran)
        while stop is None:
            metrics = self.algorithm.run_round()
            ran += 1
            self.checkpoints.verify_rerun(metrics)  # refused before its release if it differs
            self.metrics.append(metrics)
            self.outputs.append_metrics(metrics)  # ledger.jsonl first (RunOutputs)
            if self._tensorboard is not None:
                self._tensorboard.log(metrics)
            if self._mlflow is not None:
                self._mlflow.log(metrics)
            diverged = self.stops.diverged(metrics)  # its non-finite state is never checkpointed
            if diverged is None and self.algorithm.round % every == 0:
                self.checkpoints.save_checkpoint()
            callbacks.on_round(self, metrics)
            stop = diverged or self.stops.next_stop(ran)
        reason, detail = stop
        saved = {r for r, _ in self.dir.list_checkpoints()}
        if self.algorithm.round not in saved and self.algorithm.round > 0 \
                and reason != DIVERGED:
            self.checkpoints.save_checkpoint()
        finishing = getattr(callbacks, "on_finishing", None)  # callbacks written before it
        if finishing is not None:
            finishing(self, detail)
        result = self.artefacts.finish(reason, detail, time.perf_counter() - started)
        callbacks.on_end(self, result)
        return result
