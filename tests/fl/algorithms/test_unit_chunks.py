"""DP-DSGD and projected SGD sum their round in fixed units (privfl.fl.unit_sums): the run is
the same bits for any number of units per engine call (a fixed chunk or ``run.memory_budget``)
and any number of client workers (``run.threads``)."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from privfl.algorithms.builders import build_algorithm
from privfl.algorithms.cohort_stream import CohortStream
from privfl.config import config_from_dict
from privfl.fl.unit_sums import RECORD_UNIT

DSGD = {  # about 4 units of 64 records per iteration; dropout draws from each unit's stream
    "name": "units-dp-dsgd", "seed": 4,
    "data": {"dataset": "synthetic", "synthetic_examples": 600, "test_fraction": 0.2,
             "partition": "iid", "clients": 8, "train_size": 60, "test_size": 10},
    "model": {"name": "mlp", "kwargs": {"hidden": [7], "dropout": 0.25}},
    "privacy": {"noise_multiplier": 1.0, "clip_norm": 0.4, "delta": 1e-5,
                "accountants": ["wcs"]},
    "federated": {"algorithm": "dp-dsgd", "rounds": 2, "client_rate": 0.75,
                  "record_rate": 0.6, "server_lr": 0.5, "server_momentum": 0.5,
                  "composition": ["rdp"]},
    "run": {"threads": 1},
}
PROJECTED = {  # 12 users (rows of the engine) per round
    "name": "units-projected-sgd", "seed": 3,
    "data": {"dataset": "digits", "partition": "iid", "clients": 48, "train_size": 3,
             "test_size": 0},
    "model": {"name": "logreg"},
    "privacy": {"noise_multiplier": 2.0, "clip_norm": 0.5, "delta": 1e-5},
    "federated": {"algorithm": "projected-sgd", "rounds": 2, "users_per_round": 12,
                  "radius": 0.3, "lr": 0.5, "input_bound": 1.0, "evaluate": "every-round"},
    "run": {"threads": 1},
}
CASES = {
    "dp-dsgd": DSGD,
    "dp-dsgd-nonprivate": {**DSGD, "privacy": {"enabled": False}},
    "dp-dsgd-protected": {**DSGD, "protection": {"noise_std": 0.01}},
    "projected-sgd": PROJECTED,
    "projected-sgd-nonprivate": {**PROJECTED, "privacy": {"enabled": False}},
    "projected-sgd-protected": {**PROJECTED, "protection": {"noise_std": 0.01}},
}


def _run(case: str, chunk: int | None, *, threads: int = 1, budget: str | None = None):
    raw = copy.deepcopy(CASES[case])
    raw["run"] = {"threads": threads, **({"memory_budget": budget} if budget else {})}
    algo = build_algorithm(config_from_dict(raw))
    if chunk is not None:
        algo.stream = CohortStream(chunk=chunk)
    rows = [algo.run_round() for _ in range(2)]
    for row in rows:
        row.pop("seconds")
    return algo.params.clone(), rows


def _same(a, b) -> None:
    assert torch.equal(a[0], b[0])
    for x, y in zip(a[1], b[1], strict=True):
        assert x.keys() == y.keys()
        for key in x:
            if isinstance(x[key], float) and math.isnan(x[key]):
                assert math.isnan(y[key]), key
            else:
                assert x[key] == y[key], key


@pytest.mark.parametrize("case", sorted(CASES))
def test_any_units_per_call_and_any_workers_give_the_same_run(case):
    one = _run(case, 1)
    _same(one, _run(case, 3))
    _same(one, _run(case, 2, threads=2))
    _same(one, _run(case, None, threads=2, budget="1GiB"))  # every unit in one call
    _same(one, _run(case, None, budget="1MiB"))  # as many as fit 1 MiB
    if case.startswith("dp-dsgd"):  # the rounds really span several units
        assert max(r["records"] for r in one[1]) > 2 * RECORD_UNIT


def test_the_budget_sets_the_units_per_call(monkeypatch):
    import privfl.algorithms.dp_dsgd as module

    calls = []
    real = module.clipped_units

    def spy(*args, **kwargs):
        totals = real(*args, **kwargs)
        calls.append(totals.calls)
        return totals

    monkeypatch.setattr(module, "clipped_units", spy)
    _run("dp-dsgd", None, budget="1GiB")
    assert all(len(c) == 1 and c[0] > 2 for c in calls)  # every unit in one call
    calls.clear()
    _run("dp-dsgd", None, budget="1MiB")  # 64 records of 60 features: ~10 units per MiB
    assert all(len(c) > 0 for c in calls)
    calls.clear()
    _run("dp-dsgd", 2)
    assert all(max(c) == 2 for c in calls)
