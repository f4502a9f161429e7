"""privacy.epsilon_budget (issue 44, item 4): a budget fixed at creation that a privacy filter
enforces, however often the run is extended and its stop rules changed after reading its
results; and the first plan of a run extended without one."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from privfl.accounting.events import NoisyStep, PrivacyEvent, Sampling
from privfl.accounting.rdp.accountant import RdpAccountant
from privfl.accounting.rdp.conversion import epsilon_from_rdp
from privfl.algorithms.builders import privacy_plan
from privfl.config import ConfigError
from privfl.config.loader import load_config
from privfl.mechanisms.schedule import CyclicGroups
from privfl.runs.budget import plan_filter
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment

DEMO = Path(__file__).resolve().parents[3] / "configs" / "demo-dp-fedavg.yaml"
#: E = 3 at delta = 1e-4 on the DP-FedAvg demo (q = 0.3, z = 1.5): the order fixed at creation
#: and the rounds it affords (the fixed-horizon RDP at 7 rounds: 2.997; at 8: 3.24)
ORDER, ROUNDS = 4.9, 7


def _rdp(rounds: int, order: float = ORDER) -> float:
    step = NoisyStep(1.5, 0.3, Sampling.POISSON)
    return float(RdpAccountant(orders=[order]).rdp_curve(
        PrivacyEvent(((step, rounds),)))[0])


def _demo(**privacy):
    return load_config(DEMO, [f"privacy.{k}={v}" for k, v in privacy.items()]
                       + ["federated.rounds=3"])


def test_a_budgeted_run_extended_twice_stops_at_the_budget(tmp_path):
    run = tmp_path / "run"
    first = Experiment.create(_demo(epsilon_budget=3), run).run(progress=False)
    assert first.stop_reason == "rounds" and first.summary["rounds_completed"] == 3
    created = json.loads((run / "run.json").read_text())["plan"]
    assert created["rounds"] == 3 and created["epsilon_budget"] == 3.0
    assert created["filter"]["filter"] == "renyi" and created["filter"]["order"] == ORDER
    assert created["filter"]["horizon"] == ROUNDS
    seen = [first]
    # look, train more with a target; look again, drop the target and train much more
    seen.append(Experiment.resume(run, ["federated.rounds=5", "stop.target_accuracy=0.999"])
                .run(progress=False))
    seen.append(Experiment.resume(run, ["federated.rounds=40", "stop.target_accuracy=null"])
                .run(progress=False))
    last = seen[-1]
    assert last.stop_reason == "budget"
    assert last.summary["rounds_completed"] == ROUNDS
    assert "would pass privacy.epsilon_budget = 3" in last.summary["stop_detail"]
    for result in seen:  # every headline: the filter's bound, E at delta
        headline = result.summary["headline"]
        assert (headline["epsilon"], headline["delta"]) == (3.0, 1e-4)
        assert headline["method"] == "rdp-filter" and headline["kind"] == "bound"
        assert "filter bound" in headline["advice"]
    # what ran stays within the budget at the order fixed at creation; one more would not
    budget = 3.0 - np.log1p(-1 / ORDER) + (np.log(1e-4) + np.log(ORDER)) / (ORDER - 1)
    assert _rdp(ROUNDS) <= budget < _rdp(ROUNDS + 1)
    assert epsilon_from_rdp([ORDER], [_rdp(ROUNDS)], 1e-4)[0] <= 3.0
    assert "privacy budget" in last.card
    assert check_run_privacy(run).ok
    # the budget cannot be changed, not even by editing config.yaml
    with pytest.raises(ConfigError, match="privacy.epsilon_budget is not allowed with --resume"):
        Experiment.resume(run, ["privacy.epsilon_budget=30"])
    text = (run / "config.yaml").read_text().replace("epsilon_budget: 3.0",
                                                     "epsilon_budget: 30.0")
    (run / "config.yaml").write_text(text)
    with pytest.raises(ConfigError, match="differs from the budget this run was created with"):
        Experiment.resume(run, ["federated.rounds=60"])


def test_a_run_without_budget_records_its_first_plan_when_extended(tmp_path):
    run = tmp_path / "run"
    Experiment.create(_demo(), run).run(progress=False)
    result = Experiment.resume(run, ["federated.rounds=4"]).run(progress=False)
    note = result.card["first plan"]
    assert note.startswith("First plan: 3 rounds at creation, extended to 4")
    assert "assumes the decision to extend did not read the results" in note
    assert note in result.summary["headline"]["advice"]
    assert result.summary["headline"]["method"] == "pld"
    assert check_run_privacy(run).ok


@pytest.mark.parametrize(("algorithm", "reason"), [
    ("configs/demo.yaml", "Scopes"),
    ("configs/demo-dp-dsgd.yaml", "RandomParticipationStep"),
    ("configs/demo-projected-sgd.yaml", "last-iterate bound"),
])
def test_a_budget_is_refused_where_no_filter_covers_the_accountant(algorithm, reason):
    config = load_config(Path(DEMO).parent.parent / algorithm, ["privacy.epsilon_budget=3"])
    with pytest.raises(ValueError, match=f"not allowed for federated.algorithm.*{reason}"):
        plan_filter(privacy_plan(config), 3.0, config.privacy.delta,
                    config.federated.algorithm)


def test_gaussian_filter_of_dp_ftrl_counts_the_plans_exact_mu():
    from privfl.accounting.filters import GaussianFilter
    from privfl.algorithms.correlated_plan import CorrelatedPrivacy

    plan = CorrelatedPrivacy(mechanism="tree", schedule=CyclicGroups(100, 10, 1.0), rounds=40,
                             noise_multiplier=5.0, delta=1e-5)
    budget = plan_filter(plan, 2.0, 1e-5, "dp-ftrl")
    mu_b = GaussianFilter(2.0, 1e-5).mu_budget
    mus = [plan.event(r).sensitivity / plan.event(r).noise_multiplier for r in range(1, 41)]
    allowed = max(r for r, mu in enumerate(mus, 1) if mu <= mu_b)
    assert budget.kind == "gdp" and budget.rounds_allowed() == budget.horizon == allowed
    assert budget.spent(allowed) == pytest.approx(mus[allowed - 1], rel=1e-12)
    assert budget.problem(allowed) is None and budget.problem(allowed + 1) is not None
    # a re-drawn attempt (lost after round 2) composes: fewer rounds fit
    assert budget.spent(allowed, [1, 2]) == pytest.approx(
        float(np.hypot(mus[1], mus[allowed - 1])), rel=1e-12)
    assert budget.rounds_allowed([1, 2]) < allowed


def test_the_filter_keeps_the_order_fixed_at_creation():
    """The order recorded at creation is the filter's, never chosen again (a Rényi filter
    is valid only at an order fixed in advance, Feldman and Zrnic 2021)."""
    from privfl.runs.budget import run_filter

    config = _demo(epsilon_budget=3)
    plan = privacy_plan(config)
    fresh = run_filter(config, plan)
    assert fresh.filter.order == ORDER
    recorded = {**fresh.record(), "order": 8.0, "horizon": 5}
    kept = run_filter(config, plan, recorded)
    assert (kept.filter.order, kept.horizon) == (8.0, 5)
    assert kept.filter.budget == pytest.approx(
        3.0 - np.log1p(-1 / 8.0) + (np.log(1e-4) + np.log(8.0)) / 7.0, rel=1e-12)


def test_insdp_filter_is_the_worst_records_rdp_at_a_fixed_order():
    """InsDP-FedSGD's per-client accountants (parallel composition): the filter charges the
    worst record's RDP; at E = 2 its horizon is the last round whose fixed-horizon RDP bound
    (the plan's own results, max over clients) is within E."""
    config = load_config(DEMO.parent / "demo-insdp-fedsgd.yaml")
    plan = privacy_plan(config)
    budget = plan_filter(plan, 2.0, config.privacy.delta, "insdp-fedsgd")

    def rdp(rounds: int) -> float:
        return next(r.epsilon for r in plan.results(rounds)
                    if r.method == "rdp" and r.extras["scope"] == plan.primary_scope)

    assert budget.kind == "renyi" and budget.horizon == budget.rounds_allowed() == 27
    assert rdp(27) <= 2.0 < rdp(28)
    assert budget.result().extras["scope"] == plan.primary_scope == "global-model"
