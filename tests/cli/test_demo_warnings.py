"""Every demo under configs/ runs without a setting warning (:mod:`privfl.algorithms.sanity`):
none is too noisy to learn, none has a risky delta (>= 0.1/n; the DP-FedAvg demo had delta =
1e-3 with 100 clients)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.data.errors import DatasetNotFoundError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
DEMOS = sorted(p.name for p in CONFIGS.glob("demo*.yaml"))


@pytest.mark.parametrize("name", DEMOS)
def test_a_demo_plans_without_warnings(name):
    result = CliRunner().invoke(app, ["run", str(CONFIGS / name), "--dry-run", "--json",
                                      "--set", "federated.rounds=2"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    note = str(payload.get("note", ""))
    if "not found in" in note:  # optional data absent: skipped, or failed under
        raise DatasetNotFoundError(note)  # PRIVFL_REQUIRE_DATA=1 (tests/conftest.py)
    assert "note" not in payload, payload.get("note")  # the plan was made (data present)
    assert payload["warnings"] == []
