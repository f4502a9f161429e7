"""LEAF-style synthetic populations (privfl.data.population) and pooled client pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privfl.algorithms.builders import build_dataset
from privfl.config import config_from_dict
from privfl.data.population import LEAF_SIZE_SPREAD, leaf_synthetic_partition
from privfl.fl.pool import PooledClients


def test_sizes_are_log_normal_with_the_requested_mean():
    parts = leaf_synthetic_partition(60_000, 100_000, mean_size=8, min_size=1, seed=4)
    sizes = np.array([p.size for p in parts])
    assert len(parts) == 100_000
    assert sizes.mean() == pytest.approx(8, rel=0.02)  # rounding shifts the mean by < 1 %
    cv = math.sqrt(math.exp(LEAF_SIZE_SPREAD**2) - 1)  # 0.53 for the log-normal
    assert sizes.std() / sizes.mean() == pytest.approx(cv, rel=0.1)
    assert sizes.min() >= 1 and sizes.max() > 3 * 8  # a long tail


def test_windows_of_one_shuffled_pool():
    n = 1000
    small = leaf_synthetic_partition(n, 100, mean_size=5, min_size=2, seed=0)
    flat = np.concatenate(small)
    assert min(p.size for p in small) >= 2
    assert flat.size <= n and np.unique(flat).size == flat.size  # disjoint while it fits
    large = leaf_synthetic_partition(n, 600, mean_size=5, min_size=2, seed=0)
    flat = np.concatenate(large)
    holders = np.bincount(flat, minlength=n)
    assert flat.size > n and holders.max() <= math.ceil(flat.size / n)  # shared evenly
    assert holders.min() >= flat.size // n
    assert all(np.unique(p).size == p.size for p in large)  # distinct within a client
    again = leaf_synthetic_partition(n, 600, mean_size=5, min_size=2, seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(large, again, strict=True))


@pytest.mark.parametrize(("kwargs", "fragment"), [
    ({"mean_size": 0}, "mean_size = 0"),
    ({"mean_size": 4, "min_size": 0}, "min_size = 0"),
    ({"mean_size": 4, "min_size": 11}, "min_size = 11"),
    ({"mean_size": 4, "spread": -1.0}, "spread = -1.0"),
])
def test_partition_validation(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        leaf_synthetic_partition(10, 5, **kwargs)


def test_pooled_clients_equal_per_client_copies():
    gen = np.random.default_rng(0)
    x = gen.normal(size=(50, 3, 2)).astype(np.float64)
    y = gen.integers(0, 4, 50)
    indices = [np.array([3, 7, 1]), np.array([], dtype=np.int64), np.array([7, 49]),
               np.array([0])]
    clients = PooledClients(x, y, indices, torch.float32)
    assert len(clients) == 4 and len(clients.x) == 5  # only the records some client holds
    for j, idx in enumerate(indices):
        xj, yj = clients[j]
        assert torch.equal(xj, torch.as_tensor(x[idx]).to(torch.float32))
        assert torch.equal(yj, torch.as_tensor(y[idx], dtype=torch.int64))
        assert clients.size(j) == idx.size
    assert torch.equal(clients[-1][0], clients[3][0])
    assert [pair[1].tolist() for pair in clients] == [y[i].tolist() for i in indices]
    assert clients.mean_client_bytes() == pytest.approx((6 * 4 + 8) * 6 / 4)
    with pytest.raises(IndexError, match="client 4 is out of range"):
        clients[4]


def test_config_builds_a_population():
    config = config_from_dict({
        "data": {"dataset": "digits", "partition": "leaf-synthetic", "clients": 3000,
                 "train_size": 3, "test_size": 0},
        "model": {"name": "logreg"}, "training": {"batch_size": 2},
        "privacy": {"enabled": False}, "federated": {"algorithm": "dp-fedavg"}})
    data = build_dataset(config)
    sizes = np.asarray(data.client_sizes)
    assert data.num_clients == 3000 and sizes.min() >= 2
    assert sizes.sum() > len(data.train)  # 3,000 clients of ~3 share the 1,437 digits
