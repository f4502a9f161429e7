"""Gaussian noise for DP-SGD, exactly as the accountant assumes.

Convention (:mod:`privfl.accounting.events`): the noise is added to the **sum** of clipped
per-example gradients with standard deviation ``z * C`` (``z`` the noise multiplier, ``C`` the
clip norm), and the result is divided by the **fixed expected batch size** ``B`` — never by the
realised number of examples (which would leak it and change the sensitivity)::

    g_tilde = (sum_i clip(g_i) + N(0, (z C)^2 I)) / B

Sources of randomness
---------------------
``secure=False`` (default)
    ``torch`` normal sampling with the ``torch.Generator`` passed in (Mersenne Twister on CPU,
    Philox on CUDA). Reproducible; use it for experiments. It is **not** cryptographically
    secure: whoever knows or guesses the seed can subtract the noise.
``secure=True``
    Uniforms from ``os.urandom`` (the operating system's CSPRNG): the radius uniform has 53
    random bits, ``u1 = (k1 + 1) / 2^53`` in ``(0, 1]``, the angle uniform 32 bits,
    ``u2 = k2 / 2^32`` in ``[0, 1)`` (angle resolution 1.5e-9 rad, far below float32
    resolution); the Box–Muller transform in float64, ``sqrt(-2 ln u1) * (cos, sin)(2 pi u2)``,
    turns each pair into two independent standard normals, then they are cast to the
    parameters' dtype. Not reproducible by design; the generator argument is ignored for the
    noise. Costs 6 bytes of ``os.urandom`` per noise coordinate; the transform runs in torch
    float64 kernels. About 14x slower than the seeded sampler per normal (80k normals: 3.7 ms
    against 0.27 ms on one thread of a busy 2-core machine, of which ~2.4 ms is
    ``os.urandom``; numpy's transform took 7.7 ms), less in training, where the draws overlap
    with the gradients (``docs/engine.md``).

Caveats of ``secure=True``: the largest normal it can return is ``sqrt(2 * 53 ln 2) ~ 8.57``
(tail mass beyond that ~1e-17, below float32 resolution of the sum anyway); like every
floating-point Gaussian sampler it does not defend against floating-point side channels on the
released values (Mironov 2012; Jin et al. 2022) — a formal treatment would need a discrete
Gaussian, which is outside this library's scope.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import numpy as np
import torch

from privfl._validation import check_int, check_nonnegative, check_positive

__all__ = [
    "add_gaussian_noise",
    "check_noise_dtype",
    "gaussian_noise",
    "secure_standard_normal",
    "standard_normal_",
]

_TWO_POW_53 = float(2**53)
_TWO_POW_32 = float(2**32)
#: urandom is read in blocks of at most this many normals (bounded temporary memory).
_SECURE_BLOCK = 1 << 22


def _secure_block(count: int) -> torch.Tensor:
    """``count`` (even) float64 standard normals from ``os.urandom`` via Box–Muller.

    The bits are unpacked with numpy, the transcendental functions run in torch (vectorised
    float64 kernels, about twice as fast as numpy's here; both within an ulp or so)."""
    pairs = count // 2
    raw = os.urandom(12 * pairs)
    k1 = np.frombuffer(raw, dtype=np.uint64, count=pairs) >> np.uint64(11)  # 53 bits
    k2 = np.frombuffer(raw, dtype=np.uint32, offset=8 * pairs)  # 32 bits
    u1 = torch.from_numpy(k1.astype(np.float64)).add_(1.0).div_(_TWO_POW_53)  # (0, 1]
    radius = u1.log_().mul_(-2.0).sqrt_()
    angle = torch.from_numpy(k2.astype(np.float64)).mul_(2.0 * math.pi / _TWO_POW_32)  # [0, 2pi)
    out = torch.empty(2 * pairs, dtype=torch.float64)
    torch.mul(radius, torch.cos(angle), out=out[:pairs])
    torch.mul(radius, angle.sin_(), out=out[pairs:])
    return out


def check_noise_dtype(name: str, dtype: torch.dtype) -> torch.dtype:
    """``dtype`` if noise may be drawn in it: float32 or float64, never a reduced precision
    (float16 / bfloat16 round the noise and the sum it is added to)."""
    if not dtype.is_floating_point or dtype.itemsize < 4:
        raise ValueError(f"{name} = {dtype} is not allowed for Gaussian noise: must be "
                         "torch.float32 or torch.float64 (a reduced precision rounds the noise)")
    return dtype


def secure_standard_normal(
    count: int, *, dtype: torch.dtype = torch.float32, device: str | torch.device | None = None
) -> torch.Tensor:
    """``count`` i.i.d. standard normals from ``os.urandom`` (Box–Muller in float64, then cast)."""
    count = check_int("count", count, minimum=0)
    check_noise_dtype("dtype", dtype)
    out = torch.empty(count, dtype=dtype, device=device)
    done = 0
    while done < count:
        take = min(_SECURE_BLOCK, count - done)
        block = _secure_block(take + (take % 2))[:take]
        out[done : done + take].copy_(block)
        done += take
    return out


def standard_normal_(
    out: torch.Tensor, generator: torch.Generator | None = None, *, secure: bool = False
) -> torch.Tensor:
    """Fill ``out`` in place with i.i.d. standard normals; returns ``out``."""
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        raise ValueError(f"out = {out!r} is not a floating-point torch.Tensor")
    check_noise_dtype("out.dtype", out.dtype)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator = {generator!r} is not allowed: must be a torch.Generator")
    if secure:
        out.copy_(secure_standard_normal(out.numel(), dtype=out.dtype).view(out.shape))
    else:
        out.normal_(generator=generator)
    return out


def gaussian_noise(
    shape: tuple[int, ...] | torch.Size,
    std: float,
    *,
    generator: torch.Generator | None = None,
    secure: bool = False,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """A tensor of i.i.d. ``N(0, std^2)`` entries (``std = 0`` gives zeros)."""
    std = check_nonnegative("std", std)
    try:
        shape = tuple(check_int("shape", s, minimum=0) for s in shape)
    except TypeError as error:
        raise ValueError(f"shape = {shape!r} is not a sequence of sizes") from error
    if device is None and generator is not None:
        device = generator.device
    out = torch.empty(shape, dtype=dtype, device=device)
    if std == 0.0:
        return out.zero_()
    return standard_normal_(out, generator, secure=secure).mul_(std)


def add_gaussian_noise(
    summed: torch.Tensor | Mapping[str, torch.Tensor],
    *,
    clip_norm: float,
    noise_multiplier: float,
    expected_batch_size: int,
    generator: torch.Generator | None = None,
    secure: bool = False,
) -> torch.Tensor | dict[str, torch.Tensor]:
    """``(summed + N(0, (z C)^2 I)) / B`` for a tensor or a dict of tensors (new tensors).

    ``summed`` is the sum of clipped per-example gradients; ``B`` is the fixed expected batch
    size (for Poisson sampling ``q n``), never the realised one.
    """
    clip_norm = check_positive("clip_norm", clip_norm)
    z = check_nonnegative("noise_multiplier", noise_multiplier)
    batch = check_int("expected_batch_size", expected_batch_size, minimum=1)
    std = z * clip_norm

    def one(t: torch.Tensor) -> torch.Tensor:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            raise ValueError(f"summed = {t!r} is not a floating-point torch.Tensor")
        noise = gaussian_noise(
            t.shape, std, generator=generator, secure=secure, dtype=t.dtype, device=t.device
        )
        return (t + noise) / batch

    if isinstance(summed, Mapping):
        return {name: one(t) for name, t in summed.items()}
    return one(summed)
