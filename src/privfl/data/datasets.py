"""In-memory dataset containers: :class:`Dataset` and :class:`FederatedDataset`.

Both are plain numpy; torch is imported only by the ``to_torch``/``torch_dataset`` methods.

A :class:`Dataset` holds inputs of any layout ``N x ...`` (``float32``): tabular ``N x D``,
images ``N x C x H x W`` (model layout), or any other a model takes; and integer labels
(``int64``), with normalisation statistics along axis 1 (the channels of images, the features of
tabular data), e.g. the ones the paper uses for that dataset.
A :class:`FederatedDataset` assigns each client index arrays into a pooled train and a pooled
test :class:`Dataset`. Keeping indices (not copies) makes partitions cheap, lets several clients
share records when the paper's code does (Zheng et al. CIFAR), and makes ``n_j`` — which enters the
privacy accounting directly — explicit and checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from privfl._validation import check_int, check_range
from privfl.data.sharing import RecordSharing, record_sharing

__all__ = ["Dataset", "FederatedDataset", "as_rng"]


def as_rng(seed: int | np.random.Generator | None, name: str = "seed") -> np.random.Generator:
    """A numpy ``Generator`` from an integer seed (>= 0) or an existing generator.

    ``None`` is refused: every partition in privfl is reproducible, so a seed is required.
    """
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        raise ValueError(f"{name} = None is not allowed: must be an integer >= 0 or a Generator")
    return np.random.default_rng(check_int(name, seed, 0))


def _stats(name: str, value: object, channels: int, axis: str = "channel") -> tuple[float, ...]:
    """Normalisation statistics: one value per entry of axis 1 (``channels`` of them), or one
    value for all (kept as given: numpy broadcasts it)."""
    values = np.atleast_1d(np.asarray(value, dtype=float))
    if values.ndim != 1 or values.size not in (1, channels):
        raise ValueError(
            f"{name} = {value!r} is out of range: must have one value per {axis} ({channels}) "
            "or one value for all"
        )
    return tuple(float(v) for v in values)


def _inputs(value: object) -> np.ndarray:
    """``x`` as ``float32``: ``N x H x W`` images get a channel axis; ``N x D`` and any
    ``N x ...`` layout of two or more axes are kept."""
    x = np.asarray(value)
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim < 2:
        raise ValueError(
            f"x.shape = {x.shape} is out of range: must be N x D (tabular), N x H x W or "
            "N x C x H x W (images), or another N x ... layout your model takes"
        )
    if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
        raise ValueError(f"x.dtype = {x.dtype} is not allowed: must be real numbers")
    x = np.ascontiguousarray(x, dtype=np.float32)
    bad = np.flatnonzero(~np.isfinite(x.reshape(-1)))
    if bad.size:
        where = tuple(int(i) for i in np.unravel_index(bad[0], x.shape))
        raise ValueError(
            f"x{list(where)} = {x[where]} is not allowed: inputs must be finite ({bad.size} NaN "
            "or infinite values; fill or drop missing values first)")
    return x


def _token_ids(value: object, vocabulary: tuple[str, ...]) -> np.ndarray:
    """``x`` of text data: ``N x seq_len`` int64 token ids in ``[0, len(vocabulary))``."""
    if len(vocabulary) < 2 or vocabulary[:2] != ("<pad>", "<unk>"):
        raise ValueError(f"vocabulary = {vocabulary[:2]!r}... is not allowed: must start with "
                         "'<pad>', '<unk>' (ids 0 and 1)")
    x = np.asarray(value)
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"x = {x.dtype} array of shape {x.shape} is not allowed: text data "
                         "must be N x seq_len integer token ids")
    if x.size and (x.min() < 0 or x.max() >= len(vocabulary)):
        raise ValueError(f"x = token ids in [{x.min()}, {x.max()}] is out of range: must be in "
                         f"[0, {len(vocabulary) - 1}] (the vocabulary's ids)")
    return np.ascontiguousarray(x, dtype=np.int64)


def _labels(value: object, n: int) -> np.ndarray:
    """``y`` as ``int64`` class indices; integral floats (``1.0``) are accepted, anything that
    is not a whole number is refused (privfl trains classifiers: no regression targets)."""
    y = np.asarray(value)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y.shape = {y.shape} is out of range: must be ({n},), one label per "
                         "example")
    if y.size == 0 or np.issubdtype(y.dtype, np.integer):
        return np.ascontiguousarray(y, dtype=np.int64)
    if y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.number) or np.issubdtype(
            y.dtype, np.complexfloating):
        raise ValueError(
            f"y.dtype = {y.dtype} is not allowed: labels must be integers, class indices 0, 1, "
            "..., num_classes - 1 (encode other labels first, e.g. np.unique(y, "
            "return_inverse=True)[1])")
    bad = np.flatnonzero(~np.isfinite(y) | (np.mod(y, 1) != 0))
    if bad.size:
        raise ValueError(
            f"y[{bad[0]}] = {y[bad[0]].item()!r} is not allowed: labels must be integers, "
            f"class indices 0, 1, ..., num_classes - 1 ({bad.size} of {y.size} labels are not "
            "whole numbers); "
            "privfl trains classifiers, regression targets are not supported")
    return np.ascontiguousarray(y, dtype=np.int64)


@dataclass(eq=False)
class Dataset:
    """Inputs and labels of one split of a dataset.

    Parameters
    ----------
    x
        Inputs, converted to ``float32``: ``N x D`` (tabular), ``N x C x H x W`` (images; a 3-D
        array ``N x H x W`` is given a channel axis), or any ``N x ...`` layout your model takes.
    y
        Integer labels in ``[0, num_classes)``, converted to ``int64`` (floats are accepted only
        when they are whole numbers, e.g. ``1.0``).
    name
        Dataset name, e.g. ``"mnist/train"``.
    num_classes
        Number of classes (>= 1); ``None``: ``max(y) + 1``.
    mean, std
        Normalisation statistics along axis 1 (one value per channel of images, per feature of
        ``N x D`` data, or one value for all; ``std > 0``). Loaders set the paper's constants
        (MNIST 0.1307/0.3081, CIFAR-10 per Zheng et al.'s code) or statistics computed on the
        training split.
    normalized
        Whether ``x`` has already been standardised with ``mean``/``std``; loaders return
        ``[0, 1]`` pixels with ``normalized=False`` unless asked otherwise.
    classes
        Optional class names.
    vocabulary
        Text data only (:mod:`privfl.data.text`): tokens by id, ``vocabulary[0] == "<pad>"``,
        ``vocabulary[1] == "<unk>"``. ``x`` then holds int64 token ids in
        ``[0, len(vocabulary))``, ``N x seq_len``, kept as integers and never normalised.
    """

    x: np.ndarray
    y: np.ndarray
    name: str = "data"
    num_classes: int | None = None
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    normalized: bool = False
    classes: tuple[str, ...] | None = None
    vocabulary: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.vocabulary is None:
            self.x = _inputs(self.x)
        else:
            self.vocabulary = tuple(str(t) for t in self.vocabulary)
            self.x = _token_ids(self.x, self.vocabulary)
            self.normalized = True
        self.y = _labels(self.y, self.x.shape[0])
        if self.num_classes is None:
            self.num_classes = int(self.y.max()) + 1 if self.y.size else 1
        self.num_classes = check_int("num_classes", self.num_classes, 1)
        if self.y.size and (self.y.min() < 0 or self.y.max() >= self.num_classes):
            raise ValueError(
                f"y = labels in [{self.y.min()}, {self.y.max()}] is out of range: must be in "
                f"[0, {self.num_classes - 1}]"
            )
        axis = "channel" if self.x.ndim >= 4 else "feature"
        self.mean = _stats("mean", self.mean, self.x.shape[1], axis)
        self.std = _stats("std", self.std, self.x.shape[1], axis)
        for s in self.std:
            check_range("std", s, 0.0, low_open=True)
        if self.classes is not None:
            self.classes = tuple(str(c) for c in self.classes)
            if len(self.classes) != self.num_classes:
                raise ValueError(
                    f"classes has {len(self.classes)} names: must have num_classes = "
                    f"{self.num_classes}"
                )

    # ------------------------------------------------------------------ basic properties
    def __len__(self) -> int:
        return int(self.x.shape[0])

    def __repr__(self) -> str:
        return (
            f"Dataset(name={self.name!r}, n={len(self)}, shape={self.input_shape}, "
            f"num_classes={self.num_classes}, normalized={self.normalized})"
        )

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The shape of one example: ``(D,)`` for tabular data, ``(C, H, W)`` for images."""
        return tuple(int(d) for d in self.x.shape[1:])  # type: ignore[return-value]

    def label_counts(self) -> np.ndarray:
        """Number of examples of each class (length ``num_classes``)."""
        return np.bincount(self.y, minlength=self.num_classes)

    def _replace(self, **changes) -> Dataset:
        fields = {
            "x": self.x, "y": self.y, "name": self.name, "num_classes": self.num_classes,
            "mean": self.mean, "std": self.std, "normalized": self.normalized,
            "classes": self.classes, "vocabulary": self.vocabulary,
        }
        fields.update(changes)
        return Dataset(**fields)

    # ------------------------------------------------------------------ transformations
    def normalize(self) -> Dataset:
        """A copy standardised along axis 1 (per channel, or per feature of ``N x D`` data),
        ``(x - mean) / std`` (no-op if already done)."""
        if self.normalized:
            return self
        shape = (1, -1) + (1,) * (self.x.ndim - 2)
        mean = np.asarray(self.mean, dtype=np.float32).reshape(shape)
        std = np.asarray(self.std, dtype=np.float32).reshape(shape)
        x = self.x - mean
        x /= std
        return self._replace(x=x, normalized=True)

    def subset(self, indices: Sequence[int] | np.ndarray, name: str | None = None) -> Dataset:
        """The examples at ``indices`` (duplicates allowed), as a new :class:`Dataset`."""
        idx = check_indices("indices", indices, len(self))
        return self._replace(x=self.x[idx], y=self.y[idx], name=name or self.name)

    def filter_classes(self, keep: Sequence[int], *, relabel: bool = True) -> Dataset:
        """Only the examples of the classes in ``keep``; with ``relabel`` they become 0..k-1.

        Xie et al. 2023 use MNIST 0 vs 1 and CIFAR airplane (0) vs bird (2 -> 1).
        """
        keep = [check_int("keep", k, 0) for k in keep]
        if not keep or len(set(keep)) != len(keep) or max(keep) >= self.num_classes:
            raise ValueError(
                f"keep = {keep!r} is out of range: must be distinct classes in "
                f"[0, {self.num_classes - 1}]"
            )
        mask = np.isin(self.y, keep)
        y = self.y[mask]
        num_classes = self.num_classes
        classes = self.classes
        if relabel:
            mapping = np.full(self.num_classes, -1, dtype=np.int64)
            mapping[keep] = np.arange(len(keep))
            y = mapping[y]
            num_classes = len(keep)
            classes = tuple(self.classes[k] for k in keep) if self.classes else None
        return self._replace(x=self.x[mask], y=y, num_classes=num_classes, classes=classes)

    def split(self, test_fraction: float, seed: int | np.random.Generator = 0):
        """Random ``(train, test)`` split with ``round(test_fraction * N)`` test examples."""
        fraction = check_range("test_fraction", test_fraction, 0.0, 1.0, low_open=True,
                               high_open=True)
        rng = as_rng(seed)
        order = rng.permutation(len(self))
        n_test = int(round(fraction * len(self)))
        if n_test == 0 or n_test == len(self):
            raise ValueError(
                f"test_fraction = {fraction} is out of range: leaves an empty split of "
                f"{len(self)} examples"
            )
        base = self.name.split("/")[0]
        return (
            self.subset(np.sort(order[n_test:]), name=f"{base}/train"),
            self.subset(np.sort(order[:n_test]), name=f"{base}/test"),
        )

    # ------------------------------------------------------------------ torch
    def to_torch(self, device=None):
        """``(x, y)`` as torch tensors (``float32``, ``int64``) on ``device``."""
        import torch

        return (
            torch.as_tensor(self.x, device=device),
            torch.as_tensor(self.y, device=device),
        )

    def torch_dataset(self, device=None):
        """A ``torch.utils.data.TensorDataset`` over ``(x, y)``."""
        from torch.utils.data import TensorDataset

        return TensorDataset(*self.to_torch(device))


def check_indices(name: str, indices: object, size: int, *, unique: bool = False) -> np.ndarray:
    try:
        idx = np.asarray(indices)
    except (TypeError, ValueError) as error:  # pragma: no cover - numpy accepts nearly anything
        raise ValueError(f"{name} = {indices!r} is not an index array") from error
    if idx.size == 0:
        return np.zeros(0, dtype=np.int64)
    if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer):
        raise ValueError(
            f"{name} has shape {idx.shape} and dtype {idx.dtype}: must be a 1-D integer array"
        )
    if idx.min() < 0 or idx.max() >= size:
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        raise ValueError(f"{name} holds index {bad}, out of range: must be in [0, {size - 1}]")
    if unique and np.unique(idx).size != idx.size:
        raise ValueError(
            f"{name} holds a repeated index: a client's training records must be distinct "
            "(a duplicated record would count twice in its update and break the DP sensitivity)"
        )
    return idx.astype(np.int64, copy=False)


@dataclass(eq=False)
class FederatedDataset:
    """Clients' train/test index arrays over a pooled train and a pooled test :class:`Dataset`.

    Parameters
    ----------
    train, test
        The pooled datasets (same input shape and ``num_classes``).
    train_indices
        One 1-D integer array per client into ``train``; non-empty, entries distinct within a
        client. Clients may share records only if the partitioner said so (see
        :meth:`is_disjoint`).
    test_indices
        One array per client into ``test`` (may be empty; repeats allowed, as Zheng et al.'s MNIST
        test sets are drawn with replacement). ``None`` gives every client an empty test set.
    client_ids
        Names of the clients (default ``"0"``, ``"1"``, ...); distinct.
    name
        Description of the partition, e.g. ``"mnist/shards(100x4x150)"``.
    info
        Free-form partition metadata (e.g. the Dirichlet proportions).
    """

    train: Dataset
    test: Dataset
    train_indices: list[np.ndarray]
    test_indices: list[np.ndarray] | None = None
    client_ids: list[str] | None = None
    name: str = ""
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.train, Dataset) or not isinstance(self.test, Dataset):
            raise ValueError("train and test must be privfl.data.Dataset instances")
        if self.train.input_shape != self.test.input_shape:
            raise ValueError(
                f"test input shape {self.test.input_shape} differs from train "
                f"{self.train.input_shape}"
            )
        if self.train.num_classes != self.test.num_classes:
            raise ValueError(
                f"test num_classes = {self.test.num_classes} differs from train "
                f"{self.train.num_classes}"
            )
        num_clients = len(self.train_indices)
        if num_clients == 0:
            raise ValueError("train_indices = [] is out of range: must hold >= 1 client")
        self.train_indices = [
            check_indices(f"train_indices[{j}]", idx, len(self.train), unique=True)
            for j, idx in enumerate(self.train_indices)
        ]
        for j, idx in enumerate(self.train_indices):
            if idx.size == 0:
                raise ValueError(
                    f"train_indices[{j}] is empty: every client needs >= 1 training record "
                    "(n_j enters the privacy accounting)"
                )
        if self.test_indices is None:
            self.test_indices = [np.zeros(0, dtype=np.int64) for _ in range(num_clients)]
        if len(self.test_indices) != num_clients:
            raise ValueError(
                f"test_indices has {len(self.test_indices)} clients: must match train_indices "
                f"({num_clients})"
            )
        self.test_indices = [
            check_indices(f"test_indices[{j}]", idx, len(self.test))
            for j, idx in enumerate(self.test_indices)
        ]
        if self.client_ids is None:
            self.client_ids = [str(j) for j in range(num_clients)]
        self.client_ids = [str(c) for c in self.client_ids]
        if len(self.client_ids) != num_clients or len(set(self.client_ids)) != num_clients:
            raise ValueError(
                f"client_ids must be {num_clients} distinct names, got {len(self.client_ids)} "
                f"({len(set(self.client_ids))} distinct)"
            )

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return len(self.train_indices)

    def __repr__(self) -> str:
        sizes = self.client_sizes
        return (
            f"FederatedDataset(name={self.name!r}, clients={len(self)}, "
            f"n_j in [{sizes.min()}, {sizes.max()}], test pool {len(self.test)})"
        )

    @property
    def num_clients(self) -> int:
        return len(self.train_indices)

    @property
    def num_classes(self) -> int:
        return self.train.num_classes

    @property
    def input_shape(self) -> tuple[int, ...]:
        return self.train.input_shape

    @property
    def client_sizes(self) -> np.ndarray:
        """``n_j``: number of training records of each client."""
        return np.array([idx.size for idx in self.train_indices], dtype=np.int64)

    @property
    def test_sizes(self) -> np.ndarray:
        return np.array([idx.size for idx in self.test_indices], dtype=np.int64)

    def _client(self, client: int | str) -> int:
        if isinstance(client, str):
            if client not in self.client_ids:
                raise ValueError(f"client = {client!r} is not allowed: not a client id")
            return self.client_ids.index(client)
        j = check_int("client", client, 0)
        if j >= self.num_clients:
            raise ValueError(
                f"client = {j} is out of range: must be in [0, {self.num_clients - 1}]"
            )
        return j

    # ------------------------------------------------------------------ client data
    def client_train(self, client: int | str) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` arrays of a client's training records (by position or id)."""
        idx = self.train_indices[self._client(client)]
        return self.train.x[idx], self.train.y[idx]

    def client_test(self, client: int | str) -> tuple[np.ndarray, np.ndarray]:
        """``(x, y)`` arrays of a client's test records."""
        idx = self.test_indices[self._client(client)]
        return self.test.x[idx], self.test.y[idx]

    def client_dataset(self, client: int | str, split: str = "train") -> Dataset:
        """A client's train or test records as a :class:`Dataset`."""
        j = self._client(client)
        if split not in ("train", "test"):
            raise ValueError(f"split = {split!r} is not allowed: must be one of train, test")
        pool = self.train if split == "train" else self.test
        idx = (self.train_indices if split == "train" else self.test_indices)[j]
        return pool.subset(idx, name=f"{pool.name}[client {self.client_ids[j]}]")

    def client_labels(self, client: int | str, split: str = "train") -> np.ndarray:
        """Sorted distinct labels a client holds."""
        j = self._client(client)
        if split not in ("train", "test"):
            raise ValueError(f"split = {split!r} is not allowed: must be one of train, test")
        if split == "train":
            return np.unique(self.train.y[self.train_indices[j]])
        return np.unique(self.test.y[self.test_indices[j]])

    def label_counts(self, split: str = "train") -> np.ndarray:
        """``num_clients x num_classes`` matrix of per-client label counts."""
        if split not in ("train", "test"):
            raise ValueError(f"split = {split!r} is not allowed: must be one of train, test")
        pool = self.train if split == "train" else self.test
        indices = self.train_indices if split == "train" else self.test_indices
        return np.stack([np.bincount(pool.y[i], minlength=self.num_classes) for i in indices])

    def is_disjoint(self) -> bool:
        """Whether no training record belongs to two clients."""
        all_idx = np.concatenate(self.train_indices)
        return np.unique(all_idx).size == all_idx.size

    def record_sharing(self) -> RecordSharing:
        """How many clients hold each training record (by its index in the training pool):
        the largest multiplicity ``k`` and the sets of clients sharing a record. Record-level
        privacy plans compose a shared record's holders (:mod:`privfl.data.sharing`)."""
        return record_sharing(self.train_indices)

    def stacked_train_indices(self) -> np.ndarray:
        """``num_clients x n`` index matrix, for vectorised client work with equal ``n_j``."""
        sizes = self.client_sizes
        if np.any(sizes != sizes[0]):
            raise ValueError(
                f"client sizes range over [{sizes.min()}, {sizes.max()}]: stacking needs equal n_j"
            )
        return np.stack(self.train_indices)

    def normalize(self) -> FederatedDataset:
        """The same partition over normalised copies of the pooled datasets."""
        return FederatedDataset(
            self.train.normalize(), self.test.normalize(), self.train_indices,
            self.test_indices, self.client_ids, self.name, dict(self.info),
        )

    def summary(self) -> dict:
        """Sizes and label-diversity statistics (for logs and reports)."""
        sizes = self.client_sizes
        distinct = (self.label_counts() > 0).sum(axis=1)
        return {
            "name": self.name,
            "clients": self.num_clients,
            "n_min": int(sizes.min()),
            "n_max": int(sizes.max()),
            "n_total": int(sizes.sum()),
            "test_min": int(self.test_sizes.min()),
            "test_max": int(self.test_sizes.max()),
            "labels_per_client_mean": float(distinct.mean()),
            "disjoint": self.is_disjoint(),
            "max_multiplicity": self.record_sharing().max_multiplicity,
        }
