"""The built-in datasets' loaders, as :mod:`privfl.config.datasets` registers them: each takes
the ``data`` section and the run's seed and returns the ``(train, test)`` pair (single-split
sources are split by ``data.test_fraction``, deterministic in the seed)."""

from __future__ import annotations

from typing import Any

from privfl.data.datasets import Dataset
from privfl.data.sources import (
    load_cifar10,
    load_digits,
    load_emnist,
    load_fashion_mnist,
    load_mnist,
    load_mnist_5k,
    synthetic_dataset,
)

__all__ = ["cifar10", "digits", "emnist", "fashion_mnist", "mnist", "mnist_5k", "synthetic"]

Pair = tuple[Dataset, Dataset]


def mnist_5k(c: Any, seed: int) -> Pair:
    return load_mnist_5k(normalize=c.normalize).split(c.test_fraction, seed)


def digits(c: Any, seed: int) -> Pair:
    return load_digits(normalize=c.normalize).split(c.test_fraction, seed)


def synthetic(c: Any, seed: int) -> Pair:
    full = synthetic_dataset(c.synthetic_examples, 10, (1, 28, 28), seed=seed)
    return full.split(c.test_fraction, seed)


def fashion_mnist(c: Any, seed: int) -> Pair:
    return load_fashion_mnist(c.root, download=c.download, normalize=c.normalize)


def mnist(c: Any, seed: int) -> Pair:
    return load_mnist(c.root, download=c.download, normalize=c.normalize)


def cifar10(c: Any, seed: int) -> Pair:
    return load_cifar10(c.root, download=c.download, normalize=c.normalize)


def emnist(c: Any, seed: int) -> Pair:
    return load_emnist(c.emnist_split, c.root, download=c.download, normalize=c.normalize)
