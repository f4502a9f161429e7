"""A kill after a round is logged but before its checkpoint (Zheng et al. 2021's runs, any
algorithm): the run resumes from the last checkpoint, or from round 0 when none was written.

A seeded run reproduces the logged rows and verifies them before they are shown; a secure run
draws them again, and every round that produced output is composed by the accountant: in the
metrics, privacy.json, summary.json, report.md and ``check-privacy``. Before this, a kill
before the first checkpoint lost the run ("no usable checkpoint"), and a re-drawn round was
counted once.
"""

from __future__ import annotations

import copy
import json

import pytest

from privfl.config import ConfigError, config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment, privacy_plan
from privfl.runs.ledger import Ledger
from privfl.runs.rundir import RunDirectory


def _config(raw, secure=False, **run):
    raw = copy.deepcopy(raw)
    raw["privacy"] = {**raw["privacy"], "secure": secure, "accountants": ["gdp-clt"]}
    # a kill before round R's checkpoint leaves round R-1's (pruned only after R's is written):
    # keeping several lets kill_before_checkpoints simulate kills at any earlier round
    raw["run"] = {"keep_checkpoints": 5, **raw.get("run", {}), **run}
    return config_from_dict(raw)


def _strip_time(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


@pytest.mark.parametrize("every", [1, 5])
@pytest.mark.slow  # long (5-15 s on 2 cores): `make test-slow`
def test_a_seeded_run_killed_before_its_first_checkpoint_resumes_from_round_zero(
        tmp_path, tiny_config_dict, every, kill_before_checkpoints):
    full = Experiment.create(_config(tiny_config_dict), tmp_path / "full").run()
    Experiment.create(_config(tiny_config_dict, checkpoint_every=every, max_rounds=2),
                      tmp_path / "cut").run()
    directory = RunDirectory(tmp_path / "cut")
    kill_before_checkpoints(directory, 0)  # rounds 1-2 logged, no checkpoint written
    resumed = Experiment.resume(tmp_path / "cut", ["run.max_rounds=null"])
    assert resumed.resumed_from == 0 and resumed.resume_notes == []
    result = resumed.run()
    assert result.summary["rounds_completed"] == 3 and result.summary["warnings"] == []
    assert result.summary["rounds_released"] == 3 and result.summary["redrawn_rounds"] == []
    assert _strip_time(result.metrics) == _strip_time(full.metrics)


@pytest.mark.slow  # long (5-15 s on 2 cores): `make test-slow`
def test_a_seeded_round_that_does_not_reproduce_is_not_released(tmp_path, tiny_config_dict,
                                                               kill_before_checkpoints,
                                                               monkeypatch):
    """Issue 44, item 3: the re-run row is compared with the released one (the release
    ledger's) before it is shown; a difference would be a second release on one noise draw."""
    Experiment.create(_config(tiny_config_dict, max_rounds=2), tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    logged_loss = directory.read_metrics()[1]["train_loss"]
    kill_before_checkpoints(directory, 1)
    resumed = Experiment.resume(tmp_path / "run")
    honest = resumed.algorithm.run_round

    def elsewhere():  # as if another machine had run it
        row = honest()
        row["train_loss"] += 1.0
        return row

    monkeypatch.setattr(resumed.algorithm, "run_round", elsewhere)
    with pytest.raises(ConfigError, match=r"round 2 ran again after the resume with the same "
                       r"seed but differs from the row released before the interruption in "
                       r"train_loss \(train_loss: released "):
        resumed.run()
    assert [row["round"] for row in directory.read_metrics()] == [1]  # not shown
    assert logged_loss == Ledger(tmp_path / "run").latest_rows()[2].payload["row"]["train_loss"]


@pytest.mark.parametrize("checkpoint", [0, 2])
def test_secure_rounds_drawn_again_are_composed_everywhere(tmp_path, tiny_config_dict,
                                                          checkpoint, kill_before_checkpoints):
    config = _config(tiny_config_dict, secure=True, max_rounds=3)
    raw = config.model_dump(mode="json")
    raw["federated"]["rounds"] = 5
    config = config_from_dict(raw)
    Experiment.create(config, tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    first = directory.read_metrics()
    kill_before_checkpoints(directory, checkpoint)  # rounds checkpoint+1..3 lost, logged
    resumed = Experiment.resume(tmp_path / "run", ["run.max_rounds=null"])
    lost = 3 - checkpoint
    assert resumed.resumed_from == checkpoint
    (note,) = resumed.resume_notes
    assert note.startswith(f"rounds {checkpoint + 1}..3 were logged after the last checkpoint")
    assert directory.read_metrics(directory.redrawn) == first[checkpoint:]
    result = resumed.run()

    plan = privacy_plan(config)
    composed = plan.results(5 + lost)
    assert composed[0].epsilon > plan.results(5)[0].epsilon  # the extra releases cost
    privacy = json.loads(directory.privacy.read_text())
    summary = json.loads(directory.summary.read_text())
    for saved in (privacy, summary):
        assert saved["rounds_released"] == 5 + lost
        assert saved["redrawn_rounds"] == list(range(checkpoint + 1, 4))
    assert privacy["rounds"] == 5
    assert [r["epsilon"] for r in privacy["results"]] == [r.epsilon for r in composed]
    assert [r["steps"] for r in privacy["results"]] == [r.steps for r in composed]
    assert result.privacy[0].epsilon == composed[0].epsilon
    last = result.metrics[-1]
    assert last["released_rounds"] == 5 + lost
    assert last["privacy"][0]["epsilon"] == composed[0].epsilon
    assert f"{5 + lost}: 5 rounds + {lost} released twice" in result.card["released rounds"]
    report = directory.report.read_text()
    assert f"| released rounds | {5 + lost}: 5 rounds + {lost} released twice" in report

    check = check_run_privacy(tmp_path / "run")
    assert check.ok, check.to_dict()
    directory.redrawn.unlink()  # hiding the re-drawn rounds is caught
    tampered = check_run_privacy(tmp_path / "run")
    assert not tampered.ok and not tampered.released["ok"]
    assert "rounds_released" in tampered.released["problems"][0]


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_a_redrawn_round_lost_again_counts_each_draw(tmp_path, tiny_config_dict,
                                                    kill_before_checkpoints):
    """Round 3 drawn three times (two kills before its checkpoint): two extra releases."""
    Experiment.create(_config(tiny_config_dict, secure=True), tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    kill_before_checkpoints(directory, 2)
    Experiment.resume(tmp_path / "run").run()
    kill_before_checkpoints(directory, 2)
    again = Experiment.resume(tmp_path / "run")
    assert len(again.redrawn) == 2 and again.algorithm.redrawn == 2
    assert again.run().summary["rounds_released"] == 5
    assert check_run_privacy(tmp_path / "run").ok


def test_a_digest_record_left_by_a_kill_while_pruning_is_removed(tmp_path, tiny_config_dict):
    Experiment.create(_config(tiny_config_dict, max_rounds=2), tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    assert [r for r, _ in directory.list_checkpoints()] == [1, 2]
    directory.checkpoint(1).unlink()  # killed between the checkpoint and its record
    resumed = Experiment.resume(tmp_path / "run", ["run.max_rounds=null"])
    assert not directory.checkpoint_record(1).exists()
    assert resumed.resume_notes == [
        "removed 1 file(s) left by an interrupted write (temporary files, digest records "
        "without their checkpoint): round-000001.json"]
    resumed.run()
    names = sorted(p.name for p in directory.checkpoints.iterdir())
    assert names == ["round-000002.json", "round-000002.pt", "round-000003.json",
                     "round-000003.pt"]
    (directory.checkpoints / "round-000001.json").write_text("{}")  # also when pruning
    directory.prune_checkpoints(2)
    assert not (directory.checkpoints / "round-000001.json").exists()
