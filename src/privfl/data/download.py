"""Download, verify and cache the standard datasets (urllib only, no extra dependencies).

Files go to a cache directory: the ``root`` argument, else the ``PRIVFL_DATA`` environment
variable, else ``~/.cache/privfl``. Every file is checked against its published checksum (the
MD5 sums the dataset authors publish and torchvision also uses); a file already in the cache
with the right checksum is not downloaded again (cache hit), a corrupt one is replaced, and a
download whose checksum does not match is deleted and refused with :class:`ChecksumError`.
A download without a checksum is refused.

Mirrors are tried in order; ``file://`` URLs work, which is how the tests exercise this module
without a network.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from privfl._validation import check_choice
from privfl.data.errors import ChecksumError, DataFormatError

__all__ = [
    "CIFAR10_ARCHIVE",
    "CIFAR10_BATCH_MD5",
    "CIFAR10_FOLDER",
    "CIFAR10_URLS",
    "EMNIST_ARCHIVE",
    "EMNIST_SPLITS",
    "EMNIST_URLS",
    "ENV_VAR",
    "FASHION_MNIST_MIRRORS",
    "FASHION_MNIST_RESOURCES",
    "MNIST_MIRRORS",
    "MNIST_RESOURCES",
    "Resource",
    "data_home",
    "download_cifar10",
    "download_emnist",
    "download_fashion_mnist",
    "download_file",
    "download_mnist",
    "emnist_filenames",
    "file_checksum",
    "verify_file",
]

ENV_VAR = "PRIVFL_DATA"
_CHUNK = 1 << 20

Opener = Callable[..., object]


@dataclass(frozen=True)
class Resource:
    """A file to fetch: its name and at least one published checksum."""

    filename: str
    md5: str | None = None
    sha256: str | None = None


# MNIST: checksums of the files published at yann.lecun.com (also in torchvision.datasets.MNIST).
MNIST_MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
MNIST_RESOURCES = (
    Resource("train-images-idx3-ubyte.gz", md5="f68b3c2dcbeaaa9fbdd348bbdeb94873"),
    Resource("train-labels-idx1-ubyte.gz", md5="d53e105ee54ea40749a09fcbcd1e9432"),
    Resource("t10k-images-idx3-ubyte.gz", md5="9fb629c4189551a2d022fa330f9573f3"),
    Resource("t10k-labels-idx1-ubyte.gz", md5="ec29112dd5afa0611ce80d1b7f02629c"),
)

# Fashion-MNIST: checksums from zalandoresearch/fashion-mnist's README. (The Debian package
# dataset-fashion-mnist recompresses the files, so its .gz files have other checksums but the
# same content; the offline loader checks their IDX structure instead.)
FASHION_MNIST_MIRRORS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
FASHION_MNIST_RESOURCES = (
    Resource("train-images-idx3-ubyte.gz", md5="8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
    Resource("train-labels-idx1-ubyte.gz", md5="25c81989df183df01b3e8a0aad5dffbe"),
    Resource("t10k-images-idx3-ubyte.gz", md5="bef4ecab320f06d8554ea6380940ec79"),
    Resource("t10k-labels-idx1-ubyte.gz", md5="bb300cfdad3c16e7a12a480ee83cd310"),
)

# EMNIST: NIST's gzip.zip (all six splits as IDX .gz files), ~535 MiB.
EMNIST_URLS = ("https://biometrics.nist.gov/cs_links/EMNIST/gzip.zip",)
EMNIST_ARCHIVE = Resource("gzip.zip", md5="58c8d27c78d21e728a6bc7b3cc06412e")
EMNIST_SPLITS = ("byclass", "bymerge", "balanced", "letters", "digits", "mnist")

# CIFAR-10 python version (Krizhevsky's page), archive and per-batch checksums.
CIFAR10_URLS = ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",)
CIFAR10_ARCHIVE = Resource("cifar-10-python.tar.gz", md5="c58f30108f718f92721af3b95e74349a")
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_BATCH_MD5 = {
    "data_batch_1": "c99cafc152244af753f735de768cd75f",
    "data_batch_2": "d4bba439e000b95fd0a9bffe97cbabec",
    "data_batch_3": "54ebc095f3ab1f0389bbae665268c751",
    "data_batch_4": "634d18415352ddfa80567beed471001a",
    "data_batch_5": "482c414d41f54cd18b22e5b47cb7c3cb",
    "test_batch": "40351d587109b95175f43aff81a1287e",
    "batches.meta": "5ff9c542aee3614f3951f8cda6e48888",
}


def data_home(root: str | os.PathLike | None = None) -> Path:
    """The cache directory: ``root``, else ``$PRIVFL_DATA``, else ``~/.cache/privfl``."""
    if root is not None:
        return Path(root).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "privfl"


def file_checksum(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """Hex digest of a file (``md5`` or ``sha256``), read in 1 MiB chunks."""
    algorithm = check_choice("algorithm", algorithm, ["md5", "sha256"])
    digest = hashlib.new(algorithm, usedforsecurity=False)
    with Path(path).open("rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _expected(md5: str | None, sha256: str | None) -> list[tuple[str, str]]:
    checks = [(a, v.lower()) for a, v in (("md5", md5), ("sha256", sha256)) if v]
    if not checks:
        raise ValueError("md5 = None and sha256 = None: a checksum is required to download")
    return checks


def verify_file(
    path: str | os.PathLike, *, md5: str | None = None, sha256: str | None = None
) -> Path:
    """Check a file against its MD5 and/or SHA-256; raise :class:`ChecksumError` if it differs."""
    path = Path(path)
    for algorithm, expected in _expected(md5, sha256):
        actual = file_checksum(path, algorithm)
        if actual != expected:
            raise ChecksumError(
                f"{path}: {algorithm} checksum {actual} does not match the published "
                f"{expected}; the file is corrupt or not the official one"
            )
    return path


def _default_opener(url: str, timeout: float):
    request = urllib.request.Request(url, headers={"User-Agent": "privfl-data/1"})
    return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - http(s)/file only


def _fetch(url: str, dest: Path, opener: Opener, timeout: float,
           checks: list[tuple[str, str]]) -> Path:
    """Stream ``url`` into a temporary file next to ``dest``, verify, then move into place."""
    digests = {a: hashlib.new(a, usedforsecurity=False) for a, _ in checks}
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, opener(url, timeout) as response:
            while True:
                chunk = response.read(_CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                for digest in digests.values():
                    digest.update(chunk)
        for algorithm, expected in checks:
            actual = digests[algorithm].hexdigest()
            if actual != expected:
                raise ChecksumError(
                    f"{url}: downloaded file has {algorithm} {actual}, expected {expected}; "
                    "refused and deleted (corrupt download or a changed file on the mirror)"
                )
        os.replace(tmp, dest)
        return dest
    finally:
        if tmp.exists():
            tmp.unlink()


def download_file(
    urls: str | Sequence[str],
    dest: str | os.PathLike,
    *,
    md5: str | None = None,
    sha256: str | None = None,
    opener: Opener | None = None,
    timeout: float = 60.0,
) -> Path:
    """Fetch ``dest`` from the first working URL in ``urls`` and verify its checksum.

    A ``dest`` that already exists with the right checksum is returned without any network
    access. One with a wrong checksum is replaced by a fresh download.

    Parameters
    ----------
    urls
        One URL or mirrors to try in order (``http``, ``https`` or ``file``).
    dest
        Where the file goes; parent directories are created.
    md5, sha256
        Published checksums; at least one is required.
    opener
        ``opener(url, timeout)`` returning a readable binary context manager; defaults to
        ``urllib.request.urlopen``. Tests substitute it to run without a network.

    Raises
    ------
    ChecksumError
        The downloaded file does not match (it is deleted).
    OSError
        No mirror could be reached; the message lists the URLs tried and where to put the file
        by hand.
    """
    checks = _expected(md5, sha256)
    dest = Path(dest)
    urls = [urls] if isinstance(urls, str) else list(urls)
    if not urls:
        raise ValueError("urls = [] is not allowed: must give at least one URL")
    if dest.is_file():
        try:
            return verify_file(dest, md5=md5, sha256=sha256)
        except ChecksumError:
            dest.unlink()  # corrupt cache entry: fetch again
    dest.parent.mkdir(parents=True, exist_ok=True)
    opener = opener or _default_opener
    errors = []
    for url in urls:
        try:
            return _fetch(url, dest, opener, timeout, checks)
        except (urllib.error.URLError, OSError, ValueError) as error:  # incl. ChecksumError
            errors.append(error)
    tried = "\n  ".join(f"{u}: {e}" for u, e in zip(urls, errors, strict=True))
    if any(isinstance(e, ChecksumError) for e in errors):
        raise ChecksumError(
            f"refused {dest.name}: no mirror served the published file:\n  {tried}"
        )
    raise OSError(
        f"could not download {dest.name}; tried:\n  {tried}\n"
        f"Without internet, copy the file to {dest} (it is checked against "
        f"{', '.join(f'{a} {v}' for a, v in checks)})."
    )


def _join(base: str, name: str) -> str:
    return base if base.endswith(name) else base.rstrip("/") + "/" + name


def _download_set(
    folder: Path, mirrors: Sequence[str], resources: Iterable[Resource],
    opener: Opener | None, timeout: float,
) -> Path:
    for res in resources:
        download_file([_join(m, res.filename) for m in mirrors], folder / res.filename,
                      md5=res.md5, sha256=res.sha256, opener=opener, timeout=timeout)
    return folder


def download_mnist(
    root: str | os.PathLike | None = None,
    *,
    mirrors: Sequence[str] = MNIST_MIRRORS,
    resources: Sequence[Resource] = MNIST_RESOURCES,
    opener: Opener | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download the four MNIST IDX .gz files into ``<data_home>/mnist``; returns that folder."""
    return _download_set(data_home(root) / "mnist", mirrors, resources, opener, timeout)


def download_fashion_mnist(
    root: str | os.PathLike | None = None,
    *,
    mirrors: Sequence[str] = FASHION_MNIST_MIRRORS,
    resources: Sequence[Resource] = FASHION_MNIST_RESOURCES,
    opener: Opener | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download Fashion-MNIST into ``<data_home>/fashion-mnist``; returns that folder."""
    return _download_set(data_home(root) / "fashion-mnist", mirrors, resources, opener, timeout)


def emnist_filenames(split: str) -> list[str]:
    """The four IDX .gz names of an EMNIST split, e.g. ``emnist-byclass-train-images-...``."""
    split = check_choice("split", split, EMNIST_SPLITS)
    return [
        f"emnist-{split}-{part}-{kind}-ubyte.gz"
        for part in ("train", "test")
        for kind in ("images-idx3", "labels-idx1")
    ]


def download_emnist(
    split: str = "byclass",
    root: str | os.PathLike | None = None,
    *,
    urls: Sequence[str] = EMNIST_URLS,
    archive: Resource = EMNIST_ARCHIVE,
    opener: Opener | None = None,
    keep_archive: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download NIST's EMNIST ``gzip.zip`` and extract one split into ``<data_home>/emnist``.

    The archive's MD5 is verified before anything is extracted. With ``keep_archive`` the zip
    stays in the cache so other splits can be extracted without downloading again.
    """
    names = emnist_filenames(split)
    folder = data_home(root) / "emnist"
    if all((folder / n).is_file() for n in names):
        return folder
    zip_path = download_file(list(urls), folder / archive.filename, md5=archive.md5,
                             sha256=archive.sha256, opener=opener, timeout=timeout)
    try:
        with zipfile.ZipFile(zip_path) as bundle:
            members = {PurePosixPath(m).name: m for m in bundle.namelist()}
            missing = [n for n in names if n not in members]
            if missing:
                raise DataFormatError(f"{zip_path}: archive lacks {missing}")
            for name in names:  # extract to a temporary name, then move: never half a file
                part = folder / f".{name}.part"
                with bundle.open(members[name]) as src, part.open("wb") as out:
                    shutil.copyfileobj(src, out, _CHUNK)
                os.replace(part, folder / name)
    except zipfile.BadZipFile as error:
        raise DataFormatError(f"{zip_path}: not a valid zip archive ({error})") from error
    if not keep_archive:
        zip_path.unlink()
    return folder


def _safe_members(bundle: tarfile.TarFile, prefix: str) -> list[tarfile.TarInfo]:
    members = []
    for member in bundle.getmembers():
        path = PurePosixPath(member.name)
        if path.is_absolute() or ".." in path.parts:
            raise DataFormatError(f"unsafe path {member.name!r} in archive")
        if path.parts and path.parts[0] == prefix and (member.isfile() or member.isdir()):
            members.append(member)
    return members


def download_cifar10(
    root: str | os.PathLike | None = None,
    *,
    urls: Sequence[str] = CIFAR10_URLS,
    archive: Resource = CIFAR10_ARCHIVE,
    batch_md5: Mapping[str, str] | None = CIFAR10_BATCH_MD5,
    opener: Opener | None = None,
    keep_archive: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download and extract CIFAR-10 (python version); returns ``.../cifar-10-batches-py``.

    The archive's MD5 is checked before extraction and each extracted batch is checked against
    ``batch_md5`` (the published per-file sums). If the extracted batches are already in the
    cache and verify, nothing is downloaded.
    """
    base = data_home(root) / "cifar10"
    folder = base / CIFAR10_FOLDER
    names = list(batch_md5) if batch_md5 else [
        *(f"data_batch_{i}" for i in range(1, 6)), "test_batch"
    ]

    def verified() -> bool:
        if not all((folder / n).is_file() for n in names):
            return False
        for name, digest in (batch_md5 or {}).items():
            verify_file(folder / name, md5=digest)
        return True

    try:
        if verified():
            return folder
    except ChecksumError:
        pass  # corrupt extracted copy: extract again from a verified archive
    tar_path = download_file(list(urls), base / archive.filename, md5=archive.md5,
                             sha256=archive.sha256, opener=opener, timeout=timeout)
    try:
        with tarfile.open(tar_path, "r:gz") as bundle:
            members = _safe_members(bundle, CIFAR10_FOLDER)
            if hasattr(tarfile, "data_filter"):
                bundle.extractall(base, members=members, filter="data")
            else:  # pragma: no cover - Python without tar extraction filters
                bundle.extractall(base, members=members)
    except tarfile.TarError as error:
        raise DataFormatError(f"{tar_path}: not a valid tar.gz archive ({error})") from error
    if not verified():
        raise DataFormatError(f"{tar_path}: archive lacks some of {names}")
    if not keep_archive:
        tar_path.unlink()
    return folder
