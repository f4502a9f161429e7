"""Privacy filters: a budget fixed in advance that fully adaptive composition stays inside.

A *filter* (Rogers, Roth, Ullman and Vadhan 2016) watches the privacy parameters of a sequence
of mechanisms, each chosen after reading every earlier output (how many rounds to run, when to
stop, whether to continue at all), and halts before the next one would pass a budget fixed when
the sequence starts. Its guarantee holds for that fully adaptive use, where the bound of a
planned horizon does not: the horizon itself was chosen after reading the results.

* :class:`RenyiFilter` (Feldman and Zrnic 2021, Rényi filter, Theorem 3.1): at one order
  ``alpha`` fixed in advance, mechanisms that are each (alpha, rho_i)-RDP given the past, run
  while ``sum rho_i <= B``, compose to (alpha, B)-RDP. It converts to (epsilon, delta) at that
  order (Balle et al. 2020, ``eps = B + log((alpha - 1)/alpha) - (log delta + log alpha) /
  (alpha - 1)``), so ``B`` is chosen to give exactly the budget epsilon (:func:`rdp_budget_for`).
  The order must not be picked after the run (the minimum over orders of the realised RDP is
  not covered by the theorem): :func:`choose_order` fixes it at creation, as the order that
  converts best for the horizon the budget affords under fixed-horizon RDP.
* :class:`GaussianFilter` (Smith and Thakurta 2022; Whitehouse, Ramdas, Wu and Rogers 2023,
  fully adaptive composition; also Koskela, Tobaben and Honkela 2023): mechanisms that are each
  mu_i-GDP given the past, run while ``sum mu_i^2 <= mu_B^2``, compose to mu_B-GDP; ``mu_B``
  is the mu whose exact Gaussian curve passes through (epsilon, delta)
  (:func:`~privfl.accounting.gdp.accountant.gdp_mu_for`, Balle and Wang 2018).

Both are pure accounting (no torch); the runner (:mod:`privfl.runs.budget`) feeds them what a
run spent.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from privfl._validation import check_delta, check_int
from privfl.accounting.gdp.accountant import gdp_epsilon, gdp_mu_for
from privfl.accounting.rdp.conversion import epsilon_from_rdp

__all__ = ["GaussianFilter", "RenyiFilter", "choose_order", "rdp_budget_for", "rounds_within"]

#: the largest horizon :func:`choose_order` searches (rounds; ``federated.rounds``' maximum)
MAX_HORIZON = 10**6


def _check_budget(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and value > 0):
        raise ValueError(f"{name} = {value!r} is out of range: must be a finite number > 0")
    return float(value)


def _check_order(order: float) -> float:
    if isinstance(order, bool) or not isinstance(order, (int, float)) or not (
            math.isfinite(order) and order > 1):
        raise ValueError(f"order = {order!r} is out of range: must be a finite number > 1")
    return float(order)


def rdp_budget_for(epsilon: float, delta: float, order: float) -> float:
    """The RDP budget ``B`` at ``order`` whose conversion is exactly (epsilon, delta):
    ``B = epsilon - log((alpha - 1)/alpha) + (log delta + log alpha) / (alpha - 1)`` (the
    improved conversion of :func:`~privfl.accounting.rdp.conversion.epsilon_from_rdp`). A
    ValueError when it is not positive: that order affords nothing at this epsilon."""
    epsilon = _check_budget("epsilon", epsilon)
    delta = check_delta("delta", delta)
    a = _check_order(order)
    budget = epsilon - math.log1p(-1.0 / a) + (math.log(delta) + math.log(a)) / (a - 1.0)
    if not budget > 0:
        raise ValueError(f"order = {order!r} is out of range: at epsilon = {epsilon:g}, "
                         f"delta = {delta:g} its RDP budget is {budget:.6g} <= 0; choose a "
                         "larger order or epsilon")
    return budget


def choose_order(rdp_after: Callable[[int], np.ndarray], orders: Sequence[float] | np.ndarray,
                 epsilon: float, delta: float) -> tuple[float, int]:
    """``(order, horizon)`` fixed before a filtered run starts: ``horizon`` is the largest
    number of rounds whose fixed-horizon RDP (``rdp_after(rounds)``: the RDP curve at
    ``orders`` after that many rounds, non-decreasing in rounds) converts to at most
    ``epsilon`` at ``delta``, and ``order`` the order at which it converts best. A ValueError
    when even one round passes the budget."""
    epsilon = _check_budget("epsilon", epsilon)
    delta = check_delta("delta", delta)
    alphas = np.asarray(orders, dtype=float)
    if alphas.ndim != 1 or alphas.size == 0:
        raise ValueError(f"orders = {orders!r}: must be a non-empty list of orders > 1")

    def fits(rounds: int) -> bool:
        return epsilon_from_rdp(alphas, rdp_after(rounds), delta)[0] <= epsilon

    low = rounds_within(fits)
    if low == 0:
        one = epsilon_from_rdp(alphas, rdp_after(1), delta)[0]
        raise ValueError(f"epsilon = {epsilon:g} is out of range: one round already costs "
                         f"epsilon = {one:.6g} (RDP, delta = {delta:g}); the budget must "
                         "afford at least one round")
    _, order = epsilon_from_rdp(alphas, rdp_after(low), delta)
    return float(order), low


@dataclass(frozen=True)
class RenyiFilter:
    """A Rényi filter at a fixed ``order`` with budget ``epsilon`` at ``delta`` (module
    docstring): :attr:`budget` is the RDP budget B at the order; a sequence may go on while
    the RDP it spent at the order stays within B (:meth:`allows`)."""

    order: float
    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", _check_order(self.order))
        object.__setattr__(self, "epsilon", _check_budget("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta("delta", self.delta))
        rdp_budget_for(self.epsilon, self.delta, self.order)  # refuse an order affording nothing

    @property
    def budget(self) -> float:
        """B: the RDP at :attr:`order` that converts to exactly (epsilon, delta)."""
        return rdp_budget_for(self.epsilon, self.delta, self.order)

    def allows(self, spent: float) -> bool:
        """Whether a sequence that spent ``spent`` (the sum of its mechanisms' RDP at
        :attr:`order`, the next one included) stays within the budget: ``spent <= B``."""
        if isinstance(spent, bool) or not isinstance(spent, (int, float)) or not spent >= 0:
            raise ValueError(f"spent = {spent!r} is out of range: must be a number >= 0 (RDP "
                             f"at order {self.order:g})")
        # B converts to exactly epsilon; the conversion itself guards the last float bits
        return spent <= self.budget and (
            spent == 0 or epsilon_from_rdp([self.order], [spent], self.delta)[0] <= self.epsilon)

    def to_dict(self) -> dict[str, float | str]:
        return {"filter": "renyi", "order": self.order, "rdp_budget": self.budget,
                "epsilon": self.epsilon, "delta": self.delta}


@dataclass(frozen=True)
class GaussianFilter:
    """A Gaussian-DP filter with budget ``epsilon`` at ``delta`` (module docstring):
    :attr:`mu_budget` is mu_B; a sequence may go on while ``sum mu_i^2 <= mu_B^2``
    (:meth:`allows`, given ``sqrt(sum mu_i^2)``), i.e. while the composed mu converts to at
    most epsilon at delta."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", _check_budget("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta("delta", self.delta))

    @property
    def mu_budget(self) -> float:
        """mu_B: the mu whose exact Gaussian curve passes through (epsilon, delta)."""
        return gdp_mu_for(self.epsilon, self.delta)

    def allows(self, mu: float) -> bool:
        """Whether a sequence whose mechanisms compose to ``mu`` (``sqrt(sum mu_i^2)``, the
        next one included) stays within the budget: ``mu <= mu_B``."""
        if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not mu >= 0:
            raise ValueError(f"mu = {mu!r} is out of range: must be a number >= 0")
        # mu <= mu_B, decided by the library's epsilon, never below the exact root: a mu that
        # equals mu_B up to the root finder's last bits is refused, never allowed past E
        return mu <= self.mu_budget and (
            mu == 0 or gdp_epsilon(self.delta, mu) <= self.epsilon)

    def to_dict(self) -> dict[str, float | str]:
        return {"filter": "gdp", "mu_budget": self.mu_budget, "epsilon": self.epsilon,
                "delta": self.delta}


def rounds_within(allows: Callable[[int], bool], limit: int = MAX_HORIZON) -> int:
    """The largest ``r`` in ``0..limit`` with ``allows(r)`` (``allows`` true up to a point,
    false after: a spent budget only grows with the rounds)."""
    limit = check_int("limit", limit, 0)
    if not allows(1):
        return 0
    low, high = 1, 2
    while high <= limit and allows(high):
        low, high = high, 2 * high
    high = min(high, limit + 1)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if allows(middle) else (low, middle)
    return low
