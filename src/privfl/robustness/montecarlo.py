"""Monte Carlo training: M independently noised DP models of one configuration, trained together.

The certificates of Xie et al. 2023 (Theorems 3 and 6) are about expectations over the training
randomness, ``F_c(x) = E[softmax_c(M(D), x)]``; they are estimated from M models trained
independently on the same data (Section 6.1.5: M = 1000 for certified accuracy, 100 for attack
inefficacy). :func:`train_replicas` trains them as extra rows of the vectorised engine.

Replica ``r`` is the configuration run with seed ``s_r`` on the data (partition and, with an
``attack`` section, the poisoning) of the configuration's own seed ``s``::

    s_r = ClientStreams.derive(s, 0, [r], domain=REPLICA_DOMAIN).seeds[0, 0]    (62 bits)

so its model initialisation, cohorts, local batches and noise come from ``(s, r)`` alone,
whatever M is and in whatever order the replicas run. Its privacy is the algorithm's own plan
(same sampling, noise, clipping, rounds): :mod:`~privfl.robustness.replica_privacy` states the
per-model ``(epsilon, delta)`` and ``M x epsilon`` for the certification.

How the replicas train together (:mod:`~privfl.robustness.replica_runner`): every replica is
``algorithm.replica(s_r, init)`` (shares the model, trainer, client data and plan; owns its
global model, optimizer and server states and generators) and runs the algorithm's own stages;
the local work of all replicas of a wave becomes ONE engine call over one shared data pool (a
client's index tensor repeated for every replica that sampled it). Replica ``r``'s model equals
training replica ``r`` alone (:func:`train_replicas_serially`, the reference: one full
``build_algorithm`` per replica) bit for bit: always in the looped layout; in the batched layout
with fixed-size local batches (``training.sampling: without-replacement``; the engine's rows do
not depend on their chunk then). The predictions of both are computed the same way, in groups
of :data:`PREDICT_GROUP` consecutive replicas. On a sharded backend (``backend=``, e.g. Ray),
each gathered call runs as shards of whole chunks on the workers, with the same result.

After training, each replica's hard labels and softmax probabilities on the clean test split
(``"test"``) and on every extra evaluation set are returned
(:class:`~privfl.robustness.replica_cache.ReplicaResult`) and, with ``out``, written to
``out/replicas.npz`` with the configuration digest and the seeds
(:func:`~privfl.robustness.replica_cache.load_replicas` reads them back).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from privfl._validation import check_choice, check_int
from privfl.fl.params import trainable_parameters
from privfl.fl.random_streams import ClientStreams
from privfl.fl.trainer import LAYOUTS
from privfl.fl.workers import single_thread
from privfl.robustness.replica_cache import (
    ReplicaResult,
    check_set_name,
    config_digest,
    data_digest,
    load_replicas,
    save_replicas,
)
from privfl.robustness.replica_privacy import ReplicaPrivacy, replica_privacy
from privfl.robustness.replica_runner import run_replicas, run_rounds

__all__ = ["CHUNK_BUDGET", "DEFAULT_CHUNK", "PREDICT_GROUP", "REPLICA_DOMAIN", "ReplicaPrivacy",
           "ReplicaResult", "initial_parameters", "load_replicas", "replica_chunk",
           "replica_config", "replica_seeds", "train_replicas", "train_replicas_serially"]

#: ``ClientStreams.derive`` domain of the replica seeds (separates them from other derived seeds)
REPLICA_DOMAIN = 0x4D43
#: replicas whose predictions are computed in one stacked forward (the same groups in both modes)
PREDICT_GROUP = 32
#: clients per forward of the batched layout when none is configured and the model's working
#: set cannot be estimated (see :func:`replica_chunk`)
DEFAULT_CHUNK = 64
#: working set of one chunk on CPU (:func:`replica_chunk`): small enough to stay in cache for
#: models with large rows, large enough to spread the per-step costs of tiny ones
CHUNK_BUDGET = 16 << 20
#: memory for the rows of one engine call (parameters, gradients, optimizer states) on CPU
WAVE_BUDGET = 1 << 30

Progress = Callable[[int, int], None]


def replica_seeds(seed: int, models: int, first: int = 0) -> np.ndarray:
    """``[models]`` uint64: the seeds of replicas ``first .. first + models - 1`` of a
    configuration with seed ``seed`` (see the module docstring)."""
    seed = check_int("seed", seed, 0)
    models = check_int("models", models, 1)
    first = check_int("first", first, 0)
    streams = ClientStreams.derive(seed, 0, range(first, first + models), noise_streams=1,
                                   domain=REPLICA_DOMAIN)
    return streams.seeds[:, 0].numpy().astype(np.uint64)


def replica_config(config: Any, seed: int) -> Any:
    """The configuration of one replica: ``config`` with ``seed`` replaced."""
    return config.model_copy(update={"seed": int(seed)})


# ------------------------------------------------------------------------------ preparation
def _config(config: Any) -> Any:
    from privfl.config import ExperimentConfig, load_config

    if isinstance(config, (str, Path)):
        config = load_config(config)
    if not isinstance(config, ExperimentConfig):
        raise ValueError(f"config = {type(config).__name__} is not allowed: must be an "
                         "ExperimentConfig or the path of a configuration file")
    for key in ("epsilon", "mu", "target_accuracy"):
        value = getattr(config.stop, key)
        if value is not None:
            raise ValueError(f"stop.{key} = {value!r} is not allowed with Monte Carlo training: "
                             "every replica runs federated.rounds rounds (remove the stop)")
    if config.run.max_rounds is not None:
        raise ValueError(f"run.max_rounds = {config.run.max_rounds} is not allowed with Monte "
                         "Carlo training: every replica runs federated.rounds rounds")
    device = config.run.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"run.device = {device!r} is not available on this machine: use 'cpu'")
    return config


def _data(config: Any, data: Any) -> Any:
    from privfl.algorithms.builders import apply_attack, build_dataset
    from privfl.data.datasets import FederatedDataset

    if data is None:
        return build_dataset(config)
    if not isinstance(data, FederatedDataset):
        raise ValueError(f"data = {type(data).__name__} is not allowed: must be a "
                         "privfl.data.FederatedDataset")
    if config.data.dataset != "custom":
        raise ValueError(f"data = {data.name!r} given from Python needs data.dataset: custom in "
                         f"the configuration (it says {config.data.dataset!r})")
    return apply_attack(config, data)


def _eval_sets(data: Any, eval_sets: Mapping[str, Any] | None) -> dict[str, tuple]:
    """``name -> (x float array [N, *input_shape], y int64 [N])``: ``test`` first."""
    sets = {"test": (data.test.x, np.asarray(data.test.y, dtype=np.int64))}
    if eval_sets is None:
        return sets
    if not isinstance(eval_sets, Mapping):
        raise ValueError(f"eval_sets = {type(eval_sets).__name__} is not allowed: must map a "
                         "name to an (x, y) pair or a privfl.data.Dataset")
    for name, value in eval_sets.items():
        check_set_name(name)
        if name == "test":
            raise ValueError("eval_sets name = 'test' is not allowed: it is the clean test split")
        try:
            x, y = (value.x, value.y) if hasattr(value, "x") and hasattr(value, "y") else value
        except (TypeError, ValueError):
            raise ValueError(f"eval_sets[{name!r}] = {type(value).__name__} is not allowed: "
                             "must be an (x, y) pair or a privfl.data.Dataset") from None
        x = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
        y = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        shape = ", ".join(map(str, data.input_shape))
        if tuple(x.shape[1:]) != tuple(data.input_shape) or y.shape != (x.shape[0],):
            raise ValueError(f"eval_sets[{name!r}] has x {tuple(x.shape)} and y "
                             f"{tuple(y.shape)}: must be [N, {shape}] and [N]")
        if y.size and (y.min() < 0 or y.max() >= data.num_classes or
                       not np.issubdtype(y.dtype, np.integer)):
            raise ValueError(f"eval_sets[{name!r}] labels must be integers in [0, "
                             f"{data.num_classes - 1}]")
        sets[name] = (x, y.astype(np.int64))
    return sets


def _engine(trainer: Any, layout: str | None, chunk_size: int | None, device: str,
            example: Any) -> None:
    """Set the trainer's layout and chunk size (the batched layout needs a fixed chunk: by
    default :func:`replica_chunk` of the model, the same in both modes)."""
    if layout is not None:
        trainer.layout = check_choice("layout", layout, LAYOUTS)
    if chunk_size is not None:
        trainer.chunk_size = check_int("chunk_size", chunk_size, 1)
    if trainer.resolve_layout(device) == "batched" and trainer.chunk_size is None:
        trainer.chunk_size = replica_chunk(trainer, example, device)


def replica_chunk(trainer: Any, example: tuple[np.ndarray, np.ndarray],
                  device: str = "cpu") -> int:
    """Rows per chunk of the batched layout for replicas: the largest power of two in [8, 1024]
    whose working set, rows x (B x activation bytes of one example + 16 d bytes of parameters,
    gradients, sums and optimizer state), fits :data:`CHUNK_BUDGET`. It depends on the model and
    the batch size only (never on how many rows a call has), so a row's result does not depend
    on which replicas share its call. Measured on this 2-core CPU (M = 20-100, MNIST 0 vs 1):
    logistic regression 64 -> 128 rows, the paper's CNN 64 -> 8 rows (14.5 s -> 11.8 s)."""
    if not trainer.uses_fast_path:
        return DEFAULT_CHUNK
    x, y = example
    x = torch.as_tensor(x[:1]).to(device=device, dtype=trainer.dtype)
    y = torch.as_tensor(y[:1]).to(device=device)
    row = trainer.spec.batch_size * trainer.example_bytes(x, y)
    row += 16 * trainer.num_params
    rows = max(1, CHUNK_BUDGET // max(1, row))
    return int(min(1024, max(8, 1 << (rows.bit_length() - 1))))


def _supports_replicas(algorithm: Any) -> None:
    from privfl.algorithms.base import RoundAlgorithm

    if getattr(type(algorithm), "replica", RoundAlgorithm.replica) is RoundAlgorithm.replica:
        raise ValueError(f"federated.algorithm = {algorithm.name!r} is not allowed for Monte "
                         "Carlo training: it has no replica() (dp-fedavg, insdp-fedavg and "
                         "insdp-fedsgd have)")


def _replica_engine(backend: Any, device: str) -> Any:
    """The sharded backend the gathered engine calls run on, or None (here): ``backend``, by
    default the active one (:func:`privfl.backends.use_backend`)."""
    from privfl.backends import Backend, LocalBackend, ShardedBackend, active_backend
    from privfl.robustness.replica_runner import ReplicaBackend

    backend = active_backend() if backend is None else backend
    if isinstance(backend, LocalBackend):
        return None
    if not isinstance(backend, ShardedBackend) or isinstance(backend, ReplicaBackend):
        name = backend.name if isinstance(backend, Backend) else type(backend).__name__
        raise ValueError(f"backend = {name!r} is not allowed for Monte Carlo training: must be "
                         "the local backend or a sharded one (RayBackend, InProcessShards)")
    workers = str(getattr(backend, "device", "cpu"))
    if torch.device(device).type != torch.device(workers).type:
        raise ValueError(f"run.device = {device!r} is not allowed with backend "
                         f"{backend.name!r}: its workers train on {workers!r}, which would "
                         "change the arithmetic; use run.device: cpu")
    return backend


def initial_parameters(config: Any, data: Any, seed: int) -> dict[str, torch.Tensor]:
    """The initial parameters of the replica with seed ``seed``: the configuration's model
    initialised from that seed, as ``privfl run`` would with ``seed: <seed>``."""
    from privfl.algorithms.builders import build_model

    return trainable_parameters(build_model(replica_config(config, seed), data))


def _prepare(config: Any, models: Any, data: Any, eval_sets: Any) -> tuple:
    """Checked ``(config, models, data, evaluation sets, replica seeds)`` of both modes."""
    config = _config(config)
    models = check_int("models", models, 1)
    data = _data(config, data)
    sets = _eval_sets(data, eval_sets)
    _check_prediction_memory(models, sets, data.num_classes)
    return config, models, data, sets, replica_seeds(config.seed, models)


def _check_prediction_memory(models: int, sets: Mapping[str, tuple], classes: int) -> None:
    """Refuse an M whose predictions cannot be held: M x points x (4 bytes a class probability
    + 8 bytes a label), more than half of this machine's memory (checked before training)."""
    points = sum(len(y) for _, y in sets.values())
    need = models * points * (4 * classes + 8)
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not a POSIX system: no check
        return
    if need > memory // 2:
        most = max(1, (memory // 2) // max(1, points * (4 * classes + 8)))
        raise ValueError(
            f"models = {models} is out of range: must be <= {most} here (the predictions of M "
            f"models on {points} evaluation points take {need / 2**30:.1f} GiB, more than half "
            f"of this machine's {memory / 2**30:.1f} GiB)")


class _Predictions:
    """Hard labels and softmax probabilities of the final models, computed in groups of
    :data:`PREDICT_GROUP` consecutive replicas (the same groups whatever the training)."""

    def __init__(self, trainer: Any, sets: dict[str, tuple], models: int, device: str,
                 batch_size: int, keep_weights: bool) -> None:
        self.trainer, self.models, self.batch_size = trainer, models, batch_size
        self.inputs = {name: torch.as_tensor(x).to(device=device, dtype=trainer.dtype)
                       for name, (x, _) in sets.items()}
        self.labels = {name: y for name, (_, y) in sets.items()}
        self.predictions: dict[str, list[np.ndarray]] = {name: [] for name in sets}
        self.probabilities: dict[str, list[np.ndarray]] = {name: [] for name in sets}
        self.pending: list[torch.Tensor] = []
        self.done = 0
        self.kept: list[torch.Tensor] | None = [] if keep_weights else None
        self.seconds = 0.0

    def add(self, rows: torch.Tensor) -> None:
        """Final flat models ``[k, d]`` of the next replicas, in replica order."""
        for row in rows:
            self.pending.append(row.detach())
            if len(self.pending) == PREDICT_GROUP:
                self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        started = time.perf_counter()
        flat = torch.stack(self.pending)
        self.pending = []
        if self.kept is not None:
            self.kept.append(flat.cpu())
        with single_thread():
            for name, x in self.inputs.items():
                out = self.trainer.forward(flat, x, batch_size=self.batch_size)
                self.predictions[name].append(out.argmax(-1).cpu().numpy())
                self.probabilities[name].append(
                    torch.softmax(out.double(), -1).float().cpu().numpy())
        self.done += flat.shape[0]
        self.seconds += time.perf_counter() - started

    def result(self) -> tuple[dict, dict, dict, torch.Tensor | None]:
        self._flush()
        return (self.labels, {n: np.concatenate(v) for n, v in self.predictions.items()},
                {n: np.concatenate(v) for n, v in self.probabilities.items()},
                None if self.kept is None else torch.cat(self.kept))


def _wave(base: Any, models: int, concurrent: int | None) -> int:
    """Replicas trained together: ``concurrent``, or as many as fit :data:`WAVE_BUDGET` with
    the expected cohort of a round (the plan's, else every client) as rows per replica."""
    if concurrent is not None:
        return min(models, check_int("concurrent", concurrent, 1))
    plan = base.plan
    rows = (getattr(plan, "expected_cohort", None) or getattr(plan, "clients_per_round", None)
            or base.num_clients)
    per_replica = max(1.0, float(rows)) * 8 * base.trainer.num_params * 4
    return int(max(1, min(models, WAVE_BUDGET // per_replica)))


def _finish(config: Any, data: Any, models: int, seeds: np.ndarray, plan: Any,
            predictions: _Predictions, started: float, info: dict, out: Any) -> ReplicaResult:
    labels, preds, probs, weights = predictions.result()
    seconds = time.perf_counter() - started
    info = {**info, "algorithm": config.federated.algorithm,
            "rounds": config.federated.rounds, "seed": config.seed,
            "seconds_predicting": predictions.seconds, "config": config.model_dump(mode="json")}
    result = ReplicaResult(
        models=models, seeds=seeds, labels=labels, predictions=preds, probabilities=probs,
        privacy=replica_privacy(plan, config.federated.rounds, models),
        config_digest=config_digest(config), data_digest=data_digest(data), seconds=seconds,
        info=info, weights=weights)
    if out is not None:
        save_replicas(result, out)
    return result


def _engine_info(trainer: Any, device: str) -> dict[str, Any]:
    return {"layout": trainer.resolve_layout(device), "chunk_size": trainer.chunk_size,
            "sampling": trainer.spec.sampling, "device": device}


# ------------------------------------------------------------------------------ the two modes
def train_replicas(
    config: Any,
    models: int,
    *,
    data: Any = None,
    out: str | Path | None = None,
    eval_sets: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    layout: str | None = None,
    chunk_size: int | None = None,
    concurrent: int | None = None,
    keep_weights: bool = False,
    backend: Any = None,
) -> ReplicaResult:
    """Train ``models`` replicas of ``config`` together and predict with them.

    Parameters
    ----------
    config
        An :class:`~privfl.config.ExperimentConfig` (or its file) whose algorithm has
        ``replica()`` (dp-fedavg, insdp-fedavg, insdp-fedsgd); no ``stop`` or
        ``run.max_rounds`` (every replica runs ``federated.rounds`` rounds).
    models
        M >= 1.
    data
        A :class:`~privfl.data.FederatedDataset` for ``data.dataset: custom`` (poisoned as
        ``config.attack`` says); by default the configuration's dataset is built.
    out
        Directory to write ``replicas.npz`` to (optional; an existing file is refused).
    eval_sets
        Extra evaluation sets, ``name -> (x, y)`` or a :class:`~privfl.data.Dataset` (e.g. a
        backdoored test set with the target labels); ``"test"`` is the clean test split.
    progress
        ``progress(done, M)`` after each replica has finished.
    layout, chunk_size
        Engine layout (default: the trainer's, looped on CPU) and clients per forward in the
        batched layout (default :data:`DEFAULT_CHUNK`). The batched layout is faster for
        small models; see the module docstring for when results are bit-identical to
        :func:`train_replicas_serially`.
    concurrent
        Replicas trained together (one engine call per step); default: as many as fit a 1 GiB
        estimate of the rows' parameters, gradients and optimizer states.
    keep_weights
        Return the final flat models ``[M, d]`` as ``result.weights`` (memory: M d floats).
    backend
        Where the gathered engine calls run: the local backend (here), or a sharded one
        (:class:`~privfl.backends.ray_backend.RayBackend`: each call cut into its workers'
        shards at multiples of the chunk size; the same models bit for bit). Default: the
        backend selected with :func:`privfl.backends.use_backend` (local unless one is).
        The server noise of every replica is drawn here, by the replica's own generator.
    """
    from privfl.algorithms.builders import build_algorithm

    started = time.perf_counter()
    config, models, data, sets, seeds = _prepare(config, models, data, eval_sets)
    device = config.run.device
    engine = _replica_engine(backend, device)
    base = build_algorithm(config, data)
    _supports_replicas(base)
    _engine(base.trainer, layout, chunk_size, device, sets["test"])
    wave = _wave(base, models, concurrent)
    predictions = _Predictions(base.trainer, sets, models, device, config.run.eval_batch_size,
                               keep_weights)
    rows, training = [], 0.0
    for lo in range(0, models, wave):
        twins = [base.replica(int(s), initial_parameters(config, data, int(s)))
                 for s in seeds[lo:lo + wave]]
        tick = time.perf_counter()
        runner = run_replicas(
            twins, config.federated.rounds, device=device, engine=engine,
            on_done=None if progress is None else lambda i, lo=lo: progress(lo + i + 1, models))
        training += time.perf_counter() - tick
        rows.extend(runner.calls)
        predictions.add(torch.stack([t.global_model for t in twins]))
    info = {**_engine_info(base.trainer, device), "mode": "together", "wave": wave,
            "engine_calls": len(rows), "engine_rows": int(sum(rows)),
            "seconds_training": training,
            "backend": "local" if engine is None else engine.describe()}
    return _finish(config, data, models, seeds, base.plan, predictions, started, info, out)


def train_replicas_serially(
    config: Any,
    models: int,
    *,
    data: Any = None,
    out: str | Path | None = None,
    eval_sets: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    layout: str | None = None,
    chunk_size: int | None = None,
    keep_weights: bool = False,
) -> ReplicaResult:
    """The reference: the same ``models`` replicas trained one after another, each by its own
    ``build_algorithm(replica configuration, data)`` and the algorithm's stages, on the local
    backend. Same parameters and result as :func:`train_replicas` (``info["mode"]`` is
    ``"serial"``)."""
    from privfl.algorithms.builders import build_algorithm

    started = time.perf_counter()
    config, models, data, sets, seeds = _prepare(config, models, data, eval_sets)
    device = config.run.device
    predictions = plan = None
    training = setup = 0.0
    for r, seed in enumerate(seeds):
        tick = time.perf_counter()
        algorithm = build_algorithm(replica_config(config, int(seed)), data)
        _supports_replicas(algorithm)
        _engine(algorithm.trainer, layout, chunk_size, device, sets["test"])
        if predictions is None:
            plan, info = algorithm.plan, _engine_info(algorithm.trainer, device)
            predictions = _Predictions(algorithm.trainer, sets, models, device,
                                       config.run.eval_batch_size, keep_weights)
        tock = time.perf_counter()
        setup += tock - tick
        with single_thread():
            run_rounds(algorithm, config.federated.rounds)
        training += time.perf_counter() - tock
        predictions.add(algorithm.global_model.unsqueeze(0))
        if progress is not None:
            progress(r + 1, models)
    info = {**info, "mode": "serial", "seconds_setup": setup, "seconds_training": training}
    return _finish(config, data, models, seeds, plan, predictions, started, info, out)
