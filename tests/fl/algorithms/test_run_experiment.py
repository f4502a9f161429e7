"""Experiments from configs: run directory, checkpoints, exact resume, stops."""

from __future__ import annotations

import copy
import json

import pytest
import torch
import yaml

from privfl.config import ConfigError, config_from_dict
from privfl.runs.experiment import Experiment, build_algorithm
from privfl.runs.rundir import RunDirectory


def _config(raw, **sections):
    raw = copy.deepcopy(raw)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


FAST = {"accountants": ["gdp-clt"]}  # skip the PLD accountant where a test does not need it


def _final_state(run_dir):
    directory = RunDirectory(run_dir)
    _, path = directory.list_checkpoints()[-1]
    return torch.load(path, weights_only=True)


def _strip_time(rows):
    return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]


def test_resume_equals_uninterrupted_run(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict, privacy=FAST)
    Experiment.create(config, tmp_path / "full").run()
    # interrupted after 2 of 3 rounds by run.max_rounds, then resumed
    interrupted = _config(tiny_config_dict, privacy=FAST, run={"max_rounds": 2})
    first = Experiment.create(interrupted, tmp_path / "split").run()
    assert first.stop_reason == "max_rounds" and not first.summary["finished"]
    assert first.summary["rounds_completed"] == 2
    resumed = Experiment.resume(tmp_path / "split", ["run.max_rounds=null"])
    assert resumed.resumed_from == 2
    result = resumed.run()
    assert result.stop_reason == "rounds" and result.summary["rounds_completed"] == 3

    full, split = _final_state(tmp_path / "full"), _final_state(tmp_path / "split")
    for key in ("local", "global_model", "personal_accuracy", "global_accuracy"):
        assert torch.equal(full["algorithm"][key], split["algorithm"][key]), key
    for key, value in full["algorithm"]["optimizer_state"].items():
        assert torch.equal(value, split["algorithm"]["optimizer_state"][key]), key
    rows_full = RunDirectory(tmp_path / "full").read_metrics()
    rows_split = RunDirectory(tmp_path / "split").read_metrics()
    assert _strip_time(rows_full) == _strip_time(rows_split)


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_resume_after_losing_the_last_checkpoint(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict, privacy=FAST, run={"keep_checkpoints": 3})
    Experiment.create(config, tmp_path / "full").run()
    Experiment.create(config, tmp_path / "crash").run()
    directory = RunDirectory(tmp_path / "crash")
    assert [r for r, _ in directory.list_checkpoints()] == [1, 2, 3]
    directory.checkpoint(3).unlink()  # the process died while round 3 was being saved
    directory.checkpoint(2).write_bytes(b"torn file")  # and round 2's file is corrupt too
    resumed = Experiment.resume(tmp_path / "crash")
    assert resumed.resumed_from == 1
    assert len(directory.read_metrics()) == 1  # metrics truncated to the checkpoint
    resumed.run()
    full, crash = _final_state(tmp_path / "full"), _final_state(tmp_path / "crash")
    assert torch.equal(full["algorithm"]["local"], crash["algorithm"]["local"])
    assert torch.equal(full["algorithm"]["global_model"], crash["algorithm"]["global_model"])


def test_run_directory_contents(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict)
    result = Experiment.create(config, tmp_path / "run").run()
    run = tmp_path / "run"
    for name in ("config.yaml", "metrics.jsonl", "privacy.json", "summary.json", "report.md",
                 "accuracy.png", "privacy.png"):
        assert (run / name).is_file(), name
    for name in ("accuracy.png", "privacy.png"):
        assert (run / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the resolved config reloads to the same configuration
    assert config_from_dict(yaml.safe_load((run / "config.yaml").read_text())) == config
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2, 3]
    for row in rows:
        for key in ("personalised_accuracy", "global_accuracy", "mu", "privacy",
                    "cohort_size", "privacy_methods"):
            assert key in row
    # the per-round rows carry the CLT estimate; the last (planned) round every accountant,
    # with the PLD bound (privfl.algorithms.cadence); the rows' epsilon series comes from the
    # accountants every row carries: none is a bound here, so no row has one (the PLD bound
    # is the headline's)
    assert [r["privacy_methods"] for r in rows] == ["per-round", "per-round", "all"]
    assert ["epsilon" in r for r in rows] == [False, False, False]
    assert {e["method"] for e in rows[2]["privacy"]} == {"gdp-clt", "pld"}
    assert {e["method"] for e in rows[0]["privacy"]} == {"gdp-clt"}
    privacy = json.loads((run / "privacy.json").read_text())
    assert privacy["command"] == "run" and privacy["rounds"] == 3
    kinds = {(r["method"], r["scope"]): r["kind"] for r in privacy["results"]}
    assert kinds[("pld", "weak")] == "bound" and kinds[("gdp-clt", "weak")] == "estimate"
    for entry in privacy["results"]:
        assert entry["unit"] == "record" and entry["neighbouring"] == "replace-one"
        assert entry["delta"] == 1e-5 and "sampling" in entry and "release" in entry
    assert rows[-1]["mu"] == next(
        r["mu"] for r in privacy["results"] if r["method"] == "gdp-clt" and r["scope"] == "weak"
    )
    report = (run / "report.md").read_text()
    assert "bound" in report and "estimate" in report and "replace-one" in report
    assert result.summary["privacy"] == privacy["results"]
    assert sorted(r for r, _ in RunDirectory(run).list_checkpoints()) == [3]  # keep 1 (default)


def test_existing_run_directory_is_refused(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict, privacy=FAST, federated={"rounds": 1})
    Experiment.create(config, tmp_path / "run").run()
    with pytest.raises(ValueError, match="already holds a run") as refused:
        Experiment.create(config, tmp_path / "run")
    # the Python API's way on, not the command line's options
    assert f"continue it with Experiment.resume({str(tmp_path / 'run')!r}) or choose another " \
        "directory" in str(refused.value)
    assert "--" not in str(refused.value)


def test_budget_stops_before_the_round_that_would_exceed_it(tmp_path, tiny_config_dict):
    probe = build_algorithm(_config(tiny_config_dict))
    eps = [r.epsilon for k in (1, 2, 3) for r in probe.privacy(k)
           if r.method == "pld" and r.extras["scope"] == "weak"]
    budget = (eps[1] + eps[2]) / 2  # rounds 1-2 fit, round 3 would not
    config = _config(tiny_config_dict, stop={"epsilon": budget})
    result = Experiment.create(config, tmp_path / "run").run()
    assert result.stop_reason == "budget"
    assert result.summary["rounds_completed"] == 2
    assert "round 3 would spend epsilon" in result.summary["stop_detail"]
    spent = [r for r in result.privacy if r.method == "pld" and r.extras["scope"] == "weak"]
    assert spent[0].epsilon <= budget


def test_mu_budget_stops_before_the_round_that_would_exceed_it(tmp_path, tiny_config_dict):
    """stop.mu reads the largest mu of the primary scope (weak): rounds 1-2 fit, round 3 would
    exceed it by a few per cent, and the run stops after round 2."""
    probe = build_algorithm(_config(tiny_config_dict, privacy=FAST))
    mus = [r.extras["mu"] for k in (1, 2, 3) for r in probe.privacy(k)
           if r.extras["scope"] == "weak"]
    budget = mus[2] / 1.05
    assert mus[1] < budget < mus[2]
    config = _config(tiny_config_dict, privacy=FAST, stop={"mu": budget})
    result = Experiment.create(config, tmp_path / "run").run()
    assert result.stop_reason == "budget" and result.summary["rounds_completed"] == 2
    assert "round 3 would reach mu" in result.summary["stop_detail"]


def test_mu_budget_and_target_accuracy(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict, privacy=FAST, stop={"mu": 1e-3})
    result = Experiment.create(config, tmp_path / "mu").run()
    assert result.stop_reason == "budget" and result.summary["rounds_completed"] == 0
    assert all(r.epsilon == 0 for r in result.privacy)
    config = _config(tiny_config_dict, privacy=FAST, stop={"target_accuracy": 1e-9})
    result = Experiment.create(config, tmp_path / "target").run()
    assert result.stop_reason == "target" and result.summary["rounds_to_target"] == 1


def test_resume_refuses_changes_that_alter_the_result(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict, privacy=FAST, run={"max_rounds": 1})
    Experiment.create(config, tmp_path / "run").run()
    with pytest.raises(ConfigError,
                       match=r"--set training.batch_size is not allowed with --resume"):
        Experiment.resume(tmp_path / "run", ["training.batch_size=4"])
    # extending the run is allowed
    resumed = Experiment.resume(tmp_path / "run", ["federated.rounds=4", "run.max_rounds=null"])
    assert resumed.run().summary["rounds_completed"] == 4


def test_resume_refuses_an_edited_config(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict, privacy=FAST, run={"max_rounds": 1})
    Experiment.create(config, tmp_path / "run").run()
    path = tmp_path / "run" / "config.yaml"
    data = yaml.safe_load(path.read_text())
    data["training"]["batch_size"] = 4  # a step size is checked against the plan instead
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="different configuration"):
        Experiment.resume(tmp_path / "run")


def test_non_private_baseline_run(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict, privacy={"enabled": False})
    result = Experiment.create(config, tmp_path / "run").run()
    assert result.privacy == [] and result.summary["private"] is False
    assert "NONE" in result.card["privacy"]
    assert (tmp_path / "run" / "privacy.png").is_file()
