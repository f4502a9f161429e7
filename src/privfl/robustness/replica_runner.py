"""Run many replicas of one algorithm with their local work gathered into one engine call.

A Monte Carlo replica is an algorithm object of its own (``algorithm.replica(seed, ...)``: its
own global model, optimizer and server states and generators; the model, trainer, client data
and plan shared). Each replica runs its rounds with the algorithm's own stages (select the
cohort, local work, aggregate) in a greenlet of its own (a coroutine that can pause inside a
call, from the `greenlet` library), and the greenlets take turns in the runner's thread: each
runs until its local work asks the engine for training (the backend hook
:func:`privfl.backends.train_clients`) or it has finished its rounds. (Greenlets switch in about
a microsecond; threads handing over one at a time cost 0.1-0.4 ms a switch on this machine.)
When every live replica waits, the waiting calls become the rows of ONE
:meth:`CohortTrainer.train_streams` call over one shared :class:`~privfl.fl.DataPool` (a
client's index tensor repeated for every replica that sampled it; no per-replica data copies),
and each replica gets its rows back::

    repeat until every replica has run its rounds:
        for each live replica: run it until it waits for training or ends
        rows <- the waiting calls, in replica order (replicas may be in different rounds)
        train_streams(rows) ; hand every replica its rows

The per-row seeds are drawn from each replica's own generator exactly as ``trainer.train``
draws them (:class:`~privfl.backends.ShardedBackend`), and a row's result depends only on its
own inputs and seeds (``docs/engine.md``: always in the looped layout; in the batched layout
with fixed-size batches). So replica ``r`` ends with the model it would have if trained alone,
bit for bit (``tests/robustness/test_montecarlo.py``). Every torch operation of the replicas
and of the engine call runs on one intra-op thread, as ``privfl run`` does (the looped layout's
client workers are threads of one torch thread each).

With an ``engine`` (a :class:`~privfl.backends.ShardedBackend` such as the Ray backend), the
gathered call is cut into the engine's shards at multiples of the batched layout's chunk size
(:meth:`~privfl.backends.ShardedBackend.run_rows`): every chunk is one of the local call, so the
rows are the same bit for bit; the replicas' own work (cohorts, seeds, aggregation, server
noise) stays in this process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import greenlet
import torch

from privfl.backends.base import Shard, ShardedBackend
from privfl.fl.params import cat_rows
from privfl.fl.pool import DataPool
from privfl.fl.random_streams import ClientStreams
from privfl.fl.trainer import TrainingStats
from privfl.fl.workers import single_thread

__all__ = ["ReplicaBackend", "run_replicas", "run_rounds"]


def run_rounds(algorithm: Any, rounds: int) -> None:
    """``rounds`` rounds of the algorithm's stages (select the cohort, local work, aggregate),
    without the monitoring evaluation and the per-round accounting of ``run_round``."""
    for _ in range(rounds):
        cohort = algorithm.select_cohort()
        updates = algorithm.local_work(cohort)
        algorithm.aggregate(cohort, updates)
        algorithm.round += 1


class _AbortedError(Exception):
    """Thrown into a waiting replica when the run stops (another replica failed)."""


@dataclass
class _Call:
    """One replica's request for local training (one shard: its whole cohort)."""

    trainer: Any
    data: Sequence
    shard: Shard
    start_row: torch.Tensor | None
    keep_states: bool
    result: tuple | None = None


@dataclass
class _Replica:
    """A replica's greenlet and its state."""

    algorithm: Any
    rounds: int
    call: _Call | None = None
    done: bool = False
    error: BaseException | None = None


class ReplicaBackend(ShardedBackend):
    """The backend the replicas' local work runs on: each call is parked until the runner
    trains all waiting calls together (see the module docstring). Only usable inside
    :func:`run_replicas`.

    Parameters
    ----------
    device
        Where the engine call runs (the algorithms' device).
    engine
        None: the gathered rows are one ``train_streams`` call here. A
        :class:`~privfl.backends.ShardedBackend` (e.g. a
        :class:`~privfl.backends.ray_backend.RayBackend`): they are cut into its shards (at
        multiples of the batched layout's chunk size) and run by its workers
        (:meth:`~privfl.backends.ShardedBackend.run_rows`); the same rows bit for bit.
    """

    name = "monte-carlo replicas"

    def __init__(self, device: torch.device | str = "cpu",
                 engine: ShardedBackend | None = None) -> None:
        super().__init__()
        self.device = torch.device(device)
        self.engine = engine
        self._replicas: dict[greenlet.greenlet, _Replica] = {}
        self._pools: dict[int, tuple[Sequence, DataPool, list[torch.Tensor]]] = {}
        #: engine calls made and the rows each trained (for reports and tests)
        self.calls: list[int] = []

    @property
    def shards(self) -> int:
        return 1

    def run_shards(self, trainer, data, start_row, shards, keep_states, count):
        """Called in a replica's greenlet: park the call, switch to the runner, return the
        rows it trained."""
        replica = self._replicas.get(greenlet.getcurrent())
        if replica is None:
            raise ValueError("ReplicaBackend trains only inside run_replicas (a replica's "
                             "greenlet); use the local backend elsewhere")
        replica.call = _Call(trainer, data, shards[0], start_row, keep_states)
        greenlet.getcurrent().parent.switch()  # to the runner; back once the call is trained
        result, replica.call = replica.call.result, None
        return [result]

    # ------------------------------------------------------------------ the gathered call
    def _pool(self, trainer: Any, data: Sequence) -> tuple[DataPool, list[torch.Tensor]]:
        """One pool of every client's records (built once per data list), and each client's
        pool rows."""
        entry = self._pools.get(id(data))
        if entry is None or entry[0] is not data:
            pool, rows = DataPool.from_clients(data, device=self.device, dtype=trainer.dtype)
            entry = (data, pool, rows)
            self._pools[id(data)] = entry
        return entry[1], entry[2]

    def train_gathered(self, calls: Sequence[_Call]) -> None:
        """Train every call's rows in one ``train_streams`` call (here, or cut into the
        engine's shards); store each call's result."""
        started = time.perf_counter()
        trainer, data = calls[0].trainer, calls[0].data
        if any(c.trainer is not trainer or c.data is not data for c in calls):
            raise ValueError("replicas must share one trainer and one client data list "
                             "(make them with algorithm.replica)")
        sizes = [c.shard.hi - c.shard.lo for c in calls]
        device = self.device if self.engine is None else torch.device("cpu")
        start = torch.cat([
            c.shard.start if c.shard.start is not None else c.start_row.expand(n, -1)
            for c, n in zip(calls, sizes, strict=True)]).to(device)
        clients = [j for c in calls for j in c.shard.clients]
        seeds = torch.cat([c.shard.seeds for c in calls])
        states = _gathered_states(calls, device)
        lr = _gathered_lr(calls, sizes, trainer.dtype, device)
        if self.engine is None:
            pool, client_rows = self._pool(trainer, data)
            params, new_states, stats = trainer.train_streams(
                trainer.unflatten(start), pool, [client_rows[j] for j in clients],
                ClientStreams(seeds), states, lr=lr)
            flat = trainer.flatten(params)
        else:
            flat, new_states, stats = self.engine.run_rows(
                trainer, data, clients, start, states, seeds, lr,
                keep_states=any(c.keep_states for c in calls))
        seconds = (time.perf_counter() - started) / len(calls)
        lo = 0
        for call, n in zip(calls, sizes, strict=True):
            hi = lo + n
            kept = ({k: v[lo:hi].clone() for k, v in new_states.items()}
                    if call.keep_states else None)
            # fresh tensors (not views of the gathered buffer): later reductions on them see
            # the same memory alignment as the results of a call of their own
            call.result = (flat[lo:hi].clone(), kept, _stats_rows(stats, lo, hi), seconds)
            lo = hi
        self.calls.append(len(clients))


def _all_or_none(values: list, what: str) -> bool:
    """Whether every call gave ``what`` (False: none did; a mix is refused)."""
    given = [v is not None for v in values]
    if any(given) and not all(given):
        raise ValueError(f"replicas gave {what} in some calls and not in others: they must "
                         "run one algorithm")
    return all(given)


def _gathered_states(calls: Sequence[_Call], device: torch.device):
    given = [c.shard.states for c in calls]
    if not _all_or_none(given, "optimizer states"):
        return None
    return {k: v.to(device) for k, v in cat_rows(given).items()}


def _gathered_lr(calls: Sequence[_Call], sizes: list[int], dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor | None:
    values = [c.shard.lr for c in calls]
    if not _all_or_none(values, "a learning-rate override"):
        return None
    return torch.cat([
        v.reshape(-1).to(device=device, dtype=dtype) if isinstance(v, torch.Tensor)
        else torch.full((n,), float(v), dtype=dtype, device=device)
        for v, n in zip(values, sizes, strict=True)])


def _stats_rows(stats: TrainingStats, lo: int, hi: int) -> TrainingStats:
    return TrainingStats(
        batch_sizes=stats.batch_sizes[lo:hi], loss=stats.loss[lo:hi],
        clipped_fraction=stats.clipped_fraction[lo:hi],
        mean_grad_norm=stats.mean_grad_norm[lo:hi], layout=stats.layout,
        chunk_size=stats.chunk_size, per_example=stats.per_example, workers=stats.workers)


# ---------------------------------------------------------------------------------- the runner
def _replica_main(replica: _Replica, backend: ReplicaBackend) -> None:
    from privfl.backends import use_backend

    try:
        with use_backend(backend):
            run_rounds(replica.algorithm, replica.rounds)
    except _AbortedError:
        pass
    except BaseException as error:  # noqa: BLE001 - handed to the runner, re-raised there
        replica.error = error
    finally:
        replica.done = True


def run_replicas(algorithms: Sequence[Any], rounds: int, *, device: torch.device | str = "cpu",
                 on_done: Callable[[int], None] | None = None,
                 engine: ShardedBackend | None = None) -> ReplicaBackend:
    """Run ``rounds`` rounds of every algorithm in ``algorithms`` (replicas sharing one trainer
    and one client data list), their local work gathered into one engine call per step (see the
    module docstring); ``engine``: a sharded backend that runs each gathered call on its workers
    (default: here). ``on_done(index)`` is called when replica ``index`` has finished. Returns
    the backend (``backend.calls``: the rows of every engine call). The first error of a replica
    or of the engine is re-raised after every replica has stopped."""
    backend = ReplicaBackend(device, engine)
    replicas = [_Replica(a, rounds) for a in algorithms]
    glets = []
    for replica in replicas:
        glet = greenlet.greenlet(_replica_main)
        backend._replicas[glet] = replica
        glets.append(glet)
    live = list(range(len(replicas)))
    started: set[int] = set()
    error: BaseException | None = None
    try:
        with single_thread():
            while live:
                for index in live:  # run it until it waits for training or ends
                    if index in started:
                        glets[index].switch()
                    else:
                        started.add(index)
                        glets[index].switch(replicas[index], backend)
                    if replicas[index].error is not None:
                        raise replicas[index].error
                waiting = [i for i in live if not replicas[i].done]
                for index in live:
                    if replicas[index].done and on_done is not None:
                        on_done(index)
                live = waiting
                if live:
                    backend.train_gathered([replicas[i].call for i in live])
    except BaseException as exc:
        error = exc
    finally:
        for index in started:  # unwind every paused replica (its finally blocks run)
            if not replicas[index].done:
                glets[index].throw(_AbortedError)
    if error is not None:
        raise error
    return backend
