"""Datasets for private federated learning: readers, downloads, loaders and partitions.

numpy-based; torch is imported only by ``Dataset.to_torch`` / ``Dataset.torch_dataset``.

* Formats (:mod:`privfl.data.formats`): :func:`read_idx`, :func:`read_cifar_batch`,
  :func:`read_cifar10`, :func:`read_leaf_json`.
* Downloads with pooch: checksum verification, a cache (``$PRIVFL_DATA`` or
  ``~/.cache/privfl``) and progress: :func:`download_mnist`, :func:`download_fashion_mnist`,
  :func:`download_emnist`, :func:`download_cifar10`, :func:`download_file`; data already on disk
  is checked against the published checksums by :func:`check_published`.
* Loaders (:mod:`privfl.data.sources`) returning :class:`Dataset` objects: offline
  :func:`load_mnist_5k`, :func:`load_digits`, :func:`load_fashion_mnist`; after a download
  :func:`load_mnist`, :func:`load_emnist`, :func:`load_cifar10`; :func:`load_dataset` by name.
* Partitions (:mod:`privfl.data.partition`) and :class:`FederatedDataset` builders:
  :func:`federate_shards` (Zheng et al. 2021 MNIST), :func:`federate_dirichlet` (their CIFAR-10),
  :func:`federate_iid`, :func:`federate_groups`, :func:`federate_leaf`.
* Natural users (docs/natural-data.md): :func:`load_leaf_natural` (LEAF FEMNIST, Shakespeare,
  Sent140; tokenised by :mod:`privfl.data.text`), :func:`load_flwr_dataset` (Flower Datasets).
"""

from privfl.data.datasets import Dataset, FederatedDataset, as_rng
from privfl.data.download import (
    check_published,
    data_home,
    download_cifar10,
    download_emnist,
    download_fashion_mnist,
    download_file,
    download_mnist,
    file_checksum,
    verify_file,
)
from privfl.data.errors import (
    ChecksumError,
    DataFormatError,
    DatasetNotFoundError,
    DownloadError,
)
from privfl.data.flower_datasets import load_flwr_dataset
from privfl.data.formats import (
    LeafData,
    read_cifar10,
    read_cifar_batch,
    read_idx,
    read_idx_images,
    read_idx_labels,
    read_leaf_json,
    write_idx,
)
from privfl.data.natural import load_leaf_natural
from privfl.data.partition import (
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
from privfl.data.sources import (
    DATASETS,
    load_cifar10,
    load_dataset,
    load_digits,
    load_emnist,
    load_fashion_mnist,
    load_idx_dataset,
    load_mnist,
    load_mnist_5k,
    synthetic_dataset,
)

__all__ = [
    "DATASETS",
    "ChecksumError",
    "DataFormatError",
    "Dataset",
    "DatasetNotFoundError",
    "DownloadError",
    "FederatedDataset",
    "LeafData",
    "as_rng",
    "check_published",
    "data_home",
    "dirichlet_class_partition",
    "dirichlet_partition",
    "dirichlet_proportions",
    "download_cifar10",
    "download_emnist",
    "download_fashion_mnist",
    "download_file",
    "download_mnist",
    "federate_dirichlet",
    "federate_dirichlet_classes",
    "federate_groups",
    "federate_iid",
    "federate_leaf",
    "federate_shards",
    "file_checksum",
    "iid_partition",
    "load_cifar10",
    "load_dataset",
    "load_digits",
    "load_emnist",
    "load_fashion_mnist",
    "load_flwr_dataset",
    "load_idx_dataset",
    "load_leaf_natural",
    "load_mnist",
    "load_mnist_5k",
    "matched_test_indices",
    "natural_partition",
    "read_cifar10",
    "read_cifar_batch",
    "read_idx",
    "read_idx_images",
    "read_idx_labels",
    "read_leaf_json",
    "sample_by_proportions",
    "shard_partition",
    "synthetic_dataset",
    "verify_file",
    "write_idx",
]
