"""Outputs that were marked covered but are not (issue 34, item 5): median clipping thresholds,
a paused last-iterate run's model, guarantee-only's private directory and wall time, and the
convex contraction with a masked step."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import torch

from privfl.algorithms.outputs import private_dir_of
from privfl.config import ConfigError, config_from_dict, load_config
from privfl.runs.experiment import Experiment

REPO = Path(__file__).resolve().parents[3]
FIXED_TIME = 946_684_800  # 2000-01-01 UTC (rundir.FIXED_TIME)


def _outputs(run_dir):
    saved = json.loads((Path(run_dir) / "privacy.json").read_text())
    return {o["name"]: o for o in saved["outputs"]}


def test_median_clipping_thresholds_are_outside_the_guarantee(tmp_path):
    overrides = ["federated.rounds=2", "federated.adaptive_clipping=false",
                 "privacy.accountants=[rdp]"]
    config = load_config(REPO / "configs" / "demo-dp-fedavg.yaml",
                         [*overrides, "federated.clipping=flat-median"])
    result = Experiment.create(config, tmp_path / "median").run()
    # the logged threshold is min(S, the cohort's median update norm): data, not S
    assert [row["clip_norm"] < 1.0 for row in result.metrics] == [True, True]
    outputs = _outputs(tmp_path / "median")
    for key in ("clip_norm", "noise_std"):
        assert outputs[key]["covered"] is False, key
        assert "exact median of the cohort's unnoised update norms" in outputs[key]["reason"]
    flat = load_config(REPO / "configs" / "demo-dp-fedavg.yaml",
                       [*overrides, "federated.clipping=flat"])
    Experiment.create(flat, tmp_path / "flat").run()
    assert _outputs(tmp_path / "flat")["clip_norm"]["covered"] is True


PROJECTED = {
    "name": "tiny-projected-sgd", "seed": 3,
    "data": {"dataset": "digits", "partition": "iid", "clients": 40, "train_size": 2,
             "test_size": 0},
    "model": {"name": "logreg"},
    "privacy": {"noise_multiplier": 2.0, "clip_norm": 2.0, "delta": 1e-5},
    "federated": {"algorithm": "projected-sgd", "rounds": 4, "users_per_round": 8,
                  "radius": 0.3, "lr": 0.5, "input_bound": 1.0, "release": "random-stop"},
    "run": {"threads": 1},
}


def _projected(**sections):
    raw = copy.deepcopy(PROJECTED)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def test_a_paused_last_iterate_run_releases_no_model(tmp_path):
    Experiment.create(_projected(), tmp_path / "full").run()
    paused = Experiment.create(_projected(run={"max_rounds": 2}), tmp_path / "split").run()
    assert paused.stop_reason == "max_rounds"
    assert not (tmp_path / "split" / "model.pt").exists()  # W_2 is an intermediate iterate
    assert "model.pt" not in _outputs(tmp_path / "split")
    Experiment.resume(tmp_path / "split", ["run.max_rounds=null"]).run()
    assert _outputs(tmp_path / "split")["model.pt"]["covered"] is True
    full = torch.load(tmp_path / "full" / "model.pt", weights_only=True)
    split = torch.load(tmp_path / "split" / "model.pt", weights_only=True)
    assert full.keys() == split.keys()
    assert all(torch.equal(full[k], split[k]) for k in full)


def test_convex_contraction_refuses_a_masked_step():
    convex = {"convex": True, "smoothness": 1.0, "lipschitz": 2.0, "release": "last"}
    assert _projected(federated=convex).federated.convex is True
    with pytest.raises((ConfigError, ValueError),
                       match=r"federated.convex = true is not allowed with "
                             r"protection.mask_keep_rate = 0.9: .*not proven for a masked step"):
        _projected(federated=convex, protection={"mask_keep_rate": 0.9})
    # without the convexity claim the mask is allowed (the diameter bound holds for any step)
    assert _projected(protection={"mask_keep_rate": 0.9}).protection.mask_keep_rate == 0.9


def test_the_private_directory_of_a_dotted_path_is_outside_the_run_directory(tmp_path):
    assert private_dir_of(tmp_path / "a" / "b" / "..") == tmp_path / "a.private"
    assert private_dir_of(tmp_path / "a") == tmp_path / "a.private"
    with pytest.raises(ValueError, match=r"run_dir = '/' is out of range: it resolves to '/'"):
        private_dir_of(Path("/"))


def _guarantee_only(raw):
    raw = copy.deepcopy(raw)
    raw["privacy"].update(secure=True, accountants=["rdp"])
    raw["federated"]["rounds"] = 2
    raw["run"]["outputs"] = "guarantee-only"
    return config_from_dict(raw)


def test_guarantee_only_writes_no_wall_time_and_keeps_private_state_outside(
        tmp_path, tiny_config_dict):
    (tmp_path / "a" / "b").mkdir(parents=True)
    Experiment.create(_guarantee_only(tiny_config_dict), tmp_path / "a" / "b" / "..").run()
    run_dir = tmp_path / "a"
    assert (run_dir / "summary.json").is_file()
    assert (tmp_path / "a.private" / "checkpoints").is_dir()
    assert not list(run_dir.rglob("*.private"))  # nothing private inside the run directory
    identity = json.loads((run_dir / "run.json").read_text())
    # no creation time: the identity and the first plan (public settings fixed at creation)
    assert set(identity) == {"format", "run_id", "plan"}
    assert set(identity["plan"]) <= {"rounds", "epsilon_budget", "filter"}, identity["plan"]
    # (listing a directory here sets its access time: compare modification times)
    times = {str(p.relative_to(tmp_path)): os.lstat(p).st_mtime
             for p in [run_dir, *run_dir.rglob("*")]}
    assert len(times) > 10
    assert set(times.values()) == {FIXED_TIME}, times
