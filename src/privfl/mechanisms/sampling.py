"""Batch samplers whose behaviour is exactly what the accountant assumes.

Two schemes, matching :class:`privfl.accounting.events.Sampling`:

``without-replacement`` (Zheng et al. 2021, Algorithm 2)
    Every step draws a fresh subset of exactly ``B`` of the ``n`` records, uniformly among all
    ``n choose B`` subsets, independently of the previous steps. Accounted as ``C_{B/n}`` under
    replace-one neighbours (q = B/n).
``poisson``
    Every record is included independently with probability ``q`` (for a client with ``n``
    records and expected batch size ``B``: ``q = B/n``). The batch size is random
    (Binomial(n, q)); an empty batch is a valid outcome and the step still adds noise. Accounted
    as Poisson subsampling under add/remove neighbours.

Ragged cohorts (clients with different ``n_j`` or different realised batch sizes) are handled
by **index padding + masks**: :func:`pad_batches` turns a list of index vectors into an
``M x b`` index matrix and a ``M x b`` 0/1 mask; padded slots point at a valid record and carry
mask 0, so they contribute nothing (their loss is multiplied by 0).

All randomness comes from the generator passed in: a ``torch.Generator`` (reproducible
experiments; whoever knows its seed knows every batch) or :class:`~privfl.mechanisms.SecureRandom`
(uniforms read from ``os.urandom``, the operating system's CSPRNG: batches nobody can predict,
what the accountant's secret subsampling assumes; secure mode uses it). Both give float64
uniforms with 53 random bits, turned into batches by the same code, so the two sources give
the same sampling distribution. :func:`secure_generator` (a torch generator seeded from
``secrets``) is unpredictable only as long as its Mersenne Twister state is: a CSPRNG-seeded
PRNG, not a CSPRNG; prefer ``SecureRandom``.

Exactness. A fixed-size batch is the ``B`` records with the smallest of ``n`` i.i.d. float64
uniform keys (53 random bits each), which is a uniformly random ``B``-subset except on a tie
among keys (probability < n^2 / 2^54, about 2e-11 for n = 600). ``torch.randperm`` and
``torch.randint`` are *not* used: on CPU they reduce 32-bit draws modulo the range, which makes
some subsets more likely than others by up to ``n / 2^32`` (1.4e-7 relative for n = 600) — small,
but it would enter every one of the K·R composed steps. A Poisson inclusion is ``u < q`` for a
float64 uniform ``u``, exact to 2^-53.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import torch

from privfl._validation import check_choice, check_int, check_rate
from privfl.accounting.events import Sampling
from privfl.mechanisms.secure import SecureRandom

__all__ = [
    "BATCH_SAMPLING",
    "fixed_size_sample",
    "pad_batches",
    "poisson_sample",
    "sample_batch",
    "secure_generator",
]

#: The batch sampling schemes the training engine implements (names of ``Sampling`` members).
BATCH_SAMPLING = (Sampling.WITHOUT_REPLACEMENT.value, Sampling.POISSON.value)


#: What the samplers accept as ``generator``.
Source = torch.Generator | SecureRandom | None


def _check_generator(generator: object) -> Source:
    if generator is not None and not isinstance(generator, (torch.Generator, SecureRandom)):
        raise ValueError(
            f"generator = {generator!r} is not allowed: must be a torch.Generator, a "
            "SecureRandom or None"
        )
    return generator


def _device(generator: Source, device: object) -> torch.device:
    if device is not None:
        return torch.device(device)
    return generator.device if isinstance(generator, torch.Generator) else torch.device("cpu")


def uniform_keys(n: int, generator: Source, device: torch.device) -> torch.Tensor:
    """``n`` i.i.d. float64 uniform keys on ``[0, 1)`` (53 random bits each) from ``generator``
    (unchecked)."""
    if isinstance(generator, SecureRandom):
        return generator.rand(n, device)
    return torch.rand(n, generator=generator, device=device, dtype=torch.float64)


def fixed_size_indices(
    n: int, batch_size: int, generator: Source, device: torch.device
) -> torch.Tensor:
    """Unchecked core of :func:`fixed_size_sample` (unsorted): the ``batch_size`` smallest of
    ``n`` float64 uniform keys."""
    return smallest_keys(uniform_keys(n, generator, device), batch_size)


def smallest_keys(keys: torch.Tensor, batch_size: int) -> torch.Tensor:
    """Positions of the ``batch_size`` smallest keys along the last dimension (unsorted): a
    uniformly random ``batch_size``-subset per row of i.i.d. keys (unchecked)."""
    return torch.topk(keys, batch_size, largest=False, sorted=False).indices


def poisson_indices(n: int, rate: float, generator: Source, device: torch.device) -> torch.Tensor:
    """Unchecked core of :func:`poisson_sample`: records whose float64 uniform is < ``rate``."""
    keys = uniform_keys(n, generator, device)
    return torch.nonzero(keys < rate).flatten()


def secure_generator(device: str | torch.device = "cpu") -> torch.Generator:
    """A ``torch.Generator`` seeded with 63 bits from :mod:`secrets` (not reproducible).

    A CSPRNG-seeded Mersenne Twister, not a CSPRNG: its state follows from 624 of its outputs.
    For sampling decisions that must stay secret use :data:`~privfl.mechanisms.SECURE_RANDOM`.
    """
    return torch.Generator(device=device).manual_seed(secrets.randbits(63))


def fixed_size_sample(
    n: int,
    batch_size: int,
    generator: Source = None,
    *,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """``batch_size`` distinct indices in ``[0, n)``, a uniformly random subset (sorted).

    Every subset of size ``batch_size`` has probability ``1 / (n choose batch_size)`` (the
    records with the ``batch_size`` smallest of ``n`` i.i.d. float64 uniform keys).
    """
    n = check_int("n", n, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if batch_size > n:
        raise ValueError(
            f"batch_size = {batch_size} is out of range: must be in [1, n = {n}] for sampling "
            "without replacement"
        )
    generator = _check_generator(generator)
    return fixed_size_indices(n, batch_size, generator, _device(generator, device)).sort().values


def poisson_sample(
    n: int,
    rate: float,
    generator: Source = None,
    *,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """Indices of the records kept when each of ``n`` is included independently w.p. ``rate``.

    The result may be empty. Sorted ascending.
    """
    n = check_int("n", n, minimum=1)
    rate = check_rate("rate", rate)
    generator = _check_generator(generator)
    return poisson_indices(n, rate, generator, _device(generator, device))


def sample_batch(
    n: int,
    batch_size: int,
    sampling: str | Sampling = Sampling.WITHOUT_REPLACEMENT,
    generator: Source = None,
    *,
    device: str | torch.device | None = None,
) -> torch.Tensor:
    """One batch of a client with ``n`` records and (expected) batch size ``batch_size``.

    ``without-replacement``: exactly ``batch_size`` records; ``poisson``: rate
    ``batch_size / n`` (expected size ``batch_size``).
    """
    scheme = check_choice(
        "sampling", Sampling(sampling).value if isinstance(sampling, Sampling) else sampling,
        BATCH_SAMPLING,
    )
    n = check_int("n", n, minimum=1)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    if batch_size > n:
        raise ValueError(
            f"batch_size = {batch_size} is out of range: must be in [1, n = {n}] "
            f"({scheme} sampling needs q = batch_size / n <= 1)"
        )
    if scheme == Sampling.WITHOUT_REPLACEMENT.value:
        return fixed_size_sample(n, batch_size, generator, device=device)
    return poisson_sample(n, batch_size / n, generator, device=device)


def pad_batches(
    batches: Sequence[torch.Tensor], size: int | None = None, *, fill: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad index vectors of different lengths to an ``M x size`` matrix plus a 0/1 mask.

    Parameters
    ----------
    batches
        One 1-D integer tensor per client (possibly empty).
    size
        Width of the result; default the longest batch. Must be >= every batch's length.
    fill
        Index written in padded slots (must be a valid record index; its mask entry is 0).

    Returns
    -------
    index, mask
        ``index`` (``int64``, ``M x size``) and ``mask`` (``bool``, ``M x size``), ``True`` for a
        real record.
    """
    if len(batches) == 0:
        raise ValueError("batches = [] is out of range: must hold at least one batch")
    lengths = []
    for j, batch in enumerate(batches):
        if not isinstance(batch, torch.Tensor) or batch.dim() != 1:
            raise ValueError(f"batches[{j}] = {batch!r} is not a 1-D index tensor")
        lengths.append(int(batch.numel()))
    longest = max(lengths)
    width = longest if size is None else check_int("size", size, minimum=0)
    if width < longest:
        raise ValueError(f"size = {width} is out of range: must be >= the longest batch {longest}")
    device = batches[0].device
    index = torch.full((len(batches), width), int(fill), dtype=torch.int64, device=device)
    mask = torch.zeros((len(batches), width), dtype=torch.bool, device=device)
    for j, batch in enumerate(batches):
        index[j, : lengths[j]] = batch
        mask[j, : lengths[j]] = True
    return index, mask
