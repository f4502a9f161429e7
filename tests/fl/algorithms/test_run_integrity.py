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
from privfl.runs.checkpoints import digest_json
from privfl.runs.experiment import Experiment
from privfl.runs.rundir import RunDirectory

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


def _keep_one(raw, rounds, secure=False):
    """Issue 34 item 8's setting: a checkpoint every round, only the newest kept."""
    return _config(raw, privacy={**FAST, "secure": secure}, federated={"rounds": rounds},
                   run={"checkpoint_every": 1, "keep_checkpoints": 1})


def test_a_damaged_only_checkpoint_starts_the_run_again_from_round_zero(tmp_path,
                                                                       tiny_config_dict):
    """4 rounds with one checkpoint kept, the round-4 checkpoint's tensors corrupted, resumed
    with federated.rounds=6: it used to end the run ("no usable checkpoint ... start it
    again"); now none usable is none written: the run starts again from round 0 (the seeded
    rounds reproduce their logged rows), finishes identical to a clean 6-round run, and says
    which checkpoint was damaged."""
    clean = Experiment.create(_keep_one(tiny_config_dict, 6), tmp_path / "clean").run()
    Experiment.create(_keep_one(tiny_config_dict, 4), tmp_path / "cut").run()
    directory = RunDirectory(tmp_path / "cut")
    assert [r for r, _ in directory.list_checkpoints()] == [4]
    logged = directory.read_metrics()
    _corrupt_tensors(directory.checkpoint(4))
    resumed = Experiment.resume(tmp_path / "cut", ["federated.rounds=6"])
    assert resumed.resumed_from == 0 and resumed.algorithm.round == 0
    (warning,) = resumed.resume_warnings
    assert "round-000004.pt" in warning and "digest mismatch" in warning
    assert resumed.resume_notes == ["no usable checkpoint (1 damaged): the run starts again "
                                    "from round 0, and the 4 round(s) already logged run again"]
    assert not directory.checkpoint(4).exists()  # it cannot outlive the good ones by pruning
    result = resumed.run()
    assert result.summary["rounds_completed"] == 6
    assert result.summary["resumed_from_round"] == 0
    assert result.summary["warnings"] == []  # rounds 1-4 reproduced their logged rows
    assert _strip_time(result.metrics) == _strip_time(clean.metrics)  # as if never corrupted
    assert _strip_time(result.metrics[:4]) == _strip_time(logged)
    assert [r for r, _ in directory.list_checkpoints()] == [6]


def test_a_damaged_only_checkpoint_of_a_secure_run_composes_the_rounds_drawn_again(
        tmp_path, tiny_config_dict):
    """Secure mode: the 4 logged rounds were released and are drawn again from round 0, so
    each is composed once more (4 re-drawn rounds: 6 + 4 releases)."""
    Experiment.create(_keep_one(tiny_config_dict, 4, secure=True), tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    logged = directory.read_metrics()
    _corrupt_tensors(directory.checkpoint(4))
    resumed = Experiment.resume(tmp_path / "run", ["federated.rounds=6"])
    assert resumed.resumed_from == 0 and len(resumed.resume_warnings) == 1
    assert directory.read_metrics(directory.redrawn) == logged
    resumed.run()
    summary = json.loads(directory.summary.read_text())
    assert summary["rounds_released"] == 10
    assert summary["redrawn_rounds"] == [1, 2, 3, 4]


def test_a_checkpoint_of_another_configuration_still_refuses(tmp_path, tiny_config_dict):
    """Only damage starts a run again: a checkpoint written under another configuration means
    config.yaml changed, and running again would not reproduce what was logged."""
    _run(tmp_path, tiny_config_dict, "run", max_rounds=1)
    directory = RunDirectory(tmp_path / "run")
    record = json.loads(directory.checkpoint_record(1).read_text())
    record["config_sha256"] = "0" * 64
    directory.checkpoint_record(1).write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="no usable checkpoint .*different configuration.*"
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
