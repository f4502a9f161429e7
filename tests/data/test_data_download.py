"""Download + verify + cache, exercised with file:// URLs and fake openers (no network)."""

from __future__ import annotations

import hashlib
import io
import urllib.error
from pathlib import Path

import numpy as np
import pytest
from _datafiles import make_cifar_tarball, make_emnist_zip, md5, write_mnist_folder

from privfl.data import (
    ChecksumError,
    DatasetNotFoundError,
    data_home,
    download_cifar10,
    download_emnist,
    download_file,
    download_mnist,
    file_checksum,
    load_cifar10,
    load_emnist,
    load_mnist,
    verify_file,
)
from privfl.data.download import CIFAR10_BATCH_MD5, MNIST_RESOURCES, Resource


def _source(tmp_path: Path, content: bytes = b"official bytes\n" * 100) -> Path:
    path = tmp_path / "mirror" / "file.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".part"))


def test_data_home_precedence(tmp_path, monkeypatch):
    assert data_home(tmp_path / "x") == tmp_path / "x"
    monkeypatch.setenv("PRIVFL_DATA", str(tmp_path / "env"))
    assert data_home() == tmp_path / "env"
    monkeypatch.delenv("PRIVFL_DATA")
    assert data_home() == Path.home() / ".cache" / "privfl"


def test_published_checksums_are_well_formed():
    for res in MNIST_RESOURCES:
        assert len(res.md5) == 32 and int(res.md5, 16) >= 0
    assert set(CIFAR10_BATCH_MD5) == {*(f"data_batch_{i}" for i in range(1, 6)),
                                      "test_batch", "batches.meta"}


def test_download_verify_and_cache_hit(tmp_path, no_network):
    src = _source(tmp_path)
    dest = tmp_path / "cache" / "file.bin"
    digest = md5(src)
    sha = hashlib.sha256(src.read_bytes()).hexdigest()
    assert download_file(src.as_uri(), dest, md5=digest, sha256=sha) == dest
    assert dest.read_bytes() == src.read_bytes()
    assert file_checksum(dest, "md5") == digest and file_checksum(dest) == sha
    # second call: the verified cached file is used, no opener is called
    assert download_file("https://unreachable.invalid/file.bin", dest, md5=digest,
                         opener=no_network) == dest
    assert _leftovers(dest.parent) == []


def test_checksum_mismatch_refused_and_deleted(tmp_path):
    src = _source(tmp_path)
    dest = tmp_path / "cache" / "file.bin"
    with pytest.raises(ChecksumError, match="refused") as info:
        download_file(src.as_uri(), dest, md5="0" * 32)
    assert "md5" in str(info.value)
    assert not dest.exists() and _leftovers(dest.parent) == []
    with pytest.raises(ChecksumError):
        download_file(src.as_uri(), dest, sha256="f" * 64)
    assert not dest.exists()


def test_corrupt_cache_is_replaced(tmp_path):
    src = _source(tmp_path)
    dest = tmp_path / "cache" / "file.bin"
    dest.parent.mkdir(parents=True)
    dest.write_bytes(b"tampered")
    download_file(src.as_uri(), dest, md5=md5(src))
    assert dest.read_bytes() == src.read_bytes()
    dest.write_bytes(b"tampered")
    with pytest.raises(ChecksumError, match="does not match the published"):
        verify_file(dest, md5=md5(src))


def test_checksum_required_and_urls_required(tmp_path):
    with pytest.raises(ValueError, match="checksum is required"):
        download_file("file:///x", tmp_path / "x")
    with pytest.raises(ValueError, match="urls = \\[\\]"):
        download_file([], tmp_path / "x", md5="0" * 32)


def test_mirrors_tried_in_order_with_fake_opener(tmp_path):
    payload = b"payload" * 1000
    calls = []

    def opener(url, timeout):
        calls.append(url)
        if "bad-mirror" in url:
            raise urllib.error.URLError("connection refused")
        return io.BytesIO(payload)

    dest = tmp_path / "c" / "f"
    got = download_file(["http://bad-mirror/f", "http://good-mirror/f"], dest,
                        md5=hashlib.md5(payload).hexdigest(), opener=opener)
    assert got.read_bytes() == payload
    assert calls == ["http://bad-mirror/f", "http://good-mirror/f"]


def test_unreachable_mirrors_say_how_to_proceed(tmp_path):
    def opener(url, timeout):
        raise urllib.error.URLError("no network")

    dest = tmp_path / "c" / "train-images-idx3-ubyte.gz"
    with pytest.raises(OSError, match="could not download") as info:
        download_file(["http://a/x", "http://b/x"], dest, md5="1" * 32, opener=opener)
    text = str(info.value)
    assert "http://a/x" in text and "http://b/x" in text and str(dest) in text


def test_download_mnist_then_load(tmp_path, no_network):
    mirror = tmp_path / "mirror"
    write_mnist_folder(mirror, n_train=30, n_test=10)
    resources = [Resource(p.name, md5=md5(p)) for p in sorted(mirror.iterdir())]
    root = tmp_path / "root"
    folder = download_mnist(root, mirrors=[mirror.as_uri() + "/"], resources=resources)
    assert folder == root / "mnist"
    train, test = load_mnist(root)
    assert train.x.shape == (30, 1, 28, 28) and test.x.shape == (10, 1, 28, 28)
    assert train.mean == (0.1307,) and train.std == (0.3081,)
    assert train.x.min() >= 0.0 and train.x.max() <= 1.0
    # cache hit: nothing fetched again
    download_mnist(root, mirrors=["http://nowhere/"], resources=resources, opener=no_network)


def test_load_mnist_missing_says_how_to_get_it(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="download_mnist") as info:
        load_mnist(tmp_path / "empty")
    assert "load_mnist_5k" in str(info.value)


def test_download_cifar10_then_load(tmp_path, no_network):
    archive, checks = make_cifar_tarball(tmp_path)
    root = tmp_path / "root"
    resource = Resource(archive.name, md5=md5(archive))
    folder = download_cifar10(root, urls=[archive.as_uri()], archive=resource, batch_md5=checks)
    assert folder.name == "cifar-10-batches-py" and (folder / "test_batch").is_file()
    train, test = load_cifar10(root)
    assert train.x.shape == (40, 3, 32, 32) and test.x.shape == (8, 3, 32, 32)
    assert train.classes[2] == "bird"
    normalized, _ = load_cifar10(root, normalize=True)
    assert normalized.normalized and abs(float(normalized.x.mean())) < 1.0
    # extracted copy verifies: no download
    download_cifar10(root, urls=["http://x/"], archive=resource, batch_md5=checks,
                     opener=no_network)
    # a corrupted extracted batch is re-extracted from the verified cached archive
    (folder / "data_batch_2").write_bytes(b"junk")
    download_cifar10(root, urls=["http://x/"], archive=resource, batch_md5=checks,
                     opener=no_network)
    assert md5(folder / "data_batch_2") == checks["data_batch_2"]


def test_download_cifar10_archive_checksum_refused(tmp_path):
    archive, checks = make_cifar_tarball(tmp_path)
    with pytest.raises(ChecksumError):
        download_cifar10(tmp_path / "r", urls=[archive.as_uri()],
                         archive=Resource(archive.name, md5="a" * 32), batch_md5=checks)
    assert not (tmp_path / "r" / "cifar10" / "cifar-10-batches-py").exists()


def test_load_cifar10_missing(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="download_cifar10"):
        load_cifar10(tmp_path)


def test_download_emnist_then_load(tmp_path, no_network):
    archive, images = make_emnist_zip(tmp_path)
    root = tmp_path / "root"
    resource = Resource("gzip.zip", md5=md5(archive))
    download_emnist("byclass", root, urls=[archive.as_uri()], archive=resource)
    train, test = load_emnist("byclass", root)
    assert train.num_classes == 62 and train.x.shape == (30, 1, 28, 28)
    assert train.classes[10] == "A" and train.classes[36] == "a"
    # NIST stores EMNIST transposed: the loader turns the images upright by default
    np.testing.assert_allclose(train.x[0, 0], images[0].T / 255.0, atol=1e-6)
    raw, _ = load_emnist("byclass", root, transpose=False)
    np.testing.assert_allclose(raw.x[0, 0], images[0] / 255.0, atol=1e-6)
    download_emnist("byclass", root, urls=["http://x/"], archive=resource, opener=no_network)
    with pytest.raises(DatasetNotFoundError, match="download_emnist\\('digits'\\)"):
        load_emnist("digits", root)
    with pytest.raises(ValueError, match="split = 'bogus' is not allowed"):
        load_emnist("bogus", root)


def test_emnist_letters_labels_shifted(tmp_path):
    archive, _ = make_emnist_zip(tmp_path, split="letters", num_classes=26, offset=1)
    root = tmp_path / "root"
    download_emnist("letters", root, urls=[archive.as_uri()],
                    archive=Resource("gzip.zip", md5=md5(archive)))
    train, _ = load_emnist("letters", root)  # NIST labels 1..26 become 0..25
    assert train.num_classes == 26 and train.y.min() == 0 and train.y.max() == 25
    assert train.classes[0] == "a"


def test_emnist_bad_letters_labels_refused(tmp_path):
    archive, _ = make_emnist_zip(tmp_path, split="letters", num_classes=27)
    root = tmp_path / "root"
    download_emnist("letters", root, urls=[archive.as_uri()],
                    archive=Resource("gzip.zip", md5=md5(archive)))
    with pytest.raises(ValueError, match="after offset 1"):
        load_emnist("letters", root)
