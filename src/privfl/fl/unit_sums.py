"""Fixed summation units: gradient sums over many records whose bits do not depend on the chunks.

DP-DSGD (Hasircioglu and Gunduz 2022) and projected noisy SGD (Asoodeh et al. 2021) compute
one round as a sum of clipped gradients at the server's model: over every sampled record, or
over every sampled user's mean gradient. How many records or users one engine call takes is a
question of memory (``run.memory_budget``), but a floating-point sum depends on how it is
grouped: summing chunk by chunk inside one kernel (a reduction over the chunk's records) gives
other last bits for another chunk size. The sum is therefore cut into **units** of a size that
never changes:

* a unit is one row of the engine: ``U`` records (DP-DSGD: :data:`RECORD_UNIT` consecutive
  sampled records, the last unit shorter, padded with masked slots) or one user (projected SGD:
  the user's records, padded to the population's largest user);
* an engine call takes ``c`` whole units (``c`` from the budget) and returns one clipped sum per
  unit; every unit runs the stacked kernels (``single_rows=False``), so a unit's sum is the same
  bits alone or beside any other units;
* the units' sums are added one at a time, in unit order, into a float64 accumulator
  (:class:`~privfl.fl.chunked_cohorts.RowSum`), rounded once to the model's dtype;
* the loss sum is added unit by unit (each unit's losses summed in float64), the clipped count
  and the largest norm are exact.

So ``sum = sum_u (sum_{i in unit u} c_i g_i)`` with every inner sum fixed by ``U`` and the
outer sum fixed by the unit order: any ``c`` gives the same bits. Memory per call: ``c`` units
of activations and per-example gradients plus ``c`` model-sized rows (:func:`unit_bytes`).
The non-private baseline (no clipping) computes each unit's plain gradient sum with one
backward (:func:`plain_units`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from privfl._validation import check_int
from privfl.fl.chunked_cohorts import RowSum, chunk_rows, stream_chunks
from privfl.fl.random_streams import ClientStreams, seeded_generator
from privfl.fl.workers import single_thread

__all__ = [
    "RECORD_UNIT",
    "UNIT_ROWS",
    "UnitTotals",
    "clipped_units",
    "plain_units",
    "record_units",
    "unit_bytes",
    "units_per_chunk",
]

#: Records per summation unit (DP-DSGD): fixed, because it fixes the bits of the sum.
RECORD_UNIT = 64
#: Model-sized rows one unit holds during a call (its clipped sum, the flat copy, a transform).
UNIT_ROWS = 3


@dataclass
class UnitTotals:
    """What a round keeps of its units: the float64 sum and monitoring values."""

    total: RowSum  #: sum over units, in unit order, float64
    loss: float = 0.0  #: sum of per-record losses (unit by unit, float64)
    records: int = 0  #: real (unmasked) records
    clipped: int = 0  #: records with norm > C
    max_norm: float = 0.0  #: largest per-record norm
    units: int = 0  #: units added
    calls: list[int] = field(default_factory=list)  #: units per engine call (monitoring)


def record_units(index: torch.Tensor, unit: int = RECORD_UNIT
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(index [u, unit], mask [u, unit])``: ``index`` (``[n]`` pool rows, n >= 1) cut into
    ``u = ceil(n / unit)`` consecutive units; the last one padded with ``index[0]``, masked."""
    unit = check_int("unit", unit, 1)
    if not isinstance(index, torch.Tensor) or index.dim() != 1 or index.numel() < 1:
        raise ValueError("index must be a non-empty [n] tensor of pool rows")
    n = index.numel()
    units = -(-n // unit)
    padded = index.new_full((units * unit,), int(index[0]))
    padded[:n] = index
    mask = torch.zeros(units * unit, dtype=torch.bool, device=index.device)
    mask[:n] = True
    return padded.reshape(units, unit), mask.reshape(units, unit)


def unit_bytes(trainer, x: torch.Tensor, y: torch.Tensor, width: int) -> int:
    """Bytes one unit of ``width`` records holds during a call: ``width`` examples'
    activations, gradients and per-example gradients (``trainer.example_bytes``) plus
    :data:`UNIT_ROWS` model-sized rows."""
    width = check_int("width", width, 1)
    size = torch.empty((), dtype=trainer.dtype).element_size()
    return int(width * trainer.example_bytes(x, y) + UNIT_ROWS * trainer.num_params * size)


def units_per_chunk(units: int, per_unit: int, budget: int | None, fixed: int | None = None
                    ) -> int:
    """Units per engine call: ``fixed`` if given, else ``floor(budget / per_unit)``, within
    ``[1, units]``."""
    units = check_int("units", units, 1)
    if fixed is not None:
        return min(check_int("fixed", fixed, 1), units)
    if budget is None:
        raise ValueError("budget = None is not allowed without a fixed chunk")
    return chunk_rows(units, per_unit, budget)


def clipped_units(trainer, row: torch.Tensor, x_all: torch.Tensor, y_all: torch.Tensor,
                  index: torch.Tensor, mask: torch.Tensor, chunk: int, *,
                  transform: Callable[[torch.Tensor, int, int], torch.Tensor] | None = None,
                  seed: int = 0, round: int = 0, domain: int = 0) -> UnitTotals:
    """The clipped gradient sums of units ``index [u, w]`` (pool rows of ``x_all``/``y_all``,
    ``mask`` False in padded slots) at the model ``row`` (``[1, d]`` flat), ``chunk`` units per
    engine call, added in unit order. ``transform(rows, lo, hi)`` maps units ``lo..hi``'s sums
    ``[hi - lo, d]`` before they are added (e.g. a user's mean); it must treat each row alone.

    Every call runs on one torch intra-op thread (two threads block a convolution's reduction
    by the size of the call, which would make the bits depend on ``chunk``). Dropout masks of
    unit u come from its own generator, seeded with column 0 of
    ``ClientStreams.derive(seed, round, [u], domain=domain)`` (the run's seed, its round and,
    for several sums in one round, a distinct ``domain``), so they do not depend on ``chunk``
    and a run repeats them. The guarantee does not rely on the masks (it holds for any fixed
    masks), so they need not be secret.
    """
    clip_norm = trainer.spec.clip_norm
    if clip_norm is None:
        raise ValueError("clipped_units needs a trainer whose spec has a clip norm")
    chunk = check_int("chunk", chunk, 1)
    if index.dim() != 2 or tuple(mask.shape) != tuple(index.shape):
        raise ValueError("index and mask must be [u, w] tensors of one shape")
    totals = UnitTotals(RowSum(trainer.num_params, row.device))
    for lo, hi in stream_chunks(index.shape[0], chunk):
        rows, keep = index[lo:hi], mask[lo:hi]
        stacked = trainer.unflatten(row.expand(hi - lo, -1))
        seeds = ClientStreams.derive(seed, round, list(range(lo, hi)), noise_streams=1,
                                     domain=domain).seeds[:, 0]
        with single_thread():
            result = trainer.clipped_sums(
                stacked, x_all[rows], y_all[rows], keep, single_rows=False,
                generators=[seeded_generator(row.device, int(s)) for s in seeds])
        sums = trainer.flatten(result.sums)
        if transform is not None:
            sums = transform(sums, lo, hi)
        totals.total.add(sums)
        _monitor(totals, result.losses, result.norms, keep, clip_norm)
        totals.units += hi - lo
        totals.calls.append(hi - lo)
    return totals


def plain_units(size: int, device: torch.device | str, units: int, chunk: int,
                unit_sum: Callable[[int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]], *,
                seed: int = 0, round: int = 0, domain: int = 0) -> UnitTotals:
    """Unclipped sums of ``units`` units added in unit order: ``unit_sum(u)`` returns unit
    u's gradient sum ``[d]``, its per-record losses and mask (one backward per unit, so a
    unit's bits never depend on the others); ``chunk`` only groups the monitoring. Each unit
    runs on one torch thread with torch's global RNG seeded from unit u's derived seed (as in
    :func:`clipped_units`; a model's dropout draws from it), restored afterwards."""
    check_int("size", size, 1)
    chunk = check_int("chunk", chunk, 1)
    totals = UnitTotals(RowSum(size, device))
    for lo, hi in stream_chunks(check_int("units", units, 0), chunk):
        seeds = ClientStreams.derive(seed, round, list(range(lo, hi)), noise_streams=1,
                                     domain=domain).seeds[:, 0]
        for u in range(lo, hi):
            with torch.random.fork_rng(devices=[]), single_thread():
                torch.manual_seed(int(seeds[u - lo]))
                grad, losses, keep = unit_sum(u)
            totals.total.add(grad.reshape(1, -1))
            _monitor(totals, losses.reshape(1, -1), None, keep.reshape(1, -1), math.inf)
        totals.units += hi - lo
        totals.calls.append(hi - lo)
    return totals


def _monitor(totals: UnitTotals, losses: torch.Tensor, norms: torch.Tensor | None,
             mask: torch.Tensor, clip_norm: float) -> None:
    """Add a call's per-record monitoring values, unit by unit (float64), to ``totals``."""
    with torch.no_grad():
        keep = mask.to(torch.bool)
        for j in range(losses.shape[0]):
            totals.loss += float((losses[j].to(torch.float64) * keep[j]).sum())
        totals.records += int(keep.sum())
        if norms is not None:
            real = norms[keep]
            if real.numel():
                totals.clipped += int((real > clip_norm).sum())
                totals.max_norm = max(totals.max_norm, float(real.max()))
