"""DP-DSGD with random participation (Hasircioglu and Gunduz 2022, Algorithm 1) on the seam."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privfl.accounting.participation import calibrate_participation, participation_report
from privfl.algorithms.base import privacy_entries
from privfl.algorithms.dp_dsgd import (
    SERVERS,
    Cohort,
    DpDsgd,
    DpDsgdPrivacy,
    GradientSum,
)
from privfl.config import ConfigError, config_from_dict, read_yaml
from privfl.data import Dataset, FederatedDataset, synthetic_dataset
from privfl.models import build_model
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment, build_algorithm
from privfl.runs.rundir import RunDirectory

#: A complete run configuration that trains in about a second (4,700-parameter MLP).
CONFIG = {
    "name": "tiny-dp-dsgd",
    "seed": 5,
    "data": {"dataset": "synthetic", "synthetic_examples": 300, "test_fraction": 0.2,
             "partition": "iid", "clients": 6, "train_size": 40, "test_size": 10},
    "model": {"name": "mlp", "kwargs": {"hidden": [6]}},
    "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": ["wcs", "ols"]},
    "federated": {"algorithm": "dp-dsgd", "rounds": 3, "client_rate": 0.5, "record_rate": 0.2,
                  "server_lr": 0.5, "server_momentum": 0.5, "composition": ["rdp"]},
    "run": {"threads": 1},
}


def _config(**sections):
    raw = copy.deepcopy(CONFIG)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


def _federation(clients: int, records, *, features: int = 4, seed: int = 0):
    """``clients`` clients holding ``records`` (an int or one count per client) records."""
    sizes = [records] * clients if isinstance(records, int) else list(records)
    total = sum(sizes)
    full = synthetic_dataset(total + 20, 3, (1, 2, features // 2), seed=seed)
    train, test = full.subset(np.arange(total)), full.subset(np.arange(total, total + 20))
    bounds = np.cumsum([0, *sizes])
    parts = [np.arange(bounds[j], bounds[j + 1]) for j in range(clients)]
    return FederatedDataset(train, test, parts, [np.zeros(0, dtype=np.int64)] * clients)


def _model(features: int = 4, hidden: int = 5):
    torch.manual_seed(0)
    return build_model("mlp", input_shape=(1, 2, features // 2), num_classes=3, hidden=(hidden,))


def _algorithm(data, *, p=0.5, q=0.3, z=1.0, clip=1.0, server="trusted", secure=False,
               seed=0, model=None, **kwargs):
    plan = DpDsgdPrivacy(data.client_sizes, client_rate=p, record_rate=q, noise_multiplier=z,
                         clip_norm=clip, server=server, secure=secure, schemes=("wcs",),
                         composition=("rdp",))
    return DpDsgd(model or _model(), data, plan, seed=seed, **kwargs)


# ------------------------------------------------------------------------------ sampling
@pytest.mark.parametrize("secure", [False, True])
def test_participation_and_record_inclusion_rates(secure):
    """Each client joins w.p. p, each record of a participant w.p. q, independently."""
    p, q, clients, n, draws = 0.3, 0.2, 40, 25, 300
    algo = _algorithm(_federation(clients, n), p=p, q=q, secure=secure)
    joined = np.zeros(clients)
    kept = np.zeros(clients * n)
    offered = np.zeros(clients * n)
    sizes = []
    for _ in range(draws):
        cohort = algo.select_cohort()
        joined[cohort.participants] += 1
        sizes.append(cohort.participants.size)
        for j, rec in zip(cohort.participants, cohort.records, strict=True):
            assert np.all(np.isin(rec, algo.data.train_indices[j]))  # only its own records
            offered[algo.data.train_indices[j]] += 1
            kept[rec] += 1
    # overall rates within 5 standard errors
    trials = clients * draws
    assert abs(joined.sum() / trials - p) < 5 * math.sqrt(p * (1 - p) / trials)
    assert abs(kept.sum() / offered.sum() - q) < 5 * math.sqrt(q * (1 - q) / offered.sum())
    # per client: counts are Binomial(draws, p) (chi-square goodness of fit)
    chi2 = (((joined - draws * p) ** 2) / (draws * p * (1 - p))).sum()
    assert stats.chi2.sf(chi2, clients) > 1e-4
    # cohort sizes are Binomial(clients, p): variance clients p (1 - p), not 0 (not fixed size)
    assert np.var(sizes) == pytest.approx(clients * p * (1 - p), rel=0.3)


def test_seeded_sampling_is_reproducible_and_secure_sampling_is_not():
    data = _federation(20, 10)
    a, b = _algorithm(data, seed=3), _algorithm(data, seed=3)
    for _ in range(3):
        ca, cb = a.select_cohort(), b.select_cohort()
        assert np.array_equal(ca.participants, cb.participants)
        assert all(np.array_equal(x, y) for x, y in zip(ca.records, cb.records, strict=True))
    s1, s2 = _algorithm(data, secure=True, seed=3), _algorithm(data, secure=True, seed=3)
    draws1 = [s1.select_cohort().indices.tolist() for _ in range(5)]
    draws2 = [s2.select_cohort().indices.tolist() for _ in range(5)]
    assert draws1 != draws2


# ------------------------------------------------------------------------------ the update
def _manual_clipped_sum(algo, indices, clip):
    model = algo._model
    params = algo.global_params()
    total = []
    for i in indices:
        x, y = algo._x[i: i + 1], algo._y[i: i + 1]
        leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
        loss = torch.nn.functional.cross_entropy(
            torch.func.functional_call(model, leaves, (x,)), y)
        grads = torch.autograd.grad(loss, list(leaves.values()))
        flat = torch.cat([g.flatten() for g in grads])
        total.append(flat * min(1.0, clip / float(flat.norm())) if clip else flat)
    return torch.stack(total).sum(0)


@pytest.mark.parametrize("clip", [0.05, None])
def test_local_work_is_the_sum_of_clipped_per_record_gradients(clip):
    data = _federation(8, 12)
    algo = _algorithm(data, q=0.5, clip=clip, z=1.0 if clip else 0.0)
    cohort = algo.select_cohort()
    assert cohort.indices.size > 3
    work = algo.local_work(cohort)
    expected = _manual_clipped_sum(algo, cohort.indices, clip)
    assert torch.allclose(work.total, expected, rtol=1e-5, atol=1e-6)
    assert work.records == cohort.indices.size
    if clip:  # every gradient of this model exceeds 0.05: all clipped
        assert work.clipped_fraction == 1.0
        assert float(work.total.norm()) <= clip * work.records + 1e-6
    else:
        assert math.isnan(work.clipped_fraction)


@pytest.mark.parametrize("sizes", [[10] * 6, [4, 9, 16, 3, 12, 20]])
def test_update_is_divided_by_the_expected_number_of_records(sizes):
    """w' = w - eta (sum g_i + noise) / (p q sum_i n_i) (momentum 0), whatever is realised."""
    p, q, eta = 0.4, 0.25, 0.7
    data = _federation(len(sizes), sizes)
    algo = _algorithm(data, p=p, q=q, server_lr=eta, server_momentum=0.0)
    assert algo.plan.expected_records == pytest.approx(p * q * sum(sizes))
    if len(set(sizes)) == 1:
        assert algo.plan.expected_records == pytest.approx(p * len(sizes) * q * sizes[0])
    assert algo.plan.records == max(sizes)  # the accountant's worst-case client
    total = torch.linspace(-1.0, 2.0, algo.trainer.num_params)
    before = algo.params.clone()
    state = algo.generator.get_state()
    noise = algo.noise(0)
    algo.generator.set_state(state)
    cohort = Cohort(np.array([0]), [np.array([0, 1])])  # realised: 1 client, 2 records
    algo.aggregate(cohort, GradientSum(total, 2, 0.0, 0.0))
    expected = before[0] - eta * (total + noise) / (p * q * sum(sizes))
    assert torch.allclose(algo.params[0], expected, rtol=1e-6, atol=1e-7)


def test_server_momentum_follows_pytorch_sgd():
    data = _federation(4, 10)
    algo = _algorithm(data, z=0.0, clip=None, server_lr=0.3, server_momentum=0.9)
    reference = torch.nn.Parameter(algo.params[0].clone())
    opt = torch.optim.SGD([reference], lr=0.3, momentum=0.9)
    for k in range(3):
        g = torch.full_like(reference, float(k + 1))
        algo.aggregate(Cohort(np.zeros(0, np.int64), []), GradientSum(g.clone(), 0, 0.0, 0.0))
        reference.grad = g / algo.plan.expected_records
        opt.step()
    assert torch.allclose(algo.params[0], reference.detach(), rtol=1e-6, atol=1e-7)


def test_trusted_noise_is_one_gaussian_of_std_z_c():
    data = _federation(6, 10)
    algo = _algorithm(data, z=1.5, clip=0.4, model=_model(hidden=200))
    state = algo.generator.get_state()
    noise = algo.noise(3)
    algo.generator.set_state(state)
    raw = torch.empty(1, algo.trainer.num_params).normal_(generator=algo.generator)[0]
    assert torch.allclose(noise, 0.6 * raw, rtol=1e-6)


def test_secure_noise_comes_from_os_urandom():
    data = _federation(6, 10)
    a, b = (_algorithm(data, secure=True, seed=4, model=_model(hidden=200)) for _ in range(2))
    na, nb = a.noise(2), b.noise(2)
    assert not torch.equal(na, nb)  # the seeded generator plays no part
    assert float(na.std()) == pytest.approx(1.0, rel=0.1)  # 1,603 coordinates: 5.6 SE
    assert torch.equal(a.generator.get_state(), b.generator.get_state())


def _noise_samples(server, clients=30, draws=3):
    data = _federation(clients, 5)
    algo = _algorithm(data, z=2.0, clip=0.5, server=server, seed=11, model=_model(hidden=300))
    return torch.cat([algo.noise(7) for _ in range(draws)]).numpy().astype(np.float64)


def test_total_noise_per_server():
    """Trusted and secure aggregation: the sum carries N(0, sigma^2) (same distribution);
    untrusted: every one of the N clients adds sigma (N sigma^2); participants only: |P| sigma^2.
    """
    sigma, clients = 1.0, 30
    trusted = _noise_samples("trusted")
    shares = _noise_samples("secure-aggregation")
    for sample in (trusted, shares):
        assert sample.std() == pytest.approx(sigma, rel=0.02)
        assert stats.kstest(sample / sigma, "norm").pvalue > 1e-3
    assert stats.ks_2samp(trusted, shares).pvalue > 1e-3
    assert _noise_samples("untrusted").std() == pytest.approx(sigma * math.sqrt(clients),
                                                               rel=0.02)
    assert _noise_samples("untrusted-participants-only").std() == pytest.approx(
        sigma * math.sqrt(7), rel=0.02)


@settings(max_examples=40, deadline=None)
@given(server=st.sampled_from(SERVERS), clients=st.integers(1, 500),
       participants=st.integers(0, 500), z=st.floats(0.01, 100), clip=st.floats(0.01, 10))
def test_message_noise_variance_matches_the_release(server, clients, participants, z, clip):
    participants = min(participants, clients)
    plan = DpDsgdPrivacy(np.full(clients, 3), client_rate=0.5, record_rate=0.5,
                         noise_multiplier=z, clip_norm=clip, server=server,
                         schemes=("wcs",) if server.endswith("only") else ("wcs", "cs"))
    count, std = plan.message_noise(participants)
    sigma = z * clip
    want = {"trusted": sigma**2, "secure-aggregation": sigma**2,
            "untrusted": clients * sigma**2,
            "untrusted-participants-only": participants * sigma**2}[server]
    assert count * std**2 == pytest.approx(want, rel=1e-9)
    if server != "trusted":
        assert count == (participants if server.endswith("only") else clients)
    assert plan.noise_std == pytest.approx(sigma)


# ------------------------------------------------------------------------------ privacy
def _report(p, q, d, sigma, rounds, schemes, composition=("rdp",), server="trusted"):
    return participation_report(p, q, d, sigma, clip_norm=1.0, delta=1e-5, iterations=rounds,
                                methods=schemes, accountants=composition, server=server)


@pytest.mark.parametrize("server", ["trusted", "untrusted"])
def test_reported_numbers_equal_participation_report(server):
    schemes = ("per-s1-convexity", "wcs", "ols", "theorem-4.1", "cs")
    plan = DpDsgdPrivacy([30, 50, 40], client_rate=0.2, record_rate=0.1, noise_multiplier=1.3,
                         clip_norm=1.0, server=server, schemes=schemes,
                         composition=("rdp", "pld"))
    assert plan.records == 50
    for rounds in (1, 4):
        fresh = _report(0.2, 0.1, 50, 1.3, rounds, schemes, ("rdp", "pld"), server)
        got = plan.results(rounds)
        per_iter = [r for r in got if r.extras["scope"] == "iteration"]
        run = [r for r in got if r.extras["scope"] == "run"]
        want_iter = [r for r in fresh if r.steps == 1]
        want_run = want_iter if rounds == 1 else [r for r in fresh if r.steps == rounds]
        for mine, theirs in ((per_iter, want_iter), (run, want_run)):
            assert [r.method for r in mine] == [r.method for r in theirs]
            for a, b in zip(mine, theirs, strict=True):
                assert (a.epsilon, a.delta, a.kind, a.release) == (
                    b.epsilon, b.delta, b.kind, b.release)
                assert a.unit == "record" and a.neighbouring == "add-remove"
    kinds = {r.method: r.kind for r in plan.results(4)}
    assert kinds["theorem-4.1"] == kinds["theorem-4.1-basic"] == "estimate"
    assert kinds["cs"] == kinds["cs-rdp"] == "reference"
    assert all(kinds[m] == "bound" for m in ("per-s1-convexity", "wcs", "wcs-pld", "ols-rdp",
                                             "per-s1-convexity-basic"))
    assert [r.epsilon for r in plan.results(0)] == [0.0] * len(plan.results(1))


def test_headline_epsilon_is_the_tightest_rigorous_bound_of_the_run():
    algo = build_algorithm(_config(privacy={"accountants": ["per-s1-convexity", "wcs", "ols",
                                                            "theorem-4.1", "cs"]}))
    for _ in range(2):
        metrics = algo.run_round()
    run = [e for e in metrics["privacy"] if e["scope"] == "run"]
    bounds = [e for e in run if e["kind"] == "bound"]
    best = min(bounds, key=lambda e: e["epsilon"])
    assert metrics["epsilon"] == best["epsilon"] and metrics["epsilon_method"] == best["method"]
    # the estimate and the reference are smaller but never the headline
    assert min(e["epsilon"] for e in run) < metrics["epsilon"]
    # the headline (summary.json's final epsilon) is the same tightest bound
    from privfl.algorithms.base import privacy_metrics
    from privfl.runs.plan_headline import plan_headline

    final = privacy_metrics(algo.plan, algo.privacy(2))
    assert (final["epsilon"], final["epsilon_method"]) == (best["epsilon"], best["method"])
    assert plan_headline(algo.plan, algo.privacy(2)).result.epsilon == best["epsilon"]


def test_secure_aggregation_is_accounted_as_the_trusted_sum_with_its_release():
    trusted = DpDsgdPrivacy([20] * 5, client_rate=0.3, record_rate=0.2, noise_multiplier=1.0,
                            clip_norm=1.0, schemes=("wcs",), composition=("rdp",))
    shares = DpDsgdPrivacy([20] * 5, client_rate=0.3, record_rate=0.2, noise_multiplier=1.0,
                           clip_norm=1.0, server="secure-aggregation", schemes=("wcs",),
                           composition=("rdp",))
    for a, b in zip(trusted.results(3), shares.results(3), strict=True):
        assert a.epsilon == b.epsilon and a.method == b.method
        assert "secure aggregation" in b.release and "no client" in b.note
        assert b.extras["server"] == "secure-aggregation"


def _run(config, rounds=2):
    algo = build_algorithm(config)
    for _ in range(rounds):
        metrics = algo.run_round()
    return algo.params.clone(), {(e["method"], e["scope"]): e["epsilon"]
                                 for e in metrics["privacy"]}


@pytest.mark.parametrize("change, unchanged", [
    ({"federated": {"client_rate": 0.8}}, {"ols"}),  # OLS ignores client sampling
    ({"federated": {"record_rate": 0.4}}, set()),
    ({"privacy": {"noise_multiplier": 2.0}}, set()),
    ({"federated": {"rounds": 3}}, None),  # per-iteration numbers stay, the run's grow
])
def test_a_setting_changes_both_training_and_reported_privacy(change, unchanged):
    base_params, base_eps = _run(_config())
    rounds = change.get("federated", {}).get("rounds", 2)
    params, eps = _run(_config(**change), rounds=rounds)
    assert not torch.equal(params, base_params)
    assert eps.keys() == base_eps.keys()
    for (method, scope), value in eps.items():
        if unchanged is None:
            assert (value > base_eps[method, scope]) == (scope == "run"), (method, scope)
        elif method.split("-")[0] in unchanged:
            assert value == base_eps[method, scope], (method, scope)
        else:
            assert value != base_eps[method, scope], (method, scope)


def test_non_private_baseline_has_no_guarantee():
    algo = build_algorithm(_config(privacy={"enabled": False}))
    metrics = algo.run_round()
    assert not algo.private and "privacy" not in metrics and "epsilon" not in metrics
    assert algo.plan.results(3) == [] and "NONE" in algo.plan.card(3)["privacy"]
    assert algo.plan.clip_norm is None and algo.plan.noise_std == 0.0


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("sections, message", [
    ({"privacy": {"sigma": 1.0, "noise_multiplier": None}}, r"privacy.sigma = 1.0 is not allowed"),
    ({"training": {"lr": 0.1}}, r"training.lr = 0.1 is not used"),
    ({"training": {"local_steps": 3}}, r"training.local_steps = 3 is not used"),
    ({"federated": {"server": "untrusted-participants-only"},
      "privacy": {"accountants": ["wcs", "theorem-4.1"]}}, r"only wcs and ols hold"),
    ({"privacy": {"accountants": ["rdp"]}}, r"privacy.accountants = \['rdp'\] is not allowed"),
    ({"federated": {"client_rate": 0.0}}, r"client_rate"),
    ({"federated": {"composition": ["gdp"]}}, r"composition"),
])
def test_config_refuses_what_it_cannot_honour(sections, message):
    with pytest.raises(ConfigError, match=message):
        _config(**sections)


def test_config_defaults():
    config = config_from_dict({"federated": {"algorithm": "dp-dsgd"}})
    assert config.privacy.noise_multiplier == 1.0
    assert config.privacy.accountants == ["per-s1-convexity", "wcs", "ols", "theorem-4.1"]
    assert config.federated.server == "trusted" and config.federated.composition == ["rdp",
                                                                                       "pld"]


@pytest.mark.parametrize("kwargs, message", [
    ({"client_rate": 1.5}, r"client_rate = 1.5 is out of range"),
    ({"record_rate": 0}, r"record_rate = 0(\.0)? is out of range"),
    ({"noise_multiplier": -1}, r"noise_multiplier = -1(\.0)? is out of range"),
    ({"clip_norm": None}, r"noise_multiplier = 1.0 is out of range: must be 0"),
    ({"server": "honest"}, r"server = 'honest' is not allowed"),
    ({"schemes": ("wcs", "rdp")}, r"schemes = 'rdp' is not allowed"),
    ({"schemes": ()}, r"schemes = \[\] is out of range"),
    ({"composition": ("gdp",)}, r"composition = 'gdp' is not allowed"),
    ({"delta": 1.0}, r"delta = 1.0 is out of range"),
    ({"server": "untrusted-participants-only", "schemes": ("cs",)}, r"must be among wcs, ols"),
])
def test_plan_validation_names_the_argument(kwargs, message):
    args = {"client_rate": 0.5, "record_rate": 0.5, "noise_multiplier": 1.0, "clip_norm": 1.0,
            **kwargs}
    with pytest.raises(ValueError, match=message):
        DpDsgdPrivacy([5, 5], **args)


def test_algorithm_validation():
    data = _federation(3, 5)
    plan = DpDsgdPrivacy([5, 5], client_rate=0.5, record_rate=0.5, noise_multiplier=1.0,
                         clip_norm=1.0)
    with pytest.raises(ValueError, match="client_sizes do not match"):
        DpDsgd(_model(), data, plan)
    good = DpDsgdPrivacy(data.client_sizes, client_rate=0.5, record_rate=0.5,
                         noise_multiplier=1.0, clip_norm=1.0)
    with pytest.raises(ValueError, match=r"server_momentum = 1.0 is out of range"):
        DpDsgd(_model(), data, good, server_momentum=1.0)
    with pytest.raises(ValueError, match=r"server_lr = 0(\.0)? is out of range"):
        DpDsgd(_model(), data, good, server_lr=0)


# ------------------------------------------------------------------------------ runs and resume
def test_state_dict_resumes_exactly():
    config = _config()
    a = build_algorithm(config)
    for _ in range(2):
        a.run_round()
    state = copy.deepcopy(a.state_dict())
    b = build_algorithm(config)
    b.load_state_dict(state)
    ma, mb = a.run_round(), b.run_round()
    assert torch.equal(a.params, b.params)
    assert {k: v for k, v in ma.items() if k != "seconds"} == {
        k: v for k, v in mb.items() if k != "seconds"}
    with pytest.raises(ValueError, match="data_fingerprint"):
        build_algorithm(_config(data={"train_size": 39})).load_state_dict(state)


def test_experiment_resume_equals_uninterrupted_run_and_privacy_checks(tmp_path):
    Experiment.create(_config(), tmp_path / "full").run()
    first = Experiment.create(_config(run={"max_rounds": 2}), tmp_path / "split").run()
    assert first.stop_reason == "max_rounds"
    resumed = Experiment.resume(tmp_path / "split", ["run.max_rounds=null"])
    assert resumed.resumed_from == 2
    result = resumed.run()
    assert result.summary["rounds_completed"] == 3 and result.summary["algorithm"] == "dp-dsgd"

    def rows(name):
        return [{k: v for k, v in r.items() if k != "seconds"}
                for r in RunDirectory(tmp_path / name).read_metrics()]

    assert rows("full") == rows("split")
    assert all(row["privacy"] for row in rows("full"))
    check = check_run_privacy(tmp_path / "split")
    assert check.ok and len(check.rows) == 3
    summary = result.summary
    assert {r["unit"] for r in summary["privacy"]} == {"record"}
    assert summary["final"]["epsilon_method"] in {"wcs-rdp", "ols-rdp"}


def test_budget_stop_uses_the_run_scope(tmp_path):
    eps2 = privacy_entries(build_algorithm(_config()).plan.results(2))
    bound2 = min(e["epsilon"] for e in eps2 if e["scope"] == "run" and e["kind"] == "bound")
    result = Experiment.create(_config(stop={"epsilon": bound2 * 1.000001}),
                               tmp_path / "budget").run()
    assert result.stop_reason == "budget" and result.summary["rounds_completed"] == 2


def test_eval_every_reports_nan_between_evaluations():
    algo = build_algorithm(_config(federated={"eval_every": 2, "rounds": 5}))
    accs = [algo.run_round()["global_accuracy"] for _ in range(5)]
    assert [math.isnan(a) for a in accs] == [False, False, True, False, False]


def test_evaluation_uses_the_pooled_test_sets():
    full = synthetic_dataset(60, 3, (1, 2, 2), seed=2)
    train = full.subset(np.arange(40))
    test = Dataset(np.zeros((4, 1, 2, 2), np.float32), np.array([0, 0, 1, 2]), "t", 3,
                   normalized=True)
    data = FederatedDataset(train, test, [np.arange(20), np.arange(20, 40)],
                            [np.array([0]), np.array([1, 2])])
    algo = _algorithm(data)
    assert algo._test_y.tolist() == [0, 0, 1]


# ------------------------------------------------------------------------------ shipped configs
CONFIGS = Path(__file__).resolve().parents[3] / "configs"


#: (dataset, section) -> the training images the clients hold together and the expected batch
#: p q sum n_i (Hasircioglu and Gunduz 2022, section 6: N = 23,264 x 30 and 697 x 1,000 on
#: EMNIST ByClass; the substitutes use all 60,000 Fashion-MNIST images)
_PAPER_DATA = {("fashion-mnist", "6.1"): (60_000, 60), ("fashion-mnist", "6.2"): (60_000, 60),
               ("emnist", "6.1"): (697_920, 69.792), ("emnist", "6.2"): (697_000, 69.7)}


@pytest.mark.parametrize("path", sorted((CONFIGS / "hasircioglu2022").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_paper_configs_run_at_the_noise_their_scheme_calibrates(path):
    """Each private config's z is calibrate_participation's for its scheme at (0.015, 1e-6):
    the Fashion-MNIST substitutes (fmnist-*) and the runs on the paper's EMNIST ByClass
    (emnist-*)."""
    config = config_from_dict(read_yaml(path))
    f, p, d = config.federated, config.privacy, config.data
    expected = "emnist" if path.stem.startswith("emnist-") else "fashion-mnist"
    assert f.algorithm == "dp-dsgd" and d.dataset == expected
    records, batch = _PAPER_DATA[expected, path.stem.split("-")[1]]
    assert d.clients * d.train_size == records
    assert f.client_rate * d.clients * f.record_rate * d.train_size == pytest.approx(batch)
    if path.stem.endswith("nonprivate"):
        assert not p.enabled
        return
    scheme = next(s for s in ("per-s1-convexity", "theorem-4.1", "wcs", "ols")
                  if f"-{s}" in path.stem)
    noise = calibrate_participation(f.client_rate, f.record_rate, d.train_size, 0.015, 1e-6,
                                    schemes=[scheme])[scheme]
    assert p.noise_multiplier == pytest.approx(noise, rel=1e-12) and p.clip_norm == 1.0
    assert p.delta == 1e-6


def test_paper_configs_calibrated_noise_ordering():
    """The ordering the paper's Figures 6-7 rest on: sigma_RP < sigma_WCS < sigma_OLS."""
    for scenario in ("6.1", "6.2"):
        z = {s: config_from_dict(read_yaml(CONFIGS / "hasircioglu2022" /
                                           f"fmnist-{scenario}-{s}.yaml")).privacy.z
             for s in ("theorem-4.1", "per-s1-convexity", "wcs", "ols")}
        assert z["theorem-4.1"] < z["per-s1-convexity"] < z["wcs"] < z["ols"], scenario


@pytest.mark.slow
def test_demo_config_runs_from_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from privfl.cli.main import app

    before = torch.get_num_threads()
    try:
        result = CliRunner().invoke(app, ["run", str(CONFIGS / "demo-dp-dsgd.yaml"), "--out",
                                          str(tmp_path / "demo"), "--json"])
    finally:
        torch.set_num_threads(before)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["algorithm"] == "dp-dsgd" and summary["rounds_completed"] == 60
    assert {r["unit"] for r in summary["privacy"]} == {"record"}
    assert summary["final"]["global_accuracy"] > 0.75
    assert check_run_privacy(tmp_path / "demo", every=20).ok


def test_the_accountant_reads_the_largest_clients_record_count():
    """d = max_i n_i (the worst case) reaches the epsilon itself, not only ``plan.records``: the
    largest client sits inside the list (not first, second or last), and the per-s1-convexity
    bound grows with d, so a d read from any other client understates it, seen here."""
    sizes = [12, 7, 9, 31, 16, 5, 20]
    schemes, composition = ("per-s1-convexity", "theorem-4.1"), ("rdp",)
    plan = DpDsgdPrivacy(sizes, client_rate=0.3, record_rate=0.2, noise_multiplier=1.1,
                         clip_norm=1.0, schemes=schemes, composition=composition)
    assert plan.event(3).records == 31
    got = {(r.extras["scope"], r.method): r.epsilon for r in plan.results(3)}
    want = _report(0.3, 0.2, 31, 1.1, 3, schemes, composition)
    assert got == {("iteration" if r.steps == 1 else "run", r.method): r.epsilon for r in want}
    bound = got[("run", "per-s1-convexity-basic")]
    assert bound == pytest.approx(6.116757, abs=1e-6)
    for other in sorted(set(sizes) - {31}):
        wrong = {r.method: r.epsilon for r in _report(0.3, 0.2, other, 1.1, 3, schemes,
                                                          composition)}
        assert wrong["per-s1-convexity-basic"] < bound * (1 - 1e-6), other
