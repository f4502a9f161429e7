"""The ``federated`` sections of the built-in algorithms, in torch-free modules.

One module per algorithm holds the pydantic model of its ``federated`` section (and the
constants and checks that model needs); the algorithm itself (:mod:`privfl.fl.algorithms`,
which imports torch) takes its ``config_class`` from here. A configuration is therefore
validated, and a typo answered, before torch is imported.

The configuration schema (:mod:`privfl.config.schema`) names no algorithm: it reads the
registry of :mod:`privfl.config.sections`. :func:`register_builtin_algorithms` is the one call
that puts the built-ins there; the application layer makes it once (the command line,
:mod:`privfl.cli.main`; the runner's package, :mod:`privfl.report`; the Flower apps,
:mod:`privfl.flower.apps`), as does :mod:`privfl.fl.algorithms.registry`, so that importing the
algorithms is enough in a script. Each model is imported on first use.

========================  ==============================================  ====================
``federated.algorithm``   module                                          model
========================  ==============================================  ====================
``prifedsync``            :mod:`~privfl.config.algorithms.prifedsync`     ``PriFedSyncConfig``
``dp-fedavg``             :mod:`~privfl.config.algorithms.dp_fedavg`      ``DpFedAvgConfig``
``insdp-fedsgd``          :mod:`~privfl.config.algorithms.insdp`          ``InsDpFedSgdConfig``
``insdp-fedavg``          :mod:`~privfl.config.algorithms.insdp`          ``InsDpFedAvgConfig``
``dp-dsgd``               :mod:`~privfl.config.algorithms.dp_dsgd`        ``DpDsgdConfig``
``projected-sgd``         :mod:`~privfl.config.algorithms.projected_sgd`  ``ProjectedSgdConfig``
``dp-ftrl``               :mod:`~privfl.config.algorithms.correlated`     ``DpFtrlConfig``
``bandmf-fedavg``         :mod:`~privfl.config.algorithms.correlated`     ``BandMfFedAvgConfig``
========================  ==============================================  ====================
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from privfl.config.sections import register_federated_model, registered_algorithms

__all__ = ["BUILTIN_CONFIGS", "builtin_config", "register_builtin_algorithms"]

#: Built-in algorithms: name -> "module:Class" of the model of its ``federated`` section.
BUILTIN_CONFIGS: dict[str, str] = {
    "prifedsync": "privfl.config.algorithms.prifedsync:PriFedSyncConfig",
    "dp-fedavg": "privfl.config.algorithms.dp_fedavg:DpFedAvgConfig",
    "insdp-fedsgd": "privfl.config.algorithms.insdp:InsDpFedSgdConfig",
    "insdp-fedavg": "privfl.config.algorithms.insdp:InsDpFedAvgConfig",
    "dp-dsgd": "privfl.config.algorithms.dp_dsgd:DpDsgdConfig",
    "projected-sgd": "privfl.config.algorithms.projected_sgd:ProjectedSgdConfig",
    "dp-ftrl": "privfl.config.algorithms.correlated:DpFtrlConfig",
    "bandmf-fedavg": "privfl.config.algorithms.correlated:BandMfFedAvgConfig",
}


def builtin_config(name: str) -> Any:
    """The model of built-in algorithm ``name``'s ``federated`` section (imports its module)."""
    if name not in BUILTIN_CONFIGS:
        raise ValueError(f"name = {name!r} is not allowed: must be one of "
                         f"{', '.join(BUILTIN_CONFIGS)}")
    module, _, attr = BUILTIN_CONFIGS[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def register_builtin_algorithms() -> tuple[str, ...]:
    """Register each built-in algorithm's ``federated`` model (a loader, imported on first use)
    with :mod:`privfl.config.sections`, unless that name is registered already (an algorithm
    added at run time keeps its model). Imports no torch; calling it again changes nothing.
    Returns the names registered now."""
    known = set(registered_algorithms())
    added = tuple(name for name in BUILTIN_CONFIGS if name not in known)
    for name in added:
        register_federated_model(name, functools.partial(builtin_config, name))
    return added
