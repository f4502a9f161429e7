"""Certified robustness against poisoning for differentially private federated learning
(Xie et al. 2023, "Unraveling the connections between privacy and certified robustness in
federated learning against poisoning attacks").

* :mod:`~privfl.robustness.certify` — certified prediction (the certified number of adversaries
  K and its cap), group privacy.
* :mod:`~privfl.robustness.calibration` — confidence bounds of Monte Carlo estimates
  (Hoeffding, Clopper-Pearson; simultaneous over classes).
* :mod:`~privfl.robustness.certified_accuracy` — certificates of an ensemble of M models on a
  test set; certified accuracy as a function of k.
* :mod:`~privfl.robustness.inefficacy` — certified attack inefficacy (lower and upper bounds)
  and the minimum number of attackers for a target effect.
* :mod:`~privfl.robustness.adversary` — which (epsilon, delta) and how many neighbouring steps
  a certificate uses for an adversary who adds/removes or replaces a unit.
* :mod:`~privfl.robustness.pipeline` and :mod:`~privfl.robustness.recompute` — ``privfl certify``
  and ``privfl certify recompute``.
* :mod:`~privfl.robustness.montecarlo` — M independently noised DP models of one configuration
  trained together on the engine (:mod:`~privfl.robustness.replica_runner`), their predictions
  cached (:mod:`~privfl.robustness.replica_cache`) with the privacy statement, epsilon per model
  and M x epsilon (:mod:`~privfl.robustness.replica_privacy`).

The attacks themselves live in :mod:`privfl.attacks` (below the algorithms, which use them).

Submodules are imported lazily (``privfl.robustness.certify`` does not import torch).
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = ("certify", "calibration", "certified_accuracy", "inefficacy", "adversary",
               "montecarlo", "replica_cache", "replica_privacy", "replica_runner", "pipeline",
               "recompute")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
