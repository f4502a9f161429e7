"""Records held by several clients: the multiplicity of a partition.

A record's identity is its index in the pooled training set, the index the partitioner drew
(never pixel equality: two equal images are two records). A partition whose clients sample
independently from the full pool (Dirichlet with ``disjoint=False``, Zheng et al. 2021's
reference code) can give one record to ``k`` clients; a record-level guarantee must then
account for the ``k`` holders' releases together (:mod:`privfl.accounting.parallel`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["RecordSharing", "record_sharing"]


@dataclass(frozen=True)
class RecordSharing:
    """How many clients hold each training record of a partition.

    Attributes
    ----------
    max_multiplicity
        ``k``: the largest number of clients holding one record (1: disjoint clients).
    distinct_records
        Distinct training records used by at least one client.
    shared_records
        Distinct records held by two or more clients.
    holder_sets
        The distinct sets of clients (sorted client positions) that hold a common record, one
        per set, for the shared records only (empty when disjoint).
    """

    max_multiplicity: int = 1
    distinct_records: int = 0
    shared_records: int = 0
    holder_sets: tuple[tuple[int, ...], ...] = ()

    @property
    def disjoint(self) -> bool:
        return self.max_multiplicity == 1

    def describe(self) -> str:
        """One line for privacy cards: the largest multiplicity and how it is accounted."""
        if self.disjoint:
            return ("k = 1: every training record belongs to one client (disjoint partition); "
                    "the guarantee is the worst client's")
        return (f"k = {self.max_multiplicity}: {self.shared_records} of {self.distinct_records} "
                f"distinct training records are held by 2..{self.max_multiplicity} clients "
                "(overlapping partition); a record's guarantee composes the mechanisms of all "
                "the clients holding it (worst record reported) and covers what they release, "
                "not what a holder knows from its own copy")


def record_sharing(train_indices: Sequence[np.ndarray]) -> RecordSharing:
    """:class:`RecordSharing` of per-client index arrays into one training pool (indices are
    distinct within a client, as :class:`~privfl.data.FederatedDataset` checks)."""
    if len(train_indices) == 0:
        raise ValueError("train_indices = [] is out of range: must hold >= 1 client")
    records = np.concatenate([np.asarray(idx, dtype=np.int64) for idx in train_indices])
    owners = np.repeat(np.arange(len(train_indices), dtype=np.int64),
                       [len(idx) for idx in train_indices])
    order = np.lexsort((owners, records))
    records, owners = records[order], owners[order]
    distinct, starts, counts = np.unique(records, return_index=True, return_counts=True)
    shared = np.flatnonzero(counts > 1)
    holder_sets = tuple(sorted({tuple(owners[starts[i]:starts[i] + counts[i]].tolist())
                                for i in shared}))
    return RecordSharing(
        max_multiplicity=int(counts.max()) if counts.size else 1,
        distinct_records=int(distinct.size),
        shared_records=int(shared.size),
        holder_sets=holder_sets,
    )
