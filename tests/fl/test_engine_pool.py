"""The shared data pool: ``train_pool`` equals ``train`` on per-client copies bit for bit,
replicas repeat indices without copying data, and bad pools or indices are refused."""

from __future__ import annotations

import pytest
import torch
from _engine_helpers import TinyCNN, perturbed_params

from privfl.fl import ClientStreams, CohortTrainer, DataPool, LocalTrainingSpec, take_rows
from privfl.fl import trainer as trainer_module


def _pool(n=60, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return DataPool(torch.randn(n, 1, 10, 10, generator=gen), torch.randint(0, 3, (n,),
                                                                              generator=gen))


def _scattered_indices(n, sizes, seed=1):
    """Disjoint, non-contiguous, unsorted pool rows for each client."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    out, lo = [], 0
    for k in sizes:
        out.append(perm[lo : lo + k])
        lo += k
    return out


def _assert_same(a, b):
    (pa, sa, ta), (pb, sb, tb) = a, b
    for name in pa:
        assert torch.equal(pa[name], pb[name]), name
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key
    assert torch.equal(ta.batch_sizes, tb.batch_sizes)
    for field in ("loss", "clipped_fraction", "mean_grad_norm"):
        assert torch.equal(getattr(ta, field).nan_to_num(7.0), getattr(tb, field).nan_to_num(7.0))


@pytest.mark.parametrize(("sampling", "layout", "chunk", "dropout"), [
    ("without-replacement", "looped", None, True),
    ("poisson", "looped", None, True),
    ("poisson", "batched", 2, True),
    ("without-replacement", "batched", None, False),
])
def test_train_pool_equals_train_on_copies(sampling, layout, chunk, dropout):
    """Scattered pool rows, ragged clients, per-client lr: identical params, states and stats,
    and the generator is left in the same state."""
    model = TinyCNN(dropout=dropout)
    spec = LocalTrainingSpec(local_steps=3, batch_size=3, sampling=sampling, clip_norm=1.0,
                             noise_multiplier=0.7, optimizer="adam", lr=0.01)
    pool = _pool()
    indices = _scattered_indices(len(pool), [6, 9, 7, 12, 6])
    start = perturbed_params(model, 5)
    states = CohortTrainer(model, spec).init_optimizer_state(5)
    lr = torch.tensor([0.01, 0.02, 0.005, 0.01, 0.03])
    trainer = CohortTrainer(model, spec, layout=layout, chunk_size=chunk)
    gen_a, gen_b = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    copies = trainer.train(start, [pool.rows(i) for i in indices], states, gen_a, lr=lr)
    pooled = trainer.train_pool(start, pool, indices, states, gen_b, lr=lr)
    _assert_same(copies, pooled)
    assert torch.equal(gen_a.get_state(), gen_b.get_state())


def test_batches_are_drawn_from_each_clients_own_rows(monkeypatch):
    model = TinyCNN()
    spec = LocalTrainingSpec(local_steps=4, batch_size=3, clip_norm=1.0, noise_multiplier=1.0)
    pool = _pool()
    indices = _scattered_indices(len(pool), [5, 8, 4])
    seen = []
    sample = trainer_module.sample_steps

    def spy(sources, rows, steps, batch_size, fixed, device):
        batches = sample(sources, rows, steps, batch_size, fixed, device)
        for t in range(steps):
            seen.append((set(rows[0].tolist()), batches.step(t)[0].clone()))
        return batches

    monkeypatch.setattr(trainer_module, "sample_steps", spy)
    CohortTrainer(model, spec).train_pool(perturbed_params(model, 3), pool, indices, None,
                                          torch.Generator().manual_seed(0))
    assert len(seen) == 3 * 4  # looped: one client per call (clients may run concurrently)
    owners = [own for own, _ in seen]
    assert all(owners.count(set(rows.tolist())) == 4 for rows in indices)
    for own, index in seen:
        assert index.shape == (1, 3) and set(index.flatten().tolist()) <= own
        assert torch.unique(index).numel() == 3


def test_replicas_share_indices_and_the_pool_is_not_copied():
    """Four replicas of one client: same indices, same start. With identical seed rows they
    train identically; with derived per-replica seeds they differ. The pool's storage is
    used as is (same data pointer), and a float64 model converts the pool once (cached)."""
    model = TinyCNN()
    spec = LocalTrainingSpec(local_steps=2, batch_size=4, clip_norm=1.0, noise_multiplier=1.0,
                             optimizer="sgd", lr=0.1)
    pool = _pool()
    client = torch.arange(10, 30)
    start = take_rows(perturbed_params(model, 1), [0, 0, 0, 0])
    trainer = CohortTrainer(model, spec)
    pointer = pool.x.data_ptr()
    same = ClientStreams.cat([ClientStreams.derive(5, 1, [7])] * 4)
    params, _, _ = trainer.train_streams(start, pool, [client] * 4, same)
    for name in params:
        assert all(torch.equal(params[name][r], params[name][0]) for r in range(4))
    distinct = ClientStreams.cat([ClientStreams.derive(5, 1, [7], domain=r) for r in range(4)])
    params, _, _ = trainer.train_streams(start, pool, [client] * 4, distinct)
    rows = params["fc2.weight"].reshape(4, -1)
    assert all(not torch.equal(rows[r], rows[s]) for r in range(4) for s in range(r))
    assert pool.x.data_ptr() == pointer
    assert pool.on("cpu", torch.float32) is pool
    wide = pool.on("cpu", torch.float64)
    assert wide is pool.on(torch.device("cpu"), torch.float64) and wide.dtype == torch.float64
    trainer64 = CohortTrainer(TinyCNN().double(), spec)
    trainer64.train_pool(replicate_double(model, 2), pool, [client, client], None,
                         torch.Generator().manual_seed(0))
    assert pool.on("cpu", torch.float64) is wide


def replicate_double(model, count):
    return {k: v.double() for k, v in take_rows(perturbed_params(model, 1), [0] * count).items()}


def test_from_clients_and_two_dimensional_indices():
    gen = torch.Generator().manual_seed(0)
    pairs = [(torch.randn(k, 3, generator=gen), torch.arange(k)) for k in (4, 2, 5)]
    pool, indices = DataPool.from_clients(pairs)
    assert len(pool) == 11 and pool.input_shape == (3,)
    assert [i.tolist() for i in indices] == [[0, 1, 2, 3], [4, 5], [6, 7, 8, 9, 10]]
    for (x, y), index in zip(pairs, indices, strict=True):
        px, py = pool.rows(index)
        assert torch.equal(px, x) and torch.equal(py, y)
    rows = pool.check_indices(torch.tensor([[0, 1], [1, 0]]))
    assert [r.tolist() for r in rows] == [[0, 1], [1, 0]] and rows[0].dtype == torch.int64


def test_bad_pools_and_indices_name_the_argument():
    model = TinyCNN()
    spec = LocalTrainingSpec(local_steps=1, batch_size=3, clip_norm=1.0, noise_multiplier=1.0)
    trainer = CohortTrainer(model, spec)
    pool = _pool(20)
    start = perturbed_params(model, 2)
    good = [torch.arange(0, 5), torch.arange(5, 10)]
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="same number of records"):
        DataPool(torch.zeros(3, 2), torch.zeros(4))
    with pytest.raises(ValueError, match="0 records"):
        DataPool(torch.zeros(0, 2), torch.zeros(0))
    with pytest.raises(ValueError, match="dtype = 'float'"):
        DataPool(torch.zeros(3, 2), torch.zeros(3), dtype="float")
    with pytest.raises(ValueError, match="pool = tuple"):
        trainer.train_pool(start, (pool.x, pool.y), good, None, gen)
    with pytest.raises(ValueError, match=r"indices has 1 rows: must match start_params \(2\)"):
        trainer.train_pool(start, pool, good[:1], None, gen)
    with pytest.raises(ValueError, match=r"indices has rows in \[0, 20\]: must be in \[0, 19\]"):
        trainer.train_pool(start, pool, [good[0], torch.tensor([18, 19, 20])], None, gen)
    with pytest.raises(ValueError, match=r"indices has rows in \[-1, 9\]"):
        trainer.train_pool(start, pool, [good[0], torch.tensor([-1, 7, 8, 9])], None, gen)
    with pytest.raises(ValueError, match=r"indices\[1\] lists a pool row more than once"):
        trainer.train_pool(start, pool, [good[0], torch.tensor([6, 7, 6, 8])], None, gen)
    with pytest.raises(ValueError, match=r"indices\[0\] has shape \(5,\) and dtype torch.float"):
        trainer.train_pool(start, pool, [good[0].float(), good[1]], None, gen)
    with pytest.raises(ValueError, match=r"indices\[1\] records = 2 is out of range"):
        trainer.train_pool(start, pool, [good[0], torch.tensor([11, 12])], None, gen)
    with pytest.raises(ValueError, match="indices must be a sequence"):
        trainer.train_pool(start, pool, torch.arange(10), None, gen)
    with pytest.raises(ValueError, match="start_params has 0 rows"):
        trainer.train_pool(take_rows(start, []), pool, [], None, gen)
    with pytest.raises(ValueError, match="generator = 3"):
        trainer.train_pool(start, pool, good, None, 3)
    state = gen.get_state()
    with pytest.raises(ValueError, match="optimizer_states"):
        trainer.train_pool(start, pool, good, {"step": torch.zeros(3)}, gen)
    assert torch.equal(gen.get_state(), state)  # nothing drawn before the inputs are checked
