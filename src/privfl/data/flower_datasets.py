"""Federated splits of Flower Datasets (``flwr-datasets``): ``data.source: flwr-datasets``.

:class:`flwr_datasets.FederatedDataset` loads a Hugging Face dataset (a hub name, or a local
builder such as ``parquet`` with ``data_files``) and splits its training split with one of the
partitioners Flower ships (IID, Dirichlet, shards, natural ids, ...). privfl keeps the pooled
training split as one :class:`~privfl.data.Dataset` and each partition as index arrays into it:
a column of row numbers is added before partitioning (the ``preprocessor`` hook), so a
partition's rows are read back exactly as Flower chose them. Clients get no test records; the
pooled test split (``data.flwr.test_split``) evaluates the released models.

Needs the optional extra: ``pip install 'privfl[flwr-datasets]'`` (``make flwr-datasets-venv``
builds a virtual environment with it: Flower Datasets pins ``rich < 15``).
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np

from privfl.data.datasets import Dataset, FederatedDataset
from privfl.data.errors import DataFormatError, DatasetNotFoundError

__all__ = ["FLWR_PARTITIONERS", "INDEX_COLUMN", "load_flwr_dataset"]

#: ``data.flwr.partitioner`` -> the class of ``flwr_datasets.partitioner``
FLWR_PARTITIONERS = {
    "iid": "IidPartitioner", "dirichlet": "DirichletPartitioner", "shard": "ShardPartitioner",
    "natural-id": "NaturalIdPartitioner", "pathological": "PathologicalPartitioner",
    "linear": "LinearPartitioner", "square": "SquarePartitioner",
    "exponential": "ExponentialPartitioner",
}
#: the row-number column privfl adds before Flower partitions the split
INDEX_COLUMN = "__privfl_row"
_INSTALL = ("data.source: flwr-datasets needs the flwr-datasets extra: pip install "
            "'privfl[flwr-datasets]' (or make flwr-datasets-venv)")


def _partitioner(name: str, kwargs: dict[str, Any], num_partitions: int, label: str,
                 seed: int) -> Any:
    from flwr_datasets import partitioner as partitioners

    cls = getattr(partitioners, FLWR_PARTITIONERS[name])
    accepted = inspect.signature(cls.__init__).parameters
    kwargs = dict(kwargs)
    if "num_partitions" in accepted:
        kwargs.setdefault("num_partitions", num_partitions)
    if "partition_by" in accepted and name != "natural-id":
        kwargs.setdefault("partition_by", label)
    if "seed" in accepted:
        kwargs.setdefault("seed", seed)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as error:
        raise ValueError(f"data.flwr.partitioner_kwargs = {kwargs!r} is not valid for "
                         f"{cls.__name__}: {error}") from None


def _inputs(column: Any, name: str) -> tuple[np.ndarray, float]:
    """Inputs as ``N x ...`` numbers and the scale that maps them to ``[0, 1]`` (255 for
    8-bit images, else 1); ``N x H x W x C`` images become ``N x C x H x W``."""
    x = np.asarray(column)
    if x.dtype == object or x.ndim < 2:
        raise DataFormatError(f"data.flwr.input = {name!r}: the column is not an array of "
                              f"numbers or images of one shape (dtype {x.dtype}, shape {x.shape})")
    if x.ndim == 4 and x.shape[-1] in (1, 3, 4) and x.shape[1] not in (1, 3, 4):
        x = x.transpose(0, 3, 1, 2)
    return x, 255.0 if x.dtype == np.uint8 else 1.0


def _pooled(split: Any, input_name: str, label: str, name: str,
            num_classes: int | None) -> Dataset:
    columns = [c for c in split.column_names if c != INDEX_COLUMN]
    for column in (input_name, label):
        if column not in columns:
            raise DataFormatError(f"data.flwr: column {column!r} is not in {name} (columns: "
                                  f"{', '.join(columns)})")
    table = split.with_format("numpy")
    x, scale = _inputs(table[input_name], input_name)
    x = x.astype(np.float32) / np.float32(scale)
    return Dataset(x, table[label], name, num_classes)


def load_flwr_dataset(dataset: str, *, partitioner: str = "iid",
                      partitioner_kwargs: dict[str, Any] | None = None, num_partitions: int = 10,
                      input_name: str = "image", label: str = "label", train_split: str = "train",
                      test_split: str = "test", seed: int = 0,
                      **load_dataset_kwargs: Any) -> FederatedDataset:
    """The partitions of ``dataset``'s ``train_split`` that Flower's ``partitioner`` (a key of
    :data:`FLWR_PARTITIONERS`; ``partitioner_kwargs`` go to its class, ``num_partitions``,
    ``partition_by = label`` and ``seed`` filled in where it takes them) makes, as a
    :class:`FederatedDataset` over the pooled split; ``test_split`` is the pooled test set.
    ``load_dataset_kwargs`` go to ``datasets.load_dataset`` (``data_files``, ``cache_dir``)."""
    if partitioner not in FLWR_PARTITIONERS:
        raise ValueError(f"partitioner = {partitioner!r} is not allowed: must be one of "
                         f"{', '.join(FLWR_PARTITIONERS)}")
    try:
        from flwr_datasets import FederatedDataset as FlowerFederatedDataset
    except ImportError:
        raise DatasetNotFoundError(_INSTALL, settings=_INSTALL) from None

    def add_rows(splits: Any) -> Any:
        return type(splits)({
            key: split.add_column(INDEX_COLUMN, np.arange(len(split), dtype=np.int64))
            for key, split in splits.items()})

    fds = FlowerFederatedDataset(
        dataset=dataset, preprocessor=add_rows, seed=seed,
        partitioners={train_split: _partitioner(partitioner, partitioner_kwargs or {},
                                                num_partitions, label, seed)},
        **load_dataset_kwargs)
    try:
        train_rows = fds.load_split(train_split)
        test_rows = fds.load_split(test_split)
    except (KeyError, ValueError) as error:
        raise DataFormatError(f"data.flwr.dataset = {dataset!r}: {error}") from None
    train = _pooled(train_rows, input_name, label, f"{dataset}/{train_split}", None)
    test = _pooled(test_rows, input_name, label, f"{dataset}/{test_split}", train.num_classes)
    # the pooled split is in Flower's (shuffled) order: map its row numbers back to positions
    position = np.empty(len(train_rows), dtype=np.int64)
    position[np.asarray(train_rows[INDEX_COLUMN], dtype=np.int64)] = np.arange(len(train_rows))
    count = fds.partitioners[train_split].num_partitions
    parts = [position[np.asarray(fds.load_partition(j, train_split)[INDEX_COLUMN],
                                 dtype=np.int64)] for j in range(count)]
    empty = [j for j, part in enumerate(parts) if part.size == 0]
    if empty:
        raise ValueError(f"Flower's {partitioner} partitioner left partitions {empty[:5]} of "
                         f"{count} empty: every client needs >= 1 training record (lower "
                         "data.clients or change data.flwr.partitioner_kwargs)")
    return FederatedDataset(
        train, test, parts, name=f"{dataset}/flwr-{partitioner}({count} partitions)",
        info={"partition": f"flwr-datasets {partitioner}", "source": "flwr-datasets"})


def from_config(c: Any, seed: int) -> FederatedDataset:
    """``data.source: flwr-datasets`` (registered as dataset ``flwr-datasets``)."""
    from privfl.data.download import data_home

    f = c.flwr
    if not f.dataset:
        raise ValueError("data.flwr.dataset = None is not allowed with data.source: "
                         "flwr-datasets: name a Hugging Face dataset or a local builder "
                         "(parquet, csv, json with data.flwr.data_files)")
    extra: dict[str, Any] = {"cache_dir": str(data_home(c.root) / "huggingface")}
    if f.data_files:
        extra["data_files"] = dict(f.data_files)
    if f.subset:
        extra["subset"] = f.subset
    return load_flwr_dataset(
        f.dataset, partitioner=f.partitioner, partitioner_kwargs=f.partitioner_kwargs,
        num_partitions=c.clients, input_name=f.input, label=f.label,
        train_split=f.train_split, test_split=f.test_split, seed=seed, **extra)
