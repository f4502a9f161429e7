"""`account dp-ftrl | bandmf` and `calibrate dp-ftrl | bandmf` (registered on a fresh app here;
privfl.cli.main registers them with privfl.cli.correlated.register)."""

from __future__ import annotations

import json
import math

import pytest
import typer
from typer.testing import CliRunner

from privfl.accounting.correlated.accountant import NEIGHBOURING
from privfl.cli.correlated import register


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    root = typer.Typer()
    account, calibrate = typer.Typer(), typer.Typer()
    root.add_typer(account, name="account")
    root.add_typer(calibrate, name="calibrate")
    register(account, calibrate)
    return root


def _json(app: typer.Typer, *args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_account_dp_ftrl_single_participation(app: typer.Typer) -> None:
    out = _json(
        app, "account", "dp-ftrl", "--rounds", "1000", "--noise-multiplier", "2", "--delta", "1e-5"
    )
    assert out["setting"]["sensitivity"] == pytest.approx(math.sqrt(10))
    by = {r["method"].split(" ")[0]: r for r in out["results"]}
    assert by["gdp"]["epsilon"] == pytest.approx(7.5112759, rel=1e-7)
    assert by["rdp"]["epsilon"] == pytest.approx(8.0878616, rel=1e-7)
    for r in out["results"]:
        assert r["neighbouring"] == NEIGHBOURING and r["unit"] == "client"
        assert "exact" in r["sampling"]


def test_account_dp_ftrl_multiple_participations_is_larger(app: typer.Typer) -> None:
    one = _json(
        app,
        "account",
        "dp-ftrl",
        "--rounds",
        "64",
        "--noise-multiplier",
        "2",
        "--delta",
        "1e-5",
        "--method",
        "gdp",
    )
    two = _json(
        app,
        "account",
        "dp-ftrl",
        "--rounds",
        "64",
        "--noise-multiplier",
        "2",
        "--delta",
        "1e-5",
        "--participations",
        "2",
        "--min-separation",
        "32",
        "--schedule",
        "cyclic",
        "--method",
        "gdp",
    )
    assert two["setting"]["sensitivity"] > one["setting"]["sensitivity"]
    assert two["results"][0]["epsilon"] > one["results"][0]["epsilon"]


def test_account_bandmf_with_and_without_amplification(app: typer.Typer) -> None:
    plain = _json(
        app,
        "account",
        "bandmf",
        "--rounds",
        "100",
        "--band",
        "10",
        "--noise-multiplier",
        "1",
        "--delta",
        "1e-5",
        "--participations",
        "10",
        "--min-separation",
        "10",
        "--method",
        "gdp",
    )
    assert plain["setting"]["sensitivity"] == pytest.approx(math.sqrt(10))
    amplified = _json(
        app,
        "account",
        "bandmf",
        "--rounds",
        "100",
        "--band",
        "10",
        "--noise-multiplier",
        "1",
        "--delta",
        "1e-5",
        "--sampling-rate",
        "0.1",
    )
    assert {r["method"] for r in amplified["results"]} == {
        "pld (BandMF amplification)",
        "rdp (BandMF amplification)",
    }
    assert min(r["epsilon"] for r in amplified["results"]) < plain["results"][0]["epsilon"]


def test_calibrate_round_trips(app: typer.Typer) -> None:
    out = _json(
        app, "calibrate", "dp-ftrl", "--rounds", "1000", "--epsilon", "2", "--delta", "1e-5"
    )
    z = out["setting"]["noise_multiplier"]
    gdp = next(r for r in out["results"] if r["method"].startswith("gdp"))
    assert gdp["epsilon"] <= 2.0 and gdp["epsilon"] == pytest.approx(2.0, rel=1e-9)
    assert z == pytest.approx(math.sqrt(10) / 0.501552, rel=1e-5)  # mu(2, 1e-5) = 0.501552
    band = _json(
        app,
        "calibrate",
        "bandmf",
        "--rounds",
        "100",
        "--band",
        "10",
        "--epsilon",
        "2",
        "--delta",
        "1e-5",
    )
    assert band["setting"]["noise_multiplier"] == pytest.approx(1 / 0.501552, rel=1e-5)


def test_errors_are_one_line(app: typer.Typer) -> None:
    result = CliRunner().invoke(
        app,
        [
            "account",
            "bandmf",
            "--rounds",
            "100",
            "--band",
            "10",
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--participations",
            "3",
            "--min-separation",
            "5",
        ],
    )
    assert result.exit_code == 2 and "min_separation = 5 is below band = 10" in result.output
    result = CliRunner().invoke(
        app,
        [
            "account",
            "dp-ftrl",
            "--rounds",
            "10",
            "--noise-multiplier",
            "1",
            "--delta",
            "1e-5",
            "--participations",
            "2",
        ],
    )
    assert result.exit_code == 2 and "needs --min-separation" in result.output


def test_text_report(app: typer.Typer) -> None:
    result = CliRunner().invoke(
        app, ["account", "dp-ftrl", "--rounds", "16", "--noise-multiplier", "3", "--delta", "1e-5"]
    )
    assert result.exit_code == 0 and "replace-with-zero" in result.output


# ---------------------------------------------------------------- issue 34, item 7: the corners
BANDMF = ("bandmf", "--rounds", "100", "--band", "10", "--delta", "1e-5")


def _by_method(out: dict) -> dict[str, float]:
    return {r["method"].split(" ")[0]: r["epsilon"] for r in out["results"]}


def test_account_bandmf_at_rate_one_counts_every_participation(app: typer.Typer) -> None:
    """q = 1: every member of the group joins, so each client participates ceil(100/10) = 10
    times (the unamplified participation bound, sensitivity sqrt(10)); it printed the
    one-participation PLD 1.993 before."""
    full = _json(app, "account", *BANDMF, "--noise-multiplier", "2", "--sampling-rate", "1")
    assert full["setting"]["sensitivity"] == pytest.approx(math.sqrt(10), rel=1e-12)
    eps = _by_method(full)
    # mu = sqrt(10) / 2: the same number as DP-FTRL's 1000 rounds (sensitivity sqrt(10), z 2)
    assert eps["gdp"] == pytest.approx(7.5112759, rel=1e-7)
    assert eps["pld"] == pytest.approx(7.5112759, rel=1e-7)
    assert "10 participations in 100 rounds" in full["results"][0]["sampling"]
    # the amplified path just below q = 1 agrees (and is no larger)
    near = _by_method(_json(app, "account", *BANDMF, "--noise-multiplier", "2",
                            "--sampling-rate", "0.999"))
    assert near["pld"] == pytest.approx(7.5046, abs=1e-3)
    assert near["pld"] <= eps["pld"]
    # the groups' participation given explicitly is the same setting; gdp is allowed at q = 1
    given = _json(app, "account", *BANDMF, "--noise-multiplier", "2", "--sampling-rate", "1",
                  "--participations", "10", "--min-separation", "10", "--method", "gdp")
    assert _by_method(given)["gdp"] == eps["gdp"]


def test_calibrate_bandmf_at_rate_one_prints_the_epsilon_it_solved_for(
    app: typer.Typer,
) -> None:
    out = _json(app, "calibrate", *BANDMF, "--epsilon", "2", "--sampling-rate", "1")
    z = out["setting"]["noise_multiplier"]
    assert z == pytest.approx(math.sqrt(10) / 0.501552, rel=1e-5)  # k = 10 participations
    eps = _by_method(out)
    assert eps["gdp"] <= 2.0 and eps["gdp"] == pytest.approx(2.0, rel=1e-6)  # not 0.68 (k = 1)
    assert "10 participations in 100 rounds" in out["results"][0]["sampling"]


@pytest.mark.parametrize("command", [("account", "--noise-multiplier", "1"),
                                     ("calibrate", "--epsilon", "2")])
@pytest.mark.parametrize("rate", ["0.1", "1"])
@pytest.mark.parametrize("participation", [("--participations", "20", "--min-separation", "5"),
                                           ("--participations", "5", "--min-separation", "20")])
def test_bandmf_with_a_sampling_rate_refuses_another_participation(
    app: typer.Typer, command: tuple[str, ...], rate: str, participation: tuple[str, ...]
) -> None:
    """The sampling is within band cyclic groups: a participation bound that is not theirs
    (a separation below the band included) is refused, as without a rate and in training."""
    group, *option = command
    result = CliRunner().invoke(app, [group, *BANDMF, *option, "--sampling-rate", rate,
                                      *participation])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "not allowed, the sampling is within band = 10 cyclic groups" in text


def test_bandmf_with_a_sampling_rate_accepts_the_groups_participation(app: typer.Typer) -> None:
    plain = _json(app, "account", *BANDMF, "--noise-multiplier", "1", "--sampling-rate", "0.1")
    given = _json(app, "account", *BANDMF, "--noise-multiplier", "1", "--sampling-rate", "0.1",
                  "--participations", "10", "--min-separation", "10", "--schedule", "cyclic")
    assert _by_method(given) == _by_method(plain)


@pytest.mark.parametrize("group", [("account", "--noise-multiplier", "2"),
                                   ("calibrate", "--epsilon", "2")])
def test_bandmf_overlap_guard_at_both_boundaries(app: typer.Typer, group: tuple[str, ...]) -> None:
    """band == separation: accepted with sensitivity sqrt(3); band == separation + 1: refused
    (the columns overlap), through account and calibrate as through the Python API."""
    base = [group[0], "bandmf", "--rounds", "30", "--delta", "1e-5", *group[1:],
            "--participations", "3", "--min-separation", "10"]
    ok = _json(app, *base, "--band", "10")
    gdp = next(r for r in ok["results"] if r["method"].startswith("gdp"))
    assert gdp["mu"] * ok["setting"]["noise_multiplier"] == pytest.approx(math.sqrt(3), rel=1e-12)
    result = CliRunner().invoke(app, [*base, "--band", "11"])
    assert result.exit_code == 2
    assert "min_separation = 10 is below band = 11" in " ".join(result.output.split())
