"""Tiny deterministic federations and models for the PriFedSync tests (fast on 2 cores)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from privfl.data import Dataset, FederatedDataset, federate_iid, synthetic_dataset
from privfl.fl import LocalTrainingSpec
from privfl.models import build_model

#: A complete run configuration that trains in about a second.
TINY_CONFIG = {
    "name": "tiny",
    "seed": 3,
    "data": {
        "dataset": "synthetic",
        "synthetic_examples": 240,
        "test_fraction": 0.25,
        "partition": "iid",
        "clients": 4,
        "test_size": 12,
    },
    "model": {"name": "mlp", "kwargs": {"hidden": [6]}},
    "training": {"local_steps": 2, "batch_size": 8, "lr": 0.01},
    "privacy": {"sigma": 1.0, "delta": 1e-5},
    "federated": {"rounds": 3, "client_rate": 0.7},
    "run": {"threads": 1},
}


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models run fastest (and most predictably on a busy machine) on one thread."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def tiny_config_dict():
    return copy.deepcopy(TINY_CONFIG)


def _kill_before_checkpoints(directory, after: int) -> None:
    """The aftermath of a kill: every checkpoint of ``directory`` (a RunDirectory) newer than
    round ``after`` never written."""
    for r, path in directory.list_checkpoints():
        if r > after:
            path.unlink()
            directory.checkpoint_record(r).unlink()


@pytest.fixture
def kill_before_checkpoints():
    """:func:`_kill_before_checkpoints`: ``kill_before_checkpoints(directory, after)``."""
    return _kill_before_checkpoints


@pytest.fixture
def tiny_federation():
    """4 IID clients of 45 records of shape 1x4x4, 10 test records each."""
    full = synthetic_dataset(240, 3, (1, 4, 4), seed=1)
    train, test = full.split(0.25, seed=1)
    return federate_iid(train, test, num_clients=4, size=45, test_size=10, seed=1)


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return build_model("mlp", input_shape=(1, 4, 4), num_classes=3, hidden=(5,))


@pytest.fixture
def private_spec():
    return LocalTrainingSpec(local_steps=2, batch_size=5, clip_norm=1.0, noise_multiplier=2.0,
                             optimizer="adam", lr=0.01)


@pytest.fixture
def bias_federation() -> FederatedDataset:
    """Two clients whose test labels are all 0 (client 0) and all 1 (client 1)."""
    x = np.zeros((12, 1, 1, 2), dtype=np.float32)
    y = np.array([0] * 6 + [1] * 6)
    pool = Dataset(x, y, "toy/train", 2, normalized=True)
    test = Dataset(x[:8], np.array([0] * 4 + [1] * 4), "toy/test", 2, normalized=True)
    return FederatedDataset(
        pool, test, [np.arange(6), np.arange(6, 12)], [np.arange(4), np.arange(4, 8)]
    )
