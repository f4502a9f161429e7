"""One name for the noise in `privfl account|calibrate|audit`: --noise-multiplier z (noise std on
the sum / clip norm), each paper's own sigma as --paper-sigma, exactly one of the two."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app

runner = CliRunner()

FEDFDP = ["account", "fedfdp", "--records", "600", "--batch-size", "16", "--local-steps", "38",
          "--rounds", "93", "--clients", "100", "--delta", "1e-5", "--method", "gdp-clt"]
PARTICIPATION = ["account", "participation", "--client-rate", "0.1", "--record-rate", "0.1",
                 "--records", "10", "--epsilon", "0.5", "--clip", "2"]
LAST_ITERATE = ["account", "last-iterate", "--users", "100", "--batch-size", "10",
                "--lipschitz", "2", "--radius", "1", "--lr", "0.5", "--delta", "1e-5",
                "--convex", "--smoothness", "4", "--method", "none"]
AUDIT = ["audit", "participation", "--participation-rate", "0.1", "--sampling-rate", "0.001",
         "--local-size", "1000", "--scale", "0.296", "--epsilon", "0.015", "--delta", "1e-6",
         "--clip-norm", "2"]


def invoke(*args):
    result = runner.invoke(app, list(args), env={"COLUMNS": "200"})  # --help: no cut names
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception)
    return result


def answer(*args):
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def numbers(data):
    """The numbers of each result row (method, scope or scheme, epsilon, delta, mu)."""
    return [(r["method"], r.get("scope"), r["epsilon"], r["delta"], r.get("mu"))
            for r in data["results"]]


def same_numbers(a, b, rel=0.0):
    for x, y in zip(numbers(a), numbers(b), strict=True):
        assert x[:2] == y[:2]
        for u, v in zip(x[2:], y[2:], strict=True):
            assert u == v if rel == 0.0 or u is None else u == pytest.approx(v, rel=rel)


# (command, multiplier value, paper value: the same noise in the paper's convention)
CONVERSIONS = [
    (FEDFDP, "2", "1"),  # Zheng et al. 2021: sigma = z / 2
    (PARTICIPATION, "0.75", "1.5"),  # Hasircioglu and Gunduz 2022: sigma = z C, C = 2
    # Asoodeh et al. 2021: sigma = z L / sqrt(m), L = 2, m = 10
    (LAST_ITERATE, repr(1.5 * math.sqrt(10) / 2), "1.5"),
]


@pytest.mark.parametrize(("command", "z", "sigma"), CONVERSIONS, ids=lambda v: str(v)[:20])
def test_noise_multiplier_and_paper_sigma_give_the_same_numbers(command, z, sigma):
    by_z, _ = answer(*command, "--noise-multiplier", z)
    by_sigma, _ = answer(*command, "--paper-sigma", sigma)
    # last-iterate goes z -> sigma -> z: equal up to rounding of sqrt(10)
    same_numbers(by_z, by_sigma, rel=1e-12 if command is LAST_ITERATE else 0.0)
    for data in (by_z, by_sigma):
        assert data["setting"]["noise_multiplier"] == pytest.approx(float(z), rel=1e-15)
        assert data["setting"]["paper_sigma"] == pytest.approx(float(sigma), rel=1e-15)
        assert "noise multiplier" in data["setting"]["noise"]


def test_fedfdp_noise_multiplier_reproduces_the_papers_table1_mu():
    """Zheng et al. 2021 Table 1, p = 1, sigma = 1 (z = 2), R = 93: mu = 2.71."""
    data, _ = answer(*FEDFDP, "--noise-multiplier", "2")
    weak = next(r for r in data["results"] if r["scope"] == "weak")
    assert weak["mu"] == pytest.approx(2.71, abs=0.005)


def test_last_iterate_per_round_lists_convert_element_by_element():
    at = LAST_ITERATE.index("--lr")
    lists = [*LAST_ITERATE[:at], "--lr", "0.5,0.4", *LAST_ITERATE[at + 2:], "--rounds", "2"]
    by_sigma, _ = answer(*lists, "--paper-sigma", "1.5,3")
    assert by_sigma["setting"]["noise_multiplier"] == pytest.approx(
        [1.5 * math.sqrt(10) / 2, 3 * math.sqrt(10) / 2], rel=1e-15)
    by_z, _ = answer(*lists, "--noise-multiplier", ",".join(
        repr(s * math.sqrt(10) / 2) for s in (1.5, 3.0)))
    same_numbers(by_z, by_sigma, rel=1e-12)


@pytest.mark.parametrize("command", [FEDFDP, PARTICIPATION, LAST_ITERATE],
                         ids=["fedfdp", "participation", "last-iterate"])
def test_both_or_neither_is_a_one_line_error_naming_the_options(command):
    for extra, words in (([], "the noise is missing"),
                         (["--noise-multiplier", "2", "--paper-sigma", "1"], "both given")):
        result = invoke(*command, *extra)
        assert result.exit_code == 2 and result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("privfl: error: ")
        assert words in lines[0] and "--noise-multiplier" in lines[0]
        assert "--paper-sigma" in lines[0]


@pytest.mark.parametrize("command", [FEDFDP, PARTICIPATION, LAST_ITERATE],
                         ids=["fedfdp", "participation", "last-iterate"])
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_a_bad_noise_names_the_option_it_came_from(command, value):
    for option in ("--noise-multiplier", "--paper-sigma"):
        result = invoke(*command, option, value)
        assert result.exit_code == 2
        assert result.stderr.startswith(f"privfl: error: {option} = ")
        assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("command", "old", "value"), [
    (FEDFDP, "--sigma", "1"), (PARTICIPATION, "--noise", "1.5"), (LAST_ITERATE, "--noise", "1.5")])
def test_old_option_names_still_work_with_a_notice(command, old, value):
    old_data, stderr = answer(*command, old, value)
    assert stderr == (f"privfl: warning: {old} is deprecated: it is --paper-sigma (the same "
                      "number)\n")
    new_data, _ = answer(*command, "--paper-sigma", value)
    assert old_data == new_data
    both = invoke(*command, old, value, "--paper-sigma", value)
    assert both.exit_code == 2 and "give it once" in both.stderr
    help_text = invoke(*command[:2], "--help").output
    assert old + " " not in help_text  # hidden


def test_calibrate_fedfdp_reports_the_noise_multiplier():
    data, _ = answer("calibrate", "fedfdp", "--records", "600", "--batch-size", "16",
                     "--local-steps", "38", "--rounds", "100", "--mu", "3")
    assert data["noise_multiplier"] == 2 * data["sigma"] == data["setting"]["noise_multiplier"]
    assert data["setting"]["sigma"] == data["sigma"] == pytest.approx(0.96372, abs=5e-6)
    # the solved noise gives back the target mu through `account fedfdp --noise-multiplier`
    check, _ = answer("account", "fedfdp", "--records", "600", "--batch-size", "16",
                      "--local-steps", "38", "--rounds", "100", "--clients", "2", "--delta",
                      "1e-5", "--method", "gdp-clt", "--noise-multiplier",
                      repr(data["noise_multiplier"]))
    weak = next(r for r in check["results"] if r["scope"] == "weak")
    assert weak["mu"] == pytest.approx(3.0, rel=1e-9)


def test_calibrate_participation_rows_carry_the_noise_multiplier():
    args = ["calibrate", "participation", "--client-rate", "0.1", "--record-rate", "0.1",
            "--records", "10", "--epsilon", "0.5", "--delta", "1e-6"]
    at_one, _ = answer(*args)
    at_two, _ = answer(*args, "--clip", "2")
    for row_one, row_two in zip(at_one["results"], at_two["results"], strict=True):
        assert row_one["noise_multiplier"] == row_one["noise"]  # C = 1
        assert row_two["noise"] == pytest.approx(2 * row_one["noise"], rel=1e-6)
        assert row_two["noise_multiplier"] == row_two["noise"] / 2
    assert "noise multiplier z = sigma / C" in at_two["setting"]["noise"]


def test_audit_participation_takes_the_noise_multiplier_or_the_std():
    """README example (std 0.646 at C = 1) at C = 2: z = 0.646 or std = 1.292, the same pair."""
    by_z = invoke(*AUDIT, "--noise-multiplier", "0.646", "--json")
    by_std = invoke(*AUDIT, "--std", "1.292", "--json")
    assert by_z.exit_code == by_std.exit_code == 1  # VIOLATED
    assert json.loads(by_z.stdout) == json.loads(by_std.stdout)
    for extra in ([], ["--noise-multiplier", "1", "--std", "2"]):
        result = invoke(*AUDIT, *extra)
        assert result.exit_code == 2 and "--noise-multiplier" in result.stderr
        assert "--std" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_every_account_and_calibrate_help_names_the_noise_multiplier():
    from privfl.cli.main import account_app, calibrate_app

    for group, typer_app in (("account", account_app), ("calibrate", calibrate_app)):
        for command in typer_app.registered_commands:
            name = command.name
            text = " ".join(invoke(group, name, "--help").output.split())
            # an input (--noise-multiplier) or, where it is solved for, an output named so
            assert "--noise-multiplier" in text or "noise multiplier z = " in text, (group, name)
            assert "--sigma " not in text and "--noise " not in text, (group, name)
