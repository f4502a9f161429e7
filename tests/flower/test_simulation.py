"""privfl's ServerApp and ClientApp on Flower's simulation runtime (Ray, one virtual SuperNode
per client) against the local backend: metrics (without timings) and privacy.json bit for bit,
through the Python API and through ``privfl run --backend flower``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from _backend_helpers import DP_FEDAVG, INSDP, assert_same, config, outcome, run

pytest.importorskip("flwr")

from privfl.flower.apps import simulate  # noqa: E402
from privfl.runs.experiment import Experiment  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("raw", [DP_FEDAVG, INSDP], ids=lambda r: r["name"])
def test_simulation_equals_local(tmp_path, raw):
    cfg = config(raw)
    local = run(cfg, tmp_path / "local")
    experiment = Experiment.create(cfg, tmp_path / "flower")
    result = simulate(experiment, workers=2)
    assert_same(outcome(local), outcome(experiment))
    assert result.run_dir == experiment.dir.path


def _metrics(path):
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_cli_backend_flower_equals_local_on_the_demo(tmp_path):
    """``privfl run configs/demo-dp-fedavg.yaml --backend flower`` (3 rounds, 100 nodes)
    writes the metrics and privacy.json of ``--backend local``; check-privacy and compare
    read the Flower run."""
    demo = os.path.join(ROOT, "configs", "demo-dp-fedavg.yaml")
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "src")}
    cli = [sys.executable, "-m", "privfl.cli.main"]
    for backend in ("local", "flower"):
        extra = ["--workers", "2"] if backend == "flower" else []
        done = subprocess.run([*cli, "run", demo, "--set", "federated.rounds=3", "--out",
                               str(tmp_path / backend), "--backend", backend, "--no-progress",
                               *extra], env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
    assert _metrics(tmp_path / "local") == _metrics(tmp_path / "flower")
    assert (json.loads((tmp_path / "local" / "privacy.json").read_text())
            == json.loads((tmp_path / "flower" / "privacy.json").read_text()))
    check = subprocess.run([*cli, "check-privacy", str(tmp_path / "flower")], env=env,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr
    compare = subprocess.run([*cli, "compare", str(tmp_path / "local"),
                              str(tmp_path / "flower")], env=env, capture_output=True,
                             text=True, timeout=300)
    assert compare.returncode == 0, compare.stdout + compare.stderr
