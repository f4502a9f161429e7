"""Short runs of the sharded algorithms on a given backend, and their comparison."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import torch

from privfl.backends import use_backend
from privfl.config import config_from_dict
from privfl.runs.experiment import Experiment

#: PriFedSync, 6 clients, a small MLP, local DP-SGD, Poisson cohorts (p = 0.8).
PRIFEDSYNC = {
    "name": "backend-prifedsync", "seed": 7,
    "data": {"dataset": "synthetic", "synthetic_examples": 300, "test_fraction": 0.2,
             "partition": "iid", "clients": 6, "test_size": 8},
    "model": {"name": "mlp", "kwargs": {"hidden": [8]}},
    "training": {"local_steps": 3, "batch_size": 8, "lr": 0.01},
    "privacy": {"sigma": 1.0, "delta": 1e-5, "accountants": ["gdp-clt", "rdp"]},
    "federated": {"rounds": 3, "client_rate": 0.8},
    "run": {"threads": 1},
}
#: client-level DP-FedAvg, 10 clients, Poisson q = 0.6 (server-side clipping and noise).
DP_FEDAVG = {
    "name": "backend-dp-fedavg", "seed": 5,
    "data": {"dataset": "synthetic", "synthetic_examples": 400, "test_fraction": 0.25,
             "partition": "iid", "clients": 10, "test_size": 8},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 6, "optimizer": "sgd", "lr": 0.1},
    "privacy": {"noise_multiplier": 0.8, "clip_norm": 0.5, "delta": 1e-3,
                "accountants": ["rdp"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_rate": 0.6},
    "run": {"threads": 1},
}
#: InsDP-FedAvg and InsDP-FedSGD on PriFedSync's data, 4 clients a round.
INSDP = {**PRIFEDSYNC, "name": "backend-insdp",
         "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-5,
                     "accountants": ["rdp"]},
         "federated": {"algorithm": "insdp-fedavg", "rounds": 2, "clients_per_round": 4}}
INSDP_SGD = {**INSDP, "name": "backend-insdp-fedsgd",
             "training": {**PRIFEDSYNC["training"], "optimizer": "sgd", "local_steps": 1},
             "federated": {"algorithm": "insdp-fedsgd", "rounds": 2, "clients_per_round": 4}}


def config(raw: dict, **sections):
    raw = copy.deepcopy(raw)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def run(cfg, out: Path, backend=None) -> Experiment:
    """Create and run ``cfg`` in ``out`` (on ``backend`` if given); the finished experiment."""
    experiment = Experiment.create(cfg, out)
    if backend is None:
        experiment.run()
    else:
        with use_backend(backend):
            experiment.run()
    return experiment


def outcome(experiment: Experiment) -> dict:
    """What must not depend on the backend: the algorithm's state (models, optimizer states,
    generators), every round's metrics but the wall time, and privacy.json."""
    metrics = [{k: v for k, v in m.items() if k != "seconds"} for m in experiment.metrics]
    privacy = json.loads((experiment.dir.path / "privacy.json").read_text())
    return {"state": experiment.algorithm.state_dict(), "metrics": metrics, "privacy": privacy}


def assert_same(a: dict, b: dict) -> None:
    """Bit-for-bit equality of two :func:`outcome` results."""
    assert a["state"].keys() == b["state"].keys()
    for key, value in a["state"].items():
        other = b["state"][key]
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, other), key
        elif isinstance(value, dict):
            assert _plain(value) == _plain(other), key
        else:
            assert value == other, key
    assert json.dumps(a["metrics"], sort_keys=True, default=str) == json.dumps(
        b["metrics"], sort_keys=True, default=str)
    assert a["privacy"] == b["privacy"]
    assert a["privacy"]["results"], "the runs must be private (non-empty privacy report)"


def _plain(value):
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
