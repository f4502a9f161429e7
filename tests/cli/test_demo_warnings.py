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
    # two rounds plan quickly; DP-FTRL and BandMF need every group to train (a warning)
    cycles = "min_separation" in (CONFIGS / name).read_text(encoding="utf-8")
    short = [] if cycles else ["--set", "federated.rounds=2"]
    result = CliRunner().invoke(app, ["run", str(CONFIGS / name), "--dry-run", "--json", *short])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    note = str(payload.get("note", ""))
    if "not found in" in note:  # optional data absent: skipped, or failed under
        raise DatasetNotFoundError(note)  # PRIVFL_REQUIRE_DATA=1 (tests/conftest.py)
    assert "note" not in payload, payload.get("note")  # the plan was made (data present)
    assert payload["warnings"] == []


def test_fewer_rounds_than_client_groups_warn_that_some_clients_never_train():
    """DP-FTRL's demo cycles through 40 groups of 50 clients, one per round: 10 rounds train
    only a quarter of them, which must not pass silently."""
    result = CliRunner().invoke(app, ["run", str(CONFIGS / "demo-dp-ftrl.yaml"), "--dry-run",
                                      "--json", "--set", "federated.rounds=10"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    if "not found in" in str(payload.get("note", "")):
        raise DatasetNotFoundError(payload["note"])
    assert payload["warnings"] == [
        "only 10 of the 40 client groups take part: federated.rounds = 10 is below "
        "federated.min_separation = 40 (one group per round, in turn), so about 1500 of the "
        "2000 clients never train; raise federated.rounds to at least min_separation or lower "
        "min_separation"]
