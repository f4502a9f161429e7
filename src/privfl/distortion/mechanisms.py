"""Protection mechanisms of Zhang, Chen and Yang 2022 as client-side steps (torch).

A client's protected upload is its locally trained parameter, distorted (their eq. 8,
``W~ = W + delta``). privfl provides:

* :class:`GaussianDistortion` — their Algorithm 3, ``W~ = W + N(0, sigma_eps^2 I_d)`` (the only
  mechanism the paper analyses; zero mean);
* :class:`RandomMask` — compression by a random mask: each coordinate kept with probability
  ``rho``, zeroed otherwise (an extension: the paper only names compression; the TV is exactly
  ``1 - rho^d``, :func:`~privfl.distortion.divergence.tv_random_mask`);
* :class:`PoissonRecordSampling` — their "data generation" (Algorithm 2): each local record
  joins the client's data of the round independently with probability ``p``;
  :func:`sampled_mean_steps` is Algorithm 2's step ``-eta mean_{i in S} g_i`` for many draws
  of ``S`` at once (an empty ``S`` gives no update: no data, no step);
* :func:`aggregate` — their Algorithm 1 (weights ``n_k / n``) or eq. (9) (uniform ``1/K``).

:class:`ClientProtection` bundles record sampling and distortions into the client-side hook of
:mod:`privfl.algorithms.protection`, which any algorithm on the seam can take (DP-FedAvg's
``protection=`` argument). Randomness comes from the ``torch.Generator`` passed in, or with
``secure=True`` from ``os.urandom`` (noise: :func:`privfl.mechanisms.gaussian_noise`; masks and
record sampling: :data:`privfl.mechanisms.SECURE_RANDOM`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

from privfl._validation import check_choice, check_int, check_nonnegative, check_range
from privfl.distortion.divergence import tv_gaussian_isotropic, tv_random_mask
from privfl.fl.aggregation import MeanAggregation
from privfl.mechanisms.noise import gaussian_noise
from privfl.mechanisms.sampling import poisson_indices
from privfl.mechanisms.secure import SECURE_RANDOM

__all__ = [
    "AGGREGATION_WEIGHTS",
    "ClientProtection",
    "GaussianDistortion",
    "ParameterDistortion",
    "PoissonRecordSampling",
    "RandomMask",
    "aggregate",
    "sampled_mean_steps",
]

#: Algorithm 1's size weights n_k / n, or eq. (9)'s uniform 1 / K.
AGGREGATION_WEIGHTS = ("size", "uniform")


def _rows(models: object) -> torch.Tensor:
    if not isinstance(models, torch.Tensor) or models.dim() != 2 or not models.is_floating_point():
        raise ValueError("models must be a floating-point [M, d] tensor (one flat model per row)")
    return models


def _uniforms(shape: tuple[int, ...], generator: torch.Generator | None, secure: bool,
              device: torch.device) -> torch.Tensor:
    """float64 uniforms on [0, 1) (53 random bits) from the generator or ``os.urandom``."""
    count = math.prod(shape)
    if secure:
        return SECURE_RANDOM.rand(count, device).view(shape)
    return torch.rand(shape, generator=generator, device=device, dtype=torch.float64)


class ParameterDistortion(Protocol):
    """``models [M, d], generator -> distorted [M, d]`` (a new tensor)."""

    name: str
    zero_mean: bool

    def __call__(self, models: torch.Tensor, generator: torch.Generator | None = None
                 ) -> torch.Tensor: ...


@dataclass(frozen=True)
class GaussianDistortion:
    """Algorithm 3: ``W~ = W + N(0, sigma_eps^2 I_d)``, fresh noise per row and call."""

    noise_variance: float
    secure: bool = False
    name = "gaussian"
    zero_mean = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_variance",
                           check_nonnegative("noise_variance", self.noise_variance))

    def __call__(self, models: torch.Tensor, generator: torch.Generator | None = None
                 ) -> torch.Tensor:
        rows = _rows(models)
        noise = gaussian_noise(rows.shape, math.sqrt(self.noise_variance), generator=generator,
                               secure=self.secure, dtype=rows.dtype, device=rows.device)
        return rows + noise

    def tv(self, parameter_variance: float | np.ndarray, dimension: int) -> float:
        """The TV if the unprotected parameter is ``N(mu, sigma^2 I_d)`` (Lemma 6.7's model,
        exact), or, given one variance per coordinate, ``N(mu, diag(sigma_i^2))``
        (:func:`~privfl.distortion.diagonal.tv_gaussian_diagonal`)."""
        if np.ndim(parameter_variance) > 0:
            from privfl.distortion.diagonal import tv_gaussian_diagonal

            v = np.asarray(parameter_variance, dtype=float)
            if v.size != dimension:
                raise ValueError(f"dimension = {dimension!r} does not match the {v.size} "
                                 "per-coordinate variances given")
            return tv_gaussian_diagonal(v, v + self.noise_variance).tv
        return tv_gaussian_isotropic(parameter_variance,
                                     parameter_variance + self.noise_variance, dimension)


@dataclass(frozen=True)
class RandomMask:
    """Random-mask compression: ``W~_j = W_j`` with probability ``rho``, else 0 (extension)."""

    keep_rate: float
    secure: bool = False
    name = "mask"
    zero_mean = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "keep_rate", check_range("keep_rate", self.keep_rate, 0.0, 1.0))

    def __call__(self, models: torch.Tensor, generator: torch.Generator | None = None
                 ) -> torch.Tensor:
        rows = _rows(models)
        keep = _uniforms(tuple(rows.shape), generator, self.secure, rows.device) < self.keep_rate
        return rows * keep.to(rows.dtype)

    def tv(self, dimension: int) -> float:
        """``1 - rho^d``: exact whenever the unprotected law puts no mass on zero coordinates."""
        return tv_random_mask(self.keep_rate, dimension)


@dataclass(frozen=True)
class PoissonRecordSampling:
    """Data generation (Algorithm 2): each record kept independently with probability ``p``."""

    rate: float
    secure: bool = False
    name = "sampling"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate", check_range("rate", self.rate, 0.0, 1.0, low_open=True))

    def select(self, n: int, generator: torch.Generator | None = None,
               device: torch.device | str = "cpu") -> torch.Tensor:
        """Sorted indices of the kept records among ``n`` (may be empty)."""
        n = check_int("n", n, 0)
        source = SECURE_RANDOM if self.secure else generator
        return poisson_indices(n, self.rate, source, torch.device(device))

    def masks(self, replicas: int, n: int, generator: torch.Generator | None = None,
              device: torch.device | str = "cpu") -> torch.Tensor:
        """``[replicas, n]`` boolean inclusion masks, one independent draw per row."""
        shape = (check_int("replicas", replicas, 1), check_int("n", n, 1))
        return _uniforms(shape, generator, self.secure, torch.device(device)) < self.rate


def sampled_mean_steps(grads: torch.Tensor, masks: torch.Tensor, lr: float) -> torch.Tensor:
    """Algorithm 2's update for each row of ``masks``: ``-lr * mean_{i in S} g_i`` (``[R, d]``).

    ``grads``: ``[n, d]`` per-record gradients at the starting model; ``masks``: ``[R, n]``
    inclusion masks. An empty ``S`` gives a zero update (no data, no step).
    """
    if not isinstance(grads, torch.Tensor) or grads.dim() != 2:
        raise ValueError("grads must be an [n, d] tensor of per-record gradients")
    if not isinstance(masks, torch.Tensor) or masks.dim() != 2 or masks.shape[1] != grads.shape[0]:
        raise ValueError(f"masks must be an [R, {grads.shape[0]}] boolean tensor")
    lr = check_nonnegative("lr", lr)
    weights = masks.to(grads.dtype)
    counts = weights.sum(1, keepdim=True).clamp_min(1.0)
    return (weights @ grads).div_(counts).mul_(-lr)


def aggregate(models: torch.Tensor, sizes: Sequence[int] | np.ndarray | None = None,
              weights: str = "size") -> torch.Tensor:
    """Server step: ``sum_k (n_k / n) W~_k`` (Algorithm 1, ``weights="size"``, with ``n_k``
    the clients' record counts and ``n = sum_k n_k``) or ``(1/K) sum_k W~_k`` (eq. 9,
    ``weights="uniform"``)."""
    rows = _rows(models)
    weights = check_choice("weights", weights, AGGREGATION_WEIGHTS)
    k = rows.shape[0]
    if weights == "uniform":
        return MeanAggregation(k).mean(rows, np.arange(k))
    if sizes is None:
        raise ValueError("sizes is missing: weights = 'size' needs the clients' record counts")
    n = np.asarray(sizes, dtype=np.float64)
    if n.shape != (k,) or not np.all(np.isfinite(n)) or n.min() <= 0:
        raise ValueError(f"sizes = {sizes!r} is out of range: must be {k} positive counts")
    return MeanAggregation(k, n / n.max()).mean(rows, np.arange(k))


@dataclass(frozen=True)
class ClientProtection:
    """The client-side protection hook: record sampling, then parameter distortions in order.

    Parameters
    ----------
    sampling
        :class:`PoissonRecordSampling` (the round's local data is a Poisson subsample) or None.
    distortions
        Applied to the clients' trained models ``[M, d]`` in order (e.g. a mask, then noise).
    """

    sampling: PoissonRecordSampling | None = None
    distortions: tuple[ParameterDistortion, ...] = ()

    def __post_init__(self) -> None:
        if self.sampling is not None and not isinstance(self.sampling, PoissonRecordSampling):
            raise ValueError(f"sampling = {self.sampling!r} is not allowed: must be a "
                             "PoissonRecordSampling or None")
        object.__setattr__(self, "distortions", tuple(self.distortions))
        for j, step in enumerate(self.distortions):
            if not callable(step):
                raise ValueError(f"distortions[{j}] = {step!r} is not callable")

    @property
    def secure(self) -> bool:
        """Every random step draws from ``os.urandom``."""
        steps = [*self.distortions, *([self.sampling] if self.sampling else [])]
        return all(getattr(step, "secure", False) for step in steps)

    def sample_records(self, data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                       generator: torch.Generator | None = None
                       ) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Each client's ``(x, y)`` reduced to its Poisson subsample (unchanged without
        sampling)."""
        if self.sampling is None:
            return list(data)
        out = []
        for x, y in data:
            keep = self.sampling.select(int(y.shape[0]), generator, y.device)
            out.append((x[keep], y[keep]))
        return out

    def distort(self, models: torch.Tensor, generator: torch.Generator | None = None
                ) -> torch.Tensor:
        """The distortions applied in order to the ``[M, d]`` models (a new tensor)."""
        rows = _rows(models)
        for step in self.distortions:
            rows = step(rows, generator)
        return rows if self.distortions else rows.clone()

    def __repr__(self) -> str:
        parts = ([f"sampling p = {self.sampling.rate:g}"] if self.sampling else []) + [
            f"{getattr(s, 'name', type(s).__name__)}"
            + (f" sigma_eps^2 = {s.noise_variance:g}" if isinstance(s, GaussianDistortion)
               else f" rho = {s.keep_rate:g}" if isinstance(s, RandomMask) else "")
            for s in self.distortions]
        return f"ClientProtection({', '.join(parts) or 'none'})"
