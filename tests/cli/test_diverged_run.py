"""A run whose training diverges stops at that round (issue 35, item 2): exit status 3 and one
line, no model.pt, the last finite checkpoint kept, the guarantee of the planned rounds (a
data-dependent stop), and a resume with a lower step size where the accounting does not read it."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
import yaml
from typer.testing import CliRunner

from privfl.algorithms.base import tightest_bound
from privfl.algorithms.builders import privacy_plan
from privfl.cli.common import EXIT_DIVERGED
from privfl.cli.main import app
from privfl.config import ConfigError, config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment
from privfl.runs.run_resume import check_resumable
from privfl.runs.run_stops import DATA_DEPENDENT_STOPS, first_nonfinite

runner = CliRunner()

TINY = {
    "name": "diverge-tiny",
    "seed": 11,
    "data": {"dataset": "synthetic", "synthetic_examples": 200, "test_fraction": 0.25,
             "partition": "iid", "clients": 3, "test_size": 10},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 10, "lr": 0.05, "optimizer": "sgd"},
    "privacy": {"sigma": 0.9, "delta": 1e-5, "accountants": ["rdp"]},
    "federated": {"rounds": 4, "client_rate": 1.0},
    "run": {"threads": 1},
}


def _run(*args):
    return runner.invoke(app, ["run", "--no-progress", *args])


def _finite(path):
    state = torch.load(path, weights_only=True)["algorithm"]
    return all(bool(torch.isfinite(v).all()) for v in state.values()
               if isinstance(v, torch.Tensor) and v.is_floating_point())


def test_a_diverged_run_stops_with_its_exit_status_and_resumes_with_a_lower_lr(tmp_path):
    # secure: the diverged round, released, is re-drawn on resume (a seeded one is refused:
    # test_a_seeded_diverged_round_cannot_run_again_with_another_step_size)
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "privacy": {**TINY["privacy"], "secure": True}}))
    out = tmp_path / "run"
    assert _run(str(config), "--out", str(out), "--set", "run.max_rounds=2").exit_code == 0
    # the step size is not read by the accountant: a resume may raise it; round 3 diverges
    result = _run("--resume", str(out), "--set", "training.lr=3e38", "--set",
                  "run.max_rounds=null")
    assert result.exit_code == EXIT_DIVERGED == 3, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("privfl:")]
    assert len(lines) == 1 and lines[0].startswith("privfl: round 3: the training loss is "), \
        result.stderr
    assert "training.lr = 3e+38" in lines[0] and "lower it" in lines[0]
    assert (f"the last finite checkpoint is round 2: privfl run --resume {out} --set "
            "training.lr=LOWER") in lines[0]
    assert not (out / "model.pt").exists()
    assert [p.name for p in sorted((out / "checkpoints").glob("*.pt"))] == ["round-000002.pt"]
    assert _finite(out / "checkpoints" / "round-000002.pt")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["round"] for row in rows] == [1, 2, 3]  # the diverged round was released
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "diverged" and summary["finished"]
    assert summary["stop_detail"] == lines[0].removeprefix("privfl: ")
    assert summary["rounds_completed"] == 3 and summary["rounds_accounted"] == 4
    planned = tightest_bound(privacy_plan(config_from_dict(TINY)).results(4))
    assert summary["headline"]["epsilon"] == pytest.approx(planned.epsilon, rel=1e-12)
    assert json.loads((out / "privacy.json").read_text())["rounds_accounted"] == 4
    assert "model.pt" not in {o["name"] for o in summary["outputs"]}
    assert "a non-finite result (it diverged)" in (out / "report.md").read_text()
    assert check_run_privacy(out).ok
    # resume from the last finite checkpoint with a lower step size: round 3 runs again
    result = _run("--resume", str(out), "--set", "training.lr=0.05")
    assert result.exit_code == 0, result.output
    assert "training.lr 3e+38 -> 0.05" in result.output and "bit for bit" in result.output
    assert "differs from the row logged" not in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "rounds" and summary["rounds_completed"] == 4
    assert summary["redrawn_rounds"] == [3] and summary["rounds_released"] == 5
    assert (out / "model.pt").exists()
    assert check_run_privacy(out).ok


def test_a_seeded_diverged_round_cannot_run_again_with_another_step_size(tmp_path):
    """Issue 44, item 3: round 3 was released; run again on the same noise draws with another
    step size it would be a second release on one noise draw, which no composition covers."""
    raw = copy.deepcopy(TINY)
    raw["run"]["max_rounds"] = 2
    Experiment.create(config_from_dict(raw), tmp_path / "run").run()
    diverged = Experiment.resume(tmp_path / "run", ["training.lr=3e38",
                                                    "run.max_rounds=null"]).run()
    assert diverged.stop_reason == "diverged"
    detail = diverged.summary["stop_detail"]
    assert "this seeded run released round 3" in detail and "--out NEW_DIR" in detail
    assert "--resume" not in detail
    with pytest.raises(ConfigError, match=r"rows of rounds 3\.\.3 were released after the "
                       r"checkpoint of round 2 .*same noise draws with another step size"):
        Experiment.resume(tmp_path / "run", ["training.lr=0.05"])
    assert check_run_privacy(tmp_path / "run").ok  # nothing changed


def test_a_non_finite_model_with_a_finite_loss_stops_the_run(tmp_path, monkeypatch):
    experiment = Experiment.create(config_from_dict(copy.deepcopy(TINY)), tmp_path / "run")
    algorithm = experiment.algorithm
    honest = algorithm.global_params

    def poisoned():  # the update of round 2 is not finite; the loss is
        params = honest()
        if algorithm.round >= 2:
            name = next(iter(params))
            params[name] = torch.full_like(params[name], math.inf)
        return params

    monkeypatch.setattr(algorithm, "global_params", poisoned)
    result = experiment.run()
    assert result.stop_reason == "diverged" and "diverged" in DATA_DEPENDENT_STOPS
    assert math.isfinite(result.metrics[-1]["train_loss"])
    assert result.summary["stop_detail"].startswith(
        "round 2: the global model's parameters are not finite (inf in ")
    assert result.summary["rounds_accounted"] == 4
    assert not (tmp_path / "run" / "model.pt").exists()
    assert [p.name for p in sorted((tmp_path / "run" / "checkpoints").glob("*.pt"))] == [
        "round-000001.pt"]
    assert check_run_privacy(tmp_path / "run").ok  # reads the stop from summary.json


def test_first_nonfinite_reads_the_loss_of_rounds_with_clients_then_the_model():
    assert first_nonfinite({"train_loss": "nan", "cohort_size": 2}) == "the training loss is nan"
    assert first_nonfinite({"train_loss": math.nan, "cohort_size": 0}) is None
    assert first_nonfinite({"train_loss": 0.5}, {"w": torch.tensor([0.0, math.nan])}) == (
        "the global model's parameters are not finite (NaN in 'w')")
    with pytest.raises(ValueError, match="row = list"):
        first_nonfinite([])


def test_a_step_size_the_accounting_reads_cannot_change_on_resume(tmp_path):
    # projected SGD's contraction bound (Asoodeh et al. 2021) reads eta
    raw = {"name": "tiny-projected-sgd", "seed": 3,
           "data": {"dataset": "digits", "partition": "iid", "clients": 40, "train_size": 2,
                    "test_size": 0},
           "model": {"name": "logreg"},
           "privacy": {"noise_multiplier": 2.0, "clip_norm": 2.0, "delta": 1e-5},
           "federated": {"algorithm": "projected-sgd", "rounds": 3, "users_per_round": 8,
                         "radius": 0.05, "lr": 0.5, "input_bound": 1.0, "convex": True,
                         "smoothness": 1.0, "lipschitz": 2.0},
           "run": {"threads": 1, "max_rounds": 1}}
    Experiment.create(config_from_dict(raw), tmp_path / "run").run()
    with pytest.raises(ConfigError, match=r"federated.lr = 0.25 \(was 0.5\) cannot change"):
        Experiment.resume(tmp_path / "run", ["federated.lr=0.25"])
    experiment = Experiment.resume(tmp_path / "run", [])  # the lock was given back
    experiment.release()


def test_only_step_sizes_join_the_keys_a_resume_may_change():
    assert check_resumable(["training.lr=0.1", "federated.server_lr=0.5"])
    with pytest.raises(ConfigError, match="--set training.batch_size is not allowed"):
        check_resumable(["training.batch_size=4"])


def test_a_secure_diverged_round_is_composed_again_when_the_run_resumes(tmp_path):
    raw = copy.deepcopy(TINY)
    raw["privacy"]["secure"] = True
    raw["run"]["max_rounds"] = 2
    Experiment.create(config_from_dict(raw), tmp_path / "run").run()
    diverged = Experiment.resume(tmp_path / "run", ["training.lr=3e38",
                                                    "run.max_rounds=null"]).run()
    assert diverged.stop_reason == "diverged" and diverged.summary["rounds_completed"] == 3
    assert check_run_privacy(tmp_path / "run").ok
    result = Experiment.resume(tmp_path / "run", ["training.lr=0.05"]).run()
    assert result.stop_reason == "rounds"
    redrawn = (tmp_path / "run" / "redrawn.jsonl").read_text().splitlines()
    assert [json.loads(line)["round"] for line in redrawn] == [3]  # released, drawn again
    assert result.summary["rounds_released"] == 5
    assert check_run_privacy(tmp_path / "run").ok
