"""Streaming cohorts (privfl.fl.chunked_cohorts): a round's cohort trained in chunks gives the same
run bit for bit, whatever the chunk size, the number of client workers or the backend."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch

from privfl.algorithms.builders import build_algorithm
from privfl.algorithms.cohort_stream import CohortStream
from privfl.backends import InProcessShards, LocalBackend, use_backend
from privfl.config import ConfigError, config_from_dict

BASE = {
    "name": "stream-tiny",
    "seed": 3,
    "data": {"dataset": "synthetic", "synthetic_examples": 600, "test_fraction": 0.2,
             "partition": "iid", "clients": 14, "test_size": 6},
    "model": {"name": "mlp", "kwargs": {"hidden": [8]}},
    "training": {"local_steps": 2, "batch_size": 5, "optimizer": "adam", "lr": 0.05},
    "privacy": {"noise_multiplier": 0.9, "clip_norm": 0.3, "delta": 1e-3,
                "accountants": ["rdp"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_rate": 0.6},
    "run": {"threads": 1},
}

VARIANTS = {
    "dp-fedavg": {},
    "dp-fedavg-adaptive": {"federated": {"adaptive_clipping": True, "count_noise": 2.0}},
    "dp-fedavg-per-layer": {"federated": {"clipping": "per-layer"}},
    "dp-fedavg-fixed-size": {"federated": {"client_sampling": "fixed-size", "client_rate": None,
                                           "cohort_size": 9}},
    "dp-fedavg-nonprivate": {"privacy": {"enabled": False}},
    "insdp-fedavg": {"federated": {"algorithm": "insdp-fedavg", "clients_per_round": 9},
                     "training": {"sampling": "poisson"}, "privacy": {"clip_norm": 1.0}},
    "insdp-fedsgd": {"federated": {"algorithm": "insdp-fedsgd", "clients_per_round": 9},
                     "training": {"local_steps": 1, "optimizer": "sgd"}},
}


def _config(variant: str, **extra):
    raw = copy.deepcopy(BASE)
    for sections in (VARIANTS[variant], extra):
        for section, values in sections.items():
            if section == "federated" and "algorithm" in values:
                raw["federated"] = {"algorithm": values["algorithm"], "rounds": 2}
            raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def _run(variant: str, chunk: int | None, *, workers: int = 1, backend=None):
    """(global model, per-round metrics without wall times) after two rounds."""
    algo = build_algorithm(_config(variant))
    algo.stream = CohortStream(chunk=chunk)
    if workers > 1:  # client threads even for this small model
        algo.trainer.workers = workers
        algo.trainer.parallel_min_work = 0
    with use_backend(backend or LocalBackend()):
        rows = [algo.run_round() for _ in range(2)]
    for row in rows:
        row.pop("seconds")
    return algo.global_model.clone(), rows


def _same(a, b) -> None:
    assert torch.equal(a[0], b[0])
    assert len(a[1]) == len(b[1])
    for x, y in zip(a[1], b[1], strict=True):
        assert x.keys() == y.keys()
        for key in x:  # NaN-aware equality of every metric
            if isinstance(x[key], float) and math.isnan(x[key]):
                assert math.isnan(y[key]), key
            else:
                assert x[key] == y[key], key


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_two_chunk_sizes_give_the_same_run(variant):
    whole = _run(variant, 10**6)
    ones = _run(variant, 1)
    threes = _run(variant, 3)
    _same(whole, ones)
    _same(whole, threes)
    assert whole[1][0]["global_accuracy"] == whole[1][0]["global_accuracy"]  # not NaN


@pytest.mark.parametrize("variant", ["dp-fedavg", "insdp-fedavg"])
def test_workers_and_shards_do_not_change_the_run(variant):
    reference = _run(variant, 4)
    _same(reference, _run(variant, 2, workers=2))
    _same(reference, _run(variant, 5, backend=InProcessShards(shards=2)))


class _Recording(LocalBackend):
    """The local backend, recording how many rows each engine call trained."""

    def __init__(self) -> None:
        self.rows: list[int] = []

    def run_rows(self, trainer, data, clients, start, states, seeds, lr, *, keep_states=True):
        self.rows.append(len(clients))
        return super().run_rows(trainer, data, clients, start, states, seeds, lr,
                                keep_states=keep_states)


def test_a_round_trains_at_most_one_chunk_at_a_time():
    algo = build_algorithm(_config("dp-fedavg-fixed-size"))
    algo.stream = CohortStream(chunk=4)
    backend = _Recording()
    with use_backend(backend):
        algo.run_round()
    assert backend.rows == [4, 4, 1]  # cohort of 9 in chunks of 4


def test_the_budget_sets_the_chunk():
    algo = build_algorithm(_config("dp-fedavg", run={"threads": 1, "memory_budget": "1MiB"}))
    d = algo.trainer.num_params
    records = sum(x.numel() * 4 + y.numel() * 8 for x, y in algo.tensors.train) / 14
    per_row = 8 * d * 4 + records  # 8 float32 model rows + a mean client's records
    assert algo.stream.memory_budget == 1 << 20
    assert algo.stream.rows(algo.trainer, algo.tensors.train, 10_000) == int((1 << 20) // per_row)
    assert algo.stream.rows(algo.trainer, algo.tensors.train, 3) == 3


def test_kept_updates_give_the_streamed_model():
    streamed = build_algorithm(_config("dp-fedavg"))
    streamed.stream = CohortStream(chunk=2)
    kept = build_algorithm(_config("dp-fedavg"))
    cohort = streamed.select_cohort()
    assert np.array_equal(cohort, kept.select_cohort())
    streamed.aggregate(cohort, streamed.local_work(cohort))
    updates = kept.local_work(cohort, keep_updates=True)
    assert updates["updates"].shape == (cohort.size, kept.trainer.num_params)
    kept.aggregate(cohort, updates)
    assert torch.equal(streamed.global_model, kept.global_model)


@pytest.mark.parametrize(("value", "expected"), [("2GiB", 2 << 30), ("1.5 MB", 1_500_000),
                                                 (3 << 20, 3 << 20), ("4194304", 4 << 20)])
def test_memory_budget_config(value, expected):
    config = _config("dp-fedavg", run={"memory_budget": value})
    assert config.run.memory_budget == expected


@pytest.mark.parametrize(("value", "fragment"), [
    ("0.5MiB", "run.memory_budget = 524288 is out of range"),
    (1000, "run.memory_budget = 1000 is out of range"),
    ("lots", "run.memory_budget = 'lots' is not allowed"),
    ("2 parsecs", "is not allowed"),
])
def test_memory_budget_config_refuses_bad_values(value, fragment):
    with pytest.raises(ConfigError, match=fragment):
        _config("dp-fedavg", run={"memory_budget": value})
