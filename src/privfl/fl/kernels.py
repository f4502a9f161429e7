"""Per-client gradient sums of one batch: the kernels of a local (DP-)SGD step.

For ``m`` stacked rows (clients) with ``b`` examples each (``x``: ``[m b, ...]``, row j's
examples at ``j b .. j b + b - 1``; ``mask`` False in padded slots; ``real[j]`` the real ones):

* :func:`plain_sums` — ``sum_i g_i`` per row (non-private training), one backward;
* :func:`clipped` — ``sum_i c_i g_i`` with ``c_i = min(1, C / ||g_i||)`` (flat clipping over all
  parameters), per-example norms and losses. On the captured net (:class:`StackedModel`):
  one forward, ``autograd.grad`` of the summed loss w.r.t. every layer's output, per-layer
  squared norms (ghost norms for Linear, materialised per-example gradients for Conv2d,
  ``vmap`` for other layers) and weighted sums (``(c * delta)^T a``); otherwise
  ``torch.func`` ``vmap(grad)`` per row (:func:`clipped_vmap`);
* :func:`per_example_gradients` — materialised ``[m, b, *shape]`` gradients (checks).

``single``: a chunk of one row uses the single-row kernels (``F.linear``; the trainer's looped
layout); otherwise rows run the stacked kernels (``bmm``) whatever their number, so a row's bits
do not depend on the size of its chunk (``docs/engine.md``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from privfl.fl._capture import UnsupportedModelError
from privfl.fl.random_streams import SEED_HIGH
from privfl.fl.stacked_model import StackedModel
from privfl.mechanisms.clipping import clip_factors

__all__ = ["GradientResult", "clipped", "per_example_gradients", "plain_sums"]


@dataclass
class GradientResult:
    """Clipped per-client gradient sums of one batch (see :func:`clipped`)."""

    sums: dict[str, torch.Tensor]  #: name -> [m, *shape], sum_i c_i g_i
    norms: torch.Tensor  #: [m, b] unclipped per-example norms (0 in padded slots)
    factors: torch.Tensor  #: [m, b] clip factors c_i (0 in padded slots)
    losses: torch.Tensor  #: [m, b] per-example losses (0 in padded slots)


def plain_sums(model: StackedModel, params, x, y, mask, real, gens, single: bool):
    """Unclipped per-client gradient sums (non-private training) and the losses."""
    m = len(real)
    one = m == 1 and single
    if one:  # leaves are the client's rows: no select/copy in the backward
        leaves = {n: p[0].detach().requires_grad_(True) for n, p in params.items()}
        stacked = {n: v.unsqueeze(0) for n, v in leaves.items()}
    else:
        leaves = {n: p.detach().requires_grad_(True) for n, p in params.items()}
        stacked = leaves
    with torch.enable_grad():
        if model.uses_fast_path:
            ctx = model.ctx
            ctx.begin(m, x.shape[0] // m, stacked, capture=False, real=real, generators=gens,
                      rows=leaves if one else None, single=single)
            try:
                out = model.net(x)
            finally:
                ctx.end()
        else:
            out = torch.cat([
                functional_call(model.plain, {n: v[j] for n, v in stacked.items()}, (xj,))
                for j, xj in enumerate(x.reshape(m, -1, *x.shape[1:]))
            ])
        losses = model.losses(out, y, mask)
        values = torch.autograd.grad(losses.sum(), list(leaves.values()), allow_unused=True)
    sums = {
        n: torch.zeros_like(stacked[n]) if g is None else g.reshape(stacked[n].shape)
        for n, g in zip(leaves, values, strict=True)
    }
    return sums, losses.detach()


def clipped(model: StackedModel, clip_norm: float, params, x, y, mask, real, gens,
            single: bool) -> GradientResult:
    """Flat-clipped per-client gradient sums (captured net, or the ``torch.func`` fallback,
    which a model the capture turns out not to support switches to for good)."""
    if model.uses_fast_path:
        try:
            return _clipped_layers(model, clip_norm, params, x, y, mask, real, gens, single)
        except UnsupportedModelError as error:
            model.disable_fast_path(str(error))
    return _clipped_vmap(model, clip_norm, params, x, y, mask, real, gens)


@contextlib.contextmanager
def output_grads(model: StackedModel, params, x, y, mask, real, gens, single: bool):
    """Forward through the captured net; yield ``(losses, records, deltas)`` with ``deltas``
    the per-example gradients of the summed loss w.r.t. each layer's output."""
    ctx, m = model.ctx, len(real)
    ctx.begin(m, x.shape[0] // m, params, capture=True, real=real, generators=gens,
              single=single)
    try:
        with torch.enable_grad():
            losses = model.losses(model.net(x), y, mask)
            records = list(ctx.records)
            deltas = torch.autograd.grad(losses.sum(), [r.out for r in records],
                                         allow_unused=True)
        yield losses, records, [torch.zeros_like(r.out) if d is None else d
                                for r, d in zip(records, deltas, strict=True)]
    finally:
        ctx.end()


def per_example_grad_fn(model: StackedModel):
    """``vmap(grad(loss of one example))`` over the examples of one client (torch.func)."""
    module, loss_fn = model.plain, model.loss_fn
    if any(isinstance(m, nn.RNNBase) for m in module.modules()):  # no vmap batching rule
        raise ValueError(model.fallback_reason or "recurrent layers need the captured net: "
                         "per_example='vmap' cannot run them")

    def loss_one(p, xi, yi):
        return loss_fn(functional_call(module, p, (xi.unsqueeze(0),)), yi.unsqueeze(0)).sum()

    return vmap(grad(loss_one), in_dims=(None, 0, 0), randomness="different")


def _clipped_layers(model, clip_norm, params, x, y, mask, real, gens, single) -> GradientResult:
    m = len(real)
    b = x.shape[0] // m
    with output_grads(model, params, x, y, mask, real, gens, single) as (losses, records,
                                                                          deltas):
        sq = None
        for rec, delta in zip(records, deltas, strict=True):
            layer_sq = rec.layer.sq_norms(rec, delta)
            sq = layer_sq if sq is None else sq + layer_sq
        norms = sq.sqrt().reshape(m, b) if sq is not None else x.new_zeros(m, b)
        factors = clip_factors(norms, clip_norm, mask)
        sums = {}
        for rec, delta in zip(records, deltas, strict=True):
            sums.update(rec.layer.weighted_sums(rec, delta, factors))
    for name in model.layout.param_names:  # layers not reached by this forward contribute 0
        if name not in sums:
            sums[name] = torch.zeros_like(params[name])
    if mask is not None:
        norms = norms * mask
    return GradientResult(sums, norms.detach(), factors, losses.detach().reshape(m, b))


def _clipped_vmap(model, clip_norm, params, x, y, mask, real, gens) -> GradientResult:
    m = len(real)
    b = x.shape[0] // m
    names = model.layout.param_names
    per_grad = per_example_grad_fn(model)
    xs, ys = x.reshape(m, b, *x.shape[1:]), y.reshape(m, b)
    sums, norms, factors, losses = {n: [] for n in names}, [], [], []
    for j in range(m):
        pj = {n: v[j].detach() for n, v in params.items()}
        seed = int(torch.randint(0, SEED_HIGH, (1,), generator=gens[j],
                                 device=gens[j].device)) if gens[j] is not None else None
        with torch.random.fork_rng(devices=[]):
            if seed is not None:
                torch.manual_seed(seed)
            with torch.enable_grad():
                per = per_grad(pj, xs[j], ys[j])
            with torch.no_grad():
                out = functional_call(model.plain, pj, (xs[j],))
        n_j = torch.zeros(b, dtype=x.dtype, device=x.device)
        for g in per.values():
            n_j = n_j + g.reshape(b, -1).square().sum(1)
        n_j = n_j.sqrt()
        mj = None if mask is None else mask[j]
        c_j = clip_factors(n_j, clip_norm, mj)
        for name in names:
            sums[name].append(torch.tensordot(c_j, per[name], dims=([0], [0])))
        norms.append(n_j if mj is None else n_j * mj)
        factors.append(c_j)
        lj = model.loss_fn(out, ys[j])
        losses.append(lj if mj is None else lj * mj)
    return GradientResult(
        {n: torch.stack(v) for n, v in sums.items()},
        torch.stack(norms), torch.stack(factors), torch.stack(losses).detach(),
    )


def per_example_gradients(model: StackedModel, params, x, y, m: int, b: int, real, gens
                          ) -> dict[str, torch.Tensor]:
    """Materialised per-example gradients ``name -> [m, b, *shape]`` (from the same captured
    ``(a, delta)`` as training when the captured net runs; ``torch.func`` otherwise)."""
    names = model.layout.param_names
    if not model.uses_fast_path:
        per_grad = per_example_grad_fn(model)
        xs, ys = x.reshape(m, b, *x.shape[1:]), y.reshape(m, b)
        rows = [per_grad({n: v[j] for n, v in params.items()}, xs[j], ys[j]) for j in range(m)]
        return {n: torch.stack([r[n] for r in rows]) for n in names}
    result = {}
    with output_grads(model, params, x, y, None, real, gens, True) as (_, records, deltas):
        for rec, delta in zip(records, deltas, strict=True):
            for name, g in rec.layer.per_example(rec, delta).items():
                result[name] = g.reshape(m, b, *g.shape[1:])
    for name in names:
        if name not in result:
            result[name] = params[name].new_zeros((m, b, *model.layout.param_shapes[name]))
    return result
