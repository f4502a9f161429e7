"""PriFedSync (seed 000 Algorithm 1): server logic, evaluation, sampling, accounting."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from privfl.accounting.fdp.federated import ClientTraining, FederatedSetting, federated_fdp
from privfl.algorithms import (
    IdentityHelper,
    InterpolationHelper,
    PriFedSync,
    make_helper,
    privacy_entries,
)
from privfl.fl import LocalTrainingSpec
from privfl.models import build_model


# ---------------------------------------------------------------------------------- helpers
def test_identity_helper_returns_the_global_model():
    local = torch.arange(6.0).reshape(2, 3)
    glob = torch.tensor([10.0, 20.0, 30.0])
    out = IdentityHelper()(local, glob, np.array([0, 1]))
    assert torch.equal(out, glob.expand(2, 3))
    out[0, 0] = -1  # a copy, not a view of the global model
    assert glob[0] == 10.0


def test_interpolation_helper_is_eq_2_1():
    local = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    glob = torch.tensor([11.0, -8.0])
    out = InterpolationHelper(0.1)(local, glob, np.array([4, 7]))
    assert torch.allclose(out, 0.9 * local + 0.1 * glob)
    assert torch.allclose(InterpolationHelper(1.0)(local, glob, None), glob.expand(2, 2))
    assert torch.allclose(InterpolationHelper(0.0)(local, glob, None), local)


def test_helper_validation_names_the_argument():
    with pytest.raises(ValueError, match=r"alpha = 1.5 is out of range"):
        make_helper("interpolation", 1.5)
    with pytest.raises(ValueError, match=r"helper = 'attention' is not allowed"):
        make_helper("attention")


# ---------------------------------------------------------------------------------- round logic
BIASES = {0: (0.05, 0.0), 1: (0.0, 3.0)}


def _stub_trainer(algorithm):
    """Local training replaced by a fixed outcome per client: zero weights, a known bias."""

    def train(start, data, states, generator, lr=None):
        flat = algorithm.trainer.flatten(start).clone()
        params = algorithm.trainer.unflatten(flat)
        for k, (_, y) in enumerate(data):
            client = int(y[0])  # client 0 holds label 0, client 1 label 1
            params["linear.weight"][k] = 0.0
            params["linear.bias"][k] = torch.tensor(BIASES[client])
        m = flat.shape[0]
        stats = SimpleNamespace(loss=torch.zeros(m), clipped_fraction=torch.zeros(m))
        return params, states, stats

    algorithm.trainer.train = train


class _FixedUniforms:
    """Stands in for the numpy generator: returns queued uniforms for client sampling."""

    def __init__(self, *draws):
        self.draws = [np.asarray(d, dtype=float) for d in draws]

    def random(self, size):
        draw = self.draws.pop(0)
        assert draw.shape == (size,)
        return draw


def _bias_algorithm(data, **kwargs):
    torch.manual_seed(0)
    model = build_model("logreg", input_shape=(1, 1, 2), num_classes=2)
    spec = LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=None)
    algorithm = PriFedSync(model, spec, data, client_rate=0.5, **kwargs)
    _stub_trainer(algorithm)
    return algorithm


def test_personalised_and_global_evaluation_tiny_case(bias_federation):
    algorithm = _bias_algorithm(bias_federation, alpha=0.1)
    # round 1: only client 0 is sampled (uniform 0.1 < p = 0.5 <= 0.9)
    algorithm.rng = _FixedUniforms([0.1, 0.9], [0.2, 0.3])
    m1 = algorithm.run_round()
    assert m1["cohort_size"] == 1
    # client 0's personal model is right on its test set; client 1 was never sampled: 0 (A10)
    assert m1["personalised_accuracy_cohort"] == 1.0
    assert m1["personalised_accuracy"] == 0.5
    assert m1["clients_evaluated"] == 1
    # eta = 1: global = client 0's model, predicts 0 -> right for client 0 only
    assert algorithm.global_accuracy.tolist() == [1.0, 0.0]
    assert m1["global_accuracy"] == 0.5

    # round 2: both sampled
    m2 = algorithm.run_round()
    assert m2["cohort_size"] == 2
    # personalised models are evaluated right after local training, BEFORE the helper map:
    # client 0's interpolated model 0.9*(0.05, 0) + 0.1*(0.025, 1.5) predicts 1 (wrong), but
    # its freshly trained model predicts 0 (right).
    assert algorithm.personal_accuracy.tolist() == [1.0, 1.0]
    assert m2["personalised_accuracy"] == 1.0
    glob = algorithm.global_params()["linear.bias"]
    assert torch.allclose(glob, torch.tensor([0.025, 1.5]))
    assert algorithm.global_accuracy.tolist() == [0.0, 1.0]  # mean model predicts 1
    assert m2["global_accuracy"] == 0.5
    helper0 = algorithm.client_params(0)["linear.bias"]
    assert torch.allclose(helper0, 0.9 * torch.tensor(BIASES[0]) + 0.1 * glob)
    assert algorithm.participations.tolist() == [2, 1]


def test_server_step_mixes_old_global(bias_federation):
    algorithm = _bias_algorithm(bias_federation, server_lr=0.5, helper="identity")
    w0 = algorithm.global_params()["linear.bias"]
    algorithm.rng = _FixedUniforms([0.1, 0.1])
    algorithm.run_round()
    mean = (torch.tensor(BIASES[0]) + torch.tensor(BIASES[1])) / 2
    glob = algorithm.global_params()["linear.bias"]
    assert torch.allclose(glob, 0.5 * w0 + 0.5 * mean)
    # identity helper (FedAvg): both clients now hold the global model
    for j in (0, 1):
        assert torch.equal(algorithm.client_params(j)["linear.bias"], glob)


# ---------------------------------------------------------------------------------- sampling
def _algorithm(data, model, spec, **kwargs):
    return PriFedSync(model, spec, data, **kwargs)


def test_empty_cohort_redraw_never_trains_nobody(tiny_federation, tiny_model, private_spec):
    algorithm = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.05,
                           empty_cohort="redraw", seed=0)
    cohorts = [algorithm.sample_cohort() for _ in range(200)]
    assert all(c.size >= 1 for c, _ in cohorts)
    assert sum(r for _, r in cohorts) > 0  # empty draws did happen and were redrawn


def test_empty_cohort_skip_and_accounting_agree(tiny_federation, tiny_model, private_spec):
    redraw = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.1,
                        empty_cohort="redraw", seed=0)
    skip = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.1,
                      empty_cohort="skip", seed=0)
    # first draws of seed 0 with p = 0.1 leave the cohort empty
    first = np.random.default_rng(np.random.SeedSequence(0).spawn(2)[0]).random(4)
    assert (first >= 0.1).all()
    before = skip.global_model.clone()
    m_skip = skip.run_round()
    assert m_skip["skipped"] and m_skip["cohort_size"] == 0
    assert torch.equal(skip.global_model, before)  # nothing trained, nothing aggregated
    assert skip.participations.sum() == 0
    m_redraw = redraw.run_round()
    assert not m_redraw["skipped"] and m_redraw["cohort_size"] >= 1 and m_redraw["redraws"] >= 1
    # Theorem 2 counts K * r steps whatever happened: both policies report the same privacy
    assert m_skip["privacy"] == m_redraw["privacy"]
    assert m_skip["mu"] == m_redraw["mu"] and m_skip["epsilon"] == m_redraw["epsilon"]


def test_poisson_client_sampling_rate(tiny_federation, tiny_model, private_spec):
    algorithm = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.3,
                           empty_cohort="skip", seed=5)
    counts = np.zeros(4)
    draws = 3000
    for _ in range(draws):
        cohort, _ = algorithm.sample_cohort()
        counts[cohort] += 1
    freq = counts / draws
    assert np.all(np.abs(freq - 0.3) < 4 * math.sqrt(0.3 * 0.7 / draws))


# ---------------------------------------------------------------------------------- accounting
def test_accountant_is_derived_from_the_training_spec(tiny_federation, tiny_model, private_spec):
    algorithm = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.5)
    events = algorithm.plan.client_events(3)
    assert len(events) == len(set(tiny_federation.client_sizes))
    for event, n in zip(events, sorted(set(tiny_federation.client_sizes)), strict=True):
        assert event.steps == private_spec.privacy_event(int(n), 3).steps
        assert event.neighbouring.value == "replace-one" and "weak" in event.release
        (step, count), = event.steps
        assert (step.noise_multiplier, step.sampling_rate, count) == (
            private_spec.noise_multiplier, 5 / n, 2 * 3)
        # the same numbers as seed 000's own accounting object
        training = ClientTraining(records=int(n), batch_size=5, local_steps=2,
                                  noise_multiplier=private_spec.noise_multiplier)
        assert training.event(3).steps == event.steps
    assert algorithm.trainer.spec is algorithm.spec is algorithm.plan.spec is private_spec


def test_per_round_privacy_equals_federated_fdp(tiny_federation, tiny_model, private_spec):
    algorithm = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.5,
                           delta=1e-5)
    rows = [algorithm.run_round() for _ in range(3)]
    for r, row in enumerate(rows, start=1):
        setting = FederatedSetting.homogeneous(clients=4, records=45, batch_size=5,
                                               local_steps=2, noise_multiplier=2.0, rounds=r,
                                               client_rate=0.5)
        expected = privacy_entries(federated_fdp(setting, 1e-5, methods=("gdp-clt", "pld")))
        assert len(row["privacy"]) == len(expected) == 4
        for got, want in zip(row["privacy"], expected, strict=True):
            assert (got["method"], got["kind"], got["scope"]) == (
                want["method"], want["kind"], want["scope"])
            assert got["epsilon"] == pytest.approx(want["epsilon"], rel=1e-12)
            assert got.get("mu", 0.0) == pytest.approx(want.get("mu", 0.0), rel=1e-12)
        assert row["mu"] == pytest.approx(setting.mu_max(), rel=1e-12)
        assert row["epsilon"] == expected[2]["epsilon"] and row["epsilon_method"] == "pld"
    results = algorithm.privacy()
    assert {(r.method, r.kind, r.extras["scope"]) for r in results} == {
        ("gdp-clt", "estimate", "weak"), ("gdp-clt", "estimate", "strong"),
        ("pld", "bound", "weak"), ("pld", "bound", "strong"),
    }
    for r in results:
        assert (r.unit, r.neighbouring, r.steps) == ("record", "replace-one", 6 if
                                                      r.extras["scope"] == "weak" else 18)


def test_zero_rounds_is_perfect_privacy(tiny_federation, tiny_model, private_spec):
    algorithm = _algorithm(tiny_federation, tiny_model, private_spec)
    assert all(r.epsilon == 0.0 and r.steps == 0 for r in algorithm.privacy(0))


def test_non_private_mode_has_no_guarantee(tiny_federation, tiny_model):
    spec = LocalTrainingSpec(local_steps=2, batch_size=5, clip_norm=None, optimizer="sgd",
                             lr=0.1)
    algorithm = _algorithm(tiny_federation, tiny_model, spec)
    assert not algorithm.private
    metrics = algorithm.run_round()
    assert "privacy" not in metrics and "epsilon" not in metrics and "mu" not in metrics
    assert algorithm.privacy() == []


# ---------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"client_rate": 0.0}, r"client_rate = 0.0 is out of range"),
        ({"client_rate": 1.5}, r"client_rate = 1.5 is out of range"),
        ({"server_lr": 0.0}, r"server_lr = 0.0 is out of range"),
        ({"empty_cohort": "wait"}, r"empty_cohort = 'wait' is not allowed: must be one of "
                                   r"redraw, skip"),
        ({"delta": 1.0}, r"delta = 1.0 is out of range"),
        ({"accountants": ("moments",)}, r"method = 'moments' is not allowed"),
        ({"seed": -1}, r"seed = -1 is out of range"),
        ({"lr_decay_gamma": 0.0}, r"lr_decay_gamma = 0.0 is out of range"),
    ],
)
def test_bad_arguments_name_themselves(tiny_federation, tiny_model, private_spec, kwargs,
                                       message):
    with pytest.raises(ValueError, match=message):
        PriFedSync(tiny_model, private_spec, tiny_federation, **kwargs)


def test_batch_larger_than_a_client_is_refused(tiny_federation, tiny_model):
    spec = LocalTrainingSpec(local_steps=1, batch_size=46, clip_norm=1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match=r"client_sizes\[0\] = 45 is out of range"):
        PriFedSync(tiny_model, spec, tiny_federation)


# ---------------------------------------------------------------------------------- state
def test_state_dict_continues_exactly(tiny_federation, tiny_model, private_spec):
    first = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.7, seed=9)
    first.run_round()
    state = first.state_dict()
    first.run_round()
    second = _algorithm(tiny_federation, tiny_model, private_spec, client_rate=0.7, seed=123)
    second.load_state_dict(state)
    second.run_round()
    assert torch.equal(first.local, second.local)
    assert torch.equal(first.global_model, second.global_model)
    for key in first.optimizer_state:
        assert torch.equal(first.optimizer_state[key], second.optimizer_state[key])
    assert np.array_equal(first.personal_accuracy, second.personal_accuracy)


def test_state_dict_refuses_another_partition(tiny_federation, tiny_model, private_spec):
    algorithm = _algorithm(tiny_federation, tiny_model, private_spec)
    state = algorithm.state_dict()
    state["data_fingerprint"] = "0" * 64
    with pytest.raises(ValueError, match="data_fingerprint"):
        algorithm.load_state_dict(state)


def test_learning_rate_decay_per_participation(tiny_federation, tiny_model, private_spec):
    algorithm = _algorithm(tiny_federation, tiny_model, private_spec, lr_decay_every=2,
                           lr_decay_gamma=0.5)
    algorithm.participations[:] = [0, 1, 2, 5]
    rates = algorithm._learning_rates(np.arange(4))
    assert torch.allclose(rates, torch.tensor([0.01, 0.01, 0.005, 0.0025]))
