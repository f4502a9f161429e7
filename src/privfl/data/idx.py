"""IDX files (MNIST, EMNIST, Fashion-MNIST), read with memory bounded by their header.

Layout (LeCun et al. 1998): big-endian magic ``0x00 0x00 <type> <ndim>``, ``ndim`` unsigned
32-bit dimension sizes, then the data in row-major order; the file is gzip-compressed or raw
(detected from its first two bytes, not its name).

The header is read and checked first; only then is the payload read, straight into an array of
the size the header declares (``prod(shape) * itemsize`` bytes, refused beyond ``max_bytes``).
A payload size no file of this size can hold is refused before anything is allocated: a raw
file must hold exactly the header plus the payload, and a gzip file of ``n`` bytes expands to at
most ``1032 n`` bytes (deflate's largest ratio, Gailly and Adler's zlib technical notes).
Decompression streams into the array and stops one byte past the declared size, so a gzip that
expands beyond the header's size (a "zip bomb") is refused after reading that byte.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

from privfl._validation import check_int
from privfl.data.errors import DataFormatError

__all__ = [
    "IDX_DTYPES",
    "MAX_IDX_BYTES",
    "read_idx",
    "read_idx_images",
    "read_idx_labels",
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

#: Default cap on an IDX payload, 16 GiB: the largest published IDX file (EMNIST byclass
#: training images, 697,932 x 28 x 28) holds 547 MB.
MAX_IDX_BYTES = 2**34

#: Deflate's largest expansion ratio: one byte of a gzip stream decodes to at most 1032 bytes.
DEFLATE_MAX_RATIO = 1032

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


def _size(nbytes: int) -> str:
    """``"4294967295 bytes = 4 GiB"`` (bytes alone below 1 MiB)."""
    return f"{nbytes} bytes" if nbytes < 2**20 else f"{nbytes} bytes = {nbytes / 2**30:.3g} GiB"


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes (fewer only at the end of the data)."""
    parts, got = [], 0
    while got < size:
        part = stream.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _header(path: Path, stream: BinaryIO, ndim: int | None) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the IDX header, checked before any data is read."""
    magic = _read_exactly(stream, 4)
    if len(magic) < 4:
        raise DataFormatError(f"{path}: {len(magic)} bytes, too short for an IDX header")
    if magic[0] != 0 or magic[1] != 0:
        raise DataFormatError(
            f"{path}: bad IDX magic number 0x{magic.hex()}: the first two bytes must be zero "
            "(is this an IDX file?)"
        )
    type_code, dims = magic[2], magic[3]
    if type_code not in IDX_DTYPES:
        known = ", ".join(f"0x{code:02X}" for code in IDX_DTYPES)
        raise DataFormatError(
            f"{path}: unknown IDX type code 0x{type_code:02X} in magic number "
            f"0x{magic.hex()}: must be one of {known}"
        )
    if dims == 0:
        raise DataFormatError(f"{path}: IDX header declares 0 dimensions")
    if ndim is not None and dims != ndim:
        raise DataFormatError(
            f"{path}: IDX file has {dims} dimensions (magic 0x{magic.hex()}), expected {ndim}"
        )
    sizes = _read_exactly(stream, 4 * dims)
    if len(sizes) < 4 * dims:
        raise DataFormatError(
            f"{path}: truncated IDX header ({4 + len(sizes)} of {4 + 4 * dims} bytes)"
        )
    shape = tuple(int(d) for d in np.frombuffer(sizes, dtype=">u4"))
    if any(d == 0 for d in shape):
        raise DataFormatError(f"{path}: IDX header has a zero dimension, shape {shape}")
    return shape, IDX_DTYPES[type_code]


def _check_size(path: Path, shape: tuple[int, ...], nbytes: int, *, header: int, file_size: int,
                compressed: bool, max_bytes: int) -> None:
    """Refuse a declared payload that is absurd or that this file cannot hold."""
    if nbytes > max_bytes:
        raise DataFormatError(
            f"{path}: IDX header declares shape {shape}, {_size(nbytes)} of data, more than "
            f"max_bytes = {_size(max_bytes)}: refused (a corrupt or hostile header?)"
        )
    if compressed:
        capacity = DEFLATE_MAX_RATIO * file_size
        if nbytes > capacity:
            raise DataFormatError(
                f"{path}: truncated IDX data: header says shape {shape}, {_size(nbytes)}, more "
                f"than a gzip file of {file_size} bytes can hold ({DEFLATE_MAX_RATIO} times its "
                f"size = {_size(capacity)})"
            )
        return
    body = file_size - header
    if body < nbytes:
        raise DataFormatError(
            f"{path}: truncated IDX data: header says shape {shape} ({nbytes} bytes), "
            f"file has {body} bytes after the header"
        )
    if body > nbytes:
        raise DataFormatError(
            f"{path}: {body - nbytes} unexpected trailing bytes after IDX data of shape {shape}"
        )


def _read_payload(path: Path, stream: BinaryIO, shape: tuple[int, ...], dtype: np.dtype,
                  nbytes: int) -> np.ndarray:
    """Stream the data into an array of the declared shape; refuse short or over-long data."""
    array = np.empty(shape, dtype=dtype)
    view = memoryview(array.reshape(-1).view(np.uint8))
    got = 0
    while got < nbytes:
        count = stream.readinto(view[got : got + _CHUNK])
        if not count:
            raise DataFormatError(
                f"{path}: truncated IDX data: header says shape {shape} ({nbytes} bytes), "
                f"file has {got} bytes after the header"
            )
        got += count
    if stream.read(1):
        raise DataFormatError(
            f"{path}: unexpected trailing data after the {nbytes} bytes of IDX data of shape "
            f"{shape} (reading stopped there)"
        )
    return array


def read_idx(
    path: PathLike, *, ndim: int | None = None, max_bytes: int = MAX_IDX_BYTES
) -> np.ndarray:
    """Read an IDX file (gzip-compressed or raw) into a native-endian numpy array.

    Memory is bounded by the header: at most ``prod(shape) * itemsize`` bytes (plus a 1 MiB
    decompression chunk), never more than ``max_bytes``, and only when the file's size can
    hold that much (see the module notes).

    Parameters
    ----------
    path
        The file. Compression is detected from its first two bytes.
    ndim
        If given, the number of dimensions the file must have (1 for labels, 3 for images).
    max_bytes
        The largest payload accepted, in bytes (default :data:`MAX_IDX_BYTES`, 16 GiB).

    Raises
    ------
    DataFormatError
        Naming the file: the magic number is wrong (first two bytes not zero, unknown type
        code), a dimension is zero, the dimension count differs from ``ndim``, the declared
        size exceeds ``max_bytes`` or what the file can hold, the data is shorter or longer
        than the header says, or the gzip stream is corrupt.
    """
    path = Path(path)
    if ndim is not None:
        ndim = check_int("ndim", ndim, 1, 255)
    max_bytes = check_int("max_bytes", max_bytes, 1)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    file_size = path.stat().st_size
    with path.open("rb") as raw:
        compressed = raw.read(2) == _GZIP_MAGIC
        raw.seek(0)
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw as stream:
                shape, dtype = _header(path, stream, ndim)
                nbytes = math.prod(shape) * dtype.itemsize
                _check_size(path, shape, nbytes, header=4 + 4 * len(shape), file_size=file_size,
                            compressed=compressed, max_bytes=max_bytes)
                array = _read_payload(path, stream, shape, dtype, nbytes)
        except (OSError, EOFError, zlib.error) as error:
            if not compressed:
                raise
            raise DataFormatError(f"{path}: corrupt or truncated gzip data ({error})") from error
    if not dtype.isnative:
        array = array.byteswap(inplace=True).view(dtype.newbyteorder("="))
    return array


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
