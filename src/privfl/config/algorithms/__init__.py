"""The ``federated`` sections of the built-in algorithms, in torch-free modules.

One module per algorithm holds the pydantic model of its ``federated`` section (and the
constants and checks that model needs); the algorithm itself (:mod:`privfl.algorithms`,
which imports torch) takes its ``config_class`` from here. A configuration is therefore
validated, and a typo answered, before torch is imported.

The configuration schema (:mod:`privfl.config.schema`) names no algorithm: it reads the
registry of :mod:`privfl.config.sections`. :func:`register_builtin_algorithms` is the one call
that puts the built-ins there; the application layer makes it once (the command line,
:mod:`privfl.cli.main`; the runner's package, :mod:`privfl.runs`; the Flower apps,
:mod:`privfl.flower.apps`), as does :mod:`privfl.algorithms.registry`, so that importing the
algorithms is enough in a script. Each model is imported on first use.

:data:`BUILTIN_ALGORITHMS` is the one table of the built-ins: for each ``federated.algorithm``,
its model's and its class's ``module:Class`` and one line about it.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any

from privfl.config.sections import register_federated_model, registered_algorithms

__all__ = ["BUILTIN_ALGORITHMS", "BuiltinAlgorithm", "builtin_config",
           "register_builtin_algorithms"]


@dataclass(frozen=True)
class BuiltinAlgorithm:
    """A built-in algorithm: where its ``federated`` model and its class live
    (``"module:Class"``, imported on first use) and one line about it."""

    config: str
    algorithm: str
    about: str


#: The built-in algorithms, keyed by ``federated.algorithm``: the one table the configuration
#: schema, the algorithm registry (:mod:`privfl.algorithms.registry`), ``privfl list`` and
#: ``privfl run --help`` read.
BUILTIN_ALGORITHMS: dict[str, BuiltinAlgorithm] = {
    "prifedsync": BuiltinAlgorithm(
        "privfl.config.algorithms.prifedsync:PriFedSyncConfig",
        "privfl.algorithms.prifedsync:PriFedSync",
        "PriFedSync, record-level federated f-DP with personalised helper models "
        "(Zheng et al. 2021)"),
    "dp-fedavg": BuiltinAlgorithm(
        "privfl.config.algorithms.dp_fedavg:DpFedAvgConfig",
        "privfl.algorithms.dp_fedavg:DpFedAvg",
        "DP-FedAvg, client-level DP (McMahan et al. 2018; Xie et al. 2023, Algorithm 1)"),
    "insdp-fedsgd": BuiltinAlgorithm(
        "privfl.config.algorithms.insdp:InsDpFedSgdConfig",
        "privfl.algorithms.insdp:InsDpFedSgd",
        "InsDP-FedSGD, record-level DP-SGD in each client, FedSGD (Xie et al. 2023, "
        "Algorithm 2)"),
    "insdp-fedavg": BuiltinAlgorithm(
        "privfl.config.algorithms.insdp:InsDpFedAvgConfig",
        "privfl.algorithms.insdp:InsDpFedAvg",
        "InsDP-FedAvg, record-level DP-SGD in each client, FedAvg (Xie et al. 2023, "
        "Algorithm 3)"),
    "dp-dsgd": BuiltinAlgorithm(
        "privfl.config.algorithms.dp_dsgd:DpDsgdConfig",
        "privfl.algorithms.dp_dsgd:DpDsgd",
        "DP distributed SGD with random client participation (Hasircioglu and Gunduz 2022)"),
    "projected-sgd": BuiltinAlgorithm(
        "privfl.config.algorithms.projected_sgd:ProjectedSgdConfig",
        "privfl.algorithms.projected_sgd:ProjectedSgd",
        "projected noisy SGD, only the last iterate released (Asoodeh et al. 2021)"),
    "dp-ftrl": BuiltinAlgorithm(
        "privfl.config.algorithms.correlated:DpFtrlConfig",
        "privfl.algorithms.dp_ftrl:DpFtrl",
        "DP-FTRL, user-level DP with tree aggregation, no sampling (Kairouz et al. 2021)"),
    "bandmf-fedavg": BuiltinAlgorithm(
        "privfl.config.algorithms.correlated:BandMfFedAvgConfig",
        "privfl.algorithms.bandmf_fedavg:BandMfFedAvg",
        "BandMF-FedAvg, user-level DP with banded matrix-factorization noise "
        "(Choquette-Choo et al. 2023)"),
}


def builtin_config(name: str) -> Any:
    """The model of built-in algorithm ``name``'s ``federated`` section (imports its module)."""
    if name not in BUILTIN_ALGORITHMS:
        raise ValueError(f"name = {name!r} is not allowed: must be one of "
                         f"{', '.join(BUILTIN_ALGORITHMS)}")
    module, _, attr = BUILTIN_ALGORITHMS[name].config.partition(":")
    return getattr(importlib.import_module(module), attr)


def register_builtin_algorithms() -> tuple[str, ...]:
    """Register each built-in algorithm's ``federated`` model (a loader, imported on first use)
    with :mod:`privfl.config.sections`, unless that name is registered already (an algorithm
    added at run time keeps its model). Imports no torch; calling it again changes nothing.
    Returns the names registered now."""
    known = set(registered_algorithms())
    added = tuple(name for name in BUILTIN_ALGORITHMS if name not in known)
    for name in added:
        register_federated_model(name, functools.partial(builtin_config, name),
                                 BUILTIN_ALGORITHMS[name].about)
    return added
