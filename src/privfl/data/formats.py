"""Readers for the standard on-disk formats of the datasets the papers use.

* **IDX** (MNIST, EMNIST, Fashion-MNIST; :mod:`privfl.data.idx`): big-endian header
  ``0x00 0x00 <type> <ndim>`` followed by ``ndim`` 32-bit dimension sizes and the data;
  gzip-compressed or raw. The header is checked first and bounds what is read.
* **CIFAR-10 / CIFAR-100 python batches** (:mod:`privfl.data.cifar`): pickled dicts with
  ``data`` (N x 3072 uint8) and ``labels`` (or ``fine_labels``), loaded with a restricted,
  size-bounded unpickler, so a malicious file can neither run code nor allocate more than a
  small multiple of its size.
* **LEAF JSON** (FEMNIST, Sent140, Shakespeare, ...; :mod:`privfl.data.leaf`): per-user data,
  one file or a directory of files that are merged.

Every reader checks the structure and raises :class:`~privfl.data.errors.DataFormatError`
with a one-line message naming the file and the problem (bad magic number, truncated data,
wrong dimensions, a declared size the file cannot hold, ...).
"""

from __future__ import annotations

from privfl.data.cifar import (
    CIFAR10_TEST_FILES,
    CIFAR10_TRAIN_FILES,
    MAX_BATCH_BYTES,
    read_cifar10,
    read_cifar_batch,
)
from privfl.data.idx import (
    IDX_DTYPES,
    MAX_IDX_BYTES,
    read_idx,
    read_idx_images,
    read_idx_labels,
    write_idx,
)
from privfl.data.leaf import LeafData, read_leaf_json

__all__ = [
    "CIFAR10_TEST_FILES",
    "CIFAR10_TRAIN_FILES",
    "IDX_DTYPES",
    "MAX_BATCH_BYTES",
    "MAX_IDX_BYTES",
    "LeafData",
    "read_cifar10",
    "read_cifar_batch",
    "read_idx",
    "read_idx_images",
    "read_idx_labels",
    "read_leaf_json",
    "write_idx",
]
