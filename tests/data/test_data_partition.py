"""Partition invariants (seed 000 section 6.5, seed 002 section 7.10), determinism, errors."""

from __future__ import annotations

import numpy as np
import pytest
from _datafiles import MNIST_TRAIN_COUNTS, leaf_content

from privfl.data import (
    Dataset,
    LeafData,
    dirichlet_class_partition,
    dirichlet_partition,
    dirichlet_proportions,
    federate_dirichlet,
    federate_dirichlet_classes,
    federate_groups,
    federate_iid,
    federate_leaf,
    federate_shards,
    iid_partition,
    matched_test_indices,
    natural_partition,
    sample_by_proportions,
    shard_partition,
)


def _labels(counts, seed=0):
    """Labels with the given class counts, in shuffled order (like a real training file)."""
    y = np.repeat(np.arange(len(counts)), counts)
    return np.random.default_rng(seed).permutation(y)


@pytest.fixture(scope="module")
def mnist_labels():
    return _labels(MNIST_TRAIN_COUNTS)


@pytest.fixture(scope="module")
def mnist_like():
    """Tiny-image datasets with MNIST's label structure (60,000 / 10,000)."""
    y_train = _labels(MNIST_TRAIN_COUNTS)
    y_test = _labels([1000] * 10, seed=1)
    train = Dataset(np.zeros((60000, 1, 1, 1), np.float32), y_train, "mnist/train", 10)
    test = Dataset(np.zeros((10000, 1, 1, 1), np.float32), y_test, "mnist/test", 10)
    return train, test


@pytest.fixture(scope="module")
def cifar_like():
    y_train = _labels([5000] * 10, seed=2)
    y_test = _labels([1000] * 10, seed=3)
    train = Dataset(np.zeros((50000, 1, 1, 1), np.float32), y_train, "cifar10/train", 10)
    test = Dataset(np.zeros((10000, 1, 1, 1), np.float32), y_test, "cifar10/test", 10)
    return train, test


# ---------------------------------------------------------------------------------- shards


def test_shards_seed0_mnist_structure(mnist_labels):
    parts = shard_partition(mnist_labels, num_clients=100, shards_per_client=4, seed=1230)
    assert len(parts) == 100
    assert all(p.size == 600 for p in parts)
    union = np.concatenate(parts)
    assert np.unique(union).size == 60000  # 400 x 150 = 60,000, disjoint, all used
    # reconstruct shards: rank of each record in the stable label sort, // 150
    rank = np.empty(60000, dtype=np.int64)
    rank[np.argsort(mnist_labels, kind="stable")] = np.arange(60000)
    shard_ids = [np.unique(rank[p] // 150, return_counts=True) for p in parts]
    assert all(ids.size == 4 and np.all(counts == 150) for ids, counts in shard_ids)
    assert np.unique(np.concatenate([ids for ids, _ in shard_ids])).size == 400
    # 9 of the 400 shards straddle a label boundary (spec section 6.5)
    sorted_labels = np.sort(mnist_labels).reshape(400, 150)
    assert int(np.sum(sorted_labels.min(axis=1) != sorted_labels.max(axis=1))) == 9
    distinct = np.array([np.unique(mnist_labels[p]).size for p in parts])
    assert distinct.min() >= 1 and distinct.max() <= 8
    assert np.mean((distinct == 3) | (distinct == 4)) > 0.8  # "typically 3 or 4 digits"


def test_shards_deterministic_and_seed_dependent(mnist_labels):
    a = shard_partition(mnist_labels, seed=7)
    b = shard_partition(mnist_labels, seed=7)
    c = shard_partition(mnist_labels, seed=8)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))
    g = shard_partition(mnist_labels, seed=np.random.default_rng(7))
    assert all(np.array_equal(x, y) for x, y in zip(a, g, strict=True))


def test_shards_configurable_and_leftover():
    y = _labels([37] * 10)
    parts = shard_partition(y, num_clients=5, shards_per_client=2, seed=0)
    assert all(p.size == 2 * (370 // 10) for p in parts)
    parts = shard_partition(y, num_clients=4, shards_per_client=3, shard_size=20, seed=0)
    assert [p.size for p in parts] == [60] * 4


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_clients": 0}, "num_clients = 0"),
        ({"shards_per_client": -1}, "shards_per_client = -1"),
        ({"shard_size": 1000}, "shard_size = 1000"),
        ({"num_clients": 500, "shards_per_client": 2}, "num_clients \\* shards_per_client"),
        ({"seed": -3}, "seed = -3"),
        ({"seed": None}, "seed = None"),
        ({"seed": 1.5}, "seed = 1.5"),
    ],
)
def test_shards_bad_arguments(kwargs, name):
    y = _labels([60] * 10)
    with pytest.raises(ValueError, match=name):
        shard_partition(y, **{"num_clients": 10, "shards_per_client": 2, **kwargs})


def test_bad_labels():
    with pytest.raises(ValueError, match="labels has shape"):
        shard_partition(np.zeros((3, 3), int))
    with pytest.raises(ValueError, match="dtype float64"):
        shard_partition(np.zeros(10))
    with pytest.raises(ValueError, match="label -1"):
        shard_partition(np.array([0, -1, 2]))


# ---------------------------------------------------------------------------- test sets


def test_federate_shards_seed0(mnist_like):
    train, test = mnist_like
    fed = federate_shards(train, test, seed=1230)
    assert fed.num_clients == 100 and np.all(fed.client_sizes == 600)
    assert np.all(fed.test_sizes == 200)
    assert fed.is_disjoint()
    for j in range(fed.num_clients):
        assert set(fed.client_labels(j, "test")) <= set(fed.client_labels(j, "train"))
    assert fed.info["shard_size"] == 150 and fed.name == "mnist/shards(100x4x150)"
    again = federate_shards(train, test, seed=1230)
    assert all(np.array_equal(a, b) for a, b in zip(fed.test_indices, again.test_indices,
                                                    strict=True))


def test_matched_test_without_replacement(mnist_labels):
    parts = shard_partition(mnist_labels, seed=0)
    y_test = _labels([1000] * 10, seed=4)
    tests = matched_test_indices(parts, mnist_labels, y_test, 200, replace=False, seed=0)
    for p, t in zip(parts, tests, strict=True):
        assert t.size == 200 and np.unique(t).size == 200
        assert set(y_test[t]) <= set(mnist_labels[p])
    with pytest.raises(ValueError, match="size = 5000 is out of range for client 0"):
        matched_test_indices(parts[:1], mnist_labels, y_test, 5000, replace=False, seed=0)
    with pytest.raises(ValueError, match="size = -1"):
        matched_test_indices(parts, mnist_labels, y_test, -1)


# ------------------------------------------------------------------------------ Dirichlet


def test_dirichlet_seed0_cifar_sizes(cifar_like):
    train, test = cifar_like
    fed = federate_dirichlet(train, test, seed=0)
    assert fed.num_clients == 100
    assert np.all(fed.client_sizes == 500) and np.all(fed.test_sizes == 200)
    for idx in fed.train_indices + fed.test_indices:
        assert np.unique(idx).size == idx.size  # without replacement within a client
    q = fed.info["proportions"]
    assert q.shape == (100, 10) and np.allclose(q.sum(axis=1), 1.0)
    # test labels only where q puts mass; realised mixes follow q
    counts = fed.label_counts("train") / 500
    assert np.abs(counts - q).mean() < 0.03
    assert not fed.is_disjoint()  # overlapping clients, as in the reference code
    again = federate_dirichlet(train, test, seed=0)
    other = federate_dirichlet(train, test, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(fed.train_indices, again.train_indices,
                                                    strict=True))
    assert not np.array_equal(fed.info["proportions"], other.info["proportions"])


def test_dirichlet_disjoint_uses_every_record(cifar_like):
    train, _ = cifar_like
    parts, q = dirichlet_partition(train.y, 100, 500, 0.5, disjoint=True, seed=3)
    union = np.concatenate(parts)
    assert all(p.size == 500 for p in parts)
    assert np.unique(union).size == union.size == 50000


def test_dirichlet_train_label_test_mode(cifar_like):
    train, test = cifar_like
    fed = federate_dirichlet(train, test, num_clients=20, test_sampling="train-labels", seed=0)
    for j in range(20):
        assert set(fed.client_labels(j, "test")) <= set(fed.client_labels(j, "train"))
    with pytest.raises(ValueError, match="test_sampling = 'bogus'"):
        federate_dirichlet(train, test, test_sampling="bogus")


def test_dirichlet_beta_controls_heterogeneity(cifar_like):
    train, _ = cifar_like
    def mean_labels(beta):
        parts, _ = dirichlet_partition(train.y, 50, 500, beta, seed=0)
        return np.mean([np.unique(train.y[p]).size for p in parts])
    assert mean_labels(0.05) < mean_labels(0.5) < mean_labels(100.0)
    assert mean_labels(100.0) == 10


def test_sample_by_proportions_caps_small_classes():
    y = _labels([3, 500, 500])
    q = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0]])
    parts, capped = sample_by_proportions(y, q, 10, seed=0)
    assert capped >= 1
    assert all(p.size == 10 and np.unique(p).size == 10 for p in parts)
    assert np.sum(y[parts[0]] == 0) == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"beta": 0.0}, "beta = 0.0"),
        ({"beta": float("nan")}, "beta = nan"),
        ({"size": 0}, "size = 0"),
        ({"size": 600, "disjoint": True}, "size = 600 is out of range"),
        ({"num_clients": 0}, "num_clients = 0"),
        ({"num_classes": 3}, "num_classes = 3"),
    ],
)
def test_dirichlet_bad_arguments(kwargs, message):
    y = _labels([500] * 10)
    args = {"num_clients": 10, "size": 100, "beta": 0.5, **kwargs}
    with pytest.raises(ValueError, match=message):
        dirichlet_partition(y, **args)


def test_dirichlet_proportions_validation():
    assert dirichlet_proportions(3, 4, 1.0, seed=0).shape == (3, 4)
    with pytest.raises(ValueError, match="proportions must be finite"):
        sample_by_proportions(np.array([0, 1]), np.array([[-1.0, 2.0]]), 1)
    with pytest.raises(ValueError, match="num_clients x num_classes"):
        sample_by_proportions(np.array([0, 1]), np.array([0.5, 0.5]), 1)


def test_dirichlet_class_partition_seed002():
    y = _labels([5923, 6742], seed=5)  # MNIST 0 vs 1: 12,665 records
    parts = dirichlet_class_partition(y, 200, 0.5, seed=0)
    union = np.concatenate(parts)
    assert np.unique(union).size == union.size  # disjoint
    assert all(np.sum(y[p] == c) >= 1 for p in parts for c in (0, 1))
    sizes = np.array([p.size for p in parts])
    assert sizes.min() >= 4 and sizes.std() > 0  # unequal local sizes
    assert union.size <= y.size and union.size > 0.95 * y.size
    with pytest.raises(ValueError, match="min_per_class = 40"):
        dirichlet_class_partition(y, 200, 0.5, min_per_class=40)
    with pytest.raises(ValueError, match="alpha = -1"):
        dirichlet_class_partition(y, 200, -1)


def test_federate_dirichlet_classes_is_xies_split_with_iid_test_sets(cifar_like):
    train, test = cifar_like
    fed = federate_dirichlet_classes(train, test, num_clients=50, alpha=0.5, seed=4)
    again = federate_dirichlet_classes(train, test, num_clients=50, alpha=0.5, seed=4)
    assert fed.info["partition"] == "dirichlet-classes" and fed.is_disjoint()
    assert all(np.array_equal(a, b) for a, b in zip(fed.train_indices, again.train_indices,
                                                    strict=True))
    counts = fed.label_counts("train")  # clients x classes
    assert counts.min() >= 2 and fed.client_sizes.std() > 0  # at least 2 per class, unequal
    assert counts.sum() > 0.99 * len(train)  # (almost) every record used, once
    assert np.all(fed.test_sizes == len(test) // 50)
    pooled = np.concatenate(fed.test_indices)
    assert np.unique(pooled).size == pooled.size  # the test pool split IID, disjoint
    assert np.all(federate_dirichlet_classes(train, test, num_clients=50, alpha=0.5, test_size=0,
                                             seed=4).test_sizes == 0)

    def label_spread(alpha):  # mean over clients of the largest class share
        c = federate_dirichlet_classes(train, test, num_clients=50, alpha=alpha,
                                       seed=0).label_counts("train")
        return float(np.mean(c.max(axis=1) / c.sum(axis=1)))

    assert label_spread(0.1) > label_spread(1.0) > label_spread(100.0)


def test_dirichlet_classes_from_a_configuration():
    from privfl.algorithms.builders import build_dataset
    from privfl.config import ConfigError, config_from_dict

    raw = {"name": "dc", "data": {"dataset": "mnist-5k", "classes": [0, 1], "clients": 40,
                                  "partition": "dirichlet-classes", "beta": 0.5,
                                  "test_size": 2},
           "model": {"name": "logreg"}, "privacy": {"enabled": False}}
    fed = build_dataset(config_from_dict(raw))
    assert fed.num_clients == 40 and fed.is_disjoint() and fed.client_sizes.std() > 0
    assert fed.label_counts("train").min() >= 2 and np.all(fed.test_sizes == 2)
    for key, value in (("train_size", 8), ("disjoint", False), ("test_sampling", "train-labels")):
        with pytest.raises(ConfigError, match=f"data.{key} = .* is not allowed with "
                                              "data.partition: dirichlet-classes"):
            config_from_dict({**raw, "data": {**raw["data"], key: value}})
    with pytest.raises(ConfigError, match="dirichlet-classes' with data.clients = 400: "
                                          "min_per_class = 2 is out of range"):
        build_dataset(config_from_dict({**raw, "data": {**raw["data"], "clients": 400}}))


# ------------------------------------------------------------------------------------ IID


def test_iid_seed002_sizes():
    parts = iid_partition(12665, 200, seed=0)
    assert all(p.size == 63 for p in parts)
    union = np.concatenate(parts)
    assert np.unique(union).size == 12600  # 65 unused
    assert [p.size for p in iid_partition(12665, 10, seed=0)] == [1266] * 10
    assert all(np.array_equal(a, b) for a, b in zip(parts, iid_partition(12665, 200, seed=0),
                                                    strict=True))
    assert not np.array_equal(parts[0], iid_partition(12665, 200, seed=1)[0])
    with pytest.raises(ValueError, match="size = 100 is out of range"):
        iid_partition(1000, 20, 100)
    with pytest.raises(ValueError, match="num_clients = 2000"):
        iid_partition(1000, 2000)


def test_federate_iid(cifar_like):
    train, test = cifar_like
    fed = federate_iid(train, test, num_clients=200, seed=0)
    assert np.all(fed.client_sizes == 250) and np.all(fed.test_sizes == 50)
    assert fed.is_disjoint() and fed.stacked_train_indices().shape == (200, 250)
    none = federate_iid(train, test, num_clients=10, test_size=0, seed=0)
    assert np.all(none.test_sizes == 0)


# -------------------------------------------------------------------------------- natural


def test_natural_partition_order_and_content():
    groups = np.array(["w2", "w1", "w2", "w3", "w1", "w2"])
    ids, parts = natural_partition(groups)
    assert ids == ["w2", "w1", "w3"]
    assert [p.tolist() for p in parts] == [[0, 2, 5], [1, 4], [3]]
    with pytest.raises(ValueError, match="groups has shape"):
        natural_partition([])


def test_federate_groups_and_leaf():
    train_leaf = LeafData([], {}, {})
    test_leaf = LeafData([], {}, {})
    content_tr = leaf_content(["f0", "f1", "f2"], [5, 3, 4], seed=0)
    content_te = leaf_content(["f0", "f2", "f9"], [2, 1, 3], seed=1)
    for leaf, content in ((train_leaf, content_tr), (test_leaf, content_te)):
        for u in content["users"]:
            leaf.users.append(u)
            leaf.x[u] = content["user_data"][u]["x"]
            leaf.y[u] = content["user_data"][u]["y"]
    fed = federate_leaf(train_leaf, test_leaf)
    assert fed.client_ids == ["f0", "f1", "f2"]
    assert fed.client_sizes.tolist() == [5, 3, 4] and fed.test_sizes.tolist() == [2, 0, 1]
    assert fed.input_shape == (1, 28, 28) and fed.num_classes == 62
    assert fed.info["test_only_groups"] == ["f9"]
    x, y = fed.client_train("f1")
    np.testing.assert_allclose(x.reshape(3, -1), np.asarray(content_tr["user_data"]["f1"]["x"]),
                               rtol=1e-6)
    np.testing.assert_array_equal(y, content_tr["user_data"]["f1"]["y"])
    with pytest.raises(ValueError, match="input_shape"):
        federate_leaf(train_leaf, test_leaf, input_shape=(784,))
    with pytest.raises(ValueError, match="train_groups has 2 entries"):
        federate_groups(fed.train, ["a", "b"], fed.test)
