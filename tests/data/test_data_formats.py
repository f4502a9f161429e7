"""Readers for IDX, CIFAR python batches and LEAF JSON, on files in the real formats."""

from __future__ import annotations

import gzip
import os
import pickle
import struct

import numpy as np
import pytest
from _datafiles import (
    cifar_batch_bytes,
    fake_mnist,
    idx_images_bytes,
    idx_labels_bytes,
    leaf_content,
    write_cifar_folder,
    write_idx_pair,
    write_json,
)

from privfl.data import (
    DataFormatError,
    read_cifar10,
    read_cifar_batch,
    read_idx,
    read_idx_images,
    read_idx_labels,
    read_leaf_json,
    write_idx,
)

# ------------------------------------------------------------------------------------ IDX


@pytest.mark.parametrize("gz", [True, False])
def test_idx_mnist_layout_gz_and_raw(tmp_path, gz):
    images, labels = fake_mnist(12, seed=0)
    img_path, lab_path = write_idx_pair(tmp_path, "train", images, labels, gz=gz)
    got_images = read_idx_images(img_path)
    got_labels = read_idx_labels(lab_path, num_classes=10)
    assert got_images.dtype == np.uint8 and got_images.shape == (12, 28, 28)
    np.testing.assert_array_equal(got_images, images)
    assert got_labels.dtype == np.int64
    np.testing.assert_array_equal(got_labels, labels)


def test_idx_compression_detected_from_content_not_name(tmp_path):
    images, _ = fake_mnist(3, seed=1)
    path = tmp_path / "no-suffix"
    path.write_bytes(gzip.compress(idx_images_bytes(images)))
    np.testing.assert_array_equal(read_idx(path), images)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
def test_idx_all_type_codes_roundtrip(tmp_path, dtype):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    if dtype == np.uint8:
        array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    path = write_idx(tmp_path / "a.idx.gz", array)
    got = read_idx(path)
    assert got.dtype == np.dtype(dtype) and got.dtype.isnative
    np.testing.assert_array_equal(got, array)
    assert read_idx(write_idx(tmp_path / "raw.idx", array)).shape == (2, 3, 4)


def _corrupt(tmp_path, payload: bytes, name: str = "bad") -> str:
    path = tmp_path / name
    path.write_bytes(payload)
    return path


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x00", "too short"),
        (struct.pack(">II", 0x01000801, 1) + b"\x00", "first two bytes must be zero"),
        (struct.pack(">II", 0x00000701, 1) + b"\x00", "unknown IDX type code 0x07"),
        (struct.pack(">I", 0x00000800), "0 dimensions"),
        (struct.pack(">I", 0x00000803) + b"\x00\x00", "truncated IDX header"),
        (struct.pack(">IIII", 2051, 2, 0, 28), "zero dimension"),
        (struct.pack(">IIII", 2051, 2, 28, 28) + bytes(28 * 28), "truncated IDX data"),
        (struct.pack(">II", 2049, 3) + bytes(5), "2 unexpected trailing bytes"),
    ],
)
def test_idx_corrupt_files_raise_clear_errors(tmp_path, payload, message):
    path = _corrupt(tmp_path, payload)
    with pytest.raises(DataFormatError, match=message) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_idx_truncated_gzip(tmp_path):
    blob = gzip.compress(idx_labels_bytes(np.arange(100, dtype=np.uint8) % 10))
    path = _corrupt(tmp_path, blob[: len(blob) // 2], "cut.gz")
    with pytest.raises(DataFormatError, match="corrupt or truncated gzip"):
        read_idx(path)


def test_idx_dimension_checks(tmp_path):
    images, labels = fake_mnist(4, seed=3)
    img_path, lab_path = write_idx_pair(tmp_path, "x", images, labels)
    with pytest.raises(DataFormatError, match="has 3 dimensions .* expected 1"):
        read_idx_labels(img_path)
    with pytest.raises(DataFormatError, match="expected 3"):
        read_idx_images(lab_path)
    with pytest.raises(DataFormatError, match="28 x 28, expected 32 x 32"):
        read_idx_images(img_path, height=32, width=32)
    with pytest.raises(DataFormatError, match=r"labels span \[0, 3\], expected \[0, 2\)"):
        read_idx_labels(lab_path, num_classes=2)
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "missing")


# ---------------------------------------------------------------------------------- CIFAR


def test_cifar_batch_layout(tmp_path):
    payload, batch = cifar_batch_bytes(6, seed=0)
    path = _corrupt(tmp_path, payload, "data_batch_1")
    images, labels = read_cifar_batch(path)
    assert images.shape == (6, 3, 32, 32) and images.dtype == np.uint8
    # channel planes: the first 1024 values of a row are the red 32 x 32 image, row-major
    np.testing.assert_array_equal(images[2, 0], batch[b"data"][2, :1024].reshape(32, 32))
    np.testing.assert_array_equal(images[2, 2, 5], batch[b"data"][2, 2048 + 160 : 2048 + 192])
    np.testing.assert_array_equal(labels, batch[b"labels"])


def test_cifar100_fine_labels(tmp_path):
    payload, batch = cifar_batch_bytes(4, seed=1, label_key=b"fine_labels")
    images, labels = read_cifar_batch(_corrupt(tmp_path, payload, "train"), num_classes=100)
    np.testing.assert_array_equal(labels, batch[b"fine_labels"])


def test_read_cifar10_folder(tmp_path):
    folder = write_cifar_folder(tmp_path / "cifar-10-batches-py", n=7)
    x_train, y_train = read_cifar10(folder, train=True)
    x_test, y_test = read_cifar10(folder, train=False)
    assert x_train.shape == (35, 3, 32, 32) and y_train.shape == (35,)
    assert x_test.shape == (7, 3, 32, 32) and y_test.shape == (7,)
    os.remove(folder / "data_batch_3")
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        read_cifar10(folder)


def _pickled(obj) -> bytes:
    return pickle.dumps(obj, protocol=2)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x80\x02}q\x00(U\x04data", "not a valid CIFAR python batch"),
        (_pickled([1, 2, 3]), "must be a dict"),
        (_pickled({b"labels": [0]}), "no 'data' entry"),
        (_pickled({b"data": np.zeros((1, 3072), np.uint8)}), "none of the label entries"),
        (_pickled({b"data": np.zeros((1, 100), np.uint8), b"labels": [0]}), r"\(N, 3072\)"),
        (_pickled({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}), "one per image"),
        (_pickled({b"data": np.zeros((1, 3072), np.uint8), b"labels": [10]}), "expected"),
        (_pickled({b"data": np.zeros((1, 3072), np.uint8), b"labels": ["a"]}), "not integers"),
    ],
)
def test_cifar_corrupt_batches(tmp_path, payload, message):
    with pytest.raises(DataFormatError, match=message):
        read_cifar_batch(_corrupt(tmp_path, payload))


def test_cifar_legacy_numpy_module_path(tmp_path):
    """The official batches (pickled under Python 2) name numpy.core.multiarray."""
    payload, batch = cifar_batch_bytes(3, seed=2)
    legacy = payload.replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    assert b"cnumpy.core.multiarray\n" in legacy
    images, labels = read_cifar_batch(_corrupt(tmp_path, legacy))
    np.testing.assert_array_equal(labels, batch[b"labels"])


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_cifar_pickle_cannot_run_code(tmp_path):
    payload = _pickled({b"data": _Evil(), b"labels": [0]})
    with pytest.raises(DataFormatError, match="refusing to load global"):
        read_cifar_batch(_corrupt(tmp_path, payload))


# ----------------------------------------------------------------------------------- LEAF


def test_leaf_single_file_and_directory(tmp_path):
    write_json(tmp_path / "train" / "all_data_0.json", leaf_content(["f0", "f1"], [3, 2], 0))
    write_json(tmp_path / "train" / "all_data_1.json", leaf_content(["f2"], [4], 1))
    one = read_leaf_json(tmp_path / "train" / "all_data_0.json")
    assert one.users == ["f0", "f1"]
    np.testing.assert_array_equal(one.num_samples, [3, 2])
    both = read_leaf_json(tmp_path / "train")
    assert both.users == ["f0", "f1", "f2"]
    x, y = both.arrays("f2")
    assert x.shape == (4, 784) and x.dtype == np.float32 and y.dtype == np.int64
    listed = read_leaf_json([tmp_path / "train" / "all_data_1.json"])
    assert listed.users == ["f2"]
    with pytest.raises(ValueError, match="user = 'nobody'"):
        both.arrays("nobody")


def test_leaf_text_data_kept_as_stored(tmp_path):
    content = {"users": ["u"], "num_samples": [1],
               "user_data": {"u": {"x": [["id", "date", "q", "user", "hello world"]], "y": [1]}}}
    data = read_leaf_json(write_json(tmp_path / "s.json", content))
    assert data.x["u"][0][-1] == "hello world"
    with pytest.raises(DataFormatError, match="not numeric"):
        data.arrays("u")


def _leaf(**changes):
    content = leaf_content(["a", "b"], [2, 1])
    content.update(changes)
    return content


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ([1, 2], "must be an object"),
        ({"users": ["a"]}, "lacks the keys"),
        (_leaf(users=["a", "a"]), "duplicate"),
        (_leaf(num_samples=[2]), "one count per user"),
        (_leaf(num_samples=[2, 5]), "num_samples 5"),
        (_leaf(num_samples=[2, "1"]), "not an integer"),
        (_leaf(user_data={"a": {"x": [1, 2], "y": [0, 0]}}), r"user_data\['b'\] must be"),
        (_leaf(users=["a"], num_samples=[2]), "not in 'users'"),
    ],
)
def test_leaf_corrupt(tmp_path, content, message):
    with pytest.raises(DataFormatError, match=message):
        read_leaf_json(write_json(tmp_path / "bad.json", content))


def test_leaf_invalid_json_and_duplicate_users_across_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"users": [')
    with pytest.raises(DataFormatError, match="not valid LEAF JSON"):
        read_leaf_json(bad)
    write_json(tmp_path / "d" / "a.json", leaf_content(["x"], [1]))
    write_json(tmp_path / "d" / "b.json", leaf_content(["x"], [1]))
    with pytest.raises(DataFormatError, match="also appears in an earlier file"):
        read_leaf_json(tmp_path / "d")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no LEAF"):
        read_leaf_json(tmp_path / "empty")
