"""Adding an accountant, an algorithm or a dataset is its module plus one registration.

A toy module (written here) registers one of each, as a plugin would, before privfl's command
line is built; then every place a user meets the names lists the toys: ``privfl list``, the
command line's choices and help, the configuration's validation; and a run uses all three.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TOY = textwrap.dedent('''
    """A plugin: one accountant, one algorithm, one dataset, one registration each."""
    from typing import Literal

    from privfl.accounting.rdp import RdpAccountant
    from privfl.accounting.registry import register
    from privfl.config.algorithms.dp_fedavg import DpFedAvgConfig
    from privfl.config.datasets import register_dataset
    from privfl.algorithms.dp_fedavg import DpFedAvg
    from privfl.algorithms.registry import register as register_algorithm


    class ToyAccountant(RdpAccountant):
        """RDP under another name."""

        name = "toy-rdp"


    def load(section, seed):  # (data section, seed) -> (train, test)
        from privfl.data import synthetic_dataset

        return synthetic_dataset(3000, 10, (1, 28, 28), seed=seed).split(0.25, seed)


    class ToyConfig(DpFedAvgConfig):
        algorithm: Literal["toy-fedavg"] = "toy-fedavg"


    class ToyFedAvg(DpFedAvg):
        """DP-FedAvg under another name."""

        name = "toy-fedavg"
        title = "toy FedAvg, a plugin's algorithm"
        config_class = ToyConfig


    register("toy-rdp", "toy_plugin:ToyAccountant.from_options", kind="bound",
             about="RDP under another name, a plugin's accountant")
    register_dataset("toy-data", "toy_plugin:load", source="generated",
                     about="a plugin's dataset")
    register_algorithm(ToyFedAvg)
''')


def _privfl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """``privfl ARGS`` in a fresh interpreter that imports the plugin first."""
    (tmp_path / "toy_plugin.py").write_text(TOY)
    code = ("import sys, toy_plugin\nfrom privfl.cli.main import app\n"
            "sys.argv = ['privfl', *sys.argv[1:]]\napp()\n")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, text=True,
                          capture_output=True, timeout=300,
                          env={"PYTHONPATH": f"{tmp_path}:{ROOT / 'src'}", "PATH": "/usr/bin:/bin",
                               "COLUMNS": "200", "HOME": str(tmp_path)})


@pytest.mark.parametrize(("what", "name", "about"), [
    ("accountants", "toy-rdp", "RDP under another name, a plugin's accountant: a bound"),
    ("algorithms", "toy-fedavg", "toy FedAvg, a plugin's algorithm"),
    ("datasets", "toy-data", "a plugin's dataset"),
])
def test_privfl_list_shows_a_registered_toy(tmp_path, what, name, about):
    done = _privfl(tmp_path, "list", what, "--json")
    assert done.returncode == 0, done.stderr
    items = {item["name"]: item["about"] for item in json.loads(done.stdout)["items"]}
    assert items[name] == about


def test_the_command_line_offers_the_toys(tmp_path):
    account = _privfl(tmp_path, "account", "dpsgd", "--help")
    assert account.returncode == 0, account.stderr
    assert "toy-rdp" in account.stdout
    run = _privfl(tmp_path, "run", "--help")
    assert "toy-fedavg: toy FedAvg, a plugin's algorithm" in " ".join(run.stdout.split())


def test_a_run_uses_the_toy_algorithm_dataset_and_accountant(tmp_path):
    done = _privfl(
        tmp_path, "run", str(ROOT / "configs" / "demo-dp-fedavg.yaml"), "--out", "run",
        "--no-progress", "--set", "federated.algorithm=toy-fedavg",
        "--set", "data.dataset=toy-data",
        "--set", "federated.rounds=2", "--set", "privacy.accountants=[toy-rdp]")
    assert done.returncode == 0, done.stderr
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    methods = {entry["method"] for entry in privacy["results"]}
    assert methods == {"toy-rdp"}, methods
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "toy-fedavg" in config and "toy-data" in config


def test_the_configuration_refuses_an_unregistered_name_and_lists_the_toys(tmp_path):
    done = _privfl(tmp_path, "run", "--dry-run", "--set", "data.dataset=imagenet")
    assert done.returncode == 2
    assert "toy-data" in done.stderr and "mnist-5k" in done.stderr
