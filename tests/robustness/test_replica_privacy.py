"""The certification's per-model (epsilon, delta) is the run's headline: the tightest rigorous
bound in the plan's primary scope, never a smaller number from another scope (e.g. DP-DSGD's
one-iteration scope, which a certification of the whole run must not state)."""

from __future__ import annotations

from pathlib import Path

import pytest

from privfl.algorithms.base import privacy_metrics
from privfl.algorithms.registry import ALGORITHM_NAMES
from privfl.config.loader import load_config
from privfl.robustness.replica_privacy import ReplicaPrivacy, replica_privacy
from privfl.runs.experiment import privacy_plan

CONFIGS = Path(__file__).parents[2] / "configs"


def _demo(name: str) -> Path:
    special = {"prifedsync": "demo.yaml", "bandmf-fedavg": "demo-bandmf.yaml"}
    return CONFIGS / special.get(name, f"demo-{name}.yaml")


@pytest.mark.parametrize("name", ALGORITHM_NAMES)
def test_per_model_epsilon_is_the_runs_headline(name):
    # 3 rounds (projected SGD: its one-pass schedule fixes 5): more than one round everywhere
    overrides = [] if name == "projected-sgd" else ["federated.rounds=3"]
    config = load_config(_demo(name), overrides)
    plan = privacy_plan(config)
    rounds = config.federated.rounds
    assert rounds > 1
    results = plan.results(rounds)
    headline = privacy_metrics(plan, results)  # what `privfl run` logs for the last round
    statement = replica_privacy(plan, rounds, 10)
    assert statement.epsilon == headline["epsilon"] and statement.method == \
        headline["epsilon_method"]
    assert statement.scope == plan.primary_scope
    assert statement.certification_epsilon == pytest.approx(10 * headline["epsilon"])
    # the per-model entries list every scope, labelled
    scopes = {e["scope"] for e in statement.per_model}
    assert plan.primary_scope in scopes
    first = statement.lines()[0]
    assert first.startswith(f"per model: epsilon = {headline['epsilon']:.6g} at delta = ")
    if plan.primary_scope:
        assert f"scope {plan.primary_scope})" in first
    # JSON round trip keeps the statement
    assert ReplicaPrivacy.from_dict(statement.to_dict()) == statement


def test_dp_dsgd_one_iteration_bound_is_not_the_certified_epsilon():
    """DP-DSGD's scope "iteration" holds smaller bounds than the run: a selection over all
    scopes would certify with them (the per-model epsilon must be the run's)."""
    config = load_config(_demo("dp-dsgd"), ["federated.rounds=3"])
    plan = privacy_plan(config)
    results = plan.results(3)
    smallest = min(r.epsilon for r in results if r.kind == "bound")
    statement = replica_privacy(plan, 3, 10)
    assert statement.scope == "run"
    assert statement.epsilon > 1.1 * smallest
    run_bounds = [r.epsilon for r in results
                  if r.kind == "bound" and r.extras.get("scope") == "run"]
    assert statement.epsilon == min(run_bounds)


@pytest.mark.parametrize("name", ALGORITHM_NAMES)
def test_each_plan_declares_its_replace_one_reading(name):
    """A plan re-reads its own events under replace-one (``replace_one_events``) or declares
    none, and then the certificate says only the 2k add/remove reading applies."""
    overrides = [] if name == "projected-sgd" else ["federated.rounds=2"]
    config = load_config(_demo(name), overrides)
    plan = privacy_plan(config)
    rounds = config.federated.rounds
    statement = replica_privacy(plan, rounds, 10)
    reread = getattr(plan, "replace_one_events", None)
    if reread is None:  # DP-DSGD: its analysis fixes the relation; projected SGD is
        # replace-one already; DP-FTRL/BandMF: replace-with-zero (a replacement is 2 steps)
        assert name in ("dp-dsgd", "projected-sgd", "dp-ftrl", "bandmf-fedavg")
        assert statement.replace_epsilon is None
        if statement.neighbouring == "add-remove":
            assert "declares no replace-one reading" in statement.replace_note
            assert "2k add/remove reading applies" in statement.replace_note
        return
    events = reread(rounds)
    assert events and {e.neighbouring.value for e in events} == {"replace-one"}
    if statement.neighbouring == "add-remove":
        # replace-one is at most twice the add/remove epsilon (group privacy) and above it
        assert statement.epsilon < statement.replace_epsilon <= 2 * statement.epsilon + 1e-9
