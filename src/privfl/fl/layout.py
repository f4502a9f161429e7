"""Where each parameter sits in a flat row: the layout of stacked parameters ``[M, d]``.

A model's trainable parameters, in ``named_parameters`` order, are concatenated into one flat
row of ``d`` entries; ``M`` stacked models are ``[M, d]``. :class:`ParamLayout` converts between
that and ``name -> [M, *shape]`` views (no copy) and validates stacked parameters. Rows of
the trainer's buffers start at multiples of ``ROW_ALIGN`` bytes (:meth:`ParamLayout.aligned_rows`):
BLAS kernels round differently at different operand alignments, so a row's arithmetic would
otherwise depend on its position in the cohort (``docs/engine.md``, "Engine seams").
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from privfl.fl.params import num_stacked

__all__ = ["ROW_ALIGN", "ParamLayout"]

#: Byte alignment of every row of the trainer's parameter buffers (that of PyTorch's CPU
#: allocator): a row's arithmetic then does not depend on its position in the cohort.
ROW_ALIGN = 64


class ParamLayout:
    """Names, shapes and flat offsets of a model's trainable parameters (one floating dtype)."""

    def __init__(self, model: nn.Module) -> None:
        params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        if not params:
            raise ValueError("model has no trainable parameters")
        dtypes = {p.dtype for p in params.values()}
        if len(dtypes) != 1 or not next(iter(dtypes)).is_floating_point:
            raise ValueError(f"model parameters have dtypes {dtypes}: need one floating dtype")
        self.dtype: torch.dtype = dtypes.pop()
        self.param_names = list(params)
        self.param_shapes = {n: tuple(p.shape) for n, p in params.items()}
        self.numel = {n: p.numel() for n, p in params.items()}
        self.offsets: dict[str, int] = {}
        offset = 0
        for name in self.param_names:
            self.offsets[name] = offset
            offset += self.numel[name]
        self.num_params = offset

    def check(self, stacked: Mapping[str, torch.Tensor], name: str) -> int:
        """The row count ``M`` of stacked parameters ``name -> [M, *shape]`` (ValueError
        naming ``name`` unless they are exactly this model's parameters, floating point)."""
        count = num_stacked(stacked, name)
        if set(stacked) != set(self.param_names):
            raise ValueError(
                f"{name} has parameters {sorted(stacked)}: the model's trainable parameters are "
                f"{sorted(self.param_names)}"
            )
        for key in self.param_names:
            t = stacked[key]
            if tuple(t.shape[1:]) != self.param_shapes[key]:
                raise ValueError(
                    f"{name}[{key!r}] has shape {tuple(t.shape)}: must be "
                    f"[M, {', '.join(map(str, self.param_shapes[key]))}]"
                )
            if not t.is_floating_point():
                raise ValueError(f"{name}[{key!r}] has dtype {t.dtype}: must be floating point")
        return count

    def flatten(self, stacked: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Stacked parameters ``name -> [M, ...]`` as one new ``[M, d]`` tensor."""
        count = self.check(stacked, "stacked")
        first = stacked[self.param_names[0]]
        flat = torch.empty(count, self.num_params, dtype=self.dtype, device=first.device)
        for name, view in self.unflatten(flat).items():
            view.copy_(stacked[name])
        return flat

    def aligned_rows(self, stacked: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """:meth:`flatten` into a ``[M, d]`` view whose rows start at multiples of
        ``ROW_ALIGN`` bytes of one new buffer (row stride d rounded up).

        Every row then has the same address alignment as a freshly allocated tensor, whatever
        its position: BLAS kernels (MKL's gemv, used for single-example batches) round
        differently for operands at different 16-byte alignments, so with a stride of d a row's
        result would depend on its index in the cohort and a shard would not reproduce it.
        """
        first = stacked[self.param_names[0]]
        count = first.shape[0]
        per = max(1, ROW_ALIGN // torch.empty((), dtype=self.dtype).element_size())
        stride = -(-self.num_params // per) * per
        buffer = torch.empty(count, stride, dtype=self.dtype, device=first.device)
        flat = buffer[:, : self.num_params]
        for name, view in self.unflatten(flat).items():
            view.copy_(stacked[name])
        return flat

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views ``name -> [M, *shape]`` into a flat ``[M, d]`` tensor (no copy)."""
        if not isinstance(flat, torch.Tensor) or flat.dim() != 2 or flat.shape[1] != (
            self.num_params
        ):
            raise ValueError(f"flat must be a [M, {self.num_params}] tensor")
        m = flat.shape[0]
        return {
            name: flat[:, self.offsets[name] : self.offsets[name] + self.numel[name]].view(
                m, *self.param_shapes[name]
            )
            for name in self.param_names
        }

    def zeros(self, count: int, device: torch.device | str) -> dict[str, torch.Tensor]:
        """``name -> zeros [count, *shape]`` (probes)."""
        return {n: torch.zeros((count, *s), dtype=self.dtype, device=device)
                for n, s in self.param_shapes.items()}
