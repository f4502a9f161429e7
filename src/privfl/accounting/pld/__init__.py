"""Pessimistic privacy loss distribution (PLD) accounting: rigorous epsilon(delta) for sampled
Gaussian steps (Koskela, Jalko & Honkela 2020; Doroshenko et al. 2022, dp-accounting).

* :mod:`~privfl.accounting.pld.accountant` - :class:`PldAccountant`: an event's steps as PLDs,
  composed, read as epsilon(delta) or delta(epsilon);
* :mod:`~privfl.accounting.pld.steps` - each supported step's dominating pair, discretised
  pessimistically (fixed-size batches without replacement included);
* :mod:`~privfl.accounting.pld.compose` - sound FFT composition: exponential tilting and a
  bound on the FFT's error, so that the composed delta stays an upper bound down to 1e-12.
"""

from privfl.accounting.pld.accountant import (
    PldAccountant,
    clear_cache,
    composed_delta,
    composed_epsilon,
    poisson_gaussian_pld,
    without_replacement_gaussian_delta,
)
from privfl.accounting.pld.compose import compose_upper, delta_upper, epsilon_upper

__all__ = [
    "PldAccountant",
    "clear_cache",
    "compose_upper",
    "composed_delta",
    "composed_epsilon",
    "delta_upper",
    "epsilon_upper",
    "poisson_gaussian_pld",
    "without_replacement_gaussian_delta",
]
