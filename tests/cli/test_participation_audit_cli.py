"""`privfl account participation`, `privfl calibrate participation` and `privfl audit`."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app

runner = CliRunner()
SECTION_61 = ["--client-rate", "0.5", "--record-rate", "0.02", "--records", "30"]


def run_json(*args, exit_code=0):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout)


# the README's example of a violated claim (Theorem 4.1's calibrated noise, Hasircioglu and
# Gunduz 2022 Section 6.2)
README_VIOLATED = [
    "audit", "participation", "--participation-rate", "0.1", "--sampling-rate", "0.001",
    "--local-size", "1000", "--std", "0.646", "--scale", "0.296", "--epsilon", "0.015",
    "--delta", "1e-6",
]


def test_participation_single_point_deltas():
    data = run_json(
        "account", "participation", "--client-rate", "0.1", "--record-rate", "0.1",
        "--records", "10", "--noise-multiplier", "1", "--epsilon", "0.5",
    )
    by = {r["method"]: r for r in data["results"]}
    assert by["theorem-4.1"]["kind"] == "estimate"
    assert by["theorem-4.1"]["delta"] == pytest.approx(7.1327676138e-7, rel=1e-6)
    assert by["cs"]["delta"] == pytest.approx(2.2145190132e-7, rel=1e-6)
    assert by["ols"]["delta"] == pytest.approx(2.0325369203e-3, rel=1e-6)
    assert by["wcs"]["delta"] == pytest.approx(2.0325369203e-4, rel=1e-6)
    assert by["wcs"]["kind"] == "bound" and by["ols"]["kind"] == "bound"
    assert all(r["epsilon"] == 0.5 for r in data["results"])


def test_participation_epsilon_and_composition():
    data = run_json(
        "account", "participation", "--client-rate", "0.1", "--record-rate", "0.001",
        "--records", "1000", "--noise-multiplier", "0.8739", "--delta", "1e-6",
        "--iterations", "100",
    )
    methods = {r["method"] for r in data["results"]}
    assert {"wcs", "ols", "cs", "wcs-pld", "wcs-rdp", "ols-pld", "cs-pld"} <= methods
    for r in data["results"]:
        assert r["delta"] == 1e-6 and r["unit"] == "record"
        assert r["steps"] == (1 if r["method"] in ("theorem-4.1", "per-s1-convexity", "wcs", "ols",
                                                   "cs") else 100)


def test_participation_cs_rows_are_a_reference():
    data = run_json(
        "account", "participation", "--client-rate", "0.1", "--record-rate", "0.001",
        "--records", "1000", "--noise-multiplier", "0.874", "--delta", "1e-6",
        "--iterations", "100",
    )
    kinds = {r["method"]: r["kind"] for r in data["results"]}
    assert kinds["cs"] == kinds["cs-rdp"] == kinds["cs-pld"] == "reference"
    assert kinds["wcs-pld"] == kinds["ols-pld"] == kinds["wcs"] == "bound"
    assert kinds["theorem-4.1"] == "estimate"
    assert "bound" not in {kinds[m] for m in ("cs", "cs-rdp", "cs-pld")}


def test_participation_text_table_has_kind_and_steps_columns():
    result = runner.invoke(
        app,
        ["account", "participation", "--client-rate", "0.1", "--record-rate", "0.001",
         "--records", "1000", "--noise-multiplier", "0.874", "--delta", "1e-6",
         "--iterations", "1000"],
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if "method" in line and "epsilon" in line)
    assert "kind" in header and "steps" in header
    row = {line.split()[1]: line.split() for line in lines if line.startswith("│ ")}
    assert row["cs"][3] == "reference" and row["cs"][5] == "1"
    assert row["cs-pld"][3] == "reference" and row["cs-pld"][5] == "1000"
    assert row["wcs-pld"][3] == "bound" and row["wcs-pld"][5] == "1000"
    assert row["theorem-4.1"][3] == "estimate"
    assert "…" not in result.output  # no number is cut short at 80 columns
    assert "reference: rigorous only for a different" in " ".join(result.output.split())


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--client-rate", "0.1", "--record-rate", "0.001", "--records", "1000"],
         {"wcs": 0.8739, "ols": 1.1035, "theorem-4.1": None}),
    ],
)
def test_calibrate_participation(args, expected):
    data = run_json("calibrate", "participation", *args, "--epsilon", "0.015", "--delta", "1e-6")
    noise = {r["method"]: r["noise"] for r in data["results"]}
    for scheme, value in expected.items():
        if value is None:
            assert noise[scheme] is None
        else:
            assert noise[scheme] == pytest.approx(value, abs=1e-3)


def test_calibrate_participation_rows_carry_kind_and_relation():
    data = run_json(
        "calibrate", "participation", "--client-rate", "0.001", "--record-rate", "0.1",
        "--records", "30", "--epsilon", "0.015", "--delta", "1e-6",
    )
    by = {r["method"]: r for r in data["results"]}
    assert by["theorem-4.1"]["kind"] == "estimate"  # the paper's noise: an estimate
    assert by["theorem-4.1"]["noise"] == pytest.approx(2.3715, rel=1e-3)
    assert by["cs"]["kind"] == "reference"
    for scheme in ("per-s1-convexity", "wcs", "ols"):
        assert by[scheme]["kind"] == "bound"
    for row in data["results"]:
        assert row["neighbouring"] == "add-remove" and row["unit"] == "record"
        assert row["steps"] == 1 and row["note"] and row["random_participation"]
    text = runner.invoke(
        app,
        ["calibrate", "participation", "--client-rate", "0.001", "--record-rate", "0.1",
         "--records", "30", "--epsilon", "0.015", "--delta", "1e-6"],
    )
    assert text.exit_code == 0, text.output
    rows = {line.split()[1]: line.split() for line in text.output.splitlines()
            if line.startswith("│ ")}
    assert rows["theorem-4.1"][3] == "estimate" and rows["cs"][3] == "reference"
    assert rows["wcs"][3] == "bound" and rows["wcs"][7] == "add-remove"
    assert "may NOT meet the target" in " ".join(text.output.split())


def test_participation_needs_exactly_one_query():
    result = runner.invoke(
        app, ["account", "participation", *SECTION_61, "--noise-multiplier", "1"]
    )
    assert result.exit_code == 2 and "epsilon" in result.stderr


def test_audit_gaussian_holds_and_violated():
    """Exit status 0 when the claim holds, 1 when it is violated (scripts rely on it)."""
    ok = run_json("audit", "gaussian", "--sensitivity", "1", "--std", "1", "--epsilon", "1",
                  "--delta", "0.13")
    bad = run_json("audit", "gaussian", "--sensitivity", "1", "--std", "1", "--epsilon", "1",
                   "--delta", "0.12", exit_code=1)
    assert ok["violated"] is False and bad["violated"] is True


def test_audit_theorem41_violation():
    data = run_json(*README_VIOLATED, exit_code=1)
    assert data["violated"] is True
    assert data["delta"] == pytest.approx(1.7343e-6, rel=1e-3)


def test_audit_readme_violated_example_exits_1_in_a_real_process():
    proc = subprocess.run(
        [sys.executable, "-m", "privfl.cli.main", *README_VIOLATED],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("VIOLATED") and "Traceback" not in proc.stderr
    holds = subprocess.run(
        [sys.executable, "-m", "privfl.cli.main", *README_VIOLATED[:-1], "2e-6"],
        capture_output=True, text=True, check=False,
    )
    assert holds.returncode == 0 and holds.stdout.startswith("holds")


def test_audit_inconclusive_monte_carlo_exits_3():
    """A Monte Carlo interval that contains the claimed delta decides nothing: exit 3."""
    data = run_json(
        "audit", "subsampled-gaussian", "--sampling-rate", "0.5", "--noise-multiplier", "1",
        "--steps", "2", "--epsilon", "1", "--delta", "0.074", "--monte-carlo", "2000",
        exit_code=3,
    )
    assert data["violated"] is False and data["conclusive"] is False


def test_audit_help_states_exit_statuses():
    for args in (["audit", "--help"], ["audit", "participation", "--help"]):
        result = runner.invoke(app, args)
        text = " ".join(result.output.split())
        assert "0 the claim holds, 1 it is VIOLATED" in text and "2 an input error" in text


def test_audit_dpsgd_accountants_hold():
    data = run_json(
        "audit", "dpsgd", "--noise-multiplier", "1", "--sampling-rate", "0.1", "--steps", "1",
        "--delta", "1e-5",
    )
    assert set(data) == {"rdp", "pld"}
    assert not any(report["violated"] for report in data.values())


def test_audit_bad_input():
    result = runner.invoke(
        app, ["audit", "gaussian", "--sensitivity", "-1", "--std", "1", "--epsilon", "1",
              "--delta", "0.1"]
    )
    assert result.exit_code == 2 and "sensitivity" in result.stderr
