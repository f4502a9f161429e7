"""Record-level canaries (issue 47), the fast part: where the canaries go (replace-one slots,
every n_j kept, the algorithm's own data path), the out-of-distribution design, the loss score
against an independent numpy computation, the replace-one bound the verdict reads, refusals, and
one small end-to-end audit through the seam and the CLI. The power tests are slow:
test_record_audit_power.py."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from privfl.algorithms.builders import build_dataset, privacy_plan
from privfl.cli.app import app
from privfl.cli.audit_run import sources
from privfl.config import load_config
from privfl.robustness.replica_privacy import replica_privacy
from privfl.runs.canary_audit import audit_config
from privfl.runs.record_canaries import (
    CanaryRecords,
    RecordCanaries,
    balanced_signs,
    canary_scores,
    constant_features,
    plant_record_canaries,
    released_scores,
    replace_one_bound,
)

DIGITS = "configs/demo-projected-sgd.yaml"
#: projected SGD on digits, few rounds: the fastest record-level run
SMALL = ["federated.users_per_round=100", "federated.rounds=3"]


@pytest.fixture(scope="module")
def mnist():
    return build_dataset(load_config("configs/demo-insdp-fedsgd.yaml", []))


def _bits(m: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).random(m) < 0.5


def test_canaries_replace_one_record_each_and_keep_every_client_size(mnist):
    bits = _bits(300)
    data, canaries = plant_record_canaries(mnist, bits, np.random.default_rng(0), "mislabelled")
    assert np.array_equal(data.client_sizes, mnist.client_sizes)
    assert len(data.train) == len(mnist.train) + int(bits.sum())  # one copy per present canary
    changed = [np.flatnonzero(new != old)
               for new, old in zip(data.train_indices, mnist.train_indices, strict=True)]
    assert sum(c.size for c in changed) == int(bits.sum())  # the absent ones keep the original
    held = np.concatenate([idx[c] for idx, c in zip(data.train_indices, changed, strict=True)])
    assert np.all(held >= len(mnist.train))  # the present ones point at the appended copies
    # a present canary is its slot's input with its wrong label, inside its client's data
    for j in np.flatnonzero(bits)[:20]:
        x, y = data.client_train(int(canaries.clients[j]))
        match = np.flatnonzero(np.all(x == canaries.inputs[j], axis=tuple(range(1, x.ndim))))
        assert canaries.labels[j] in y[match]
    assert np.all(canaries.labels != mnist.train.y[canaries.rows])  # always mislabelled
    assert np.all(canaries.labels < mnist.num_classes)
    assert len(set(canaries.rows.tolist())) == 300  # distinct slots


def test_ood_canaries_live_on_the_constant_features_with_balanced_signs(mnist):
    where = constant_features(mnist)
    assert where.size >= 100  # MNIST's blank border: 124 on the 5k subset's clients
    bits = _bits(50)
    _, canaries = plant_record_canaries(mnist, bits, np.random.default_rng(1), "ood")
    flat = canaries.inputs.reshape(50, -1)
    varying = np.setdiff1d(np.arange(flat.shape[1]), where)
    assert np.all(flat[:, varying] == 0.0)
    used = where[: where.size // 2 * 2]
    constant = mnist.train.x.reshape(len(mnist.train), -1)[0, used]
    pattern = flat[:, used] - constant
    # balanced signs: orthogonal to the all-ones direction along which real records move
    assert np.allclose(pattern.sum(axis=1), 0.0, atol=1e-3)
    assert len({tuple(np.sign(row)) for row in pattern}) == 50
    signs = balanced_signs(7, 10, np.random.default_rng(0))
    assert signs.shape == (7, 10) and np.all(signs.sum(axis=1) == 0)


def test_auto_design_is_ood_on_mnist_and_mislabelled_on_digits(mnist):
    bits = _bits(10)
    assert plant_record_canaries(mnist, bits, np.random.default_rng(0))[1].design == "ood"
    digits = build_dataset(load_config(DIGITS, []))
    assert plant_record_canaries(digits, bits, np.random.default_rng(0))[1].design == \
        "mislabelled"
    with pytest.raises(ValueError, match="canary_design = 'ood' needs >= 8"):
        plant_record_canaries(digits, bits, np.random.default_rng(0), "ood")


def test_refusals(mnist):
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="inserted"):
        plant_record_canaries(mnist, np.ones(5), rng)
    with pytest.raises(ValueError, match="canaries = 5000 is out of range"):
        plant_record_canaries(mnist, _bits(5000), rng)
    with pytest.raises(ValueError, match="canary_design"):
        plant_record_canaries(mnist, _bits(5), rng, "loud")
    with pytest.raises(ValueError, match="has no record canaries"):
        RecordCanaries(load_config("configs/demo-dp-fedavg.yaml", []))


def test_loss_score_matches_a_numpy_softmax_cross_entropy():
    model = torch.nn.Linear(4, 3)
    rng = np.random.default_rng(0)
    weights = [{"weight": torch.as_tensor(rng.standard_normal((3, 4))),
                "bias": torch.as_tensor(rng.standard_normal(3))} for _ in range(2)]
    x = rng.standard_normal((6, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 2, 1, 0])
    canaries = CanaryRecords(x, y, np.arange(6), np.zeros(6, dtype=np.int64),
                             np.ones(6, dtype=bool))

    def loss(w):  # independent: numpy log-softmax
        logits = x.astype(float) @ w["weight"].numpy().T + w["bias"].numpy()
        logits -= logits.max(axis=1, keepdims=True)
        return -(logits[np.arange(6), y] - np.log(np.exp(logits).sum(axis=1)))

    expected = loss(weights[0]) - loss(weights[1])
    assert np.allclose(canary_scores(model, *weights, canaries), expected, rtol=1e-6)
    # an input bound scales the inputs first (projected SGD trains on |x| <= bound)
    bounded = canary_scores(model, *weights, canaries, input_bound=1e-9)
    assert np.allclose(bounded, loss({"weight": 0 * weights[0]["weight"],
                                      "bias": weights[0]["bias"]})
                       - loss({"weight": 0 * weights[1]["weight"], "bias": weights[1]["bias"]}),
                       atol=1e-6)


def test_replace_one_bound_is_the_headline_the_reread_or_group_privacy():
    # projected SGD: replace-one user already, the bound is the headline
    plan = privacy_plan(load_config(DIGITS, []))
    bound = replace_one_bound(plan, 5)
    assert bound["headline_neighbouring"] == "replace-one"
    assert bound["epsilon"] == bound["headline_epsilon"] == pytest.approx(3.98683, rel=1e-4)
    # InsDP-FedSGD: add/remove headline, the plan's events re-read under replace-one
    plan = privacy_plan(load_config("configs/demo-insdp-fedsgd.yaml", []))
    bound = replace_one_bound(plan, 60)
    again = replica_privacy(plan, 60, 1)
    assert bound["headline_neighbouring"] == "add-remove"
    assert bound["epsilon"] == again.replace_epsilon
    assert bound["epsilon"] > bound["headline_epsilon"]  # replace-one costs more
    assert bound["delta"] == 1e-5
    # DP-DSGD: no re-reading, group privacy over two add/remove steps
    plan = privacy_plan(load_config("configs/demo-dp-dsgd.yaml", []))
    bound = replace_one_bound(plan, 60)
    eps = bound["headline_epsilon"]
    assert eps == pytest.approx(4.23, abs=0.01)  # the demo's documented headline
    assert bound["epsilon"] == 2 * eps
    assert bound["delta"] == pytest.approx(1e-5 * (1 + math.exp(eps)), rel=1e-12)


def test_small_audit_through_the_seam_uses_the_replace_one_bound():
    config = load_config(DIGITS, SMALL)
    result = audit_config(config, sources(config), canaries=40, seed=2)
    assert result["algorithm"] == "projected-sgd"
    assert result["unit"] == "client"  # projected SGD's users hold one record each
    assert result["canaries"] == 40
    assert "replace-one record" in result["neighbouring"]
    assert "final released model" in result["released"]
    bound = replace_one_bound(privacy_plan(config), 3)
    assert result["epsilon_bound"] == bound["epsilon"]
    assert result["verdict"] == "consistent"
    assert np.all(np.isfinite(result["scores"]))
    # the scores depend on the bits: a present canary is trained on, so re-running with the
    # same seed gives the same scores (the audit is reproducible)
    again = audit_config(config, sources(config), canaries=40, seed=2)
    assert again["scores"] == pytest.approx(result["scores"], rel=1e-9, abs=1e-12)


def test_cli_audits_a_record_level_config(tmp_path):
    result = CliRunner().invoke(app, ["audit", "run", DIGITS, "--canaries", "20",
                                      *sum((["--set", s] for s in SMALL), []),
                                      "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "audit.json").read_text())
    assert written["algorithm"] == "projected-sgd"
    assert written["verdict"] == "consistent"
    assert "replace-one" in written["epsilon_bound_method"]
    assert (tmp_path / "report.html").exists()


def test_released_scores_read_each_canarys_client_model_where_there_is_one():
    model = torch.nn.Linear(3, 2)
    rng = np.random.default_rng(4)

    def params():
        return {"weight": torch.as_tensor(rng.standard_normal((2, 3))),
                "bias": torch.as_tensor(rng.standard_normal(2))}

    before, models = params(), [params() for _ in range(3)]
    clients = np.array([2, 0, 2, 1, 0])
    canaries = CanaryRecords(rng.standard_normal((5, 3)).astype(np.float32),
                             np.array([0, 1, 1, 0, 1]), np.arange(5), clients,
                             np.array([True, False, True, True, False]))

    class PerClient:  # PriFedSync's shape: a helper model per client
        def client_params(self, client):
            return models[client]

    class GlobalOnly:
        def global_params(self):
            return models[1]

    scores = released_scores(PerClient(), model, before, canaries)
    for j, client in enumerate(clients):
        one = dataclasses.replace(canaries, inputs=canaries.inputs[j:j + 1],
                                  labels=canaries.labels[j:j + 1], rows=canaries.rows[j:j + 1],
                                  clients=clients[j:j + 1], inserted=canaries.inserted[j:j + 1])
        assert scores[j] == pytest.approx(canary_scores(model, before, models[client], one)[0])
    assert np.allclose(released_scores(GlobalOnly(), model, before, canaries),
                       canary_scores(model, before, models[1], canaries))


def test_pair_canaries_hold_a_canary_or_its_reflection_never_the_original(mnist):
    bits = _bits(200)
    data, canaries = plant_record_canaries(mnist, bits, np.random.default_rng(5), "ood-pair")
    assert canaries.design == "ood-pair"
    assert np.array_equal(data.client_sizes, mnist.client_sizes)
    assert len(data.train) == len(mnist.train) + 200  # one record per slot, whatever the bit
    # the reflection through the constants: x + x' = 2 c on the OOD features, 0 elsewhere
    where = constant_features(mnist)
    used = where[: where.size // 2 * 2]
    constant = mnist.train.x.reshape(len(mnist.train), -1)[0, used]
    flat, alt = canaries.inputs.reshape(200, -1), canaries.alternatives.reshape(200, -1)
    assert np.allclose(flat[:, used] + alt[:, used], 2 * constant, atol=1e-5)
    assert np.all(np.delete(alt, used, axis=1) == 0.0)
    assert np.allclose(np.abs(flat[:, used] - constant), np.abs(alt[:, used] - constant))
    # each slot now points at an appended record: the canary (bit 1) or its reflection (bit 0)
    for j in range(200):
        index = data.train_indices[canaries.clients[j]]
        original = np.flatnonzero(mnist.train_indices[canaries.clients[j]] == canaries.rows[j])
        held = data.train.x[index[original[0]]].reshape(-1)
        assert np.array_equal(held, (flat if bits[j] else alt)[j])
        assert data.train.y[index[original[0]]] == canaries.labels[j]
    # random-pair: the reflection through 0
    _, signs = plant_record_canaries(mnist, bits, np.random.default_rng(5), "random-pair")
    assert np.array_equal(signs.alternatives, -signs.inputs)


def test_pair_score_is_the_canarys_loss_drop_minus_its_reflections():
    model = torch.nn.Linear(4, 3)
    rng = np.random.default_rng(6)
    before, after = ({"weight": torch.as_tensor(rng.standard_normal((3, 4))),
                      "bias": torch.as_tensor(rng.standard_normal(3))} for _ in range(2))
    x = rng.standard_normal((5, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 2, 1])
    single = CanaryRecords(x, y, np.arange(5), np.zeros(5, dtype=np.int64),
                           np.ones(5, dtype=bool))
    pair = dataclasses.replace(single, alternatives=-x, design="random-pair")
    reflected = dataclasses.replace(single, inputs=-x)
    expected = (canary_scores(model, before, after, single)
                - canary_scores(model, before, after, reflected))
    assert np.allclose(canary_scores(model, before, after, pair), expected, rtol=1e-12)
    # one rule for both members: swapping canary and reflection negates every score
    swapped = dataclasses.replace(pair, inputs=-x, alternatives=x)
    assert np.allclose(canary_scores(model, before, after, swapped),
                       -canary_scores(model, before, after, pair), rtol=1e-12)


def test_cli_takes_the_canary_design(tmp_path):
    result = CliRunner().invoke(app, ["audit", "run", DIGITS, "--canaries", "20",
                                      "--canary-design", "random-pair",
                                      *sum((["--set", s] for s in SMALL), []),
                                      "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "audit.json").read_text())
    assert written["canary"].startswith("random-pair record")
    assert "its reflection" in written["neighbouring"]
    assert "minus the same for its reflection" in written["score"]
    with pytest.raises(ValueError, match="canary_design = 'ood-pair' is not allowed for client"):
        sources(load_config("configs/demo-dp-fedavg.yaml", []), "ood-pair")
    with pytest.raises(ValueError, match="canary_design"):
        sources(load_config(DIGITS, []), "loud")
