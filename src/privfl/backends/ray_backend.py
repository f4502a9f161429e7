"""The Ray backend: a round's cohort sharded across Ray actors, each running the vectorised engine.

Per run (the first call with a given trainer), the driver puts the trainer's settings (model
template, local training spec, layout) into Ray's object store **once**, and starts ``workers``
actors (:class:`ShardActor`, ``cpus_per_worker`` CPUs each); every actor builds one
:class:`~privfl.fl.CohortTrainer` from them and keeps it for the run. No actor holds the
population's data: per call (:meth:`RayBackend.run_shards`):

* driver -> workers: the starting model once through the object store when every client starts
  from it (the global model), otherwise each shard's starting rows; each shard's optimizer
  states (persistent ones only), per-client seeds and learning rates, and **the records of the
  shard's clients** (each distinct client once, :func:`~privfl.backends.base.shard_data`), so a
  worker's memory is that of its shard, however many clients the population has (streamed
  cohorts: one shard of one chunk at a time). The records travel once per call instead of once
  per run: for a client of ``n`` records of ``r`` bytes that is ``n r`` bytes against the
  ``4 d`` bytes of the model it sends back (``d`` parameters);
* each actor runs ``trainer.train_streams`` on its shard over a pool of the shipped records
  (noise, where the local training has any, drawn inside from each client's own streams) and
  drops the records when the call ends;
* workers -> driver: the shard's trained flat models, optimizer states (unless discarded) and
  monitoring statistics. The driver puts the shards back in order; the algorithm aggregates
  (and adds server-side noise) once, and the runner accounts once per completed round.

Fault tolerance: when a worker's process or node dies (Ray reports ``RayActorError`` for its
shard), the backend starts a replacement actor from the same object-store entries and runs the
shard again with the same arguments. A shard is a pure function of them (public seeds, starting
rows, states), so the recomputed rows are the ones the lost worker would have returned, and
nothing is counted twice (the backend never accounts; the runner accounts once per completed
round). After ``max_restarts`` deaths of one shard's worker in one call, the call fails with a
one-line error; the run directory keeps every completed round, and ``privfl run --resume DIR``
continues from the last checkpoint. (The replacement is done here rather than by Ray's own
actor restarts, which warn on every run when constructor arguments live in the object store.)

When a Ray system process dies instead (the raylet of the local instance: its node is marked
dead), no worker can be replaced: the call fails with :class:`RayClusterError`, one line that
``privfl run`` completes with the resume hint.

Identical results need the same torch build and CPU kind on the workers as on the driver (float
rounding of the BLAS kernels otherwise differs in the last bits).
"""

from __future__ import annotations

import contextlib
import os
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from privfl._validation import check_int, check_positive
from privfl.backends.base import ShardedBackend, ShardWorker, shard_call, trainer_settings
from privfl.backends.cluster import RayConnection, connect

__all__ = ["RayBackend", "RayClusterError", "ShardActor"]


#: how often a wait on the workers checks that the local instance's raylet is alive (seconds)
_WATCH_SECONDS = 0.2


class _RayletDiedError(Exception):
    """The local instance's raylet exited while privfl waited on its workers (becomes a
    :class:`RayClusterError`)."""


class RayClusterError(OSError):
    """The Ray cluster (or local instance) lost its node: a Ray system process such as the
    raylet died. The run directory keeps every completed round (``privfl run --resume DIR``)."""


class ShardActor:
    """The state of one Ray worker: a trainer, built once (see
    :class:`~privfl.backends.base.ShardWorker`); each call brings its shard's records."""

    def __init__(self, settings: dict[str, Any], device: str) -> None:
        self.load(settings, device)

    def load(self, settings: dict[str, Any], device: str) -> int:
        """Build the trainer (at the start, and when the driver's trainer changes: the
        process, with torch imported, is kept); returns the pid."""
        torch.set_num_threads(settings["options"]["workers"])
        self.worker = None
        self.worker = ShardWorker(settings, None, device)
        return os.getpid()

    def pid(self) -> int:
        """This worker's process id (ready check; tests kill it)."""
        return os.getpid()

    def train(self, call: dict[str, Any], start_row: np.ndarray | None) -> tuple:
        flat, states, stats, seconds = self.worker.train(_tensors(call), _tensors(start_row))
        return _arrays(flat), _arrays(states), stats, seconds


def _arrays(value: Any) -> Any:
    """Tensors (in dicts) as numpy arrays: Ray moves those without pickling their bytes."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: _arrays(v) for k, v in value.items()}
    return value


def _tensors(value: Any) -> Any:
    """The inverse of :func:`_arrays`, copying: arrays from the object store are read-only."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))
    if isinstance(value, dict):
        return {k: _tensors(v) for k, v in value.items()}
    return value


class RayBackend(ShardedBackend):
    """Shards every round's cohort across ``workers`` Ray actors (see the module docstring).

    Parameters
    ----------
    address
        Ray cluster address (``ray://HEAD:10001``, ``HEAD:6379`` or ``auto``); None starts a
        local Ray instance on 127.0.0.1, shut down by :meth:`close`.
    workers
        Actors, each training a contiguous shard of every call's cohort; default: the
        cluster's CPUs divided by ``cpus_per_worker``.
    cpus_per_worker
        CPUs each actor reserves; its trainer runs that many client threads (the result does
        not depend on it).
    max_restarts
        How often one shard's dead worker is replaced (and the shard rerun) before a call
        fails.
    start_timeout
        Seconds to wait for the actors to start (they wait for free CPUs on the cluster).
    device
        Where the actors train (``"cpu"``, or ``"cuda"`` with ``gpus_per_worker``).
    gpus_per_worker
        GPUs each actor reserves (0: none).
    """

    name = "ray"
    ships_data = True

    def __init__(self, address: str | None = None, workers: int | None = None, *,
                 cpus_per_worker: int = 1, max_restarts: int = 3, start_timeout: float = 300.0,
                 device: str = "cpu", gpus_per_worker: float = 0.0) -> None:
        super().__init__()
        self.cpus_per_worker = check_int("cpus_per_worker", cpus_per_worker, 1)
        self.max_restarts = check_int("max_restarts", max_restarts, 0)
        self.start_timeout = check_positive("start_timeout", start_timeout)
        self.device = str(torch.device(device))
        self.gpus_per_worker = float(gpus_per_worker)
        if not 0 <= self.gpus_per_worker < 1e6:
            raise ValueError(f"gpus_per_worker = {gpus_per_worker!r} is out of range: must be "
                             ">= 0")
        requested = None if workers is None else check_int("workers", workers, 1)
        cpus = None
        if address is None:  # enough CPUs on the local instance for every requested worker
            from privfl.fl.workers import available_cores

            cpus = max(available_cores(), (requested or 1) * self.cpus_per_worker)
        self.connection: RayConnection = connect(address, cpus=cpus)
        self.workers = requested or max(1, self.connection.cpus // self.cpus_per_worker)
        self._actors: list[Any] = []
        self._key: int | None = None
        self._held: tuple = ()  # the trainer the actors were built for (keeps its id)
        #: bytes put into the object store once per run (the trainer's pickled settings; the
        #: clients' records travel with each shard, ``CallRecord.data_bytes``)
        self.put_bytes = 0
        self.replaced = 0  #: dead workers replaced (their shards computed again)
        #: optional ``on_submit(actors)``, called once a call's shards are submitted (tests kill
        #: a worker there, i.e. during the round)
        self.on_submit: Callable[[list[Any]], None] | None = None

    @property
    def shards(self) -> int:
        return self.workers

    def describe(self) -> str:
        return (f"ray ({self.workers} worker(s) of {self.cpus_per_worker} CPU(s), "
                f"{self.connection.describe()})")

    # ------------------------------------------------------------------ workers
    def _start_workers(self, trainer: Any) -> None:
        """Put the trainer settings into the object store once and start the actors; when the
        trainer changes (e.g. the next training of a certification), put the new settings and
        reload the running actors with them."""
        key = id(trainer)
        if key == self._key and self._actors:
            return
        ray = self.connection.ray
        settings = trainer_settings(trainer)
        settings["options"]["workers"] = self.cpus_per_worker
        self.put_bytes = len(pickle.dumps(settings))
        refs = (ray.put(settings),)
        self._refs = refs
        if self._actors:  # reload: no new processes (each would import torch again)
            self._key, self._held = None, ()
            try:
                self._wait_ready(self._actors, [
                    a.load.remote(*refs, self.device) for a in self._actors])
            except ray.exceptions.RayActorError:  # one died meanwhile: start all afresh
                self._stop_workers()
                self._refs = refs
        if not self._actors:
            self._actors = [self._new_actor() for _ in range(self.workers)]
            self._wait_ready(self._actors)
        self._key, self._held = key, (trainer,)

    def _new_actor(self) -> Any:
        """One actor built from the run's object-store entry (put once)."""
        actor = self.connection.ray.remote(ShardActor).options(
            num_cpus=self.cpus_per_worker, num_gpus=self.gpus_per_worker)
        return actor.remote(*self._refs, self.device)

    def _wait_ready(self, actors: list[Any], calls: list[Any] | None = None) -> None:
        """Wait for ``calls`` (default: every actor's ``pid``, i.e. its start)."""
        ray = self.connection.ray
        try:
            ray.get(calls or [a.pid.remote() for a in actors], timeout=self.start_timeout)
        except ray.exceptions.GetTimeoutError:
            self._stop_workers()
            raise ValueError(
                f"workers = {self.workers} Ray workers of {self.cpus_per_worker} CPU(s) did not "
                f"start within {self.start_timeout:g} s: the cluster has "
                f"{self.connection.cpus} CPU(s); ask for fewer workers") from None

    def _replace(self, index: int) -> None:
        """A new actor in place of worker ``index`` (whose process or node died)."""
        with contextlib.suppress(Exception):  # already gone
            self.connection.ray.kill(self._actors[index])
        self._actors[index] = self._new_actor()
        self._wait_ready([self._actors[index]])
        self.replaced += 1

    def worker_pids(self) -> list[int]:
        """Process ids of the current actors (tests)."""
        ray = self.connection.ray
        return ray.get([a.pid.remote() for a in self._actors])

    def _stop_workers(self) -> None:
        ray = self.connection.ray
        for a in self._actors:
            with contextlib.suppress(Exception):  # already gone
                ray.kill(a)
        self._actors, self._key, self._held, self._refs = [], None, (), ()

    def close(self) -> None:
        """Stop the actors and disconnect (a local instance stops)."""
        if self.connection.ray.is_initialized():
            self._stop_workers()
        self.connection.close()

    # ------------------------------------------------------------------ one call
    def train_clients(self, trainer, start, data, cohort, states=None, generator=None, *,
                      lr=None, keep_states=True):
        if isinstance(start, torch.Tensor) and start.device.type != torch.device(
                self.device).type:
            raise ValueError(
                f"run.device = {str(start.device)!r} is not allowed with --backend ray here: "
                f"the Ray workers train on {self.device!r} (RayBackend(device=...)), which would "
                "change the arithmetic; use run.device: cpu")
        return super().train_clients(trainer, start, data, cohort, states, generator, lr=lr,
                                     keep_states=keep_states)

    def run_shards(self, trainer, data, start_row, shards, keep_states, count):
        """Each shard on its worker; a shard whose worker died runs again, with the same
        arguments, on a replacement (at most ``max_restarts`` times per shard and call). A
        cluster without a live node (a dead raylet) is a :class:`RayClusterError`."""
        ray = self.connection.ray
        try:
            return self._run_shards(trainer, data, start_row, shards, keep_states, count)
        except Exception as error:
            # a dead raylet surfaces as a RayError, or as the reset of a socket it held
            # (ConnectionResetError, seen in CI): either, with the node gone, is a lost node
            if isinstance(error, _RayletDiedError) or (
                    isinstance(error, (ray.exceptions.RayError, ConnectionError))
                    and (self.connection.local_raylet_died() or not self._node_alive())):
                cause = (str(error) if isinstance(error, _RayletDiedError) else
                         f"{type(error).__name__}: {' '.join(str(error).split())[:160]}")
                self._disconnect()
                raise RayClusterError(
                    f"the {self.connection.describe()} lost its node: a Ray system process "
                    f"(the raylet) died ({cause}); the run directory "
                    "keeps every completed round") from None
            raise

    def _disconnect(self) -> None:
        """Leave the dead instance at once: Ray's driver exits the process with status 1 when
        it notices its raylet is gone, which would replace privfl's one-line error (status 2)
        if the run took a while to close its run directory."""
        with contextlib.suppress(Exception):  # the instance is already gone; the error says so
            self.connection.ray.shutdown()

    def _node_alive(self) -> bool:
        """Whether the cluster still has a live node (False when the GCS cannot say)."""
        try:
            return any(node.get("Alive") for node in self.connection.ray.nodes())
        except Exception:  # noqa: BLE001 - an unreachable GCS: no live node either
            return False

    def _run_shards(self, trainer, data, start_row, shards, keep_states, count):
        ray = self.connection.ray
        self._start_workers(trainer)
        start_ref = ray.put(_arrays(start_row)) if start_row is not None else None

        def submit(shard):
            return self._actors[shard.index].train.remote(
                _arrays(shard_call(shard, keep_states)), start_ref)

        pending = {submit(s): s for s in shards}
        if self.on_submit is not None:
            self.on_submit(list(self._actors))
        results: dict[int, tuple] = {}
        failures = dict.fromkeys(range(len(shards)), 0)
        done = 0
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=_WATCH_SECONDS)
            if not ready:
                if self.connection.local_raylet_died():
                    raise _RayletDiedError("its process exited while privfl waited on the workers")
                continue
            shard = pending.pop(ready[0])
            try:
                results[shard.index] = self._get(ray, ready[0], shard.index)
            except ray.exceptions.RayActorError:
                failures[shard.index] += 1
                if failures[shard.index] > self.max_restarts:
                    raise RuntimeError(
                        f"Ray worker {shard.index} died {failures[shard.index]} times in one "
                        f"call (max_restarts = {self.max_restarts}); a privfl run keeps its "
                        "completed rounds: continue with privfl run --resume DIR") from None
                self._replace(shard.index)
                pending[submit(shard)] = shard
                continue
            done += shard.hi - shard.lo
            if trainer.progress is not None:
                trainer.progress(done, count)
        return [results[s.index] for s in shards]

    def _get(self, ray: Any, ref: Any, index: int) -> tuple:
        """A shard's result; a worker's own error as itself, one line (not Ray's wrapper)."""
        try:
            flat, states, stats, seconds = ray.get(ref)
            return _tensors(flat), _tensors(states), stats, seconds
        except ray.exceptions.RayTaskError as error:
            cause = getattr(error, "cause", None)
            if isinstance(cause, Exception):
                raise cause from None
            raise RuntimeError(f"Ray worker {index} failed: "
                               f"{' '.join(str(error).split())[:300]}") from None
