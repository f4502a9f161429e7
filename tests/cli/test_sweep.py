"""`privfl sweep` with the local backend: grid parsing, one ordinary run per combination (equal
to `privfl run` with the same --set), sweep.json, and one-line errors."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from privfl.cli.main import main
from privfl.cli.sweep import grid_points, parse_grid

TINY = {
    "name": "sweep-tiny", "seed": 4,
    "data": {"dataset": "synthetic", "synthetic_examples": 160, "test_fraction": 0.25,
             "partition": "iid", "clients": 3, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 1, "batch_size": 5, "lr": 0.05},
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": ["rdp"]},
    "federated": {"rounds": 2, "client_rate": 1.0},
    "run": {"threads": 1},
}


@pytest.fixture
def tiny_yaml(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def _invoke(capsys, args):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    captured = capsys.readouterr()
    return exited.value.code, captured.out, captured.err


def test_grid_points_are_the_product_in_order():
    grid = parse_grid(["training.lr=0.1,0.2", "privacy.noise_multiplier=1,2,3"])
    assert grid == [("training.lr", ["0.1", "0.2"]),
                    ("privacy.noise_multiplier", ["1", "2", "3"])]
    points = grid_points(grid)
    assert len(points) == 6
    assert points[0] == ["training.lr=0.1", "privacy.noise_multiplier=1"]
    assert points[-1] == ["training.lr=0.2", "privacy.noise_multiplier=3"]


def test_grid_values_keep_yaml_lists_and_maps_whole():
    grid = parse_grid(["data.classes=[0, 1],[2,3]", "model.kwargs={hidden: [8, 4]},{}",
                       "name='a,b',c"])
    assert grid == [("data.classes", ["[0, 1]", "[2,3]"]),
                    ("model.kwargs", ["{hidden: [8, 4]}", "{}"]), ("name", ["'a,b'", "c"])]


@pytest.mark.parametrize(("item", "fragment"), [
    ("=1,2", "the dotted key before '=' is empty"),
    ("data.classes=[0,1", "unbalanced brackets or quotes"),
    ("name='a,b", "unbalanced brackets or quotes"),
    ("seed=1,,2", "an empty value"),
])
def test_bad_grid_items_name_the_grid_item(item, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        parse_grid([item])


def test_sweep_runs_every_point_like_privfl_run(tmp_path, tiny_yaml, capsys):
    out = tmp_path / "sweep"
    code, stdout, err = _invoke(capsys, ["sweep", tiny_yaml, "--grid",
                                         "privacy.noise_multiplier=0.8,1.6", "--set",
                                         "training.lr=0.1", "--out", out, "--json"])
    assert code in (0, None), err
    report = json.loads(stdout)
    assert [r["overrides"] for r in report["runs"]] == [
        ["privacy.noise_multiplier=0.8"], ["privacy.noise_multiplier=1.6"]]
    assert json.loads((out / "sweep.json").read_text()) == report
    assert "round 2/2" in err  # per-round progress of every run
    eps = [r["final"]["epsilon"] for r in report["runs"]]
    assert eps[0] > eps[1]  # more noise, less epsilon
    # each run equals privfl run with the same overrides
    alone = tmp_path / "alone"
    code, _, err = _invoke(capsys, ["run", tiny_yaml, "--set", "training.lr=0.1", "--set",
                                    "privacy.noise_multiplier=1.6", "--out", alone,
                                    "--no-progress"])
    assert code in (0, None), err
    second = out / report["runs"][1]["run"]
    assert (second / "privacy.json").read_text() == (alone / "privacy.json").read_text()
    rows = [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (second / "metrics.jsonl").read_text().splitlines()]
    want = [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (alone / "metrics.jsonl").read_text().splitlines()]
    assert rows == want and len(rows) == 2


@pytest.mark.parametrize(("args", "fragment"), [
    ([], "--grid is required"),
    (["--grid", "training.lr"], "--grid 'training.lr' is not valid: must be key=v1,v2"),
    (["--grid", "training.lr=0.1,"], "an empty value"),
    (["--grid", "training.lr=0.1", "--grid", "training.lr=0.2"], "--grid training.lr is "
                                                                 "given twice"),
    (["--grid", "training.lr=0.1,0.1"], "lists a value twice"),
    (["--grid", "training.lr=-1"], "training.lr"),
    (["--grid", "training.lr=0.1", "--workers", "2"], "workers = 2 is not allowed with backend "
                                                      "'local'"),
    (["--grid", "training.lr=0.1", "--backend", "spark"], "backend = 'spark' is not allowed"),
])
def test_bad_sweeps_exit_2_with_one_line(tmp_path, tiny_yaml, capsys, args, fragment):
    out = tmp_path / "sweep"
    code, _, err = _invoke(capsys, ["sweep", tiny_yaml, "--out", out, *args])
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("privfl: error: ") and fragment in lines[0], lines[0]
    assert not out.exists()  # every point is validated before anything is written


def test_existing_out_is_refused(tmp_path, tiny_yaml, capsys):
    code, _, err = _invoke(capsys, ["sweep", tiny_yaml, "--grid", "training.lr=0.1",
                                    "--out", tmp_path])
    assert code == 2 and "already exists" in err


@pytest.mark.slow  # tens of seconds on 2 cores: `make test-slow`
def test_a_killed_sweep_keeps_sweep_json_and_resume_finishes_it(tmp_path, capsys, tiny_yaml,
                                                               monkeypatch):
    """Before: a kill left no sweep.json at all, and nothing could finish the sweep."""
    import privfl.cli.sweep as sweep_module

    args = ["sweep", tiny_yaml, "--grid", "training.lr=0.05,0.1,0.2"]
    code, _, _ = _invoke(capsys, [*args, "--out", tmp_path / "whole"])
    assert code in (0, None)
    whole = json.loads((tmp_path / "whole" / "sweep.json").read_text())

    real, calls = sweep_module.run_point, []

    def killed_at_the_second(raw, run_dir, label, say=print):
        calls.append(label)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(raw, run_dir, label, say)

    monkeypatch.setattr(sweep_module, "run_point", killed_at_the_second)
    code, _, err = _invoke(capsys, [*args, "--out", tmp_path / "cut"])
    assert code == 130 and f"privfl sweep --resume {tmp_path / 'cut'}" in err
    cut = json.loads((tmp_path / "cut" / "sweep.json").read_text())
    assert cut["complete"] is False and [r["run"] for r in cut["runs"]] == ["000-lr=0.05"]
    assert [p["run"] for p in cut["pending"]] == ["001-lr=0.1", "002-lr=0.2"]

    monkeypatch.undo()
    code, _, _ = _invoke(capsys, ["sweep", "--resume", tmp_path / "cut"])
    assert code in (0, None)
    done = json.loads((tmp_path / "cut" / "sweep.json").read_text())
    assert done["complete"] is True and done["pending"] == []
    assert [r["final"] for r in done["runs"]] == [r["final"] for r in whole["runs"]]
    assert [r["privacy"] for r in done["runs"]] == [r["privacy"] for r in whole["runs"]]
    code, _, err = _invoke(capsys, ["sweep", "--resume", tmp_path / "nowhere"])
    assert code == 2 and "has no sweep.json" in err
