"""Per-client random streams: the public seeds that make a client's local work reproducible.

Every row of a :class:`~privfl.fl.CohortTrainer` call (a client, or a Monte Carlo replica of
one) draws all of its randomness from its own streams, seeded by one row of a
:class:`ClientStreams` ``seeds`` array ``[M, 2 + S]`` (int64, values in ``[0, 2^62)``):

* column 0, the **data** stream: batches (fixed-size or Poisson) and dropout masks;
* column 1, the **aux** stream: seeds torch's global RNG around the forward (functional
  randomness inside a model, e.g. ``F.dropout``);
* columns 2..2+S-1, the **noise** streams: each fills a fixed 1/S slice of the row's noise
  vector, so the serial Mersenne Twister draws can run on several cores (S = ``NOISE_STREAMS``
  = 4 on CPU, 1 on CUDA, as :meth:`CohortTrainer.train` draws them).

A row's result is a function of its starting parameters, optimizer state, data indices and this
seed row only, so a shard of a cohort can be trained elsewhere (another process or machine) and
give the same rows bit for bit (see ``docs/engine.md``, "Engine seams").

Two ways to get the seeds:

* :meth:`ClientStreams.draw` — exactly what ``CohortTrainer.train`` does with its generator
  (``torch.randint(0, 2^62, (M, 2 + S))``): the seeds depend on the order of the cohort;
* :meth:`ClientStreams.derive` — from ``(seed, round, client id, domain)`` by numpy's
  ``SeedSequence`` (O'Neill's PCG seeding, numpy >= 1.17): order-independent streams, so that a
  client's (or replica's) randomness does not depend on which other clients were sampled or on
  how the cohort is split.

Secure mode (``spec.secure``) takes batches and noise from ``os.urandom`` instead, and the seeds
themselves (``ClientStreams.draw(..., secure=True)``): the streams then drive only
model-internal randomness (dropout masks), and no seeded generator moves in a secure round.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import torch

from privfl._validation import check_int

__all__ = ["NOISE_STREAMS", "SEED_HIGH", "ClientStreams", "noise_streams", "seeded_generator"]

#: Independent noise streams per client on CPU: each fills 1/NOISE_STREAMS of the client's noise
#: vector, so the (serial) Mersenne Twister draws can run on several cores. A constant, so the
#: result does not depend on the number of threads.
NOISE_STREAMS = 4
#: Seeds lie in ``[0, SEED_HIGH)``.
SEED_HIGH = 2**62


def noise_streams(device: torch.device | str) -> int:
    """Noise streams per client that :meth:`CohortTrainer.train` draws on ``device``:
    ``NOISE_STREAMS`` on CPU (drawn by worker threads), 1 elsewhere (asynchronous kernels)."""
    return NOISE_STREAMS if torch.device(device).type == "cpu" else 1


def _int_list(name: str, values: object) -> list[int]:
    if isinstance(values, (torch.Tensor, np.ndarray)):
        values = values.tolist()
    if isinstance(values, (numbers.Integral, str, bytes)) or not isinstance(values, Sequence):
        raise ValueError(f"{name} = {values!r} is not allowed: must be a sequence of integers")
    return [check_int(f"{name}[{j}]", v, minimum=0, maximum=2**63 - 1)
            for j, v in enumerate(values)]


class ClientStreams:
    """The seeds of every row's random streams, ``[M, 2 + S]`` int64 on CPU.

    Parameters
    ----------
    seeds
        ``[M, 2 + S]`` integers in ``[0, 2^62)`` (tensor, array or nested lists), ``S >= 1``
        noise streams: column 0 data, column 1 aux, columns 2.. noise (see the module
        docstring). Copied into a new int64 CPU tensor.

    Rows are selected with ``streams[index]`` (an int, a slice or a sequence of ints) and
    concatenated with :meth:`cat`, so a cohort's streams can be split into shards and put back.
    """

    __slots__ = ("seeds",)

    def __init__(self, seeds: object) -> None:
        if isinstance(seeds, ClientStreams):
            seeds = seeds.seeds
        try:
            tensor = torch.as_tensor(seeds)
        except (TypeError, ValueError, RuntimeError, OverflowError) as error:
            raise ValueError(f"seeds = {seeds!r} is not an integer array [M, 2 + S]") from error
        if tensor.dim() != 2 or tensor.shape[1] < 3:
            raise ValueError(
                f"seeds has shape {tuple(tensor.shape)}: must be [M, 2 + S] with S >= 1 noise "
                "streams (columns: data, aux, noise...)"
            )
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
            raise ValueError(f"seeds has dtype {tensor.dtype}: must be an integer dtype")
        tensor = tensor.to(device="cpu", dtype=torch.int64).clone()
        if tensor.numel() and (int(tensor.min()) < 0 or int(tensor.max()) >= SEED_HIGH):
            raise ValueError(
                f"seeds has values in [{int(tensor.min())}, {int(tensor.max())}]: must be in "
                f"[0, 2^62)"
            )
        self.seeds = tensor

    # ------------------------------------------------------------------ construction
    @classmethod
    def draw(
        cls, generator: torch.Generator, count: int, noise_streams: int = NOISE_STREAMS, *,
        secure: bool = False,
    ) -> ClientStreams:
        """``count`` rows of seeds drawn from ``generator`` as :meth:`CohortTrainer.train` draws
        them: ``torch.randint(0, 2^62, (count, 2 + noise_streams))`` on the generator's device.
        ``secure=True`` (secure mode) reads them from ``os.urandom`` instead
        (:func:`privfl.mechanisms.secure.secure_seeds`) and leaves ``generator`` untouched, so
        that no seeded generator moves in a secure round.
        """
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator = {generator!r} is not allowed: must be a torch.Generator")
        count = check_int("count", count, minimum=0)
        noise_streams = check_int("noise_streams", noise_streams, minimum=1)
        if not isinstance(secure, bool):
            raise ValueError(f"secure = {secure!r} is not a bool")
        if secure:
            from privfl.mechanisms.secure import secure_seeds

            return cls(torch.from_numpy(secure_seeds(count * (2 + noise_streams)))
                       .view(count, 2 + noise_streams))
        seeds = torch.randint(0, SEED_HIGH, (count, 2 + noise_streams), generator=generator,
                              device=generator.device)
        return cls(seeds)

    @classmethod
    def derive(
        cls,
        seed: int,
        round: int,
        ids: Sequence[int] | torch.Tensor | np.ndarray,
        *,
        noise_streams: int = NOISE_STREAMS,
        domain: int = 0,
    ) -> ClientStreams:
        """Order-independent seeds: row ``j`` from ``SeedSequence(seed, spawn_key=(domain,
        round, ids[j]))``.

        The same ``(seed, domain, round, id)`` always gives the same row, whatever the other
        ids and their order; different keys give independent streams (numpy's
        ``SeedSequence`` hashes the entropy and the spawn key into the generated words).
        ``domain`` separates independent uses of one run seed, e.g. the Monte Carlo replica
        number when several replicas of one client train in the same round. Each seed is the
        top 62 bits of a generated 64-bit word.
        """
        seed = check_int("seed", seed, minimum=0)
        round = check_int("round", round, minimum=0)
        domain = check_int("domain", domain, minimum=0)
        noise_streams = check_int("noise_streams", noise_streams, minimum=1)
        keys = _int_list("ids", ids)
        words = 2 + noise_streams
        rows = np.empty((len(keys), words), dtype=np.uint64)
        for j, key in enumerate(keys):
            sequence = np.random.SeedSequence(seed, spawn_key=(domain, round, key))
            rows[j] = sequence.generate_state(words, dtype=np.uint64)
        return cls((rows >> np.uint64(2)).astype(np.int64))

    @classmethod
    def cat(cls, parts: Sequence[ClientStreams]) -> ClientStreams:
        """The rows of several streams objects, in order (e.g. shards put back together)."""
        if isinstance(parts, ClientStreams) or not isinstance(parts, Sequence) or not parts:
            raise ValueError("parts must be a non-empty sequence of ClientStreams")
        for j, part in enumerate(parts):
            if not isinstance(part, ClientStreams):
                raise ValueError(f"parts[{j}] = {type(part).__name__} is not a ClientStreams")
            if part.noise_streams != parts[0].noise_streams:
                raise ValueError(
                    f"parts[{j}] has {part.noise_streams} noise streams: parts[0] has "
                    f"{parts[0].noise_streams}"
                )
        return cls(torch.cat([p.seeds for p in parts]))

    # ------------------------------------------------------------------ access
    @property
    def noise_streams(self) -> int:
        """S, noise streams per row."""
        return int(self.seeds.shape[1]) - 2

    def __len__(self) -> int:
        return int(self.seeds.shape[0])

    def __getitem__(self, index: int | slice | Sequence[int] | torch.Tensor) -> ClientStreams:
        count = len(self)
        if isinstance(index, slice):
            return ClientStreams(self.seeds[index])
        if isinstance(index, numbers.Integral) and not isinstance(index, bool):
            index = [int(index)]
        rows = _int_list("index", index)
        bad = [r for r in rows if r >= count]
        if bad:
            raise ValueError(f"index = {bad[0]} is out of range: must be in [0, {count - 1}]")
        return ClientStreams(self.seeds[torch.tensor(rows, dtype=torch.int64)])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientStreams) and torch.equal(self.seeds, other.seeds)

    __hash__ = None  # type: ignore[assignment]  # mutable tensor inside

    def __repr__(self) -> str:
        return f"ClientStreams(rows={len(self)}, noise_streams={self.noise_streams})"

    def generators(
        self, row: int, device: torch.device | str
    ) -> tuple[torch.Generator, torch.Generator, list[torch.Generator]]:
        """``(data, aux, [noise...])`` generators of ``row`` on ``device``, freshly seeded."""
        values = self.seeds[row].tolist()
        device = torch.device(device)
        return (seeded_generator(device, values[0]), seeded_generator(device, values[1]),
                [seeded_generator(device, s) for s in values[2:]])


def seeded_generator(device: torch.device, seed: int) -> torch.Generator:
    """A generator on ``device`` seeded with ``seed`` (one stream of a row)."""
    return torch.Generator(device=device).manual_seed(int(seed))
