"""Build and run a PriFedSync experiment from a configuration, with a run directory and resume.

:class:`Experiment` turns an :class:`~privfl.config.ExperimentConfig` into data, a model, ONE
:class:`~privfl.fl.LocalTrainingSpec` and a :class:`~privfl.fl.algorithms.PriFedSync`, then runs
rounds until a stop: all rounds done, a target accuracy reached, the privacy budget would be
exceeded by the next round (that round is not run), or ``run.max_rounds`` rounds ran in this
invocation. After every ``run.checkpoint_every`` rounds (and at the stop) it writes a checkpoint
holding the algorithm state (all client models, optimizer states, accuracies), the numpy and
torch generator states, torch's global RNG state, the round index and the metrics so far.

Resume (:meth:`Experiment.resume`) rebuilds the same objects from the saved ``config.yaml``,
loads the newest readable checkpoint, truncates ``metrics.jsonl`` to it and continues: the
result equals an uninterrupted run with the same seed bit for bit (same machine, same thread
count). On resume only execution keys (``run.*``), stops (``stop.*``) and
``federated.rounds`` (to extend a run) may be changed.

Secure mode (``privacy.secure``) draws cohorts, batches and noise from ``os.urandom``: a resumed
secure run continues from the checkpoint's models, optimizer states and round index with fresh
randomness, so it is not bit-identical to anything (no secure run is). The accounting still
counts rounds by index; but a round that completed after the last checkpoint and is run again
is a second, independent draw: if its models were seen, it was released twice and counted once.
:attr:`Experiment.resume_notes` says so when that happens (keep ``run.checkpoint_every: 1``,
the default, for secure runs).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

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
from privfl.fl.algorithms.prifedsync import PriFedSync
from privfl.fl.spec import LocalTrainingSpec
from privfl.report.card import prifedsync_card
from privfl.report.rundir import RunDirectory

__all__ = [
    "RESUMABLE_KEYS",
    "Experiment",
    "ExperimentResult",
    "RunCallbacks",
    "build_algorithm",
    "build_dataset",
    "build_model",
    "build_spec",
]

#: Keys that ``--set`` may change when resuming (prefixes ending in "." cover a section).
RESUMABLE_KEYS = ("run.", "stop.", "federated.rounds")
CHECKPOINT_FORMAT = "privfl-run-checkpoint/1"


# ---------------------------------------------------------------------------------- builders
def build_dataset(config: ExperimentConfig) -> FederatedDataset:
    """The federated dataset the configuration describes (deterministic in ``config.seed``)."""
    from privfl import data as d

    c, seed = config.data, config.seed
    if c.dataset == "mnist-5k":
        train, test = d.load_mnist_5k(normalize=c.normalize).split(c.test_fraction, seed)
    elif c.dataset == "digits":
        train, test = d.load_digits(normalize=c.normalize).split(c.test_fraction, seed)
    elif c.dataset == "synthetic":
        full = d.synthetic_dataset(c.synthetic_examples, 10, (1, 28, 28), seed=seed)
        train, test = full.split(c.test_fraction, seed)
    elif c.dataset == "fashion-mnist":
        train, test = d.load_fashion_mnist(c.root, download=c.download, normalize=c.normalize)
    elif c.dataset == "mnist":
        train, test = d.load_mnist(c.root, download=c.download, normalize=c.normalize)
    else:  # cifar10
        train, test = d.load_cifar10(c.root, download=c.download, normalize=c.normalize)
    if c.partition == "shards":
        return d.federate_shards(
            train, test, num_clients=c.clients, shards_per_client=c.shards_per_client,
            shard_size=c.shard_size, test_size=200 if c.test_size is None else c.test_size,
            test_replace=c.test_replace, seed=seed,
        )
    if c.partition == "dirichlet":
        return d.federate_dirichlet(
            train, test, num_clients=c.clients,
            train_size=500 if c.train_size is None else c.train_size,
            test_size=200 if c.test_size is None else c.test_size, beta=c.beta,
            disjoint=c.disjoint, test_sampling=c.test_sampling, seed=seed,
        )
    return d.federate_iid(train, test, num_clients=c.clients, size=c.train_size,
                          test_size=c.test_size, seed=seed)


def build_model(config: ExperimentConfig, data: FederatedDataset) -> nn.Module:
    """The configured architecture, initialised from ``config.seed``; ``num_classes`` and
    ``input_shape`` come from the data unless given in ``model.kwargs``."""
    from privfl.models import MODELS
    from privfl.models import build_model as _build

    cls, _ = MODELS[config.model.name]
    accepted = inspect.signature(cls).parameters
    kwargs = dict(config.model.kwargs)
    if "num_classes" in accepted:
        kwargs.setdefault("num_classes", data.num_classes)
    if "input_shape" in accepted:
        kwargs.setdefault("input_shape", data.input_shape)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        try:
            model = _build(config.model.name, **kwargs)
        except (TypeError, ValueError) as error:
            raise ConfigError(
                f"model.kwargs = {dict(config.model.kwargs)!r} is not valid for model "
                f"{config.model.name!r}: {error}"
            ) from None
    expected = getattr(model, "input_shape", None)
    if expected is not None and tuple(expected) != tuple(data.input_shape):
        raise ConfigError(
            f"model.name = {config.model.name!r} takes inputs of shape {tuple(expected)}: "
            f"data.dataset = {config.data.dataset!r} has {tuple(data.input_shape)}"
        )
    return model


def build_spec(config: ExperimentConfig) -> LocalTrainingSpec:
    """THE local-training spec of the run: the trainer and the accountant both read it."""
    t, p = config.training, config.privacy
    try:
        return LocalTrainingSpec(
            local_steps=t.local_steps,
            batch_size=t.batch_size,
            sampling=t.sampling,
            clip_norm=p.clip_norm if p.enabled else None,
            noise_multiplier=p.z,
            optimizer=t.optimizer,
            lr=t.lr,
            momentum=t.momentum,
            betas=tuple(t.betas),
            eps=t.eps,
            weight_decay=t.weight_decay,
            secure=p.secure,
        )
    except ValueError as error:
        raise ConfigError(f"training/privacy settings: {error}") from None


def build_algorithm(
    config: ExperimentConfig, data: FederatedDataset | None = None
) -> PriFedSync:
    """PriFedSync with everything the configuration says (data built if not given)."""
    data = build_dataset(config) if data is None else data
    model = build_model(config, data)
    spec = build_spec(config)
    f, p, t = config.federated, config.privacy, config.training
    try:
        return PriFedSync(
            model, spec, data, client_rate=f.client_rate, server_lr=f.server_lr,
            helper=f.helper, alpha=f.alpha, empty_cohort=f.empty_cohort, seed=config.seed,
            delta=p.delta if p.enabled else None, accountants=tuple(p.accountants),
            lr_decay_every=t.lr_decay_every, lr_decay_gamma=t.lr_decay_gamma,
            device=config.run.device, eval_batch_size=config.run.eval_batch_size,
        )
    except ValueError as error:
        raise ConfigError(str(error)) from None


# ---------------------------------------------------------------------------------- running
class RunCallbacks:
    """Hooks for progress display; the default does nothing."""

    def on_start(self, experiment: Experiment) -> None:
        """Called once before the first round of this invocation."""

    def on_round(self, experiment: Experiment, metrics: dict[str, Any]) -> None:
        """Called after every round with its metrics."""

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
    return data


def _comparable_fixed_part(fixed: dict[str, Any]) -> dict[str, Any] | None:
    """A checkpoint's stored fixed part re-validated by today's schema (so a renamed or
    aliased key, e.g. ``privacy.secure_noise`` -> ``privacy.secure``, compares equal); None if
    it is no longer a valid configuration."""
    try:
        return _fixed_part(config_from_dict(fixed))
    except (ConfigError, TypeError, KeyError):
        return None


def _check_resumable(overrides: Iterable[str]) -> list[str]:
    checked = []
    for text in overrides:
        key, _ = parse_override(text)
        if not any(key == k or (k.endswith(".") and key.startswith(k)) for k in RESUMABLE_KEYS):
            raise ConfigError(
                f"--set {key} is not allowed with --resume: only run.*, stop.* and "
                "federated.rounds can change when a run continues (anything else would make "
                "the result differ from an uninterrupted run)"
            )
        checked.append(text)
    return checked


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value
    )


class Experiment:
    """One PriFedSync run backed by a run directory.

    Use :meth:`create` for a new run and :meth:`resume` to continue one; then :meth:`run`.
    """

    def __init__(self, config: ExperimentConfig, run_dir: RunDirectory) -> None:
        self.config = config
        self.dir = run_dir
        if config.run.threads is not None:
            torch.set_num_threads(config.run.threads)
        self.data = build_dataset(config)
        self.algorithm = build_algorithm(config, self.data)
        self.metrics: list[dict[str, Any]] = []
        self.resumed_from: int | None = None
        self.resume_warnings: list[str] = []  # unreadable checkpoints that were skipped
        self.resume_notes: list[str] = []  # what else the user should know about the resume

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(cls, config: ExperimentConfig, run_dir: str | Path) -> Experiment:
        """A new run in ``run_dir`` (must not already hold one); writes config.yaml."""
        directory = RunDirectory(run_dir)
        directory.check_new()
        experiment = cls(config, directory)
        directory.create()
        directory.write_text(directory.config, dump_config(config))
        directory.write_metrics([])
        return experiment

    @classmethod
    def resume(cls, run_dir: str | Path, overrides: Iterable[str] = ()) -> Experiment:
        """Continue the run in ``run_dir`` from its newest readable checkpoint."""
        directory = RunDirectory(run_dir)
        directory.require_existing()
        saved = read_yaml(directory.config)
        config = config_from_dict(apply_overrides(saved, _check_resumable(overrides)))
        experiment = cls(config, directory)
        experiment._load_latest_checkpoint()
        directory.write_text(directory.config, dump_config(config))
        return experiment

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self) -> Path:
        path = self.dir.checkpoint(self.algorithm.round)
        payload = {
            "format": CHECKPOINT_FORMAT,
            "round": self.algorithm.round,
            "algorithm": self.algorithm.state_dict(),
            "metrics": self.metrics,
            "torch_rng": torch.get_rng_state(),
            "fixed_config": _fixed_part(self.config),
        }
        tmp = path.with_name(f".{path.name}.tmp")
        torch.save(payload, tmp)
        tmp.replace(path)
        self.dir.prune_checkpoints(self.config.run.keep_checkpoints)
        return path

    def _load_latest_checkpoint(self) -> None:
        errors = []
        for round_index, path in reversed(self.dir.list_checkpoints()):
            try:
                payload = torch.load(path, map_location="cpu", weights_only=True)
            except Exception as error:  # a torn or corrupt file: fall back to an older one
                errors.append(f"{path.name}: {error}")
                continue
            if payload.get("format") != CHECKPOINT_FORMAT:
                errors.append(f"{path.name}: unknown format {payload.get('format')!r}")
                continue
            if _comparable_fixed_part(payload["fixed_config"]) != _fixed_part(self.config):
                raise ConfigError(
                    f"checkpoint {path} was written with a different configuration than "
                    f"{self.dir.config}: resume needs the configuration the run started with"
                )
            self.algorithm.load_state_dict(payload["algorithm"])
            torch.set_rng_state(payload["torch_rng"])
            self.metrics = [dict(m) for m in payload["metrics"]][: payload["round"]]
            self.resumed_from = round_index
            self.resume_warnings = errors
            self._note_lost_rounds()
            self.dir.write_metrics(self.metrics)
            return
        # no checkpoint: start from round 0 in the same directory
        self.metrics = []
        self.resumed_from = 0
        self.resume_warnings = errors
        self._note_lost_rounds()
        self.dir.write_metrics([])

    def _note_lost_rounds(self) -> None:
        """Secure mode: say when rounds after the checkpoint ran before and will run again."""
        try:
            logged = max((int(m.get("round", 0)) for m in self.dir.read_metrics()), default=0)
        except (ValueError, TypeError, AttributeError):  # a torn metrics.jsonl
            logged = 0
        if not self.config.privacy.secure or logged <= self.resumed_from:
            return
        self.resume_notes.append(
            f"rounds {self.resumed_from + 1}..{logged} ran after the last checkpoint and run "
            "again with fresh os.urandom randomness (secure mode): if their models were seen, "
            "those rounds were released twice but are counted once (run.checkpoint_every: 1 "
            "avoids this)"
        )

    # ------------------------------------------------------------------ stopping rules
    def _target_reached(self) -> bool:
        target = self.config.stop.target_accuracy
        if target is None or not self.metrics:
            return False
        value = self.metrics[-1].get(f"{self.config.stop.target_metric}_accuracy")
        return _finite(value) and value >= target

    def budget_exceeded(self, rounds: int) -> str | None:
        """Why running up to ``rounds`` rounds would exceed the budget (None if it would not)."""
        stop = self.config.stop
        if stop.epsilon is None and stop.mu is None:
            return None
        weak = [r for r in self.algorithm.privacy(rounds) if r.extras.get("scope") == "weak"]
        if stop.mu is not None:
            mu = next(r.extras["mu"] for r in weak if r.method == "gdp-clt")
            if mu > stop.mu:
                return (f"round {rounds} would reach mu_max = {mu:.6g} (gdp-clt estimate) > "
                        f"stop.mu = {stop.mu:g}")
        if stop.epsilon is not None:
            bounds = [r for r in weak if r.kind == "bound"]
            tightest = min(bounds, key=lambda r: r.epsilon)
            if tightest.epsilon > stop.epsilon:
                return (f"round {rounds} would spend epsilon = {tightest.epsilon:.6g} "
                        f"({tightest.method} bound, delta = {tightest.delta:g}) > stop.epsilon "
                        f"= {stop.epsilon:g}")
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
        callbacks = callbacks or RunCallbacks()
        started = time.perf_counter()
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
            self.dir.append_metrics(metrics)
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

    # ------------------------------------------------------------------ artefacts
    def planned_privacy(self) -> list[PrivacyResult]:
        """The guarantee if all configured rounds run (what the start card shows)."""
        return self.algorithm.privacy(self.config.federated.rounds)

    def setup(self) -> dict[str, Any]:
        """What ran, for report.md and the summary."""
        c, algo = self.config, self.algorithm
        sizes = self.data.client_sizes
        return {
            "dataset": f"{c.data.dataset}: {self.data.name}",
            "clients": f"{self.data.num_clients} (n_j = {int(sizes.min())}..{int(sizes.max())}"
            f" train, {int(self.data.test_sizes.min())}..{int(self.data.test_sizes.max())} "
            "test)",
            "model": " ".join(filter(None, (c.model.name, str(dict(c.model.kwargs or {}) or ""),
                                            f"({algo.trainer.num_params:,} parameters)"))),
            "local training": f"K = {c.training.local_steps}, B = {c.training.batch_size} "
            f"({c.training.sampling}), {c.training.optimizer} lr {c.training.lr:g}"
            + (f", weight decay {c.training.weight_decay:g}" if c.training.weight_decay else ""),
            "PriFedSync": f"R = {c.federated.rounds}, p = {c.federated.client_rate:g}, "
            f"eta = {c.federated.server_lr:g}, helper {c.federated.helper}"
            + (f" (alpha = {c.federated.alpha:g})" if c.federated.helper == "interpolation"
               else "") + f", empty cohorts: {c.federated.empty_cohort}",
            "privacy": "record-level DP (seed 000 Theorem 2)" if algo.private
            else "none (non-private baseline)",
            "seed": f"{c.seed} ("
            + ("partition, initialisation, dropout; cohorts, batches and noise from os.urandom"
               if c.privacy.secure else "partition, initialisation, cohorts, batches, noise")
            + ")",
        }

    def finish(self, reason: str, detail: str, seconds: float) -> ExperimentResult:
        """Write privacy.json, summary.json, the plots and report.md; return the result."""
        from privfl.report.markdown import run_report_markdown
        from privfl.report.plots import plot_accuracy, plot_privacy

        algo, config = self.algorithm, self.config
        rounds = algo.round
        results = algo.privacy(rounds)
        card = prifedsync_card(algo, rounds)
        last = self.metrics[-1] if self.metrics else {}
        target = config.stop.target_accuracy
        key = f"{config.stop.target_metric}_accuracy"
        reached = next((m["round"] for m in self.metrics
                        if target is not None and _finite(m.get(key)) and m[key] >= target), None)
        summary: dict[str, Any] = {
            "command": "run",
            "name": config.name,
            "description": config.description,
            "run_dir": str(self.dir.path),
            "algorithm": config.federated.algorithm,
            "private": algo.private,
            "rounds_planned": config.federated.rounds,
            "rounds_completed": rounds,
            "stop_reason": reason,
            "stop_detail": detail,
            "finished": reason not in ("max_rounds",),
            "resumed_from_round": self.resumed_from,
            "wall_seconds": seconds,
            "training_seconds": sum(m.get("seconds", 0.0) for m in self.metrics),
            "final": {
                "round": last.get("round", 0),
                "personalised_accuracy": last.get("personalised_accuracy", math.nan),
                "global_accuracy": last.get("global_accuracy", math.nan),
                "personalised_accuracy_cohort": last.get("personalised_accuracy_cohort",
                                                         math.nan),
            },
            "target_accuracy": target,
            "target_metric": config.stop.target_metric,
            "rounds_to_target": reached,
            "setting": card,
            "privacy": [r.to_dict() for r in results],
        }
        self.dir.write_json(self.dir.privacy, {
            "command": "run",
            "setting": card,
            "rounds": rounds,
            "private": algo.private,
            "results": [r.to_dict() for r in results],
        })
        self.dir.write_json(self.dir.summary, summary)
        title = f"{config.name}: {self.data.name}"
        plot_accuracy(self.metrics, self.dir.accuracy_plot, title=title, target=target)
        plot_privacy(self.metrics, self.dir.privacy_plot,
                     delta=config.privacy.delta if algo.private else None, title=title)
        self.dir.write_text(self.dir.report, run_report_markdown(
            summary, card, results, self.metrics, setup=self.setup()))
        return ExperimentResult(summary, list(self.metrics), results, card, self.dir.path,
                                reason)

