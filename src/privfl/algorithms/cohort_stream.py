"""How an algorithm streams its cohort through the active backend
(:mod:`privfl.fl.chunked_cohorts`).

:class:`CohortStream` holds the run's memory budget (``run.memory_budget``) or a fixed chunk
size, turns it into rows per chunk for a trainer and a client population, and runs a cohort's
local work chunk by chunk on the active backend (:meth:`privfl.backends.Backend.stream_clients`).
The algorithm folds each chunk into what its server keeps (a
:class:`~privfl.fl.aggregation.DpRound`, a :class:`~privfl.fl.chunked_cohorts.RowSum`) before the
next chunk is trained; results are bit-identical for every chunk size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from privfl._validation import check_int
from privfl.backends import active_backend, merge_stats
from privfl.fl.chunked_cohorts import (
    chunk_rows,
    default_memory_budget,
    parse_memory_budget,
    row_bytes,
)
from privfl.fl.pool import PooledClients
from privfl.fl.trainer import CohortTrainer, TrainingStats

if TYPE_CHECKING:  # pragma: no cover
    from privfl.config.schema import ExperimentConfig

__all__ = ["CohortStream", "StatsRows"]


class CohortStream:
    """Chunks of a cohort's local work sized by a memory budget.

    Parameters
    ----------
    memory_budget
        Bytes (or a size string, ``"512MiB"``) the cohort's rows may hold at once; None: the
        machine's default (:func:`~privfl.fl.chunked_cohorts.default_memory_budget`, read when a
        chunk size is first needed).
    chunk
        Rows per chunk, fixed (overrides the budget; tests and benchmarks).
    """

    def __init__(self, memory_budget: int | str | None = None, chunk: int | None = None) -> None:
        self.memory_budget = (None if memory_budget is None
                              else parse_memory_budget(memory_budget, "memory_budget"))
        self.chunk = None if chunk is None else check_int("chunk", chunk, 1)
        self._record_bytes: dict[int, float] = {}

    @classmethod
    def from_config(cls, config: ExperimentConfig) -> CohortStream:
        """``run.memory_budget`` of the configuration."""
        return cls(config.run.memory_budget)

    def budget(self, device: torch.device | str) -> int:
        """The budget in bytes (the default from free memory when none was set)."""
        if self.memory_budget is None:
            self.memory_budget = default_memory_budget(device)
        return self.memory_budget

    def rows(self, trainer: CohortTrainer, data: Sequence[tuple[torch.Tensor, torch.Tensor]],
             count: int, device: torch.device | str = "cpu") -> int:
        """Rows per chunk for a cohort of ``count`` clients of ``data``: the fixed chunk, or
        ``budget / row_bytes`` (model rows plus a mean client's records), within ``[1, count]``."""
        count = check_int("count", count, 1)
        if self.chunk is not None:
            return min(self.chunk, count)
        key = id(data)
        if key not in self._record_bytes:
            if isinstance(data, PooledClients):
                mean = data.mean_client_bytes()
            else:
                mean = sum(x.numel() * x.element_size() + y.numel() * y.element_size()
                           for x, y in data) / max(1, len(data))
            self._record_bytes = {key: mean}
        per_row = row_bytes(trainer.num_params, trainer.dtype, self._record_bytes[key])
        return chunk_rows(count, per_row, self.budget(device))

    def run(
        self,
        trainer: CohortTrainer,
        start: torch.Tensor,
        data: Sequence[tuple[torch.Tensor, torch.Tensor]],
        cohort: Sequence[int],
        states: Mapping[str, torch.Tensor] | Callable[[int, int], Mapping] | None,
        generator: torch.Generator | None,
        *,
        lr: float | torch.Tensor | None = None,
        keep_states: bool = True,
    ) -> Iterator[tuple[int, int, torch.Tensor, Any, TrainingStats]]:
        """``(lo, hi, flat [hi - lo, d], states, stats)`` chunk by chunk, in cohort order, on
        the active backend (nothing for an empty cohort)."""
        if len(cohort) == 0:
            return
        chunk = self.rows(trainer, data, len(cohort), start.device)
        for lo, hi, (flat, new_states, stats) in active_backend().stream_clients(
                trainer, start, data, cohort, states, generator, chunk=chunk, lr=lr,
                keep_states=keep_states):
            yield lo, hi, flat, new_states, stats

    def __repr__(self) -> str:
        return f"CohortStream(memory_budget={self.memory_budget}, chunk={self.chunk})"


class StatsRows:
    """The chunks' :class:`~privfl.fl.TrainingStats` put back in cohort order."""

    def __init__(self) -> None:
        self.parts: list[TrainingStats] = []

    def add(self, stats: TrainingStats) -> None:
        self.parts.append(stats)

    def merged(self) -> TrainingStats | None:
        """All rows' statistics (``workers``: the largest of the chunks), None if no chunk."""
        if not self.parts:
            return None
        merged = merge_stats(self.parts)
        merged.workers = max(p.workers for p in self.parts)
        return merged
