"""Gaussian distortion with one noise std per parameter tensor (per layer).

Zhang, Chen and Yang 2022's Algorithm 3 adds ``N(0, sigma_eps^2 I_d)`` to the whole upload;
layers of a real model differ in scale by orders of magnitude (docs/distortion.md), so a
practitioner may want a std per parameter tensor::

    W~ = W + N(0, diag(s_1^2, ..., s_d^2)),   s_i = the std of the parameter holding coordinate i

:func:`resolve_layer_stds` maps fnmatch patterns on parameter names to stds (every pattern must
match, no parameter may match two); :class:`LayerGaussianDistortion` applies the per-coordinate
stds in the flat layout of the model (parameters in order, each flattened). Its TV for a
``N(mu, diag(v))`` parameter is :func:`~privfl.distortion.diagonal.tv_gaussian_diagonal` of
``v`` and ``v + s^2``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

import numpy as np
import torch

from privfl._validation import check_nonnegative
from privfl.mechanisms.noise import standard_normal_

__all__ = ["LayerGaussianDistortion", "resolve_layer_stds"]


def resolve_layer_stds(names: Sequence[str], default: float,
                       layers: Mapping[str, float], key: str = "layers") -> dict[str, float]:
    """``parameter name -> noise std``: the std of the pattern of ``layers`` that matches the
    name (:func:`fnmatch.fnmatchcase`), else ``default``.

    Refused (``ValueError`` naming ``key``): a pattern that matches none of ``names``, a name
    that two patterns match, a negative or non-finite std.
    """
    default = check_nonnegative("default", default)
    matched: dict[str, str] = {}
    for pattern, std in layers.items():
        std = check_nonnegative(f"{key}[{pattern!r}]", std)
        hits = [n for n in names if fnmatchcase(n, pattern)]
        if not hits:
            raise ValueError(f"{key}[{pattern!r}] matches no parameter of the model: its "
                             f"parameters are {', '.join(names)}")
        for name in hits:
            if name in matched:
                raise ValueError(f"{key}: parameter {name!r} is matched by both "
                                 f"{matched[name]!r} and {pattern!r}: make the patterns "
                                 "disjoint")
            matched[name] = pattern
    return {n: float(layers[matched[n]]) if n in matched else default for n in names}


@dataclass(frozen=True, eq=False)
class LayerGaussianDistortion:
    """``W~ = W + N(0, diag(s^2))`` with ``s`` one std per coordinate (``[d]``, from
    :func:`resolve_layer_stds` spread over each parameter's elements); fresh noise per row and
    call, from the generator or, with ``secure=True``, ``os.urandom``."""

    stds: torch.Tensor
    secure: bool = False
    name = "gaussian-layers"
    zero_mean = True

    def __post_init__(self) -> None:
        s = self.stds
        if (not isinstance(s, torch.Tensor) or s.dim() != 1 or not s.is_floating_point()
                or not bool(torch.isfinite(s).all()) or bool((s < 0).any())):
            raise ValueError("stds must be a 1-D floating-point tensor of finite stds >= 0")

    @classmethod
    def from_layers(cls, stds: Mapping[str, float], sizes: Mapping[str, int],
                    secure: bool = False) -> LayerGaussianDistortion:
        """From ``name -> std`` and ``name -> number of elements`` (the flat layout's order is
        the order of ``stds``)."""
        parts = [torch.full((int(sizes[n]),), float(s), dtype=torch.float64)
                 for n, s in stds.items()]
        return cls(torch.cat(parts), secure)

    def __call__(self, models: torch.Tensor, generator: torch.Generator | None = None
                 ) -> torch.Tensor:
        if (not isinstance(models, torch.Tensor) or models.dim() != 2
                or models.shape[1] != self.stds.numel()):
            raise ValueError(f"models must be an [M, {self.stds.numel()}] tensor (one flat "
                             "model per row)")
        noise = torch.empty(models.shape, dtype=models.dtype, device=models.device)
        standard_normal_(noise, generator, secure=self.secure)
        return models + noise.mul_(self.stds.to(models.dtype).to(models.device))

    def tv(self, parameter_variance: float | np.ndarray) -> float:
        """The TV if the unprotected parameter is ``N(mu, diag(v))`` (a scalar ``v``: the same
        variance on every coordinate), exact (:mod:`privfl.distortion.diagonal`)."""
        from privfl.distortion.diagonal import tv_gaussian_diagonal

        d = self.stds.numel()
        v = np.broadcast_to(np.asarray(parameter_variance, dtype=float), (d,))
        return tv_gaussian_diagonal(v, v + self.stds.double().numpy() ** 2).tv

    def __repr__(self) -> str:
        values = sorted({float(s) for s in self.stds.unique()})
        shown = ", ".join(f"{s:g}" for s in values[:4]) + (", ..." if len(values) > 4 else "")
        return (f"LayerGaussianDistortion(d={self.stds.numel()}, stds in {{{shown}}}, "
                f"secure={self.secure})")
