"""``privfl flower new CONFIG --out DIR`` then ``flwr run DIR`` on a local SuperLink with 10
simulated SuperNodes: the run directory the ServerApp writes equals a local run (metrics
without timings, privacy.json)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _backend_helpers import DP_FEDAVG

pytest.importorskip("flwr")

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent


def _metrics(path):
    rows = [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def test_flower_new_project_runs_with_flwr_run(tmp_path):
    raw = {**DP_FEDAVG, "federated": {**DP_FEDAVG["federated"], "rounds": 2}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(raw))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FLWR_HOME": str(tmp_path / "home"),
           "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    cli = [sys.executable, "-m", "privfl.cli.main"]
    done = subprocess.run([*cli, "flower", "new", str(tmp_path / "cfg.yaml"), "--out",
                           str(tmp_path / "app")], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    project = (tmp_path / "app" / "pyproject.toml").read_text()
    assert '[tool.flwr.app.components]' in project
    assert 'serverapp = "privfl_app.server_app:app"' in project
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(
        '[superlink]\ndefault = "local"\n\n[superlink.local]\naddress = ":local:"\n'
        "options.num-supernodes = 10\noptions.backend.init-args.num-cpus = 2\n"
        "options.backend.client-resources.num-cpus = 1\n")
    try:
        run = subprocess.run([str(BIN / "flwr"), "run", str(tmp_path / "app"), "local",
                              "--stream"], env=env, capture_output=True, text=True,
                             timeout=900, cwd=tmp_path)
    finally:  # the local SuperLink flwr started for this FLWR_HOME
        found = subprocess.run(["pgrep", "-f", f"flower-superlink.*{tmp_path}"],
                               capture_output=True, text=True).stdout.split()
        for pid in found:
            os.kill(int(pid), signal.SIGTERM)
    flower = tmp_path / "app" / "runs" / DP_FEDAVG["name"]
    assert (flower / "privacy.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    local = tmp_path / "local"
    done = subprocess.run([*cli, "run", str(tmp_path / "cfg.yaml"), "--out", str(local),
                           "--no-progress"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _metrics(local) == _metrics(flower)
    assert (json.loads((local / "privacy.json").read_text())
            == json.loads((flower / "privacy.json").read_text()))


def test_flower_new_refuses_an_algorithm_that_does_not_fit(tmp_path):
    demo = ROOT / "configs" / "demo-dp-dsgd.yaml"
    done = subprocess.run([sys.executable, "-m", "privfl.cli.main", "flower", "new", str(demo),
                           "--out", str(tmp_path / "app")],
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "federated.algorithm = 'dp-dsgd' is not allowed with --backend flower" in done.stderr
    assert not (tmp_path / "app").exists()
