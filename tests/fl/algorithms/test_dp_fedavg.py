"""Client-level DP-FedAvg (dp-fedavg): config, plan/accounting, training, resume."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from privfl.accounting.events import Neighbouring, Sampling, Unit, dpsgd_event
from privfl.accounting.methods import AccountingOptions, account
from privfl.algorithms.dp_fedavg import DpFedAvg, DpFedAvgConfig, DpFedAvgPrivacy
from privfl.algorithms.registry import algorithm_class
from privfl.cli.main import app
from privfl.config import ConfigError, config_from_dict
from privfl.fl.aggregation import update_noise_multiplier
from privfl.runs.experiment import Experiment, build_algorithm
from privfl.runs.rundir import RunDirectory

#: 12 IID synthetic clients of 30 records, logistic regression: a round takes milliseconds.
DPF = {
    "name": "dpf-tiny",
    "seed": 5,
    "data": {"dataset": "synthetic", "synthetic_examples": 480, "test_fraction": 0.25,
             "partition": "iid", "clients": 12, "test_size": 10},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 6, "optimizer": "sgd", "lr": 0.1},
    "privacy": {"noise_multiplier": 0.8, "clip_norm": 0.5, "delta": 1e-3,
                "accountants": ["rdp"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_rate": 0.5},
    "run": {"threads": 1},
}


def _raw(**sections):
    raw = copy.deepcopy(DPF)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return raw


def _config(**sections):
    return config_from_dict(_raw(**sections))


def _train(config, rounds=None):
    """(algorithm, metrics) after ``rounds`` (default: federated.rounds) rounds."""
    algo = build_algorithm(config)
    metrics = [algo.run_round() for _ in range(rounds or config.federated.rounds)]
    return algo, metrics


# ------------------------------------------------------------------------------ configuration
def test_registry_and_defaults():
    assert algorithm_class("dp-fedavg") is DpFedAvg
    config = config_from_dict({"data": {"dataset": "synthetic"}, "privacy": {
        "noise_multiplier": 1.0}, "federated": {"algorithm": "dp-fedavg"}})
    assert isinstance(config.federated, DpFedAvgConfig)
    assert config.federated.client_rate == 0.1 and config.federated.cohort_size is None
    assert config.privacy.accountants == ["rdp", "pld"]


@pytest.mark.parametrize(
    ("sections", "fragment"),
    [
        ({"federated": {"client_sampling": "fixed-size", "client_rate": None}},
         "federated.cohort_size is required"),
        ({"federated": {"client_sampling": "fixed-size", "client_rate": None,
                        "cohort_size": 13}}, "federated.cohort_size = 13 is out of range"),
        ({"federated": {"client_sampling": "fixed-size", "cohort_size": 4}},
         "federated.client_rate = 0.5 is not allowed"),
        ({"federated": {"cohort_size": 4}}, "federated.cohort_size = 4 is not allowed"),
        ({"privacy": {"noise_multiplier": None, "sigma": 1.0}},
         "privacy.sigma = 1.0 is not allowed"),
        ({"privacy": {"noise_multiplier": None}}, "privacy.noise_multiplier is missing"),
        ({"privacy": {"noise_multiplier": None}, "federated": {"adaptive_clipping": True}},
         "privacy.noise_multiplier is missing"),
        ({"privacy": {"noise_multiplier": 2.0}, "federated": {"adaptive_clipping": True}},
         "privacy.noise_multiplier = 2 is out of range for federated.count_noise = 0.3 "
         "(default E[m]/20 = 6/20)"),
        ({"federated": {"adaptive_clipping": True, "clipping": "flat-median",
                        "count_noise": 5.0}}, "both set the threshold"),
        ({"federated": {"clipping": "per-layer-median"}, "stop": {"epsilon": 3.0}},
         "stop.epsilon needs a rigorous bound"),
        ({"privacy": {"enabled": False}, "federated": {"clipping": "per-layer"}},
         "need privacy.enabled"),
        ({"privacy": {"accountants": ["rdp", "fedfdp"]}}, "each must be one of rdp, pld"),
        ({"training": {"lr_decay_every": 2}}, "lr_decay_every"),
    ],
)
def test_config_refusals(sections, fragment):
    with pytest.raises(ConfigError, match=None) as info:
        _config(**sections)
    assert fragment in str(info.value), str(info.value)


def test_clients_with_fewer_records_than_a_batch_are_refused():
    with pytest.raises(ConfigError, match=r"data.client_sizes\[0\] = 30 is out of range"):
        build_algorithm(_config(training={"batch_size": 31}))


# --------------------------------------------------------------------------- the privacy plan
def test_poisson_plan_is_add_remove_poisson_at_q():
    plan = DpFedAvg.privacy_plan(_config(), build_algorithm(_config()).data)
    event = plan.event(7)
    assert event.unit is Unit.CLIENT and event.neighbouring is Neighbouring.ADD_REMOVE
    ((step, count),) = event.steps
    assert (step.sampling, step.sampling_rate, step.noise_multiplier, count) == (
        Sampling.POISSON, 0.5, 0.8, 7)
    assert plan.expected_cohort == 6.0


def test_fixed_size_plan_is_never_accounted_as_poisson():
    config = _config(federated={"client_sampling": "fixed-size", "client_rate": None,
                                "cohort_size": 3},
                     privacy={"accountants": ["rdp", "pld"]})
    plan = DpFedAvgPrivacy.from_config(config, 12)
    ((step, _),) = plan.event(4).steps
    assert step.sampling is Sampling.WITHOUT_REPLACEMENT and step.sampling_rate == 0.25
    assert plan.event(4).neighbouring is Neighbouring.REPLACE_ONE
    assert plan.expected_cohort == 3.0
    results = plan.results(4)
    assert {r.sampling for r in results} == {"without-replacement (q=0.25) of clients"}
    assert {r.neighbouring for r in results} == {"replace-one"}
    # the replace-one, fixed-size bound is larger than the (wrong) Poisson add/remove number
    poisson = account(dpsgd_event(0.8, 0.25, 4, unit="client"), delta=1e-3, methods="rdp")
    rdp = next(r for r in results if r.method == "rdp")
    assert rdp.epsilon > poisson.results[0].epsilon


@pytest.mark.parametrize("method", ["rdp", "pld"])
def test_client_level_results_equal_the_accountant(method):
    plan = DpFedAvgPrivacy(num_clients=200, client_rate=0.1, noise_multiplier=1.8,
                           delta=0.0029, accountants=[method])
    (result,) = plan.results(3)
    (direct,) = account(dpsgd_event(1.8, 0.1, 3, unit="client"), delta=0.0029,
                        methods=method).results
    assert result.epsilon == direct.epsilon and result.kind == "bound"
    assert (result.unit, result.neighbouring, result.sampling, result.steps) == (
        "client", "add-remove", "poisson (q=0.1) of clients", 3)
    assert result.extras["expected_cohort"] == 20.0


def test_client_level_results_match_the_cli():
    """`privfl account dpsgd --unit client` prints the plan's numbers."""
    plan = DpFedAvgPrivacy(num_clients=50, client_rate=0.2, noise_multiplier=1.2, delta=1e-4,
                           accountants=["rdp", "pld"])
    out = CliRunner().invoke(app, [
        "account", "dpsgd", "--sampling-rate", "0.2", "--noise-multiplier", "1.2",
        "--steps", "25", "--delta", "1e-4", "--unit", "client", "--method", "all", "--json"])
    assert out.exit_code == 0, out.output
    cli = {r["method"]: r for r in json.loads(out.stdout)["results"]}
    for r in plan.results(25):
        assert r.epsilon == pytest.approx(cli[r.method]["epsilon"], rel=1e-12)
        assert r.sampling == cli[r.method]["sampling"] and r.unit == cli[r.method]["unit"]


@pytest.mark.parametrize("sigma,expected", [(0.5, 6.9269), (1.0, 1.8504), (1.8, 0.6298),
                                            (3.0, 0.2808)])
def test_paper_accounting_reproduces_xie_table4(sigma, expected):
    """UserDP-FedAvg MNIST (q = 20/200, T = 3, delta = 0.0029): Xie et al. 2023 Table 4 beside
    privfl's tighter default bound."""
    plan = DpFedAvgPrivacy(num_clients=200, client_rate=0.1, noise_multiplier=sigma,
                           delta=0.0029, accountants=["rdp", "pld"], paper_accounting=True)
    results = plan.results(3)
    paper = [r for r in results if r.extras.get("scope") == "paper"]
    (p,) = paper
    assert round(p.epsilon, 4) == expected and p.kind == "bound"
    assert p.extras["conversion"] == "classic" and "Xie et al. 2023" in p.note
    ours = [r for r in results if "scope" not in r.extras]
    assert min(r.epsilon for r in ours) < p.epsilon


def test_paper_accounting_of_fixed_size_cohorts_is_an_estimate():
    plan = DpFedAvgPrivacy(num_clients=200, client_sampling="fixed-size", cohort_size=20,
                           noise_multiplier=1.8, delta=0.0029, accountants=["rdp"],
                           paper_accounting=True)
    paper = next(r for r in plan.results(3) if r.extras.get("scope") == "paper")
    assert round(paper.epsilon, 4) == 0.6298  # the paper's number ...
    assert paper.kind == "estimate" and "does not bound fixed-size" in paper.note  # ... labelled
    assert paper.sampling == "poisson (q=0.1) of clients"
    ours = next(r for r in plan.results(3) if "scope" not in r.extras)
    assert ours.kind == "bound" and ours.neighbouring == "replace-one"


@pytest.mark.parametrize("clipping", ["flat-median", "per-layer-median"])
def test_median_clipping_results_are_estimates(clipping):
    config = _config(federated={"clipping": clipping})
    algo, metrics = _train(config, rounds=1)
    assert algo.privacy(1) and all(r.kind == "estimate" for r in algo.privacy(1))
    assert all("median" in r.note for r in algo.privacy(1))
    assert "epsilon" not in metrics[0]  # no rigorous bound: no headline epsilon
    assert "NOT accounted" in algo.plan.card(1)["clipping"]


def test_adaptive_plan_accounts_the_effective_noise():
    config = _config(federated={"adaptive_clipping": True, "count_noise": 1.0},
                     privacy={"noise_multiplier": 1.2})
    plan = DpFedAvgPrivacy.from_config(config, 12)
    assert plan.step.noise_multiplier == 1.2  # the accountant gets the effective z ...
    assert plan.update_noise == pytest.approx(update_noise_multiplier(1.2, 1.0))  # ... the
    (r,) = plan.results(3)  # update noise is larger, the count takes the rest
    fixed = DpFedAvgPrivacy.from_config(_config(privacy={"noise_multiplier": 1.2}), 12)
    assert r.epsilon == fixed.results(3)[0].epsilon
    assert r.extras["update_noise"] == plan.update_noise and r.extras["count_noise"] == 1.0
    assert "Theorem 1" in plan.card(3)["noise"]


def test_plan_validation():
    with pytest.raises(ValueError, match="client_rate = 0.0 is out of range"):
        DpFedAvgPrivacy(num_clients=5, client_rate=0.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="cohort_size = 6 is out of range"):
        DpFedAvgPrivacy(num_clients=5, client_sampling="fixed-size", cohort_size=6,
                        noise_multiplier=1.0)
    with pytest.raises(ValueError, match="client_sampling = 'shuffle' is not allowed"):
        DpFedAvgPrivacy(num_clients=5, client_sampling="shuffle", noise_multiplier=1.0)
    with pytest.raises(ValueError, match="need noise_multiplier > 0"):
        DpFedAvgPrivacy(num_clients=5, client_rate=0.5, noise_multiplier=0.0,
                        clipping="per-layer")
    assert DpFedAvgPrivacy(num_clients=5, client_rate=0.5, noise_multiplier=1.0,
                           delta=None).results(3) == []
    zero = DpFedAvgPrivacy(num_clients=5, client_rate=0.5, noise_multiplier=1.0).results(0)
    assert zero and all(r.epsilon == 0.0 and r.steps == 0 for r in zero)


# ---------------------------------------------------------------------------------- sampling
def test_cohort_sampling_matches_the_plan():
    poisson = build_algorithm(_config(federated={"client_rate": 0.25}))
    sizes = [poisson.select_cohort().size for _ in range(4000)]
    assert np.mean(sizes) == pytest.approx(3.0, abs=0.1)  # E = qN = 3, SE 0.024
    assert min(sizes) == 0  # empty cohorts happen and are not redrawn
    fixed = build_algorithm(_config(federated={"client_sampling": "fixed-size",
                                               "client_rate": None, "cohort_size": 4}))
    counts = np.zeros(12)
    for _ in range(3000):
        cohort = fixed.select_cohort()
        assert cohort.size == 4 and np.unique(cohort).size == 4
        counts[cohort] += 1
    assert counts / 3000 == pytest.approx(np.full(12, 4 / 12), abs=0.04)  # uniform inclusion


def test_empty_poisson_cohort_releases_noise_only():
    algo = build_algorithm(_config(federated={"client_rate": 0.01}))
    before = algo.global_model.clone()
    metrics = algo.run_round()
    assert metrics["cohort_size"] == 0
    step = algo.global_model - before  # N(0, (z S)^2) / (q N) = std 0.4 / 0.12
    assert float(step.std()) == pytest.approx(0.8 * 0.5 / 0.12, rel=0.05)
    assert metrics["epsilon"] > 0


# ----------------------------------------------------------------------------------- training
def test_one_round_divides_by_the_expected_cohort():
    """Global step = (sum_k clip(u_k) + noise) / (q N), replayed from the same generator."""
    algo = build_algorithm(_config(privacy={"noise_multiplier": 0.8, "clip_norm": 0.05}))
    state = copy.deepcopy(algo.state_dict())
    before = algo.global_model.clone()
    cohort = algo.select_cohort()
    rows = algo.local_work(cohort, keep_updates=True)["updates"]
    gen_state = algo.generator.get_state()
    norms = rows.norm(dim=1)
    clipped = rows * torch.clamp(0.05 / norms, max=1.0)[:, None]
    noise = torch.empty_like(before).normal_(generator=torch.Generator().set_state(gen_state))
    expected = before + (clipped.sum(0) + 0.8 * 0.05 * noise) / 6.0
    algo.load_state_dict(state)
    metrics = algo.run_round()
    assert metrics["cohort_size"] == cohort.size != 6  # realised size differs from E[m] = 6
    assert torch.allclose(algo.global_model, expected, atol=1e-6, rtol=0)
    assert metrics["clip_norm"] == 0.05 and metrics["noise_std"] == pytest.approx(0.04)


def _changed(setting, **sections):
    """(models differ, privacy differs) between the base config and one with ``sections``."""
    base_algo, base_metrics = _train(_config())
    algo, metrics = _train(_config(**sections))
    models = not torch.equal(base_algo.global_model, algo.global_model)
    rounds = len(metrics)
    privacy = ([r.epsilon for r in base_algo.privacy(len(base_metrics))]
               != [r.epsilon for r in algo.privacy(rounds)])
    card = base_algo.plan.card(len(base_metrics)) != algo.plan.card(rounds)
    return models, privacy, card


@pytest.mark.parametrize(
    "sections",
    [
        {"federated": {"client_rate": 0.75}},
        {"privacy": {"noise_multiplier": 1.6}},
        {"federated": {"rounds": 4}},
        {"federated": {"client_sampling": "fixed-size", "client_rate": None,
                       "cohort_size": 6}},
    ],
    ids=["rate", "noise", "rounds", "sampling"],
)
def test_a_setting_changes_training_and_privacy(sections):
    models, privacy, card = _changed("x", **sections)
    assert models and privacy and card


def test_clip_norm_changes_training_and_the_card_not_epsilon():
    """epsilon is scale-free in S (noise z S, sensitivity S): the card's noise scale and the
    per-round noise_std change, the numbers stay."""
    models, privacy, card = _changed("clip", privacy={"clip_norm": 2.0})
    assert models and card and not privacy
    _, m1 = _train(_config(), rounds=1)
    _, m2 = _train(_config(privacy={"clip_norm": 2.0}), rounds=1)
    assert m1[0]["noise_std"] == pytest.approx(0.4) and m2[0]["noise_std"] == pytest.approx(1.6)


def test_clipping_kind_changes_training_and_the_guarantee():
    models, privacy, card = _changed("kind", federated={"clipping": "per-layer"})
    assert models and card and not privacy  # same sensitivity S: same bound
    base, _ = _train(_config(privacy={"clip_norm": 5.0}))
    median, _ = _train(_config(privacy={"clip_norm": 5.0}, federated={"clipping": "flat-median"}))
    assert not torch.equal(base.global_model, median.global_model)
    assert base.plan.card(3)["clipping"] != median.plan.card(3)["clipping"]
    assert [r.kind for r in median.privacy(3)] == ["estimate"]  # from a bound to an estimate


def test_adaptive_clipping_moves_the_clip_norm_and_logs_the_noisy_count():
    config = _config(federated={"adaptive_clipping": True, "count_noise": 2.0,
                                "target_quantile": 0.9, "rounds": 4})
    algo, metrics = _train(config)
    norms = [m["clip_norm"] for m in metrics]
    assert norms[0] == 0.5 and len(set(norms)) == 4
    assert all("unclipped_estimate" in m for m in metrics)
    b = metrics[0]["unclipped_estimate"]
    assert norms[1] == pytest.approx(0.5 * np.exp(-0.2 * (b - 0.9)))
    assert metrics[0]["noise_std"] == pytest.approx(update_noise_multiplier(0.8, 2.0) * 0.5)


def test_non_private_baseline_is_the_plain_mean():
    algo, metrics = _train(_config(privacy={"enabled": False, "noise_multiplier": None}))
    assert not algo.private and algo.privacy(3) == [] and "epsilon" not in metrics[-1]
    assert algo.plan.card(3)["privacy"].startswith("NONE")
    assert "clip_norm" not in metrics[-1]


def test_training_learns():
    config = _config(privacy={"enabled": False, "noise_multiplier": None},
                     federated={"rounds": 8, "client_rate": 1.0})
    _, metrics = _train(config)
    assert metrics[-1]["train_loss"] < 0.05 * metrics[0]["train_loss"]
    assert metrics[-1]["global_accuracy"] > 0.9


# ----------------------------------------------------------------------------- resume, secure
@pytest.mark.parametrize("federated", [
    {},
    {"adaptive_clipping": True, "count_noise": 2.0, "server_momentum": 0.9},
    {"client_sampling": "fixed-size", "client_rate": None, "cohort_size": 5,
     "clipping": "per-layer"},
], ids=["flat", "adaptive-momentum", "fixed-per-layer"])
def test_state_dict_round_trip_resumes_exactly(federated):
    config = _config(federated={**federated, "rounds": 4})
    straight, metrics = _train(config)
    first, head = _train(config, rounds=2)
    state = copy.deepcopy(first.state_dict())
    torch.save(state, "/dev/null")  # plain tensors and Python values only
    second = build_algorithm(config)
    second.load_state_dict(state)
    tail = [second.run_round() for _ in range(2)]
    assert torch.equal(straight.global_model, second.global_model)

    def strip(rows):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in rows]

    assert strip(metrics) == strip(head + tail)


@pytest.mark.slow  # long (5-15 s on 2 cores): `make test-slow`
def test_experiment_resume_and_check_privacy(tmp_path):
    config = _config(federated={"adaptive_clipping": True, "count_noise": 2.0})
    Experiment.create(config, tmp_path / "full").run()
    Experiment.create(_config(federated={"adaptive_clipping": True, "count_noise": 2.0},
                              run={"max_rounds": 2}), tmp_path / "split").run()
    Experiment.resume(tmp_path / "split", ["run.max_rounds=null"]).run()
    full = RunDirectory(tmp_path / "full").read_metrics()
    split = RunDirectory(tmp_path / "split").read_metrics()
    assert [{k: v for k, v in m.items() if k != "seconds"} for m in full] == [
        {k: v for k, v in m.items() if k != "seconds"} for m in split]
    out = CliRunner().invoke(app, ["check-privacy", str(tmp_path / "split")])
    assert out.exit_code == 0, out.output


def test_budget_stop_uses_privfls_bounds_not_the_papers(tmp_path):
    sections = {"privacy": {"accountants": ["rdp", "pld"]},
                "federated": {"rounds": 10, "paper_accounting": True}}
    plan = DpFedAvgPrivacy.from_config(_config(**sections), 12)
    two = min(r.epsilon for r in plan.results(2) if "scope" not in r.extras)
    paper_two = next(r.epsilon for r in plan.results(2) if r.extras.get("scope") == "paper")
    assert paper_two > two * 1.05  # a budget between them must not stop at round 2
    config = _config(privacy={"accountants": ["rdp", "pld"]},
                     federated={"rounds": 10, "paper_accounting": True},
                     stop={"epsilon": two * 1.01})
    result = Experiment.create(config, tmp_path / "run").run()
    assert result.stop_reason == "budget" and result.summary["rounds_completed"] == 2
    assert result.summary["final"]["epsilon"] == pytest.approx(two)


def test_secure_mode_draws_fresh_randomness():
    config = _config(privacy={"secure": True})
    a, _ = _train(config, rounds=1)
    b, _ = _train(config, rounds=1)
    assert not torch.equal(a.global_model, b.global_model)
    assert a.dp.secure and a.spec.secure and a.plan.secure
    assert a.plan.card(1)["randomness"].startswith("secure")


def test_algorithm_validation():
    algo = build_algorithm(_config())
    with pytest.raises(ValueError, match="spec.clip_norm = 1.0 is not allowed"):
        DpFedAvg(algo.predictor.model, algo.spec.__class__(local_steps=1, batch_size=2),
                 algo.data, algo.plan)
    with pytest.raises(ValueError, match="plan.num_clients = 7"):
        DpFedAvg(algo.predictor.model, algo.spec, algo.data,
                 DpFedAvgPrivacy(num_clients=7, client_rate=0.5, noise_multiplier=1.0))
    with pytest.raises(ValueError, match="server_momentum = 1.0 is out of range"):
        DpFedAvg(algo.predictor.model, algo.spec, algo.data, algo.plan, server_momentum=1.0)


def test_legacy_options_are_what_the_paper_uses():
    # the paper's orders/conversion, for reference in the plan
    from privfl.algorithms import dp_fedavg

    assert AccountingOptions(orders="legacy", conversion="classic") == dp_fedavg._PAPER_OPTIONS


# ------------------------------------------------------------------------- shipped configs
_ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("sigma,expected", [(0.5, 6.9269), (0.6, 4.8913), (0.8, 2.8305),
                                            (1.0, 1.8504), (1.5, 0.8694), (1.8, 0.6298),
                                            (2.3, 0.4187), (3.0, 0.2808)])
def test_xie2023_user_config_card_shows_table4_beside_tighter_bounds(sigma, expected):
    from privfl.config import apply_overrides, read_yaml

    raw = read_yaml(_ROOT / "configs" / "xie2023" / "user-fashion-mnist.yaml")
    config = config_from_dict(apply_overrides(raw, [f"privacy.noise_multiplier={sigma}"]))
    plan = DpFedAvgPrivacy.from_config(config, config.data.clients)
    results = plan.results(config.federated.rounds)
    paper = next(r for r in results if r.extras.get("scope") == "paper")
    assert round(paper.epsilon, 4) == expected and paper.kind == "bound"
    ours = {r.method: r for r in results if "scope" not in r.extras}
    assert set(ours) == {"rdp", "pld"} and all(r.kind == "bound" for r in ours.values())
    assert ours["pld"].epsilon < ours["rdp"].epsilon < paper.epsilon
    assert all(r.unit == "client" and r.sampling == "poisson (q=0.1) of clients"
               for r in results)


def test_demo_config_validates_with_adaptive_clipping():
    from privfl.config import read_yaml

    config = config_from_dict(read_yaml(_ROOT / "configs" / "demo-dp-fedavg.yaml"))
    assert config.federated.algorithm == "dp-fedavg" and config.federated.adaptive_clipping
    plan = DpFedAvgPrivacy.from_config(config, config.data.clients)
    assert plan.adaptive.count_noise == 1.5  # E[m] / 20 = 30 / 20
    assert plan.update_noise == pytest.approx(3**0.5)  # (1.5^-2 - 3^-2)^(-1/2)
