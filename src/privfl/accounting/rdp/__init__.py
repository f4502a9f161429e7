"""Renyi differential privacy (RDP) accounting: per-step curves, composition and conversion.

Everything here is numpy/scipy. An RDP curve is an array ``rdp[k]`` = RDP at ``orders[k]``;
composition adds curves order by order (Mironov 2017, Prop. 1) and a curve is turned into
(epsilon, delta) by :func:`epsilon_from_rdp` / :func:`delta_from_rdp`.

Modules, one job each (this package re-exports their public names; like every accountant
family it imports the core of :mod:`privfl.accounting`, events and results, and the core
reaches it only through the registry's names):

* :mod:`~privfl.accounting.rdp.orders` - the order grids (:data:`DEFAULT_ORDERS`,
  :data:`LEGACY_ORDERS`), :func:`resolve_orders`, the cap :data:`MAX_SUBSAMPLED_ORDER`;
* :mod:`~privfl.accounting.rdp.poisson` - Poisson-subsampled Gaussian, add/remove
  (Mironov, Talwar & Zhang 2019): :func:`rdp_poisson_gaussian`, its integer and series regimes;
* :mod:`~privfl.accounting.rdp.poisson_quadrature` - its quadrature regime (ill-conditioned
  series at fractional orders);
* :mod:`~privfl.accounting.rdp.unsampled` - no subsampling: :func:`rdp_gaussian`
  (Mironov 2017, Prop. 7), :func:`rdp_laplace` (Prop. 6);
* :mod:`~privfl.accounting.rdp.without_replacement` - fixed-size batches, replace-one, any base
  mechanism (Wang, Balle & Kasiviswanathan 2019, Thm. 9): :func:`rdp_without_replacement`;
* :mod:`~privfl.accounting.rdp.without_replacement_gaussian` - fixed-size batches, Gaussian
  (Wang, Balle & Kasiviswanathan 2019, Thm. 27): :func:`rdp_without_replacement_gaussian`;
* :mod:`~privfl.accounting.rdp.log_terms` - log-space terms shared by the subsampled sums;
* :mod:`~privfl.accounting.rdp.conversion` - RDP -> (epsilon, delta): :func:`epsilon_from_rdp`,
  :func:`delta_from_rdp` (Mironov 2017; Balle et al. 2020);
* :mod:`~privfl.accounting.rdp.xie2023_proposition2` - Xie et al. 2023, Proposition 2 as printed:
  :func:`xie2023_proposition2_epsilon`;
* :mod:`~privfl.accounting.rdp.accountant` - :class:`RdpAccountant`, which sums each step's
  curve over an event and converts.
"""

from privfl.accounting.rdp.accountant import RdpAccountant
from privfl.accounting.rdp.conversion import CONVERSIONS, delta_from_rdp, epsilon_from_rdp
from privfl.accounting.rdp.orders import (
    DEFAULT_ORDERS,
    LEGACY_ORDERS,
    MAX_SUBSAMPLED_ORDER,
    resolve_orders,
)
from privfl.accounting.rdp.poisson import rdp_poisson_gaussian
from privfl.accounting.rdp.unsampled import rdp_gaussian, rdp_laplace
from privfl.accounting.rdp.without_replacement import rdp_without_replacement
from privfl.accounting.rdp.without_replacement_gaussian import (
    WOR_GAUSSIAN_EXACT_MAX_ORDER,
    rdp_without_replacement_gaussian,
)
from privfl.accounting.rdp.xie2023_proposition2 import xie2023_proposition2_epsilon

__all__ = [
    "CONVERSIONS",
    "DEFAULT_ORDERS",
    "LEGACY_ORDERS",
    "MAX_SUBSAMPLED_ORDER",
    "WOR_GAUSSIAN_EXACT_MAX_ORDER",
    "RdpAccountant",
    "delta_from_rdp",
    "epsilon_from_rdp",
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_poisson_gaussian",
    "rdp_without_replacement",
    "rdp_without_replacement_gaussian",
    "resolve_orders",
    "xie2023_proposition2_epsilon",
]
