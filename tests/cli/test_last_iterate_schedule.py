"""`privfl account last-iterate --schedule one-pass|independent --rounds T` (issue 9 interface):
the multi-round extension of the last-iterate bound (spec seed4 section 9.3) from the command
line, with ``--rounds inf`` for its saturation limit."""

import json
import math

import pytest
from typer.testing import CliRunner

from privfl.accounting.contraction import ProjectedNoisySGD, theta
from privfl.cli.main import app

runner = CliRunner()

#: spec seed4 section 0 item 5: n = 1000, m = 10, eta = 0.5, sigma = 1.5, L = 1, rho = 0.02
SATURATION = [
    "account", "last-iterate", "--users", "1000", "--batch-size", "10", "--lipschitz", "1",
    "--radius", "0.02", "--lr", "0.5", "--paper-sigma", "1.5", "--delta", "1e-5", "--convex",
    "--smoothness", "1",
]


def run_json(*args):
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def by_method(data):
    return {r["method"]: r for r in data["results"]}


def test_inf_rounds_gives_the_saturation_limit():
    data = run_json(*SATURATION, "--schedule", "independent", "--rounds", "inf", "--method",
                    "none")
    results = by_method(data)
    assert list(results) == ["contraction", "contraction-sharpened"]
    plain = results["contraction"]
    assert round(plain["epsilon"], 2) == 1.65  # spec: saturates at eps = 1.65
    assert plain["steps"] == "inf" and data["setting"]["rounds"] == "inf"  # JSON-safe infinity
    assert plain["kind"] == "bound" and plain["unit"] == "record"
    assert "independent" in plain["sampling"] and "not in Asoodeh et al. 2021" in plain["note"]
    # the delta behind it is q theta(r1 + rc) / (1 - (1 - q) theta(rc))
    q, r1 = 0.01, 2 / (math.sqrt(10) * 1.5)
    rc = 2 * 0.02 * math.sqrt(10) / (0.5 * 1.5)
    eps = plain["epsilon"]
    delta_inf = q * theta(eps, r1 + rc) / (1 - (1 - q) * theta(eps, rc))
    assert delta_inf <= 1e-5 and delta_inf == pytest.approx(1e-5, rel=1e-6)
    assert results["contraction-sharpened"]["epsilon"] <= eps * (1 + 1e-12)


def test_finite_rounds_are_below_the_limit_and_compose_against_rdp():
    limit = by_method(run_json(*SATURATION, "--schedule", "independent", "--rounds", "inf"))
    data = run_json(*SATURATION, "--schedule", "independent", "--rounds", "2500", "--method",
                    "rdp")
    results = by_method(data)
    assert list(results) == ["contraction", "contraction-sharpened", "rdp"]
    contraction, rdp = results["contraction"], results["rdp"]
    assert contraction["steps"] == rdp["steps"] == 2500
    assert contraction["epsilon"] <= limit["contraction"]["epsilon"] + 1e-9
    # after ~1.9e3 independent rounds RDP (every iterate released) passes the saturated bound
    assert rdp["epsilon"] > contraction["epsilon"]
    assert rdp["kind"] == "bound" and rdp["baseline"] == "independent-rounds"
    assert "without-replacement" in rdp["sampling"]
    assert contraction["saturation_epsilon"] == pytest.approx(limit["contraction"]["epsilon"])


def test_one_pass_is_the_default_and_rounds_may_stop_early():
    base = ["account", "last-iterate", "--users", "100", "--batch-size", "10", "--lipschitz",
            "1", "--radius", "0.1", "--lr", "0.5", "--paper-sigma", "1.5", "--delta", "1e-5",
            "--method", "none"]
    default = by_method(run_json(*base))
    explicit = by_method(run_json(*base, "--schedule", "one-pass", "--rounds", "10"))
    assert default == explicit and default["contraction"]["steps"] == 10
    early = by_method(run_json(*base, "--rounds", "4"))["contraction"]
    run = ProjectedNoisySGD(100, 10, 1.0, 0.1, 0.5, 1.5, rounds=4)
    assert early["epsilon"] == pytest.approx(run.epsilon(1e-5), rel=1e-12)
    assert early["steps"] == 4 and "T=4 of 10 batches" in early["sampling"]


def test_per_round_lists_with_independent_rounds():
    data = run_json("account", "last-iterate", "--users", "50", "--batch-size", "5",
                    "--lipschitz", "1", "--radius", "0.2", "--lr", "0.5,0.4,0.3",
                    "--paper-sigma", "1.5", "--delta", "1e-3", "--schedule", "independent",
                    "--rounds", "3", "--method", "none")
    run = ProjectedNoisySGD(50, 5, 1.0, 0.2, [0.5, 0.4, 0.3], 1.5, schedule="independent",
                            rounds=3)
    assert data["results"][0]["epsilon"] == pytest.approx(run.epsilon(1e-3), rel=1e-12)


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--schedule", "independent"], "rounds = None"),
        (["--schedule", "independent", "--rounds", "ten"], "rounds = 'ten'"),
        (["--schedule", "independent", "--rounds", "0"], "rounds = 0"),
        (["--rounds", "inf"], "rounds"),  # one pass: at most n/m rounds
        (["--rounds", "101"], "rounds = 101"),
        (["--schedule", "independent", "--rounds", "5", "--baseline", "one-pass"], "one-pass"),
        (["--schedule", "independent", "--rounds", "5", "--release", "random-stop"],
         "random-stop"),
        (["--schedule", "shuffle"], "shuffle"),
    ],
)
def test_refusals_are_one_line_with_exit_2(extra, message):
    result = runner.invoke(app, [*SATURATION, *extra])
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "Traceback" not in result.output


def test_help_names_the_options():
    result = runner.invoke(app, ["account", "last-iterate", "--help"])
    assert result.exit_code == 0
    assert "--schedule" in result.stdout and "--rounds" in result.stdout
    assert "inf" in result.stdout
