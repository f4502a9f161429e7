"""One client-cohort sampler that both the training and the accountant read.

A :class:`CohortSampler` draws a round's cohort from ``population`` clients and names the same
scheme to the accountant (:attr:`~CohortSampler.sampling`, :attr:`~CohortSampler.sampling_rate`,
:attr:`~CohortSampler.neighbouring`), so what the training samples and what the accountant is
told are one object (design.md, privacy rule 2). Schemes:

* ``poisson`` (rate q): client j joins iff ``u_j < q``, one float64 uniform per client (53
  random bits); the accountant's Poisson subsampling at rate q, add/remove-one neighbours.
* ``fixed-size`` (size m): the m clients holding the m smallest of N uniforms, a uniform
  m-subset without replacement; the accountant's sampling without replacement at rate m/N,
  replace-one neighbours (the size itself is public).

The uniforms come from a callable ``uniforms(n)`` that the algorithm passes: its seeded
generator, or ``os.urandom`` in secure mode (:mod:`privfl.mechanisms.secure`). The cohort is
returned as sorted client indices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from privfl._validation import check_int, check_rate
from privfl.accounting.events import Neighbouring, Sampling

__all__ = ["SCHEMES", "CohortSampler"]

#: the cohort sampling schemes (``federated.client_sampling``)
SCHEMES = ("poisson", "fixed-size")


@dataclass(frozen=True)
class CohortSampler:
    """``population`` clients, sampled by ``scheme`` at ``rate`` (Poisson) or ``size``
    (fixed-size); build one with :meth:`poisson` or :meth:`fixed_size`."""

    population: int
    scheme: str
    rate: float | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "population", check_int("population", self.population, 1))
        if self.scheme == "poisson":
            object.__setattr__(self, "rate", check_rate("client_rate", self.rate))
            if self.size is not None:
                raise ValueError(f"cohort_size = {self.size!r} is not allowed with Poisson "
                                 "client sampling (give client_rate)")
        elif self.scheme == "fixed-size":
            object.__setattr__(self, "size",
                               check_int("cohort_size", self.size, 1, self.population))
            if self.rate is not None:
                raise ValueError(f"client_rate = {self.rate!r} is not allowed with fixed-size "
                                 "cohorts (give cohort_size)")
        else:
            raise ValueError(f"client_sampling = {self.scheme!r} is not one of {SCHEMES}")

    @classmethod
    def poisson(cls, population: int, rate: float) -> CohortSampler:
        return cls(population, "poisson", rate=rate)

    @classmethod
    def fixed_size(cls, population: int, size: int) -> CohortSampler:
        return cls(population, "fixed-size", size=size)

    # ------------------------------------------------------------ what the accountant is told
    @property
    def sampling(self) -> Sampling:
        return Sampling.POISSON if self.scheme == "poisson" else Sampling.WITHOUT_REPLACEMENT

    @property
    def sampling_rate(self) -> float:
        """q: the Poisson rate, or m / N for a fixed-size cohort."""
        return float(self.rate) if self.scheme == "poisson" else self.size / self.population

    @property
    def expected_size(self) -> float:
        """q N for Poisson cohorts, m for fixed-size ones."""
        return self.rate * self.population if self.scheme == "poisson" else float(self.size)

    @property
    def neighbouring(self) -> Neighbouring:
        """Add/remove one client for Poisson cohorts, replace one for fixed-size cohorts."""
        return (Neighbouring.ADD_REMOVE if self.scheme == "poisson"
                else Neighbouring.REPLACE_ONE)

    # ------------------------------------------------------------------- what the training draws
    def draw(self, uniforms: Callable[[int], np.ndarray]) -> np.ndarray:
        """One round's cohort (sorted indices) from ``population`` uniforms in [0, 1)."""
        keys = np.asarray(uniforms(self.population), dtype=np.float64)
        if keys.shape != (self.population,):
            raise ValueError(f"uniforms({self.population}) returned shape {keys.shape}")
        if self.scheme == "poisson":
            return np.flatnonzero(keys < self.rate)
        return np.sort(np.argsort(keys, kind="stable")[: self.size])
