"""Synthetic LEAF-style populations: many small clients of unequal sizes over one shared pool.

LEAF's federated datasets (Caldas et al. 2018: FEMNIST, Shakespeare, Sent140) have thousands
to hundreds of thousands of writers/users with few records each and a long-tailed size
distribution. Without those files, :func:`leaf_synthetic_partition` builds a population of that
shape over the records available here (mnist-5k, Fashion-MNIST, digits, ...)::

    n_j   = max(n_min, round(exp(N(log m - s^2 / 2, s^2))))     log-normal sizes, mean ~ m
    perm  = a uniformly random permutation of the N pool records
    idx_j = perm[(o_j + k) mod N], k = 0..n_j - 1,  o_j = n_0 + ... + n_{j-1}

so the clients are consecutive windows of one shuffled pool: disjoint while the total
``sum_j n_j`` is at most N, and otherwise every record is held by ``ceil(sum_j n_j / N)`` or
fewer clients (the partition's record sharing, which record-level accountants compose and
DP-DSGD refuses; client-level DP-FedAvg is unaffected). No record is listed twice within one
client as long as ``n_j <= N``. Real LEAF files are read by :mod:`privfl.data.leaf`.
"""

from __future__ import annotations

import numpy as np

from privfl._validation import check_int, check_positive
from privfl.data.datasets import Dataset, FederatedDataset, as_rng
from privfl.data.partition import Seed

__all__ = ["LEAF_SIZE_SPREAD", "federate_leaf_synthetic", "leaf_synthetic_partition"]

#: s, the log-normal spread of client sizes (coefficient of variation sqrt(e^(s^2) - 1) = 0.53).
LEAF_SIZE_SPREAD = 0.5


def leaf_synthetic_partition(num_examples: int, num_clients: int, *, mean_size: float,
                             min_size: int = 1, spread: float = LEAF_SIZE_SPREAD,
                             seed: Seed = 0) -> list[np.ndarray]:
    """Client index arrays of a LEAF-style population (see the module docstring; ``spread`` is
    s, the standard deviation of the log of a client's size)."""
    num_examples = check_int("num_examples", num_examples, 1)
    num_clients = check_int("num_clients", num_clients, 1)
    mean_size = check_positive("mean_size", mean_size)
    min_size = check_int("min_size", min_size, 1, num_examples)
    s = check_positive("spread", spread)
    rng = as_rng(seed)
    sizes = np.rint(rng.lognormal(np.log(mean_size) - s**2 / 2, s, num_clients))
    sizes = np.clip(sizes, min_size, num_examples).astype(np.int64)
    perm = rng.permutation(num_examples).astype(np.int64)
    windows = np.arange(int(sizes.sum()), dtype=np.int64) % num_examples  # consecutive
    return np.split(perm[windows], np.cumsum(sizes)[:-1])


def federate_leaf_synthetic(train: Dataset, test: Dataset, *, num_clients: int,
                            mean_size: float, min_size: int = 1, test_size: int = 0,
                            seed: Seed = 0) -> FederatedDataset:
    """A LEAF-style population over ``train`` (:func:`leaf_synthetic_partition`); each client
    gets ``test_size`` test records drawn the same way (0: evaluate on the pooled test set)."""
    rng = as_rng(seed)
    parts = leaf_synthetic_partition(len(train), num_clients, mean_size=mean_size,
                                     min_size=min_size, seed=rng)
    test_size = check_int("test_size", test_size, 0)
    if test_size:
        tests = leaf_synthetic_partition(len(test), num_clients, mean_size=test_size,
                                         min_size=test_size, spread=1e-9, seed=rng)
    else:
        tests = [np.zeros(0, dtype=np.int64)] * num_clients
    return FederatedDataset(
        train, test, parts, tests,
        name=f"{train.name.split('/')[0]}/leaf-synthetic({num_clients}, mean {mean_size:g})",
        info={"partition": "leaf-synthetic"},
    )
