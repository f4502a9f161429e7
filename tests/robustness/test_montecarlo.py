"""Monte Carlo replicas trained together equal the same replicas trained one after another, bit
for bit (user level: DP-FedAvg; instance level: InsDP-FedAvg and InsDP-FedSGD); replicas are
independent (distinct seeds, fresh noise of the plan's scale); the privacy statement is the
plan's own."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privfl.config import config_from_dict
from privfl.robustness import montecarlo
from privfl.robustness.montecarlo import (
    initial_parameters,
    replica_config,
    replica_seeds,
    train_replicas,
    train_replicas_serially,
)
from privfl.runs.experiment import build_dataset, privacy_plan

#: digits 0 vs 1 (8x8 images), 8 clients of 20 records: a replica trains in milliseconds
BASE = {
    "seed": 3,
    "data": {"dataset": "digits", "classes": [0, 1], "test_fraction": 0.3, "partition": "iid",
             "clients": 8, "train_size": 20, "test_size": 5},
    "model": {"name": "mlp", "kwargs": {"hidden": [12]}},
    "training": {"local_steps": 3, "batch_size": 4, "sampling": "without-replacement",
                 "optimizer": "momentum", "momentum": 0.9, "lr": 0.1},
    "privacy": {"enabled": True, "noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-3},
    "run": {"threads": 1},
}
USER = {"algorithm": "dp-fedavg", "rounds": 3, "client_sampling": "poisson", "client_rate": 0.2}


def config(federated=None, **sections):
    raw = {**BASE, "federated": dict(federated or USER)}
    for key, value in sections.items():
        raw[key] = {**raw.get(key, {}), **value}
    return config_from_dict(raw)


def assert_same(a, b):
    assert torch.equal(a.weights, b.weights)
    assert np.array_equal(a.seeds, b.seeds)
    for name in a.predictions:
        assert np.array_equal(a.predictions[name], b.predictions[name])
        assert np.array_equal(a.probabilities[name], b.probabilities[name])
        assert np.array_equal(a.labels[name], b.labels[name])


@pytest.fixture(autouse=True)
def _small_prediction_groups(monkeypatch):
    """Groups of 2 replicas per forward, so that waves of 3 cut through groups."""
    monkeypatch.setattr(montecarlo, "PREDICT_GROUP", 2)


@pytest.mark.parametrize(("federated", "sections", "layout"), [
    # user level, Poisson cohorts (q = 0.2 of 8: many replicas have empty rounds)
    (USER, {}, None),
    (USER, {}, "batched"),
    # adaptive clipping: every replica has its own clip norm state
    ({**USER, "client_rate": 0.5, "adaptive_clipping": True, "count_noise": 2.0}, {}, None),
    # instance level: per-client optimizer states kept across rounds, Poisson record batches
    ({"algorithm": "insdp-fedavg", "rounds": 2},
     {"training": {"sampling": "poisson", "local_steps": 2}}, None),
    ({"algorithm": "insdp-fedavg", "rounds": 2, "clients_per_round": 3}, {}, "batched"),
    ({"algorithm": "insdp-fedsgd", "rounds": 3, "clients_per_round": 4},
     {"training": {"optimizer": "sgd", "local_steps": 1}}, None),
    # a simulated attack: poisoned data shared by all replicas, attackers' updates scaled
    ({**USER, "client_rate": 0.5},
     {"attack": {"kind": "scaling", "attackers": 2, "scale": 5.0,
                 "trigger": {"anchor": "bottom-right"}}}, "batched"),
])
def test_together_equals_one_after_another_bit_for_bit(federated, sections, layout):
    cfg = config(federated, **sections)
    backdoor = (np.random.default_rng(0).random((6, 1, 8, 8), dtype=np.float32),
                np.zeros(6, dtype=np.int64))
    together = train_replicas(cfg, 5, layout=layout, concurrent=3, keep_weights=True,
                              eval_sets={"backdoor": backdoor})
    serial = train_replicas_serially(cfg, 5, layout=layout, keep_weights=True,
                                     eval_sets={"backdoor": backdoor})
    assert_same(together, serial)
    assert together.info["mode"] == "together" and serial.info["mode"] == "serial"
    assert together.info["engine_calls"] >= 1 and together.info["wave"] == 3
    # the replicas are different models (independent noise, cohorts, batches, initialisation)
    w = together.weights
    assert all(not torch.equal(w[i], w[j]) for i in range(5) for j in range(i))
    probs = together.probabilities["test"]
    assert probs.dtype == np.float32 and probs.shape[0] == 5
    np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
    assert np.array_equal(together.predictions["test"], probs.argmax(-1))


def test_a_replica_does_not_depend_on_how_many_run_or_with_whom():
    cfg = config()
    five = train_replicas(cfg, 5, concurrent=2, keep_weights=True)
    three = train_replicas(cfg, 3, concurrent=3, keep_weights=True)
    assert torch.equal(five.weights[:3], three.weights)
    assert np.array_equal(replica_seeds(3, 3), five.seeds[:3])
    assert replica_seeds(3, 2, first=1).tolist() == five.seeds[1:3].tolist()
    # replica r is exactly the run of the configuration with seed s_r (privfl run's algorithm)
    from privfl.robustness.replica_runner import run_rounds
    from privfl.runs.experiment import build_algorithm

    alone = build_algorithm(replica_config(cfg, int(five.seeds[4])), build_dataset(cfg))
    run_rounds(alone, cfg.federated.rounds)
    assert torch.equal(alone.global_model, five.weights[4])


def test_replica_seeds_are_pinned():
    """SeedSequence(3, spawn_key=(0x4D43, 0, r)), first word >> 2 (ClientStreams.derive)."""
    expected = [int(np.random.SeedSequence(3, spawn_key=(0x4D43, 0, r))
                    .generate_state(3, dtype=np.uint64)[0] >> np.uint64(2)) for r in range(4)]
    assert replica_seeds(3, 4).tolist() == expected
    assert len(set(expected)) == 4 and all(0 <= s < 2**62 for s in expected)


def test_server_noise_is_fresh_and_of_the_plans_scale():
    """With (almost) no local training, one round moves each replica's model by the server's
    noise / E[m]: N(0, (z S / E[m])^2) per coordinate, independent across replicas."""
    cfg = config({"algorithm": "dp-fedavg", "rounds": 1, "client_sampling": "fixed-size",
                  "cohort_size": 4}, training={"lr": 1e-12},
                 privacy={"noise_multiplier": 2.0, "clip_norm": 0.5})
    models = 24
    result = train_replicas(cfg, models, keep_weights=True)
    data = build_dataset(cfg)
    initial = torch.stack([
        torch.cat([v.flatten() for v in initial_parameters(cfg, data, int(s)).values()])
        for s in result.seeds])
    steps = (result.weights - initial).double()
    std = 2.0 * 0.5 / 4  # z S / m
    count = steps.numel()
    statistic = float((steps / std).square().sum())
    # chi-square with `count` degrees of freedom: within +-6 standard deviations
    assert abs(statistic - count) < 6 * (2 * count) ** 0.5
    assert abs(float(steps.mean())) < 6 * std / count**0.5
    corr = np.corrcoef(steps.numpy())
    off = corr[~np.eye(models, dtype=bool)]
    assert np.abs(off).max() < 6 / steps.shape[1] ** 0.5  # independent replicas


def test_privacy_statement_is_the_plans():
    cfg = config({**USER, "paper_accounting": True})
    result = train_replicas(cfg, 4)
    plan = privacy_plan(cfg)
    results = plan.results(cfg.federated.rounds)
    bounds = [r for r in results if r.kind == "bound" and not r.extras.get("scope")]
    best = min(bounds, key=lambda r: r.epsilon)
    p = result.privacy
    assert (p.epsilon, p.delta, p.method, p.unit) == (best.epsilon, best.delta, best.method,
                                                        "client")
    assert p.certification_epsilon == pytest.approx(4 * best.epsilon, rel=1e-15)
    assert p.certification_delta == pytest.approx(4e-3)
    paper = [r for r in results if r.extras.get("scope") == "paper"]
    assert p.paper_epsilon == paper[0].epsilon > p.epsilon
    assert len(p.per_model) == len(results)
    text = "\n".join(p.lines())
    assert "M x epsilon" in text and "Xie et al. 2023" in text and "bound" in text
    nonprivate = train_replicas(config(privacy={"enabled": False}), 2)
    assert not nonprivate.privacy.private and nonprivate.privacy.certification_epsilon is None
    assert "not private" in nonprivate.privacy.lines()[0]


def test_progress_reports_every_replica():
    seen = []
    train_replicas(config(), 3, concurrent=2, progress=lambda done, total: seen.append(
        (done, total)))
    assert sorted(seen) == [(1, 3), (2, 3), (3, 3)]


def test_an_attack_section_reaches_every_replica():
    """Scaling attackers (gamma = 50) move the replicas away from the clean ones."""
    attack = {"kind": "scaling", "attackers": 3, "scale": 50.0,
              "trigger": {"anchor": "bottom-right"}}
    clean = train_replicas(config({**USER, "client_rate": 0.5}), 2, keep_weights=True)
    attacked = train_replicas(config({**USER, "client_rate": 0.5}, attack=attack), 2,
                              keep_weights=True)
    assert not torch.equal(clean.weights, attacked.weights)
    assert attacked.config_digest != clean.config_digest


@pytest.mark.parametrize(("federated", "sections", "shards", "chunk"), [
    # Poisson local batches in the batched layout: a row's result depends on its chunk, so the
    # shards must be cut at multiples of the chunk size (here 2 rows)
    ({**USER, "client_rate": 0.5}, {"training": {"sampling": "poisson"}}, 3, 2),
    # persistent per-client optimizer states travel with their rows
    ({"algorithm": "insdp-fedavg", "rounds": 2, "clients_per_round": 3}, {}, 2, 4),
])
def test_sharded_engine_calls_equal_the_local_call_bit_for_bit(federated, sections, shards,
                                                                chunk):
    """The gathered rows cut into shards (each run by a fresh worker, as on Ray) give the
    models, predictions and probabilities of the one local call."""
    from privfl.backends import InProcessShards, use_backend

    cfg = config(federated, **sections)
    options = {"layout": "batched", "chunk_size": chunk, "concurrent": 3, "keep_weights": True}
    local = train_replicas(cfg, 5, **options)
    engine = InProcessShards(shards)
    sharded = train_replicas(cfg, 5, backend=engine, **options)
    assert_same(local, sharded)
    assert local.privacy.to_dict() == sharded.privacy.to_dict()
    rows = [r.rows for r in engine.records]
    assert len(rows) == sharded.info["engine_calls"] == local.info["engine_calls"]
    assert sum(rows) == sharded.info["engine_rows"] == local.info["engine_rows"]
    assert any(r.shards == shards for r in engine.records)  # really cut
    assert sharded.info["backend"] == "in-process shards" and local.info["backend"] == "local"
    with use_backend(engine):  # the active backend is the default
        again = train_replicas(cfg, 5, **options)
    assert torch.equal(again.weights, local.weights)
    assert len(engine.records) == 2 * len(rows)


def test_a_backend_that_cannot_run_gathered_rows_is_refused():
    from privfl.backends import LocalBackend
    from privfl.robustness.replica_runner import ReplicaBackend

    with pytest.raises(ValueError, match="backend = 'monte-carlo replicas' is not allowed for "
                                         "Monte Carlo training"):
        train_replicas(config(), 2, backend=ReplicaBackend())
    assert train_replicas(config(), 1, backend=LocalBackend()).info["backend"] == "local"


def test_a_failing_replica_stops_the_run_and_every_paused_replica_is_unwound(monkeypatch):
    """The first error of a replica is re-raised; every other replica, paused inside its local
    work, is unwound (its finally blocks run) before train_replicas returns."""
    from privfl.algorithms.dp_fedavg import DpFedAvg
    from privfl.robustness import replica_runner

    entered, left, calls = [], [], []
    real_rounds, real_aggregate = replica_runner.run_rounds, DpFedAvg.aggregate

    def rounds(algorithm, count):
        entered.append(algorithm)
        try:
            real_rounds(algorithm, count)
        finally:
            left.append(algorithm)

    def aggregate(self, cohort, updates):
        calls.append(self)
        if len(calls) == 5:  # a replica fails in the middle of the run
            raise RuntimeError("replica failed on purpose")
        return real_aggregate(self, cohort, updates)

    monkeypatch.setattr(replica_runner, "run_rounds", rounds)
    monkeypatch.setattr(DpFedAvg, "aggregate", aggregate)
    with pytest.raises(RuntimeError, match="replica failed on purpose"):
        train_replicas(config({**USER, "client_rate": 1.0}), 4)
    assert len(entered) == 4 and sorted(map(id, left)) == sorted(map(id, entered))


def test_replica_chunk_fits_the_budget_and_shrinks_with_bigger_rows():
    """The default chunk of the batched layout is a power of two in [8, 1024] whose rows'
    working set fits CHUNK_BUDGET, smaller for a bigger batch (more activations a row)."""
    from privfl.robustness.montecarlo import CHUNK_BUDGET, replica_chunk
    from privfl.runs.experiment import build_algorithm

    chunks = []
    for batch in (1, 4, 16):
        cfg = config(training={"batch_size": batch})
        data = build_dataset(cfg)
        trainer = build_algorithm(cfg, data).trainer
        example = (data.test.x, np.asarray(data.test.y))
        chunk = replica_chunk(trainer, example)
        row = batch * trainer.example_bytes(torch.as_tensor(data.test.x[:1]).float(),
                                            torch.as_tensor(data.test.y[:1]))
        row += 16 * trainer.num_params
        assert chunk & (chunk - 1) == 0 and 8 <= chunk <= 1024
        assert chunk * row <= CHUNK_BUDGET or chunk == 8
        assert 2 * chunk * row > CHUNK_BUDGET or chunk == 1024
        chunks.append(chunk)
    assert chunks == sorted(chunks, reverse=True) and chunks[0] > chunks[-1]
