"""Per-step noise of a chunk of clients, drawn from each client's own noise streams.

Row j of the noise buffer is split into ``S`` fixed slices (``torch.tensor_split``), slice s
filled with ``N(0, std^2)`` from client j's noise stream s (or ``os.urandom`` in secure mode:
:func:`privfl.mechanisms.noise.standard_normal_`). On CPU the serial Mersenne Twister draws run
on up to ``NOISE_STREAMS`` pool threads while the gradients are computed; the values do not
depend on the number of threads (each slice has its own generator).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

from privfl.fl.random_streams import NOISE_STREAMS
from privfl.mechanisms.noise import standard_normal_

__all__ = ["fill_noise"]

_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=NOISE_STREAMS, thread_name_prefix="privfl-noise")
    return _POOL


def fill_noise(out: torch.Tensor, streams: Sequence[Sequence[torch.Generator]], std: float,
               secure: bool, threads: int) -> Callable[[], None]:
    """Start filling row j of ``out`` with ``N(0, std^2 I)`` from ``streams[j]`` (client j's
    noise generators; in secure mode only their number is used: the values come from
    ``os.urandom``) on up to ``threads`` pool threads (0: now, in the calling thread); returns
    a function that waits until it is done."""
    jobs = []
    for j, gens in enumerate(streams):
        parts = torch.tensor_split(out[j], len(gens))
        jobs.extend(zip(parts, [None] * len(gens) if secure else gens, strict=True))
    if out.device.type != "cpu" or threads == 0:
        _draw(jobs, std, secure)  # asynchronous CUDA kernels already / a client worker
        return _done
    workers = min(len(jobs), threads, NOISE_STREAMS)
    futures = [_pool().submit(_draw, jobs[k::workers], std, secure) for k in range(workers)]

    def wait() -> None:
        for future in futures:
            future.result()

    return wait


def _done() -> None:
    return None


def _draw(jobs, std: float, secure: bool) -> None:
    """Fill each part from its generator (or os.urandom); torch and urandom release the GIL."""
    for part, gen in jobs:
        if secure:
            standard_normal_(part, secure=True).mul_(std)
        else:
            part.normal_(0.0, std, generator=gen)
