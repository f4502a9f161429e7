"""Last-iterate ("hidden state") accounting of projected noisy SGD by contraction.

Asoodeh, Chen, Calmon, Özgür, "Differentially Private Federated Learning: An Information-Theoretic
Perspective" (ISIT 2021), with the corrections listed in docs/accountants/last-iterate.md.

Projected noisy SGD over a secret random partition of the users releases only its last model
W_T; each round's noise and projection onto a ball of radius rho contract what earlier rounds
reveal, so a user's delta(eps) shrinks with every later round:
``delta(eps) = (1/T) sum_t theta_eps(r1_t) prod_{j>t} theta_eps(rc_j)`` (Theorem 2), with
``theta_eps(r)`` the hockey-stick divergence of two unit Gaussians r apart.

This package's entry point; the work is done in five modules, one job each (every name in
``__all__`` is re-exported here):

* :mod:`privfl.accounting.contraction.theta`: theta_eps(r) in log space and Theorem 2's
  closed form for constant parameters.
* :mod:`privfl.accounting.contraction.run`: :class:`ProjectedNoisySGD`, the run (the paper's
  Algorithm 1, or independent rounds), validated, with its derived arguments and its queries
  (delta, epsilon, the paper's bounds (11) and (12), diagnostics).
* :mod:`privfl.accounting.contraction.bounds`: the run's bounds, in log space: the per-round
  chains of Theorem 2 and Corollary 3, the sharpened chain rule, and the multi-round extension.
* :mod:`privfl.accounting.contraction.report`: the labelled report (:func:`run_report`,
  :func:`last_iterate_report`), the all-iterates comparison event (:func:`all_iterates_event`)
  and Corollary 1 (:func:`corollary1`, :func:`corollary1_utility_bound`).

* :mod:`privfl.accounting.contraction.accountant`: the registered ``contraction`` accountant,
  which answers a last-iterate release node of an event tree.
"""

from __future__ import annotations

from privfl.accounting.contraction.report import (
    BASELINES,
    all_iterates_event,
    corollary1,
    corollary1_utility_bound,
    last_iterate_report,
    run_report,
)
from privfl.accounting.contraction.run import RELEASES, SCHEDULES, ProjectedNoisySGD
from privfl.accounting.contraction.theta import closed_form_delta, log_theta, theta

__all__ = [
    "RELEASES",
    "BASELINES",
    "SCHEDULES",
    "ProjectedNoisySGD",
    "theta",
    "log_theta",
    "closed_form_delta",
    "corollary1",
    "corollary1_utility_bound",
    "all_iterates_event",
    "last_iterate_report",
    "run_report",
]
