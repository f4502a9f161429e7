"""Poisoning attacks (Xie et al. 2023) from the configs of PriFedSync, DP-DSGD and projected
noisy SGD: the success measured on what each algorithm evaluates (PriFedSync's global model and
its honest clients' personalised models, DP-DSGD's global model, projected SGD's released model)
equals an independent computation (the paper's trigger stamped here, a plain forward pass);
every client poisoning half its records teaches the trigger; attack-free runs are unchanged;
update scaling is refused with a one-line error."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
import yaml
from torch.func import functional_call
from torch.nn import functional
from typer.testing import CliRunner

from privfl.attacks.metrics import PersonalisedAttack
from privfl.cli.main import app
from privfl.config import ConfigError, config_from_dict
from privfl.models import build_model
from privfl.runs.experiment import build_algorithm

#: Xie et al. 2023's trigger as printed: 16 (row, column) pairs naming 15 distinct pixels.
PAPER_PIXELS = [(23, 26), (23, 27), (24, 26), (24, 27), (25, 25), (25, 26), (25, 26), (26, 24),
                (26, 25), (26, 26), (26, 27), (27, 23), (27, 24), (27, 25), (27, 26), (27, 27)]
TARGET = 0
#: 8 IID synthetic clients (10 classes, 1 x 28 x 28, stored standardised with mean 0, std 1,
#: so a raw trigger value is written as is) of 24 records, logistic regression, 3 rounds.
BASE = {
    "name": "attack-other",
    "seed": 1,
    "data": {"dataset": "synthetic", "synthetic_examples": 256, "test_fraction": 0.25,
             "partition": "iid", "clients": 8, "train_size": 24, "test_size": 8},
    "model": {"name": "logreg"},
    "privacy": {"noise_multiplier": 0.5, "clip_norm": 1.0, "delta": 1e-3},
    "run": {"threads": 1},
}
SECTIONS = {
    "prifedsync": {
        "federated": {"client_rate": 0.5},
        "training": {"local_steps": 4, "batch_size": 8, "optimizer": "sgd", "lr": 0.5},
        "privacy": {"accountants": ["rdp"]}},
    "dp-dsgd": {
        "federated": {"client_rate": 0.5, "record_rate": 0.5, "server_lr": 1.0,
                      "server_momentum": 0.5},
        "privacy": {"accountants": ["wcs"]}},
    "projected-sgd": {  # inputs scaled to norm <= 10: the attack test set must be scaled too
        "federated": {"users_per_round": 4, "schedule": "independent", "radius": 100.0,
                      "lr": 2.0, "input_bound": 10.0},
        "privacy": {"accountants": ["contraction"]}},
}
ALGORITHMS = tuple(SECTIONS)
ROUNDS = 3


def _config(algorithm, attack=None, rounds=ROUNDS, **sections):
    raw = copy.deepcopy(BASE)
    raw["federated"] = {"algorithm": algorithm, "rounds": rounds}
    for extra in (SECTIONS[algorithm], sections):
        for section, values in extra.items():
            raw[section] = {**raw.get(section, {}), **values}
    if attack is not None:
        raw["attack"] = attack
    return raw


def _run(raw, rounds=ROUNDS):
    algo = build_algorithm(config_from_dict(raw))
    return algo, [algo.run_round() for _ in range(rounds)]


def _evaluated_model(algo):
    """``name -> tensor`` of the model each algorithm evaluates: PriFedSync's and DP-DSGD's
    global model, projected SGD's released model (``global_params`` of every algorithm)."""
    return algo.global_params()


def _independent_outcomes(algo, params, value=1.0, bound=None):
    """``(success, loss)`` of one model on the clean test pool's images of other classes than
    the target, each with the trigger's pixels set to ``value`` (standardised data with mean 0
    and std 1: the raw value is the stored one), optionally scaled to L2 norm <= ``bound``."""
    test = algo.data.test
    assert test.normalized and test.mean == (0.0,) and test.std == (1.0,)
    x = np.array(test.x[test.y != TARGET], dtype=np.float32)
    rows, cols = np.array(PAPER_PIXELS).T
    x[:, :, rows, cols] = value
    inputs = torch.as_tensor(x, dtype=torch.float64)
    if bound is not None:
        norms = inputs.reshape(len(x), -1).norm(dim=1).clamp(min=bound)
        inputs = inputs * (bound / norms).reshape(-1, 1, 1, 1)
    model = build_model("logreg", input_shape=(1, 28, 28), num_classes=10).double()
    with torch.no_grad():
        logits = functional_call(model, {n: v.double() for n, v in params.items()}, (inputs,))
    target = torch.full((len(x),), TARGET)
    success = float((logits.argmax(1) == TARGET).double().mean())
    loss = float(functional.cross_entropy(logits, target))
    return success, loss


def _bound(algorithm):
    return SECTIONS[algorithm]["federated"].get("input_bound")


# ------------------------------------------------------------------ the success measured
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_success_is_measured_on_the_model_each_algorithm_evaluates(algorithm):
    """3 attackers of 8, trigger value 3, DP noise: a partial backdoor whose success and loss
    equal the independent computation on the evaluated model."""
    algo, rows = _run(_config(algorithm, {"kind": "backdoor", "attackers": 3,
                                          "target_label": TARGET, "trigger": {"value": 3.0}}))
    last = rows[-1]
    success, loss = _independent_outcomes(algo, _evaluated_model(algo), 3.0, _bound(algorithm))
    assert last["attack_success"] == pytest.approx(success, abs=1e-12)
    assert last["attack_loss"] == pytest.approx(loss, rel=1e-5)
    assert 0.05 < last["attack_success"] < 0.95  # a non-trivial value
    assert "attack_success" in algo.metric_labels
    assert all(set(r) >= {"attack_success", "attack_loss"} for r in rows)  # every round's row
    if algorithm == "projected-sgd":  # the released model only, as its accuracy ("final")
        assert all(math.isnan(r["attack_success"]) for r in rows[:-1])
        unbounded = _independent_outcomes(algo, _evaluated_model(algo), 3.0)[1]
        assert abs(unbounded - loss) > 1e-3 * loss  # the bound matters to what is measured


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_client_poisoning_half_its_records_teaches_the_trigger(algorithm):
    """Non-private, every client an attacker with half its records triggered (value 5) and
    labelled 0: the model keeps most of its clean accuracy and learns the trigger; the same run
    without attackers classifies as rarely as the independent computation says (here never)."""
    attack = {"kind": "backdoor", "attackers": 8, "fraction": 0.5, "target_label": TARGET,
              "trigger": {"value": 5.0}}
    algo, rows = _run(_config(algorithm, attack, privacy={"enabled": False}))
    assert rows[-1]["attack_success"] >= 0.95
    assert rows[-1]["global_accuracy"] >= 0.8  # 0.83, 0.94, 0.98 here (clean: 0.98 to 1)
    success, _ = _independent_outcomes(algo, _evaluated_model(algo), 5.0, _bound(algorithm))
    assert rows[-1]["attack_success"] == pytest.approx(success, abs=1e-12)
    if algorithm == "prifedsync":  # no honest client: nothing to average
        assert math.isnan(rows[-1]["attack_success_personalised"])
    clean, clean_rows = _run(_config(algorithm, {**attack, "attackers": 0},
                                     privacy={"enabled": False}))
    success, _ = _independent_outcomes(clean, _evaluated_model(clean), 5.0, _bound(algorithm))
    assert clean_rows[-1]["attack_success"] == pytest.approx(success, abs=1e-12)
    assert clean_rows[-1]["attack_success"] <= 0.05 and clean_rows[-1]["global_accuracy"] >= 0.9


def test_prifedsync_reports_the_mean_over_honest_clients_personalised_models():
    """Each honest client's latest personalised model (right after its local training; stale
    for clients not sampled), averaged over the honest clients trained so far."""
    algo = build_algorithm(config_from_dict(_config(
        "prifedsync", {"kind": "backdoor", "attackers": 3, "target_label": TARGET,
                       "trigger": {"value": 3.0}})))
    attackers = set(algo.attack.attack.clients)
    assert len(attackers) == 3
    latest: dict[int, tuple[float, float]] = {}
    real = algo.local_work

    def spy(cohort):
        updates = real(cohort)
        for row, client in zip(updates["trained"], cohort[0], strict=True):
            if int(client) not in attackers:
                params = {n: v[0] for n, v in algo.trainer.unflatten(row.unsqueeze(0)).items()}
                latest[int(client)] = _independent_outcomes(algo, params, 3.0)
        return updates

    algo.local_work = spy
    seen = []
    for _ in range(4):
        row = algo.run_round()
        values = np.array(list(latest.values()))
        seen.append(len(latest))
        assert row["attack_success_personalised"] == pytest.approx(values[:, 0].mean(),
                                                                   abs=1e-12)
        assert row["attack_loss_personalised"] == pytest.approx(values[:, 1].mean(), rel=1e-5)
        success, _ = _independent_outcomes(algo, _evaluated_model(algo), 3.0)
        assert row["attack_success"] == pytest.approx(success, abs=1e-12)
    assert seen[0] < 5 and seen[-1] <= 5  # p = 0.5: stale and missing clients occur
    labels = algo.metric_labels
    assert labels["attack_success"].endswith("(global model)")
    assert labels["attack_success_personalised"].endswith("(personalised models, mean over "
                                                          "honest clients)")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_instance_level_attacks_run_and_spare_the_honest_clients(algorithm):
    algo, rows = _run(_config(algorithm, {"kind": "dba", "level": "instance", "attackers": 5,
                                          "target_label": TARGET}, rounds=2), rounds=2)
    (client,) = algo.attack.attack.clients
    honest = algo.attack.honest(np.arange(8))
    assert honest.sum() == 7 and not honest[client]
    assert all(0.0 <= r["attack_success"] <= 1.0 for r in rows if not math.isnan(
        r["attack_success"]))
    assert not math.isnan(rows[-1]["attack_success"])


def test_dp_dsgd_measures_the_attack_when_it_evaluates_the_model():
    algo, rows = _run(_config("dp-dsgd", {"kind": "label-flip", "attackers": 2},
                              rounds=4, federated={"eval_every": 3}), rounds=4)
    evaluated = [not math.isnan(r["global_accuracy"]) for r in rows]
    assert evaluated == [True, False, True, True]
    assert [not math.isnan(r["attack_success"]) for r in rows] == evaluated
    assert [not math.isnan(r["attack_loss"]) for r in rows] == evaluated


# ------------------------------------------------------------------ runs without attacks
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_zero_attackers_train_bit_for_bit_like_the_clean_run(algorithm):
    clean_algo, clean = _run(_config(algorithm))
    zero_algo, zero = _run(_config(algorithm, {"kind": "backdoor", "attackers": 0}))
    for name, value in clean_algo.global_params().items():
        assert torch.equal(value, zero_algo.global_params()[name])
    for a, b in zip(clean, zero, strict=True):
        assert not any(key.startswith("attack") for key in a)
        assert {k: v for k, v in b.items() if not k.startswith("attack") and k != "seconds"} \
            == {k: v for k, v in a.items() if k != "seconds"}
    assert not any(key.startswith("attack") for key in clean_algo.metric_labels)
    assert clean_algo.attack is None


def test_prifedsync_attacked_run_resumes_exactly():
    raw = _config("prifedsync", {"kind": "backdoor", "attackers": 3})
    whole, rows = _run(raw)
    part = build_algorithm(config_from_dict(raw))
    part.run_round()
    resumed = build_algorithm(config_from_dict(raw))
    resumed.load_state_dict(part.state_dict())
    later = [resumed.run_round() for _ in range(ROUNDS - 1)]
    for a, b in zip(rows[1:], later, strict=True):
        assert {k: v for k, v in a.items() if k != "seconds"} == \
            {k: v for k, v in b.items() if k != "seconds"}
    state = part.state_dict()
    del state["attack_personalised"]
    with pytest.raises(ValueError, match="checkpoint attack_personalised is missing"):
        PersonalisedAttack(resumed.attack, 8).load_state_dict(state)
    with pytest.raises(ValueError, match=r"models has shape \(2, 3\): must be \[c=3, d\]"):
        resumed.attack_personal.record(resumed.trainer, torch.zeros(2, 3), np.arange(3))
    with pytest.raises(ValueError, match="num_clients = 0 is out of range"):
        PersonalisedAttack(resumed.attack, 0)


# ------------------------------------------------------------------ refusals
@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize(("attack", "message"), [
    ({"kind": "scaling"}, "attack.kind = 'scaling' is not supported by federated.algorithm = "
     "'{}': update scaling needs a server that clips every client's update before aggregating "
     "(dp-fedavg); this algorithm runs backdoor, label-flip, dba"),
    ({"kind": "label-flip", "scale": 10}, "attack.scale = 10 is not supported by "
     "federated.algorithm = '{}': update scaling needs a server that clips every client's "
     "update"),
])
def test_update_scaling_is_refused_with_one_line(algorithm, attack, message):
    with pytest.raises(ConfigError) as error:
        config_from_dict(_config(algorithm, attack))
    assert message.format(algorithm) in str(error.value)
    assert "\n" not in str(error.value)


# ------------------------------------------------------------------ privfl run end to end
def test_privfl_run_prifedsync_with_a_backdoor(tmp_path):
    raw = _config("prifedsync", {"kind": "backdoor", "attackers": 2}, rounds=2)
    path = tmp_path / "attack.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(path), "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2]
    for row in rows:
        assert 0.0 <= row["attack_success"] <= 1.0 and row["attack_loss"] > 0.0
        assert 0.0 <= row["attack_success_personalised"] <= 1.0
    report = (out / "report.md").read_text()
    assert "(global model)" in report and "(personalised models, mean over honest clients)" \
        in report
    assert "attack (simulated)" in report
