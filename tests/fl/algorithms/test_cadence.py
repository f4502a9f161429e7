"""Per-round accounting (privfl.algorithms.cadence and .plan_results): what each metrics row
carries, that privacy.json / summary.json / check-privacy / a budget stop still rest on every
accountant, and that a row cannot pass for less than the cadence says it holds."""

from __future__ import annotations

import copy
import json

import pytest

from privfl.algorithms.base import privacy_entries, tightest_bound
from privfl.algorithms.cadence import FULL, PER_ROUND, AccountingCadence
from privfl.config import config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment, privacy_plan

DP_FEDAVG = {
    "name": "cadence",
    "seed": 5,
    "data": {"dataset": "synthetic", "synthetic_examples": 480, "test_fraction": 0.25,
             "partition": "iid", "clients": 12, "test_size": 10},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 6, "optimizer": "sgd", "lr": 0.1},
    "privacy": {"noise_multiplier": 0.8, "clip_norm": 0.5, "delta": 1e-3,
                "accountants": ["rdp", "pld"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_rate": 0.5},
    "run": {"threads": 1},
}


def _config(**changes):
    raw = copy.deepcopy(DP_FEDAVG)
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        raw[section][key] = value
    return config_from_dict(raw)


# ---------------------------------------------------------------------------------- the rule
def test_full_rows_are_the_last_planned_round_and_every_kth():
    assert [AccountingCadence(5).full(r) for r in range(7)] == [False] * 5 + [True, True]
    assert [AccountingCadence(5, 2).full(r) for r in range(1, 6)] == [
        False, True, False, True, True]
    assert all(AccountingCadence(9, 1).full(r) for r in range(1, 10))


@pytest.mark.parametrize("args, name", [((0,), "planned_rounds"), ((3, 0), "every"),
                                        ((3, 1.5), "every"), ((True,), "planned_rounds")])
def test_cadence_refuses_bad_settings(args, name):
    with pytest.raises(ValueError, match=name):
        AccountingCadence(*args)


def test_the_config_refuses_a_bad_period():
    with pytest.raises(ValueError, match="full_accounting_every"):
        _config(privacy__full_accounting_every=0)


# ------------------------------------------------------------------- plans: the per-round set
PLANS = {
    "dp-fedavg": DP_FEDAVG,
    "prifedsync": {**DP_FEDAVG, "privacy": {"sigma": 1.0, "delta": 1e-5,
                                            "accountants": ["gdp-clt", "rdp", "pld"]},
                   "federated": {"algorithm": "prifedsync", "rounds": 3, "client_rate": 0.7},
                   "training": {"local_steps": 2, "batch_size": 8, "lr": 0.01}},
    "insdp-fedavg": {**DP_FEDAVG, "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
                     "training": {"local_steps": 2, "batch_size": 8, "lr": 0.01},
                     "federated": {"algorithm": "insdp-fedavg", "rounds": 3,
                                   "clients_per_round": 6, "paper_accounting": True}},
    "dp-dsgd": {**{k: v for k, v in DP_FEDAVG.items() if k != "training"},
                "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": [
                    "per-s1-convexity", "wcs", "ols", "theorem-4.1", "cs"]},
                "federated": {"algorithm": "dp-dsgd", "rounds": 3, "client_rate": 0.5,
                              "record_rate": 0.1}},
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_a_per_round_row_is_every_accountant_but_the_skipped_ones(name):
    plan = privacy_plan(config_from_dict(copy.deepcopy(PLANS[name])))
    skips = set(plan.round_skips)
    assert skips, "each of these plans composes a sampled PLD"
    for rounds in (0, 1, 2, 5):
        full, per_round = plan.results(rounds), plan.round_results(rounds)
        kept = [r for r in full if r.method not in skips]
        # bit for bit the same numbers and labels as the full set's, in the same order
        assert [r.to_dict() for r in per_round] == [r.to_dict() for r in kept]
        assert not {r.method for r in per_round} & skips
        if rounds >= 2:
            assert skips <= {r.method for r in full}
        # a rigorous bound stays on every per-round row (each config asks one besides pld)
        assert tightest_bound([r for r in per_round if r.extras.get("scope", "") in
                               ("", plan.primary_scope)]) is not None


def test_dp_dsgd_skips_the_pld_and_the_basic_compositions():
    plan = privacy_plan(config_from_dict(copy.deepcopy(PLANS["dp-dsgd"])))
    assert set(plan.round_skips) == {"wcs-pld", "ols-pld", "cs-pld", "per-s1-convexity-basic",
                                     "theorem-4.1-basic"}
    assert {r.method for r in plan.round_results(4) if r.extras["scope"] == "run"} == {
        "wcs-rdp", "ols-rdp", "cs-rdp"}


def test_a_plan_without_a_sampled_pld_skips_nothing():
    plan = privacy_plan(_config(privacy__accountants=["rdp", "gdp-clt"]))
    assert plan.round_skips == ()
    assert plan.round_results(3) == plan.results(3)


# ----------------------------------------------------------------------------------- a run
def _rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("cadence") / "run"
    Experiment.create(_config(), run).run()
    return run


def test_rows_before_the_last_carry_the_per_round_set(default_run):
    rows = _rows(default_run)
    assert [row["privacy_methods"] for row in rows] == [PER_ROUND, PER_ROUND, FULL]
    for row in rows[:2]:
        assert {e["method"] for e in row["privacy"]} == {"rdp"}
        assert row["epsilon_method"] == "rdp"
    assert {e["method"] for e in rows[2]["privacy"]} == {"rdp", "pld"}
    # the rows' epsilon is one series (rdp), also on the full row; its tighter pld is logged
    # beside it and is the headline's (summary.json, the next test)
    assert rows[2]["epsilon_method"] == "rdp"
    pld = [e["epsilon"] for e in rows[2]["privacy"] if e["method"] == "pld"
           and e["scope"] == rows[2]["scope"]]
    assert pld and min(pld) < rows[2]["epsilon"]


def test_privacy_json_and_the_summary_rest_on_every_accountant(default_run):
    saved = json.loads((default_run / "privacy.json").read_text())
    plan = privacy_plan(_config())
    assert [(r["method"], r["kind"], r["epsilon"]) for r in saved["results"]] == [
        (e["method"], e["kind"], e["epsilon"]) for e in privacy_entries(plan.results(3))]
    assert {r["method"] for r in saved["results"]} == {"rdp", "pld"}
    summary = json.loads((default_run / "summary.json").read_text())
    best = tightest_bound(plan.results(3))
    assert summary["final"]["epsilon"] == best.epsilon
    assert summary["final"]["epsilon_method"] == "pld"
    assert check_run_privacy(default_run).ok


def _tampered(default_run, tmp_path, edit):
    import shutil

    copy_dir = tmp_path / "copy"
    shutil.copytree(default_run, copy_dir)
    rows = _rows(copy_dir)
    edit(rows)
    (copy_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = check_run_privacy(copy_dir)
    return {row["round"]: " ".join(row["problems"]) for row in report.rows if not row["ok"]}


def test_check_privacy_refuses_a_last_row_that_claims_less(default_run, tmp_path):
    def edit(rows):
        rows[2]["privacy_methods"] = PER_ROUND
        rows[2]["privacy"] = [e for e in rows[2]["privacy"] if e["method"] != "pld"]

    problems = _tampered(default_run, tmp_path, edit)
    assert list(problems) == [3]
    assert "must carry every accountant" in problems[3]


def test_check_privacy_refuses_a_row_whose_label_was_dropped(default_run, tmp_path):
    problems = _tampered(default_run, tmp_path, lambda rows: rows[0].pop("privacy_methods"))
    assert list(problems) == [1]
    assert "pld" in problems[1] and "not logged" in problems[1]


def test_check_privacy_refuses_an_unknown_label(default_run, tmp_path):
    def edit(rows):
        rows[1]["privacy_methods"] = "some"

    assert "is not allowed" in _tampered(default_run, tmp_path, edit)[2]


def test_every_round_full_when_asked(tmp_path):
    Experiment.create(_config(privacy__full_accounting_every=1), tmp_path / "run").run()
    rows = _rows(tmp_path / "run")
    assert [row["privacy_methods"] for row in rows] == [FULL] * 3
    assert all(row["epsilon_method"] == "pld" for row in rows)
    assert check_run_privacy(tmp_path / "run").ok


# ------------------------------------------------------------------------------ budget stops
def test_a_budget_stop_decides_on_every_accountant(tmp_path):
    """stop.epsilon between the PLD and the RDP bound: the run goes on while the PLD bound is
    within the budget (a per-round set alone would have stopped it earlier), and stops exactly
    where a run with every accountant on every row stops."""
    plan = privacy_plan(_config(federated__rounds=8))

    def bound(method, r):
        return next(x.epsilon for x in plan.results(r) if x.method == method)

    for k in range(2, 7):
        low, high = bound("pld", k), min(bound("pld", k + 1), bound("rdp", k))
        if low < high:
            budget = (low + high) / 2
            break
    else:
        pytest.fail("no round where the budget separates the PLD and RDP bounds")
    stops = []
    for every in (None, 1):
        raw = copy.deepcopy(DP_FEDAVG)
        raw["federated"]["rounds"] = 8
        raw["privacy"]["full_accounting_every"] = every
        raw["stop"] = {"epsilon": budget}
        run = tmp_path / f"run-{every}"
        Experiment.create(config_from_dict(raw), run).run()
        summary = json.loads((run / "summary.json").read_text())
        stops.append((summary["rounds_completed"], summary["stop_reason"],
                      summary["stop_detail"]))
        assert summary["final"]["epsilon"] <= budget
    assert stops[0] == stops[1]
    assert stops[0][:2] == (k, "budget")
