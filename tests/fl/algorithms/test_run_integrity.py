"""A run cannot be silently corrupted: checkpoint digests, fallback, run ownership, locking.

Each case failed on the code before the digests: a checkpoint with overwritten tensors loaded
without a word (torch.load does not check the zip CRCs), another run's checkpoints were adopted,
``federated.rounds`` could be set below the rounds already run.
"""

from __future__ import annotations

import copy
import json

import pytest
import torch

from privfl.config import ConfigError, config_from_dict
from privfl.report.checkpoints import digest_json
from privfl.report.experiment import Experiment
from privfl.report.rundir import RunDirectory

FAST = {"accountants": ["gdp-clt"]}


def _config(raw, **sections):
    raw = copy.deepcopy(raw)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def _strip_time(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def _run(tmp_path, raw, name, **run):
    config = _config(raw, privacy=FAST, run={"keep_checkpoints": 5, **run})
    return Experiment.create(config, tmp_path / name).run()


def _corrupt_tensors(path):
    """Overwrite every 97th float32 of the stored tensor data with 50.0, as in the issue."""
    data = bytearray(path.read_bytes())
    start, stop = len(data) // 4, 3 * len(data) // 4  # inside the zip entries' data
    for offset in range(start - start % 4, stop, 97 * 4):
        data[offset : offset + 4] = torch.tensor([50.0]).numpy().tobytes()
    path.write_bytes(bytes(data))


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_a_corrupted_checkpoint_falls_back_to_the_previous_good_one(tmp_path, tiny_config_dict):
    full = _run(tmp_path, tiny_config_dict, "full")
    _run(tmp_path, tiny_config_dict, "cut", max_rounds=2)
    directory = RunDirectory(tmp_path / "cut")
    _corrupt_tensors(directory.checkpoint(2))
    resumed = Experiment.resume(tmp_path / "cut", ["run.max_rounds=null"])
    assert resumed.resumed_from == 1
    (warning,) = resumed.resume_warnings
    assert "round-000002.pt" in warning and "digest mismatch" in warning
    result = resumed.run()
    assert result.summary["rounds_completed"] == 3
    assert _strip_time(result.metrics) == _strip_time(full.metrics)  # as if never corrupted


def test_no_good_checkpoint_refuses_and_says_how_to_start_again(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "run", max_rounds=1)
    directory = RunDirectory(tmp_path / "run")
    _corrupt_tensors(directory.checkpoint(1))
    with pytest.raises(ConfigError, match="no usable checkpoint .*digest mismatch.*"
                       r"privfl run .*config.yaml --out NEW_DIR"):
        Experiment.resume(tmp_path / "run")


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_missing_record_and_wrong_payload_fall_back(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "run", max_rounds=3)
    directory = RunDirectory(tmp_path / "run")
    directory.checkpoint_record(3).unlink()  # a kill between the checkpoint and its record
    # round 2: valid torch, valid digests, but not this algorithm's state
    path = directory.checkpoint(2)
    payload = torch.load(path, weights_only=True)
    payload["algorithm"] = {"local": torch.zeros(3)}
    torch.save(payload, path)
    record = json.loads(directory.checkpoint_record(2).read_text())
    import hashlib

    record["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    directory.checkpoint_record(2).write_text(json.dumps(record))
    resumed = Experiment.resume(tmp_path / "run", ["federated.rounds=4"])
    assert resumed.resumed_from == 1
    first, second = resumed.resume_warnings
    assert "round-000003.pt: no digest record" in first
    assert "round-000002.pt: its contents do not fit" in second
    assert resumed.run().summary["rounds_completed"] == 4


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_another_runs_checkpoint_is_not_adopted(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "a", max_rounds=1)
    _run(tmp_path, tiny_config_dict, "b", max_rounds=2)
    a, b = RunDirectory(tmp_path / "a"), RunDirectory(tmp_path / "b")
    for src, dst in ((b.checkpoint(2), a.checkpoint(2)),
                     (b.checkpoint_record(2), a.checkpoint_record(2))):
        dst.write_bytes(src.read_bytes())
    resumed = Experiment.resume(tmp_path / "a")
    assert resumed.resumed_from == 1
    assert "round-000002.pt: it belongs to another run" in resumed.resume_warnings[0]


def test_out_with_another_runs_files_is_refused(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "a", max_rounds=1)
    (tmp_path / "a" / "config.yaml").unlink()
    with pytest.raises(ValueError, match="holds files of another run .*checkpoints"):
        _run(tmp_path, tiny_config_dict, "a")
    assert not (tmp_path / "a" / "config.yaml").exists()


def test_rounds_below_the_completed_ones_are_refused(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "run", max_rounds=2)
    with pytest.raises(ConfigError, match="federated.rounds = 1 is out of range: .*already "
                       "completed 2 rounds"):
        Experiment.resume(tmp_path / "run", ["federated.rounds=1"])
    saved = (tmp_path / "run" / "config.yaml").read_text()
    assert "rounds: 3" in saved  # config.yaml untouched


def test_temporary_files_of_a_killed_write_are_removed(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "run", max_rounds=1)
    directory = RunDirectory(tmp_path / "run")
    leftovers = [directory.checkpoints / ".round-000002.pt.tmp", tmp_path / "run" / ".x.tmp"]
    for path in leftovers:
        path.write_bytes(b"torn")
    resumed = Experiment.resume(tmp_path / "run")
    assert not any(path.exists() for path in leftovers)
    assert any("temporary file" in note for note in resumed.resume_notes)
    resumed.release()


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_two_processes_cannot_run_one_directory(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "run", max_rounds=1)
    first = Experiment.resume(tmp_path / "run")
    with pytest.raises(ValueError, match="in use by another privfl process"):
        Experiment.resume(tmp_path / "run")
    first.run()  # releases the lock at the end
    Experiment.resume(tmp_path / "run").release()


def test_a_directory_without_run_json_is_not_trusted(tmp_path, tiny_config_dict):
    _run(tmp_path, tiny_config_dict, "run", max_rounds=1)
    (tmp_path / "run" / "run.json").unlink()
    with pytest.raises(ValueError, match="run.json is missing or unreadable"):
        Experiment.resume(tmp_path / "run")


def test_digest_json_is_canonical():
    assert digest_json({"b": 1, "a": [1.5, float("inf")]}) == digest_json(
        {"a": [1.5, float("inf")], "b": 1})
    assert digest_json({"a": 1}) != digest_json({"a": 2})
