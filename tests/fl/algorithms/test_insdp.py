"""InsDP-FedSGD / InsDP-FedAvg (Xie et al. 2023 Algorithms 2-3): plan, training, resume, paper
numbers (spec seed2 sections 3.5 and 7.1, 7.3). The shipped configurations of the paper's
experiments are tested in ``test_xie2023_configs.py``."""

from __future__ import annotations

import copy
import dataclasses
import io
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.accounting.events import NoisyStep, PrivacyEvent, Sampling
from privfl.accounting.methods import build_accountant
from privfl.algorithms import builders
from privfl.algorithms.builders import build_dataset
from privfl.algorithms.insdp import InsDpFedAvg, InsDpFedSgd
from privfl.algorithms.insdp_plan import PAPER_ACCOUNTING, PAPER_OPTIONS, InsDpPrivacy
from privfl.config import ConfigError, config_from_dict
from privfl.data import Dataset, FederatedDataset
from privfl.fl import LocalTrainingSpec
from privfl.models import build_model
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment, build_algorithm

#: A run configuration that trains in well under a second per round.
TINY = {
    "name": "tiny-insdp",
    "seed": 5,
    "data": {"dataset": "synthetic", "synthetic_examples": 240, "test_fraction": 0.25,
             "partition": "iid", "clients": 4, "test_size": 12},
    "model": {"name": "mlp", "kwargs": {"hidden": [6]}},
    "training": {"local_steps": 2, "batch_size": 8, "sampling": "poisson",
                 "optimizer": "momentum", "lr": 0.05},
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": ["rdp"]},
    "federated": {"algorithm": "insdp-fedavg", "rounds": 3},
    "run": {"threads": 1},
}


def _config(**sections):
    raw = copy.deepcopy(TINY)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def _by_scope(results, scope, method="rdp"):
    (result,) = [r for r in results if r.extras.get("scope") == scope and r.method == method]
    return result


def _one_round(config):
    algorithm = build_algorithm(config)
    metrics = algorithm.run_round()
    return algorithm, metrics


# ------------------------------------------------------------ the paper's numbers (spec 7.1)
TABLE7 = {1: 3.5691, 2: 1.0587, 3: 0.6373, 4: 0.4589, 5: 0.3593, 8: 0.2484, 10: 0.2251,
          15: 0.2029}
#: records -> (sigma, epsilon with the Balle et al. 2020 conversion), spec seed2 section 7.1
BALLE_CHECK = {1266: (5, 0.2693), 1000: (4, 0.5116)}
TABLE8 = {1: 4.6978, 2: 1.4949, 3: 0.9067, 4: 0.6546, 5: 0.5130, 6: 0.4221, 7: 0.3587,
          8: 0.3158}


def _paper_config(records, local_steps, rounds, sigma, **federated):
    """The paper's instance-level setting: N = 10 clients of ``records`` records, B = 50
    Poisson batches, V local steps, T rounds, delta = 1e-5."""
    return config_from_dict({
        "data": {"dataset": "synthetic", "synthetic_examples": 10 * records + 400,
                 "test_fraction": 400 / (10 * records + 400), "partition": "iid",
                 "clients": 10, "train_size": records, "test_size": 10},
        "training": {"local_steps": local_steps, "batch_size": 50, "sampling": "poisson",
                     "optimizer": "momentum", "lr": 0.02, "weight_decay": 5e-4},
        "privacy": {"noise_multiplier": sigma, "delta": 1e-5},
        "federated": {"algorithm": "insdp-fedavg", "rounds": rounds, **federated},
    })


@pytest.mark.parametrize(("table", "records", "local_steps", "rounds"), [
    (TABLE7, 1266, 26, 3),  # MNIST 0/1: p = 50/1266, 3 rounds x 26 steps = 78
    (TABLE8, 1000, 100, 1),  # CIFAR airplane/bird: p = 0.05, 1 round x 100 steps
])
def test_tables_7_and_8_through_the_plan_built_from_a_config(table, records, local_steps,
                                                             rounds):
    data = build_dataset(_paper_config(records, local_steps, rounds, 1.0))
    assert list(data.client_sizes) == [records] * 10
    for sigma, expected in table.items():
        config = _paper_config(records, local_steps, rounds, sigma)
        plan = InsDpFedAvg.privacy_plan(config, data)
        paper = _by_scope(plan.results(rounds), "paper")
        assert round(paper.epsilon, 4) == pytest.approx(expected, abs=1e-12), sigma
        assert paper.kind == "bound" and paper.extras["accounting"] == PAPER_ACCOUNTING
        assert paper.extras["conversion"] == "classic"
        assert paper.steps == local_steps * rounds
        assert paper.sampling == f"poisson (q={50 / records:.6g})"
        # privfl's default RDP (finer orders, improved conversion) is tighter
        mine = _by_scope(plan.results(rounds), "client-updates")
        assert mine.kind == "bound" and mine.epsilon < paper.epsilon
        if sigma == BALLE_CHECK[records][0]:  # spec 7.1's conversion-sensitivity checks
            assert round(mine.epsilon, 4) == BALLE_CHECK[records][1]


def test_figure_9_fedsgd_paper_accounting_is_a_reference_beside_rigorous_numbers():
    # spec 7.3: N = 30, p = 0.4, sigma = 3, T = 200, delta = 1e-4; m = 10 or 20 of 30
    sizes = np.full(30, 50)
    spec = LocalTrainingSpec(local_steps=1, batch_size=20, sampling="poisson", clip_norm=1.5,
                             noise_multiplier=3.0, optimizer="sgd")
    for m, ours, dopamine in ((10, 0.8872, 2.7680), (20, 1.2576, 1.9132)):
        plan = InsDpPrivacy(spec, sizes, algorithm="fedsgd", clients_per_round=m,
                            release="global-model", delta=1e-4, accountants="rdp")
        paper = _by_scope(plan.results(200), "paper")
        assert round(paper.epsilon, 4) == ours
        assert paper.kind == "reference"  # amplification by client sampling: not a guarantee
        # the rigorous trusted-aggregator accounting (rate p, sigma sqrt(m), every round
        # charged) on the paper's grid is Dopamine's number
        legacy = InsDpPrivacy(spec, sizes, algorithm="fedsgd", clients_per_round=m,
                              release="global-model", delta=1e-4, accountants="rdp",
                              options=PAPER_OPTIONS, paper_accounting=False)
        assert round(_by_scope(legacy.results(200), "global-model").epsilon, 4) == dopamine
        bound = _by_scope(plan.results(200), "global-model")
        assert bound.kind == "bound" and paper.epsilon < bound.epsilon < dopamine
    # with every client in every round the paper's rate is q itself: then it is a bound
    full = InsDpPrivacy(spec, sizes, algorithm="fedsgd", release="global-model", delta=1e-4,
                        accountants="rdp")
    assert _by_scope(full.results(5), "paper").kind == "bound"


# ------------------------------------------------------------ the plan
def test_the_worst_client_is_the_one_with_fewest_records():
    spec = LocalTrainingSpec(local_steps=3, batch_size=10, sampling="poisson", clip_norm=1.0,
                             noise_multiplier=1.2)
    plan = InsDpPrivacy(spec, [40, 80, 80, 200], algorithm="fedavg", delta=1e-5,
                        accountants=("rdp", "pld"))
    accountant = build_accountant("rdp")
    alone = {n: accountant.epsilon(spec.privacy_event(n, 4), 1e-5).epsilon for n in (40, 80)}
    result = _by_scope(plan.results(4), "client-updates")
    assert result.epsilon == pytest.approx(alone[40], rel=1e-12)
    assert alone[40] > 1.2 * alone[80]
    assert result.sampling == "poisson (q=0.25)" and result.steps == 12
    assert "max over clients" in result.note
    pld = _by_scope(plan.results(4), "client-updates", "pld")
    assert pld.epsilon < result.epsilon  # both bounds; PLD is tighter here


def test_charged_rounds_follow_the_cohort_scheme():
    spec = LocalTrainingSpec(local_steps=2, batch_size=5, clip_norm=1.0, noise_multiplier=1.0)
    cyclic = InsDpPrivacy(spec, [20] * 5, algorithm="fedavg", clients_per_round=2,
                          client_sampling="cyclic")
    # rounds 1..3 take clients {0,1}, {2,3}, {4,0}
    assert [list(cyclic.scheduled_cohort(r)) for r in (1, 2, 3)] == [[0, 1], [2, 3], [0, 4]]
    assert list(cyclic.participations(3)) == [2, 1, 1, 1, 1]
    for rounds in range(12):
        expected = np.zeros(5, dtype=int)
        for r in range(1, rounds + 1):
            expected[cyclic.scheduled_cohort(r)] += 1
        assert list(cyclic.participations(rounds)) == list(expected)
    uniform = InsDpPrivacy(spec, [20] * 5, algorithm="fedavg", clients_per_round=2)
    assert list(uniform.participations(3)) == [3] * 5  # conservative: every round
    # the cyclic worst client is charged 2 rounds after 3: fewer steps than uniform's 3
    assert _by_scope(cyclic.results(3), "client-updates").steps == 4
    assert _by_scope(uniform.results(3), "client-updates").steps == 6


@settings(max_examples=60, deadline=None)
@given(clients=st.integers(1, 12), data=st.data())
def test_cyclic_charges_equal_the_schedule(clients, data):
    m = data.draw(st.integers(1, clients))
    rounds = data.draw(st.integers(0, 30))
    spec = LocalTrainingSpec(local_steps=1, batch_size=1, clip_norm=1.0, noise_multiplier=1.0)
    plan = InsDpPrivacy(spec, [3] * clients, algorithm="fedavg", clients_per_round=m,
                        client_sampling="cyclic")
    expected = np.zeros(clients, dtype=np.int64)
    for r in range(1, rounds + 1):
        cohort = plan.scheduled_cohort(r)
        assert cohort.size == m and len(set(cohort.tolist())) == m
        expected[cohort] += 1
    charged = plan.participations(rounds)
    assert list(charged) == list(expected)
    assert charged.sum() == rounds * m and charged.max() - charged.min() <= 1


def test_global_model_release_noise_is_sigma_sqrt_m_and_needs_one_sgd_step():
    spec = LocalTrainingSpec(local_steps=1, batch_size=5, sampling="poisson", clip_norm=1.0,
                             noise_multiplier=1.5, optimizer="sgd")
    plan = InsDpPrivacy(spec, [25] * 6, algorithm="fedsgd", clients_per_round=4,
                        release="global-model")
    (event,) = plan.client_events(7)
    ((step, count),) = event.steps
    assert step == NoisyStep(1.5 * 2.0, 0.2, Sampling.POISSON) and count == 7
    updates = InsDpPrivacy(spec, [25] * 6, algorithm="fedsgd", clients_per_round=4,
                           release="client-updates")
    ((step, _),) = updates.client_events(7)[0].steps
    assert step.noise_multiplier == 1.5
    with pytest.raises(ValueError, match=r"optimizer = 'adam': release = 'global-model' needs"):
        InsDpPrivacy(LocalTrainingSpec(local_steps=1, batch_size=5, clip_norm=1.0,
                                       noise_multiplier=1.0, optimizer="adam"),
                     [25] * 6, algorithm="fedsgd", release="global-model")
    with pytest.raises(ValueError, match=r"local_steps = 2 is out of range: InsDP-FedSGD"):
        InsDpPrivacy(LocalTrainingSpec(local_steps=2, batch_size=5, clip_norm=1.0,
                                       noise_multiplier=1.0, optimizer="sgd"),
                     [25] * 6, algorithm="fedsgd")
    with pytest.raises(ValueError, match=r"release = 'global-model' is not allowed for "
                                         "InsDP-FedAvg"):
        InsDpPrivacy(spec, [25] * 6, algorithm="fedavg", release="global-model")
    with pytest.raises(ValueError, match=r"clients_per_round = 7 is out of range"):
        InsDpPrivacy(spec, [25] * 6, algorithm="fedsgd", clients_per_round=7)
    with pytest.raises(ValueError, match=r"client_sizes\[1\] = 4 is out of range"):
        InsDpPrivacy(spec, [25, 4], algorithm="fedsgd")


def test_fixed_size_batches_are_accounted_replace_one_never_as_poisson():
    spec = LocalTrainingSpec(local_steps=2, batch_size=5, sampling="without-replacement",
                             clip_norm=1.0, noise_multiplier=1.0)
    plan = InsDpPrivacy(spec, [25] * 3, algorithm="fedavg", accountants="rdp")
    for result in plan.results(2):
        assert result.neighbouring == "replace-one"
        assert result.sampling.startswith("without-replacement")
    assert plan.results(0)[0].epsilon == 0.0 and plan.results(0)[0].steps == 0
    card = plan.card(2)
    assert card["neighbouring"].startswith("replace-one") and card["delta"] == 1e-5


# ------------------------------------------------------------ configs
def test_config_validation_names_the_key():
    with pytest.raises(ConfigError, match=r"privacy.sigma = 1.0 is not allowed for "
                                          "federated.algorithm = 'insdp-fedavg'"):
        config_from_dict({**TINY, "privacy": {"sigma": 1.0}})
    with pytest.raises(ConfigError, match=r"training.local_steps = 2 is not allowed for "
                                          "federated.algorithm = 'insdp-fedsgd'"):
        _config(federated={"algorithm": "insdp-fedsgd"})
    with pytest.raises(ConfigError, match=r"training.optimizer = 'momentum' is not allowed"):
        _config(federated={"algorithm": "insdp-fedsgd"}, training={"local_steps": 1})
    with pytest.raises(ConfigError, match=r"clients_per_round = 5 is out of range: must be at "
                                          "most data.clients = 4"):
        _config(federated={"clients_per_round": 5})
    with pytest.raises(ConfigError, match=r"training.lr_decay_every = 2 is not supported"):
        _config(training={"lr_decay_every": 2})
    # FedSGD's defaults: one step, plain SGD; a missing noise multiplier defaults to 1
    raw = copy.deepcopy(TINY)
    raw["training"] = {"batch_size": 8}
    raw["privacy"] = {"delta": 1e-5}
    raw["federated"] = {"algorithm": "insdp-fedsgd"}
    config = config_from_dict(raw)
    assert config.training.local_steps == 1 and config.training.optimizer == "sgd"
    assert config.privacy.noise_multiplier == 1.0
    assert config.privacy.accountants == ["rdp", "pld"]
    updates = _config(federated={"algorithm": "insdp-fedsgd", "release": "client-updates"},
                      training={"local_steps": 1})
    assert updates.training.optimizer == "momentum"


# ------------------------------------------------------------ one setting, training and privacy
@pytest.mark.parametrize(("section", "key", "value"), [
    ("privacy", "noise_multiplier", 2.0),
    ("training", "batch_size", 12),
    ("training", "local_steps", 3),
])
def test_one_setting_changes_training_and_reported_privacy(section, key, value):
    base, base_metrics = _one_round(_config())
    changed, metrics = _one_round(_config(**{section: {key: value}}))
    assert not torch.equal(base.global_model, changed.global_model)
    eps, eps_changed = base_metrics["epsilon"], metrics["epsilon"]
    assert eps_changed < eps if key == "noise_multiplier" else eps_changed > eps
    # the trainer ran what the plan accounts: V steps of expected batch B at noise sigma
    spec = changed.spec
    assert spec is changed.plan.spec
    assert getattr(spec, key) == value
    result = _by_scope(changed.privacy(), "client-updates")
    assert result.steps == spec.local_steps and result.sampling == (
        f"poisson (q={spec.batch_size / 45:.6g})")


def test_rounds_and_cohorts_charge_what_the_training_ran():
    algorithm = build_algorithm(_config(federated={"clients_per_round": 3,
                                                   "client_sampling": "cyclic"}))
    epsilons = []
    for r in range(1, 5):
        metrics = algorithm.run_round()
        assert metrics["cohort_size"] == 3
        assert list(algorithm.participations) == list(algorithm.plan.participations(r))
        epsilons.append(metrics["epsilon"])
    assert epsilons == sorted(epsilons) and epsilons[0] < epsilons[-1]
    uniform = build_algorithm(_config(federated={"clients_per_round": 2}))
    for r in range(1, 4):
        cohort = uniform.select_cohort()
        assert cohort.size == 2 and len(set(cohort.tolist())) == 2
        assert list(cohort) == sorted(cohort)
        uniform.round = r
    for _ in range(3):
        uniform.run_round()
    assert (uniform.participations <= uniform.plan.participations(uniform.round)).all()


def test_server_step_is_the_mean_update_times_server_lr():
    one, _ = _one_round(_config())
    half, _ = _one_round(_config(federated={"server_lr": 0.5}))
    w0 = build_algorithm(_config()).global_model
    assert torch.allclose(half.global_model, w0 + 0.5 * (one.global_model - w0), atol=1e-6)


def test_fedsgd_mean_update_noise_is_sigma_c_over_b_sqrt_m():
    """The premise of the global-model accounting: with the batches fixed, the noise of the mean
    one-step update has std lr * sigma * C / (B sqrt(m)), i.e. multiplier sigma sqrt(m) against
    one record's sensitivity lr * C / (B m)."""
    config = _config(federated={"algorithm": "insdp-fedsgd", "clients_per_round": 4},
                     training={"local_steps": 1, "optimizer": "sgd", "lr": 0.1},
                     privacy={"noise_multiplier": 3.0},
                     model={"name": "mlp", "kwargs": {"hidden": [64]}})
    noisy = build_algorithm(config)
    # the same run without noise (clipping only): same seeds, same cohort, same batches
    quiet = InsDpFedSgd(builders.build_model(config, noisy.data),
                        dataclasses.replace(noisy.spec, noise_multiplier=0.0), noisy.data,
                        clients_per_round=4, seed=config.seed, delta=None)
    assert torch.equal(noisy.global_model, quiet.global_model)
    noisy.run_round()
    quiet.run_round()
    noise = (noisy.global_model - quiet.global_model).double()
    expected = 0.1 * 3.0 * 1.0 / (8 * math.sqrt(4))
    assert noise.numel() > 40_000
    assert noise.std().item() == pytest.approx(expected, rel=0.02)
    assert abs(noise.mean().item()) < 4 * expected / math.sqrt(noise.numel())


# ------------------------------------------------------------ resume and runs
def test_state_dict_resume_is_exact():
    config = _config(federated={"clients_per_round": 2, "rounds": 4})
    full = build_algorithm(config)
    rows_full = [full.run_round() for _ in range(4)]
    split = build_algorithm(config)
    rows_split = [split.run_round() for _ in range(2)]
    buffer = io.BytesIO()
    torch.save(split.state_dict(), buffer)
    buffer.seek(0)
    resumed = build_algorithm(config)
    resumed.load_state_dict(torch.load(buffer, weights_only=True))
    rows_split += [resumed.run_round() for _ in range(2)]
    assert torch.equal(full.global_model, resumed.global_model)
    for key, value in full.optimizer_state.items():
        assert torch.equal(value, resumed.optimizer_state[key]), key
    assert list(full.participations) == list(resumed.participations)
    strip = [{k: v for k, v in row.items() if k != "seconds"} for row in rows_full]
    assert strip == [{k: v for k, v in row.items() if k != "seconds"} for row in rows_split]
    other = build_algorithm(_config(data={"clients": 5}))
    with pytest.raises(ValueError, match=r"data_fingerprint does not match"):
        other.load_state_dict(full.state_dict())


def test_run_and_check_privacy(tmp_path):
    config = _config(federated={"algorithm": "insdp-fedsgd", "clients_per_round": 2},
                     training={"local_steps": 1, "optimizer": "sgd"})
    result = Experiment.create(config, tmp_path / "run").run()
    assert result.summary["rounds_completed"] == 3
    assert {r.extras["scope"] for r in result.privacy} == {"global-model", "paper"}
    assert result.card["release"].startswith("the global model of every round")
    check = check_run_privacy(tmp_path / "run")
    assert check.ok and len(check.rows) == 3


def test_non_private_baseline_reports_no_guarantee():
    algorithm, metrics = _one_round(_config(privacy={"enabled": False,
                                                     "noise_multiplier": None}))
    assert not algorithm.private and algorithm.privacy() == []
    assert "epsilon" not in metrics
    assert algorithm.plan.card(1)["privacy"].startswith("NONE")


def test_unequal_clients_train_and_account_per_client():
    x = np.random.default_rng(0).normal(size=(60, 1, 2, 2)).astype(np.float32)
    y = np.arange(60) % 2
    pool = Dataset(x, y, "toy/train", 2, normalized=True)
    test = Dataset(x[:10], y[:10], "toy/test", 2, normalized=True)
    data = FederatedDataset(pool, test, [np.arange(10), np.arange(10, 60)],
                            [np.arange(5), np.arange(5, 10)])
    spec = LocalTrainingSpec(local_steps=2, batch_size=5, sampling="poisson", clip_norm=1.0,
                             noise_multiplier=1.0, optimizer="sgd", lr=0.1)
    model = build_model("logreg", input_shape=(1, 2, 2), num_classes=2)
    algorithm = InsDpFedAvg(model, spec, data, accountants="rdp", seed=1)
    metrics = algorithm.run_round()
    result = _by_scope(algorithm.privacy(), "client-updates")
    assert result.sampling == "poisson (q=0.5)"  # client 0's 5/10, not client 1's 5/50
    event = PrivacyEvent(((NoisyStep(1.0, 0.5, Sampling.POISSON), 2),))
    assert metrics["epsilon"] == pytest.approx(
        build_accountant("rdp").epsilon(event, 1e-5).epsilon, rel=1e-12)
    assert 0.0 <= metrics["global_accuracy"] <= 1.0
