"""Dataset and FederatedDataset: validation, accessors, torch conversion."""

from __future__ import annotations

import numpy as np
import pytest

from privfl.data import Dataset, FederatedDataset, as_rng


def _dataset(n=20, classes=4, channels=1, name="toy/train"):
    rng = np.random.default_rng(0)
    x = rng.random((n, channels, 5, 5)).astype(np.float32)
    y = np.arange(n) % classes
    return Dataset(x, y, name, classes, mean=(0.5,) * channels, std=(0.25,) * channels)


def test_dataset_conversions_and_properties():
    d = Dataset(np.zeros((4, 6, 6), np.uint8), [0, 1, 1.0, 2], "d", 3)
    assert d.x.dtype == np.float32 and d.x.shape == (4, 1, 6, 6)
    assert d.y.dtype == np.int64 and d.input_shape == (1, 6, 6) and len(d) == 4
    assert d.label_counts().tolist() == [1, 2, 1]
    assert "n=4" in repr(d)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"x": np.zeros(4)}, "x.shape"),
        ({"x": np.array([["a"] * 25] * 4).reshape(4, 5, 5)}, "x.dtype"),
        ({"y": np.zeros(3, int)}, "y.shape"),
        ({"y": np.array([0.5, 1, 2, 3])}, "labels must be integers"),
        ({"y": np.array([0, 1, 2, 7])}, r"y = labels in \[0, 7\]"),
        ({"num_classes": 0}, "num_classes = 0"),
        ({"mean": (0.1, 0.2)}, "mean = "),
        ({"std": (0.0,)}, "std = 0.0"),
        ({"classes": ("a", "b")}, "classes has 2 names"),
    ],
)
def test_dataset_validation(kwargs, message):
    args = {"x": np.zeros((4, 5, 5)), "y": np.array([0, 1, 2, 3]), "name": "d",
            "num_classes": 4, **kwargs}
    with pytest.raises(ValueError, match=message):
        Dataset(**args)


def test_normalize_subset_split_filter():
    d = _dataset(channels=3)
    n = d.normalize()
    assert n.normalized and n.normalize() is n
    np.testing.assert_allclose(n.x, (d.x - 0.5) / 0.25, rtol=1e-6)
    s = d.subset([3, 3, 0])
    assert len(s) == 3 and s.y.tolist() == [3, 3, 0]
    with pytest.raises(ValueError, match="index 20, out of range"):
        d.subset([20])
    train, test = d.split(0.25, seed=1)
    assert len(train) == 15 and len(test) == 5
    assert train.name == "toy/train" and test.name == "toy/test"
    assert np.intersect1d(train.x[:, 0, 0, 0], test.x[:, 0, 0, 0]).size == 0
    with pytest.raises(ValueError, match="test_fraction = 1.0"):
        d.split(1.0)
    binary = d.filter_classes([0, 2])
    assert binary.num_classes == 2 and set(binary.y.tolist()) == {0, 1} and len(binary) == 10
    kept = d.filter_classes([2], relabel=False)
    assert kept.num_classes == 4 and set(kept.y.tolist()) == {2}
    with pytest.raises(ValueError, match="keep = "):
        d.filter_classes([0, 9])


def test_as_rng():
    g = np.random.default_rng(1)
    assert as_rng(g) is g
    assert as_rng(5).integers(1000) == np.random.default_rng(5).integers(1000)
    with pytest.raises(ValueError, match="seed = None"):
        as_rng(None)


def test_to_torch():
    import torch
    d = _dataset()
    x, y = d.to_torch()
    assert x.dtype == torch.float32 and y.dtype == torch.int64 and x.shape == (20, 1, 5, 5)
    ds = d.torch_dataset()
    assert len(ds) == 20 and int(ds[3][1]) == 3


def _federated(**kwargs):
    train, test = _dataset(), _dataset(n=10, name="toy/test")
    args = {"train_indices": [np.arange(0, 5), np.arange(5, 12)],
            "test_indices": [np.array([0, 0, 1]), np.array([], dtype=int)], **kwargs}
    return FederatedDataset(train, test, **args)


def test_federated_accessors():
    fed = _federated(client_ids=["alice", "bob"])
    assert fed.num_clients == 2 and len(fed) == 2
    assert fed.client_sizes.tolist() == [5, 7] and fed.test_sizes.tolist() == [3, 0]
    x, y = fed.client_train("bob")
    assert x.shape == (7, 1, 5, 5) and y.tolist() == [1, 2, 3, 0, 1, 2, 3]
    xt, yt = fed.client_test(0)
    assert yt.tolist() == [0, 0, 1]
    assert fed.client_dataset(1, "train").name.endswith("[client bob]")
    assert fed.client_labels(0).tolist() == [0, 1, 2, 3]
    assert fed.label_counts().shape == (2, 4) and fed.label_counts("test").sum() == 3
    assert fed.is_disjoint()
    summary = fed.summary()
    assert summary["n_min"] == 5 and summary["n_max"] == 7 and summary["clients"] == 2
    assert fed.normalize().train.normalized
    with pytest.raises(ValueError, match="stacking needs equal n_j"):
        fed.stacked_train_indices()
    with pytest.raises(ValueError, match="client = 'carol'"):
        fed.client_train("carol")
    with pytest.raises(ValueError, match="client = 2 is out of range"):
        fed.client_train(2)
    with pytest.raises(ValueError, match="split = 'val'"):
        fed.client_dataset(0, "val")
    overlapping = _federated(train_indices=[np.arange(0, 5), np.arange(4, 9)])
    assert not overlapping.is_disjoint()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"train_indices": []}, "must hold >= 1 client"),
        ({"train_indices": [np.arange(3), np.array([], int)]}, r"train_indices\[1\] is empty"),
        ({"train_indices": [np.arange(3), np.array([1, 1])]}, "repeated index"),
        ({"train_indices": [np.arange(3), np.array([25])]}, "index 25, out of range"),
        ({"train_indices": [np.arange(3), np.array([0.5])]}, "1-D integer array"),
        ({"test_indices": [np.arange(2)]}, "test_indices has 1 clients"),
        ({"test_indices": [np.arange(2), np.array([-1])]}, "index -1"),
        ({"client_ids": ["a", "a"]}, "distinct names"),
    ],
)
def test_federated_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _federated(**kwargs)


def test_federated_pool_mismatch():
    with pytest.raises(ValueError, match="input shape"):
        FederatedDataset(_dataset(), _dataset(channels=3), [np.arange(3)])
    with pytest.raises(ValueError, match="num_classes"):
        FederatedDataset(_dataset(), _dataset(classes=5), [np.arange(3)])
    with pytest.raises(ValueError, match="Dataset instances"):
        FederatedDataset(np.zeros(3), _dataset(), [np.arange(3)])
    fed = FederatedDataset(_dataset(), _dataset(), [np.arange(3)])
    assert fed.test_sizes.tolist() == [0] and fed.client_ids == ["0"]
