"""Running a torch model on a stacked cohort and capturing what per-example gradients need.

:func:`prepare_model` deep-copies a model and swaps its layers for wrappers that

* read each client's parameters from the shared :class:`Context` (``name -> [m, ...]``) and
  run all ``m`` clients' rows (client-major, ``m * b`` rows) through the layer — one call when
  one client runs alone (looped layout), ``bmm`` for Linear and a loop over clients for Conv2d
  otherwise (also for a one-row chunk of the batched layout);
* record the layer input ``a`` and output ``y`` so that one ``autograd.grad(loss, [y...])``
  yields every layer's output gradient ``delta`` without computing any weight gradient;
* compute per-example squared norms and clipped (weighted) sums from ``(a, delta)``
  (:mod:`privfl.fl.grad_sample`).

Supported with the fast path: ``nn.Linear`` and ``nn.Conv2d`` (groups 1, zero padding, all
parameters trainable), ``nn.Embedding`` and ``nn.LSTM`` (:mod:`privfl.fl._capture_sequence`),
with any parameter-free modules and functions in between (ReLU, pooling, flatten,
log_softmax, ...). Dropout modules draw their masks per example from the client's own
generator. Any other module with trainable parameters (GroupNorm, ...) gets a generic wrapper
whose per-example gradients come from ``torch.func`` (vmap of grad over the layer alone).
Models whose parameters cannot be assigned to such layers (parameters used directly in a
``forward``, layers called twice) are reported as unsupported; the trainer then falls back to
``torch.func.vmap(grad)`` over the whole model.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn
from torch.func import functional_call, grad, vmap

from privfl.fl import grad_sample as gs
from privfl.fl._capture_base import Context, Layer, UnsupportedModelError
from privfl.fl._capture_sequence import (
    EmbeddingLayer,
    LSTMModule,
    embedding_supported,
    lstm_supported,
)


class LinearLayer(Layer):
    def __init__(self, ctx, prefix, module: nn.Linear) -> None:
        names = {"weight": prefix + "weight"}
        if module.bias is not None:
            names["bias"] = prefix + "bias"
        super().__init__(ctx, prefix, names)
        self.in_features, self.out_features = module.in_features, module.out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctx, w, b = self.ctx, self.p("weight"), self.p("bias")
        if ctx.single:
            out = F.linear(x, w, b)
        else:
            xs = x.reshape(ctx.m, -1, self.in_features)
            if b is None:
                out = torch.bmm(xs, w.transpose(1, 2))
            else:
                out = torch.baddbmm(b.unsqueeze(1), xs, w.transpose(1, 2))
            out = out.reshape(*x.shape[:-1], self.out_features)
        return ctx.record(self, x, out)

    def _flat(self, rec, delta):
        n = rec.a.shape[0]
        return rec.a.reshape(n, -1, self.in_features), delta.reshape(n, -1, self.out_features)

    def sq_norms(self, rec, delta):
        a, d = self._flat(rec, delta)
        return gs.linear_sq_norms(a, d, bias="bias" in self.names)

    def weighted_sums(self, rec, delta, weights):
        a, d = self._flat(rec, delta)
        m, positions = weights.shape[0], a.shape[1]
        rows = weights.repeat_interleave(positions, dim=1) if positions > 1 else weights
        gw, gb = gs.linear_weighted_sum(
            a.reshape(m, -1, self.in_features), d.reshape(m, -1, self.out_features), rows
        )
        out = {self.names["weight"]: gw}
        if "bias" in self.names:
            out[self.names["bias"]] = gb
        return out

    def per_example(self, rec, delta):
        gw, gb = gs.linear_per_example_grads(*self._flat(rec, delta))
        out = {self.names["weight"]: gw}
        if "bias" in self.names:
            out[self.names["bias"]] = gb
        return out


class Conv2dLayer(Layer):
    #: "auto" (cost rule of grad_sample.prefer_ghost_conv), True or False
    ghost: bool | str = "auto"
    #: a chunk's clients as one grouped convolution (``groups = m``) instead of a loop of m
    #: convolutions: "auto" (off the CPU, where the loop was faster; one launch instead of m
    #: on a GPU), True or False
    grouped: bool | str = "auto"

    def __init__(self, ctx, prefix, module: nn.Conv2d) -> None:
        names = {"weight": prefix + "weight"}
        if module.bias is not None:
            names["bias"] = prefix + "bias"
        super().__init__(ctx, prefix, names)
        self.kernel_size = tuple(module.kernel_size)
        self.stride, self.padding = tuple(module.stride), tuple(module.padding)
        self.dilation = tuple(module.dilation)
        self.out_channels = module.out_channels
        self.in_channels = module.in_channels
        self.per_example_numel = module.weight.numel()

    def _conv(self, x, w, b):
        return F.conv2d(x, w, b, self.stride, self.padding, self.dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctx, w, b = self.ctx, self.p("weight"), self.p("bias")
        if ctx.single:
            out = self._conv(x, w, b)
        elif self.grouped is True or (self.grouped == "auto" and x.device.type != "cpu"):
            out = self._grouped_conv(x.reshape(ctx.m, -1, *x.shape[1:]), w, b)
        else:
            xs = x.reshape(ctx.m, -1, *x.shape[1:])
            out = torch.cat(
                [self._conv(xs[j], w[j], None if b is None else b[j]) for j in range(ctx.m)]
            )
        return ctx.record(self, x, out)

    def _grouped_conv(self, xs, w, b):
        """Client j's ``[b, C, H, W]`` rows of ``xs`` (``[m, b, C, H, W]``) convolved with its
        ``w[j]`` for every j in one call: channels of all clients side by side, ``groups=m``;
        the output rows in the loop's order (``[m * b, O, H', W']``)."""
        m, rows = xs.shape[:2]
        x = xs.transpose(0, 1).reshape(rows, m * xs.shape[2], *xs.shape[3:])
        out = F.conv2d(x, w.reshape(m * w.shape[1], *w.shape[2:]),
                       None if b is None else b.reshape(-1), self.stride, self.padding,
                       self.dilation, groups=m)
        out = out.reshape(rows, m, self.out_channels, *out.shape[2:]).transpose(0, 1)
        return out.reshape(m * rows, *out.shape[2:])

    def _use_ghost(self, rec, delta) -> bool:
        if self.ghost != "auto":
            return bool(self.ghost)
        positions = delta.shape[2] * delta.shape[3]
        patch = self.in_channels * self.kernel_size[0] * self.kernel_size[1]
        return gs.prefer_ghost_conv(positions, patch, self.out_channels)

    def _kw(self):
        return {"stride": self.stride, "padding": self.padding, "dilation": self.dilation}

    def sq_norms(self, rec, delta):
        n = delta.shape[0]
        if self._use_ghost(rec, delta):
            sq = gs.conv2d_ghost_sq_norms(rec.a, delta, self.kernel_size, **self._kw())
        else:
            g = gs.conv2d_per_example_grads(rec.a, delta, self.kernel_size, **self._kw())
            rec.cache["weight"] = g
            sq = g.reshape(n, -1).square().sum(1)
        if "bias" in self.names:
            gb = delta.sum((2, 3))
            rec.cache["bias"] = gb
            sq = sq + gb.square().sum(1)
        return sq

    def weighted_sums(self, rec, delta, weights):
        m, b = weights.shape
        w = weights.to(delta.dtype)
        out = {}
        if "weight" in rec.cache:
            g = rec.cache["weight"]
            out[self.names["weight"]] = torch.bmm(
                w.unsqueeze(1), g.reshape(m, b, -1)
            ).reshape(m, *g.shape[1:])
        else:
            out[self.names["weight"]] = gs.conv2d_weighted_sum(
                rec.a.reshape(m, b, *rec.a.shape[1:]),
                delta.reshape(m, b, *delta.shape[1:]),
                w,
                self.kernel_size,
                **self._kw(),
            )
        if "bias" in self.names:
            gb = rec.cache.get("bias")
            if gb is None:
                gb = delta.sum((2, 3))
            out[self.names["bias"]] = torch.bmm(w.unsqueeze(1), gb.reshape(m, b, -1)).squeeze(1)
        return out

    def per_example(self, rec, delta):
        out = {
            self.names["weight"]: gs.conv2d_per_example_grads(
                rec.a, delta, self.kernel_size, **self._kw()
            )
        }
        if "bias" in self.names:
            out[self.names["bias"]] = delta.sum((2, 3))
        return out


class GenericLayer(Layer):
    """Any other module with trainable parameters: forward per client with ``functional_call``,
    per-example gradients with ``torch.func`` (vmap over examples of grad over the module)."""

    def __init__(self, ctx, prefix, module: nn.Module) -> None:
        names = {n: prefix + n for n, p in module.named_parameters() if p.requires_grad}
        super().__init__(ctx, prefix, names)
        self.inner = module
        self.per_example_numel = sum(p.numel() for p in module.parameters() if p.requires_grad)

    def _call(self, j, x):
        params = {local: self.ctx.row(full, j) for local, full in self.names.items()}
        return functional_call(self.inner, params, (x,))

    def forward(self, *args, **kwargs):
        if len(args) != 1 or kwargs or not isinstance(args[0], torch.Tensor):
            raise UnsupportedModelError(
                f"module {self.prefix!r} ({type(self.inner).__name__}) takes other than one "
                "tensor input"
            )
        x, ctx = args[0], self.ctx
        if ctx.single:
            out = self._call(0, x)
        else:
            xs = x.reshape(ctx.m, -1, *x.shape[1:])
            out = torch.cat([self._call(j, xs[j]) for j in range(ctx.m)])
        if not isinstance(out, torch.Tensor):
            raise UnsupportedModelError(f"module {self.prefix!r} returns a non-tensor")
        return ctx.record(self, x, out)

    def _per_client(self, rec, delta):
        ctx = self.ctx
        m = ctx.m
        a = rec.a.reshape(m, -1, *rec.a.shape[1:])
        d = delta.reshape(m, -1, *delta.shape[1:])
        results = {full: [] for full in self.names.values()}
        for j in range(m):
            params = {local: ctx.row(full, j).detach() for local, full in self.names.items()}

            def inner(p, ai, di):
                out = functional_call(self.inner, p, (ai.unsqueeze(0),))
                return (out * di.unsqueeze(0)).sum()

            per = vmap(grad(inner), in_dims=(None, 0, 0))(params, a[j], d[j])
            for local, full in self.names.items():
                results[full].append(per[local])
        return {full: torch.cat(v) for full, v in results.items()}

    def per_example(self, rec, delta):
        return self._per_client(rec, delta)

    def sq_norms(self, rec, delta):
        per = self._per_client(rec, delta)
        rec.cache.update(per)
        n = delta.shape[0]
        return sum(g.reshape(n, -1).square().sum(1) for g in per.values())

    def weighted_sums(self, rec, delta, weights):
        m, b = weights.shape
        w = weights.to(delta.dtype).unsqueeze(1)
        out = {}
        for full in self.names.values():
            g = rec.cache.get(full)
            if g is None:
                g = self._per_client(rec, delta)[full]
            out[full] = torch.bmm(w, g.reshape(m, b, -1)).reshape(m, *g.shape[1:])
        return out


class DropoutLayer(nn.Module):
    """Dropout with masks drawn per example from each client's own generator.

    Element-wise for ``nn.Dropout``; whole channels for ``Dropout1d/2d/3d`` on batched inputs of
    3/4/5 dimensions. Draws ``[real rows, *mask shape]`` per client (padded rows get mask 0), so
    a client's masks do not depend on how the cohort is batched.
    """

    def __init__(self, ctx: Context, module: nn.Module, channel_dims: int) -> None:
        super().__init__()
        self.ctx, self.p_drop, self.channel_dims = ctx, float(module.p), channel_dims
        self.original = module
        self.last_mask: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p_drop == 0.0:
            return x
        if self.p_drop == 1.0:
            return x * 0.0
        ctx = self.ctx
        if self.channel_dims:
            if x.dim() != self.channel_dims + 2:
                return self.original(x)
            shape = (x.shape[1],) + (1,) * self.channel_dims
        else:
            shape = tuple(x.shape[1:])
        rows = x.shape[0]
        m = max(ctx.m, 1)
        per = rows // m if rows % m == 0 else rows
        mask = x.new_zeros((rows, *shape))
        keep = 1.0 - self.p_drop
        for j in range(m):
            real = ctx.real[j] if j < len(ctx.real) else per
            gen = ctx.generators[j] if j < len(ctx.generators) else None
            if real:
                mask[j * per : j * per + real].bernoulli_(keep, generator=gen)
        mask.div_(keep)
        if ctx.keep_masks:
            self.last_mask = mask
        return x * mask


_DROPOUT_CHANNEL_DIMS = {nn.Dropout: 0, nn.Dropout1d: 1, nn.Dropout2d: 2, nn.Dropout3d: 3}


def _conv_supported(module: nn.Conv2d) -> bool:
    return (
        module.groups == 1
        and module.padding_mode == "zeros"
        and not isinstance(module.padding, str)
        and all(p.requires_grad for p in module.parameters())
    )


class _Holder(nn.Module):
    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x):
        return self.net(x)


def prepare_model(model: nn.Module, trainable: list[str]) -> tuple[nn.Module, Context, list]:
    """A wrapped deep copy of ``model`` (train mode), its context and its parameter layers.

    Raises :class:`UnsupportedModelError` when some trainable parameter is not owned by a
    wrappable module, and ``ValueError`` for BatchNorm (it couples the examples of a batch).
    """
    ctx = Context()
    holder = _Holder(copy.deepcopy(model))
    holder.train()
    layers: list[Layer] = []

    def walk(module: nn.Module, prefix: str) -> None:
        for name, child in list(module.named_children()):
            full = prefix + name + "." if module is not holder else ""
            if isinstance(child, nn.modules.batchnorm._BatchNorm):
                raise ValueError(
                    f"model has BatchNorm at {full[:-1]!r}: batch statistics couple the examples "
                    "of a batch and break per-example clipping; use GroupNorm"
                )
            has_trainable = any(p.requires_grad for p in child.parameters())
            direct = any(p.requires_grad for p in child.parameters(recurse=False))
            if type(child) in _DROPOUT_CHANNEL_DIMS:
                new = DropoutLayer(ctx, child, _DROPOUT_CHANNEL_DIMS[type(child)])
            elif isinstance(child, nn.Linear) and all(p.requires_grad for p in child.parameters()):
                new = LinearLayer(ctx, full, child)
            elif isinstance(child, nn.Conv2d) and _conv_supported(child):
                new = Conv2dLayer(ctx, full, child)
            elif embedding_supported(child):
                new = EmbeddingLayer(ctx, full, child)
            elif lstm_supported(child):
                new = LSTMModule(ctx, full, child)
                layers.extend(new.parts)
            elif isinstance(child, nn.RNNBase) and has_trainable:
                raise UnsupportedModelError(
                    f"model has {type(child).__name__} at {full[:-1]!r} that the engine cannot "
                    "train with per-example gradients: it takes nn.LSTM with batch_first=True, "
                    "one direction, no proj_size, dropout 0 and every parameter trainable "
                    "(torch.func's vmap has no batching rule for the fused RNN kernels)")
            elif direct:
                new = GenericLayer(ctx, full, child)
            else:
                if has_trainable:
                    walk(child, full)
                continue
            setattr(module, name, new)
            if isinstance(new, Layer):
                layers.append(new)

    walk(holder, "")
    covered = [full for layer in layers for full in layer.names.values()]
    if sorted(covered) != sorted(trainable):
        missing = sorted(set(trainable) - set(covered))
        raise UnsupportedModelError(
            f"parameters {missing} are not owned by a module the engine can wrap (for example "
            "a parameter used directly in forward)"
        )
    return holder, ctx, layers
