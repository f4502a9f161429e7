"""A run keeps only the checkpoint a resume needs (``run.keep_checkpoints`` defaults to 1; the
demo's checkpoints are about 19 MB each), and resuming from it still works."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.config import config_from_dict

TINY = {
    "name": "tiny-checkpoints",
    "data": {"dataset": "digits", "partition": "iid", "clients": 3, "test_size": 10},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 10, "lr": 0.05},
    "privacy": {"sigma": 0.9, "delta": 1e-5, "accountants": ["gdp-clt"]},
    "federated": {"rounds": 3, "client_rate": 1.0},
    "run": {"threads": 1},
}


def test_the_default_keeps_one_checkpoint_and_a_resume_continues_from_it(tmp_path):
    assert config_from_dict({}).run.keep_checkpoints == 1
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "run"
    runner = CliRunner()
    first = runner.invoke(app, ["run", str(config), "--out", str(out), "--no-progress"])
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "round-000003.json", "round-000003.pt"]
    more = runner.invoke(app, ["run", "--resume", str(out), "--set", "federated.rounds=4",
                               "--no-progress", "--json"])
    assert more.exit_code == 0, more.output
    assert json.loads(more.stdout)["rounds_completed"] == 4
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [
        "round-000004.json", "round-000004.pt"]
