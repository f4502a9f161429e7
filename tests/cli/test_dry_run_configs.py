"""`privfl run CONFIG --dry-run` works for the shipped configurations, offline: the resolved
configuration and the planned privacy, no training, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from privfl.cli.main import app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
RUN_CONFIGS = sorted(p for p in CONFIGS.rglob("*.yaml")
                     if "tradeoff" not in (yaml.safe_load(p.read_text()) or {}))
#: one configuration per folder (and every top-level demo): the default test command
SAMPLE = sorted({p.parent: p for p in RUN_CONFIGS if p.parent != CONFIGS}.values()) + sorted(
    p for p in RUN_CONFIGS if p.parent == CONFIGS)


def _dry(path: Path, tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIVFL_DATA", str(tmp_path / "empty-cache"))  # nothing downloaded here
    result = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []  # no run directory, no cache
    return json.loads(result.stdout)


@pytest.mark.parametrize("path", SAMPLE, ids=[str(p.relative_to(CONFIGS)) for p in SAMPLE])
def test_dry_run_of_a_sample_of_shipped_configs(path, tmp_path, monkeypatch):
    payload = _dry(path, tmp_path, monkeypatch)
    assert payload["dry_run"] and payload["config"]["name"]
    if payload["config"]["privacy"]["enabled"] and payload.get("note") is None:
        assert payload["privacy"] and all(r["epsilon"] > 0 for r in payload["privacy"])


@pytest.mark.slow
@pytest.mark.parametrize("path", RUN_CONFIGS, ids=[str(p.relative_to(CONFIGS))
                                                   for p in RUN_CONFIGS])
def test_dry_run_of_every_shipped_config(path, tmp_path, monkeypatch):
    assert _dry(path, tmp_path, monkeypatch)["dry_run"]
