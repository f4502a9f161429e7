"""Build and run any registered algorithm from a configuration, with a run directory and resume.

:class:`Experiment` turns an :class:`~privfl.config.ExperimentConfig` into data and the algorithm
``federated.algorithm`` names (:mod:`privfl.fl.algorithms.registry`; the runner only knows the
protocol of :mod:`privfl.fl.algorithms.base`), then runs
rounds until a stop: all rounds done, a target accuracy reached, the privacy budget would be
exceeded by the next round (that round is not run), or ``run.max_rounds`` rounds ran in this
invocation. After every ``run.checkpoint_every`` rounds (and at the stop) it writes a checkpoint
holding the algorithm's state (its ``state_dict``: models, optimizer states, generator
states), torch's global RNG state, the round index and the metrics so far.

Resume (:meth:`Experiment.resume`) rebuilds the same objects from the saved ``config.yaml``,
loads the newest checkpoint whose digests verify (:mod:`privfl.report.checkpoints`; skipped
ones are reported), truncates ``metrics.jsonl`` to it and continues: the result equals an
uninterrupted run with the same seed bit for bit on the same machine, whatever ``run.threads``
(client workers each use one torch thread; :mod:`privfl.fl.workers`). On resume only
execution keys (``run.*``), stops (``stop.*``) and ``federated.rounds`` (to extend a run, never
below the rounds already completed) may be changed. A run directory belongs to one run
(``run.json``'s run id, carried by its checkpoints) and to one process at a time (a lock).

A round logged after the last checkpoint (a kill between its metrics row and its checkpoint,
or ``run.checkpoint_every`` > 1) runs again from that checkpoint, or from round 0 when the run
was killed before its first checkpoint. A seeded run recomputes the same round bit for bit: the
new row is compared with the logged one and a difference is a warning. Secure mode
(``privacy.secure``) draws cohorts, batches and noise from ``os.urandom``, so the round run
again is a second, independent release: its logged row is kept in ``redrawn.jsonl`` and every
such round is composed once more by the accountant
(:meth:`~privfl.fl.algorithms.base.RoundAlgorithm.released_rounds`), in the per-round metrics,
privacy.json, summary.json, report.md and ``privfl check-privacy``.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from privfl.accounting.results import PrivacyResult
from privfl.config import (
    ConfigError,
    ExperimentConfig,
    apply_overrides,
    config_from_dict,
    dump_config,
    parse_override,
    read_yaml,
)
from privfl.data.datasets import FederatedDataset
from privfl.fl.algorithms.base import budget_results, finite, headline_scopes, tightest_bound
from privfl.fl.algorithms.builders import (
    apply_attack,
    build_algorithm,
    build_dataset,
    build_model,
    build_spec,
    privacy_plan,
)
from privfl.fl.algorithms.outputs import (
    GENERIC_METRICS,
    classify_metrics,
    file_outputs,
    private_dir_of,
    split_row,
)
from privfl.fl.client_store import state_directory
from privfl.report.checkpoints import CheckpointStore, digest_json
from privfl.report.rundir import RunDirectory, json_safe, write_atomically

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

#: Keys that ``--set`` may change when resuming (prefixes ending in "." cover a section).
RESUMABLE_KEYS = ("run.", "stop.", "federated.rounds")
#: ... except these (where the run's files live)
FIXED_RUN_KEYS = ("run.outputs",)


# ---------------------------------------------------------------------------------- running
class RunCallbacks:
    """Hooks for progress display; the default does nothing."""

    def on_start(self, experiment: Experiment) -> None:
        """Called once before the first round of this invocation."""

    def on_round(self, experiment: Experiment, metrics: dict[str, Any]) -> None:
        """Called after every round with its metrics."""

    def on_warning(self, experiment: Experiment, message: str) -> None:
        """Called when something in a round needs the user's attention (e.g. a NaN loss)."""

    def on_end(self, experiment: Experiment, result: ExperimentResult) -> None:
        """Called once when the run stops (artefacts already written)."""


@dataclass
class ExperimentResult:
    """What a run (or one invocation of it) produced."""

    summary: dict[str, Any]
    metrics: list[dict[str, Any]]
    privacy: list[PrivacyResult]
    card: dict[str, Any]
    run_dir: Path
    stop_reason: str
    extra: dict[str, Any] = field(default_factory=dict)


def _fixed_part(config: ExperimentConfig) -> dict[str, Any]:
    """The part of a configuration that a resume must not change."""
    data = config.model_dump(mode="json")
    data.pop("run")
    data.pop("stop")
    data["federated"].pop("rounds")
    if not config.attack.active:  # runs made before the attack section keep their digests
        data.pop("attack")
    return data


def _check_device(device: str) -> None:
    """Refuse a ``run.device`` this machine does not have, naming the key."""
    if device.startswith("cuda"):
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(device.partition(":")[2] or 0) >= count:
            raise ConfigError(f"run.device = {device!r} is not available on this machine "
                              f"({count} CUDA device(s) visible to torch): use 'cpu'")
    elif device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("run.device = 'mps' is not available on this machine: use 'cpu'")


def _check_resumable(overrides: Iterable[str]) -> list[str]:
    checked = []
    for text in overrides:
        key, _ = parse_override(text)
        if key in FIXED_RUN_KEYS:
            raise ConfigError(f"--set {key} is not allowed with --resume: it decides where the "
                              "run's files live, so it is fixed when the run is created")
        if not any(key == k or (k.endswith(".") and key.startswith(k)) for k in RESUMABLE_KEYS):
            raise ConfigError(
                f"--set {key} is not allowed with --resume: only run.*, stop.* and "
                "federated.rounds can change when a run continues (anything else would make "
                "the result differ from an uninterrupted run)"
            )
        checked.append(text)
    return checked


def _private_root(config: ExperimentConfig, run_dir: str | Path) -> Path | None:
    """The separate private directory of ``run.outputs: guarantee-only`` (None: the run
    directory itself); refuses the setting where no guarantee could hold for the outputs."""
    if config.run.outputs != "guarantee-only":
        return None
    if not config.privacy.enabled:
        raise ConfigError("run.outputs = 'guarantee-only' needs a private run (privacy.enabled"
                          " = false: there is no guarantee to cover anything)")
    if not config.privacy.secure:
        raise ConfigError("run.outputs = 'guarantee-only' needs privacy.secure = true: a seeded "
                          "run's config.yaml holds the seed that regenerates its noise, so no "
                          "output would be covered")
    return private_dir_of(Path(run_dir))


#: summary.json's ``private_state`` once a last-iterate run deleted its checkpoints
STATE_DELETED = "deleted"


def _check_private_state_kept(directory: RunDirectory) -> None:
    """Refuse to resume a run that finished and deleted its private state."""
    import json

    try:
        summary = json.loads(directory.summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(summary, dict) and summary.get("private_state") == STATE_DELETED:
        raise ConfigError(
            f"resume = {str(directory.path)!r}: this run finished and deleted its private state "
            "(its checkpoints held intermediate models and the secret schedule, which its "
            "last-iterate guarantee assumes never published), so it cannot be continued or "
            "extended; start a new run, with federated.keep_private_state: true if you need to "
            "extend it later (the headline is then the all-iterates bound)"
        )


def _rounds_text(rows: list[dict[str, Any]]) -> str:
    """``"4, 5"``: the round indices of metrics rows."""
    return ", ".join(str(row.get("round")) for row in rows)


class Experiment:
    """One run of any registered algorithm, backed by a run directory.

    Use :meth:`create` for a new run and :meth:`resume` to continue one; then :meth:`run`.
    """

    def __init__(self, config: ExperimentConfig, run_dir: RunDirectory,
                 data: FederatedDataset | None = None) -> None:
        self.config = config
        self.dir = run_dir
        self.store: CheckpointStore | None = None  # set once the run directory is locked
        self._lock = None
        self._created = False  # this process made the run directory (Experiment.create)
        self.warnings: list[str] = []  # e.g. a non-finite training loss (said once)
        _check_device(config.run.device)
        if config.run.tensorboard:
            from privfl.report.tensorboard import check_available

            check_available()
        self._tensorboard = None
        if config.run.mlflow:
            from privfl.report.mlflow_log import check_available as check_mlflow

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
        self.metrics: list[dict[str, Any]] = []
        self.resumed_from: int | None = None
        self.resume_warnings: list[str] = []  # unreadable checkpoints that were skipped
        self.resume_notes: list[str] = []  # what else the user should know about the resume
        self.redrawn: list[dict[str, Any]] = []  # rows released, lost and run again (secure)
        self._expected: dict[int, dict[str, Any]] = {}  # logged rows a seeded resume reproduces

    # ------------------------------------------------------------------ construction
    def _build_algorithm(self) -> Any:
        """The configuration's algorithm; a memory-mapped per-client store puts its files in
        the run's private ``client-state/`` folder (:mod:`privfl.fl.client_store`)."""
        with state_directory(self.dir.client_state):
            return build_algorithm(self.config, self.data)

    @classmethod
    def create(cls, config: ExperimentConfig, run_dir: str | Path,
               data: FederatedDataset | None = None) -> Experiment:
        """A new run in ``run_dir`` (must not already hold one); writes config.yaml.

        ``data``: your own :class:`~privfl.data.FederatedDataset` (``data.dataset: custom``);
        by default the configuration's dataset is built.
        """
        directory = RunDirectory(run_dir, _private_root(config, run_dir))
        directory.check_new()
        experiment = cls(config, directory, data)
        experiment.planned_privacy()  # an accountant's refusal comes before any file is written
        run_id = directory.create()
        experiment._created = True
        try:
            experiment._lock = directory.acquire_lock()
            experiment.store = CheckpointStore(directory, run_id)
            directory.write_text(directory.config, dump_config(config))
            experiment._write_metrics([])
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
        config = config_from_dict(apply_overrides(saved, _check_resumable(overrides)))
        try:
            directory.private = _private_root(config, run_dir) or directory.path
            _check_private_state_kept(directory)
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
        if removed:
            experiment.resume_notes.append(
                f"removed {len(removed)} file(s) left by an interrupted write (temporary files, "
                f"digest records without their checkpoint): {', '.join(sorted(removed))}")
        try:
            experiment._load_latest_checkpoint()
            done = experiment.algorithm.round
            if config.federated.rounds < done:
                raise ConfigError(
                    f"federated.rounds = {config.federated.rounds} is out of range: this run "
                    f"has already completed {done} rounds; must be >= {done}"
                )
        except BaseException:
            experiment.release()
            raise
        directory.write_text(directory.config, dump_config(config))
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

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self) -> Path:
        """Write the checkpoint of the current round and its digest record; prune old ones."""
        if self.store is None:
            raise ValueError("save_checkpoint needs a run directory: use Experiment.create or "
                             "Experiment.resume")
        payload = {
            "algorithm": self.algorithm.state_dict(),
            "metrics": self.metrics,
            "torch_rng": torch.get_rng_state(),
            "fixed_config": _fixed_part(self.config),
            "redrawn": self.redrawn,
        }
        path = self.store.write(self.algorithm.round, payload,
                                config_digest=digest_json(_fixed_part(self.config)),
                                metrics=self.metrics)
        self.dir.prune_checkpoints(self.config.run.keep_checkpoints)
        return path

    def _load_latest_checkpoint(self) -> None:
        """Load the newest checkpoint whose digests verify (see
        :mod:`privfl.report.checkpoints`); each one skipped is reported in
        :attr:`resume_warnings`. With none written: round 0 as built (the run was killed before
        its first checkpoint). With none usable: a ConfigError that says how to start again.
        Rounds logged after the loaded state run again (:meth:`_rounds_after_checkpoint`)."""
        skipped = []
        config_digest = digest_json(_fixed_part(self.config))
        for candidate in self.store.candidates(config_digest):
            if candidate.payload is not None:
                try:
                    self._restore(candidate.payload)
                except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as error:
                    candidate.problem = ("its contents do not fit this run's algorithm ("
                                         f"{' '.join(str(error).split())[:160]})")
                    self.algorithm = self._build_algorithm()  # undo a partial load
            if candidate.problem is not None:
                skipped.append(f"{candidate.path.name}: {candidate.problem}")
                continue
            self.resumed_from = candidate.round
            self.resume_warnings = skipped
            self._rounds_after_checkpoint(candidate.payload.get("redrawn", []))
            return
        if skipped:
            raise ConfigError(
                f"resume = {str(self.dir.path)!r}: no usable checkpoint ({'; '.join(skipped)}), "
                f"although {self._logged_rounds()} round(s) were logged: the run cannot continue "
                f"where it stopped; start it again with privfl run {self.dir.config} --out NEW_DIR"
            )
        self.metrics = []  # killed before its first checkpoint: continue from round 0
        self.resumed_from = 0
        self.resume_warnings = []
        self._rounds_after_checkpoint([])

    def _restore(self, payload: dict[str, Any]) -> None:
        metrics = [dict(m) for m in payload["metrics"]][: payload["round"]]
        if [m.get("round") for m in metrics] != list(range(1, payload["round"] + 1)):
            raise ValueError("its metrics rows are not rounds 1..R")
        redrawn = payload.get("redrawn", [])
        if not isinstance(redrawn, list) or not all(isinstance(r, dict) for r in redrawn):
            raise ValueError("its re-drawn rounds are not a list of metrics rows")
        self.algorithm.load_state_dict(payload["algorithm"])
        if self.algorithm.round != payload["round"]:
            raise ValueError(f"the algorithm's state is at round {self.algorithm.round}")
        torch.set_rng_state(payload["torch_rng"])
        self.metrics = metrics

    def _logged_rows(self) -> list[dict[str, Any]]:
        """The rows of metrics.jsonl up to the first damaged line (a kill mid-append)."""
        rows = []
        text = (self.dir.metrics.read_text(encoding="utf-8", errors="replace")
                if self.dir.metrics.is_file() else "")
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                break
            if not isinstance(row, dict) or not isinstance(row.get("round"), int):
                break
            rows.append(row)
        return rows

    def _logged_rounds(self) -> int:
        return max((row["round"] for row in self._logged_rows()), default=0)

    def _rounds_after_checkpoint(self, saved_redrawn: list[dict[str, Any]]) -> None:
        """Rounds logged after the loaded state run again. Seeded: they are reproduced and
        compared (:meth:`_check_reproduced`). Secure: they were released and are drawn again,
        so their rows join ``redrawn.jsonl`` (written before metrics.jsonl is cut back) and
        each is composed once more. ``saved_redrawn``: those the checkpoint knew of."""
        redrawn = self.dir.read_metrics(self.dir.redrawn) if self.dir.redrawn.is_file() else []
        redrawn += [row for row in saved_redrawn if row not in redrawn]
        after = [row for row in self._logged_rows() if row["round"] > self.resumed_from]
        if after and self.config.privacy.secure:
            redrawn += [row for row in after if row not in redrawn]
            self.dir.write_metrics(redrawn, self.dir.redrawn)
            self.resume_notes.append(
                f"rounds {after[0]['round']}..{after[-1]['round']} were logged after the last "
                "checkpoint and run again with fresh os.urandom randomness (secure mode): each "
                f"was released twice and is counted twice ({len(redrawn)} re-drawn round(s) "
                "composed in all; their first rows are in redrawn.jsonl)")
        elif after:
            self._expected = {row["round"]: row for row in after}
        self.redrawn = redrawn
        self.algorithm.redrawn = len(redrawn)
        self._write_metrics(self.metrics)

    def _check_reproduced(self, metrics: dict[str, Any]) -> str | None:
        """A warning if a seeded round that ran again differs from the row logged before the
        kill (timing aside)."""
        logged = self._expected.pop(metrics["round"], None)
        if logged is None:
            return None
        fresh = json.loads(json.dumps(json_safe(metrics)))
        keys = sorted((set(logged) | set(fresh)) - {"seconds"})
        differ = [k for k in keys if logged.get(k) != fresh.get(k)]
        if not differ:
            return None
        key = differ[0]
        return (f"round {metrics['round']} ran again after the resume with the same seed but "
                f"differs from the row logged before the interruption in {', '.join(differ)} "
                f"({key}: logged {logged.get(key)!r}, now {fresh.get(key)!r}): both rows were "
                "released; a seeded round repeats its noise draws only on the same machine and "
                "privfl version")

    # ------------------------------------------------------------------ outputs
    def covered_metrics(self) -> set[str]:
        """The metrics keys the printed guarantee covers (:mod:`.outputs`)."""
        table = {**GENERIC_METRICS, **self.algorithm.output_classes()}
        return {key for key, (covered, _) in table.items() if covered}

    def _split_rows(self, rows: list[dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """``(what the run directory shows, what the private directory keeps)``: the rows
        themselves and None unless ``run.outputs: guarantee-only`` separates them."""
        if not self.dir.separate_private:
            return rows, None
        covered = self.covered_metrics()
        parts = [split_row(row, covered) for row in rows]
        return [public for public, _ in parts], [private for _, private in parts]

    def _write_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Rewrite metrics.jsonl (and the private one, see :meth:`_split_rows`)."""
        public, private = self._split_rows(rows)
        if private is not None:
            self.dir.write_metrics(private, self.dir.private_metrics)
        self.dir.write_metrics(public)

    def _append_metrics(self, row: dict[str, Any]) -> None:
        """Append one round's row to metrics.jsonl (and the private one)."""
        public, private = self._split_rows([row])
        if private is not None:
            self.dir.append_metrics(private[0], self.dir.private_metrics)
        self.dir.append_metrics(public[0])

    def outputs(self, *, checkpoints: bool) -> list[dict[str, Any]]:
        """Every metrics key and file of this run, covered by the guarantee or not, with the
        reason (privacy.json's ``outputs``)."""
        keys = [key for row in self.metrics for key in row]
        metrics = classify_metrics(keys, self.algorithm.output_classes())
        files = file_outputs(
            metrics=metrics, accuracy_keys=self.algorithm.metric_labels,
            secure=self.config.privacy.secure, guarantee_only=self.dir.separate_private,
            private_name=self.dir.private.name, checkpoints=checkpoints,
            tensorboard=self.config.run.tensorboard,
            mlflow=bool(self.config.run.mlflow),
            model_file=callable(getattr(self.algorithm, "global_params", None)),
            redrawn=bool(self.redrawn), health=self.health_keys(),
            client_state=self.dir.client_state.is_dir()
            and any(self.dir.client_state.iterdir()))
        return [o.to_dict() for o in metrics + files]

    def health_keys(self) -> list[str]:
        """The health signals health.png and report.html plot: the numeric keys of the rows the
        run directory shows that are neither accuracies nor privacy numbers."""
        from privfl.report.plots import health_keys

        return health_keys(self._split_rows(self.metrics)[0], list(self.algorithm.metric_labels))

    # ------------------------------------------------------------------ stopping rules
    def _target_reached(self) -> bool:
        target = self.config.stop.target_accuracy
        if target is None or not self.metrics:
            return False
        value = self.metrics[-1].get(f"{self.config.stop.target_metric}_accuracy")
        return finite(value) and value >= target

    def budget_exceeded(self, rounds: int) -> str | None:
        """Why running up to ``rounds`` rounds would exceed the budget (None if it would not).

        The budget applies to the results in the plan's primary scope: ``stop.epsilon`` to the
        tightest rigorous bound among them, ``stop.mu`` to the largest Gaussian-DP mu among them.
        """
        stop = self.config.stop
        if stop.epsilon is None and stop.mu is None:
            return None
        plan = self.algorithm.plan
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

    # ------------------------------------------------------------------ the loop
    def run(self, callbacks: RunCallbacks | None = None) -> ExperimentResult:
        """Run rounds until a stop; write checkpoints, metrics and the final artefacts."""
        if self.store is None:
            raise ValueError("run needs a run directory: use Experiment.create or "
                             "Experiment.resume")
        from privfl.backends import active_backend, check_algorithm

        # inside use_backend(RayBackend(...)): refuse an algorithm that would run locally anyway
        check_algorithm(active_backend(), self.algorithm)
        try:
            return self._run(callbacks or RunCallbacks())
        finally:
            self.release()

    def _run(self, callbacks: RunCallbacks) -> ExperimentResult:
        started = time.perf_counter()
        self._accounting_start = float(getattr(self.algorithm, "accounting_seconds", 0.0))
        if self.config.run.tensorboard:
            from privfl.report.tensorboard import TensorBoardLog

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
        """The MLflow run of this privfl run (privfl.report.mlflow_log): a new one, or the one
        tagged with this run directory's id (resume). guarantee-only: covered keys only."""
        from privfl.report.mlflow_log import MlflowLog, tracking_uri

        return MlflowLog(
            tracking_uri(self.config.run.mlflow, self.dir.path), self.config.name,
            self.dir.run_id(), self.config.model_dump(mode="json"),
            covered=self.covered_metrics() if self.dir.separate_private else None,
            run_name=self.dir.path.name)

    def _rounds(self, callbacks: RunCallbacks, started: float) -> ExperimentResult:
        callbacks.on_start(self)
        ran = 0
        every = self.config.run.checkpoint_every
        while True:
            stop = self.next_stop(ran)
            if stop is not None:
                break
            metrics = self.algorithm.run_round()
            ran += 1
            self.metrics.append(metrics)
            self._append_metrics(metrics)
            if self._tensorboard is not None:
                self._tensorboard.log(metrics)
            if self._mlflow is not None:
                self._mlflow.log(metrics)
            for warning in (self._divergence(metrics), self._check_reproduced(metrics)):
                if warning is not None:
                    self.warnings.append(warning)
                    callbacks.on_warning(self, warning)
            if self.algorithm.round % every == 0:
                self.save_checkpoint()
            callbacks.on_round(self, metrics)
        reason, detail = stop
        saved = {r for r, _ in self.dir.list_checkpoints()}
        if self.algorithm.round not in saved and self.algorithm.round > 0:
            self.save_checkpoint()
        result = self.finish(reason, detail, time.perf_counter() - started)
        callbacks.on_end(self, result)
        return result

    def _divergence(self, metrics: dict[str, Any]) -> str | None:
        """A warning the first time the training loss of a round with clients is NaN or inf."""
        loss = metrics.get("train_loss")
        cohort = metrics.get("cohort_size", metrics.get("participants", 1))
        if (self.warnings or not isinstance(loss, float) or math.isfinite(loss)
                or not cohort):
            return None
        t = self.config.training
        cause = (f"the usual cause is a learning rate too high for this model (training.lr = "
                 f"{t.lr:g}, optimizer {t.optimizer}): lower it")
        return (f"round {metrics['round']}: the training loss is {loss} (the local steps "
                f"diverged); {cause}. The models of this and later rounds are not usable")

    # ------------------------------------------------------------------ artefacts
    def card(self, rounds: int) -> dict[str, Any]:
        """The privacy card's rows after ``rounds`` rounds: the plan's, and a simulated
        attack's (:func:`privfl.attacks.poisoning.attack_card_rows`)."""
        from privfl.attacks.poisoning import attack_card_rows, attack_of

        algo = self.algorithm
        released = algo.released_rounds(rounds)
        rows = {**algo.plan.card(released), **attack_card_rows(attack_of(self.data))}
        if self.redrawn:
            rows["released rounds"] = (
                f"{released}: {rounds} rounds + {len(self.redrawn)} released twice "
                f"(rounds {_rounds_text(self.redrawn)} were logged, lost with their checkpoint "
                "and drawn again in secure mode); the accountant composes every release")
        return rows

    def planned_privacy(self) -> list[PrivacyResult]:
        """The guarantee if all configured rounds run (what the start card shows)."""
        return self.algorithm.privacy(self.config.federated.rounds)

    def setup(self) -> dict[str, Any]:
        """What ran, for report.md and the summary: data, then the algorithm's own rows."""
        c, algo = self.config, self.algorithm
        sizes = self.data.client_sizes
        rows = {
            "dataset": f"{c.data.dataset}: {self.data.name}",
            "clients": f"{self.data.num_clients} (n_j = {int(sizes.min())}..{int(sizes.max())}"
            f" train, {int(self.data.test_sizes.min())}..{int(self.data.test_sizes.max())} "
            "test)",
            "algorithm": f"{c.federated.algorithm}: {algo.title}",
        }
        rows.update(algo.setup())
        from privfl.attacks.poisoning import attack_of

        attack = attack_of(self.data)
        if attack is not None:
            rows["attack (simulated)"] = attack.text()
        if getattr(algo, "protection_config", None) is not None:
            rows["protection (client-side)"] = algo.protection_config.text()
        rows["seed"] = f"{c.seed} (" + (
            "partition, initialisation; cohorts, batches, noise and dropout from os.urandom"
            if c.privacy.secure else "partition, initialisation, cohorts, batches, noise") + ")"
        return rows

    def finish(self, reason: str, detail: str, seconds: float) -> ExperimentResult:
        """Write privacy.json, summary.json, model.pt, the plots and report.md; return the
        result. A finished run whose guarantee assumes its intermediate state hidden (a
        last-iterate release) deletes its checkpoints first."""
        from privfl.report.html_run import run_report_html
        from privfl.report.markdown import run_report_markdown
        from privfl.report.plan_headline import plan_headline
        from privfl.report.plots import plot_accuracy, plot_health, plot_privacy
        from privfl.report.provenance import run_provenance

        algo, config = self.algorithm, self.config
        # the accountants' share of the loop that wall_seconds times (the planned card is not)
        accounting = (float(getattr(algo, "accounting_seconds", 0.0))
                      - getattr(self, "_accounting_start", 0.0))
        rounds = algo.round
        results = algo.privacy(rounds)
        released = {"rounds_released": algo.released_rounds(rounds),
                    "redrawn_rounds": [row.get("round") for row in self.redrawn]}
        card = self.card(rounds)
        deleted = (bool(getattr(algo.plan, "hidden_state", False)) and reason != "max_rounds"
                   and rounds > 0)
        if deleted:
            self.dir.delete_private_state()
        outputs = self.outputs(checkpoints=not deleted and bool(self.dir.list_checkpoints()))
        guarantee_only = self.dir.separate_private
        covered = self.covered_metrics()
        shown = self._split_rows(self.metrics)[0]  # guarantee-only: the covered keys only
        labels = {k: v for k, v in algo.metric_labels.items()
                  if not guarantee_only or k in covered}
        last = shown[-1] if shown else {}
        target = config.stop.target_accuracy
        key = f"{config.stop.target_metric}_accuracy"
        reached = next((m["round"] for m in shown
                        if target is not None and finite(m.get(key)) and m[key] >= target), None)
        headline = plan_headline(algo.plan, results)
        summary: dict[str, Any] = {
            "command": "run",
            "headline": headline.to_dict(),
            "name": config.name,
            "description": config.description,
            "run_dir": str(self.dir.path),
            "algorithm": config.federated.algorithm,
            "private": algo.private,
            "rounds_planned": config.federated.rounds,
            "rounds_completed": rounds,
            **released,
            "stop_reason": reason,
            "stop_detail": detail,
            "finished": reason not in ("max_rounds",),
            "resumed_from_round": self.resumed_from,
            "warnings": list(self.warnings),
            "wall_seconds": seconds,
            "training_seconds": sum(m.get("seconds", 0.0) for m in self.metrics),
            "accounting_seconds": accounting,
            "final": {
                "round": last.get("round", 0),
                **{k: last.get(k, math.nan) for k in labels},
                **({"epsilon": last["epsilon"], "epsilon_method": last.get("epsilon_method")}
                   if "epsilon" in last else {}),
            },
            "metric_labels": labels,
            "target_accuracy": target,
            "target_metric": config.stop.target_metric,
            "rounds_to_target": reached,
            "setting": card,
            "privacy": [r.to_dict() for r in results],
            "private_state": STATE_DELETED if deleted else (
                f"kept in {self.dir.private.name}/checkpoints/" if guarantee_only
                else "kept in checkpoints/"),
            "outputs": outputs,
            "provenance": run_provenance(config.model_dump(mode="json")),
        }
        self.dir.write_json(self.dir.privacy, {
            "command": "run",
            "setting": card,
            "rounds": rounds,
            **released,
            "private": algo.private,
            "results": [r.to_dict() for r in results],
            "outputs": outputs,
        })
        written = dict(summary)
        if guarantee_only:  # timings grow with realised counts; warnings read unnoised losses
            for name in ("warnings", "wall_seconds", "training_seconds",
                         "accounting_seconds"):
                written.pop(name)
        self.dir.write_json(self.dir.summary, written)
        self._write_model()
        title = f"{config.name}: {self.data.name}"
        plot_accuracy(shown, self.dir.accuracy_plot, labels, title=title, target=target)
        plot_privacy(shown, self.dir.privacy_plot,
                     delta=config.privacy.delta if algo.private else None, title=title,
                     headline_scopes=[s for s in headline_scopes(algo.plan) if s])
        covered_now = {o["name"]: o["covered"] for o in outputs if o["kind"] == "metric"}
        plot_health(shown, self.dir.health_plot, self.health_keys(), covered=covered_now,
                    title=title)
        setup = self.setup()
        self.dir.write_text(self.dir.report, run_report_markdown(
            written, card, results, shown, setup=setup, outputs=outputs, headline=headline))
        self.dir.write_text(self.dir.report_html, run_report_html(
            written, card, results, shown, setup=setup, outputs=outputs, headline=headline))
        return ExperimentResult(summary, list(self.metrics), results, card, self.dir.path,
                                reason)

    def _write_model(self) -> None:
        """model.pt: the final released model (``name -> tensor``, torch.save), for algorithms
        that offer ``global_params()``."""
        if not callable(getattr(self.algorithm, "global_params", None)):
            return
        params = {k: v.detach().cpu() for k, v in self.algorithm.global_params().items()}
        write_atomically(self.dir.model, lambda stream: torch.save(params, stream))
