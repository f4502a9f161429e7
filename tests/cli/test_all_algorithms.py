"""Every registered algorithm through the generic runner: its demo config runs with
`privfl run --json`, a run stopped by run.max_rounds and resumed equals an uninterrupted one,
`privfl check-privacy` agrees with the log, and `privfl compare` sets all of them side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privfl.algorithms.registry import ALGORITHM_NAMES, available
from privfl.cli.main import app

pytestmark = pytest.mark.slow  # about 80 s: three short runs of every algorithm

CONFIGS = Path(__file__).parents[2] / "configs"
runner = CliRunner()


def _demo(name: str) -> Path:
    special = {"prifedsync": "demo.yaml", "bandmf-fedavg": "demo-bandmf.yaml"}
    return CONFIGS / special.get(name, f"demo-{name}.yaml")


def _rows(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _run(*args: str):
    return runner.invoke(app, ["run", *args, "--no-progress"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each available algorithm's demo for 2 rounds, and the same stopped after 1 and resumed."""
    root = tmp_path_factory.mktemp("algorithms")
    out = {}
    for name in available():
        if not _demo(name).is_file():
            continue
        whole, parts = root / f"{name}-whole", root / f"{name}-parts"
        first = _run(str(_demo(name)), "--out", str(whole), "--json",
                     "--set", "federated.rounds=2", "--set", f"name={name}")
        assert first.exit_code == 0, (name, first.output)
        stopped = _run(str(_demo(name)), "--out", str(parts), "--set", "federated.rounds=2",
                       "--set", "run.max_rounds=1", "--set", f"name={name}-parts")
        assert stopped.exit_code == 0, (name, stopped.output)
        resumed = _run("--resume", str(parts))
        assert resumed.exit_code == 0, (name, resumed.output)
        out[name] = (whole, parts, json.loads(first.stdout))
    return out


def test_every_built_in_algorithm_has_a_demo():
    for name in ALGORITHM_NAMES:
        if name in available():
            assert _demo(name).is_file(), f"configs/{_demo(name).name} is missing"


@pytest.mark.parametrize("name", ALGORITHM_NAMES)
def test_demo_runs_resumes_and_checks(runs, name):
    if name not in runs:
        pytest.skip(f"{name} is not available in this checkout")
    whole, parts, summary = runs[name]
    assert summary["algorithm"] == name and summary["rounds_completed"] == 2
    assert summary["private"] and summary["privacy"]
    for result in summary["privacy"]:
        for key in ("method", "kind", "epsilon", "delta", "unit", "neighbouring", "sampling",
                    "release", "steps"):
            assert key in result, (name, key)
        assert result["kind"] in ("bound", "estimate", "reference")
        assert result["unit"] in ("record", "client")
    rows = _rows(whole)
    assert [r["round"] for r in rows] == [1, 2]
    assert all("privacy" in r for r in rows)
    # stopped after round 1 and resumed: the same rounds as the uninterrupted run
    assert _rows(parts) == rows
    check = runner.invoke(app, ["check-privacy", str(whole), "--json"])
    assert check.exit_code == 0, check.output
    assert json.loads(check.stdout)["ok"]


def test_compare_across_algorithms(runs):
    if len(runs) < 2:
        pytest.skip("needs two algorithms")
    result = runner.invoke(app, ["compare", *(str(w) for w, _, _ in runs.values()), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [r["algorithm"] for r in payload["runs"]] == list(runs)
    *middle, last = payload["rows"]
    for name in runs:  # the last planned round carries every accountant: a bound each
        assert last[name]["epsilon"] > 0 and last[name]["epsilon_kind"] == "bound"
    for row in middle:
        for name in runs:
            # the algorithms share no accountant: each shows its own tightest number, marked;
            # PriFedSync's default accountants (gdp-clt, pld) leave a per-round row the CLT
            # estimate only (privfl.algorithms.cadence); the others keep a bound
            assert row[name]["epsilon_kind"] == ("estimate" if name == "prifedsync" else "bound")
            if name == "dp-dsgd" and row["round"] == 1:
                # DP-DSGD's first row carries per-iteration numbers (wcs); its series is the
                # composition (wcs-rdp) from round 2 on (privfl.algorithms.base.series_accountant),
                # so its column shows no value there rather than another accountant's
                assert row[name]["epsilon"] == "nan"
                assert row[name]["epsilon_method"] == "wcs-rdp"
                continue
            assert row[name]["epsilon"] > 0
