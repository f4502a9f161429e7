"""The batches of all K local steps of a chunk of clients, drawn at once.

A client's batches come from its own data stream (or :data:`~privfl.mechanisms.SECURE_RANDOM`
in secure mode) by the rules of :mod:`privfl.mechanisms.sampling`: at step t, ``n`` float64
uniform keys; a fixed-size batch is the ``B`` records with the smallest keys, a Poisson batch
the records whose key is below ``q = B / n``. Here each client's keys for the K steps are drawn
in ONE call of ``K * n`` keys, and all clients with the same record count are sampled by one
``topk`` (or one comparison) over a ``[clients, K, n]`` tensor, instead of ``K * m`` calls of
the samplers. On CPU a generator fills a tensor in order, so the keys and the batches are the
ones that K successive draws of ``n`` keys give, bit for bit, in the same order
(``tests/fl/test_batches.py``); on CUDA (counter-based generator) they are other, equally
distributed numbers.

Ragged steps (Poisson, or clients of different sizes) use :func:`~privfl.mechanisms.pad_batches`'
convention: a step's index matrix is as wide as its largest batch; padded slots point at the
client's first record and carry mask ``False``; the mask is ``None`` when every batch is full.
The batch sizes are copied to the host once per chunk, not once per step (each copy from a GPU
waits for every kernel queued before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from privfl.mechanisms.sampling import smallest_keys, uniform_keys

__all__ = ["StepBatches", "sample_steps"]


@dataclass(frozen=True)
class StepBatches:
    """Pool rows of every client's batch at every step of a chunk."""

    index: torch.Tensor  #: [m, K, W] int64 pool rows (W: the largest batch of any step)
    counts: torch.Tensor  #: [m, K] int64 real batch sizes
    widths: list[int]  #: per step, the largest batch size of the step
    full: list[bool]  #: per step, whether every client's batch has the step's width
    sizes: list[list[int]]  #: per step, every client's real batch size (``counts`` on the host)

    def step(self, t: int) -> tuple[torch.Tensor, torch.Tensor | None, list[int]]:
        """``(index [m, width], mask [m, width] or None, real batch sizes)`` of step ``t``."""
        width = self.widths[t]
        index = self.index[:, t, :width]
        if self.full[t]:
            return index, None, self.sizes[t]
        real = self.counts[:, t]
        mask = torch.arange(width, device=index.device).unsqueeze(0) < real.unsqueeze(1)
        return index, mask, self.sizes[t]


def sample_steps(sources: Sequence, rows: Sequence[torch.Tensor], steps: int,
                 batch_size: int, fixed: bool, device: torch.device) -> StepBatches:
    """Every client's batches for ``steps`` steps (see the module docstring).

    ``sources[j]``: client j's generator (or ``SECURE_RANDOM``); ``rows[j]``: its ``[n_j]`` pool
    rows on ``device``; ``fixed``: fixed-size batches of ``batch_size`` (else Poisson with rate
    ``batch_size / n_j``). Inputs are not checked (the engine checked them).
    """
    m = len(rows)
    groups: dict[int, list[int]] = {}
    for j, r in enumerate(rows):
        groups.setdefault(int(r.numel()), []).append(j)
    picked: list[tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor]] = []
    for n, members in groups.items():
        keys = torch.stack([uniform_keys(steps * n, sources[j], device) for j in members])
        keys = keys.view(len(members), steps, n)
        table = torch.stack([rows[j] for j in members]).unsqueeze(1).expand(-1, steps, -1)
        if fixed:
            position = smallest_keys(keys, batch_size)
            count = torch.full((len(members), steps), batch_size, dtype=torch.int64,
                               device=device)
        else:  # the kept records in ascending order first (as torch.nonzero lists them)
            kept = keys < batch_size / n
            position = torch.argsort((~kept).to(torch.uint8), dim=-1, stable=True)
            count = kept.sum(-1)
        picked.append((members, torch.gather(table, 2, position), count, table[:, :, :1]))
    counts = torch.empty((m, steps), dtype=torch.int64, device=device)
    for members, _, count, _ in picked:
        counts[members] = count
    sizes = counts.t().tolist() if m else [[] for _ in range(steps)]  # one copy to the host
    widths = [max(step, default=0) for step in sizes]
    width = max(widths, default=0)
    index = torch.empty((m, steps, width), dtype=torch.int64, device=device)
    slots = torch.arange(width, device=device)
    for members, chosen, count, first in picked:
        chosen = chosen[:, :, :width]
        if chosen.shape[2] < width:  # a group of smaller clients: pad to the common width
            chosen = torch.cat([chosen, first.expand(-1, -1, width - chosen.shape[2])], 2)
        index[members] = torch.where(slots < count.unsqueeze(2), chosen, first)
    full = [min(step, default=0) == w for step, w in zip(sizes, widths, strict=True)]
    return StepBatches(index, counts, widths, full, sizes)
