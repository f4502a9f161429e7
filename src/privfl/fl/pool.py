"""A shared data pool: every record once on the device; clients and replicas are index tensors.

The rows of client ``j`` are ``pool.x[indices[j]]``. Monte Carlo replicas of one client repeat
that client's index tensor (no data copy), and a worker of a distributed backend keeps one pool
for the whole run and receives only index tensors. :meth:`CohortTrainer.train_pool` and
:meth:`CohortTrainer.train_streams` train from a pool; :meth:`CohortTrainer.train` (per-client
``(x, y)`` pairs) concatenates its pairs into a pool for the call and gives the same results.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["DataPool", "PooledClients", "inputs_to"]


def inputs_to(x: torch.Tensor, device, dtype: torch.dtype | None) -> torch.Tensor:
    """``x`` on ``device`` (None: where it is), floating inputs in ``dtype`` (the model's);
    integer inputs (token ids of text models) keep their integer dtype."""
    keep = dtype is None or not (x.dtype.is_floating_point or x.dtype.is_complex)
    return x.to(device=device, dtype=None if keep else dtype)


def _check_pair(name: str, x: object, y: object) -> None:
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise ValueError(f"{name} must hold torch tensors x and y")
    if x.dim() < 1 or y.dim() < 1 or x.shape[0] != y.shape[0]:
        raise ValueError(
            f"{name} has x {tuple(x.shape)} and y {tuple(y.shape)}: need the same number of "
            "records in the first dimension"
        )


class DataPool:
    """Records ``x: [N, *input_shape]`` and labels ``y: [N, ...]`` held once.

    Parameters
    ----------
    x, y
        The records (floating ``x`` is used in the model's dtype; integer ``x``, token ids,
        stays integer) and their targets. ``N >= 1``.
    device, dtype
        Optional placement of ``x`` (and ``y``: device only); default: as given, no copy.

    A trainer needs ``x`` in the model's dtype on the parameters' device: :meth:`on` returns
    such a pool, converting at most once per (device, dtype) (the converted pool is cached on
    this one, so build the pool where and as the model runs to keep one copy).
    """

    def __init__(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        _check_pair("DataPool", x, y)
        if x.shape[0] == 0:
            raise ValueError("x has 0 records: a pool needs at least one")
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise ValueError(f"dtype = {dtype!r} is not a torch.dtype")
        self.x = inputs_to(x, device, dtype)
        self.y = y.to(device=self.x.device)
        self._views: dict[tuple[torch.device, torch.dtype], DataPool] = {}

    @classmethod
    def from_clients(
        cls,
        client_data: Sequence[tuple[torch.Tensor, torch.Tensor]],
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> tuple[DataPool, list[torch.Tensor]]:
        """One pool from per-client ``(x_j, y_j)`` pairs and each client's index tensor
        (``arange(offset_j, offset_j + n_j)``): the rows are concatenated in client order."""
        if isinstance(client_data, (tuple, torch.Tensor)) or not isinstance(
            client_data, Sequence
        ) or not client_data:
            raise ValueError("client_data must be a non-empty list of (x, y) tensor pairs")
        xs, ys = [], []
        for j, pair in enumerate(client_data):
            try:
                x, y = pair
            except (TypeError, ValueError) as error:
                raise ValueError(f"client_data[{j}] is not an (x, y) pair") from error
            _check_pair(f"client_data[{j}]", x, y)
            if xs and tuple(x.shape[1:]) != tuple(xs[0].shape[1:]):
                raise ValueError(
                    f"client_data[{j}] has inputs of shape {tuple(x.shape[1:])}: client 0 has "
                    f"{tuple(xs[0].shape[1:])}"
                )
            xs.append(x)
            ys.append(y)
        pool = cls(torch.cat([inputs_to(x, device, dtype) for x in xs]),
                   torch.cat([y.to(device) for y in ys]))
        offsets = np.cumsum([0] + [x.shape[0] for x in xs]).tolist()
        indices = [torch.arange(lo, hi, device=pool.device)
                   for lo, hi in zip(offsets[:-1], offsets[1:], strict=True)]
        return pool, indices

    # ------------------------------------------------------------------ properties
    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def device(self) -> torch.device:
        return self.x.device

    @property
    def dtype(self) -> torch.dtype:
        return self.x.dtype

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x.shape[1:])

    def __repr__(self) -> str:
        return (f"DataPool(records={len(self)}, input_shape={self.input_shape}, "
                f"dtype={self.dtype}, device={self.device})")

    # ------------------------------------------------------------------ use
    def on(self, device: torch.device | str, dtype: torch.dtype) -> DataPool:
        """This pool with ``x`` in ``dtype`` on ``device`` (itself if it already is; else a
        converted pool, made once and cached)."""
        device = torch.device(device)
        same_device = self.x.device == device or (
            device.index is None and self.x.device.type == device.type
        )
        if same_device and inputs_to(self.x[:0], None, dtype).dtype == self.x.dtype:
            return self
        key = (device, dtype)
        if key not in self._views:
            self._views[key] = DataPool(self.x, self.y, device=device, dtype=dtype)
        return self._views[key]

    def rows(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x[index], y[index])`` (a gather: new tensors)."""
        index = torch.as_tensor(index, dtype=torch.int64, device=self.device)
        return self.x[index], self.y[index]

    def check_indices(self, indices: object, count: int | None = None,
                      name: str = "indices") -> list[torch.Tensor]:
        """Validated index tensors, one per row: int64, 1-D, on the pool's device.

        Each must hold distinct rows of the pool (``0 <= index < N``): a record listed twice
        in one client would be sampled as two records, which the accountant (n_j distinct
        records) does not assume. Different rows may share indices (replicas of a client).
        ``indices`` is a sequence of 1-D integer tensors / arrays / lists, or a 2-D integer
        tensor ``[M, n]``.
        """
        if isinstance(indices, torch.Tensor) and indices.dim() == 2:
            indices = list(indices)
        if isinstance(indices, (str, bytes, torch.Tensor)) or not isinstance(indices, Sequence):
            raise ValueError(
                f"{name} must be a sequence of 1-D index tensors (one per row) or a 2-D tensor"
            )
        if count is not None and len(indices) != count:
            raise ValueError(
                f"{name} has {len(indices)} rows: must match start_params ({count})"
            )
        rows = []
        for j, index in enumerate(indices):
            try:
                t = torch.as_tensor(index, device=self.device)
            except (TypeError, ValueError, RuntimeError) as error:
                raise ValueError(f"{name}[{j}] is not an integer index tensor") from error
            if t.dim() != 1 or t.dtype.is_floating_point or t.dtype.is_complex or (
                t.dtype == torch.bool
            ):
                raise ValueError(
                    f"{name}[{j}] has shape {tuple(t.shape)} and dtype {t.dtype}: must be a "
                    "1-D integer tensor of pool rows"
                )
            rows.append(t.to(torch.int64))
        if not rows:
            return rows
        flat = torch.cat(rows)
        if flat.numel():
            low, high = int(flat.min()), int(flat.max())
            if low < 0 or high >= len(self):
                raise ValueError(
                    f"{name} has rows in [{low}, {high}]: must be in [0, {len(self) - 1}] "
                    f"(the pool has {len(self)} records)"
                )
            owner = torch.repeat_interleave(
                torch.arange(len(rows), device=self.device),
                torch.tensor([r.numel() for r in rows], device=self.device),
            )
            keys = owner * len(self) + flat
            if torch.unique(keys).numel() != keys.numel():
                j = next(j for j, r in enumerate(rows) if torch.unique(r).numel() != r.numel())
                raise ValueError(
                    f"{name}[{j}] lists a pool row more than once: a row's records must be "
                    "distinct (the accountant counts n_j distinct records)"
                )
        return rows


class PooledClients(Sequence):
    """Every client's ``(x_j, y_j)`` as a sequence over one shared pool, without per-client
    tensors: the records any client holds are copied once into a pool (in the model's dtype),
    the clients' rows are one flat int64 array with offsets, and ``clients[j]`` gathers client
    j's records when asked (only the cohort's, on a round's hot path). Equal, value for value,
    to ``(x[idx_j], y[idx_j])`` of the source arrays.

    Parameters
    ----------
    x, y
        The source records (numpy arrays or tensors), e.g. a dataset's inputs and labels.
    indices
        One 1-D integer array per client (rows of ``x``), in client order.
    dtype, device
        dtype of the pooled inputs (labels stay int64) and their device.
    """

    def __init__(self, x, y, indices: Sequence, dtype: torch.dtype,
                 device: torch.device | str = "cpu") -> None:
        sizes = np.fromiter((len(i) for i in indices), dtype=np.int64, count=len(indices))
        flat = (np.concatenate([np.asarray(i, dtype=np.int64) for i in indices])
                if len(indices) else np.zeros(0, dtype=np.int64))
        used, local = np.unique(flat, return_inverse=True)
        self.x = inputs_to(torch.as_tensor(np.ascontiguousarray(np.asarray(x)[used])), device,
                           dtype)
        self.y = torch.as_tensor(np.ascontiguousarray(np.asarray(y)[used])).to(
            device=device, dtype=torch.int64)
        self.index = torch.as_tensor(local.reshape(-1), dtype=torch.int64, device=device)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def __len__(self) -> int:
        return int(self.offsets.size - 1)

    def __getitem__(self, j):  # type: ignore[override]
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        j = int(j)
        if j < 0:
            j += len(self)
        if not 0 <= j < len(self):
            raise IndexError(f"client {j} is out of range: there are {len(self)} clients")
        rows = self.index[self.offsets[j]: self.offsets[j + 1]]
        return self.x[rows], self.y[rows]

    def size(self, j: int) -> int:
        """Records of client ``j``."""
        return int(self.offsets[j + 1] - self.offsets[j])

    def mean_client_bytes(self) -> float:
        """Mean bytes of one client's ``(x_j, y_j)`` (inputs and labels)."""
        per_record = (self.x[0].numel() * self.x.element_size() + self.y.element_size()
                      if len(self.x) else 0)
        return per_record * float(self.offsets[-1]) / max(1, len(self))

    def __repr__(self) -> str:
        return (f"PooledClients(clients={len(self)}, records={int(self.offsets[-1])}, "
                f"pooled={len(self.x)})")
