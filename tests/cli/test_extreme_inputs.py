"""Extreme inputs end in an honest number or a one-line error naming the argument to change.

Never a traceback, never a wrong number (issue 8, item 6). Each case of the issue is here:
``--steps 1e11`` (every method), ``--discretization 1e-9``, ``--orders 1e8``,
``--noise-multiplier 0.05`` at q = 0.5, ``--steps`` of 400 digits, ``calibrate dpsgd --epsilon
1e9 --method pld``, ``--noise-multiplier 1e-10``, ``fedfdp --paper-sigma 0.01``;
``account(None, ...)`` is in ``tests/accounting/test_extreme_numerics.py``.
"""

import json
import math
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from privfl.cli.common import user_errors
from privfl.cli.main import app

runner = CliRunner()

def dpsgd(*more, q="0.01", z="1.0", steps="1000"):
    required = ["--sampling-rate", q, "--noise-multiplier", z, "--steps", steps]
    return ["account", "dpsgd", *required, "--delta", "1e-5", *more]


FEDFDP_OPTIONS = {"records": 600, "batch-size": 60, "local-steps": 10, "rounds": 100}
FEDFDP = ["account", "fedfdp", "--paper-sigma", "0.01", "--clients", "10", "--delta", "1e-5"] + [
    part for name, value in FEDFDP_OPTIONS.items() for part in (f"--{name}", str(value))
]


def refused(args, *names):
    """Run; assert exit 2 and one stderr line ``privfl: error: ...`` naming one of ``names``."""
    result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("privfl: error: ")
    assert "Traceback" not in result.output
    assert any(name in lines[0] for name in names), lines[0]
    return lines[0]


def answered(args):
    """Run with --json; assert exit 0 and no traceback; the parsed JSON."""
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "Traceback" not in result.output
    return json.loads(result.stdout)


def by_method(data):
    return {r["method"]: r for r in data["results"]}


def as_float(value):
    return float(value) if not isinstance(value, str) else float(value.replace("Infinity", "inf"))


# ------------------------------------------------------------------ --steps 100000000000
def test_huge_steps_rdp_and_gdp_are_closed_forms_that_answer():
    rdp = by_method(answered(dpsgd("--method", "rdp", steps="100000000000")))["rdp"]
    gdp = by_method(answered(dpsgd("--method", "gdp", steps="100000000000")))["gdp-clt"]
    # the true epsilon is at least T * KL = 1e11 * 8.38122e-5 (mpmath), the RDP bound is above it
    assert 8.38e6 < rdp["epsilon"] < 8.5e6 and rdp["kind"] == "bound"
    assert "smallest of the grid" in rdp["note"]
    assert gdp["kind"] == "estimate" and 8.5e6 < gdp["epsilon"] < 8.7e6


def test_huge_steps_pld_refuses_naming_what_to_change():
    refused(dpsgd("--method", "pld", steps="100000000000"), "discretization", "steps")


def test_huge_steps_all_methods_report_rdp_and_gdp_and_say_why_not_pld():
    data = answered(dpsgd(steps="100000000000"))
    assert set(by_method(data)) == {"rdp", "gdp-clt"}
    assert "discretization" in data["unsupported"]["pld"]


def test_largest_step_count_answers_and_one_more_is_refused():
    top = str(2**63 - 1)
    assert math.isfinite(by_method(answered(dpsgd("--method", "rdp", steps=top)))["rdp"]["epsilon"])
    assert math.isfinite(
        by_method(answered(dpsgd("--method", "gdp", steps=top)))["gdp-clt"]["epsilon"]
    )
    refused(dpsgd("--method", "rdp", steps=str(2**63)), "steps")


# ------------------------------------------------------------------ --steps of 400 digits
@pytest.mark.parametrize("method", ["gdp", "rdp", "pld", "all"])
def test_steps_of_400_digits_is_a_one_line_error_naming_steps(method):
    line = refused(dpsgd("--method", method, steps="9" * 400), "steps")
    assert "400-digit" in line and len(line) < 200


# ------------------------------------------------------------------ --discretization 1e-9
def test_tiny_discretization_is_refused_naming_discretization():
    refused(dpsgd("--method", "pld", "--discretization", "1e-9"), "discretization")


# ------------------------------------------------------------------ --orders 1e8
def test_huge_order_is_refused_naming_orders():
    line = refused(dpsgd("--method", "rdp", "--orders", "1e8"), "orders")
    assert "1e+08" in line and "100000" in line


def test_huge_order_with_all_methods_reports_the_others():
    data = answered(dpsgd("--orders", "1e8"))
    assert "rdp" not in by_method(data) and {"pld", "gdp-clt"} <= set(by_method(data))
    assert "orders" in data["unsupported"]["rdp"]


def test_huge_order_without_subsampling_is_a_closed_form():
    rdp = by_method(answered(dpsgd("--method", "rdp", "--orders", "1e8,2", q="1")))["rdp"]
    assert math.isfinite(rdp["epsilon"])


# ------------------------------------------------------------------ --noise-multiplier 0.05, q 0.5
def test_small_noise_large_rate_pld_refuses_rdp_answers():
    refused(dpsgd("--method", "pld", q="0.5", z="0.05"), "discretization", "noise_multiplier")
    rdp = by_method(answered(dpsgd("--method", "rdp", q="0.5", z="0.05")))["rdp"]
    assert rdp["kind"] == "bound" and 1e5 < rdp["epsilon"] < 2e5


def test_small_noise_large_rate_all_methods_report_rdp_and_gdp():
    data = answered(dpsgd(q="0.5", z="0.05"))
    assert {"rdp", "gdp-clt"} == set(by_method(data)) and "pld" in data["unsupported"]


# ------------------------------------------------------------------ --noise-multiplier 1e-10
def test_tiny_noise_rdp_is_the_gaussian_limit():
    rdp = by_method(answered(dpsgd("--method", "rdp", z="1e-10")))["rdp"]
    # rdp(a) = a / (2 z^2) to 1e-12 here; the optimal order is the grid's smallest, 1.01
    assert rdp["epsilon"] == pytest.approx(1000 * 1.01 / 2e-20, rel=1e-9)


def test_tiny_noise_gdp_says_its_estimate_is_infinite():
    gdp = by_method(answered(dpsgd("--method", "gdp", z="1e-10")))["gdp-clt"]
    assert math.isinf(as_float(gdp["epsilon"])) and "float range" in gdp["note"]


def test_tiny_noise_pld_refuses():
    refused(dpsgd("--method", "pld", z="1e-10"), "discretization", "noise_multiplier")


def test_tiny_noise_all_methods_answer_what_they_can():
    data = answered(dpsgd(z="1e-10"))
    assert {"rdp", "gdp-clt"} == set(by_method(data)) and "pld" in data["unsupported"]


# ------------------------------------------------------------------ calibrate --epsilon 1e9
@pytest.mark.slow  # tens of seconds on 2 cores: `make test-slow`
def test_calibrating_noise_for_a_huge_epsilon_gives_a_certified_answer_or_refuses():
    calibrate = "calibrate dpsgd --epsilon 1e9 --delta 1e-5 --sampling-rate 0.01 --steps 1000"
    result = runner.invoke(app, [*calibrate.split(), "--method", "pld", "--json"])
    assert "Traceback" not in result.output and result.exit_code in (0, 2), result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    if result.exit_code == 2:
        assert lines[0].startswith("privfl: error: ") and "epsilon" in lines[0]
    else:  # the smallest noise the pld accountant certified, with a warning saying so
        data = json.loads(result.stdout)
        assert data["results"][0]["kind"] == "bound"
        assert data["results"][0]["epsilon"] <= 1e9
        assert lines[0].startswith("privfl: warning: ")


# ------------------------------------------------------------ fedfdp --paper-sigma 0.01
def test_fedfdp_tiny_sigma_clt_estimate_is_infinite_not_an_error():
    data = answered([*FEDFDP, "--method", "gdp"])
    for row in data["results"]:
        assert math.isinf(as_float(row["epsilon"])) and "float range" in row["note"]


def test_fedfdp_tiny_sigma_rdp_bounds_it():
    data = answered([*FEDFDP, "--method", "rdp"])
    assert all(math.isfinite(row["epsilon"]) for row in data["results"])


def test_fedfdp_tiny_sigma_all_methods_report_the_clt_and_say_why_not_pld():
    data = answered(FEDFDP)
    assert {row["method"] for row in data["results"]} == {"gdp-clt"}
    assert "pld" in data["unsupported"]


# ------------------------------------------------------------------ the last resort
@pytest.mark.parametrize(
    ("error", "words"),
    [
        (MemoryError("Unable to allocate 42.1 GiB\nfor an array"), "out of memory"),
        (OverflowError("int too large to convert to float"), "OverflowError"),
        (ZeroDivisionError("float division by zero"), "ZeroDivisionError"),
        (ValueError("x = 1 is out of range:\n  must be < 1"), "x = 1 is out of range: must be"),
    ],
)
def test_user_errors_turns_what_no_check_caught_into_one_line(error, words, capsys):
    @user_errors
    def command():
        raise error

    with pytest.raises(typer.Exit) as exit_info:
        command()
    assert exit_info.value.exit_code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err


def test_extreme_input_end_to_end_in_a_fresh_process():
    """The installed entry point, not the test runner: one line on stderr, exit status 2."""
    proc = subprocess.run(
        [sys.executable, "-m", "privfl.cli.main", *dpsgd("--method", "gdp", steps="9" * 400)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "steps" in proc.stderr
    assert "Traceback" not in proc.stderr
