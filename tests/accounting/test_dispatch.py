"""The one dispatcher (privfl.accounting.dispatch): every command's numbers come from one path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privfl.accounting import registry
from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import (
    HeldByClients,
    RandomParticipationStep,
    Scope,
    Scopes,
    WorstOverClients,
    dpsgd_event,
)
from privfl.accounting.fdp.federated import FederatedSetting, federated_fdp
from privfl.accounting.methods import account
from privfl.accounting.participation import participation_report

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "golden"))
import _golden as golden  # noqa: E402  (tests/golden/_golden.py: cross-CPU float tolerance)

FEDFDP = ["account", "fedfdp", "--records", "400", "--batch-size", "16", "--local-steps", "12",
          "--noise-multiplier", "2.5", "--clients", "10", "--client-rate", "0.5", "--delta",
          "1e-5", "--json"]


def _cli(args: list[str]) -> dict:
    from privfl.cli.main import app

    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_demo_runs_privacy_json_equals_account_fedfdp_bit_for_bit():
    """configs/demo.yaml is PriFedSync with 10 clients of 400 records, B = 16, K = 12, noise
    multiplier 2.5, p = 0.5, delta 1e-5: the privacy.json of its real two-round run (pinned in
    tests/golden/runs.json) and its plan rebuilt now both equal ``account fedfdp --json``."""
    from privfl.algorithms.builders import privacy_plan
    from privfl.config.loader import load_config

    cli = _cli([*FEDFDP, "--rounds", "2"])["results"]
    run = golden.load("runs.json")["demo.yaml"]
    assert run["rounds"] == 2
    golden.assert_matches(run["results"], cli)
    pytest.importorskip("mlxtend")
    plan = privacy_plan(load_config(ROOT / "configs/demo.yaml", ["federated.rounds=5"]))
    assert [r.to_dict() for r in plan.results(5)] == _cli([*FEDFDP, "--rounds", "5"])["results"]


def test_federated_fdp_is_the_plans_event_tree():
    setting = FederatedSetting.homogeneous(clients=4, records=100, batch_size=10, local_steps=3,
                                           noise_multiplier=2.0, rounds=7)
    results = federated_fdp(setting, 1e-5, methods=("gdp-clt", "rdp"))
    assert [(r.method, r.extras["scope"]) for r in results] == [
        ("gdp-clt", "weak"), ("gdp-clt", "strong"), ("rdp", "weak"), ("rdp", "strong")]
    weak = setting.clients[0].event(7)
    assert results[2].epsilon == account(weak, delta=1e-5, methods="rdp").results[0].epsilon
    assert results[3].steps == 3 * 3 * 7  # (m - 1) K R
    zero = federated_fdp(FederatedSetting.homogeneous(
        clients=4, records=100, batch_size=10, local_steps=3, noise_multiplier=2.0, rounds=0),
        1e-5)
    assert [(r.epsilon, r.steps) for r in zero] == [(0.0, 0)] * 4


def test_worst_over_clients_and_scopes():
    low, high = dpsgd_event(2.0, 0.01, 100), dpsgd_event(1.0, 0.01, 100)
    tree = Scopes((Scope("a", WorstOverClients((low, high, low))), Scope("b", low)))
    results = evaluate(tree, 1e-5, methods=("rdp", "gdp-clt"))
    assert [(r.method, r.extras["scope"]) for r in results] == [
        ("rdp", "a"), ("rdp", "b"), ("gdp-clt", "a"), ("gdp-clt", "b")]
    alone = account(high, delta=1e-5, methods="rdp").results[0].epsilon
    assert results[0].epsilon == alone > results[1].epsilon


def test_a_record_held_by_two_clients_composes_them():
    step = dpsgd_event(1.0, 0.01, 100)
    shared = evaluate(HeldByClients((step, step, step), holder_sets=((0, 1),)), 1e-5,
                      methods="rdp")[0]
    composed = account(dpsgd_event(1.0, 0.01, 200), delta=1e-5, methods="rdp").results[0]
    assert shared.epsilon == composed.epsilon
    assert shared.extras["holders"] == 2


def test_a_client_event_that_depends_on_the_holder_count():
    """by_holders: client j's event when it is one of h holders (InsDP-FedSGD's global model
    splits the mean's noises among them); a count not listed, and a client alone, use events."""
    alone, shared = dpsgd_event(2.0, 0.01, 100), dpsgd_event(1.0, 0.01, 100)
    node = HeldByClients((alone, alone, alone), holder_sets=((0, 1),),
                         by_holders=((2, (shared, shared, shared)),))
    assert node.client_event(0, 2) is shared and node.client_event(2, 1) is alone
    assert node.client_event(1, 3) is alone
    (result,) = evaluate(node, 1e-5, methods="rdp")
    composed = account(dpsgd_event(1.0, 0.01, 200), delta=1e-5, methods="rdp").results[0]
    assert result.epsilon == composed.epsilon and result.extras["holders"] == 2
    (ignored,) = evaluate(HeldByClients((alone,) * 3, holder_sets=((0, 1),)), 1e-5,
                          methods="rdp")
    assert ignored.epsilon < result.epsilon
    # disjoint clients never read by_holders: the worst client alone
    (disjoint,) = evaluate(HeldByClients((alone,) * 3, by_holders=((2, (shared,) * 3),)),
                           1e-5, methods="rdp")
    assert disjoint.epsilon == account(alone, delta=1e-5, methods="rdp").results[0].epsilon
    with pytest.raises(ValueError, match=r"by_holders = 1 is out of range"):
        HeldByClients((alone,), by_holders=((1, (shared,)),))
    with pytest.raises(ValueError, match=r"must be a sequence of 2 PrivacyEvent"):
        HeldByClients((alone, alone), by_holders=((2, (shared,)),))
    with pytest.raises(ValueError, match=r"lists holders = 2 twice"):
        HeldByClients((alone,), by_holders=((2, (shared,)), (2, (alone,))))
    with pytest.raises(ValueError, match=r"is not a \(holders, events\) pair"):
        HeldByClients((alone,), by_holders=(2,))


def test_the_participation_node_is_participation_report():
    node = RandomParticipationStep(0.5, 0.1, 100, 1.0, iterations=3, schemes=("wcs", "cs"),
                                   composition=("rdp",))
    direct = participation_report(0.5, 0.1, 100, 1.0, delta=1e-5, iterations=3,
                                  methods=("wcs", "cs"), accountants=("rdp",))
    assert [r.to_dict() for r in evaluate(node, 1e-5)] == [r.to_dict() for r in direct]


def test_registry_names_and_refusals():
    assert registry.registered(nodes=False) == ("rdp", "pld", "gdp-clt")
    assert registry.registered(nodes=True) == ("participation", "contraction", "correlated-noise")
    with pytest.raises(ValueError, match="method = 'nope' is not allowed"):
        registry.step_factory("nope")
    with pytest.raises(ValueError, match="is not allowed: must be a new"):
        registry.register("rdp", "privfl.accounting.rdp:RdpAccountant")
    with pytest.raises(ValueError, match="must be 'module:attribute'"):
        registry.register("new-one", "no-colon")
    with pytest.raises(ValueError, match="event = 3 is not allowed"):
        evaluate(3, 1e-5)
    with pytest.raises(ValueError, match="no accountant is registered"):
        registry.node_accountant(object())
    with pytest.raises(ValueError, match="must be a non-empty sequence of PrivacyEvent"):
        WorstOverClients(())
    with pytest.raises(ValueError, match="must be a non-empty sequence of Scope"):
        Scopes(())


def test_from_epsilon_delta_refuses_an_epsilon_whose_line_overflows():
    """Was an OverflowError from math.exp; now a ValueError naming the argument and range.
    The largest allowed epsilon still gives a valid trade-off function (f(0) = 1 - delta)."""
    from privfl.accounting.fdp import MAX_PAIR_EPSILON, from_epsilon_delta

    for eps in (1e10, 710.0, float("inf")):
        with pytest.raises(ValueError, match="epsilon = .* is out of range: must be"):
            from_epsilon_delta([(eps, 0.0)])
    f = from_epsilon_delta([(MAX_PAIR_EPSILON, 0.25)])
    assert float(f(0.0)) == 0.75
    assert 0.0 <= float(f(0.5)) <= 1e-15  # e^-709.78 (0.75 - 0.5), up to interpolation


def test_the_dp_dsgd_demos_plan_equals_account_participation():
    """configs/demo-dp-dsgd.yaml: 40 clients of 100 records, p = 0.5, q = 0.1, z = 1, C = 1,
    delta 1e-5. Every number of its plan after 3 iterations is the number ``account
    participation --json`` prints for the same method (per iteration and composed)."""
    from privfl.algorithms.builders import privacy_plan
    from privfl.config.loader import load_config

    pytest.importorskip("mlxtend")
    plan = privacy_plan(load_config(ROOT / "configs/demo-dp-dsgd.yaml"))
    cli = _cli(["account", "participation", "--client-rate", "0.5", "--record-rate", "0.1",
                "--records", "100", "--noise-multiplier", "1", "--iterations", "3",
                "--delta", "1e-5", "--json"])["results"]
    printed = {(r["method"], r["steps"]): r["epsilon"] for r in cli}
    ran = plan.results(3)
    assert {r.steps for r in ran} == {1, 3}
    assert len(ran) >= 10
    for r in ran:
        assert printed[(r.method, r.steps)] == r.epsilon, r.method


def test_the_cached_per_iteration_results_are_those_of_each_setting():
    """The per-iteration cache (one computation per setting, reused every round) hands out
    exactly the uncached result of the setting asked about, as a fresh copy."""
    from privfl.accounting.participation import report

    for noise in (2.0, 0.8, 1.0, 2.0):
        s = report._setting(0.5, 0.1, 100, noise, 1.0)
        for scheme in ("wcs", "cs"):
            cached = report._per_iteration_result(scheme, s, noise, 1.0, None, 1e-5, "trusted")
            fresh = report._per_iteration_cached.__wrapped__(scheme, s, noise, 1.0, None, 1e-5,
                                                          "trusted")
            assert cached == fresh
            assert cached.extras is not report._per_iteration_result(
                scheme, s, noise, 1.0, None, 1e-5, "trusted").extras


def test_one_calibration_over_any_event():
    """calibrate_event_noise over a DP-SGD event is calibrate_noise exactly; over PriFedSync's
    tree it certifies the weak scope and the next smaller noise (within rtol) does not."""
    from privfl.accounting.calibrate.event import calibrate_event_noise
    from privfl.accounting.calibrate.solve import calibrate_noise
    from privfl.accounting.fdp.federated import setting_event

    direct = calibrate_noise(2.0, 1e-5, 0.01, 500, method="rdp")
    generic = calibrate_event_noise(lambda z: dpsgd_event(z, 0.01, 500), 2.0, 1e-5,
                                    method="rdp")
    assert (generic.value, generic.result) == (direct.value, direct.result)

    def tree(z: float):
        return setting_event(FederatedSetting.homogeneous(
            clients=3, records=200, batch_size=20, local_steps=2, noise_multiplier=z, rounds=5))

    solved = calibrate_event_noise(tree, 3.0, 1e-5, method="rdp", scopes=["weak"],
                                   rtol=1e-3)
    assert solved.result.extras["scope"] == "weak" and solved.result.epsilon <= 3.0
    below = [r for r in evaluate(tree(solved.value / 1.002), 1e-5, methods="rdp")
             if r.extras["scope"] == "weak"]
    assert below[0].epsilon > 3.0
    with pytest.raises(ValueError, match="scopes = \\['nope'\\] is not allowed"):
        calibrate_event_noise(tree, 3.0, 1e-5, method="rdp", scopes=["nope"])


def test_calibration_over_several_results_meets_the_target_in_every_one():
    """An event with several results (PriFedSync's weak and strong scopes, RDP): the calibrated
    noise keeps *every* result <= the target, the largest (here the strong scope) within
    tolerance of it, and 0.1 % less noise fails the target. Each scope's epsilon falls with the
    noise, so the answer over both scopes is the larger of the two one-scope answers (the
    strong one), never the smaller (the weak one's z ~ 2.62 puts the strong scope at ~4.18).
    Tolerances: the search stops within relative rtol = 1e-4 of the smallest noise; near the
    solution d ln(epsilon) / d ln(z) ~ -1.5, so the largest epsilon is within ~5e-4 of 3 (0.01
    allowed), and z (1 - 1e-3) lies below the search's failing bracket end."""
    from privfl.accounting.calibrate.event import calibrate_event_noise
    from privfl.accounting.fdp.federated import setting_event

    def tree(z: float):
        return setting_event(FederatedSetting.homogeneous(
            clients=3, records=200, batch_size=20, local_steps=2, noise_multiplier=z, rounds=5))

    def epsilons(z: float) -> dict[str, float]:
        return {r.extras["scope"]: r.epsilon for r in evaluate(tree(z), 1e-5, methods="rdp")}

    solved = calibrate_event_noise(tree, 3.0, 1e-5, method="rdp", rtol=1e-4)
    at = epsilons(solved.value)
    assert set(at) == {"weak", "strong"} and max(at.values()) <= 3.0
    assert at["strong"] == solved.result.epsilon == max(at.values()) > 3.0 - 0.01
    assert at["weak"] < 2.2  # ~2.10: the weak scope is not the binding one
    assert max(epsilons(solved.value * (1 - 1e-3)).values()) > 3.0
    assert solved.value == pytest.approx(3.276, rel=1e-3)
    per_scope = {scope: calibrate_event_noise(tree, 3.0, 1e-5, method="rdp", scopes=[scope],
                                              rtol=1e-4).value for scope in ("weak", "strong")}
    assert per_scope["weak"] < 2.7 < per_scope["strong"] == solved.value


def test_delta_at_epsilon_goes_through_the_dispatcher():
    """``account participation --epsilon`` (delta at epsilon) asks the dispatcher, which hands
    the node to the participation accountant: the same numbers as participation_report."""
    node = RandomParticipationStep(0.5, 0.1, 100, 1.0, iterations=3, schemes=("wcs", "cs"),
                                   composition=("rdp",))
    direct = participation_report(0.5, 0.1, 100, 1.0, epsilon=2.0, iterations=3,
                                  methods=("wcs", "cs"), accountants=("rdp",))
    got = evaluate(node, epsilon=2.0)
    assert [r.to_dict() for r in got] == [r.to_dict() for r in direct]
    assert all(r.epsilon == 2.0 and 0.0 < r.delta < 1.0 for r in got)
    cli = _cli(["account", "participation", "--client-rate", "0.5", "--record-rate", "0.1",
                "--records", "100", "--noise-multiplier", "1", "--iterations", "3",
                "--epsilon", "2", "--json"])["results"]
    wanted = {(r.method, r.steps): r.delta for r in got}
    assert {(r["method"], r["steps"]): r["delta"] for r in cli
            if (r["method"], r["steps"]) in wanted} == wanted
    leaf = dpsgd_event(1.0, 0.01, 100)
    assert ([r.to_dict() for r in evaluate(Scope("run", leaf), epsilon=1.0, methods="rdp")]
            == [{**r.to_dict(), "scope": "run"}
                for r in account(leaf, epsilon=1.0, methods="rdp").results])
    with pytest.raises(ValueError, match="exactly one of epsilon and delta"):
        evaluate(node, 1e-5, epsilon=1.0)
    with pytest.raises(ValueError, match="exactly one of epsilon and delta"):
        evaluate(node)
    with pytest.raises(ValueError, match="ask for epsilon at a delta"):
        evaluate(WorstOverClients((leaf,)), epsilon=1.0)
