"""CIFAR-10 / CIFAR-100 python batches, read with a restricted, size-bounded unpickler.

A batch (Krizhevsky 2009) is a pickled dict with ``data`` (N x 3072 uint8: channel planes R, G,
B of 32 x 32, row-major) and ``labels`` (CIFAR-10) or ``fine_labels`` / ``coarse_labels``
(CIFAR-100).

A pickle is a program, so the unpickler admits only what numpy's array pickles use, and only in
the form numpy writes it: ``_reconstruct(ndarray, (0,), b'b')`` followed by a state whose data
are raw bytes of exactly the declared size (no arrays of Python objects). The whole file, at most
:data:`MAX_BATCH_BYTES`, is read into memory first, so a length field in the pickle cannot make
Python allocate more than the file holds (each one is checked against the file's end with
:func:`pickletools.genops` before unpickling). ``data`` must already be an array and the labels a
list of N integers (or an integer array) before anything is converted, so shared references in a
hostile file cannot expand into a huge array either. Memory is thus a small multiple of the
file's size.
"""

from __future__ import annotations

import io
import os
import pickle
import pickletools
import warnings
from pathlib import Path

import numpy as np

from privfl._validation import check_int
from privfl.data.errors import DataFormatError

__all__ = [
    "CIFAR10_TEST_FILES",
    "CIFAR10_TRAIN_FILES",
    "MAX_BATCH_BYTES",
    "read_cifar10",
    "read_cifar_batch",
]

PathLike = str | os.PathLike

#: The largest batch file read, 1 GiB (the largest published one, CIFAR-100's ``train``, is
#: 155 MB).
MAX_BATCH_BYTES = 2**30

_PICKLE_ALLOWED = {
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    ("codecs", "encode"),
}
_RECONSTRUCT = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
}


class _NdarrayToken:
    """Stands for ``numpy.ndarray`` in a pickle: an argument of ``_reconstruct``, not callable."""


class _BoundedArray(np.ndarray):
    """An array whose pickled state must be raw bytes of a non-object dtype (numpy then checks
    that their length matches the shape before allocating anything)."""

    def __setstate__(self, state):  # noqa: D401 - pickle API
        if not isinstance(state, tuple) or len(state) not in (4, 5):
            raise pickle.UnpicklingError("array state is not numpy's (shape, dtype, ..., data)")
        dtype, raw = state[-3], state[-1]
        if not isinstance(dtype, np.dtype) or dtype.hasobject:
            raise pickle.UnpicklingError(f"refusing an array of dtype {dtype!r}: no object arrays")
        if not isinstance(raw, bytes | bytearray):
            raise pickle.UnpicklingError("array data must be raw bytes")
        super().__setstate__(state)


def _reconstruct(subtype: object, shape: object, dtype: object) -> np.ndarray:
    """numpy's ``_reconstruct`` for the one call numpy's pickles make: an empty placeholder."""
    if not isinstance(subtype, _NdarrayToken) or tuple(shape) != (0,):
        raise pickle.UnpicklingError(
            f"refusing _reconstruct({type(subtype).__name__}, {shape!r}): numpy writes "
            "_reconstruct(ndarray, (0,), b'b')"
        )
    return np.ndarray.__new__(_BoundedArray, (0,), dtype=np.int8)


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that only admits numpy array reconstruction (no arbitrary code)."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        if (module, name) == ("numpy", "ndarray"):
            return _NdarrayToken()
        if (module, name) in _RECONSTRUCT:
            return _reconstruct
        if (module, name) not in _PICKLE_ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name}: CIFAR batches only contain "
                "dicts, lists, bytes and numpy arrays"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return super().find_class(module, name)


def _safe_unpickle(path: Path):
    size = path.stat().st_size
    if size > MAX_BATCH_BYTES:
        raise DataFormatError(
            f"{path}: {size} bytes, more than the {MAX_BATCH_BYTES} bytes a CIFAR python batch "
            "can be (the largest published one has 155 MB)"
        )
    raw = path.read_bytes()
    try:
        # pickletools reads each length-prefixed argument only as far as the file goes, so this
        # refuses a length beyond the file's end before the C unpickler would allocate it
        for _ in pickletools.genops(raw):
            pass
        return _RestrictedUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, MemoryError, OverflowError, RecursionError) as error:
        raise DataFormatError(f"{path}: not a valid CIFAR python batch ({error})") from error


def _key(batch: dict, name: str):
    for key in (name.encode(), name):
        if key in batch:
            return batch[key]
    return None


def _images(path: Path, data: object) -> np.ndarray:
    if not isinstance(data, np.ndarray):
        raise DataFormatError(
            f"{path}: CIFAR 'data' must be a uint8 array of shape (N, 3072), got "
            f"{type(data).__name__}"
        )
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataFormatError(
            f"{path}: CIFAR 'data' must be uint8 of shape (N, 3072), got {data.dtype} "
            f"{data.shape}"
        )
    return np.asarray(data)


def _labels(path: Path, labels: object, count: int, num_classes: int) -> np.ndarray:
    if not isinstance(labels, list | np.ndarray):
        raise DataFormatError(
            f"{path}: CIFAR labels must be a list of integers, got {type(labels).__name__}"
        )
    size = len(labels) if isinstance(labels, list) or labels.ndim == 1 else -1
    if size != count:
        shape = len(labels) if isinstance(labels, list) else labels.shape
        raise DataFormatError(
            f"{path}: {shape} labels for {count} images; expected one per image"
        )
    integral = (
        all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in labels)
        if isinstance(labels, list) else labels.dtype.kind in "iu"
    )
    if not integral:
        raise DataFormatError(f"{path}: CIFAR labels are not integers")
    labels = np.asarray(labels, dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise DataFormatError(
            f"{path}: labels span [{labels.min()}, {labels.max()}], expected [0, {num_classes})"
        )
    return labels


def read_cifar_batch(
    path: PathLike, *, num_classes: int = 10, label_key: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR python batch file (e.g. ``data_batch_1`` or ``test_batch``).

    Parameters
    ----------
    path
        The pickle file (at most :data:`MAX_BATCH_BYTES`).
    num_classes
        Labels must lie in ``[0, num_classes)`` (10 for CIFAR-10, 100 for CIFAR-100 fine labels).
    label_key
        ``labels`` (CIFAR-10), ``fine_labels`` or ``coarse_labels`` (CIFAR-100); by default the
        first of ``labels``, ``fine_labels`` that is present.

    Returns
    -------
    images, labels
        ``uint8`` array N x 3 x 32 x 32 (channels R, G, B) and ``int64`` labels of length N.
    """
    path = Path(path)
    num_classes = check_int("num_classes", num_classes, 1)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    batch = _safe_unpickle(path)
    if not isinstance(batch, dict):
        raise DataFormatError(f"{path}: CIFAR batch must be a dict, got {type(batch).__name__}")
    data = _key(batch, "data")
    if data is None:
        raise DataFormatError(f"{path}: CIFAR batch has no 'data' entry")
    keys = [label_key] if label_key is not None else ["labels", "fine_labels"]
    labels = next((v for v in (_key(batch, k) for k in keys) if v is not None), None)
    if labels is None:
        raise DataFormatError(f"{path}: CIFAR batch has none of the label entries {keys}")
    data = _images(path, data)
    labels = _labels(path, labels, data.shape[0], num_classes)
    return data.reshape(-1, 3, 32, 32).copy(), labels


CIFAR10_TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST_FILES = ("test_batch",)


def read_cifar10(
    directory: PathLike, *, train: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Read the CIFAR-10 training (``data_batch_1..5``) or test (``test_batch``) split.

    ``directory`` is the extracted ``cifar-10-batches-py`` folder. Returns uint8 images
    N x 3 x 32 x 32 and int64 labels.
    """
    directory = Path(directory)
    names = CIFAR10_TRAIN_FILES if train else CIFAR10_TEST_FILES
    missing = [name for name in names if not (directory / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{directory}: missing CIFAR-10 batch files {missing}")
    parts = [read_cifar_batch(directory / name) for name in names]
    return (
        np.concatenate([p[0] for p in parts]),
        np.concatenate([p[1] for p in parts]),
    )
