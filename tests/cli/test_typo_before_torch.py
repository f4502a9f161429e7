"""A configuration typo is answered before torch is imported (issue: a slow, silent start).

Each case runs the command line in a fresh interpreter (pytest itself has imported torch) and,
after the command exits, checks ``sys.modules``: the error is on stderr with exit status 2 and
``torch`` (and privfl's torch-importing packages) were never imported. A regression, e.g. the
schema importing :mod:`privfl.models` or the ``federated`` section needing
:mod:`privfl.algorithms`, imports torch before the message and fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: Runs ``privfl ARGS`` in-process, then reports the exit code and the modules torch brought.
_PROBE = """
import json, sys, time
from privfl.cli.main import main
sys.argv = ["privfl", *json.loads(sys.argv[1])]
start = time.perf_counter()
try:
    main()
    code = 0
except SystemExit as stop:
    code = stop.code
seconds = time.perf_counter() - start
loaded = sorted(m for m in sys.modules
                if m == "torch" or m in ("privfl.models", "privfl.fl", "privfl.backends",
                                         "privfl.data"))
print(json.dumps({"code": code, "loaded": loaded, "seconds": seconds}))
"""


def _probe(args: list[str]) -> tuple[dict, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["run", "configs/demo-dp-fedavg.yaml", "--set", "federated.roundz=3"],
     "federated.roundz is not a known key"),
    (["run", "configs/demo-dp-fedavg.yaml", "--dry-run", "--set", "federated.client_rate=2"],
     "federated.client_rate = 2"),
    (["run", "--set", "model.name=mlpp"], "model.name = 'mlpp' is not allowed"),
    (["run", "configs/demo.yaml", "--set", "federated.alpha=7"], "federated.alpha = 7"),
    (["run", "configs/demo-dp-fedavg.yaml", "--set", "federated.algorithm=dp-fedavgg"],
     "federated.algorithm = 'dp-fedavgg' is not allowed"),
    (["sweep", "configs/demo-dp-fedavg.yaml", "--grid", "seed=1,2", "--set",
      "training.lrr=0.1"], "training.lrr is not a known key"),
    (["certify", "run", "configs/demo-dp-fedavg.yaml", "--models", "2", "--set",
      "federated.roundz=3"], "federated.roundz is not a known key"),
])
def test_a_config_typo_is_answered_before_torch_is_imported(args, message):
    result, stderr = _probe(args)
    assert result["code"] == 2, stderr
    assert message in stderr
    assert result["loaded"] == [], f"imported before the error: {result['loaded']}"


def test_a_valid_config_still_reaches_torch():
    """The probe can fail: a dry run of a valid configuration does import torch (it plans)."""
    result, stderr = _probe(["run", "configs/demo-dp-fedavg.yaml", "--dry-run",
                             "--set", "federated.rounds=2"])
    assert result["code"] == 0, stderr
    assert "torch" in result["loaded"]


@pytest.mark.parametrize("args", [
    ["--version"], ["--help"], ["list"], ["list", "models"], ["list", "algorithms"],
    ["list", "datasets", "--json"], ["list", "accountants"], ["init"],
    ["init", "--algorithm", "dp-ftrl"], ["run", "--help"],
])
def test_commands_that_print_text_import_no_torch(args):
    """``--version``, ``list``, ``init`` and help print names or YAML: they answer in about a
    second because they never import torch (issue 37: ``privfl --version`` took 8.8 s)."""
    result, stderr = _probe(args)
    assert result["code"] == 0, stderr
    assert result["loaded"] == [], f"{' '.join(args)} imported {result['loaded']}"


def test_init_refuses_an_unknown_algorithm_before_torch():
    result, stderr = _probe(["init", "--algorithm", "dp-fedavgg"])
    assert result["code"] == 2
    assert "algorithm = 'dp-fedavgg' is not allowed: must be one of prifedsync" in stderr
    assert result["loaded"] == []


def _existing_run(folder: Path) -> str:
    folder.mkdir()
    (folder / "config.yaml").write_text("name: demo\n")
    (folder / "run.json").write_text("{}")
    return "already holds a run (config.yaml): continue it with privfl run --resume"


def _users_folder(folder: Path) -> str:
    folder.mkdir()
    (folder / "notes.txt").write_text("hi\n")
    return "is a folder that is not empty (notes.txt): a run directory holds one run's files"


@pytest.mark.parametrize("make", [_existing_run, _users_folder])
def test_out_is_refused_before_anything_loads(tmp_path, make):
    """Issue 45, item 6: ``--out`` holding a run, or a user's files, is refused before the data,
    the model or torch load (5-23 s on a busy 2-core machine before): no torch nor data module
    is imported, and the refusal takes what the command line itself takes (1.5 s at load
    average 5.5 on 2 cores; the bound leaves room for a busier machine), and the folder is
    left as it was."""
    out = tmp_path / "out"
    message = make(out)
    before = sorted(p.name for p in out.iterdir())
    result, stderr = _probe(["run", "--out", str(out)])
    assert result["code"] == 2, stderr
    assert message in " ".join(stderr.split())
    assert stderr.count("\n") == 1, stderr
    assert result["loaded"] == [], f"imported before the refusal: {result['loaded']}"
    assert result["seconds"] < 10.0
    assert sorted(p.name for p in out.iterdir()) == before


def test_resume_of_a_folder_without_a_run_is_refused_before_anything_loads(tmp_path):
    result, stderr = _probe(["run", "--resume", str(tmp_path)])
    assert result["code"] == 2, stderr
    assert "is not a run directory: it has no config.yaml" in stderr
    assert result["loaded"] == []


def test_what_a_new_run_directory_may_already_hold(tmp_path):
    """Empty folders and a killed write's temporary files mix with nothing (create() removes the
    latter); a file, even deep in a folder, is the user's."""
    from privfl.runs.rundir import RunDirectory

    out = tmp_path / "out"
    (out / "empty").mkdir(parents=True)
    (out / ".run.json.tmp").write_text("left by a kill")
    RunDirectory(out).check_new()
    (out / "empty" / "notes.txt").write_text("hi\n")
    with pytest.raises(ValueError, match=r"is a folder that is not empty \(empty\)"):
        RunDirectory(out).check_new()
