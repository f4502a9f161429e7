"""Runs of the issue-44 tests: the demo DP-FedAvg configuration (q = 0.3, z = 1.5,
delta = 1e-4) and a real SIGKILL at a chosen round, in a child process (a fresh interpreter:
a forked one can inherit a lock another thread held, and hang)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from privfl.config import config_from_dict

ROOT = Path(__file__).resolve().parents[2]
DEMO = yaml.safe_load((ROOT / "configs" / "demo-dp-fedavg.yaml").read_text())

_CHILD = """
import json, os, signal, sys
from privfl.config import config_from_dict
from privfl.runs.experiment import Experiment, RunCallbacks
spec = json.loads(sys.argv[1])
class Kill(RunCallbacks):
    def on_round(self, experiment, metrics):
        if metrics["round"] >= spec["kill_at"]:
            os.kill(os.getpid(), signal.SIGKILL)
if spec["config"] is not None:
    experiment = Experiment.create(config_from_dict(spec["config"]), spec["out"])
else:
    experiment = Experiment.resume(spec["out"], spec["overrides"])
experiment.run(Kill(), progress=False)
"""


def demo(**sections):
    """The demo configuration with ``sections`` merged in (``run={"checkpoint_every": 5}``)."""
    raw = {k: (dict(v) if isinstance(v, dict) else v) for k, v in DEMO.items()}
    for name, values in sections.items():
        raw[name] = {**raw.get(name, {}), **values}
    return config_from_dict(raw)


def killed_run(out, kill_at: int, config=None, overrides: Sequence[str] = ()) -> bool:
    """Create (``config``) or resume (``overrides``) the run in ``out`` in a child process
    that SIGKILLs itself once round ``kill_at`` is logged (its row written; its checkpoint
    only if the cadence wrote one); True if it was killed (False: it stopped, or was refused,
    before)."""
    spec = {"out": str(out), "kill_at": kill_at, "overrides": list(overrides),
            "config": None if config is None else config.model_dump(mode="json")}
    child = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)],
                           capture_output=True, text=True, timeout=600)
    return child.returncode == -signal.SIGKILL


def create_killed(config, out, kill_at):
    assert killed_run(out, kill_at, config=config)
