"""`privfl account` and `privfl calibrate` from the command line."""

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app

runner = CliRunner()


def run_json(*args):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_dpsgd_json_all_methods():
    data = run_json(
        "account",
        "dpsgd",
        "--sampling-rate",
        "0.01",
        "--noise-multiplier",
        "1.0",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
    )
    methods = {r["method"]: r for r in data["results"]}
    assert set(methods) == {"rdp", "pld", "gdp-clt"}
    assert methods["gdp-clt"]["kind"] == "estimate" and "mu" in methods["gdp-clt"]
    assert methods["rdp"]["kind"] == "bound" and "order" in methods["rdp"]
    assert methods["pld"]["kind"] == "bound"
    for entry in data["results"]:
        assert entry["delta"] == 1e-5 and entry["unit"] == "record"


@pytest.mark.parametrize("sigma,expected", [(0.5, 6.9269), (1.8, 0.6298), (3.0, 0.2808)])
def test_dpsgd_legacy_classic_reproduces_seed2_table4(sigma, expected):
    data = run_json(
        "account",
        "dpsgd",
        "--sampling-rate",
        "0.1",
        "--noise-multiplier",
        str(sigma),
        "--steps",
        "3",
        "--delta",
        "0.0029",
        "--method",
        "rdp",
        "--orders",
        "legacy",
        "--conversion",
        "classic",
    )
    (result,) = data["results"]
    assert round(result["epsilon"], 4) == expected


def test_dpsgd_custom_orders():
    data = run_json(
        "account",
        "dpsgd",
        "--sampling-rate",
        "0.1",
        "--noise-multiplier",
        "1.8",
        "--steps",
        "3",
        "--delta",
        "0.0029",
        "--method",
        "rdp",
        "--orders",
        "2,13,40",
        "--conversion",
        "classic",
    )
    assert data["results"][0]["order"] == 13


def test_fedfdp_json_reports_weak_and_strong():
    data = run_json(
        "account",
        "fedfdp",
        "--records",
        "600",
        "--batch-size",
        "16",
        "--local-steps",
        "38",
        "--rounds",
        "93",
        "--sigma",
        "1.0",
        "--clients",
        "100",
        "--delta",
        "1e-5",
    )
    entries = {(r["method"], r["scope"]): r for r in data["results"]}
    assert set(entries) == {
        ("gdp-clt", "weak"),
        ("gdp-clt", "strong"),
        ("pld", "weak"),
        ("pld", "strong"),
    }
    assert abs(entries["gdp-clt", "weak"]["mu"] - 2.71) <= 0.005
    assert entries["gdp-clt", "weak"]["kind"] == "estimate"
    assert entries["pld", "weak"]["kind"] == "bound"


# seed 000 Tables 1-3 (spec seed0 6.1): n, B, K, p, sigma, R, paper mu
SEED0_ROWS = [
    (600, 16, 38, 1.0, 1.0, 93, 2.71), (600, 16, 38, 1.0, 0.9, 83, 3.10),
    (600, 16, 38, 1.0, 0.75, 64, 3.96), (600, 16, 38, 0.5, 1.0, 194, 3.92),
    (600, 16, 38, 0.5, 0.9, 176, 4.51), (600, 16, 38, 0.5, 0.75, 127, 5.58),
    (600, 16, 38, 0.25, 1.0, 386, 5.52), (600, 16, 38, 0.25, 0.9, 325, 6.13),
    (600, 16, 38, 0.25, 0.75, 245, 7.75), (600, 8, 76, 0.5, 1.0, 266, 3.24),
    (600, 8, 76, 0.5, 0.9, 229, 3.64), (600, 8, 76, 0.5, 0.75, 191, 4.84),
    (500, 16, 32, 1.0, 1.0, 468, 6.70), (500, 16, 32, 1.0, 0.75, 321, 9.77),
    (500, 16, 32, 1.0, 0.5, 207, 26.81), (500, 16, 32, 0.5, 1.0, 904, 9.31),
    (500, 16, 32, 0.5, 0.75, 671, 14.13), (500, 16, 32, 0.5, 0.5, 405, 37.51),
]


@pytest.mark.parametrize("n,B,K,p,sigma,R,mu", SEED0_ROWS)
def test_fedfdp_cli_mu_rows(n, B, K, p, sigma, R, mu):
    data = run_json(
        "account", "fedfdp", "--records", str(n), "--batch-size", str(B), "--local-steps",
        str(K), "--rounds", str(R), "--sigma", str(sigma), "--clients", "100", "--delta", "1e-5",
        "--client-rate", str(p), "--method", "gdp-clt",
    )
    weak = next(r for r in data["results"] if r["scope"] == "weak")
    assert abs(weak["mu"] - mu) <= 0.005


def test_fedfdp_help_states_convention():
    result = runner.invoke(app, ["account", "fedfdp", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "2*SIGMA*C" in text and "replace one record" in text


def test_calibrate_noise_and_steps():
    data = run_json(
        "calibrate",
        "dpsgd",
        "--epsilon",
        "1",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000",
    )
    assert data["calibration"]["parameter"] == "noise_multiplier"
    assert data["results"][0]["epsilon"] <= 1.0
    data = run_json(
        "calibrate",
        "dpsgd",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.01",
        "--noise-multiplier",
        "1.0",
    )
    assert data["calibration"]["parameter"] == "steps" and data["calibration"]["value"] > 0
    data = run_json(
        "calibrate",
        "dpsgd",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.01",
        "--noise-multiplier",
        "1.0",
        "--steps",
        "100",
    )
    assert data["setting"]["epsilon_left"] > 0


def test_human_table_mentions_bound_and_estimate():
    result = runner.invoke(
        app,
        [
            "account",
            "dpsgd",
            "--sampling-rate",
            "0.01",
            "--noise-multiplier",
            "1.0",
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ],
    )
    assert result.exit_code == 0
    assert "bound" in result.output and "estimate" in result.output


@pytest.mark.parametrize(
    "args,name",
    [
        (
            [
                "--sampling-rate",
                "1.5",
                "--noise-multiplier",
                "1",
                "--steps",
                "10",
                "--delta",
                "1e-5",
            ],
            "sampling_rate",
        ),
        (
            [
                "--sampling-rate",
                "0.1",
                "--noise-multiplier",
                "0",
                "--steps",
                "10",
                "--delta",
                "1e-5",
            ],
            "noise_multiplier",
        ),
        (
            [
                "--sampling-rate",
                "0.1",
                "--noise-multiplier",
                "nan",
                "--steps",
                "10",
                "--delta",
                "1e-5",
            ],
            "noise_multiplier",
        ),
        (
            [
                "--sampling-rate",
                "0.1",
                "--noise-multiplier",
                "1",
                "--steps",
                "-3",
                "--delta",
                "1e-5",
            ],
            "steps",
        ),
        (
            ["--sampling-rate", "0.1", "--noise-multiplier", "1", "--steps", "10", "--delta", "2"],
            "delta",
        ),
    ],
)
def test_bad_input_exits_nonzero_with_message(args, name):
    result = runner.invoke(app, ["account", "dpsgd", *args])
    assert result.exit_code == 2
    assert name in result.stderr and "must be" in result.stderr
    assert "Traceback" not in result.output


def test_no_traceback_in_real_process():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "privfl.cli.main",
            "account",
            "dpsgd",
            "--sampling-rate",
            "0.1",
            "--noise-multiplier",
            "-1",
            "--steps",
            "10",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "noise_multiplier" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("m,expected", [(10, 1.6485), (20, 1.1241)])
def test_last_iterate_figure2(m, expected):
    data = run_json(
        "account", "last-iterate", "--users", "100", "--batch-size", str(m), "--lipschitz", "1",
        "--radius", "1", "--lr", "0.5", "--noise", "1.5", "--delta", "1e-5",
        "--convex", "--smoothness", "4",  # Figure 2 uses the convex diameter 2 rho (eta = 2/beta)
    )
    methods = [r["method"] for r in data["results"]]
    assert methods == ["contraction", "contraction-sharpened", "rdp", "pld"]
    contraction = data["results"][0]
    assert round(contraction["epsilon"], 4) == expected
    assert contraction["kind"] == "bound" and contraction["neighbouring"] == "replace-one"
    assert all(r["delta"] == 1e-5 for r in data["results"])


def test_last_iterate_refuses_m_not_dividing_n():
    result = runner.invoke(
        app,
        ["account", "last-iterate", "--users", "100", "--batch-size", "30", "--lipschitz", "1",
         "--radius", "1", "--lr", "0.5", "--noise", "1.5", "--delta", "1e-5"],
    )
    assert result.exit_code == 2 and "batch_size" in result.stderr
