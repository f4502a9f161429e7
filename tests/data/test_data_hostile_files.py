"""Hostile data files: refused with a one-line error naming the file, in bounded memory.

Memory is measured with tracemalloc, which sees numpy's and Python's allocations (also the
virtual ones that never touch RAM, which are what a length field in a file can request).
"""

from __future__ import annotations

import gzip
import json
import pickle
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from _datafiles import cifar_batch_bytes, idx_labels_bytes, leaf_content, write_json

from privfl.data import DataFormatError, read_cifar_batch, read_idx, read_leaf_json
from privfl.data.idx import DEFLATE_MAX_RATIO, MAX_IDX_BYTES

#: Peak traced memory allowed while refusing a hostile file.
LIMIT = 100 * 2**20


def _refused(read: Callable[[Path], object], path: Path, match: str) -> str:
    """The one-line error ``read(path)`` raises; asserts it names the file and memory stayed
    under :data:`LIMIT`."""
    tracemalloc.start()
    try:
        with pytest.raises(DataFormatError, match=match) as info:
            read(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(info.value)
    assert peak < LIMIT, f"peak {peak / 2**20:.0f} MiB while refusing {path.name}"
    assert message.startswith(f"{path}: ") and "\n" not in message
    return message


# ------------------------------------------------------------------------------------ IDX


@pytest.fixture(scope="module")
def zeros_member() -> bytes:
    """One gzip member of 16 MiB of zeros (16 KB compressed)."""
    return gzip.compress(bytes(2**24), compresslevel=9, mtime=0)


def _gzip_bomb(path: Path, header: bytes, member: bytes, copies: int = 600) -> Path:
    """``header`` then ``copies`` x 16 MiB of zeros, as concatenated gzip members (a valid gzip
    file: ~9.8 MB that expands to ~9.8 GB, the issue's case)."""
    with path.open("wb") as out:
        out.write(gzip.compress(header, mtime=0))
        for _ in range(copies):
            out.write(member)
    return path


@pytest.mark.parametrize(
    ("header", "copies", "match"),
    [
        (b"", 600, "unknown IDX type code 0x00 in magic number 0x00000000"),
        (struct.pack(">II", 0x00000801, 10), 600,
         r"unexpected trailing data after the 10 bytes of IDX data of shape \(10,\)"),
        (struct.pack(">II", 0x00000801, 2**31), 1,
         r"header says shape \(2147483648,\), 2147483648 bytes = 2 GiB, more than a gzip file"),
        (struct.pack(">IIII", 0x00000803, 2**32 - 1, 2**32 - 1, 2**32 - 1), 600,
         r"79228162458924105385300197375 bytes = 7.38e\+19 GiB of data, more than max_bytes"),
    ],
    ids=["all-zeros", "small-header-then-zeros", "beyond-deflate-ratio", "absurd-shape"],
)
def test_idx_gzip_bomb_refused_in_bounded_memory(tmp_path, zeros_member, header, copies, match):
    path = _gzip_bomb(tmp_path / "bomb-idx1-ubyte.gz", header, zeros_member, copies)
    _refused(read_idx, path, match)


def test_idx_declared_size_capped_by_gzip_ratio_and_max_bytes(tmp_path):
    labels = np.arange(4096, dtype=np.uint8)
    path = tmp_path / "labels.gz"
    path.write_bytes(gzip.compress(idx_labels_bytes(labels), mtime=0))
    np.testing.assert_array_equal(read_idx(path, max_bytes=4096), labels)
    _refused(lambda p: read_idx(p, max_bytes=4095), path,
             r"4096 bytes of data, more than max_bytes = 4095 bytes")
    assert MAX_IDX_BYTES == 2**34  # 16 GiB by default
    # a 64-byte gzip file (one member, zero padding) holds at most 1032 x 64 bytes: one more is
    # refused at once; exactly that many gets past the check and is found missing while streaming
    for claim, match in [(DEFLATE_MAX_RATIO * 64 + 1, "more than a gzip file of 64 bytes"),
                         (DEFLATE_MAX_RATIO * 64, "file has 0 bytes after the header")]:
        path.write_bytes(gzip.compress(struct.pack(">II", 0x00000801, claim), mtime=0)
                         .ljust(64, b"\0"))
        _refused(read_idx, path, match)


def test_idx_raw_file_checked_against_its_size_before_reading(tmp_path):
    path = tmp_path / "raw-idx3-ubyte"
    path.write_bytes(struct.pack(">IIII", 0x00000803, 60000, 28, 28) + bytes(100))
    message = _refused(read_idx, path, "truncated IDX data")
    assert message.endswith("header says shape (60000, 28, 28) (47040000 bytes), file has 100 "
                            "bytes after the header")
    path.write_bytes(struct.pack(">II", 0x00000C01, 3) + bytes(13))
    _refused(read_idx, path, r"1 unexpected trailing bytes after IDX data of shape \(3,\)")


def test_idx_big_endian_values_and_native_result(tmp_path):
    values = np.array([-2, 0, 70000, 2**31 - 1], dtype=np.int32)
    path = tmp_path / "v.idx"
    path.write_bytes(struct.pack(">II", 0x00000C01, 4) + values.astype(">i4").tobytes())
    got = read_idx(path)
    assert got.dtype == np.dtype("int32") and got.dtype.isnative
    np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"ndim": 0}, r"ndim = 0 is out of range: must be an integer >= 1"),
    ({"ndim": 256}, r"ndim = 256 is out of range: must be an integer in \[1, 255\]"),
    ({"max_bytes": 0}, r"max_bytes = 0 is out of range: must be an integer >= 1"),
])
def test_idx_arguments_validated(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        read_idx(tmp_path / "x", **kwargs)


# ---------------------------------------------------------------------------------- CIFAR


def _binbytes8(length: int) -> bytes:
    """A 14-byte pickle whose BINBYTES8 opcode claims ``length`` bytes."""
    return b"\x80\x04\x8e" + struct.pack("<Q", length) + b"abc"


def _reduce(module: str, name: str, args: bytes) -> bytes:
    """Protocol-2 pickle calling ``module.name`` on the pickled ``args`` tuple."""
    return b"\x80\x02c" + f"{module}\n{name}\n".encode() + args + b"R."


_NDARRAY = b"cnumpy\nndarray\n"


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (_binbytes8(2**34), "expected 17179869184 bytes in a bytes8, but only 3 remain"),
        (_reduce("numpy._core.multiarray", "_reconstruct",
                 _NDARRAY + pickle.dumps((2**34,), 2)[2:-1] + b"U\x01b\x87"),
         r"refusing _reconstruct\(_NdarrayToken, \(17179869184,\)\)"),
        (_reduce("numpy", "ndarray", pickle.dumps(((2**34,), "u1"), 2)[2:-1]),
         "not a valid CIFAR python batch .*not callable"),
        (pickle.dumps(np.array([None, 1], dtype=object), 2), "no object arrays"),
    ],
    ids=["length-field", "reconstruct-shape", "ndarray-call", "object-array"],
)
def test_cifar_pickle_cannot_request_huge_allocations(tmp_path, payload, match):
    path = tmp_path / "data_batch_1"
    path.write_bytes(payload)
    _refused(read_cifar_batch, path, match)


def _shared(depth: int, width: int = 10) -> list:
    """A list of ``width ** depth`` zeros built from shared references (tiny when pickled)."""
    node: list = [0] * width
    for _ in range(depth - 1):
        node = [node] * width
    return node


def test_cifar_shared_reference_bombs_are_not_expanded(tmp_path):
    bomb = _shared(8)  # 1e8 elements once expanded: 800 MB as int64
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({b"data": bomb, b"labels": [0]}, 2))
    assert path.stat().st_size < 1000
    _refused(read_cifar_batch, path, r"'data' must be a uint8 array of shape \(N, 3072\), got list")
    image = np.zeros((10, 3072), np.uint8)
    path.write_bytes(pickle.dumps({b"data": image, b"labels": bomb}, 2))
    _refused(read_cifar_batch, path, "CIFAR labels are not integers")


def test_cifar_real_batches_still_load_and_oversized_files_are_refused(tmp_path, monkeypatch):
    payload, batch = cifar_batch_bytes(5, seed=3)
    path = tmp_path / "data_batch_1"
    path.write_bytes(payload)
    images, labels = read_cifar_batch(path)
    assert type(images) is np.ndarray and images.shape == (5, 3, 32, 32)
    np.testing.assert_array_equal(images.reshape(5, -1), batch[b"data"])
    np.testing.assert_array_equal(labels, batch[b"labels"])
    monkeypatch.setattr("privfl.data.cifar.MAX_BATCH_BYTES", len(payload) - 1)
    _refused(read_cifar_batch, path, f"{len(payload)} bytes, more than the {len(payload) - 1}")
    with pytest.raises(ValueError, match="num_classes = 0 is out of range"):
        read_cifar_batch(path, num_classes=0)


# ----------------------------------------------------------------------------------- LEAF


def test_leaf_deep_nesting_is_a_one_line_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"users": ' + "[" * 100_000 + "]" * 100_000 + "}")
    _refused(read_leaf_json, path, "nested deeper than Python's JSON parser reads")


def test_leaf_huge_numbers_are_one_line_errors(tmp_path):
    path = tmp_path / "digits.json"
    path.write_text('{"users": ["a"], "num_samples": [' + "9" * 5000 + "]}")
    _refused(read_leaf_json, path, r"not valid LEAF JSON \(Exceeds the limit \(4300 digits\)")
    content = leaf_content(["a"], [1])
    content["num_samples"] = [10**30]
    message = _refused(read_leaf_json, write_json(tmp_path / "big.json", content),
                       "user 'a' has num_samples")
    assert message.endswith("has num_samples 1000000000000000000000000000000 but 1 x and 1 y "
                            "entries")
    content["num_samples"] = [[0] * 10_000]
    message = _refused(read_leaf_json, write_json(tmp_path / "list.json", content),
                       "num_samples of 'a' is not an integer")
    assert len(message) < 200
    path = tmp_path / "text.json"
    path.write_text(json.dumps({"users": [], "num_samples": [], "user_data": {}}))
    assert read_leaf_json(path).users == []
