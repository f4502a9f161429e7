"""Flat per-example L2 clipping.

Every example's gradient over **all** parameters (one flat vector) is scaled to L2 norm at most
``C``: ``clip(g) = g * min(1, C / ||g||)`` (Zheng et al. 2021, Alg. 2; Abadi et al.). The sum of
clipped gradients then has add/remove sensitivity ``C`` and replace-one sensitivity ``2C``.

The engine never needs the clipped per-example gradients themselves, only the clip factors
``c_i = min(1, C / ||g_i||)`` and the weighted sum ``sum_i c_i g_i`` (computed layer by layer
without materialising per-example gradients where that pays, see :mod:`privfl.fl.grad_sample`).
These helpers cover both the factor and the generic materialised case.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from privfl._validation import check_positive

__all__ = ["clip_factors", "clip_and_sum", "per_example_norms"]


def clip_factors(
    norms: torch.Tensor, clip_norm: float, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``c_i = min(1, C / ||g_i||)`` (1 for a zero gradient), times ``mask`` if given.

    ``norms`` holds per-example L2 norms (any shape); ``mask`` (same shape, bool or 0/1) zeroes
    the factors of padded slots.
    """
    clip_norm = check_positive("clip_norm", clip_norm)
    if not isinstance(norms, torch.Tensor):
        raise ValueError(f"norms = {norms!r} is not a torch.Tensor")
    tiny = torch.finfo(norms.dtype).tiny if norms.is_floating_point() else 1e-30
    factors = (clip_norm / norms.clamp_min(tiny)).clamp_max(1.0)
    if mask is not None:
        if mask.shape != norms.shape:
            raise ValueError(
                f"mask has shape {tuple(mask.shape)}: must match norms {tuple(norms.shape)}"
            )
        factors = factors * mask.to(factors.dtype)
    return factors


def per_example_norms(per_example_grads: Mapping[str, torch.Tensor], batch_dims: int = 1):
    """Flat L2 norm over all parameters of per-example gradients ``name -> [*batch, *shape]``."""
    if not per_example_grads:
        raise ValueError("per_example_grads = {} is out of range: must hold >= 1 parameter")
    total = None
    for name, g in per_example_grads.items():
        if g.dim() < batch_dims:
            raise ValueError(f"per_example_grads[{name!r}] has {g.dim()} dims < batch_dims")
        sq = g.reshape(*g.shape[:batch_dims], -1).pow(2).sum(-1)
        total = sq if total is None else total + sq
    return total.sqrt()


def clip_and_sum(
    per_example_grads: Mapping[str, torch.Tensor],
    clip_norm: float,
    mask: torch.Tensor | None = None,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Flat-clip materialised per-example gradients ``name -> [N, *shape]`` and sum them.

    Returns ``(sums, norms)``: ``sums[name]`` has shape ``shape``; ``norms`` the ``N`` unclipped
    per-example norms. ``mask`` (``N``) drops padded examples.
    """
    norms = per_example_norms(per_example_grads)
    factors = clip_factors(norms, clip_norm, mask)
    sums = {
        name: torch.tensordot(factors.to(g.dtype), g, dims=([0], [0]))
        for name, g in per_example_grads.items()
    }
    return sums, norms
