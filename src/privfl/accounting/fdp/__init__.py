"""f-DP: trade-off functions, the hypothesis-testing view of privacy (Dong, Roth, Su 2019
[DRS19]; Zheng et al. 2021). Not to be confused with ``privfl tradeoff``, the privacy-utility
trade-off of Zhang et al. 2022 (:mod:`privfl.distortion`).

A trade-off function ``f = T(P, Q)`` maps a type I error ``alpha`` to the smallest type II error
of a test of ``P`` against ``Q`` at that level. ``f`` is a trade-off function iff it is convex,
continuous, non-increasing and ``f(alpha) <= 1 - alpha`` ([DRS19] Prop. 2.2). Larger is more
private; ``Id(alpha) = 1 - alpha`` is perfect privacy.

Modules, one job each (this package re-exports their public names):

* :mod:`~privfl.accounting.fdp.base` - :class:`TradeOff`, the base class: call it on
  scalars or arrays of alpha in [0, 1]; :meth:`~TradeOff.inv` (generalised inverse),
  :meth:`~TradeOff.fixed_point`, :meth:`~TradeOff.delta` (the (epsilon, delta) profile) and
  :meth:`~TradeOff.epsilon`;
* :mod:`~privfl.accounting.fdp.gaussian` - :class:`GaussianTradeOff` ``G_mu`` (closed forms
  throughout); :func:`identity` is ``G_0``;
* :mod:`~privfl.accounting.fdp.tabulated` - :class:`TabulatedTradeOff`: convex
  piecewise-linear ``f`` given by its vertices. Everything about it is exact: its inverse, its
  (epsilon, delta) profile, its subsampling and its tensor product (a piecewise-linear
  trade-off function is exactly that of a pair of discrete distributions);
  :func:`from_epsilon_delta`;
* :mod:`~privfl.accounting.fdp.tabulation` - :func:`lower_tabulation` (a rigorous
  piecewise-linear lower bound of any trade-off function);
* :mod:`~privfl.accounting.fdp.operators` - :func:`mixture` ``f_p``, :func:`inverse`,
  :func:`client_sampling_lower_bound` (Zheng et al. 2021, Lemma 3.8);
* :mod:`~privfl.accounting.fdp.subsampling` - :func:`subsample` ``C_p``;
* :mod:`~privfl.accounting.fdp.composition` - :func:`compose` (tensor product),
  :func:`tensor_power`;
* :mod:`~privfl.accounting.fdp.federated` - PriFedSync's record-level federated f-DP, weak and
  strong (Zheng et al. 2021, Theorem 2), with its CLT mu (an estimate);
* :mod:`~privfl.accounting.fdp.profile` - :func:`epsilon_delta_profile`,
  :func:`epsilon_for_delta`, :func:`total_variation_bound`, :func:`is_symmetric`,
  :func:`is_convex`.

Soundness convention: whenever a trade-off function is approximated (tabulation, coarsening of a
tensor product), the approximation is a LOWER bound on the true one, so it never overstates
privacy; closed forms and root finders are exact up to floating-point rounding (~1e-15). A
tabulation is within a certified absolute gap (``TabulatedTradeOff.gap``, default 1e-8) of the
function: (epsilon, delta) read from it are sound, but only tight for delta well above that gap.
"""

from privfl.accounting.fdp.base import TradeOff
from privfl.accounting.fdp.composition import compose, tensor_power
from privfl.accounting.fdp.gaussian import GaussianTradeOff, identity
from privfl.accounting.fdp.operators import (
    ClientSampledTradeOff,
    InverseTradeOff,
    MixtureTradeOff,
    client_sampling_lower_bound,
    inverse,
    mixture,
)
from privfl.accounting.fdp.profile import (
    epsilon_delta_profile,
    epsilon_for_delta,
    is_convex,
    is_symmetric,
    total_variation_bound,
)
from privfl.accounting.fdp.subsampling import SubsampledGaussianTradeOff, subsample
from privfl.accounting.fdp.tabulated import (
    MAX_PAIR_EPSILON,
    TabulatedTradeOff,
    from_epsilon_delta,
)
from privfl.accounting.fdp.tabulation import lower_tabulation

__all__ = [
    "MAX_PAIR_EPSILON",
    "ClientSampledTradeOff",
    "GaussianTradeOff",
    "InverseTradeOff",
    "MixtureTradeOff",
    "SubsampledGaussianTradeOff",
    "TabulatedTradeOff",
    "TradeOff",
    "client_sampling_lower_bound",
    "compose",
    "epsilon_delta_profile",
    "epsilon_for_delta",
    "from_epsilon_delta",
    "identity",
    "inverse",
    "is_convex",
    "is_symmetric",
    "lower_tabulation",
    "mixture",
    "subsample",
    "tensor_power",
    "total_variation_bound",
]
