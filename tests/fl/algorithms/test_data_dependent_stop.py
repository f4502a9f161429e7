"""A stop on a released metric (``stop.target_accuracy``) is part of the mechanism (issue 34,
item 3): the headline is the bound for every round the public stop rules allowed, and the
epsilon of the rounds that ran is shown labelled as an after-the-fact value."""

from __future__ import annotations

import copy
import json

import pytest

from privfl.algorithms.builders import privacy_plan
from privfl.config import config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment

# the tiny config's RDP bounds (weak scope, the headline's) after 1, 2 and 3 rounds
WEAK = {1: 3.6642454825368356, 2: 4.846539350852474, 3: 5.725878211862879}


def _config(raw, **stop):
    raw = copy.deepcopy(raw)
    raw["privacy"]["accountants"] = ["rdp"]
    raw["stop"] = {"target_accuracy": 1e-9, **stop}  # reached after round 1
    return config_from_dict(raw)


def _weak(results):
    return next(r["epsilon"] for r in results if r["scope"] == "weak")


def test_a_target_stop_reports_the_planned_rounds_bound(tmp_path, tiny_config_dict):
    config = _config(tiny_config_dict)
    assert {r: plan.epsilon for r in WEAK
            for plan in privacy_plan(config).results(r)
            if plan.extras["scope"] == "weak"} == pytest.approx(WEAK, rel=1e-12)
    result = Experiment.create(config, tmp_path / "run").run()
    summary = result.summary
    assert result.stop_reason == "target" and summary["rounds_completed"] == 1
    assert summary["rounds_accounted"] == 3
    # the headline, the final epsilon and privacy.json: the 3-round bound, never the 1-round one
    assert summary["headline"]["epsilon"] == pytest.approx(WEAK[3], rel=1e-12)
    assert summary["final"]["epsilon"] == pytest.approx(WEAK[3], rel=1e-12)
    saved = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert saved["rounds"] == 1 and saved["rounds_accounted"] == 3
    assert _weak(saved["results"]) == pytest.approx(WEAK[3], rel=1e-12)
    assert _weak(summary["privacy"]) == pytest.approx(WEAK[3], rel=1e-12)
    # the rounds-run value, labelled as what it is
    after = summary["after_the_fact"]
    assert after["rounds"] == 1 and after["kind"] == "after-the-fact"
    assert after["epsilon"] == pytest.approx(WEAK[1], rel=1e-12)
    assert saved["after_the_fact"] == after
    assert "after-the-fact value, not a bound" in summary["headline"]["advice"]
    assert "data-dependent stop" in result.card
    for name in ("report.md", "report.html"):
        text = (tmp_path / "run" / name).read_text()
        assert "epsilon = 5.726 at delta = 1e-5" in text, name
        assert "epsilon = 3.665 (RDP) for the 1 rounds that ran is an after-the-fact" in text
    assert check_run_privacy(tmp_path / "run").ok


def test_a_target_stop_is_covered_up_to_the_epsilon_budget(tmp_path, tiny_config_dict):
    # stop.epsilon between the 2- and 3-round bounds: the public rules allow 2 rounds
    config = _config(tiny_config_dict, epsilon=5.0)
    result = Experiment.create(config, tmp_path / "run").run()
    assert result.summary["rounds_completed"] == 1
    assert result.summary["rounds_accounted"] == 2
    assert result.summary["headline"]["epsilon"] == pytest.approx(WEAK[2], rel=1e-12)
    assert check_run_privacy(tmp_path / "run").ok


def test_check_privacy_refuses_the_rounds_run_value_as_the_guarantee(tmp_path,
                                                                      tiny_config_dict):
    config = _config(tiny_config_dict)
    Experiment.create(config, tmp_path / "run").run()
    path = tmp_path / "run" / "privacy.json"
    saved = json.loads(path.read_text())
    # forge the after-the-fact numbers as the guarantee
    saved["results"], saved["rounds_accounted"] = saved["after_the_fact"]["results"], 1
    path.write_text(json.dumps(saved))
    check = check_run_privacy(tmp_path / "run")
    assert not check.ok
    assert "rounds_accounted = 1, but the guarantee covers 3 rounds" in \
        check.released["problems"][0]
    saved["rounds_accounted"] = 3  # the right count, the wrong numbers
    path.write_text(json.dumps(saved))
    assert not check_run_privacy(tmp_path / "run").ok


def test_public_stops_cover_the_rounds_that_ran(tmp_path, tiny_config_dict):
    # pause (run.max_rounds) and the budget stop depend on public settings only
    raw = copy.deepcopy(tiny_config_dict)
    raw["privacy"]["accountants"] = ["rdp"]
    raw["run"]["max_rounds"] = 2
    result = Experiment.create(config_from_dict(raw), tmp_path / "run").run()
    assert result.stop_reason == "max_rounds"
    assert result.summary["rounds_accounted"] == 2 and "after_the_fact" not in result.summary
    assert result.summary["headline"]["epsilon"] == pytest.approx(WEAK[2], rel=1e-12)


def test_guarantee_rounds_bisects_the_budget():
    from privfl.runs.run_stops import guarantee_rounds

    budget = {r: r > 7 for r in range(0, 21)}  # rounds 8.. would exceed the budget
    assert guarantee_rounds("target", 3, 20, budget.__getitem__) == 7
    assert guarantee_rounds("target", 3, 5, budget.__getitem__) == 5
    assert guarantee_rounds("target", 7, 20, budget.__getitem__) == 7
    assert guarantee_rounds("budget", 3, 20, budget.__getitem__) == 3
    assert guarantee_rounds("max_rounds", 3, 20, budget.__getitem__) == 3
    with pytest.raises(ValueError, match=r"ran = 21 is out of range: must be in 0..planned = 20"):
        guarantee_rounds("target", 21, 20, budget.__getitem__)
