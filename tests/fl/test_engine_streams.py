"""Public per-row streams: ``train`` is ``ClientStreams.draw`` + ``train_streams``; a cohort cut
into shards and trained separately gives the same rows bit for bit; derived seeds do not depend
on the order or the company of the ids."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _engine_helpers import TinyCNN, perturbed_params
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.fl import (
    NOISE_STREAMS,
    ClientStreams,
    CohortTrainer,
    DataPool,
    LocalTrainingSpec,
    cat_rows,
    noise_streams,
    take_rows,
)
from privfl.fl.random_streams import SEED_HIGH

SIZES = [6, 9, 7, 12, 6, 8]
SEED = 5  # a seed where stride-d rows (unaligned) do round differently


def _pool_and_indices(seed=0):
    gen = torch.Generator().manual_seed(seed)
    pairs = [(torch.randn(k, 1, 10, 10, generator=gen), torch.randint(0, 3, (k,), generator=gen))
             for k in SIZES]
    return DataPool.from_clients(pairs)


def test_train_is_draw_then_train_streams():
    """Same seeds as torch.randint(0, 2^62, (M, 2 + 4)) on the generator; same result."""
    model = TinyCNN(dropout=True)
    spec = LocalTrainingSpec(local_steps=2, batch_size=3, sampling="poisson", clip_norm=1.0,
                             noise_multiplier=0.9, optimizer="momentum", lr=0.05)
    pool, indices = _pool_and_indices()
    start = perturbed_params(model, len(SIZES))
    trainer = CohortTrainer(model, spec)
    expected = torch.randint(0, 2**62, (len(SIZES), 6), generator=torch.Generator().manual_seed(4))
    streams = ClientStreams.draw(torch.Generator().manual_seed(4), len(SIZES),
                                 noise_streams("cpu"))
    assert torch.equal(streams.seeds, expected) and streams.noise_streams == NOISE_STREAMS == 4
    a = trainer.train_pool(start, pool, indices, None, torch.Generator().manual_seed(4))
    b = trainer.train_streams(start, pool, indices, streams)
    for name in a[0]:
        assert torch.equal(a[0][name], b[0][name])
    assert torch.equal(a[2].batch_sizes, b[2].batch_sizes)
    assert noise_streams("cuda") == 1 and noise_streams(torch.device("cpu")) == 4


@pytest.mark.parametrize(("layout", "chunk", "cut"), [
    ("looped", None, 3),     # any cut: one row per chunk
    ("batched", 2, 4),       # cut at a multiple of the chunk size
    ("batched", 3, 3),
])
def test_shards_give_bit_identical_rows(layout, chunk, cut):
    """Split a cohort in two shards (their rows of params, states, lr, indices and streams),
    train each separately, put them back with cat_rows: torch.equal to the whole cohort.
    (With parameter rows at stride d instead of 64-byte aligned, the looped case fails: MKL's
    single-example matrix-vector products round by operand alignment.)"""
    torch.manual_seed(SEED)
    model = TinyCNN(dropout=True)
    spec = LocalTrainingSpec(local_steps=2, batch_size=3, sampling="poisson", clip_norm=1.0,
                             noise_multiplier=0.8, optimizer="adam", lr=0.01)
    pool, indices = _pool_and_indices()
    m = len(SIZES)
    trainer = CohortTrainer(model, spec, layout=layout, chunk_size=chunk)
    start = perturbed_params(model, m)
    states = trainer.train(start, [pool.rows(i) for i in indices], None,
                           torch.Generator().manual_seed(0))[1]  # non-trivial Adam states
    lr = torch.linspace(0.005, 0.02, m)
    streams = ClientStreams.derive(11, 2, range(100, 100 + m))
    whole = trainer.train_streams(start, pool, indices, streams, states, lr=lr)
    parts = []
    for rows in (list(range(cut)), list(range(cut, m))):
        shard_trainer = CohortTrainer(model, spec, layout=layout, chunk_size=chunk)
        parts.append(shard_trainer.train_streams(
            take_rows(start, rows), pool, [indices[j] for j in rows], streams[rows],
            take_rows(states, rows), lr=lr[rows]))
    params = cat_rows([p[0] for p in parts])
    new_states = cat_rows([p[1] for p in parts])
    for name in params:
        assert torch.equal(params[name], whole[0][name]), name
    for key in new_states:
        assert torch.equal(new_states[key], whole[1][key]), key
    for field in ("batch_sizes", "loss", "clipped_fraction", "mean_grad_norm"):
        assert torch.equal(torch.cat([getattr(p[2], field) for p in parts]),
                           getattr(whole[2], field)), field
    # the inputs were not modified
    assert torch.equal(streams.seeds, ClientStreams.derive(11, 2, range(100, 100 + m)).seeds)


def test_derived_seeds_are_pinned_and_order_independent():
    """Golden values (numpy SeedSequence(2024, spawn_key=(domain, round, id)), top 62 bits):
    a change of the derivation would silently change every run that uses it."""
    streams = ClientStreams.derive(2024, 3, [0, 17])
    assert streams.seeds[1].tolist() == [
        98845753093445312, 1972391969153491363, 3387151701457810252, 1446220349269244971,
        4082901491171816429, 864403580538895777]
    assert streams.seeds[0, 0] == 4271344166797801896
    alone = ClientStreams.derive(2024, 3, [17])
    assert torch.equal(alone.seeds[0], streams.seeds[1])
    assert ClientStreams.derive(2024, 3, [17], noise_streams=1).seeds.shape == (1, 3)
    for other in (ClientStreams.derive(2025, 3, [17]), ClientStreams.derive(2024, 4, [17]),
                  ClientStreams.derive(2024, 3, [17], domain=1)):
        assert not torch.equal(other.seeds[0], alone.seeds[0])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**64), round_=st.integers(0, 10**6),
       ids=st.lists(st.integers(0, 2**40), min_size=1, max_size=8, unique=True),
       data=st.data())
def test_derived_rows_depend_only_on_their_key(seed, round_, ids, data):
    perm = data.draw(st.permutations(ids))
    a = ClientStreams.derive(seed, round_, ids)
    b = ClientStreams.derive(seed, round_, perm)
    position = {key: j for j, key in enumerate(perm)}
    assert torch.equal(b.seeds, a.seeds[[ids.index(k) for k in perm]])
    assert torch.equal(a[[0]].seeds, b[[position[ids[0]]]].seeds)
    assert int(a.seeds.min()) >= 0 and int(a.seeds.max()) < SEED_HIGH
    assert len({tuple(r) for r in a.seeds.tolist()}) == len(ids)  # distinct keys, distinct rows


def test_rows_slices_and_cat_round_trip():
    streams = ClientStreams.derive(1, 0, range(5))
    assert len(streams) == 5 and repr(streams) == "ClientStreams(rows=5, noise_streams=4)"
    assert ClientStreams.cat([streams[:2], streams[2], streams[[3, 4]]]) == streams
    assert streams[np.array([4, 0])] == ClientStreams(streams.seeds[[4, 0]])
    assert ClientStreams(streams) == streams and streams != ClientStreams.derive(2, 0, range(5))
    gens = streams.generators(1, "cpu")
    row = streams.seeds[1].tolist()
    assert gens[0].initial_seed() == row[0] and gens[1].initial_seed() == row[1]
    assert [g.initial_seed() for g in gens[2]] == row[2:]


def test_bad_streams_name_the_argument():
    model = TinyCNN()
    spec = LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=1.0, noise_multiplier=1.0)
    pool, indices = _pool_and_indices()
    start = perturbed_params(model, len(SIZES))
    trainer = CohortTrainer(model, spec)
    with pytest.raises(ValueError, match=r"seeds has shape \(2, 2\): must be \[M, 2 \+ S\]"):
        ClientStreams(torch.zeros(2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="seeds has dtype torch.float32"):
        ClientStreams(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"seeds has values in \[-1, 0\]"):
        ClientStreams([[0, 0, -1]])
    with pytest.raises(ValueError, match=r"must be in \[0, 2\^62\)"):
        ClientStreams([[0, 0, 2**62]])
    with pytest.raises(ValueError, match="seed = -1 is out of range"):
        ClientStreams.derive(-1, 0, [1])
    with pytest.raises(ValueError, match="round = 1.5 is not an integer"):
        ClientStreams.derive(0, 1.5, [1])
    with pytest.raises(ValueError, match=r"ids\[1\] = -3 is out of range"):
        ClientStreams.derive(0, 0, [1, -3])
    with pytest.raises(ValueError, match="ids = 4 is not allowed"):
        ClientStreams.derive(0, 0, 4)
    with pytest.raises(ValueError, match="noise_streams = 0 is out of range"):
        ClientStreams.derive(0, 0, [1], noise_streams=0)
    with pytest.raises(ValueError, match="generator = None"):
        ClientStreams.draw(None, 2)
    with pytest.raises(ValueError, match="index = 5 is out of range"):
        ClientStreams.derive(0, 0, range(5))[[5]]
    with pytest.raises(ValueError, match=r"parts\[1\] has 1 noise streams"):
        ClientStreams.cat([ClientStreams.derive(0, 0, [1]),
                           ClientStreams.derive(0, 0, [1], noise_streams=1)])
    with pytest.raises(ValueError, match="streams = Tensor is not allowed"):
        trainer.train_streams(start, pool, indices, torch.zeros(len(SIZES), 6))
    with pytest.raises(ValueError, match=r"streams has 2 rows: must match start_params \(6\)"):
        trainer.train_streams(start, pool, indices, ClientStreams.derive(0, 0, [1, 2]))
    with pytest.raises(ValueError, match=r"trees\[1\] has keys"):
        cat_rows([start, {"x": torch.zeros(1)}])
