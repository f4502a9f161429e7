"""Two rounds of privfl run on generated natural-user data: femnist, shakespeare, sent140 (LEAF
JSON) and emnist (IDX files), through the configuration's path (privfl.algorithms.builders).

Shakespeare and Sent140 train a small bag-of-embeddings model registered here, and Shakespeare
also LEAF's character LSTM when the models side (issue 48 items 3 and 4) is present."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from _datafiles import write_idx_pair
from _leaf_files import (
    femnist_users,
    leaf_file,
    sent140_users,
    shakespeare_users,
    write_split,
    write_words,
)
from torch import nn

from privfl.algorithms.builders import build_dataset
from privfl.config import ConfigError, config_from_dict
from privfl.config.model_names import model_names
from privfl.data.errors import DatasetNotFoundError
from privfl.models import register_model
from privfl.runs.experiment import Experiment


class BagOfEmbeddings(nn.Module):
    """Mean of token embeddings, then a linear layer (inputs: token ids, in any dtype)."""

    def __init__(self, num_classes: int, vocabulary_size: int, dim: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocabulary_size, dim)
        self.out = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.embed(x.long()).mean(dim=1))


@pytest.fixture(scope="module", autouse=True)
def _bag_of_embeddings():
    """Registered for this module's tests only: the registry is process-wide, and other test
    files (tests/models/test_models.py) list it."""
    from privfl import models
    from privfl.config import model_names as names

    before, registered = dict(models.MODELS._entries), list(names._REGISTERED)
    register_model("test-bag-of-embeddings", BagOfEmbeddings)
    yield
    models.MODELS._entries.clear()
    models.MODELS._entries.update(before)
    names._REGISTERED[:] = registered


def _raw(dataset: str, root, model: dict, **data) -> dict:
    return {
        "name": f"natural-{dataset}", "seed": 0,
        "data": {"dataset": dataset, "root": str(root), "test_size": 0, **data},
        "model": model,
        "training": {"local_steps": 2, "batch_size": 2, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-3,
                    "accountants": ["rdp"]},
        "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_sampling": "poisson",
                      "client_rate": 0.5},
        "run": {"threads": 1},
    }


def _two_rounds(raw: dict, tmp_path) -> tuple[dict, list[dict]]:
    result = Experiment.create(config_from_dict(raw), tmp_path / "run").run()
    assert [row["round"] for row in result.metrics] == [1, 2]
    assert math.isfinite(result.metrics[-1]["epsilon"]) and result.metrics[-1]["epsilon"] > 0
    return result.summary, result.metrics


def _accuracy(metrics: list[dict]) -> float:
    values = [v for k, v in metrics[-1].items() if "accuracy" in k and isinstance(v, float)]
    assert values, metrics[-1]
    return values[0]


def test_femnist_trains_two_rounds(tmp_path):
    users = [f"f{k:04d}" for k in range(8)]
    sizes = [4, 6, 5, 9, 4, 7, 5, 6]
    write_split(tmp_path, "femnist", [leaf_file(femnist_users(users, sizes, 1))],
                [leaf_file(femnist_users(users, [2] * 8, 2))])
    raw = _raw("femnist", tmp_path, {"name": "logreg"})
    config = config_from_dict(raw)
    assert config.data.partition == "natural"  # the default of a natural-user dataset
    data = build_dataset(config)
    assert data.client_ids == users and data.client_sizes.tolist() == sizes
    accuracy = _accuracy(_two_rounds(raw, tmp_path)[1])
    assert 0.0 <= accuracy <= 1.0


def test_shakespeare_trains_two_rounds_on_token_ids(tmp_path):
    users = ["KING_LEAR", "FOOL", "EDGAR", "KENT", "GONERIL", "REGAN"]
    sizes = [5, 3, 4, 6, 3, 4]
    write_split(tmp_path, "shakespeare", [leaf_file(shakespeare_users(users, sizes, 1))],
                [leaf_file(shakespeare_users(users, [2] * 6, 2))])
    raw = _raw("shakespeare", tmp_path, {"name": "test-bag-of-embeddings",
                                         "kwargs": {"vocabulary_size": 82}}, seq_len=20)
    data = build_dataset(config_from_dict(raw))
    assert data.train.x.dtype == np.int64 and data.input_shape == (20,)
    assert data.num_classes == 82
    _, metrics = _two_rounds(raw, tmp_path)
    assert 0.0 <= _accuracy(metrics) <= 1.0


@pytest.mark.skipif("leaf-shakespeare-lstm" not in model_names(),
                    reason="LEAF's character LSTM (issue 48 item 3, models side) is not here")
def test_shakespeare_trains_two_rounds_with_leafs_character_lstm(tmp_path):
    users = ["KING_LEAR", "FOOL", "EDGAR", "KENT"]
    write_split(tmp_path, "shakespeare", [leaf_file(shakespeare_users(users, [4] * 4, 1))],
                [leaf_file(shakespeare_users(users, [2] * 4, 2))])
    raw = _raw("shakespeare", tmp_path, {"name": "leaf-shakespeare-lstm",
                                         "kwargs": {"hidden": 16}}, seq_len=10)
    _, metrics = _two_rounds(raw, tmp_path)
    assert 0.0 <= _accuracy(metrics) <= 1.0


def test_sent140_card_says_whether_the_vocabulary_is_covered(tmp_path):
    users = [f"u{k}" for k in range(6)]
    write_split(tmp_path, "sent140", [leaf_file(sent140_users(users, [4] * 6, 1))],
                [leaf_file(sent140_users(users, [2] * 6, 2))])
    words = write_words(tmp_path / "words.txt", ["good", "great", "love", "bad", "awful",
                                                 "hate", "the", "day", "!"])
    model = {"name": "test-bag-of-embeddings", "kwargs": {"vocabulary_size": 11}}
    raw = _raw("sent140", tmp_path, model, vocabulary=str(words))
    experiment = Experiment.create(config_from_dict(raw), tmp_path / "public")
    experiment.run()
    assert "public: the guarantee covers" in experiment.card(2)["vocabulary"]
    leaky = _raw("sent140", tmp_path, model, vocabulary="training-split")
    experiment = Experiment.create(config_from_dict(leaky), tmp_path / "leaky")
    assert "does NOT cover it" in experiment.card(2)["vocabulary"]


def test_emnist_trains_two_rounds_from_idx_files(tmp_path):
    rng = np.random.default_rng(0)
    folder = tmp_path / "emnist"
    for part, n in (("train", 120), ("test", 40)):
        labels = (np.arange(n) % 62).astype(np.uint8)
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        write_idx_pair(folder, part, images, labels, names=(
            f"emnist-byclass-{part}-images-idx3-ubyte", f"emnist-byclass-{part}-labels-idx1-ubyte"))
    raw = _raw("emnist", tmp_path, {"name": "logreg"}, partition="iid", clients=6,
               train_size=20)
    data = build_dataset(config_from_dict(raw))
    assert data.num_classes == 62 and len(data.train) == 120 and data.num_clients == 6
    _two_rounds(raw, tmp_path)


def test_config_errors_name_the_keys(tmp_path):
    with pytest.raises(ValueError, match="data.partition = 'natural' is not allowed for "
                       "data.dataset = 'digits'"):
        config_from_dict({"data": {"dataset": "digits", "partition": "natural"}})
    users = femnist_users(["a", "b"], [3, 3])
    write_split(tmp_path, "femnist", [leaf_file(users)], [leaf_file(users)])
    with pytest.raises(ConfigError, match="data.classes"):
        build_dataset(config_from_dict({"data": {"dataset": "femnist", "root": str(tmp_path),
                                                 "classes": [0, 1]}}))
    with pytest.raises(DatasetNotFoundError, match="emnist") as error:
        build_dataset(config_from_dict({"data": {"dataset": "emnist",
                                                 "root": str(tmp_path / "none")}}))
    assert "\n" not in str(error.value)
    # the pooled records of a natural dataset can be split another way when asked
    pooled = build_dataset(config_from_dict({"data": {
        "dataset": "femnist", "root": str(tmp_path), "partition": "iid", "clients": 2,
        "train_size": 3, "test_size": 0}}))
    assert pooled.num_clients == 2 and pooled.info["partition"] == "iid"


@pytest.mark.parametrize("data, match", [
    ({"dataset": "digits", "vocabulary": "words.txt"}, "data.vocabulary is not allowed for "
     "data.dataset = 'digits': it applies to sent140, shakespeare"),
    ({"dataset": "femnist", "seq_len": 5}, "data.seq_len is not allowed"),
    ({"dataset": "mnist", "users": 5}, "data.users is not allowed"),
    ({"dataset": "mnist", "emnist_split": "letters"}, "data.emnist_split is not allowed"),
    ({"dataset": "mnist", "flwr": {"dataset": "parquet"}}, "data.flwr.dataset is not allowed"),
    ({"dataset": "mnist", "source": "flwr-datasets"}, "data.dataset = 'mnist' is not allowed "
     "with data.source: flwr-datasets"),
])
def test_dataset_specific_keys_are_refused_elsewhere(data, match):
    with pytest.raises(ValueError, match=match):
        config_from_dict({"data": data})
