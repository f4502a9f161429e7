"""Deterministic client partitions (numpy ``Generator`` seeded by ``seed``).

Index-level partitioners (return one index array per client):

* :func:`shard_partition` — Zheng et al. MNIST / McMahan et al.: sort by label, cut into shards,
  shuffle, ``shards_per_client`` shards per client (400 x 150, 4 per client -> 600 each).
* :func:`dirichlet_partition` — Zheng et al. 2021 CIFAR / Hsu et al.: per client ``q ~ Dir(beta)``,
  ``theta ~ Multinomial(size, q)``, ``theta_i`` records of label ``i`` without replacement
  within the client; clients overlapping (the reference code) or disjoint.
* :func:`dirichlet_class_partition` — Xie et al. 2023: per class ``pi ~ Dir(alpha 1_N)``, unequal
  client sizes.
* :func:`iid_partition` — shuffle once, equal contiguous blocks (seeds 002 and 003).
* :func:`natural_partition` — one client per group (LEAF writer / user).
* :func:`matched_test_indices` — per-client test sets whose labels are among the client's
  training labels (Zheng et al. 2021 MNIST; with replacement as in the reference code).
* :func:`seed_label_test_indices` — per-client test sets whose labels are those the client's
  shards would hold if every class had the same number of records: fixed by the seed's shard
  shuffle, the number of shards and of classes, never by a training record.

Builders that return a :class:`~privfl.data.datasets.FederatedDataset`:
:func:`federate_shards`, :func:`federate_dirichlet`, :func:`federate_iid`,
:func:`federate_groups`, :func:`federate_leaf`.

Each function draws from one generator in a fixed order, so the same ``seed`` always gives the
same partition (for a given numpy version).

Test sets chosen by :func:`matched_test_indices` depend on the clients' *training* labels:
replacing one training record can change a client's test set, so an accuracy measured on them
is not post-processing of what a DP guarantee releases. The builders that use it say so in the
dataset's ``info`` (:data:`TEST_FROM_TRAIN_LABELS`); the runner marks those accuracies outside
the guarantee. Test sets drawn from public information only (the seed's Dirichlet proportions
of ``test_sampling: proportions``, the seed's IID split, the seed's shard labels of
``client_test: seed-labels``) are not marked.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privfl._validation import check_choice, check_int, check_positive
from privfl.data.datasets import Dataset, FederatedDataset, as_rng, check_indices
from privfl.data.formats import LeafData

__all__ = [
    "TEST_FROM_TRAIN_LABELS",
    "dirichlet_class_partition",
    "dirichlet_partition",
    "dirichlet_proportions",
    "federate_dirichlet",
    "federate_dirichlet_classes",
    "federate_groups",
    "federate_iid",
    "federate_leaf",
    "federate_shards",
    "iid_partition",
    "matched_test_indices",
    "natural_partition",
    "sample_by_proportions",
    "seed_label_test_indices",
    "shard_labels",
    "shard_partition",
]

#: ``FederatedDataset.info`` key: True when the client test sets were chosen by the clients'
#: training labels (:func:`matched_test_indices`), so accuracies on them read private data.
TEST_FROM_TRAIN_LABELS = "test_from_train_labels"

Seed = int | np.random.Generator


def _labels(labels: object, name: str = "labels") -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1 or y.size == 0:
        raise ValueError(f"{name} has shape {y.shape}: must be a non-empty 1-D label array")
    if not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"{name} has dtype {y.dtype}: labels must be integers")
    if y.min() < 0:
        raise ValueError(f"{name} holds label {int(y.min())}, out of range: must be >= 0")
    return y.astype(np.int64, copy=False)


def _num_classes(y: np.ndarray, num_classes: int | None) -> int:
    if num_classes is None:
        return int(y.max()) + 1
    k = check_int("num_classes", num_classes, 1)
    if y.max() >= k:
        raise ValueError(f"num_classes = {k} is out of range: labels go up to {int(y.max())}")
    return k


# ------------------------------------------------------------------------------- shards


def shard_partition(
    labels: object,
    num_clients: int = 100,
    shards_per_client: int = 4,
    shard_size: int | None = None,
    *,
    seed: Seed = 0,
) -> list[np.ndarray]:
    """Label-sorted shards, ``shards_per_client`` random shards per client.

    The records are sorted by label (stable sort, so ties keep their original order), cut into
    ``num_clients * shards_per_client`` consecutive shards of ``shard_size`` records (default
    ``len(labels) // num_shards``; records past the last full shard are unused), the shards are
    shuffled and client ``j`` receives shards ``j*s .. j*s+s-1`` of the shuffled order. Seed
    000's MNIST split is the default: 400 shards of 150, 4 per client, 600 records each.

    Returns one sorted index array per client; clients are disjoint.
    """
    return _shards(labels, num_clients, shards_per_client, shard_size, as_rng(seed))[0]


def _shards(labels: object, num_clients: int, shards_per_client: int, shard_size: int | None,
            rng: np.random.Generator) -> tuple[list[np.ndarray], np.ndarray]:
    """:func:`shard_partition`'s clients and the shuffled shard order (``num_clients x
    shards_per_client`` shard numbers: a draw of the seed alone)."""
    y = _labels(labels)
    num_clients = check_int("num_clients", num_clients, 1)
    shards_per_client = check_int("shards_per_client", shards_per_client, 1)
    num_shards = num_clients * shards_per_client
    if shard_size is None:
        shard_size = y.size // num_shards
        if shard_size == 0:
            raise ValueError(
                f"num_clients * shards_per_client = {num_shards} is out of range: must be <= "
                f"the number of records ({y.size})"
            )
    shard_size = check_int("shard_size", shard_size, 1)
    if num_shards * shard_size > y.size:
        raise ValueError(
            f"shard_size = {shard_size} is out of range: {num_shards} shards need "
            f"{num_shards * shard_size} records, only {y.size} available"
        )
    order = np.argsort(y, kind="stable")[: num_shards * shard_size]
    shards = order.reshape(num_shards, shard_size)
    perm = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return [np.sort(shards[row].ravel()) for row in perm], perm


def shard_labels(shard: int, num_shards: int, num_classes: int) -> list[int]:
    """The labels shard ``shard`` of ``num_shards`` label-sorted shards holds if every one of the
    ``num_classes`` classes has the same number of records: class ``c`` fills positions
    ``[c S / K, (c + 1) S / K)`` of the ``S`` shards, so the shard's labels run from
    ``floor(s K / S)`` to ``ceil((s + 1) K / S) - 1`` (20 shards of 10 classes: ``s // 2``).
    It reads no record: the nominal labels of :func:`shard_partition`'s shards."""
    num_shards = check_int("num_shards", num_shards, 1)
    num_classes = check_int("num_classes", num_classes, 1)
    shard = check_int("shard", shard, 0)
    if shard >= num_shards:
        raise ValueError(f"shard = {shard} is out of range: must be < num_shards = {num_shards}")
    low = shard * num_classes // num_shards
    high = ((shard + 1) * num_classes - 1) // num_shards
    return list(range(low, high + 1))


# ---------------------------------------------------------------------------- Dirichlet


def dirichlet_proportions(
    num_clients: int, num_classes: int, beta: float, *, seed: Seed = 0
) -> np.ndarray:
    """``num_clients x num_classes`` matrix, row ``j`` drawn from ``Dir(beta * 1)``."""
    num_clients = check_int("num_clients", num_clients, 1)
    num_classes = check_int("num_classes", num_classes, 1)
    beta = check_positive("beta", beta)
    rng = as_rng(seed)
    q = rng.dirichlet(np.full(num_classes, beta), size=num_clients)
    # Tiny beta can underflow every component of a row to 0; fall back to its largest entry.
    bad = ~np.isfinite(q).all(axis=1) | (q.sum(axis=1) <= 0)
    if bad.any():  # pragma: no cover - only for extreme beta
        q[bad] = 0.0
        q[bad, rng.integers(num_classes, size=int(bad.sum()))] = 1.0
    return q


def _capped_multinomial(
    size: int, q: np.ndarray, capacity: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, bool]:
    """Multinomial(size, q) counts, redistributing any count above a class's capacity.

    Overflow is redrawn from ``q`` restricted to classes with room left (uniform over them if
    ``q`` puts no mass there). Returns the counts and whether capping was needed.
    """
    counts = rng.multinomial(size, q)
    capped = False
    while True:
        over = np.maximum(counts - capacity, 0)
        excess = int(over.sum())
        if excess == 0:
            return counts, capped
        capped = True
        counts -= over
        room = capacity - counts
        weights = np.where(room > 0, q, 0.0)
        if weights.sum() <= 0:
            weights = (room > 0).astype(float)
        counts += rng.multinomial(excess, weights / weights.sum())


def sample_by_proportions(
    labels: object,
    proportions: object,
    size: int,
    *,
    disjoint: bool = False,
    seed: Seed = 0,
) -> tuple[list[np.ndarray], int]:
    """Draw ``size`` records per client with label counts ``~ Multinomial(size, q_j)``.

    Within a client the records are distinct (sampling without replacement inside each class).
    With ``disjoint=False`` every client samples from the full pool, so two clients may share
    records (Zheng et al.'s reference code). With ``disjoint=True`` a record is given to at most
    one client, clients in order ``0, 1, ...``.

    When a class does not have enough records left (possible with ``disjoint=True`` or tiny
    classes), the excess is redrawn from the client's proportions over classes with records
    left, so every client still gets exactly ``size`` records.

    Returns
    -------
    indices, capped
        One sorted index array per client, and how many clients needed the redistribution.
    """
    y = _labels(labels)
    q = np.asarray(proportions, dtype=float)
    if q.ndim != 2 or q.shape[0] == 0:
        raise ValueError(f"proportions has shape {q.shape}: must be num_clients x num_classes")
    num_clients, num_classes = q.shape
    if y.max() >= num_classes:
        raise ValueError(
            f"proportions has {num_classes} classes but labels go up to {int(y.max())}"
        )
    if not np.all(np.isfinite(q)) or np.any(q < 0) or np.any(q.sum(axis=1) <= 0):
        raise ValueError("proportions must be finite, >= 0, with a positive sum in every row")
    q = q / q.sum(axis=1, keepdims=True)
    size = check_int("size", size, 1)
    total_needed = size * num_clients if disjoint else size
    if total_needed > y.size:
        raise ValueError(
            f"size = {size} is out of range: needs {total_needed} records "
            f"({'disjoint' if disjoint else 'per client'}), only {y.size} available"
        )
    rng = as_rng(seed)
    pools = [np.flatnonzero(y == c) for c in range(num_classes)]
    if disjoint:
        pools = [rng.permutation(pool) for pool in pools]
        used = np.zeros(num_classes, dtype=np.int64)
    capacity = np.array([pool.size for pool in pools], dtype=np.int64)
    result: list[np.ndarray] = []
    capped_clients = 0
    for j in range(num_clients):
        room = capacity - used if disjoint else capacity
        counts, capped = _capped_multinomial(size, q[j], room, rng)
        capped_clients += capped
        parts = []
        for c in np.flatnonzero(counts):
            k = int(counts[c])
            if disjoint:
                parts.append(pools[c][used[c] : used[c] + k])
                used[c] += k
            else:
                parts.append(rng.choice(pools[c], size=k, replace=False))
        result.append(np.sort(np.concatenate(parts)))
    return result, capped_clients


def dirichlet_partition(
    labels: object,
    num_clients: int = 100,
    size: int = 500,
    beta: float = 0.5,
    *,
    disjoint: bool = False,
    num_classes: int | None = None,
    seed: Seed = 0,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Zheng et al. 2021's CIFAR split: per client ``q ~ Dir(beta)``, ``size`` records by ``q``.

    Returns the index arrays (exactly ``size`` distinct records per client) and the
    ``num_clients x num_classes`` proportions ``q`` (to draw matching test sets).
    See :func:`sample_by_proportions` for ``disjoint`` and class exhaustion.
    """
    y = _labels(labels)
    k = _num_classes(y, num_classes)
    rng = as_rng(seed)
    q = dirichlet_proportions(num_clients, k, beta, seed=rng)
    indices, _ = sample_by_proportions(y, q, size, disjoint=disjoint, seed=rng)
    return indices, q


def dirichlet_class_partition(
    labels: object,
    num_clients: int,
    alpha: float,
    *,
    min_per_class: int = 2,
    num_classes: int | None = None,
    seed: Seed = 0,
) -> list[np.ndarray]:
    """Xie et al. 2023's non-IID split (unequal client sizes).

    For each class ``c``: shuffle its records, draw ``pi ~ Dir(alpha * 1_N)`` over the clients,
    and give client ``u`` the next ``round(pi_u * (n_c - min_per_class * N)) + min_per_class``
    records (truncated when the class runs out). Clients are disjoint.
    """
    y = _labels(labels)
    k = _num_classes(y, num_classes)
    num_clients = check_int("num_clients", num_clients, 1)
    alpha = check_positive("alpha", alpha)
    min_per_class = check_int("min_per_class", min_per_class, 0)
    rng = as_rng(seed)
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c in range(k):
        pool = rng.permutation(np.flatnonzero(y == c))
        if pool.size == 0:
            continue
        spare = pool.size - min_per_class * num_clients
        if spare < 0:
            raise ValueError(
                f"min_per_class = {min_per_class} is out of range: class {c} has {pool.size} "
                f"records, fewer than min_per_class * num_clients = "
                f"{min_per_class * num_clients}"
            )
        pi = rng.dirichlet(np.full(num_clients, alpha))
        take = np.round(pi * spare).astype(np.int64) + min_per_class
        ends = np.minimum(np.cumsum(take), pool.size)
        starts = np.concatenate([[0], ends[:-1]])
        for u in range(num_clients):
            parts[u].append(pool[starts[u] : ends[u]])
    result = [np.sort(np.concatenate(p)) for p in parts]
    empty = [u for u, idx in enumerate(result) if idx.size == 0]
    if empty:
        raise ValueError(
            f"alpha = {alpha} with min_per_class = {min_per_class} left clients {empty[:5]} "
            "without records: raise min_per_class"
        )
    return result


# ---------------------------------------------------------------------------------- IID


def iid_partition(
    num_examples: int,
    num_clients: int,
    size: int | None = None,
    *,
    seed: Seed = 0,
) -> list[np.ndarray]:
    """Shuffle ``0..num_examples-1`` once; client ``u`` gets block ``u`` of ``size`` records.

    ``size`` defaults to ``num_examples // num_clients``; left-over records are unused (seed
    002: MNIST 12,665 over 200 users gives 63 each, 65 unused).
    """
    num_examples = check_int("num_examples", num_examples, 1)
    num_clients = check_int("num_clients", num_clients, 1)
    if size is None:
        size = num_examples // num_clients
        if size == 0:
            raise ValueError(
                f"num_clients = {num_clients} is out of range: must be <= num_examples "
                f"({num_examples})"
            )
    size = check_int("size", size, 1)
    if size * num_clients > num_examples:
        raise ValueError(
            f"size = {size} is out of range: {num_clients} clients need "
            f"{size * num_clients} records, only {num_examples} available"
        )
    order = as_rng(seed).permutation(num_examples)
    blocks = order[: size * num_clients].reshape(num_clients, size)
    return [np.sort(block) for block in blocks]


# ------------------------------------------------------------------------------ natural


def natural_partition(groups: Sequence | np.ndarray) -> tuple[list[str], list[np.ndarray]]:
    """One client per distinct group id (e.g. LEAF writer), in order of first appearance."""
    g = np.asarray(groups)
    if g.ndim != 1 or g.size == 0:
        raise ValueError(f"groups has shape {g.shape}: must be a non-empty 1-D array")
    _, first, inverse = np.unique(g, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    ids = [str(g[first[k]]) for k in order]
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    client_of = rank[inverse.ravel()]
    sort = np.argsort(client_of, kind="stable")
    bounds = np.cumsum(np.bincount(client_of, minlength=order.size))[:-1]
    return ids, list(np.split(sort, bounds))


# --------------------------------------------------------------------------- test sets


def matched_test_indices(
    train_indices: Sequence[np.ndarray],
    train_labels: object,
    test_labels: object,
    size: int = 200,
    *,
    replace: bool = True,
    seed: Seed = 0,
) -> list[np.ndarray]:
    """Per-client test sets drawn from test records whose label the client has in training.

    Client ``j`` draws ``size`` records uniformly from the pooled test records with a label in
    ``set(train_labels[train_indices[j]])`` — with replacement by default, as Zheng et al.'s
    reference code does for MNIST. The test sets depend on the training labels: accuracies on
    them are outside a DP guarantee on the training data (:data:`TEST_FROM_TRAIN_LABELS`).
    """
    y_train = _labels(train_labels, "train_labels")
    allowed = [np.unique(y_train[check_indices(f"train_indices[{j}]", idx, y_train.size)])
               for j, idx in enumerate(train_indices)]
    return _tests_with_labels(allowed, test_labels, size, replace, seed)


def seed_label_test_indices(
    shard_order: object,
    num_classes: int,
    test_labels: object,
    size: int = 200,
    *,
    replace: bool = True,
    seed: Seed = 0,
) -> list[np.ndarray]:
    """Per-client test sets drawn from the test records with the client's *nominal* labels.

    ``shard_order`` is the ``num_clients x shards_per_client`` matrix of shard numbers (the
    seed's shuffle in :func:`shard_partition`); client ``j``'s labels are the union of
    :func:`shard_labels` over its row, and it draws ``size`` records uniformly (with
    replacement by default) from the test records carrying them. Nothing here reads a
    training record, so an accuracy on these test sets is post-processing of the released
    models (it stays inside a DP guarantee on the training data). Where the real class counts
    differ from equal ones, a shard's records and its nominal labels can differ a little.
    """
    order = np.asarray(shard_order)
    if order.ndim != 2 or order.size == 0 or not np.issubdtype(order.dtype, np.integer):
        raise ValueError(f"shard_order has shape {order.shape} and dtype {order.dtype}: must be "
                         "a non-empty 2-D integer matrix (clients x shards)")
    allowed = [np.unique([label for shard in row
                          for label in shard_labels(int(shard), order.size, num_classes)])
               for row in order]
    return _tests_with_labels(allowed, test_labels, size, replace, seed)


def _tests_with_labels(allowed: Sequence[np.ndarray], test_labels: object, size: int,
                       replace: bool, seed: Seed) -> list[np.ndarray]:
    """Client ``j``: ``size`` test records drawn uniformly from those with a label in
    ``allowed[j]`` (one generator, clients in order)."""
    y_test = _labels(test_labels, "test_labels")
    size = check_int("size", size, 0)
    rng = as_rng(seed)
    result = []
    for j, labels in enumerate(allowed):
        pool = np.flatnonzero(np.isin(y_test, labels))
        if size and pool.size == 0:
            raise ValueError(f"client {j}: the test pool has no record with its labels {labels}")
        if not replace and size > pool.size:
            raise ValueError(
                f"size = {size} is out of range for client {j}: only {pool.size} test records "
                "carry its labels; use replace=True or a smaller size"
            )
        result.append(rng.choice(pool, size=size, replace=replace) if size else pool[:0])
    return result


# ----------------------------------------------------------------------------- builders


def _check_pair(train: Dataset, test: Dataset) -> None:
    if not isinstance(train, Dataset) or not isinstance(test, Dataset):
        raise ValueError("train and test must be privfl.data.Dataset instances")


def federate_shards(
    train: Dataset,
    test: Dataset,
    *,
    num_clients: int = 100,
    shards_per_client: int = 4,
    shard_size: int | None = None,
    test_size: int = 200,
    test_replace: bool = True,
    client_test: str = "train-labels",
    seed: Seed = 0,
) -> FederatedDataset:
    """Zheng et al. 2021's non-IID MNIST federation (100 clients x 4 shards x 150, 200 test).

    Training records by :func:`shard_partition`; test sets drawn with replacement unless
    ``test_replace=False``, by ``client_test``: ``"train-labels"`` (Zheng et al.'s reference
    code) by :func:`matched_test_indices`, labels among the client's training labels (outside
    a DP guarantee: :data:`TEST_FROM_TRAIN_LABELS`); ``"seed-labels"`` by
    :func:`seed_label_test_indices`, the nominal labels of the client's shards (the seed's
    shuffle only: inside it). Both draw from the same generator after the partition, so the
    training partition is the same.
    """
    _check_pair(train, test)
    client_test = check_choice("client_test", client_test, ["train-labels", "seed-labels"])
    rng = as_rng(seed)
    parts, order = _shards(train.y, num_clients, shards_per_client, shard_size, rng)
    if client_test == "train-labels":
        tests = matched_test_indices(parts, train.y, test.y, test_size, replace=test_replace,
                                     seed=rng)
    else:
        tests = seed_label_test_indices(order, train.num_classes, test.y, test_size,
                                        replace=test_replace, seed=rng)
    size = parts[0].size // check_int("shards_per_client", shards_per_client, 1)
    return FederatedDataset(
        train, test, parts, tests,
        name=f"{train.name.split('/')[0]}/shards({num_clients}x{shards_per_client}x{size})",
        info={"partition": "shards", "shard_size": size, "test_replace": test_replace,
              "client_test": client_test, TEST_FROM_TRAIN_LABELS: client_test == "train-labels"},
    )


def federate_dirichlet(
    train: Dataset,
    test: Dataset,
    *,
    num_clients: int = 100,
    train_size: int = 500,
    test_size: int = 200,
    beta: float = 0.5,
    disjoint: bool = False,
    test_sampling: str = "proportions",
    seed: Seed = 0,
) -> FederatedDataset:
    """Zheng et al. 2021's non-IID CIFAR-10 federation (defaults: 100 clients, 500/200, beta 0.5).

    Parameters
    ----------
    disjoint
        ``False`` (reference code): clients sample independently and may share records.
        ``True``: no record is given to two clients.
    test_sampling
        ``"proportions"`` (Zheng et al.): test label counts ``~ Multinomial(test_size, q_j)``, drawn
        without replacement within the client from the test pool (clients may share test
        records). ``"train-labels"``: uniformly with replacement from test records whose label
        the client has in training, so test labels are a subset of training labels.
    """
    _check_pair(train, test)
    test_sampling = check_choice("test_sampling", test_sampling, ["proportions", "train-labels"])
    rng = as_rng(seed)
    parts, q = dirichlet_partition(train.y, num_clients, train_size, beta, disjoint=disjoint,
                                   num_classes=train.num_classes, seed=rng)
    if test_sampling == "proportions":
        tests, _ = sample_by_proportions(test.y, q, check_int("test_size", test_size, 1),
                                         seed=rng)
    else:
        tests = matched_test_indices(parts, train.y, test.y, test_size, seed=rng)
    return FederatedDataset(
        train, test, parts, tests,
        name=f"{train.name.split('/')[0]}/dirichlet(beta={beta:g},{num_clients}x{train_size})",
        info={"partition": "dirichlet", "beta": beta, "disjoint": disjoint, "proportions": q,
              "test_sampling": test_sampling,
              TEST_FROM_TRAIN_LABELS: test_sampling == "train-labels"},
    )


def _iid_test_split(num_test: int, num_clients: int, test_size: int | None,
                    rng: np.random.Generator) -> list[np.ndarray]:
    """Each client's test records, an IID block of ``test_size`` (None: ``num_test //
    num_clients``; 0: none, evaluate on the pooled test set)."""
    if test_size is None:
        test_size = num_test // num_clients
    test_size = check_int("test_size", test_size, 0)
    if not test_size:
        return [np.zeros(0, dtype=np.int64)] * num_clients
    return iid_partition(num_test, num_clients, test_size, seed=rng)


def federate_dirichlet_classes(
    train: Dataset,
    test: Dataset,
    *,
    num_clients: int,
    alpha: float,
    min_per_class: int = 2,
    test_size: int | None = None,
    seed: Seed = 0,
) -> FederatedDataset:
    """Xie et al. 2023's non-IID federation (Section 6.2.3, Figure 3): every class's records
    spread over the clients by ``pi_c ~ Dir(alpha 1_N)`` with ``min_per_class`` each
    (:func:`dirichlet_class_partition`: disjoint clients of unequal sizes); the test set split
    IID as in :func:`federate_iid` (``test_size=None``: ``len(test) // num_clients`` each,
    ``0``: none, evaluate on the pooled test set)."""
    _check_pair(train, test)
    rng = as_rng(seed)
    parts = dirichlet_class_partition(train.y, num_clients, alpha, min_per_class=min_per_class,
                                      num_classes=train.num_classes, seed=rng)
    tests = _iid_test_split(len(test), num_clients, test_size, rng)
    sizes = [p.size for p in parts]
    return FederatedDataset(
        train, test, parts, tests,
        name=f"{train.name.split('/')[0]}/dirichlet-classes(alpha={alpha:g},{num_clients} "
             f"clients of {min(sizes)}-{max(sizes)})",
        info={"partition": "dirichlet-classes", "alpha": alpha, "min_per_class": min_per_class},
    )


def federate_iid(
    train: Dataset,
    test: Dataset,
    *,
    num_clients: int,
    size: int | None = None,
    test_size: int | None = None,
    seed: Seed = 0,
) -> FederatedDataset:
    """Equal IID split of the training set; the test set is split IID the same way.

    ``test_size=None`` gives each client ``len(test) // num_clients`` test records (possibly 0);
    ``test_size=0`` gives none (evaluate on the pooled test set instead).
    """
    _check_pair(train, test)
    rng = as_rng(seed)
    parts = iid_partition(len(train), num_clients, size, seed=rng)
    tests = _iid_test_split(len(test), num_clients, test_size, rng)
    return FederatedDataset(
        train, test, parts, tests,
        name=f"{train.name.split('/')[0]}/iid({num_clients}x{parts[0].size})",
        info={"partition": "iid"},
    )


def federate_groups(
    train: Dataset,
    train_groups: Sequence | np.ndarray,
    test: Dataset,
    test_groups: Sequence | np.ndarray | None = None,
    *,
    name: str | None = None,
) -> FederatedDataset:
    """Natural federation: one client per group id (writer, user) of the training records.

    Test records are assigned by their own group ids; test groups without training records are
    dropped (listed in ``info["test_only_groups"]``).
    """
    _check_pair(train, test)
    if len(train_groups) != len(train):
        raise ValueError(f"train_groups has {len(train_groups)} entries: must be {len(train)}")
    ids, parts = natural_partition(train_groups)
    tests = [np.zeros(0, dtype=np.int64) for _ in ids]
    dropped: list[str] = []
    if test_groups is not None:
        if len(test_groups) != len(test):
            raise ValueError(f"test_groups has {len(test_groups)} entries: must be {len(test)}")
        position = {cid: j for j, cid in enumerate(ids)}
        test_ids, test_parts = natural_partition(test_groups)
        for cid, idx in zip(test_ids, test_parts, strict=True):
            if cid in position:
                tests[position[cid]] = idx
            else:
                dropped.append(cid)
    return FederatedDataset(
        train, test, parts, tests, client_ids=ids,
        name=name or f"{train.name.split('/')[0]}/natural({len(ids)} clients)",
        info={"partition": "natural", "test_only_groups": dropped},
    )


def _leaf_pool(data: LeafData, input_shape: tuple[int, ...], split: str, name: str,
               num_classes: int, mean, std) -> tuple[Dataset, np.ndarray]:
    xs, ys, groups = [], [], []
    for user in data.users:
        x, y = data.arrays(user)
        if len(y) == 0:
            continue
        xs.append(x.reshape((len(y), *input_shape)))
        ys.append(y)
        groups.extend([user] * len(y))
    if not ys:
        raise ValueError(f"the LEAF {split} split holds no records")
    dataset = Dataset(np.concatenate(xs), np.concatenate(ys), f"{name}/{split}", num_classes,
                      mean=mean, std=std)
    return dataset, np.asarray(groups)


def federate_leaf(
    train: LeafData,
    test: LeafData,
    *,
    input_shape: Sequence[int] = (1, 28, 28),
    num_classes: int = 62,
    name: str = "femnist",
    mean: Sequence[float] | float = 0.0,
    std: Sequence[float] | float = 1.0,
) -> FederatedDataset:
    """A natural per-user federation from numeric LEAF splits (e.g. FEMNIST).

    Each user's ``x`` entries are reshaped to ``input_shape`` (FEMNIST: 784 values ->
    1 x 28 x 28, kept as stored). Text datasets (Sent140, Shakespeare) need tokenising first.
    """
    shape = tuple(check_int("input_shape", d, 1) for d in input_shape)
    if len(shape) not in (2, 3):
        raise ValueError(
            f"input_shape = {shape} is out of range: must be (H, W) or (C, H, W)"
        )
    channels = shape[0] if len(shape) == 3 else 1
    mean = np.broadcast_to(np.asarray(mean, dtype=float), (channels,))
    std = np.broadcast_to(np.asarray(std, dtype=float), (channels,))
    pool_train, g_train = _leaf_pool(train, shape, "train", name, num_classes, mean, std)
    pool_test, g_test = _leaf_pool(test, shape, "test", name, num_classes, mean, std)
    return federate_groups(pool_train, g_train, pool_test, g_test,
                           name=f"{name}/natural({len(set(g_train.tolist()))} users)")
