"""Batched layout: a row's result does not depend on which rows share its chunk.

With fixed-size batches every row of a chunk has the same batch width, and a one-row chunk runs
the stacked kernels (``bmm``) like any other chunk, so a row trained alone, with others, or at
another position gives the same bits. Monte Carlo replicas (many replicas' clients as rows of one
call) and shards cut anywhere rely on it. (Before the batched layout stopped using the
single-row kernels for one-row chunks, the "alone" case below differed by ~1e-8.)
"""

from __future__ import annotations

import pytest
import torch
from _engine_helpers import TinyCNN, perturbed_params

from privfl.fl import ClientStreams, CohortTrainer, DataPool, LocalTrainingSpec, take_rows

SIZES = [6, 9, 7, 12, 6, 8, 10]


def _pool_and_indices():
    gen = torch.Generator().manual_seed(3)
    pairs = [(torch.randn(k, 1, 10, 10, generator=gen), torch.randint(0, 3, (k,), generator=gen))
             for k in SIZES]
    return DataPool.from_clients(pairs)


@pytest.mark.parametrize("private", [False, True])
@pytest.mark.parametrize("dropout", [False, True])
def test_batched_rows_do_not_depend_on_their_chunk(private, dropout):
    torch.manual_seed(0)
    model = TinyCNN(dropout=dropout)
    spec = LocalTrainingSpec(local_steps=3, batch_size=4, sampling="without-replacement",
                             clip_norm=1.0 if private else None,
                             noise_multiplier=0.7 if private else 0.0, optimizer="adam", lr=0.01)
    pool, indices = _pool_and_indices()
    m = len(SIZES)
    start = perturbed_params(model, m)
    streams = ClientStreams.derive(7, 1, range(m))
    lr = torch.linspace(0.005, 0.02, m)

    def train(rows, chunk):
        trainer = CohortTrainer(model, spec, layout="batched", chunk_size=chunk)
        params, states, stats = trainer.train_streams(
            take_rows(start, rows), pool, [indices[j] for j in rows], streams[rows], None,
            lr=lr[rows])
        return trainer.flatten(params), states, stats

    whole, whole_states, whole_stats = train(list(range(m)), 4)  # chunks of 4 and 3 rows
    for rows, chunk in (([5], 4), ([2], 1), ([6, 0, 3], 2), ([1, 4], 5), (list(range(m)), 7)):
        flat, states, stats = train(rows, chunk)
        for k, j in enumerate(rows):
            assert torch.equal(flat[k], whole[j]), (rows, chunk, j)
            assert torch.equal(states["exp_avg"][k], whole_states["exp_avg"][j])
            assert torch.equal(stats.loss[k], whole_stats.loss[j])
    # the looped layout agrees to float summation order only (other kernels)
    looped = CohortTrainer(model, spec, layout="looped")
    params, _, _ = looped.train_streams(start, pool, indices, streams, None, lr=lr)
    torch.testing.assert_close(looped.flatten(params), whole, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("device", "batch", "sampling", "chunk"), [
    ("meta", 16, "without-replacement", 128),  # an accelerator: 2048 examples per forward
    ("meta", 16, "poisson", 64),  # Poisson chunks are sized for twice the expected batch
    ("meta", 4096, "without-replacement", 1),  # at least one client
    ("cpu", 16, "without-replacement", 1000),  # the CPU has only the memory budget
])
def test_the_automatic_chunk_on_an_accelerator_is_capped_in_examples(device, batch, sampling,
                                                                     chunk):
    spec = LocalTrainingSpec(local_steps=1, batch_size=batch, sampling=sampling, clip_norm=1.0,
                             noise_multiplier=1.0, lr=0.1)
    trainer = CohortTrainer(TinyCNN(), spec, layout="batched", memory_budget=1 << 40)
    x, y = torch.randn(2, 1, 10, 10), torch.zeros(2, dtype=torch.int64)
    assert trainer._auto_chunk(1000, x, y, torch.device(device)) == chunk
