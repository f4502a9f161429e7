"""Poisoning attacks the algorithms simulate, below the algorithms and above the data.

* :mod:`~privfl.attacks.poisoning` — poisoning attacks on a federated dataset (backdoor, label
  flip, distributed backdoor, model replacement; user and instance level) and their test sets
  (Xie et al. 2023).
* :mod:`~privfl.attacks.config` — the ``attack`` section of a run configuration.
* :mod:`~privfl.attacks.triggers` — the pixel triggers.
* :mod:`~privfl.attacks.metrics` — update scaling and the attack success measures (torch).

Layering: this package imports only :mod:`privfl.data` and the validators, so the algorithms
(:mod:`privfl.algorithms`) and the configuration schema use it without importing the
certification (:mod:`privfl.robustness`) or the report.
"""
