"""Backends without Ray: the local backend is the engine's own call, and a cohort cut into shards
(seeded on the driver, each shard trained by a fresh trainer, put back in order) gives the local
result bit for bit — for the engine and for whole runs of the algorithms on the hook."""

from __future__ import annotations

import sys

import pytest
import torch
from _backend_helpers import DP_FEDAVG, PRIFEDSYNC, assert_same, config, outcome, run
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.algorithms.registry import algorithm_class
from privfl.backends import (
    InProcessShards,
    LocalBackend,
    active_backend,
    check_algorithm,
    make_backend,
    shard_bounds,
    use_backend,
)
from privfl.fl import CohortTrainer, LocalTrainingSpec, replicate_params
from privfl.models import build_model

SIZES = [9, 7, 12, 8, 10]


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _engine_case(optimizer="adam", dropout=0.3):
    """An MLP with dropout (masks from each client's data stream), DP-SGD with Poisson
    batches, and 5 ragged clients."""
    torch.manual_seed(3)
    model = build_model("mlp", input_shape=(1, 6, 6), num_classes=3, hidden=(8,),
                        dropout=dropout)
    spec = LocalTrainingSpec(local_steps=2, batch_size=3, sampling="poisson", clip_norm=1.0,
                             noise_multiplier=0.8, optimizer=optimizer, lr=0.01)
    gen = torch.Generator().manual_seed(1)
    data = [(torch.randn(n, 1, 6, 6, generator=gen), torch.randint(0, 3, (n,), generator=gen))
            for n in SIZES]
    return model, spec, data


def perturbed_params(model, count):
    """``count`` different stacked copies of the model's parameters."""
    gen = torch.Generator().manual_seed(0)
    params = replicate_params(model, count)
    for value in params.values():
        value.add_(0.05 * torch.randn(value.shape, generator=gen))
    return params


def _call(backend, trainer, start, data, cohort, states, seed, **kw):
    gen = torch.Generator().manual_seed(seed)
    result = backend.train_clients(trainer, start, data, cohort, states, gen, **kw)
    return result, gen.get_state()


def test_local_backend_is_trainer_train():
    model, spec, data = _engine_case()
    trainer = CohortTrainer(model, spec)
    cohort = [4, 0, 2]
    start = perturbed_params(model, 3)
    (flat, states, stats), _ = _call(LocalBackend(), trainer, trainer.flatten(start), data,
                                     cohort, None, 5)
    params, want_states, want_stats = trainer.train(
        start, [data[j] for j in cohort], None, torch.Generator().manual_seed(5))
    assert torch.equal(flat, trainer.flatten(params))
    for key in want_states:
        assert torch.equal(states[key], want_states[key]), key
    assert torch.equal(stats.loss, want_stats.loss)


@pytest.mark.parametrize("shards", [2, 3, 5])
@pytest.mark.parametrize("one_start", [False, True])
def test_shards_equal_local_bit_for_bit(shards, one_start):
    """Per-row or one shared start model, persistent Adam states, per-client rates, dropout,
    Poisson batches: params, states, statistics and the generator's final state are equal."""
    model, spec, data = _engine_case()
    trainer = CohortTrainer(model, spec)
    cohort = [3, 1, 4, 0, 2]
    m = len(cohort)
    start = trainer.flatten(perturbed_params(model, m))
    if one_start:
        start = start[0].clone()
    states = trainer.init_optimizer_state(m)
    states["exp_avg"].normal_(generator=torch.Generator().manual_seed(9))
    states["step"] += 2
    lr = torch.linspace(0.005, 0.02, m)
    local, local_gen = _call(LocalBackend(), trainer, start, data, cohort, states, 11, lr=lr)
    backend = InProcessShards(shards)
    sharded, sharded_gen = _call(backend, trainer, start, data, cohort, states, 11, lr=lr)
    assert torch.equal(sharded[0], local[0])
    for key in local[1]:
        assert torch.equal(sharded[1][key], local[1][key]), key
    for name in ("batch_sizes", "loss", "clipped_fraction", "mean_grad_norm"):
        assert torch.equal(getattr(sharded[2], name), getattr(local[2], name)), name
    assert torch.equal(sharded_gen, local_gen)  # the seeds were drawn as trainer.train does
    record = backend.records[-1]
    assert (record.rows, record.shards) == (m, min(shards, m))
    d = trainer.num_params
    # sent: start (once or per row), Adam states (2 d float32 and a float32 step per row),
    # 6 seeds, id, lr per row, and each client's records once (36 float32 inputs and an int64
    # label each, its size)
    per_row = 4 * (2 * d) + 4 + 8 * 6 + 8 + 4
    assert record.data_bytes == sum((36 * 4 + 8) * SIZES[j] + 8 for j in cohort)
    assert record.bytes_sent == (4 * d if one_start else 4 * d * m) + per_row * m + (
        record.data_bytes)
    assert len(record.compute_seconds) == record.shards


def test_a_worker_receives_only_its_shards_records(monkeypatch):
    """Shipped data: each shard's call carries the records of its own distinct clients (a
    client repeated in the shard, e.g. Monte Carlo replicas, once), and the worker holds no
    other data; the result equals the local one."""
    from privfl.backends import base

    model, spec, data = _engine_case()
    trainer = CohortTrainer(model, spec)
    cohort = [3, 3, 1, 0, 1, 4]
    start = trainer.flatten(perturbed_params(model, 1))[0]
    calls, workers = [], []
    train = base.ShardWorker.train

    def spy(self, call, start_row=None):
        calls.append(call)
        workers.append(self)
        return train(self, call, start_row)

    monkeypatch.setattr(base.ShardWorker, "train", spy)
    local, _ = _call(LocalBackend(), trainer, start, data, cohort, None, 4)
    sharded, _ = _call(InProcessShards(2), trainer, start, data, cohort, None, 4)
    assert torch.equal(sharded[0], local[0])
    assert [c["clients"] for c in calls] == [[0, 0, 1], [0, 1, 2]]
    for call, clients in zip(calls, ([3, 1], [0, 1, 4]), strict=True):
        shipped = call["data"]
        assert torch.equal(shipped["x"], torch.cat([data[j][0] for j in clients]))
        assert torch.equal(shipped["y"], torch.cat([data[j][1] for j in clients]))
        assert shipped["sizes"].tolist() == [SIZES[j] for j in clients]
    assert all(w.pool is None for w in workers)  # nothing held between calls
    with pytest.raises(ValueError, match="must ship each shard's records"):
        base.ShardWorker(base.trainer_settings(trainer)).train(
            {**calls[0], "data": None}, start)


def test_discarded_states_are_not_returned():
    model, spec, data = _engine_case(optimizer="sgd", dropout=0.0)
    trainer = CohortTrainer(model, spec)
    start = trainer.flatten(perturbed_params(model, 1))[0]
    for backend in (LocalBackend(), InProcessShards(2)):
        (flat, states, _), _ = _call(backend, trainer, start, data, [0, 1, 2], None, 2,
                                     keep_states=False)
        assert states is None and flat.shape == (3, trainer.num_params)


@given(count=st.integers(1, 200), shards=st.integers(1, 20), multiple=st.integers(1, 8))
@settings(max_examples=300, deadline=None)
def test_shard_bounds_cover_in_order(count, shards, multiple):
    bounds = shard_bounds(count, shards, multiple)
    assert bounds[0][0] == 0 and bounds[-1][1] == count
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
    assert all(hi > lo for lo, hi in bounds)
    assert len(bounds) == min(shards, -(-count // multiple))
    assert all(lo % multiple == 0 for lo, _ in bounds)  # whole chunks of the whole run
    sizes = [hi - lo for lo, hi in bounds[:-1]] or [bounds[-1][1]]
    assert max(sizes) - min(sizes) <= multiple  # balanced to one chunk


@pytest.mark.parametrize(("raw", "shards"), [(PRIFEDSYNC, 2), (PRIFEDSYNC, 4), (DP_FEDAVG, 3)])
def test_runs_on_shards_equal_local_runs(tmp_path, raw, shards):
    """A short PriFedSync (record-level, noise in the clients) and DP-FedAvg (client-level,
    noise at the server) run: same models, optimizer and generator states, metrics and
    privacy report on shards as locally."""
    local = run(config(raw), tmp_path / "local")
    backend = InProcessShards(shards)
    sharded = run(config(raw), tmp_path / "sharded", backend)
    assert_same(outcome(local), outcome(sharded))
    # every round's local work went through the backend, cut into shards
    assert [r.rows for r in backend.records] == [m["cohort_size"] for m in sharded.metrics]
    assert all(r.shards == min(shards, r.rows) for r in backend.records)
    assert active_backend().name == "local"  # use_backend restored the default


def test_bad_inputs_name_the_argument():
    model, spec, data = _engine_case()
    trainer = CohortTrainer(model, spec)
    start = trainer.flatten(perturbed_params(model, 2))
    gen = torch.Generator()
    cases = [
        (lambda: LocalBackend().train_clients(trainer, start, data, [0, 7], None, gen),
         "cohort[1] = 7 is out of range"),
        (lambda: LocalBackend().train_clients(trainer, start[:, :5], data, [0, 1], None, gen),
         f"start has shape (2, 5): must be [M, {trainer.num_params}]"),
        (lambda: LocalBackend().train_clients(trainer, start, data, [0], None, gen),
         "start has 2 rows: must match cohort (1)"),
        (lambda: LocalBackend().train_clients(trainer, start, data, [], None, gen),
         "cohort is empty"),
        (lambda: LocalBackend().train_clients("x", start, data, [0, 1], None, gen),
         "trainer = str is not allowed"),
        (lambda: InProcessShards(2).train_clients(trainer, start, data, [0, 1], None, None),
         "generator = None is not allowed"),
        (lambda: InProcessShards(0), "shards = 0 is out of range"),
        (lambda: make_backend("spark"), "backend = 'spark' is not allowed: must be one of"),
        (lambda: make_backend("local", workers=2), "workers = 2 is not allowed with backend"),
        (lambda: check_algorithm(InProcessShards(2), algorithm_class("dp-dsgd")),
         "federated.algorithm = 'dp-dsgd' is not allowed with --backend in-process shards"),
        (lambda: use_backend("ray").__enter__(), "backend = str is not allowed"),
    ]
    for call, fragment in cases:
        with pytest.raises(ValueError, match=None) as info:
            call()
        assert fragment in str(info.value), (fragment, str(info.value))
    check_algorithm(LocalBackend(), algorithm_class("dp-dsgd"))  # every algorithm runs locally


@pytest.mark.parametrize(("algorithm", "why"), [
    ("dp-dsgd", "a round is one clipped gradient of the sampled records"),
    ("projected-sgd", "a round is one clipped gradient per user"),
])
def test_algorithms_without_local_steps_are_refused_on_ray_with_the_reason(algorithm, why):
    with pytest.raises(ValueError) as info:
        check_algorithm("ray", algorithm_class(algorithm))
    message = str(info.value)
    assert message.startswith(f"federated.algorithm = {algorithm!r} is not allowed with "
                              f"--backend ray: {why}")
    assert "privfl sweep --backend ray" in message and "\n" not in message
    for name in ("prifedsync", "dp-fedavg", "insdp-fedsgd", "insdp-fedavg"):
        check_algorithm("ray", algorithm_class(name))


def test_batched_layout_needs_a_fixed_chunk_on_shards():
    model, spec, data = _engine_case()
    start = CohortTrainer(model, spec).flatten(perturbed_params(model, 2))
    free = CohortTrainer(model, spec, layout="batched")
    with pytest.raises(ValueError, match="chunk_size = None is not allowed"):
        InProcessShards(2).train_clients(free, start, data, [0, 1], None, torch.Generator())
    fixed = CohortTrainer(model, spec, layout="batched", chunk_size=2)
    cohort = [0, 1, 2, 3, 4]
    start = fixed.flatten(perturbed_params(model, 5))
    local, _ = _call(LocalBackend(), fixed, start, data, cohort, None, 4)
    sharded, _ = _call(InProcessShards(2), fixed, start, data, cohort, None, 4)
    assert torch.equal(local[0], sharded[0])  # cut at rows 4 (two whole chunks), not 2.5


def test_ray_backend_without_ray_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ValueError, match=r"--backend ray needs Ray, which is not installed: "
                                         r"pip install 'privfl\[ray\]'"):
        make_backend("ray")


def test_python_api_refuses_an_algorithm_that_would_run_locally_on_a_sharded_backend(tmp_path):
    """Inside use_backend(<sharded>), Experiment.run refuses dp-dsgd (no local steps to
    shard) instead of silently running it in this process; nothing is trained."""
    from pathlib import Path

    from privfl.config import load_config
    from privfl.runs.experiment import Experiment

    demo = Path(__file__).resolve().parents[2] / "configs" / "demo-dp-dsgd.yaml"
    cfg = load_config(demo, ["federated.rounds=1"])
    experiment = Experiment.create(cfg, tmp_path / "run")
    with use_backend(InProcessShards(2)), pytest.raises(ValueError, match="dp-dsgd.*not allowed"):
        experiment.run()
    assert experiment.algorithm.round == 0
