"""Audit a claimed (epsilon, delta) on a concrete pair of neighbouring output laws in 1-D.

An accountant *claims* that a mechanism is (epsilon, delta)-DP. For one concrete pair of
neighbouring inputs D, D' the mechanism's outputs have laws P = M(D) and Q = M(D'), and the claim
implies (Balle et al. 2018, Theorem 1; Hasircioglu and Gunduz 2022, Theorem 2.3)

    E_g(P || Q) <= delta  and  E_g(Q || P) <= delta,   g = e^epsilon,

with the hockey-stick divergence ``E_g(P || Q) = int (p(x) - g q(x))_+ dx``. This package computes
both sides of that inequality for one-dimensional output laws: Gaussians, Laplaces and finite
mixtures of them (the Poisson-subsampled Gaussian, random participation), and T-fold products of
such pairs (composition). A computed ``E_g > delta`` on one pair *disproves* the claim; passing on
some pairs proves nothing about the others (use a proven accountant for that).

Modules, one job each (every name below is re-exported here):

* :mod:`~privfl.accounting.audit.laws`: the output laws (Gaussian/Laplace mixtures, products).
* :mod:`~privfl.accounting.audit.exact`: the exact divergence of a 1-D pair (crossing search,
  tail-accurate CDF pieces, error bound) and of compositions of Gaussian shifts.
* :mod:`~privfl.accounting.audit.monte_carlo`: Monte Carlo estimates with empirical-Bernstein
  (Maurer and Pontil 2009) or CLT intervals.
* :mod:`~privfl.accounting.audit.verdict`: :func:`audit`, both directions against the claim,
  and its :class:`AuditReport`.
* :mod:`~privfl.accounting.audit.pairs`: adversarial pairs of mechanisms and privacy events, and
  :func:`audit_accountants`.

This package needs numpy and scipy only (never torch).
"""

from __future__ import annotations

from privfl.accounting.audit.exact import (
    ExactDivergence,
    exact_divergence,
    hockey_stick,
    hockey_stick_both,
)
from privfl.accounting.audit.laws import (
    Law,
    MixtureLaw,
    ProductLaw,
    UnsupportedAuditError,
    compose,
    gaussian,
    laplace,
    mixture,
    product,
)
from privfl.accounting.audit.monte_carlo import MonteCarloEstimate, monte_carlo_hockey_stick
from privfl.accounting.audit.pairs import (
    AdversarialPair,
    audit_accountants,
    gaussian_pair,
    laplace_pair,
    pair_for_event,
    participation_pair,
    subsampled_gaussian_pair,
)
from privfl.accounting.audit.verdict import AuditReport, audit

__all__ = [
    "AdversarialPair",
    "AuditReport",
    "ExactDivergence",
    "Law",
    "MixtureLaw",
    "MonteCarloEstimate",
    "ProductLaw",
    "UnsupportedAuditError",
    "audit",
    "audit_accountants",
    "compose",
    "exact_divergence",
    "gaussian",
    "gaussian_pair",
    "hockey_stick",
    "hockey_stick_both",
    "laplace",
    "laplace_pair",
    "mixture",
    "monte_carlo_hockey_stick",
    "pair_for_event",
    "participation_pair",
    "product",
    "subsampled_gaussian_pair",
]
