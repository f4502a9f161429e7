"""The backend interface: where a round's local work runs, and the hook algorithms call.

An algorithm's local work on the vectorised engine is one call,
:func:`train_clients` ``(trainer, start, data, cohort, states, generator, lr=...)``: the K
local steps of the clients ``cohort`` (indices into ``data``, every client's ``(x, y)`` pair)
from the starting models ``start``. The call goes to the *active* backend:

* :class:`LocalBackend` (the default): this process, ``trainer.train`` exactly as before;
* a sharded backend (:class:`ShardedBackend`; :class:`privfl.backends.ray_backend.RayBackend`):
  the per-client seeds are drawn on the driver from ``generator`` exactly as ``trainer.train``
  draws them (``ClientStreams.draw``), the cohort is cut into contiguous shards, every shard
  runs ``trainer.train_streams`` elsewhere and the shards are put back in order. Each row's
  result is a pure function of its own inputs and seeds (``docs/engine.md``, "Engine seams"),
  so the result equals the local one bit for bit, and a shard lost with its worker is simply
  computed again from the same inputs.

The backend never adds noise or counts privacy: noise stays where the algorithm prescribes it
(per-example noise inside a client's own local steps, from its own streams; server-side noise
once, by the algorithm, after the round's updates are complete) and the runner accounts once per
completed round, on the driver.

Select a backend for a block of code with :func:`use_backend` (``privfl run --backend ray``
does this around the whole run)::

    with use_backend(RayBackend(workers=2)):
        Experiment.create(config, "runs/x").run()
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import torch

from privfl._validation import check_int
from privfl.fl.params import cat_rows
from privfl.fl.pool import DataPool
from privfl.fl.random_streams import ClientStreams, noise_streams
from privfl.fl.trainer import CohortTrainer, TrainingStats

__all__ = [
    "Backend",
    "CallRecord",
    "LocalBackend",
    "ShardedBackend",
    "active_backend",
    "merge_stats",
    "shard_bounds",
    "shard_data",
    "train_clients",
    "use_backend",
]

Result = tuple[torch.Tensor, "dict[str, torch.Tensor] | None", TrainingStats]


class Backend:
    """Runs the local work of a cohort (see the module docstring).

    Subclasses implement :meth:`train_clients`; ``name`` names the backend in messages.
    A backend is a context manager: leaving it releases what it holds (:meth:`close`).
    """

    name: str = "backend"

    def train_clients(
        self,
        trainer: CohortTrainer,
        start: torch.Tensor,
        data: Sequence[tuple[torch.Tensor, torch.Tensor]],
        cohort: Sequence[int],
        states: Mapping[str, torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        *,
        lr: float | torch.Tensor | None = None,
        keep_states: bool = True,
    ) -> Result:
        """K local steps of the clients ``cohort``.

        Parameters
        ----------
        trainer
            The algorithm's :class:`~privfl.fl.CohortTrainer` (model, spec, layout).
        start
            Flat starting models ``[M, d]`` (one row per cohort member, in cohort order) or
            ``[d]``: the same model for every member (e.g. the global model; sent once).
        data
            Every client's ``(x_j, y_j)`` training pair (the same list object on every call:
            a distributed backend ships it to its workers once).
        cohort
            The M clients (indices into ``data``) in row order.
        states, generator, lr
            As in :meth:`CohortTrainer.train` (per-row optimizer states or None, the source of
            the per-client seeds, a learning-rate override).
        keep_states
            False when the caller discards the new optimizer states (saves sending them back).

        Returns
        -------
        flat, states, stats
            New flat models ``[M, d]``, new optimizer states (None unless ``keep_states``) and
            the :class:`~privfl.fl.TrainingStats` (monitoring values, not private).
        """
        raise NotImplementedError

    def run_rows(self, trainer: CohortTrainer, data: Sequence, clients: Sequence[int],
                 start: torch.Tensor, states: Mapping[str, torch.Tensor] | None,
                 seeds: torch.Tensor, lr: float | torch.Tensor | None, *,
                 keep_states: bool = True) -> Result:
        """The engine's rows with their seeds already drawn: row j is ``train_streams`` of
        ``clients[j]``'s data, ``start`` row j (or the shared ``[d]`` row), ``states`` row j,
        ``seeds[j]`` and ``lr[j]``. Inputs are validated by the callers."""
        raise NotImplementedError

    def stream_clients(
        self,
        trainer: CohortTrainer,
        start: torch.Tensor,
        data: Sequence[tuple[torch.Tensor, torch.Tensor]],
        cohort: Sequence[int],
        states: Mapping[str, torch.Tensor] | Callable[[int, int], Mapping] | None = None,
        generator: torch.Generator | None = None,
        *,
        chunk: int,
        lr: float | torch.Tensor | None = None,
        keep_states: bool = True,
    ) -> Iterator[tuple[int, int, Result]]:
        """:meth:`train_clients` in chunks of ``chunk`` rows (:mod:`privfl.fl.chunked_cohorts`):
        yields ``(lo, hi, (flat, states, stats))`` for rows ``lo..hi`` of the cohort, in order,
        each computed only when the previous one has been consumed. Every row's seeds are
        drawn from ``generator`` for the whole cohort before the first chunk, exactly as
        :meth:`train_clients` draws them, so row j's result (and the generator's state after)
        does not depend on ``chunk``. With a ``[M, d]`` ``start`` or ``states``, take them chunk
        by chunk from the caller's own store to keep memory bounded: ``states`` may be a
        function ``(lo, hi) -> rows lo..hi of the states`` (e.g. taken from a population
        store), called once per chunk."""
        start, ids = _check_inputs(trainer, start, data, cohort)
        count = len(ids)
        chunk = check_int("chunk", chunk, 1)
        if generator is None and not trainer.spec.secure:
            raise ValueError("generator = None is not allowed: streaming draws every row's "
                             "seeds from the caller's torch.Generator")
        if isinstance(states, Mapping):
            trainer.optimizer.check_state(states, count, trainer.num_params,
                                          name="optimizer_states")
        elif states is not None and not callable(states):
            raise ValueError(f"states = {type(states).__name__} is not allowed: must be None, "
                             "[M, ...] optimizer states or a function (lo, hi) -> their rows")
        if isinstance(lr, torch.Tensor) and lr.shape not in ((count,), (count, 1)):
            raise ValueError(f"lr has shape {tuple(lr.shape)}: must be a float or [M={count}]")
        streams = ClientStreams.draw(generator if generator is not None else torch.Generator(),
                                     count, noise_streams(start.device),
                                     secure=trainer.spec.secure)
        progress = trainer.progress
        try:
            for lo in range(0, count, chunk):
                hi = min(count, lo + chunk)
                if progress is not None:
                    trainer.progress = _offset(progress, lo, count)
                yield lo, hi, self.run_rows(
                    trainer, data, ids[lo:hi], start if start.dim() == 1 else start[lo:hi],
                    _state_rows(states, lo, hi),
                    streams.seeds[lo:hi],
                    lr[lo:hi] if isinstance(lr, torch.Tensor) else lr, keep_states=keep_states)
        finally:
            trainer.progress = progress

    def describe(self) -> str:
        """One line for progress output."""
        return self.name

    def close(self) -> None:
        """Release workers and connections (nothing for the local backend)."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_inputs(trainer: Any, start: Any, data: Any, cohort: Any) -> tuple[torch.Tensor, list]:
    """Validated ``(start rows or row [d], cohort as ints)``."""
    if not isinstance(trainer, CohortTrainer):
        raise ValueError(f"trainer = {type(trainer).__name__} is not allowed: must be a "
                         "CohortTrainer")
    if isinstance(data, (tuple, torch.Tensor)) or not isinstance(data, Sequence) or not data:
        raise ValueError("data must be a non-empty list of (x, y) tensor pairs, one per client")
    ids = [check_int(f"cohort[{k}]", j, 0, len(data) - 1) for k, j in enumerate(cohort)]
    if not ids:
        raise ValueError("cohort is empty: a training call needs at least one client")
    d = trainer.num_params
    if not isinstance(start, torch.Tensor) or start.dim() not in (1, 2) or start.shape[-1] != d:
        shape = tuple(start.shape) if isinstance(start, torch.Tensor) else type(start).__name__
        raise ValueError(f"start has shape {shape}: must be [M, {d}] or [{d}] flat models")
    if start.dim() == 2 and start.shape[0] != len(ids):
        raise ValueError(f"start has {start.shape[0]} rows: must match cohort ({len(ids)})")
    return start, ids


def _state_rows(states, lo: int, hi: int):
    """Rows ``lo..hi`` of optimizer states given as ``[M, ...]`` tensors or a function."""
    if states is None:
        return None
    if isinstance(states, Mapping):
        return {k: v[lo:hi] for k, v in states.items()}
    return states(lo, hi)


def _offset(progress, lo: int, count: int):
    """``progress(done, total)`` of a chunk starting at row ``lo`` as progress of the cohort."""
    return lambda done, _total: progress(lo + done, count)


def _rows(start: torch.Tensor, count: int) -> torch.Tensor:
    """``[count, d]`` rows: ``start`` itself, or ``[d]`` repeated."""
    return start.expand(count, -1).clone() if start.dim() == 1 else start


class LocalBackend(Backend):
    """The in-process vectorised engine (the default): ``trainer.train`` on the cohort's pairs,
    with the trainer's own client workers (threads)."""

    name = "local"

    def train_clients(self, trainer, start, data, cohort, states=None, generator=None, *,
                      lr=None, keep_states=True) -> Result:
        start, ids = _check_inputs(trainer, start, data, cohort)
        params, new_states, stats = trainer.train(
            trainer.unflatten(_rows(start, len(ids))), [data[j] for j in ids], states,
            generator, lr=lr)
        return trainer.flatten(params), new_states if keep_states else None, stats

    def run_rows(self, trainer, data, clients, start, states, seeds, lr, *,
                 keep_states=True) -> Result:
        pool, rows = DataPool.from_clients([data[j] for j in clients], device=start.device,
                                           dtype=trainer.dtype)
        params, new_states, stats = trainer.train_streams(
            trainer.unflatten(_rows(start, len(clients))), pool, rows, ClientStreams(seeds),
            states, lr=lr)
        return trainer.flatten(params), new_states if keep_states else None, stats

    def describe(self) -> str:
        return "local (this process)"


_LOCAL = LocalBackend()
_ACTIVE: ContextVar[Backend | None] = ContextVar("privfl_backend", default=None)


def active_backend() -> Backend:
    """The backend selected by the innermost :func:`use_backend` (default: local)."""
    return _ACTIVE.get() or _LOCAL


@contextlib.contextmanager
def use_backend(backend: Backend) -> Iterator[Backend]:
    """Run the local work of every algorithm inside the block on ``backend`` (the backend is
    not closed on exit: use it as a context manager itself for that)."""
    if not isinstance(backend, Backend):
        raise ValueError(f"backend = {type(backend).__name__} is not allowed: must be a "
                         "privfl.backends.Backend")
    token = _ACTIVE.set(backend)
    try:
        yield backend
    finally:
        _ACTIVE.reset(token)


def train_clients(trainer: CohortTrainer, start: torch.Tensor,
                  data: Sequence[tuple[torch.Tensor, torch.Tensor]], cohort: Sequence[int],
                  states: Mapping[str, torch.Tensor] | None = None,
                  generator: torch.Generator | None = None, *,
                  lr: float | torch.Tensor | None = None, keep_states: bool = True) -> Result:
    """The algorithms' hook: :meth:`Backend.train_clients` of the active backend."""
    return active_backend().train_clients(trainer, start, data, cohort, states, generator,
                                          lr=lr, keep_states=keep_states)


# ------------------------------------------------------------------------------ sharding
def shard_bounds(count: int, shards: int, multiple: int = 1) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` row ranges cutting ``count`` rows into at most ``shards``
    non-empty pieces as equal as possible, every cut at a multiple of ``multiple`` (the
    batched layout's chunk size: a shard must be made of whole chunks of the whole run)."""
    count = check_int("count", count, 1)
    shards = check_int("shards", shards, 1)
    multiple = check_int("multiple", multiple, 1)
    blocks = -(-count // multiple)
    pieces = min(shards, blocks)
    cuts = [min(count, multiple * (blocks * i // pieces)) for i in range(pieces + 1)]
    return [(lo, hi) for lo, hi in zip(cuts[:-1], cuts[1:], strict=True) if hi > lo]


def merge_stats(parts: Sequence[TrainingStats]) -> TrainingStats:
    """The statistics of shards in row order (``workers``: the sum over shards)."""
    if not parts:
        raise ValueError("parts must hold at least one TrainingStats")
    first = parts[0]
    return TrainingStats(
        batch_sizes=torch.cat([p.batch_sizes for p in parts]),
        loss=torch.cat([p.loss for p in parts]),
        clipped_fraction=torch.cat([p.clipped_fraction for p in parts]),
        mean_grad_norm=torch.cat([p.mean_grad_norm for p in parts]),
        layout=first.layout, chunk_size=first.chunk_size, per_example=first.per_example,
        workers=sum(p.workers for p in parts),
    )


def _cat_states(parts: Sequence[dict[str, torch.Tensor] | None]) -> dict | None:
    if any(p is None for p in parts):
        return None
    return cat_rows(parts) if parts[0] else {}


@dataclass
class Shard:
    """One shard of a call: rows ``lo..hi`` of the cohort and their inputs (CPU tensors)."""

    index: int
    lo: int
    hi: int
    clients: list[int]
    start: torch.Tensor | None  #: [hi - lo, d] rows, or None when the call has one start row
    states: dict[str, torch.Tensor] | None
    seeds: torch.Tensor  #: [hi - lo, 2 + S] int64
    lr: torch.Tensor | float | None
    #: the records of the shard's distinct clients (:func:`shard_data`), for a backend that
    #: ships them with the call (``ships_data``); None: the worker holds the clients' data
    data: dict[str, torch.Tensor] | None = None
    positions: list[int] | None = None  #: row j's client among ``data``'s clients


def shard_data(data: Sequence, clients: Sequence[int]) -> tuple[dict[str, torch.Tensor], list]:
    """``({"x", "y", "sizes"}, positions)``: the records of the distinct clients among
    ``clients`` (each once, in order of first appearance, concatenated as
    :meth:`DataPool.from_clients <privfl.fl.DataPool.from_clients>` does, in their own dtype)
    and each row's position among them. A worker that receives them holds its shard's records
    only, however large the population (replicas of one client share its records)."""
    distinct = list(dict.fromkeys(int(c) for c in clients))
    where = {c: k for k, c in enumerate(distinct)}
    pool, _ = DataPool.from_clients([data[c] for c in distinct], device="cpu")
    sizes = torch.tensor([int(data[c][1].shape[0]) for c in distinct], dtype=torch.int64)
    return {"x": pool.x, "y": pool.y, "sizes": sizes}, [where[int(c)] for c in clients]


@dataclass
class CallRecord:
    """What one sharded call sent and received, and where its time went (measured)."""

    rows: int
    shards: int
    bytes_sent: int  #: tensors sent to the workers (start rows or row, states, seeds, ids, lr,
    #: and the shards' records where the backend ships them)
    bytes_received: int  #: tensors sent back (flat models, states, statistics)
    seconds: float  #: wall time of the call on the driver
    compute_seconds: list[float] = field(default_factory=list)  #: per shard, on its worker
    data_bytes: int = 0  #: of ``bytes_sent``: the shards' records (:func:`shard_data`)


def _nbytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, TrainingStats):
        return sum(_nbytes(getattr(value, k)) for k in
                   ("batch_sizes", "loss", "clipped_fraction", "mean_grad_norm"))
    return 8 if isinstance(value, (int, float)) else 0


class ShardedBackend(Backend):
    """Cuts a cohort into contiguous shards run by :meth:`run_shards` (one per worker).

    The per-client seeds are drawn here, on the driver, from the caller's generator exactly as
    :meth:`CohortTrainer.train` draws them, so the generator ends in the same state and every
    row gets the seeds it gets locally. Subclasses implement :meth:`run_shards` (each shard:
    ``trainer.train_streams`` on its rows, returning ``(flat, states, stats, seconds)``) and
    :attr:`shards` (how many pieces to cut).
    """

    name = "sharded"
    #: every call's :class:`CallRecord` (bytes and times), newest last
    records: list[CallRecord]
    #: True: each shard's call carries its clients' records (:func:`shard_data`), so a worker
    #: never holds the population's data; False: the workers hold the data (Flower's nodes)
    ships_data: bool = False

    def __init__(self) -> None:
        self.records = []

    @property
    def shards(self) -> int:
        raise NotImplementedError

    def run_shards(self, trainer: CohortTrainer, data: Sequence, start_row: torch.Tensor | None,
                   shards: list[Shard], keep_states: bool, count: int) -> list[tuple]:
        """``(flat, states, stats, compute_seconds)`` of every shard, in shard order."""
        raise NotImplementedError

    def train_clients(self, trainer, start, data, cohort, states=None, generator=None, *,
                      lr=None, keep_states=True) -> Result:
        start, ids = _check_inputs(trainer, start, data, cohort)
        count = len(ids)
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator = {generator!r} is not allowed: a sharded backend "
                             "needs the caller's torch.Generator (the seeds are drawn from it)")
        if states is not None:
            trainer.optimizer.check_state(states, count, trainer.num_params,
                                          name="optimizer_states")
        if isinstance(lr, torch.Tensor) and lr.shape not in ((count,), (count, 1)):
            raise ValueError(f"lr has shape {tuple(lr.shape)}: must be a float or [M={count}]")
        streams = ClientStreams.draw(generator, count, noise_streams(start.device),
                                     secure=trainer.spec.secure)
        return self.run_rows(trainer, data, ids, start, states, streams.seeds, lr,
                             keep_states=keep_states)

    def run_rows(self, trainer: CohortTrainer, data: Sequence, clients: Sequence[int],
                 start: torch.Tensor, states: Mapping[str, torch.Tensor] | None,
                 seeds: torch.Tensor, lr: float | torch.Tensor | None, *,
                 keep_states: bool = True) -> Result:
        """The engine's rows with their seeds already drawn, cut into shards and run by
        :meth:`run_shards`; the shards' results put back in row order.

        ``clients[j]`` (index into ``data``), ``start`` row j (``[M, d]``, or ``[d]`` shared by
        every row), ``states`` row j, ``seeds[j]`` (``ClientStreams`` seeds, ``[M, 2 + S]``)
        and ``lr[j]`` are row j's inputs; its result is ``train_streams`` of them. In the
        batched layout every cut is a multiple of the trainer's fixed ``chunk_size``, so every
        chunk is the one a single call over all rows runs (``docs/engine.md``). Used by
        :meth:`train_clients` and by the Monte Carlo replicas' gathered calls
        (:mod:`privfl.robustness.replica_runner`). Inputs are validated by the callers.
        """
        started = time.perf_counter()
        count = len(clients)
        multiple = 1
        if trainer.resolve_layout(start.device) == "batched":
            if trainer.chunk_size is None:
                raise ValueError(
                    "trainer chunk_size = None is not allowed on a sharded backend in the "
                    "batched layout: fix chunk_size so that every shard is made of whole chunks "
                    "(a chunk sized from free memory differs between machines)")
            multiple = trainer.chunk_size
        one_row = start.dim() == 1
        shards = []
        for index, (lo, hi) in enumerate(shard_bounds(count, self.shards, multiple)):
            shards.append(Shard(
                index, lo, hi, list(clients[lo:hi]),
                None if one_row else start[lo:hi].detach().cpu(),
                None if states is None else {k: v[lo:hi].detach().cpu()
                                             for k, v in states.items()},
                seeds[lo:hi],
                lr[lo:hi].detach().cpu() if isinstance(lr, torch.Tensor) else lr,
                *(shard_data(data, clients[lo:hi]) if self.ships_data else (None, None))))
        start_row = start.detach().cpu() if one_row else None
        parts = self.run_shards(trainer, data, start_row, shards, keep_states, count)
        flat = torch.cat([p[0] for p in parts]).to(start.device)
        new_states = _cat_states([p[1] for p in parts]) if keep_states else None
        if new_states is not None:
            new_states = {k: v.to(start.device) for k, v in new_states.items()}
        stats = merge_stats([p[2] for p in parts])
        records = sum(_nbytes(s.data) for s in shards)
        sent = _nbytes(start_row) + records + sum(
            _nbytes([s.start, s.states, s.seeds, s.lr]) + 8 * len(s.clients) for s in shards)
        self.records.append(CallRecord(
            count, len(shards), sent, sum(_nbytes(p[:3]) for p in parts),
            time.perf_counter() - started, [float(p[3]) for p in parts], records))
        return flat, new_states, stats


class InProcessShards(ShardedBackend):
    """A sharded backend whose shards run one after another in this process, each on a fresh
    trainer: the sharding, seeding, data shipping and merging of a distributed backend without
    one (tests, and a reference for what a worker computes)."""

    name = "in-process shards"
    ships_data = True

    def __init__(self, shards: int = 2) -> None:
        super().__init__()
        self._shards = check_int("shards", shards, 1)

    @property
    def shards(self) -> int:
        return self._shards

    def run_shards(self, trainer, data, start_row, shards, keep_states, count):
        worker = ShardWorker(trainer_settings(trainer))
        return [worker.train(shard_call(s, keep_states), start_row) for s in shards]


# ------------------------------------------------------------------------------ worker side
def trainer_settings(trainer: CohortTrainer) -> dict[str, Any]:
    """What a worker needs to build an equivalent trainer (model template, spec, options)."""
    return {
        "model": trainer.template, "spec": trainer.spec,
        "options": {"layout": trainer.layout, "chunk_size": trainer.chunk_size,
                    "loss_fn": trainer.loss_fn, "per_example": trainer.per_example_mode,
                    "memory_budget": trainer.memory_budget, "workers": 1},
    }


def shard_call(shard: Shard, keep_states: bool) -> dict[str, Any]:
    """The arguments of one shard's work (what a worker receives besides the shared start
    row). With shipped data (``shard.data``), ``clients`` are the rows' positions among the
    shipped clients and ``data`` their records; otherwise ``clients`` index the worker's own
    data."""
    shipped = shard.data is not None
    return {"clients": shard.positions if shipped else shard.clients, "start": shard.start,
            "states": shard.states, "seeds": shard.seeds, "lr": shard.lr,
            "rows": shard.hi - shard.lo, "keep_states": keep_states,
            **({"data": shard.data} if shipped else {})}


class ShardWorker:
    """Holds a trainer (and, where the clients' data live with the worker, their pool) once;
    trains shards.

    Parameters
    ----------
    settings
        :func:`trainer_settings` of the driver's trainer (``options["workers"]``: the torch
        threads of this worker; the result does not depend on it).
    data
        Every client's ``(x, y)`` pair held by this worker (a Flower node's own client), or
        None: every call carries its shard's records (``call["data"]``, :func:`shard_data`),
        which the worker keeps only for that call.
    """

    def __init__(self, settings: Mapping[str, Any], data: Any = None, device: str = "cpu"
                 ) -> None:
        self.trainer = CohortTrainer(settings["model"], settings["spec"], **settings["options"])
        self.device = torch.device(device)
        self.pool, self.indices = (None, []) if data is None else DataPool.from_clients(
            data, device=device, dtype=self.trainer.dtype)

    def _shipped(self, data: Mapping[str, torch.Tensor]) -> tuple[DataPool, list]:
        """The pool of a call's shipped records and each shipped client's pool rows."""
        pool = DataPool(torch.as_tensor(data["x"]), torch.as_tensor(data["y"]),
                        device=self.device, dtype=self.trainer.dtype)
        offsets = [0]
        for n in torch.as_tensor(data["sizes"]).tolist():
            offsets.append(offsets[-1] + int(n))
        return pool, [torch.arange(lo, hi, device=pool.device)
                      for lo, hi in zip(offsets[:-1], offsets[1:], strict=True)]

    def train(self, call: Mapping[str, Any], start_row: torch.Tensor | None = None) -> tuple:
        """``(flat [m, d], states or None, stats, compute seconds)`` of one shard
        (:func:`shard_call`; ``start_row``: the call's one start model, if it has one)."""
        started = time.perf_counter()
        start = call["start"] if call["start"] is not None else _rows(start_row, call["rows"])
        lr = call["lr"]
        if call.get("data") is not None:
            pool, indices = self._shipped(call["data"])
        elif self.pool is not None:
            pool, indices = self.pool, self.indices
        else:
            raise ValueError("call has no data and this worker holds none: a backend without "
                             "data on its workers must ship each shard's records")
        params, states, stats = self.trainer.train_streams(
            self.trainer.unflatten(start.to(self.device)), pool,
            [indices[j] for j in call["clients"]], ClientStreams(call["seeds"]),
            None if call["states"] is None else {k: v.to(self.device)
                                                 for k, v in call["states"].items()},
            lr=lr.to(self.device) if isinstance(lr, torch.Tensor) else lr)
        flat = self.trainer.flatten(params).cpu()
        states = {k: v.cpu() for k, v in states.items()} if call["keep_states"] else None
        return flat, states, stats, time.perf_counter() - started
