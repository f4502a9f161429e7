"""Cryptographically secure uniforms for secure mode's sampling decisions.

The accountant's subsampling amplification assumes that nobody but the sampler knows *which*
records form a batch and *which* clients form a cohort. Secure mode (``privacy.secure``,
:attr:`privfl.fl.LocalTrainingSpec.secure`) therefore draws every sampling decision from
:class:`SecureRandom`, whose uniforms come straight from ``os.urandom`` — the operating
system's CSPRNG (``getrandom(2)`` on Linux, a ChaCha20 stream seeded from the kernel's entropy
pool) — and the Gaussian noise from :func:`privfl.mechanisms.secure_standard_normal` (the same
source).

Why not a generator seeded from ``os.urandom``: a ``torch.Generator`` (Mersenne Twister on CPU)
or a numpy ``Generator`` (PCG64) seeded with 256 fresh bits is a CSPRNG-*seeded* PRNG, not a
CSPRNG: neither is designed to resist prediction, and the Mersenne Twister's whole state follows
from 624 consecutive outputs. Here there is no state to recover: every uniform is read from the
kernel CSPRNG when it is needed.

Exactness. A uniform is ``k / 2^53`` with ``k`` the top 53 bits of 8 fresh bytes, so it takes
each of the 2^53 values in ``[0, 1)`` with probability ``2^-53`` — the same distribution as
``torch.rand(..., dtype=torch.float64)``, which the seeded samplers use. The samplers of
:mod:`privfl.mechanisms.sampling` turn these uniforms into batches exactly as they turn the
seeded ones (the ``B`` smallest of ``n`` keys; ``u < q``), so the sampling scheme the accountant
assumes is unchanged: only the source of the bits differs.

Cost: 8 bytes of ``os.urandom`` per record per step (fixed-size and Poisson batches alike) and
per client per round (cohorts) — far less than the noise (6 bytes per model coordinate per
step); a few microseconds of system call per client and step.
"""

from __future__ import annotations

import os

import numpy as np
import torch

from privfl._validation import check_int

__all__ = ["SECURE_RANDOM", "SecureRandom", "randomness_text", "secure_seeds", "secure_uniform"]

_TWO_POW_M53 = 2.0**-53


def secure_uniform(count: int) -> np.ndarray:
    """``count`` i.i.d. float64 uniforms on ``[0, 1)`` (53 random bits each) from os.urandom."""
    count = check_int("count", count, minimum=0)
    bits = np.frombuffer(os.urandom(8 * count), dtype=np.uint64) >> np.uint64(11)
    return bits.astype(np.float64) * _TWO_POW_M53


def secure_seeds(count: int) -> np.ndarray:
    """``count`` int64 seeds in ``[0, 2^62)`` (the top 62 bits of 8 fresh bytes each) from
    os.urandom: secure mode's per-row stream seeds, which then drive only dropout masks."""
    count = check_int("count", count, minimum=0)
    bits = np.frombuffer(os.urandom(8 * count), dtype=np.uint64) >> np.uint64(2)
    return bits.astype(np.int64)


class SecureRandom:
    """A stateless source of uniforms from ``os.urandom`` (see the module docstring).

    Pass it where privfl's samplers take a generator (:func:`~privfl.mechanisms.sample_batch`,
    :func:`~privfl.mechanisms.fixed_size_sample`, :func:`~privfl.mechanisms.poisson_sample`)
    for batches nobody can predict. It has nothing to seed, save or restore: draws are never
    reproducible, and every instance is the same source (:data:`SECURE_RANDOM`).
    """

    def random(self, size: int) -> np.ndarray:
        """``size`` float64 uniforms on ``[0, 1)``, like ``numpy.random.Generator.random``."""
        return secure_uniform(size)

    def rand(self, size: int, device: str | torch.device = "cpu") -> torch.Tensor:
        """``size`` float64 uniforms on ``[0, 1)`` as a tensor (like ``torch.rand``, float64)."""
        keys = torch.from_numpy(secure_uniform(size))
        return keys if torch.device(device).type == "cpu" else keys.to(device)

    def __repr__(self) -> str:
        return "SecureRandom(os.urandom)"


#: The one instance the engine and PriFedSync use.
SECURE_RANDOM = SecureRandom()


def randomness_text(secure: bool, seed: int, *, private: bool = True) -> str:
    """Which randomness of a run is secret (secure mode) and which follows from its seed."""
    drawn = ("the noise, the local batches and the cohorts (client sampling)" if private
             else "the local batches and the cohorts (client sampling)")
    if secure:
        return (f"secure: {drawn} are drawn from os.urandom (the operating system's CSPRNG), "
                f"not reproducible (dropout masks too); seed = {seed} drives only the data "
                "partition and the model initialisation, which the guarantee does not rely on")
    text = (f"seeded: {drawn} are reproducible from seed = {seed} (the seed in config.yaml) "
            "and therefore known to anyone holding the config")
    if private:
        text += ("; the guarantee holds only against an adversary who does not know the seed "
                 "(NOT cryptographically secure: set privacy.secure: true in production)")
    return text
