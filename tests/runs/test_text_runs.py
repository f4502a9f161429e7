"""Two rounds of user-level DP-FedAvg and record-level InsDP-FedAvg with Xie et al. 2023's
Sent140 LSTM on generated token data through the normal runner (``Experiment``): they train,
account and report, and the card says the GloVe vectors must be public."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest
import torch

from privfl.algorithms.builders import build_model
from privfl.config import config_from_dict
from privfl.data.datasets import Dataset, FederatedDataset
from privfl.runs.experiment import Experiment
from privfl.runs.model_card import PRETRAINING_ROW

WORDS = ("<pad>", "<unk>") + tuple(f"w{i}" for i in range(30))


def _sent140_like(clients=12, per_client=20, seq=8):
    rng = np.random.default_rng(0)
    ids = rng.integers(2, len(WORDS), (clients * per_client, seq))
    ids[:, :2] = 0  # padded tweets
    labels = ids[:, -1] % 2
    train = Dataset(ids, labels, num_classes=2, vocabulary=WORDS)
    test = Dataset(ids[:40], labels[:40], num_classes=2, vocabulary=WORDS)
    return FederatedDataset(train, test, [np.arange(i * per_client, (i + 1) * per_client)
                                          for i in range(clients)], [np.arange(40)] * clients)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm, level", [("dp-fedavg", "client level"),
                                              ("insdp-fedavg", "record level")])
def test_sent140_lstm_trains_accounts_and_reports(tmp_path, algorithm, level):
    glove = tmp_path / "glove.8d.txt"
    rng = np.random.default_rng(1)
    glove.write_text("".join(f"{w} " + " ".join(f"{v:.5f}" for v in rng.normal(size=8)) + "\n"
                             for w in WORDS[2:25]))
    federated = {"algorithm": algorithm, "rounds": 2}
    if algorithm == "dp-fedavg":
        federated["client_rate"] = 0.5
    config = config_from_dict({
        "name": f"sent140-{algorithm}", "data": {"dataset": "custom"},
        "model": {"name": "xie2023-sent140-lstm", "embeddings": str(glove),
                  "kwargs": {"embedding_dim": 8, "hidden": 16}},
        "training": {"local_steps": 2, "batch_size": 5, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-5},
        "federated": federated})
    data = _sent140_like()
    run = Experiment.create(config, tmp_path / "run", data=data).run()
    assert run.summary["rounds_completed"] == 2
    assert 0 < run.epsilon < 100 and math.isfinite(run.epsilon) and run.delta == 1e-5
    assert "bound" in run.headline and level in run.headline
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [row["round"] for row in metrics] == [1, 2]
    assert 0.0 <= run.summary["final"]["global_accuracy"] <= 1.0
    model, start = run.model, build_model(config, data)
    assert not model.embedding.weight.requires_grad  # frozen GloVe rows: never updated
    assert torch.equal(model.embedding.weight, start.embedding.weight)
    assert torch.equal(model.embedding.weight[2:25], start.glove.matrix[2:25])
    for name in ("lstm.weight_ih_l0", "lstm.weight_hh_l1", "fc.bias"):  # trained
        assert not torch.equal(model.state_dict()[name], start.state_dict()[name]), name
    report = (tmp_path / "run" / "report.md").read_text()
    assert PRETRAINING_ROW in report
    digest = hashlib.sha256(glove.read_bytes()).hexdigest()[:16]
    assert (f"word vectors from {glove} (frozen, sha256 {digest}, 23 of 30 vocabulary words "
            "found)") in report
    assert "only if this pretraining data is public" in report
