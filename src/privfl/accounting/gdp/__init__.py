"""Gaussian differential privacy (mu-GDP; Dong, Roth & Su 2019).

* :mod:`~privfl.accounting.gdp.accountant` - mu-GDP <-> (epsilon, delta), composition, the CLT
  mu of subsampled Gaussian steps (an estimate, not a bound) and :class:`GdpCltAccountant`;
* :mod:`~privfl.accounting.gdp.closed_form` - unsampled Gaussian steps: exact mu-GDP, the
  closed form the PLD accountant answers them with.
"""

from privfl.accounting.gdp.accountant import (
    GdpCltAccountant,
    fdp_clt_mu,
    gdp_compose,
    gdp_delta,
    gdp_epsilon,
    gdp_mu_for,
    poisson_clt_mu,
)
from privfl.accounting.gdp.closed_form import gdp_closed_form, unsampled_gaussian_mu

__all__ = [
    "GdpCltAccountant",
    "fdp_clt_mu",
    "gdp_closed_form",
    "gdp_compose",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_for",
    "poisson_clt_mu",
    "unsampled_gaussian_mu",
]
