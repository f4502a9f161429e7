"""privfl's Flower parts without Flower installed (the main venv): nothing outside
privfl.flower imports flwr, ``--backend flower`` says how to install it, ``privfl flower new``
writes the project (running it needs flwr: ``make test-flower``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_no_module_imports_flwr_on_import():
    code = ("import sys, privfl, privfl.cli.main, privfl.flower, privfl.flower.apps, "
            "privfl.flower.project, privfl.flower.wire, privfl.flower.backend, "
            "privfl.runs.mlflow_log; bad = sorted(m for m in sys.modules if m == 'flwr' or "
            "m.startswith('flwr.') or m == 'mlflow'); print(bad); assert not bad")
    done = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.skipif(importlib.util.find_spec("flwr") is not None, reason="flwr is installed")
def test_backend_flower_without_flower_says_how_to_install(tmp_path):
    done = subprocess.run([sys.executable, "-m", "privfl.cli.main", "run",
                           str(ROOT / "configs" / "demo-dp-fedavg.yaml"), "--backend", "flower",
                           "--out", str(tmp_path / "run")], env=ENV, capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert "--backend flower needs Flower: pip install 'privfl[flower]'" in done.stderr
    assert not (tmp_path / "run").exists()


def test_backend_flower_refuses_address(tmp_path):
    done = subprocess.run([sys.executable, "-m", "privfl.cli.main", "run",
                           str(ROOT / "configs" / "demo-dp-fedavg.yaml"), "--backend", "flower",
                           "--address", "auto", "--out", str(tmp_path / "run")], env=ENV,
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert "address = 'auto' is not allowed with backend 'flower'" in done.stderr


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_flower_new_writes_the_app_project(tmp_path):
    done = subprocess.run([sys.executable, "-m", "privfl.cli.main", "flower", "new",
                           str(ROOT / "configs" / "demo-insdp-fedavg.yaml"), "--out",
                           str(tmp_path / "app"), "--set", "federated.rounds=2"], env=ENV,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    project = (tmp_path / "app" / "pyproject.toml").read_text()
    assert 'clientapp = "privfl_app.client_app:app"' in project
    assert f'out = "{(tmp_path / "app" / "runs").resolve()}/' in project
    settings = (tmp_path / "app" / "privfl_app" / "settings.py").read_text()
    namespace: dict = {}
    exec(compile(settings, "settings.py", "exec"), namespace)  # noqa: S102 - our own file
    assert "algorithm: insdp-fedavg" in namespace["CONFIG"] and "rounds: 2" in namespace["CONFIG"]
    again = subprocess.run([sys.executable, "-m", "privfl.cli.main", "flower", "new",
                            str(ROOT / "configs" / "demo-insdp-fedavg.yaml"), "--out",
                            str(tmp_path / "app")], env=ENV, capture_output=True, text=True)
    assert again.returncode != 0 and "exists and is not empty" in again.stderr
