"""Streaming cohorts: train a round's cohort in chunks of rows and keep only what the server needs.

A cohort of ``M`` clients costs, while its local work runs, about ``R`` model-sized rows per
client (start row, the trainer's aligned parameter buffer, optimizer state, the returned flat
rows, the update and its clipped copy: :func:`row_bytes`) plus a copy of its records. Algorithms
whose clients keep no state between rounds (DP-FedAvg, the InsDP variants) therefore train the
cohort in chunks of ``c`` rows and fold each chunk into a :class:`RowSum` before the next one
starts, so peak memory is that of ``c`` rows, whatever ``M`` is::

    c = clamp(floor(budget / (R d b + records)), 1, M)      d parameters of b bytes each

``budget`` is ``run.memory_budget`` (bytes; :func:`parse_memory_budget` accepts ``"512MiB"``
too), by default :func:`default_memory_budget`: a quarter of the memory the machine has free
(``MemAvailable`` in ``/proc/meminfo``; psutil where there is no ``/proc``; on CUDA the free
device memory), at most 1 GiB (on CPU the looped layout trains one client per worker thread at a
time, so larger chunks buy no speed).

**Bit-identical for every chunk size.** Each row's randomness comes from its own streams, drawn
for the whole cohort before the first chunk (``ClientStreams.draw``, as an unchunked call draws
them), and each row's training is a pure function of its inputs (``docs/engine.md``, "Engine
seams"). What the server keeps is made independent of the cut too: :class:`RowSum` adds rows
one by one in cohort order into a float64 accumulator (``acc <- acc + a_k u_k``, k = 0..M-1),
a reduction whose order is the cohort order whatever the chunks are; per-row monitoring values
(losses, norms, counts) are kept per row (``O(M)`` scalars) and reduced once at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from privfl._memory import MIN_BUDGET, free_system_memory, parse_memory_budget
from privfl._validation import check_int

__all__ = [
    "RowSum",
    "available_memory",
    "chunk_rows",
    "default_memory_budget",
    "parse_memory_budget",
    "row_bytes",
    "stream_chunks",
]

#: Largest default budget (bytes).
MAX_DEFAULT_BUDGET = 1 << 30
#: Model-sized rows one streamed cohort member holds at once (start row, aligned training
#: buffer, returned flat row, update, clipped update, optimizer state up to 2 rows, its float64
#: share of the reduction): an upper estimate.
ROWS_PER_CLIENT = 8


def available_memory(device: torch.device | str = "cpu") -> int | None:
    """Bytes free on ``device``: CUDA's free device memory, else
    :func:`privfl._memory.free_system_memory` (``MemAvailable``); None if unknown."""
    device = torch.device(device)
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    return free_system_memory()


def default_memory_budget(device: torch.device | str = "cpu") -> int:
    """A quarter of :func:`available_memory`, at most :data:`MAX_DEFAULT_BUDGET` (1 GiB) and at
    least :data:`MIN_BUDGET`; 256 MiB when the free memory is unknown."""
    free = available_memory(device)
    if free is None:
        return 256 << 20
    return max(MIN_BUDGET, min(MAX_DEFAULT_BUDGET, free // 4))


def row_bytes(num_params: int, dtype: torch.dtype, record_bytes: float = 0.0) -> int:
    """Bytes one streamed cohort member holds: :data:`ROWS_PER_CLIENT` model rows plus its
    records (``record_bytes``: the mean bytes of one client's data)."""
    check_int("num_params", num_params, 1)
    size = torch.empty((), dtype=dtype).element_size()
    return int(ROWS_PER_CLIENT * num_params * size + max(0.0, float(record_bytes)))


def chunk_rows(count: int, per_row: int, budget: int) -> int:
    """Rows per chunk: ``floor(budget / per_row)`` clamped to ``[1, count]``."""
    count = check_int("count", count, 1)
    per_row = check_int("per_row", per_row, 1)
    budget = check_int("budget", budget, 1)
    return max(1, min(count, budget // per_row))


class RowSum:
    """``sum_k a_k u_k`` over rows given in cohort order, chunk by chunk, in float64.

    Rows are added one at a time (``acc <- acc + a_k u_k``), so the result depends on the rows
    and their order only, never on how they were cut into chunks.
    """

    def __init__(self, size: int, device: torch.device | str = "cpu") -> None:
        self.size = check_int("size", size, 1)
        self.total = torch.zeros(self.size, dtype=torch.float64, device=device)
        self.count = 0

    def add(self, rows: torch.Tensor, weights: torch.Tensor | Sequence[float] | None = None
            ) -> None:
        """Add the rows ``[c, size]`` (times ``weights[k]``, if given) in order."""
        if not isinstance(rows, torch.Tensor) or rows.dim() != 2 or rows.shape[1] != self.size:
            raise ValueError(f"rows must be a [c, {self.size}] tensor")
        if weights is not None and len(weights) != rows.shape[0]:
            raise ValueError(f"weights has {len(weights)} entries: rows has {rows.shape[0]}")
        for k in range(rows.shape[0]):
            if weights is None:
                self.total.add_(rows[k])
            else:
                self.total.add_(rows[k].to(torch.float64), alpha=float(weights[k]))
        self.count += rows.shape[0]

    def result(self, dtype: torch.dtype) -> torch.Tensor:
        """The sum, rounded once to ``dtype``."""
        return self.total.to(dtype)


def stream_chunks(count: int, chunk: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` row ranges of ``chunk`` rows (the last one shorter)."""
    count = check_int("count", count, 0)
    chunk = check_int("chunk", chunk, 1)
    return [(lo, min(count, lo + chunk)) for lo in range(0, count, chunk)]
