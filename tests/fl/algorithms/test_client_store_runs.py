"""Per-client state in a memory-mapped store (privfl.fl.client_store): PriFedSync's helper
models and optimizer states, InsDP-FedAvg's optimizer states. A mapped store gives the same bits
as an in-memory one, a run resumed from a checkpoint equals the uninterrupted run, and the store
is classified as private state in privacy.json."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from privfl.algorithms import PriFedSync
from privfl.algorithms.insdp import InsDpFedAvg
from privfl.config import config_from_dict
from privfl.fl.client_store import ClientStore
from privfl.runs.experiment import Experiment, build_algorithm
from privfl.runs.rundir import RunDirectory


def _strip(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def _same_state(a, b, names):
    for name in names:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, dict):
            assert set(x) == set(y)
            for key in x:
                assert torch.equal(x[key], y[key]), (name, key)
        else:
            assert torch.equal(x, y), name


def test_prifedsync_mapped_store_is_bit_identical(tmp_path, tiny_federation, tiny_model,
                                                  private_spec):
    runs = []
    for threshold in (0, 1 << 30):
        algorithm = PriFedSync(tiny_model, private_spec, tiny_federation, client_rate=0.7,
                               seed=4, client_store=ClientStore(4, threshold=threshold))
        rows = [algorithm.run_round() for _ in range(3)]
        runs.append((algorithm, rows))
    (mapped, rows_mapped), (memory, rows_memory) = runs
    assert mapped.store.mapped and not memory.store.mapped
    assert mapped.local.untyped_storage().data_ptr() in mapped.store._mapped
    assert _strip(rows_mapped) == _strip(rows_memory)
    assert sum(r["cohort_size"] for r in rows_mapped) >= 4  # rows were gathered and put back
    _same_state(mapped, memory, ("local", "global_model", "optimizer_state"))
    # a state_dict of the mapped store is a copy: the next round does not change it
    state = mapped.state_dict()
    before = state["local"].clone()
    mapped.run_round()
    assert torch.equal(state["local"], before) and not torch.equal(mapped.local, before)
    # saved, loaded (memory-mapped, as a resume loads it) into a fresh mapped store: same round
    path = tmp_path / "state.pt"
    torch.save(state, path)
    resumed = PriFedSync(tiny_model, private_spec, tiny_federation, client_rate=0.7, seed=99,
                         client_store=ClientStore(4, threshold=0))
    resumed.load_state_dict(torch.load(path, weights_only=True, mmap=True))
    resumed.run_round()
    _same_state(mapped, resumed, ("local", "global_model", "optimizer_state"))


def test_insdp_mapped_optimizer_states_are_bit_identical():
    raw = {"name": "store-insdp", "seed": 5,
           "data": {"dataset": "synthetic", "synthetic_examples": 240, "test_fraction": 0.25,
                    "partition": "iid", "clients": 4, "test_size": 12},
           "model": {"name": "mlp", "kwargs": {"hidden": [6]}},
           "training": {"local_steps": 2, "batch_size": 8, "optimizer": "momentum",
                        "lr": 0.05},
           "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": ["rdp"]},
           "federated": {"algorithm": "insdp-fedavg", "rounds": 3, "clients_per_round": 2},
           "run": {"threads": 1}}
    config = config_from_dict(raw)
    memory = build_algorithm(config)
    mapped = copy.copy(memory)
    mapped.store = ClientStore(4, threshold=0)
    mapped._fresh_state(memory.global_model.clone())
    memory._fresh_state(memory.global_model.clone())
    assert isinstance(memory, InsDpFedAvg) and mapped.store.mapped
    assert not memory.store.mapped
    rows = [(mapped.run_round(), memory.run_round()) for _ in range(3)]
    assert _strip([a for a, _ in rows]) == _strip([b for _, b in rows])
    assert float(memory.optimizer_state["momentum_buffer"].abs().sum()) > 0
    _same_state(mapped, memory, ("global_model", "optimizer_state"))


def _config(tiny_config_dict, **run):
    raw = copy.deepcopy(tiny_config_dict)
    raw["model"] = {"name": "mlp", "kwargs": {"hidden": [2048]}}  # 41k parameters
    raw["federated"]["rounds"] = 4
    raw["privacy"]["accountants"] = ["gdp-clt"]
    raw["run"] = {**raw["run"], **run}
    return config_from_dict(raw)


@pytest.mark.slow  # about 40 s on 2 cores: `make test-slow`
def test_resumed_run_with_mapped_store_equals_the_whole_run(tmp_path, tiny_config_dict):
    # 4 clients x 41k parameters x (model + 2 Adam rows) x 4 bytes = 2 MB > the 1 MiB budget
    whole = Experiment.create(_config(tiny_config_dict, memory_budget="1GiB"), tmp_path / "whole")
    whole_rows = whole.run().metrics
    mapped = Experiment.create(_config(tiny_config_dict, memory_budget="1MiB"), tmp_path / "mapped")
    mapped_rows = mapped.run().metrics
    assert mapped.algorithm.store.mapped and not whole.algorithm.store.mapped
    assert mapped.algorithm.store.path.parent == RunDirectory(tmp_path / "mapped").client_state
    cut = Experiment.create(_config(tiny_config_dict, memory_budget="1MiB", max_rounds=2),
                            tmp_path / "cut")
    cut.run()
    del cut  # the killed process: its store is gone, the checkpoint of round 2 remains
    resumed = Experiment.resume(tmp_path / "cut", ["run.max_rounds=null"])
    assert resumed.resumed_from == 2 and resumed.algorithm.store.mapped
    resumed_rows = resumed.run().metrics
    assert _strip(whole_rows) == _strip(mapped_rows) == _strip(resumed_rows)
    for other in (mapped, resumed):
        _same_state(whole.algorithm, other.algorithm,
                    ("local", "global_model", "optimizer_state"))
    outputs = {o["name"]: o for o in json.loads(
        (tmp_path / "mapped" / "privacy.json").read_text())["outputs"]}
    assert outputs["client-state/"]["covered"] is False
    assert "private state" in outputs["client-state/"]["reason"]
    assert "client-state/" not in {o["name"] for o in json.loads(
        (tmp_path / "whole" / "privacy.json").read_text())["outputs"]}


def test_client_state_is_private_state_beside_the_checkpoints():
    from privfl.algorithms.outputs import PRIVATE_STATE, file_outputs

    def files(**kwargs):
        return {o.name: o for o in file_outputs(
            metrics=[], accuracy_keys=[], secure=True, private_name="run.private",
            checkpoints=True, tensorboard=False, model_file=True, **kwargs)}

    alongside = files(guarantee_only=False, client_state=True)["client-state/"]
    apart = files(guarantee_only=True, client_state=True)["../run.private/client-state/"]
    for output in (alongside, apart):
        assert (output.covered, output.reason) == PRIVATE_STATE
    assert not any("client-state" in name for name in files(guarantee_only=True))
