"""Federated algorithms built on the round engine (:mod:`privfl.fl`), on one seam.

* :mod:`~privfl.algorithms.base` — the protocol (select a cohort, local work, aggregate,
  evaluate, a privacy plan) and :mod:`~privfl.algorithms.registry` (``federated.algorithm``;
  importing this package registers every built-in algorithm's ``federated`` model with
  :mod:`privfl.config.sections`, which the configuration schema reads).

* :class:`PriFedSync` — Zheng et al. 2021, Algorithm 1, local NoisySGD / noisy Adam (Algorithm 2),
  Poisson client sampling with a stated empty-cohort policy, aggregation with step eta,
  pluggable helper maps (:class:`IdentityHelper` = FedAvg, :class:`InterpolationHelper`),
  personalised and global evaluation, and per-round accounting (Zheng et al. 2021, Theorem 2).
* :mod:`privfl.algorithms.builders` — build an algorithm (or its privacy plan alone) from a
  :class:`privfl.config.ExperimentConfig`; the runner is :mod:`privfl.runs.experiment`.
"""

from privfl.algorithms.base import (
    FederatedAlgorithm,
    PrivacyPlan,
    RoundAlgorithm,
    privacy_entries,
)
from privfl.algorithms.prifedsync import (
    EMPTY_COHORT_POLICIES,
    PriFedSync,
    PriFedSyncConfig,
    PriFedSyncPrivacy,
)
from privfl.algorithms.prifedsync_helpers import (
    HELPERS,
    HelperMap,
    IdentityHelper,
    InterpolationHelper,
    make_helper,
)
from privfl.algorithms.registry import algorithm_class, register

__all__ = [
    "algorithm_class",
    "register",
    "EMPTY_COHORT_POLICIES",
    "FederatedAlgorithm",
    "HELPERS",
    "HelperMap",
    "IdentityHelper",
    "InterpolationHelper",
    "PriFedSync",
    "PriFedSyncConfig",
    "PriFedSyncPrivacy",
    "PrivacyPlan",
    "RoundAlgorithm",
    "make_helper",
    "privacy_entries",
]
