"""N x D (tabular) inputs: the containers, the partitions, normalisation and the label checks."""

from __future__ import annotations

import numpy as np
import pytest

from privfl.data import Dataset, federate_dirichlet, federate_iid, synthetic_dataset


def _tabular(n=60, d=5, classes=3):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), np.arange(n) % classes


def test_n_x_d_is_kept_as_it_is_and_num_classes_defaults_to_the_labels():
    x, y = _tabular()
    data = Dataset(x, y)
    assert data.x.shape == (60, 5) and data.x.dtype == np.float32
    assert data.input_shape == (5,) and data.num_classes == 3 and data.name == "data"
    np.testing.assert_array_equal(data.subset([2, 0]).x, x[[2, 0]].astype(np.float32))
    train, test = data.split(0.25, seed=0)
    assert train.input_shape == test.input_shape == (5,)


def test_per_feature_statistics_standardise_each_column():
    x, y = _tabular()
    mean, std = x.mean(0), x.std(0)
    data = Dataset(x, y, mean=mean, std=std).normalize()
    np.testing.assert_allclose(data.x.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(data.x.std(0), 1.0, atol=1e-4)
    one = Dataset(x, y, mean=1.0, std=2.0).normalize()  # one value for every feature
    np.testing.assert_allclose(one.x, (x - 1.0) / 2.0, rtol=1e-5)
    with pytest.raises(ValueError, match=r"mean = .* one value per feature \(5\)"):
        Dataset(x, y, mean=(0.0, 1.0))


def test_images_keep_their_per_channel_statistics():
    x = np.random.default_rng(1).random((8, 3, 4, 4))
    data = Dataset(x, np.arange(8) % 2, "rgb", 2, mean=(0.1, 0.2, 0.3), std=(1.0, 2.0, 4.0))
    expected = (x - np.array([0.1, 0.2, 0.3])[None, :, None, None]) / np.array(
        [1.0, 2.0, 4.0])[None, :, None, None]
    np.testing.assert_allclose(data.normalize().x, expected, rtol=1e-5)
    with pytest.raises(ValueError, match=r"one value per channel \(3\)"):
        Dataset(x, np.arange(8) % 2, mean=(0.1, 0.2))


@pytest.mark.parametrize("partition", ["iid", "dirichlet"])
def test_partitions_take_tabular_data(partition):
    x, y = _tabular(n=200)
    train, test = Dataset(x, y).split(0.2, seed=0)
    if partition == "iid":
        fed = federate_iid(train, test, num_clients=4, test_size=10, seed=0)
    else:
        fed = federate_dirichlet(train, test, num_clients=4, train_size=30, test_size=10,
                                 beta=0.5, seed=0)
    xs, ys = fed.client_train(1)
    assert fed.input_shape == (5,) and xs.ndim == 2 and xs.shape[1] == 5
    assert len(xs) == len(ys) == fed.client_sizes[1]


def test_synthetic_tabular_data():
    data = synthetic_dataset(30, 3, (7,), seed=0)
    assert data.x.shape == (30, 7) and data.num_classes == 3


@pytest.mark.parametrize(
    ("y", "message"),
    [
        (np.array([0.0, 1.5, 2.0, 1.0]), r"y\[1\] = 1.5 is not allowed: labels must be integers"),
        (np.array([0.0, np.nan, 2.0, 1.0]), r"y\[1\] = nan is not allowed"),
        (np.array(["a", "b", "a", "b"]), r"y.dtype = <U1 is not allowed.*np.unique"),
        (np.array([True, False, True, False]), "y.dtype = bool is not allowed"),
        (np.array([0, 1, -1, 1]), r"y = labels in \[-1, 1\] is out of range"),
    ],
)
def test_labels_that_are_not_class_indices_are_refused(y, message):
    with pytest.raises(ValueError, match=message):
        Dataset(np.zeros((4, 3)), y)


def test_whole_float_labels_are_class_indices():
    data = Dataset(np.zeros((4, 3)), np.array([0.0, 2.0, 1.0, 2.0]))
    assert data.y.dtype == np.int64 and data.y.tolist() == [0, 2, 1, 2] and data.num_classes == 3


@pytest.mark.parametrize(
    ("x", "message"),
    [
        (np.zeros(4), r"x.shape = \(4,\) is out of range: must be N x D"),
        (np.array([[0.0, np.nan]] * 4), r"x\[0, 1\] = nan is not allowed: inputs must be finite"),
        (np.zeros((4, 2), dtype=complex), "x.dtype = complex128 is not allowed"),
    ],
)
def test_inputs_that_cannot_train_are_refused(x, message):
    with pytest.raises(ValueError, match=message):
        Dataset(x, [0, 1, 0, 1])
