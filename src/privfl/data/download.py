"""Download, verify and cache the standard datasets, with pooch (Uieda et al. 2020).

Files go to a cache directory: the ``root`` argument, else the ``PRIVFL_DATA`` environment
variable, else ``~/.cache/privfl``. Every file is checked against its published checksum (the
MD5 sums the dataset authors publish and torchvision also uses): pooch fetches it under a
temporary name beside its destination and moves it into place only when the checksum matches.
A file already in the cache with the right checksum is not downloaded again (cache hit), a
corrupt one is replaced by a fresh download, a download whose checksum does not match is deleted
and refused with :class:`ChecksumError`, and a download without a checksum is refused. A progress
bar is drawn on standard error when it is a terminal.

Mirrors are tried in order. ``http(s)`` and ``ftp`` URLs go through pooch's downloaders;
``file://`` URLs and a caller's ``opener`` (how the tests run without a network) through a small
pooch downloader that copies a stream. When every mirror fails, :class:`DownloadError` (an
``OSError``) says in one line which dataset, what each mirror answered and where to copy the
files by hand; directories created for the download are removed again if they stay empty.

Data already on disk: :func:`check_published` checks the files that carry a published file name
against the published checksums (the loaders call it before reading).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pooch

from privfl._validation import check_choice, check_positive
from privfl.data.errors import ChecksumError, DataFormatError, DownloadError

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
    "check_published",
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
    """Hex digest of a file (``md5`` or ``sha256``; pooch reads it in chunks)."""
    algorithm = check_choice("algorithm", algorithm, ["md5", "sha256"])
    return pooch.file_hash(str(path), alg=algorithm)


def _expected(md5: str | None, sha256: str | None) -> list[tuple[str, str]]:
    """``[(algorithm, hex digest)]``, strongest first; at least one is required."""
    checks = [(a, v.lower()) for a, v in (("sha256", sha256), ("md5", md5)) if v]
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
    return urllib.request.urlopen(request, timeout=timeout)  # noqa: S310 - file:// here


class _StreamDownloader:
    """A pooch downloader that copies ``opener(url, timeout)``'s stream into the file."""

    def __init__(self, opener: Opener, timeout: float) -> None:
        self.opener, self.timeout = opener, timeout

    def __call__(self, url: str, output_file: str, pooch_: object, check_only: bool = False):
        with self.opener(url, self.timeout) as response, open(output_file, "wb") as out:
            shutil.copyfileobj(response, out, _CHUNK)


class _Progress:
    """The progress object pooch's HTTP downloader drives (``total``, ``update``, ``reset``,
    ``close``), drawn with rich on standard error from the moment a download starts (a cache
    hit draws nothing)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._bar = None

    @property
    def total(self) -> float | None:
        return self._bar.tasks[0].total if self._bar is not None else None

    @total.setter
    def total(self, value: int) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

            self._bar = Progress(TextColumn(self.label), BarColumn(), DownloadColumn(),
                                 console=Console(stderr=True), transient=True)
            self._bar.add_task(self.label, total=None)
            self._bar.start()
        self._bar.update(self._bar.task_ids[0], total=value or None)

    def update(self, count: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._bar.task_ids[0], count)

    def reset(self) -> None:
        if self._bar is not None:
            self._bar.reset(self._bar.task_ids[0])

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _downloader(url: str, opener: Opener | None, timeout: float, progress: _Progress | None):
    scheme = urllib.parse.urlsplit(url).scheme
    if opener is None and scheme in ("http", "https"):
        return pooch.HTTPDownloader(progressbar=progress or False, timeout=timeout,
                                    headers={"User-Agent": "privfl-data/1"})
    if opener is None and scheme == "ftp":
        return pooch.FTPDownloader(progressbar=progress or False, timeout=timeout)
    return _StreamDownloader(opener or _default_opener, timeout)


@contextlib.contextmanager
def _quiet_pooch() -> Iterator[None]:
    """Silence pooch's "Downloading ..." log lines: errors are reported in one line by privfl,
    progress by the bar."""
    logger = pooch.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _new_dirs(folder: Path) -> list[Path]:
    """``folder`` and those of its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _remove_if_empty(folders: Iterable[Path]) -> None:
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (another file arrived) or already gone
            return


def _brief(error: BaseException) -> str:
    """``"ConnectionError: Failed to resolve 'host' (...)"``: the error's type and the first
    line of its innermost reason (requests wraps urllib3's), at most 120 characters."""
    reason = getattr(error.args[0], "reason", None) if error.args else None
    cause = reason if isinstance(reason, BaseException) else error
    text = str(cause).splitlines()[0] if str(cause) else ""
    text = re.sub(r"^(<[^>]*>|\w+\([^)]*\)): ", "", text)  # urllib3's connection repr
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _retrieve(url: str, dest: Path, checks: list[tuple[str, str]], opener: Opener | None,
              timeout: float, progress: bool) -> None:
    """One mirror: pooch checks the strongest checksum before moving the file into place, the
    other one (if any) is checked here."""
    (algorithm, expected), *others = checks
    bar = _Progress(dest.name) if progress and urllib.parse.urlsplit(url).scheme in (
        "http", "https", "ftp") and opener is None else None
    try:
        with _quiet_pooch():
            pooch.retrieve(url, known_hash=f"{algorithm}:{expected}", fname=dest.name,
                           path=dest.parent, downloader=_downloader(url, opener, timeout, bar))
    except ValueError as error:
        if "hash" not in str(error):
            raise
        raise ChecksumError(
            f"{url}: {str(error).split('. Deleted')[0]}; refused and deleted (corrupt download "
            "or a changed file on the mirror)"
        ) from None
    finally:
        if bar is not None:
            bar.close()
    for algorithm, expected in others:
        actual = file_checksum(dest, algorithm)
        if actual != expected:
            dest.unlink()
            raise ChecksumError(
                f"{url}: downloaded file has {algorithm} {actual}, expected {expected}; refused "
                "and deleted (corrupt download or a changed file on the mirror)"
            )


def download_file(
    urls: str | Sequence[str],
    dest: str | os.PathLike,
    *,
    md5: str | None = None,
    sha256: str | None = None,
    opener: Opener | None = None,
    timeout: float = 60.0,
    dataset: str | None = None,
    progress: bool | None = None,
) -> Path:
    """Fetch ``dest`` from the first working URL in ``urls`` and verify its checksum (pooch).

    A ``dest`` that already exists with the right checksum is returned without any network
    access. One with a wrong checksum is replaced by a fresh download.

    Parameters
    ----------
    urls
        One URL or mirrors to try in order (``http``, ``https``, ``ftp`` or ``file``).
    dest
        Where the file goes; parent directories are created (and removed again if the download
        fails and they stay empty).
    md5, sha256
        Published checksums; at least one is required.
    opener
        ``opener(url, timeout)`` returning a readable binary context manager, used instead of
        pooch's downloaders; tests substitute it to run without a network.
    timeout
        Seconds to wait for a server.
    dataset
        The dataset's name for error messages (e.g. ``"MNIST"``).
    progress
        Draw a progress bar on standard error; by default when standard error is a terminal.

    Raises
    ------
    ChecksumError
        No mirror served a file with the published checksum (downloads are deleted).
    DownloadError
        No mirror could be reached; the one-line message lists what each URL answered and
        where to put the file by hand.
    """
    checks = _expected(md5, sha256)
    dest = Path(dest)
    urls = [urls] if isinstance(urls, str) else list(urls)
    if not urls:
        raise ValueError("urls = [] is not allowed: must give at least one URL")
    timeout = check_positive("timeout", timeout)
    progress = sys.stderr.isatty() if progress is None else bool(progress)
    created = _new_dirs(dest.parent)
    errors: list[BaseException] = []
    for url in urls:
        try:
            _retrieve(url, dest, checks, opener, timeout, progress)
            return dest
        except (OSError, ValueError) as error:  # incl. ChecksumError, requests' errors
            errors.append(error)
    _remove_if_empty(created)
    tried = "; ".join(f"{u} ({_brief(e)})" for u, e in zip(urls, errors, strict=True))
    what = f"{dataset} file {dest.name}" if dataset else dest.name
    if any(isinstance(e, ChecksumError) for e in errors):
        raise ChecksumError(
            f"refused {what}: no mirror served the published file: "
            + "; ".join(str(e) for e in errors if isinstance(e, ChecksumError))
        )
    raise DownloadError(
        f"could not download {what} from {tried}; without internet, copy the file to {dest} "
        f"(it is checked against {', '.join(f'{a} {v}' for a, v in checks)})", tried
    )


def check_published(
    folder: str | os.PathLike,
    resources: Iterable[Resource],
    *,
    dataset: str,
    alternatives: Mapping[str, Collection[str]] | None = None,
    remedy: str = "delete it and download it again",
) -> list[Path]:
    """Check the files of ``folder`` that carry a published name against the published MD5.

    Files that are absent, or present under another name (e.g. an uncompressed copy), are not
    checked here (their readers check the structure). ``alternatives`` maps a file name to
    further accepted MD5 sums (e.g. a distribution's recompressed copy of the same data).
    Returns the files checked.

    Raises
    ------
    ChecksumError
        A file whose MD5 is neither the published one nor an alternative; the one-line message
        names the file, the dataset and ``remedy``.
    """
    folder = Path(folder)
    checked = []
    for res in resources:
        path = folder / res.filename
        if res.md5 is None or not path.is_file():
            continue
        accepted = {res.md5.lower(), *(m.lower() for m in (alternatives or {}).get(
            res.filename, ()))}
        actual = file_checksum(path, "md5")
        if actual not in accepted:
            raise ChecksumError(
                f"{path}: md5 {actual} is not the published {res.md5} of {dataset}'s "
                f"{res.filename}: the file is corrupt or not the official one; {remedy}"
            )
        checked.append(path)
    return checked


def _join(base: str, name: str) -> str:
    return base if base.endswith(name) else base.rstrip("/") + "/" + name


def _download_set(
    dataset: str, folder: Path, mirrors: Sequence[str], resources: Sequence[Resource],
    opener: Opener | None, timeout: float,
) -> Path:
    """Each file of ``resources`` from the first mirror that serves it; a failure names all the
    files to copy by hand."""
    for res in resources:
        try:
            download_file([_join(m, res.filename) for m in mirrors], folder / res.filename,
                          md5=res.md5, sha256=res.sha256, opener=opener, timeout=timeout,
                          dataset=dataset)
        except DownloadError as error:
            names = ", ".join(r.filename for r in resources)
            raise DownloadError(
                f"could not download {dataset}: {res.filename} from {error.tried}; without "
                f"internet, copy {names} (the published files: they are checked against their "
                f"MD5 sums) into {folder}", error.tried
            ) from None
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
    return _download_set("MNIST", data_home(root) / "mnist", mirrors, list(resources), opener,
                         timeout)


def download_fashion_mnist(
    root: str | os.PathLike | None = None,
    *,
    mirrors: Sequence[str] = FASHION_MNIST_MIRRORS,
    resources: Sequence[Resource] = FASHION_MNIST_RESOURCES,
    opener: Opener | None = None,
    timeout: float = 60.0,
) -> Path:
    """Download Fashion-MNIST into ``<data_home>/fashion-mnist``; returns that folder."""
    return _download_set("Fashion-MNIST", data_home(root) / "fashion-mnist", mirrors,
                         list(resources), opener, timeout)


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
                             sha256=archive.sha256, opener=opener, timeout=timeout,
                             dataset="EMNIST")
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
                             sha256=archive.sha256, opener=opener, timeout=timeout,
                             dataset="CIFAR-10")
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
