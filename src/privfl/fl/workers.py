"""Client workers: clients of a cohort trained concurrently, each on one torch thread.

On CPU, the looped layout trains one client at a time (:mod:`privfl.fl.trainer`). Instead of
splitting each small operation over several intra-op threads (OpenMP teams that synchronise at
every operation and spin when a core is taken by another process), :class:`ClientWorkers`
runs ``n`` clients at once, one per thread, and every thread runs its torch operations on a
single intra-op thread (``torch.set_num_threads(1)`` is per thread under OpenMP).

Consequences (measured in ``docs/engine.md`` and ``docs/benchmarks.md``):

* a client's arithmetic is the same whatever ``n`` is, so results are bit-identical for any
  number of workers (intra-op threading changes the blocking of convolutions and reductions,
  hence the last bits);
* no per-operation barriers: on a machine shared with other processes throughput degrades in
  proportion to the cores taken instead of collapsing.

Each worker thread holds its own replica of the wrapped model (``replica_factory()``), since
the capture wrappers keep per-forward state. The pool lives as long as its owner.
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import Any

import torch

from privfl._validation import check_int

__all__ = ["ClientWorkers", "available_cores", "single_thread"]


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS / Windows
        return max(1, os.cpu_count() or 1)


class single_thread:  # noqa: N801 - used like a function: ``with single_thread():``
    """Run the block with one torch intra-op thread in the calling thread, then restore."""

    def __enter__(self) -> None:
        self._before = torch.get_num_threads()
        if self._before != 1:
            torch.set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        if self._before != 1:
            torch.set_num_threads(self._before)


class ClientWorkers:
    """``n`` threads, each with one torch thread and its own model replica.

    Parameters
    ----------
    n
        Number of worker threads (>= 1).
    replica_factory
        Called once in each worker thread; its result is the thread's replica
        (:attr:`replica` inside a task).
    """

    def __init__(self, n: int, replica_factory: Callable[[], Any]) -> None:
        self.n = check_int("workers", n, 1)
        self._factory = replica_factory
        self._local = threading.local()
        self._ids = itertools.count()
        self._executor = ThreadPoolExecutor(
            max_workers=self.n, thread_name_prefix="privfl-client",
            initializer=self._init_thread,
        )
        weakref.finalize(self, self._executor.shutdown, wait=False)

    def _init_thread(self) -> None:
        torch.set_num_threads(1)
        self._local.index = next(self._ids)
        self._local.replica = self._factory()

    @property
    def replica(self) -> Any:
        """The calling worker thread's replica (``None`` outside the workers)."""
        return getattr(self._local, "replica", None)

    def map(self, task: Callable[[Any], None], items: Iterable[Any]) -> None:
        """Run ``task(item)`` for every item on the workers; re-raises the first error after
        all started tasks have finished (no task is left running)."""
        futures = [self._executor.submit(task, item) for item in items]
        error = None
        for future in futures:
            if error is not None:
                future.cancel()  # not started yet: never run after an error
            try:
                future.result()
            except CancelledError:
                continue
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                error = error or exc
        if error is not None:
            raise error
