"""Readers for the standard on-disk formats of the datasets the papers use.

* **IDX** (MNIST, EMNIST, Fashion-MNIST): big-endian header ``0x00 0x00 <type> <ndim>`` followed by
  ``ndim`` 32-bit dimension sizes and the data; gzip-compressed or raw (detected from the file's
  first bytes, not its name).
* **CIFAR-10 / CIFAR-100 python batches**: pickled dicts with ``data`` (N x 3072 uint8, channel
  planes R, G, B of 32 x 32 row-major) and ``labels`` (or ``fine_labels``). Pickles are loaded
  with a restricted unpickler that only admits the numpy reconstruction functions, so a
  malicious file cannot run code.
* **LEAF JSON** (FEMNIST, Sent140, Shakespeare, ...): ``{"users": [...], "num_samples": [...],
  "user_data": {user: {"x": [...], "y": [...]}}}``; a LEAF split is often several such files in
  one directory, which are merged.

Every reader checks the structure and raises :class:`~privfl.data.errors.DataFormatError`
naming the file and the problem (bad magic number, truncated data, wrong dimensions, ...).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import warnings
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from privfl.data.errors import DataFormatError

__all__ = [
    "IDX_DTYPES",
    "LeafData",
    "read_cifar10",
    "read_cifar_batch",
    "read_idx",
    "read_idx_images",
    "read_idx_labels",
    "read_leaf_json",
    "write_idx",
]

PathLike = str | os.PathLike

#: IDX type codes (third header byte) and the big-endian numpy dtype each denotes.
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(">u1"),
    0x09: np.dtype(">i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

_GZIP_MAGIC = b"\x1f\x8b"


def _read_bytes(path: PathLike) -> bytes:
    """The file's content, gunzipped when it starts with the gzip magic number."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    raw = path.read_bytes()
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as error:
        raise DataFormatError(f"{path}: corrupt or truncated gzip data ({error})") from error


# --------------------------------------------------------------------------------------- IDX


def read_idx(path: PathLike, *, ndim: int | None = None) -> np.ndarray:
    """Read an IDX file (gzip-compressed or raw) into a native-endian numpy array.

    Parameters
    ----------
    path
        The file. Compression is detected from its first two bytes.
    ndim
        If given, the number of dimensions the file must have (1 for labels, 3 for images).

    Raises
    ------
    DataFormatError
        If the magic number is wrong (first two bytes not zero, unknown type code), a dimension
        is zero, the dimension count differs from ``ndim``, or the data is shorter or longer
        than the header says.
    """
    path = Path(path)
    data = _read_bytes(path)
    if len(data) < 4:
        raise DataFormatError(f"{path}: {len(data)} bytes, too short for an IDX header")
    if data[0] != 0 or data[1] != 0:
        raise DataFormatError(
            f"{path}: bad IDX magic number 0x{data[:4].hex()}: the first two bytes must be zero "
            "(is this an IDX file?)"
        )
    type_code, dims = data[2], data[3]
    if type_code not in IDX_DTYPES:
        known = ", ".join(f"0x{code:02X}" for code in IDX_DTYPES)
        raise DataFormatError(
            f"{path}: unknown IDX type code 0x{type_code:02X} in magic number "
            f"0x{data[:4].hex()}: must be one of {known}"
        )
    if dims == 0:
        raise DataFormatError(f"{path}: IDX header declares 0 dimensions")
    if ndim is not None and dims != ndim:
        raise DataFormatError(
            f"{path}: IDX file has {dims} dimensions (magic 0x{data[:4].hex()}), expected {ndim}"
        )
    header = 4 + 4 * dims
    if len(data) < header:
        raise DataFormatError(f"{path}: truncated IDX header ({len(data)} of {header} bytes)")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=dims, offset=4))
    if any(d == 0 for d in shape):
        raise DataFormatError(f"{path}: IDX header has a zero dimension, shape {shape}")
    dtype = IDX_DTYPES[type_code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    body = len(data) - header
    if body < expected:
        raise DataFormatError(
            f"{path}: truncated IDX data: header says shape {shape} ({expected} bytes), "
            f"file has {body} bytes after the header"
        )
    if body > expected:
        raise DataFormatError(
            f"{path}: {body - expected} unexpected trailing bytes after IDX data of shape {shape}"
        )
    array = np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)
    return array.astype(dtype.newbyteorder("="), copy=True)


def read_idx_images(path: PathLike, *, height: int | None = 28, width: int | None = 28):
    """Read an IDX image file (type ``uint8``, 3 dimensions N x H x W).

    ``height``/``width`` (default 28 x 28, the MNIST family) are checked unless ``None``.
    """
    images = read_idx(path, ndim=3)
    if images.dtype != np.uint8:
        raise DataFormatError(f"{path}: IDX images must be unsigned bytes, got {images.dtype}")
    _, h, w = images.shape
    if (height is not None and h != height) or (width is not None and w != width):
        raise DataFormatError(
            f"{path}: images are {h} x {w}, expected {height} x {width}"
        )
    return images


def read_idx_labels(path: PathLike, *, num_classes: int | None = None) -> np.ndarray:
    """Read an IDX label file (1 dimension) as ``int64``; labels are checked < ``num_classes``."""
    labels = read_idx(path, ndim=1)
    if labels.dtype.kind not in "iu":
        raise DataFormatError(f"{path}: IDX labels must be integers, got {labels.dtype}")
    labels = labels.astype(np.int64)
    if labels.min() < 0 or (num_classes is not None and labels.max() >= num_classes):
        raise DataFormatError(
            f"{path}: labels span [{labels.min()}, {labels.max()}], "
            f"expected [0, {num_classes})"
        )
    return labels


def write_idx(path: PathLike, array: np.ndarray, *, compress: bool | None = None) -> Path:
    """Write ``array`` as an IDX file (gzip when ``compress`` or the name ends in ``.gz``).

    Used to build test fixtures and to export data; the inverse of :func:`read_idx`.
    """
    path = Path(path)
    array = np.asarray(array)
    codes = {dtype.newbyteorder("="): code for code, dtype in IDX_DTYPES.items()}
    native = array.dtype.newbyteorder("=")
    if native not in codes:
        raise ValueError(f"array dtype {array.dtype} has no IDX type code")
    if array.ndim == 0 or array.ndim > 255:
        raise ValueError(f"array.ndim = {array.ndim} is out of range: must be in [1, 255]")
    header = bytes([0, 0, codes[native], array.ndim]) + np.asarray(
        array.shape, dtype=">u4"
    ).tobytes()
    payload = header + array.astype(IDX_DTYPES[codes[native]]).tobytes()
    if compress is None:
        compress = path.name.endswith(".gz")
    path.write_bytes(gzip.compress(payload, mtime=0) if compress else payload)
    return path


# ------------------------------------------------------------------------------------- CIFAR

_PICKLE_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
    ("codecs", "encode"),
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that only admits numpy array reconstruction (no arbitrary code)."""

    def find_class(self, module: str, name: str):  # noqa: D401 - pickle API
        if (module, name) not in _PICKLE_ALLOWED:
            raise pickle.UnpicklingError(
                f"refusing to load global {module}.{name}: CIFAR batches only contain "
                "dicts, lists, bytes and numpy arrays"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return super().find_class(module, name)


def _safe_unpickle(path: Path):
    try:
        with path.open("rb") as stream:
            return _RestrictedUnpickler(stream, encoding="bytes").load()
    except FileNotFoundError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
            IndexError, KeyError, MemoryError) as error:
        raise DataFormatError(f"{path}: not a valid CIFAR python batch ({error})") from error


def _key(batch: dict, name: str):
    for key in (name.encode(), name):
        if key in batch:
            return batch[key]
    return None


def read_cifar_batch(
    path: PathLike, *, num_classes: int = 10, label_key: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR python batch file (e.g. ``data_batch_1`` or ``test_batch``).

    Parameters
    ----------
    path
        The pickle file.
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
    data = np.asarray(data)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
        raise DataFormatError(
            f"{path}: CIFAR 'data' must be uint8 of shape (N, 3072), got {data.dtype} "
            f"{data.shape}"
        )
    try:
        labels = np.asarray(labels, dtype=np.int64)
    except (TypeError, ValueError) as error:
        raise DataFormatError(f"{path}: CIFAR labels are not integers ({error})") from error
    if labels.ndim != 1 or labels.shape[0] != data.shape[0]:
        raise DataFormatError(
            f"{path}: {labels.shape} labels for {data.shape[0]} images; expected one per image"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
        raise DataFormatError(
            f"{path}: labels span [{labels.min()}, {labels.max()}], expected [0, {num_classes})"
        )
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


# -------------------------------------------------------------------------------------- LEAF


@dataclass
class LeafData:
    """The content of one LEAF split: per-user lists of inputs and targets.

    Attributes
    ----------
    users
        User (writer, account, speaker) ids in file order.
    x, y
        ``x[user]`` and ``y[user]``: lists of that user's inputs and targets, as stored (numbers
        for FEMNIST, strings and nested lists for the text datasets).
    hierarchies
        The optional ``hierarchies`` entry of the files (empty when absent).
    """

    users: list[str]
    x: dict[str, list]
    y: dict[str, list]
    hierarchies: list = field(default_factory=list)

    @property
    def num_samples(self) -> np.ndarray:
        """Number of examples of each user, in the order of :attr:`users`."""
        return np.array([len(self.y[u]) for u in self.users], dtype=np.int64)

    def arrays(self, user: str, *, x_dtype=np.float32) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` of one user as numpy arrays (numeric LEAF datasets such as FEMNIST)."""
        if user not in self.x:
            raise ValueError(f"user = {user!r} is not allowed: not a user of this LEAF split")
        try:
            x = np.asarray(self.x[user], dtype=x_dtype)
            y = np.asarray(self.y[user], dtype=np.int64)
        except (TypeError, ValueError) as error:
            raise DataFormatError(
                f"user {user!r}: LEAF data is not numeric ({error}); convert it first"
            ) from error
        return x, y


def _leaf_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
        if not files:
            raise FileNotFoundError(f"{path}: directory holds no LEAF .json files")
        return files
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file or directory")
    return [path]


def _check_leaf(path: Path, content: object) -> tuple[list, list, dict, list]:
    if not isinstance(content, dict):
        raise DataFormatError(f"{path}: LEAF JSON must be an object, got {type(content).__name__}")
    missing = [k for k in ("users", "num_samples", "user_data") if k not in content]
    if missing:
        raise DataFormatError(f"{path}: LEAF JSON lacks the keys {missing}")
    users, counts, user_data = content["users"], content["num_samples"], content["user_data"]
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise DataFormatError(f"{path}: 'users' must be a list of strings")
    if len(set(users)) != len(users):
        raise DataFormatError(f"{path}: 'users' has duplicate ids")
    if not isinstance(counts, list) or len(counts) != len(users):
        raise DataFormatError(
            f"{path}: 'num_samples' must be a list with one count per user "
            f"({len(users)} users)"
        )
    if not isinstance(user_data, dict):
        raise DataFormatError(f"{path}: 'user_data' must be an object keyed by user id")
    for user, count in zip(users, counts, strict=True):
        record = user_data.get(user)
        if not isinstance(record, dict) or "x" not in record or "y" not in record:
            raise DataFormatError(f"{path}: user_data[{user!r}] must be an object with x and y")
        if not isinstance(record["x"], list) or not isinstance(record["y"], list):
            raise DataFormatError(f"{path}: user_data[{user!r}] x and y must be lists")
        if isinstance(count, bool) or not isinstance(count, int):
            raise DataFormatError(f"{path}: num_samples of {user!r} is not an integer: {count!r}")
        if len(record["x"]) != count or len(record["y"]) != count:
            raise DataFormatError(
                f"{path}: user {user!r} has num_samples {count} but "
                f"{len(record['x'])} x and {len(record['y'])} y entries"
            )
    extra = set(user_data) - set(users)
    if extra:
        raise DataFormatError(f"{path}: user_data has users not in 'users': {sorted(extra)[:5]}")
    hierarchies = content.get("hierarchies", [])
    return users, counts, user_data, hierarchies if isinstance(hierarchies, list) else []


def read_leaf_json(path: PathLike | Iterable[PathLike]) -> LeafData:
    """Read a LEAF split: one JSON file, a directory of them, or a list of files (merged).

    Raises :class:`DataFormatError` for invalid JSON, missing keys, counts that do not match
    the data, or a user that appears in two files.
    """
    if isinstance(path, str | os.PathLike):
        files = _leaf_files(Path(path))
    else:
        files = [Path(p) for p in path]
        if not files:
            raise ValueError("path = [] is not allowed: must name at least one LEAF file")
    result = LeafData(users=[], x={}, y={})
    for file in files:
        try:
            with file.open("r", encoding="utf-8") as stream:
                content = json.load(stream)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise DataFormatError(f"{file}: not valid LEAF JSON ({error})") from error
        users, _, user_data, hierarchies = _check_leaf(file, content)
        for user in users:
            if user in result.x:
                raise DataFormatError(f"{file}: user {user!r} also appears in an earlier file")
            result.users.append(user)
            result.x[user] = user_data[user]["x"]
            result.y[user] = user_data[user]["y"]
        result.hierarchies.extend(hierarchies)
    return result

