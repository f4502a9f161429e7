"""Runs of the issue-44 tests: the demo DP-FedAvg configuration (q = 0.3, z = 1.5,
delta = 1e-4) and a real SIGKILL at a chosen round, in a forked child process."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import yaml

from privfl.config import config_from_dict
from privfl.runs.experiment import Experiment, RunCallbacks

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "configs" / "demo-dp-fedavg.yaml").read_text())


def demo(**sections):
    """The demo configuration with ``sections`` merged in (``run={"checkpoint_every": 5}``)."""
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEMO.items()}
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return config_from_dict(raw)


class _KillAt(RunCallbacks):
    def __init__(self, round_index):
        self.round_index = round_index

    def on_round(self, experiment, metrics):
        if metrics["round"] >= self.round_index:
            os.kill(os.getpid(), signal.SIGKILL)


def killed(start, round_index):
    """Run ``start()`` (an Experiment, created or resumed) in a forked child that SIGKILLs
    itself once round ``round_index`` is logged (its row written, its checkpoint written
    only if the cadence says so)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        try:
            start().run(_KillAt(round_index), progress=False)
        finally:
            os._exit(70)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status


def create_killed(config, out, round_index):
    killed(lambda: Experiment.create(config, out), round_index)
