"""Attacks inside training: success measures on hand-built models, update scaling before the
server's clipping (DP-FedAvg), instance-level poisoned records sampled like any record
(InsDP-FedAvg, no batch reuse), clean runs unchanged, and ``privfl run`` end to end."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
import yaml
from torch import nn
from typer.testing import CliRunner

import privfl.fl.trainer as trainer_module
from privfl.algorithms.builders import build_dataset
from privfl.algorithms.insdp import InsDpFedAvg
from privfl.attacks.metrics import AttackMonitor, attack_monitor, attack_outcomes
from privfl.attacks.poisoning import poison
from privfl.attacks.triggers import Trigger
from privfl.cli.main import app
from privfl.config import config_from_dict
from privfl.data import Dataset, FederatedDataset
from privfl.fl import CohortTrainer, LocalTrainingSpec
from privfl.models import build_model
from privfl.runs.experiment import build_algorithm

#: 8 IID synthetic clients (10 classes, 1 x 28 x 28) of 24 records, logistic regression.
RUN = {
    "name": "attack-tiny",
    "seed": 4,
    "data": {"dataset": "synthetic", "synthetic_examples": 256, "test_fraction": 0.25,
             "partition": "iid", "clients": 8, "train_size": 24, "test_size": 8},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 8, "optimizer": "sgd", "lr": 0.1},
    "privacy": {"noise_multiplier": 0.8, "clip_norm": 0.5, "delta": 1e-3,
                "accountants": ["rdp"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_sampling": "fixed-size",
                  "cohort_size": 8},
    "run": {"threads": 1},
}


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _config(attack=None, **sections):
    raw = copy.deepcopy(RUN)
    for section, values in sections.items():
        raw[section] = {**raw.get(section, {}), **values}
    if raw["federated"]["algorithm"] != "dp-fedavg":  # the other algorithms' own keys
        raw["federated"] = {"algorithm": raw["federated"]["algorithm"], "rounds": 2}
    if attack is not None:
        raw["attack"] = attack
    return config_from_dict(raw)


# ------------------------------------------------------------------ success measures
def test_attack_outcomes_equal_an_independent_computation():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 50, 4)) * 3
    success, loss = attack_outcomes(torch.as_tensor(logits), target=2)
    assert np.allclose(success.numpy(), (logits.argmax(-1) == 2).mean(1), atol=0)
    shifted = logits - logits.max(-1, keepdims=True)
    log_p = shifted[..., 2] - np.log(np.exp(shifted).sum(-1))
    assert np.allclose(loss.numpy(), -log_p.mean(1), rtol=1e-12)
    capped = attack_outcomes(torch.as_tensor(logits), target=2, loss_cap=0.5)[1]
    assert np.allclose(capped.numpy(), np.minimum(-log_p, 0.5).mean(1), rtol=1e-12)
    assert np.all(capped.numpy() <= 0.5)
    with pytest.raises(ValueError, match=r"loss_cap = 0.0 is out of range: must be in \(0, inf\)"):
        attack_outcomes(torch.as_tensor(logits), target=2, loss_cap=0)
    with pytest.raises(ValueError, match="target = 4 is out of range"):
        attack_outcomes(torch.as_tensor(logits), target=4)
    with pytest.raises(ValueError, match=r"outputs has shape \(3, 0, 4\)"):
        attack_outcomes(torch.zeros(3, 0, 4), target=0)


def _hand_built_attack():
    """2 classes; 40 test images of class 1 (pixel (0, 0) uniform in [0, 1]), target 0."""
    rng = np.random.default_rng(1)
    x = np.zeros((60, 1, 28, 28), dtype=np.float32)
    x[:, 0, 0, 0] = rng.uniform(0, 1, 60)
    y = np.r_[np.zeros(20), np.ones(40)].astype(np.int64)
    train = Dataset(x, y, "hand/train", 2)
    data = FederatedDataset(train, Dataset(x, y, "hand/test", 2),
                            [np.arange(30), np.arange(30, 60)])
    return poison(data, {"kind": "backdoor", "attackers": 1}, seed=0)[1]


def test_success_rate_on_a_hand_built_model():
    """logit_0 = 10 (trigger pixels) - 5 - 200 x[0, 0], logit_1 = 0: the backdoor succeeds on a
    triggered image iff x[0, 0] < 145 / 200."""
    attack = _hand_built_attack()
    mask = Trigger.from_pattern("paper").mask(28, 28).reshape(-1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 2))
    with torch.no_grad():
        model[1].weight.zero_()
        model[1].weight[0, torch.as_tensor(mask)] = 10.0
        model[1].weight[0, 0] = -200.0
        model[1].bias.copy_(torch.tensor([-5.0, 0.0]))
    trainer = CohortTrainer(model, LocalTrainingSpec(local_steps=1, batch_size=1))
    flat = trainer.flatten({n: p.detach().unsqueeze(0) for n, p in model.named_parameters()})
    monitor = AttackMonitor(attack, trainer.dtype, "cpu")
    metrics = monitor.metrics(trainer, flat[0])
    pixel = attack.test.x[:, 0, 0, 0].astype(np.float64)
    logit0 = 150.0 - 5.0 - 200.0 * pixel
    assert len(attack.test) == 40 and np.all(attack.test.y == 0)
    assert metrics["attack_success"] == pytest.approx(np.mean(logit0 > 0), abs=1e-15)
    assert 0.5 < metrics["attack_success"] < 0.9  # a non-trivial fraction
    assert metrics["attack_loss"] == pytest.approx(np.mean(np.logaddexp(0.0, -logit0)),
                                                   rel=1e-5)
    with torch.no_grad():  # a model that ignores the trigger and says class 1
        model[1].weight.zero_()
        model[1].bias.copy_(torch.tensor([0.0, 1.0]))
    flat = trainer.flatten({n: p.detach().unsqueeze(0) for n, p in model.named_parameters()})
    clean = monitor.metrics(trainer, flat[0])
    assert clean["attack_success"] == 0.0
    assert clean["attack_loss"] == pytest.approx(math.log1p(math.e), rel=1e-6)


def test_data_normalised_after_poisoning_are_refused():
    clean = build_dataset(_config(None))
    poisoned, what = poison(clean, {"kind": "backdoor"}, seed=0)
    raw = FederatedDataset(poisoned.train, clean.test._replace(normalized=False),
                           poisoned.train_indices, poisoned.test_indices,
                           info=dict(poisoned.info))
    with pytest.raises(ValueError, match="normalised after poisoning"):
        attack_monitor(raw, torch.float32, "cpu")
    assert attack_monitor(clean, torch.float32, "cpu") is None
    assert attack_monitor(poisoned, torch.float32, "cpu").attack is what


# ------------------------------------------------------------------ scaling and clipping
def test_scaling_multiplies_attacker_updates_before_the_server_clips_them():
    scaled = build_algorithm(_config({"kind": "scaling", "attackers": 2}))  # gamma = 50
    plain = build_algorithm(_config({"kind": "backdoor", "attackers": 2}))  # same data, gamma 1
    attackers = np.array(sorted(scaled.attack.attack.clients))
    assert scaled.attack.attack.clients == plain.attack.attack.clients
    cohort = np.arange(8)
    sent = scaled.local_work(cohort, keep_updates=True)["updates"]
    honest = plain.local_work(cohort, keep_updates=True)["updates"]
    is_attacker = np.isin(cohort, attackers)
    assert torch.equal(sent[is_attacker], honest[is_attacker] * 50.0)
    assert torch.equal(sent[~is_attacker], honest[~is_attacker])

    # the attackers alone, noise 1e-9: the server's step is clip(gamma u) / E[m], norm <= S
    S = 0.5
    tiny = build_algorithm(_config({"kind": "scaling", "attackers": 2},
                                   privacy={"noise_multiplier": 1e-9, "clip_norm": S}))
    before = tiny.global_model.clone()
    updates = tiny.local_work(attackers, keep_updates=True)
    rows = updates["updates"].clone()
    assert rows.norm(dim=1).min() > 10 * S  # scaled far beyond the clip norm
    tiny.aggregate(attackers, updates)
    contribution = (tiny.global_model - before) * tiny.plan.expected_cohort  # sum of clipped
    clipped = rows * (S / rows.norm(dim=1, keepdim=True)).clamp(max=1.0)
    assert torch.allclose(contribution, clipped.sum(0), atol=1e-6)
    for row in clipped:
        assert float(row.norm()) <= S * (1 + 1e-6)
    assert float(contribution.norm()) <= len(attackers) * S * (1 + 1e-6)
    # without clipping (non-private) the scaled update goes through: model replacement
    open_ = build_algorithm(_config({"kind": "scaling", "attackers": 2},
                                    privacy={"enabled": False}))
    before = open_.global_model.clone()
    updates = open_.local_work(attackers, keep_updates=True)
    rows = updates["updates"].clone()
    open_.aggregate(attackers, updates)
    assert torch.allclose(open_.global_model - before, rows.mean(0), atol=1e-6)


# ------------------------------------------------------------------ clean runs unchanged
def _rounds(config, rounds=2):
    algo = build_algorithm(config)
    return algo, [algo.run_round() for _ in range(rounds)]


@pytest.mark.parametrize("algorithm", ["dp-fedavg", "insdp-fedavg"])
def test_zero_attackers_train_bit_for_bit_like_the_clean_run(algorithm):
    sections = {"federated": {"algorithm": algorithm}}
    clean_algo, clean = _rounds(_config(None, **sections))
    attacked_algo, attacked = _rounds(_config({"kind": "backdoor", "attackers": 0},
                                              **sections))
    assert torch.equal(clean_algo.global_model, attacked_algo.global_model)
    for a, b in zip(clean, attacked, strict=True):
        assert a["global_accuracy"] == b["global_accuracy"]
        assert "attack_success" not in a and 0.0 <= b["attack_success"] <= 1.0
        assert b["attack_loss"] > 0.0
    assert "attack_success" in attacked_algo.metric_labels
    assert "attack_success" not in clean_algo.metric_labels


def test_insdp_reports_label_flip_success_and_refuses_scaled_data():
    config = _config({"kind": "label-flip", "level": "instance", "attackers": 5},
                     federated={"algorithm": "insdp-fedsgd"}, training={"local_steps": 1})
    algo, metrics = _rounds(config)
    assert all(0.0 <= m["attack_success"] <= 1.0 for m in metrics)
    scaled, _ = poison(build_dataset(_config(None)), {"kind": "scaling"}, seed=0)
    with pytest.raises(ValueError, match="update scaling needs a server that clips"):
        InsDpFedAvg(build_model("logreg", input_shape=(1, 28, 28), num_classes=10),
                    algo.spec, scaled)


# ------------------------------------------------------------------ instance level: no reuse
@pytest.mark.parametrize("sampling", ["poisson", "without-replacement"])
def test_instance_level_records_are_sampled_like_any_record(monkeypatch, sampling):
    """The released code reuses the attacker's first poisoned batch at every step (each
    poisoned record used with probability 1); here a poisoned record is in a step's batch with
    probability B / n, like every other record of the client."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(70, 1, 28, 28)).astype(np.float32)
    y = np.arange(70) % 2
    pool = Dataset(x, y, "toy/train", 2, normalized=True)
    # client 0 has 40 records (the attacker), client 1 has 30: the sampler's n tells them apart
    data = FederatedDataset(pool, Dataset(x[:20], y[:20], "toy/test", 2, normalized=True),
                            [np.arange(40), np.arange(40, 70)], [np.arange(10),
                                                                 np.arange(10, 20)])
    poisoned, what = poison(data, {"kind": "backdoor", "level": "instance", "attackers": 6,
                                   "clients": [0]}, seed=0)
    used = np.zeros(40, dtype=np.int64)
    steps = 0
    real = trainer_module.sample_steps

    def spy(sources, rows, count, *args):
        nonlocal steps
        batches = real(sources, rows, count, *args)
        for j, client_rows in enumerate(rows):
            if client_rows.numel() == 40:  # the attacker: pool rows -> its record positions
                position = {int(v): p for p, v in enumerate(client_rows.tolist())}
                for t in range(count):
                    index, _, sizes = batches.step(t)
                    np.add.at(used, [position[int(v)] for v in index[j, : sizes[j]]], 1)
                    steps += 1
        return batches

    monkeypatch.setattr(trainer_module, "sample_steps", spy)
    spec = LocalTrainingSpec(local_steps=5, batch_size=8, sampling=sampling, clip_norm=1.0,
                             noise_multiplier=1.0, optimizer="sgd", lr=0.05)
    model = build_model("logreg", input_shape=(1, 28, 28), num_classes=2)
    algo = InsDpFedAvg(model, spec, poisoned, accountants="rdp", seed=2,
                       trainer_options={"workers": 1})
    for _ in range(8):
        algo.run_round()
    assert steps == 40
    q = 8 / 40
    poisoned_uses = used[what.records[0]]
    assert poisoned_uses.max() < steps  # never in every batch
    total, trials = int(poisoned_uses.sum()), 6 * steps  # ~ Binomial(240, 0.2): mean 48, sd 6.2
    assert abs(total - q * trials) < 5 * math.sqrt(trials * q * (1 - q))
    if sampling == "without-replacement":  # exactly B of the n records in every step
        assert used.sum() == 8 * steps


# ------------------------------------------------------------------ privfl run end to end
def test_privfl_run_with_a_backdoor_reports_attack_success(tmp_path):
    raw = copy.deepcopy(RUN)
    raw["attack"] = {"kind": "backdoor", "attackers": 3}
    path = tmp_path / "attack.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    # once: the spent card repeats only the rows that changed since the planned one
    assert result.output.count("attack (simulated)") == 1
    dry = CliRunner().invoke(app, ["run", str(path), "--dry-run", "--json"])
    assert "k = 3 attacker client(s)" in json.loads(dry.stdout)["setting"]["attack (simulated)"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2]
    for row in rows:
        assert 0.0 <= row["attack_success"] <= 1.0 and row["attack_loss"] > 0.0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["final"]["attack_success"] == rows[-1]["attack_success"]
    assert "attack_success" in summary["metric_labels"]
    assert "accounting is unchanged" in summary["setting"]["attack (simulated)"]
    report = (out / "report.md").read_text()
    assert "attack (simulated)" in report and "backdoor success" in report
    privacy = json.loads((out / "privacy.json").read_text())
    assert "attack (simulated)" in privacy["setting"]
    # the attack does not touch the accounting: epsilon equals the clean run's
    clean_raw = copy.deepcopy(RUN)
    clean_path = tmp_path / "clean.yaml"
    clean_path.write_text(yaml.safe_dump(clean_raw))
    clean_out = tmp_path / "clean"
    assert CliRunner().invoke(app, ["run", str(clean_path), "--out", str(clean_out),
                                    "--no-progress"]).exit_code == 0
    clean_rows = [json.loads(line) for line in
                  (clean_out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epsilon"] for r in rows] == [r["epsilon"] for r in clean_rows]
    check = CliRunner().invoke(app, ["check-privacy", str(out)])
    assert check.exit_code == 0, check.output


@pytest.mark.slow  # long (5-15 s on 2 cores): `make test-slow`
def test_an_attacked_run_resumes_to_the_uninterrupted_result(tmp_path):
    raw = copy.deepcopy(RUN)
    raw["attack"] = {"kind": "dba", "attackers": 2}
    path = tmp_path / "attack.yaml"
    path.write_text(yaml.safe_dump(raw))
    whole, part = tmp_path / "whole", tmp_path / "part"
    runner = CliRunner()
    assert runner.invoke(app, ["run", str(path), "--out", str(whole),
                               "--no-progress"]).exit_code == 0
    assert runner.invoke(app, ["run", str(path), "--out", str(part), "--no-progress",
                               "--set", "run.max_rounds=1"]).exit_code == 0
    resumed = runner.invoke(app, ["run", "--resume", str(part), "--no-progress"])
    assert resumed.exit_code == 0, resumed.output

    def rows(d):
        return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
                for line in (d / "metrics.jsonl").read_text().splitlines()]

    assert rows(whole) == rows(part)
