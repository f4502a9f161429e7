"""`privfl account participation`, `privfl calibrate participation` and `privfl audit`."""

import json

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app

runner = CliRunner()
SECTION_61 = ["--client-rate", "0.5", "--record-rate", "0.02", "--records", "30"]


def run_json(*args):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_participation_single_point_deltas():
    data = run_json(
        "account", "participation", "--client-rate", "0.1", "--record-rate", "0.1",
        "--records", "10", "--noise", "1", "--epsilon", "0.5",
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
        "--records", "1000", "--noise", "0.8739", "--delta", "1e-6", "--iterations", "100",
    )
    methods = {r["method"] for r in data["results"]}
    assert {"wcs", "ols", "cs", "wcs-pld", "wcs-rdp", "ols-pld", "cs-pld"} <= methods
    for r in data["results"]:
        assert r["delta"] == 1e-6 and r["unit"] == "record"


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


def test_participation_needs_exactly_one_query():
    result = runner.invoke(
        app, ["account", "participation", *SECTION_61, "--noise", "1"]
    )
    assert result.exit_code == 2 and "epsilon" in result.stderr


def test_audit_gaussian_holds_and_violated():
    ok = run_json("audit", "gaussian", "--sensitivity", "1", "--std", "1", "--epsilon", "1",
                  "--delta", "0.13")
    bad = run_json("audit", "gaussian", "--sensitivity", "1", "--std", "1", "--epsilon", "1",
                   "--delta", "0.12")
    assert ok["violated"] is False and bad["violated"] is True


def test_audit_theorem41_violation():
    data = run_json(
        "audit", "participation", "--participation-rate", "0.1", "--sampling-rate", "0.001",
        "--local-size", "1000", "--std", "0.646", "--scale", "0.296", "--epsilon", "0.015",
        "--delta", "1e-6",
    )
    assert data["violated"] is True
    assert data["delta"] == pytest.approx(1.7343e-6, rel=1e-3)


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
