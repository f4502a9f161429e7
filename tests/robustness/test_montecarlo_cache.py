"""The prediction cache (replicas.npz): round trip, digests, damage; bad inputs of the Monte Carlo
API fail with one line naming the argument; the replica runner stops cleanly on an error."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest
import torch
from test_montecarlo import config

from privfl.robustness.montecarlo import load_replicas, train_replicas
from privfl.robustness.replica_cache import FILE_NAME, config_digest, data_digest
from privfl.robustness.replica_runner import ReplicaBackend, run_replicas
from privfl.runs.experiment import build_dataset


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("mc") / "run"
    cfg = config()
    backdoor = (np.ones((4, 1, 8, 8), dtype=np.float32), np.array([0, 0, 1, 1]))
    return cfg, train_replicas(cfg, 3, out=out, eval_sets={"backdoor": backdoor}), out


def test_round_trip_and_digests(saved):
    cfg, result, out = saved
    assert result.path == out / FILE_NAME
    loaded = load_replicas(out, config=cfg, data=build_dataset(cfg))
    assert loaded.models == 3 and np.array_equal(loaded.seeds, result.seeds)
    assert sorted(loaded.predictions) == ["backdoor", "test"]
    for name in result.predictions:
        assert np.array_equal(loaded.predictions[name], result.predictions[name])
        assert np.array_equal(loaded.probabilities[name], result.probabilities[name])
        assert np.array_equal(loaded.labels[name], result.labels[name])
        assert loaded.predictions[name].dtype == np.int64
    assert loaded.privacy == result.privacy
    assert loaded.config_digest == config_digest(cfg) == result.config_digest
    assert loaded.data_digest == data_digest(build_dataset(cfg))
    assert loaded.info["config"]["seed"] == cfg.seed and loaded.info["mode"] == "together"
    np.testing.assert_allclose(loaded.accuracy("backdoor"),
                               (result.predictions["backdoor"] == [0, 0, 1, 1]).mean(1))
    # the Monte Carlo estimates a certification starts from
    np.testing.assert_allclose(loaded.mean_probabilities().sum(1), 1.0, atol=1e-6)
    votes = loaded.vote_fractions()
    assert np.allclose(votes.sum(1), 1.0) and set(np.unique(votes * 3)) <= {0.0, 1.0, 2.0, 3.0}


def test_another_configuration_or_data_is_refused(saved):
    cfg, _, out = saved
    other = config(privacy={"noise_multiplier": 1.1})
    with pytest.raises(ValueError, match="config does not match") as error:
        load_replicas(out, config=other)
    assert "\n" not in str(error.value)
    # execution settings and the free-text name do not change the digest
    assert config_digest(config(run={"threads": 2})) == config_digest(cfg)
    with pytest.raises(ValueError, match="data does not match"):
        load_replicas(out, data=build_dataset(config(data={"train_size": 19})))


def test_a_damaged_file_is_refused(saved, tmp_path):
    _, _, out = saved
    damaged = tmp_path / FILE_NAME
    with zipfile.ZipFile(out / FILE_NAME) as source, zipfile.ZipFile(damaged, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "probabilities-test.npy":
                data = data[:-4] + np.float32(0.25).tobytes()  # one probability changed
            target.writestr(item, data)
    with pytest.raises(ValueError, match="damaged: the SHA-256 of probabilities-test"):
        load_replicas(damaged)
    meta = tmp_path / "meta.npz"
    np.savez(meta, meta=np.array(json.dumps({"format": "other"})))
    with pytest.raises(ValueError, match="has format 'other'"):
        load_replicas(meta)
    with pytest.raises(ValueError, match="does not exist"):
        load_replicas(tmp_path / "nothing")
    raw = (out / FILE_NAME).read_bytes()
    start = raw.rfind(b"\x93NUMPY")  # the last array: its data follow its .npy header
    at = start + 10 + int.from_bytes(raw[start + 8 : start + 10], "little") + 1
    flipped = raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1 :]
    for name, content in (("flipped.npz", flipped), ("truncated.npz", raw[: len(raw) // 2])):
        (tmp_path / name).write_bytes(content)  # a bad CRC or a cut zip: one line, no crash
        with pytest.raises(ValueError, match="is not a readable replica file|is damaged"):
            load_replicas(tmp_path / name)


def test_an_existing_file_is_not_overwritten(saved):
    cfg, _, out = saved
    with pytest.raises(ValueError, match="already holds replicas.npz"):
        train_replicas(cfg, 1, out=out)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"models": 0}, "models = 0 is out of range: must be"),
    ({"models": 2.5}, "models = 2.5"),
    ({"layout": "sideways"}, "layout = 'sideways'"),
    ({"chunk_size": 0}, "chunk_size = 0 is out of range"),
    ({"concurrent": 0}, "concurrent = 0 is out of range"),
    ({"eval_sets": {"test": (np.zeros((1, 1, 8, 8)), np.zeros(1))}}, "name = 'test'"),
    ({"eval_sets": {"a-b": (np.zeros((1, 1, 8, 8)), np.zeros(1))}}, "name = 'a-b'"),
    ({"eval_sets": {"bad": (np.zeros((2, 1, 7, 8)), np.zeros(2))}}, r"has x \(2, 1, 7, 8\)"),
    ({"eval_sets": {"bad": (np.zeros((2, 1, 8, 8)), np.array([0, 2]))}}, r"in \[0, 1\]"),
    ({"eval_sets": {"bad": 3}}, r"eval_sets\['bad'\] = int is not allowed"),
])
def test_bad_arguments_fail_with_one_line(kwargs, message):
    kwargs = {"models": 2, **kwargs}
    with pytest.raises(ValueError, match=message) as error:
        train_replicas(config(), **kwargs)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(("cfg", "message"), [
    (lambda: config(stop={"epsilon": 1.0}), "stop.epsilon = 1.0 is not allowed"),
    (lambda: config(run={"max_rounds": 1}), "run.max_rounds = 1 is not allowed"),
    (lambda: config({"algorithm": "prifedsync", "rounds": 1, "client_rate": 0.5},
                    privacy={"noise_multiplier": None, "sigma": 1.0}),
     "federated.algorithm = 'prifedsync' is not allowed for Monte Carlo"),
    (lambda: 7, "config = int is not allowed"),
])
def test_bad_configurations_fail_with_one_line(cfg, message):
    with pytest.raises(ValueError, match=message) as error:
        train_replicas(cfg(), 2)
    assert "\n" not in str(error.value)


class _Toy:
    """A stand-in algorithm: counts rounds; replica 1 fails in its second round."""

    def __init__(self, index):
        self.index, self.round = index, 0

    def select_cohort(self):
        if self.index == 1 and self.round == 1:
            raise RuntimeError("replica 1 failed")
        return []

    def local_work(self, cohort):
        return None

    def aggregate(self, cohort, updates):
        return None


def test_runner_reraises_the_first_error_and_stops_every_thread():
    import threading

    before = threading.active_count()
    toys = [_Toy(i) for i in range(4)]
    with pytest.raises(RuntimeError, match="replica 1 failed"):
        run_replicas(toys, 3)
    assert threading.active_count() == before
    done = []
    run_replicas([_Toy(0), _Toy(2)], 2, on_done=done.append)
    assert sorted(done) == [0, 1]


def test_the_backend_trains_only_inside_the_runner():
    backend = ReplicaBackend()
    with pytest.raises(ValueError, match="only inside run_replicas"):
        backend.run_shards(None, [], torch.zeros(3), [None], False, 1)
