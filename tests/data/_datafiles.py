"""Helpers that write small files in the real on-disk formats (tests never download)."""

from __future__ import annotations

import gzip
import hashlib
import json
import pickle
import struct
import tarfile
import zipfile
from pathlib import Path

import numpy as np

# Real MNIST training class counts (0..9); they sum to 60,000.
MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


def md5(path: Path) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def idx_images_bytes(images: np.ndarray) -> bytes:
    """IDX3 ubyte images, header written by hand (magic 2051) as in LeCun's description."""
    n, h, w = images.shape
    return struct.pack(">IIII", 2051, n, h, w) + images.astype(np.uint8).tobytes()


def idx_labels_bytes(labels: np.ndarray) -> bytes:
    return struct.pack(">II", 2049, labels.size) + labels.astype(np.uint8).tobytes()


def write_idx_pair(folder: Path, prefix: str, images: np.ndarray, labels: np.ndarray,
                   *, gz: bool = True, names: tuple[str, str] | None = None) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    names = names or (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte")
    paths = []
    for name, payload in zip(names, (idx_images_bytes(images), idx_labels_bytes(labels)),
                             strict=True):
        path = folder / (name + (".gz" if gz else ""))
        path.write_bytes(gzip.compress(payload, mtime=0) if gz else payload)
        paths.append(path)
    return paths[0], paths[1]


def fake_mnist(n: int, seed: int, num_classes: int = 10) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % num_classes).astype(np.uint8)
    return images, labels


def write_mnist_folder(folder: Path, *, gz: bool = True, n_train: int = 50,
                       n_test: int = 20) -> dict[str, Path]:
    out = {}
    for split, n, seed in (("train", n_train, 1), ("t10k", n_test, 2)):
        imgs, labs = fake_mnist(n, seed)
        out[split] = write_idx_pair(folder, split, imgs, labs, gz=gz)
    return out


def cifar_batch_bytes(n: int, seed: int, *, label_key: bytes = b"labels") -> tuple[bytes, dict]:
    """A CIFAR-10 python batch as the original (bytes keys, uint8 N x 3072, list labels)."""
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, size=n)]
    batch = {
        b"batch_label": b"testing batch",
        label_key: labels,
        b"data": data,
        b"filenames": [f"img_{i}.png".encode() for i in range(n)],
    }
    return pickle.dumps(batch, protocol=2), batch


def write_cifar_folder(folder: Path, n: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for seed, name in enumerate(names):
        payload, _ = cifar_batch_bytes(n, seed)
        (folder / name).write_bytes(payload)
    meta = {b"label_names": [b"airplane"] * 10, b"num_cases_per_batch": n}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    return folder


def make_cifar_tarball(tmp: Path) -> tuple[Path, dict[str, str]]:
    src = write_cifar_folder(tmp / "src" / "cifar-10-batches-py")
    checks = {p.name: md5(p) for p in src.iterdir()}
    archive = tmp / "mirror" / "cifar-10-python.tar.gz"
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as bundle:
        bundle.add(src, arcname="cifar-10-batches-py")
    return archive, checks


def make_emnist_zip(tmp: Path, split: str = "byclass", n: int = 30,
                    num_classes: int = 62, offset: int = 0) -> tuple[Path, np.ndarray]:
    archive = tmp / "mirror" / "gzip.zip"
    archive.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % num_classes + offset).astype(np.uint8)
    with zipfile.ZipFile(archive, "w") as bundle:
        for part in ("train", "test"):
            bundle.writestr(f"gzip/emnist-{split}-{part}-images-idx3-ubyte.gz",
                            gzip.compress(idx_images_bytes(images), mtime=0))
            bundle.writestr(f"gzip/emnist-{split}-{part}-labels-idx1-ubyte.gz",
                            gzip.compress(idx_labels_bytes(labels), mtime=0))
    return archive, images


def leaf_content(users: list[str], sizes: list[int], seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    data = {}
    for user, size in zip(users, sizes, strict=True):
        data[user] = {
            "x": rng.random((size, 784)).round(3).tolist(),
            "y": rng.integers(0, 62, size=size).tolist(),
        }
    return {"users": users, "num_samples": sizes, "user_data": data}


def write_json(path: Path, content: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))
    return path
