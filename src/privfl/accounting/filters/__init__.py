"""Privacy filters: a budget fixed in advance that fully adaptive composition stays inside.

* :mod:`~privfl.accounting.filters.rules` - the Rényi filter (Feldman and Zrnic 2021) at an
  order fixed in advance, the Gaussian-DP filter (Smith and Thakurta 2022; Whitehouse et al.
  2023), the RDP budget of an order and the choice of that order before a run starts.
"""

from privfl.accounting.filters.rules import (
    GaussianFilter,
    RenyiFilter,
    choose_order,
    rdp_budget_for,
    rounds_within,
)

__all__ = ["GaussianFilter", "RenyiFilter", "choose_order", "rdp_budget_for", "rounds_within"]
