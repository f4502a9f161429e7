"""`privfl distortion tv | noise | sampling | tradeoff` from the command line."""

import json
import math

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app

runner = CliRunner()


def run_json(*args):
    result = runner.invoke(app, ["distortion", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def fails(*args):
    result = runner.invoke(app, ["distortion", *args])
    assert result.exit_code == 2, result.output
    return result.output


def test_tv_exact_with_the_lemma_6_7_sandwich():
    out = run_json("tv", "--variance", "1", "--distorted-variance", "1.05", "--dimension", "100")
    assert out["command"] == "distortion tv"
    assert out["tv"] == pytest.approx(0.136726920644, abs=1e-9)
    assert (out["sandwich"]["lower"], out["sandwich"]["upper"]) == pytest.approx((0.005, 0.75))
    smaller = run_json("tv", "--variance", "2", "--distorted-variance", "1", "--dimension", "1")
    assert smaller["tv"] == pytest.approx(0.166064074984, abs=1e-9)  # T4, symmetric


def test_tv_text_output():
    result = runner.invoke(app, ["distortion", "tv", "--variance", "1", "--distorted-variance",
                                 "2", "--dimension", "100"])
    assert result.exit_code == 0 and "0.985251" in result.output and "Lemma 6.7" in result.output


def test_noise_paper_and_exact_side_by_side():
    out = run_json("noise", "--variance", "1", "--dimension", "100", "--gap", "0.005")
    paper, exact = out["results"]
    assert (paper["method"], exact["method"]) == ("paper", "exact")
    assert paper["noise_variance"] == pytest.approx(0.05)
    assert paper["tv"] == pytest.approx(0.136726920644, abs=1e-9)
    assert exact["noise_variance"] == pytest.approx(0.00177699902, rel=1e-8)
    assert exact["tv"] == pytest.approx(0.005, rel=1e-9)
    same = run_json("noise", "--variance", "1", "--dimension", "100", "--c1", "0.5", "--tau",
                    "0.495")
    assert same["results"][0]["noise_variance"] == pytest.approx(0.05)


def test_noise_paper_rule_refused_outside_its_domain():
    out = run_json("noise", "--variance", "1", "--dimension", "100", "--gap", "0.05")
    paper, exact = out["results"]
    assert paper["noise_variance"] is None and "out of range for Lemma 6.8" in paper["refused"]
    assert exact["tv"] == pytest.approx(0.05, rel=1e-9)
    not_binding = run_json("noise", "--variance", "1", "--dimension", "10", "--gap", "-0.1")
    assert [r["noise_variance"] for r in not_binding["results"]] == [0.0, 0.0]


def test_sampling_rules():
    out = run_json("sampling", "--c6", "10", "--c1", "0.5", "--tau", "0.495",
                   "--gradient-sq-sum", "0.25")
    paper, corrected = out["results"]
    assert paper["p_min"] == pytest.approx(0.276393202250, abs=1e-11)
    assert paper["feasible"] and not corrected["feasible"] and corrected["p_min"] is None
    assert "infeasible" in corrected["note"]


def test_tradeoff_bounds():
    out = run_json("tradeoff", "--c1", "0.3", "--xi", "0.5", "--c6", "2",
                   "--expected-variance", "0.1", "--tv", "0.1")
    upper, lower = out["results"]
    assert upper["value"] == pytest.approx(0.557042954289, abs=1e-9) and upper["proven"]
    assert lower["value"] == 0.3 and not lower["proven"]
    assert out["constants"]["c2"] == pytest.approx(0.859140914230, abs=1e-9)
    opt = run_json("tradeoff", "--c1", "0.3", "--xi", "0.5", "--c6", "1",
                   "--expected-variance", "0.349186024122", "--gamma", "1", "--nfl-delta",
                   "0.5", "--gradient-sq-sum", "2", "--leakage", "0.1")
    assert opt["optimum"]["sampling_probability"] == pytest.approx(0.225396671653, abs=1e-9)
    assert opt["optimum"]["cd_matches"] is True
    span = opt["utility_loss_range"]
    assert span["min_nfl"] == pytest.approx(0.232790682748, abs=1e-9)
    assert span["max_theorem_6_12"] == pytest.approx(0.232790682748, abs=1e-9)


@pytest.mark.parametrize(("args", "message"), [
    (("tv", "--variance", "-1", "--distorted-variance", "1", "--dimension", "3"),
     "variance = -1.0 is out of range"),
    (("tv", "--variance", "1", "--distorted-variance", "1", "--dimension", "0"),
     "dimension = 0 is out of range"),
    (("noise", "--variance", "1", "--dimension", "10", "--gap", "1.0"),
     "target_tv = 1.0 is infeasible"),
    (("noise", "--variance", "1", "--dimension", "10"), "gap is missing"),
    (("noise", "--variance", "1", "--dimension", "10", "--c1", "1.5", "--tau", "0.1"),
     "c1 = 1.5 is out of range"),
    (("sampling", "--c6", "10", "--c1", "0.5", "--tau", "0.49", "--gradient-sq-sum", "0.25"),
     "tau = 0.49 is infeasible"),
    (("sampling", "--c6", "1", "--c1", "0.5", "--tau", "-0.1", "--gradient-sq-sum", "1"),
     "tau = -0.1 is out of range"),
    (("tradeoff", "--c1", "0.3", "--xi", "0.5", "--c6", "2", "--expected-variance", "0.1",
      "--tv", "1.5"), "tv = 1.5 is out of range"),
    (("tradeoff", "--c1", "0.3", "--xi", "0.5", "--c6", "2", "--expected-variance", "0.1",
      "--gamma", "1"), "gamma and nfl_delta go together"),
])
def test_bad_input_one_line_exit_2(args, message):
    output = fails(*args)
    assert output.startswith("privfl: error: ") and message in output
    assert output.count("\n") == 1


def test_infinite_values_are_json_strings():
    # xi = 0: C2 = 0, so the no-free-lunch range is unbounded on both sides
    out = run_json("tradeoff", "--c1", "0.3", "--xi", "0", "--c6", "2",
                   "--expected-variance", "0.1", "--leakage", "0.1")
    assert out["utility_loss_range"]["min_nfl"] == "-inf"
    assert out["utility_loss_range"]["max_theorem_6_12"] == "inf"
    assert math.isinf(float(out["utility_loss_range"]["max_theorem_6_12"]))


def test_tv_per_coordinate_variances_from_npy(tmp_path):
    """Issue 21: `distortion tv --variances A.npy --distorted-variances B.npy`."""
    import numpy as np

    from privfl.distortion.diagonal import tv_gaussian_diagonal
    from privfl.distortion.divergence import tv_gaussian_isotropic

    a = np.exp(np.random.default_rng(0).uniform(-20, -11, 300))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a + 1e-8)
    np.save(tmp_path / "same.npy", 1.05 * a)
    out = run_json("tv", "--variances", str(tmp_path / "a.npy"), "--distorted-variances",
                   str(tmp_path / "b.npy"), "--draws", "4000")
    expected = tv_gaussian_diagonal(a, a + 1e-8)
    assert out["tv"] == pytest.approx(expected.tv, rel=1e-12) and out["setting"]["dimension"] == 300
    assert out["tv_lower"] <= out["tv"] <= out["tv_upper"] and out["bracket"]["certified"]
    assert out["kind"].startswith("numerical") and out["tv_error"] < 1e-8
    assert abs(out["monte_carlo"]["tv"] - out["tv"]) <= 4 * out["monte_carlo"]["se"]
    equal = run_json("tv", "--variances", str(tmp_path / "a.npy"), "--distorted-variances",
                     str(tmp_path / "same.npy"), "--dimension", "300")
    assert equal["kind"].startswith("exact")
    assert equal["tv"] == pytest.approx(tv_gaussian_isotropic(1, 1.05, 300), rel=1e-12)
    np.save(tmp_path / "short.npy", a[:10])
    np.save(tmp_path / "matrix.npy", np.ones((2, 2)))
    for args, fragment in [
        (("--variances", str(tmp_path / "a.npy"), "--distorted-variances",
          str(tmp_path / "short.npy")), "variances has 300 entries and --distorted-variances 10"),
        (("--variances", str(tmp_path / "matrix.npy"), "--distorted-variances",
          str(tmp_path / "a.npy")), "must be a 1-D numeric array"),
        (("--variances", str(tmp_path / "missing.npy"), "--distorted-variances",
          str(tmp_path / "a.npy")), "is not a readable .npy array"),
        (("--variances", str(tmp_path / "a.npy")), "give both --variances"),
        (("--variances", str(tmp_path / "a.npy"), "--distorted-variances",
          str(tmp_path / "b.npy"), "--dimension", "7"), "dimension = 7 does not match"),
        (("--variance", "1", "--dimension", "3"), "is missing"),
    ]:
        message = fails("tv", *args)
        assert fragment in message and message.count("\n") == 1, message


@pytest.mark.parametrize(("args", "fragment"), [
    # issue 21: C2 = (e^(2 xi) - 1) / 2 overflows: the bound was printed as -inf
    (("tradeoff", "--c1", "0.3", "--xi", "400", "--c6", "1", "--expected-variance", "0.3"),
     "xi = 400.0 is out of range: C2 = (e^(2 xi) - 1) / 2 is infinite"),
    (("tradeoff", "--c1", "0.3", "--xi", "inf", "--c6", "1", "--expected-variance", "0.3"),
     "xi = inf is out of range"),
    # sqrt-JS leakages live in [0, sqrt(ln 2)]
    (("tradeoff", "--c1", "0.9", "--xi", "0.5", "--c6", "1", "--expected-variance", "0.3"),
     "c1 = 0.9 is out of range: a sqrt-JS leakage"),
    (("tradeoff", "--c1", "0.3", "--xi", "0.5", "--c6", "1", "--expected-variance", "0.3",
      "--leakage", "0.9"), "leakage = 0.9 is out of range: a sqrt-JS leakage"),
    (("sampling", "--c6", "1", "--c1", "0.85", "--tau", "0.1", "--gradient-sq-sum", "1"),
     "c1 = 0.85 is out of range"),
    # --tau 5 was reported as "gap = -4.5"
    (("noise", "--variance", "1", "--dimension", "10", "--c1", "0.5", "--tau", "5"),
     "tau = 5.0 is out of range: a sqrt-JS leakage"),
])
def test_out_of_range_leakage_and_xi_are_refused(args, fragment):
    message = fails(*args)
    assert fragment in message and message.count("\n") == 1, message


def test_sampling_with_c6_zero_gives_the_right_reason():
    out = run_json("sampling", "--c6", "0", "--c1", "0.5", "--tau", "0.4",
                   "--gradient-sq-sum", "1")
    for rule in out["results"]:
        assert rule["p_min"] == 0.0 and rule["note"].startswith("C6 = 0")
        assert "C1 <= tau" not in rule["note"]  # C1 = 0.5 > tau = 0.4
