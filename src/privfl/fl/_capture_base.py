"""The base of the captured wrappers: the shared forward context, a layer's record and the
:class:`Layer` protocol (forward on stacked rows, ``sq_norms``, ``weighted_sums``,
``per_example``) that :mod:`privfl.fl._capture` and :mod:`privfl.fl._capture_sequence`
implement."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

__all__ = ["Context", "Layer", "Record", "UnsupportedModelError"]


class UnsupportedModelError(RuntimeError):
    """The layer-wise fast path cannot handle this model; the message says why."""


@dataclass
class Record:
    layer: Layer
    a: torch.Tensor
    out: torch.Tensor
    cache: dict = field(default_factory=dict)


class Context:
    """State shared by the wrappers during one forward of ``m`` clients x ``b`` rows."""

    def __init__(self) -> None:
        self.m = 1
        self.b = 0
        self.params: dict[str, torch.Tensor] = {}
        self.capture = False
        self.records: list[Record] = []
        self.real: list[int] = []
        self.generators: list[torch.Generator | None] = []
        self.keep_masks = False
        self.rows: dict[str, torch.Tensor] = {}
        self.single = True

    def begin(self, m, b, params, *, capture, real, generators, rows=None,
              single=True) -> None:
        """Start a forward. With ``m == 1`` and ``single`` (the looped layout) the single-row
        kernels run (``F.linear``, one convolution call) on ``rows``: the client's parameters
        without the leading dimension, e.g. autograd leaves, so no select/backward copies are
        made. ``single=False`` (the batched layout) runs a one-row chunk through the stacked
        kernels (``bmm``) like any other chunk, so that a row's arithmetic does not depend on
        the size of its chunk."""
        self.m, self.b, self.params, self.capture = m, b, params, capture
        self.real, self.generators = list(real), list(generators)
        self.records = []
        self.single = m == 1 and bool(single)
        if self.single:
            self.rows = rows if rows is not None else {n: v[0] for n, v in params.items()}
        else:
            self.rows = {}

    def end(self) -> None:
        self.params, self.rows, self.records, self.generators = {}, {}, [], []

    def row(self, full: str, j: int) -> torch.Tensor:
        return self.rows[full] if self.single else self.params[full][j]

    def record(self, layer: Layer, a: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if not self.capture:
            return out
        if any(r.layer is layer for r in self.records):
            raise UnsupportedModelError(
                f"layer {layer.prefix or '<root>'!r} is called more than once per forward "
                "(weight sharing): its per-example gradient is not a single (a, delta) product"
            )
        if not out.requires_grad:
            out = out.detach().requires_grad_(True)
        self.records.append(Record(layer, a.detach(), out))
        return out


class Layer(nn.Module):
    """Base class of the parameter-owning wrappers."""

    def __init__(self, ctx: Context, prefix: str, names: dict[str, str]) -> None:
        super().__init__()
        self.ctx = ctx
        self.prefix = prefix
        self.names = names  # local name -> full name

    def p(self, local: str) -> torch.Tensor | None:
        """``[m, ...]`` stacked parameter, or the single client's row (``ctx.single``)."""
        full = self.names.get(local)
        if full is None:
            return None
        return self.ctx.rows[full] if self.ctx.single else self.ctx.params[full]

    #: size of the per-example gradients this layer materialises for one example
    per_example_numel = 0

    # the three operations the trainer needs from every layer
    def sq_norms(self, rec: Record, delta: torch.Tensor) -> torch.Tensor:  # [N]
        raise NotImplementedError

    def weighted_sums(self, rec: Record, delta, weights) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def per_example(self, rec: Record, delta) -> dict[str, torch.Tensor]:  # full -> [N, ...]
        raise NotImplementedError
