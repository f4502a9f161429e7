"""The engine's chunk sampler draws exactly the batches of K successive calls of the samplers.

``privfl.fl.batches.sample_steps`` draws every client's K steps at once; on CPU the keys, the
batches, their order and the padding must be those of K calls per client of
``fixed_size_indices`` / ``poisson_indices`` (the reference: one step, one client, one call).
"""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.fl.batches import sample_steps
from privfl.mechanisms.sampling import fixed_size_indices, poisson_indices

CPU = torch.device("cpu")


def _reference(seeds, rows, steps, batch_size, fixed):
    """Per step: (index [m, width], mask or None, real) from one sampler call per client."""
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    out = []
    for _ in range(steps):
        batches = []
        for gen, r in zip(gens, rows, strict=True):
            n = r.numel()
            idx = (fixed_size_indices(n, batch_size, gen, CPU) if fixed
                   else poisson_indices(n, batch_size / n, gen, CPU))
            batches.append(r[idx])
        real = [b.numel() for b in batches]
        width = max(real)
        index = torch.stack([torch.cat([b, r[:1].expand(width - b.numel())])
                             for b, r in zip(batches, rows, strict=True)])
        mask = (None if min(real) == width else
                torch.arange(width).unsqueeze(0) < torch.tensor(real).unsqueeze(1))
        out.append((index, mask, real))
    return out


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=6),
       steps=st.integers(1, 6), batch=st.integers(1, 8), fixed=st.booleans(),
       seed=st.integers(0, 2**32))
def test_chunk_batches_equal_one_sampler_call_per_client_and_step(sizes, steps, batch, fixed,
                                                                   seed):
    if fixed:
        sizes = [max(n, batch) for n in sizes]
    offsets = torch.randperm(sum(sizes) + 7, generator=torch.Generator().manual_seed(seed))
    rows, at = [], 0
    for n in sizes:  # scattered pool rows, as clients of a shared pool have
        rows.append(offsets[at : at + n])
        at += n
    seeds = [seed + 17 * j for j in range(len(sizes))]
    got = sample_steps([torch.Generator().manual_seed(s) for s in seeds], rows, steps, batch,
                       fixed, CPU)
    for t, (index, mask, real) in enumerate(_reference(seeds, rows, steps, batch, fixed)):
        g_index, g_mask, g_real = got.step(t)
        assert g_real == real
        assert torch.equal(g_index, index)
        assert (g_mask is None) == (mask is None)
        if mask is not None:
            assert torch.equal(g_mask, mask)
    assert got.counts.tolist() == [[r[j] for r in
                                    (x[2] for x in _reference(seeds, rows, steps, batch,
                                                              fixed))]
                                   for j in range(len(sizes))]


def test_empty_poisson_steps_have_width_zero():
    rows = [torch.arange(3), torch.arange(3, 5)]
    got = sample_steps([torch.Generator().manual_seed(0)] * 2, rows, 3, 1, False, CPU)
    # rate 1/3 and 1/2 over 3 steps: whatever the draw, widths are the steps' largest batches
    for t in range(3):
        index, _, real = got.step(t)
        assert index.shape == (2, max(real))


def test_fixed_size_batches_are_distinct_records_of_the_client():
    rows = [torch.arange(100, 110), torch.arange(200, 230)]
    got = sample_steps([torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)],
                       rows, 50, 7, True, CPU)
    for t in range(50):
        index, mask, real = got.step(t)
        assert mask is None and real == [7, 7]
        for j, r in enumerate(rows):
            assert torch.unique(index[j]).numel() == 7
            assert set(index[j].tolist()) <= set(r.tolist())
