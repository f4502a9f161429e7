"""data.source: flwr-datasets on a small dataset built here with Hugging Face ``datasets`` and
written as parquet (the hub is never contacted), split by the partitioners Flower ships.

Needs the flwr-datasets extra (``make flwr-datasets-venv``); skipped without it."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("flwr_datasets", reason="the flwr-datasets extra is not installed")
datasets = pytest.importorskip("datasets")

from privfl.algorithms.builders import build_dataset  # noqa: E402
from privfl.config import config_from_dict  # noqa: E402
from privfl.data.flower_datasets import load_flwr_dataset  # noqa: E402
from privfl.runs.experiment import Experiment  # noqa: E402


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _parquet(tmp_path, n_train=120, n_test=30, classes=4):
    """8 x 8 greyscale images (Hugging Face's Image feature, as the hub's image datasets store
    them) whose mean grows with the label; files train.parquet, test.parquet."""
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(num_classes=classes)})
    rng = np.random.default_rng(0)
    files = {}
    for split, n in (("train", n_train), ("test", n_test)):
        label = np.arange(n) % classes
        image = (rng.integers(0, 40, size=(n, 8, 8)) + 50 * label[:, None, None]).astype(np.uint8)
        table = datasets.Dataset.from_dict({"image": list(image), "label": label.tolist()},
                                           features=features)
        path = tmp_path / f"{split}.parquet"
        table.to_parquet(str(path))
        files[split] = str(path)
    return files


def test_iid_partitions_are_flowers_rows(tmp_path):
    files = _parquet(tmp_path)
    data = load_flwr_dataset("parquet", partitioner="iid", num_partitions=4, seed=3,
                             data_files=files, cache_dir=str(tmp_path / "hf"))
    assert data.num_clients == 4 and data.client_sizes.tolist() == [30] * 4
    assert data.is_disjoint() and sorted(np.concatenate(data.train_indices)) == list(range(120))
    assert data.input_shape == (1, 8, 8) and data.num_classes == 4 and len(data.test) == 30
    # every record the pool holds is the parquet file's record with that row number
    source = datasets.Dataset.from_parquet(files["train"]).with_format("numpy")
    images = np.stack(source["image"]).astype(np.float32) / 255
    for j in range(4):
        x, y = data.client_train(j)
        rows = [int(np.flatnonzero((images == xi[0]).all(axis=(1, 2)))[0]) for xi in x]
        np.testing.assert_array_equal(np.asarray(source["label"])[rows], y)


def test_shard_partitioner_gives_each_client_few_labels(tmp_path):
    files = _parquet(tmp_path)
    data = load_flwr_dataset("parquet", partitioner="shard",
                             partitioner_kwargs={"num_shards_per_partition": 1},
                             num_partitions=4, data_files=files, cache_dir=str(tmp_path / "hf"))
    assert data.num_clients == 4 and data.client_sizes.sum() == 120
    # label-sorted shards of 30 over 4 classes of 30: one label per client
    assert [len(data.client_labels(j)) for j in range(4)] == [1, 1, 1, 1]


def test_bad_settings_are_one_line_errors(tmp_path):
    files = _parquet(tmp_path)
    with pytest.raises(ValueError, match="partitioner = 'bogus' is not allowed"):
        load_flwr_dataset("parquet", partitioner="bogus", data_files=files)
    with pytest.raises(ValueError, match="data.flwr.partitioner_kwargs"):
        load_flwr_dataset("parquet", partitioner="dirichlet", data_files=files,
                          partitioner_kwargs={"alpha": 0.5, "colour": 1},
                          cache_dir=str(tmp_path / "hf"))
    with pytest.raises(ValueError, match="column 'img' is not in"):
        load_flwr_dataset("parquet", input_name="img", data_files=files,
                          cache_dir=str(tmp_path / "hf"))


def test_flwr_datasets_trains_two_rounds(tmp_path):
    files = _parquet(tmp_path)
    raw = {
        "name": "flwr", "seed": 0,
        "data": {"source": "flwr-datasets", "root": str(tmp_path), "clients": 6,
                 "test_size": 0,
                 "flwr": {"dataset": "parquet", "data_files": files, "partitioner": "iid"}},
        "model": {"name": "logreg"},
        "training": {"local_steps": 2, "batch_size": 4, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-3,
                    "accountants": ["rdp"]},
        "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_sampling": "poisson",
                      "client_rate": 0.5},
        "run": {"threads": 1},
    }
    config = config_from_dict(raw)
    assert config.data.dataset == "flwr-datasets" and config.data.partition == "natural"
    data = build_dataset(config)
    assert data.num_clients == 6 and data.client_sizes.tolist() == [20] * 6
    result = Experiment.create(config, tmp_path / "run").run()
    assert [row["round"] for row in result.metrics] == [1, 2]
    assert math.isfinite(result.metrics[-1]["epsilon"])
