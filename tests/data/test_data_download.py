"""Download + verify + cache, exercised with file:// URLs and fake openers (no network)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import socket
import threading
import urllib.error
from pathlib import Path

import numpy as np
import pytest
from _datafiles import make_cifar_tarball, make_emnist_zip, md5, write_mnist_folder

import privfl.data.download as download_module
from privfl.data import (
    ChecksumError,
    DatasetNotFoundError,
    DownloadError,
    check_published,
    data_home,
    download_cifar10,
    download_emnist,
    download_file,
    download_mnist,
    file_checksum,
    load_cifar10,
    load_emnist,
    load_fashion_mnist,
    load_mnist,
    sources,
    verify_file,
)
from privfl.data.download import (
    CIFAR10_BATCH_MD5,
    FASHION_MNIST_RESOURCES,
    MNIST_RESOURCES,
    Resource,
)


def _source(tmp_path: Path, content: bytes = b"official bytes\n" * 100) -> Path:
    path = tmp_path / "mirror" / "file.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def _leftovers(folder: Path, keep: str) -> list[str]:
    """Files in ``folder`` other than ``keep`` (pooch's temporary files, half downloads)."""
    return sorted(p.name for p in folder.iterdir() if p.name != keep)


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
    assert _leftovers(dest.parent, dest.name) == []


def test_checksum_mismatch_refused_and_deleted(tmp_path):
    src = _source(tmp_path)
    dest = tmp_path / "cache" / "file.bin"
    with pytest.raises(ChecksumError, match="refused") as info:
        download_file(src.as_uri(), dest, md5="0" * 32)
    assert "md5" in str(info.value)
    assert not dest.parent.exists()  # refused, deleted, and no empty cache directory left
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
    # the files carry MNIST's published names but are not the published files
    with pytest.raises(ChecksumError, match="is not the published f68b3c2dcbeaaa9fbdd348bbdeb94873 "
                                            "of MNIST's train-images-idx3-ubyte.gz"):
        load_mnist(root)
    train, test = load_mnist(root, verify=False)
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
    with pytest.raises(ChecksumError, match="data_batch_1: md5 .* is not the published "
                                            "c99cafc152244af753f735de768cd75f of CIFAR-10's"):
        load_cifar10(root)
    train, test = load_cifar10(root, verify=False)
    assert train.x.shape == (40, 3, 32, 32) and test.x.shape == (8, 3, 32, 32)
    assert train.classes[2] == "bird"
    normalized, _ = load_cifar10(root, normalize=True, verify=False)
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
    train, test = load_emnist("byclass", root)  # no published per-file checksums
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


# ------------------------------------------------------------------ pooch, offline, on disk


@pytest.fixture
def no_proxy(monkeypatch):
    """Requests to 127.0.0.1 must not go through a proxy from the environment."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def http_server(tmp_path, no_proxy):
    """A local HTTP server (the standard library's) serving ``tmp_path / "site"``."""
    site = tmp_path / "site"
    site.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield site, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


def test_offline_download_is_one_line_and_leaves_no_cache_directory(tmp_path, no_proxy,
                                                                     monkeypatch):
    cache = tmp_path / "fresh" / "privfl"
    monkeypatch.setenv("PRIVFL_DATA", str(cache))
    mirror = f"http://127.0.0.1:{_closed_port()}/"  # refused at once, as without a network
    monkeypatch.setattr(sources, "download_mnist",
                        functools.partial(download_mnist, mirrors=[mirror]))
    with pytest.raises(OSError) as info:
        load_mnist(download=True)
    message = str(info.value)
    assert isinstance(info.value, DownloadError) and "\n" not in message
    assert message.startswith(
        f"could not download MNIST: train-images-idx3-ubyte.gz from {mirror}"
        "train-images-idx3-ubyte.gz (ConnectionError: ")
    assert message.endswith(
        "; without internet, copy train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
        "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz (the published files: they are "
        f"checked against their MD5 sums) into {cache / 'mnist'}")
    assert not (tmp_path / "fresh").exists()  # nothing created, nothing left behind


@pytest.mark.parametrize(("download", "dataset", "archive"), [
    (download_cifar10, "CIFAR-10", "cifar10/cifar-10-python.tar.gz"),
    (lambda root, **kw: download_emnist("digits", root, **kw), "EMNIST", "emnist/gzip.zip"),
])
def test_offline_archive_downloads_name_the_dataset_and_the_file(tmp_path, download, dataset,
                                                                 archive):
    def offline(url, timeout):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    root = tmp_path / "root"
    with pytest.raises(DownloadError) as info:
        download(root, urls=["https://example.invalid/x"], opener=offline)
    assert str(info.value).startswith(
        f"could not download {dataset} file {archive.split('/')[1]} from "
        "https://example.invalid/x (URLError: <urlopen error [Errno -3] Temporary failure in "
        f"name resolution>); without internet, copy the file to {root / archive} (it is "
        "checked against md5 ")
    assert not root.exists()


def test_http_download_through_pooch_with_progress_and_cache(http_server, tmp_path,
                                                            monkeypatch):
    site, base = http_server
    payload = bytes(range(256)) * 4096  # 1 MiB
    (site / "data.bin").write_bytes(payload)
    md5_, sha = hashlib.md5(payload).hexdigest(), hashlib.sha256(payload).hexdigest()
    dest = tmp_path / "cache" / "sub" / "data.bin"
    bars = []

    class Recorded(download_module._Progress):
        def __init__(self, label):
            super().__init__(label)
            bars.append(self)
            self.seen = []

        def update(self, count):
            self.seen.append((self.total, count))
            super().update(count)

    monkeypatch.setattr(download_module, "_Progress", Recorded)
    assert download_file(f"{base}/data.bin", dest, md5=md5_, sha256=sha, progress=True) == dest
    assert dest.read_bytes() == payload and _leftovers(dest.parent, dest.name) == []
    # pooch drove the bar: total from Content-Length, filled to it at the end, then closed
    assert len(bars) == 1 and bars[0].label == "data.bin" and bars[0]._bar is None
    assert bars[0].seen[0][0] == len(payload) and bars[0].seen[-1] == (len(payload), len(payload))
    (site / "data.bin").write_bytes(b"changed on the mirror")
    assert download_file(f"{base}/data.bin", dest, md5=md5_) == dest  # cache hit
    assert dest.read_bytes() == payload
    dest.write_bytes(b"corrupt")  # a corrupt cache entry is downloaded again, and refused here
    with pytest.raises(ChecksumError) as info:
        download_file([f"{base}/missing.bin", f"{base}/data.bin"], dest, md5=md5_)
    text = str(info.value)
    assert text.startswith(f"refused data.bin: no mirror served the published file: {base}"
                           "/data.bin: MD5 hash of downloaded file (data.bin) does not match")
    assert "\n" not in text and _leftovers(dest.parent, dest.name) == []
    with pytest.raises(ValueError, match=r"timeout = 0.0 is out of range"):
        download_file(f"{base}/data.bin", dest, md5=md5_, timeout=0)


def test_files_on_disk_are_checked_against_the_published_checksums(tmp_path):
    write_mnist_folder(tmp_path / "fashion-mnist", n_train=20, n_test=10)  # published names
    with pytest.raises(ChecksumError) as info:
        load_fashion_mnist(tmp_path)
    assert str(info.value) == (
        f"{tmp_path / 'fashion-mnist' / 'train-images-idx3-ubyte.gz'}: md5 "
        f"{md5(tmp_path / 'fashion-mnist' / 'train-images-idx3-ubyte.gz')} is not the published "
        "8d4fb7e6c68d591d4c3dfef9ec88bf0d of Fashion-MNIST's train-images-idx3-ubyte.gz: the "
        "file is corrupt or not the official one; delete it and download it again, or, if it is "
        "a recompressed copy of the official data, gunzip it (uncompressed IDX files are "
        "checked for their structure only) or load it with verify=False")
    train, _ = load_fashion_mnist(tmp_path, verify=False)
    assert len(train) == 20
    folder = tmp_path / "fashion-mnist"
    accepted = {p.name: {md5(p)} for p in folder.iterdir()}
    assert len(check_published(folder, FASHION_MNIST_RESOURCES, dataset="x",
                               alternatives=accepted)) == 4
    assert check_published(tmp_path / "nothing-here", MNIST_RESOURCES, dataset="MNIST") == []


def test_debian_record_is_read_and_its_files_verify(tmp_path):
    record = tmp_path / "pkg.md5sums"
    record.write_text("0d30e22e447f3c33dab9ed536400ac01  usr/share/datasets/fashion-mnist/"
                      "t10k-labels-idx1-ubyte.gz\nnot a line\n")
    assert sources._debian_md5(record) == {
        "t10k-labels-idx1-ubyte.gz": {"0d30e22e447f3c33dab9ed536400ac01"}}
    assert sources._debian_md5(tmp_path / "absent") == {}
    real = sources.FASHION_MNIST_DEBIAN_MD5SUMS
    system = sources.FASHION_MNIST_SYSTEM_DIR
    if not real.is_file() or not system.is_dir():
        pytest.skip("the Debian package dataset-fashion-mnist is not installed")
    checked = check_published(system, FASHION_MNIST_RESOURCES, dataset="Fashion-MNIST",
                              alternatives=sources._debian_md5(real))
    assert len(checked) == 4
    # Debian recompressed the files: Zalando's published sums do not match them
    with pytest.raises(ChecksumError, match="not the published 8d4fb7e6c68d591d4c3dfef9ec88bf0d"):
        check_published(system, FASHION_MNIST_RESOURCES, dataset="Fashion-MNIST")
