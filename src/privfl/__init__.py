"""privfl: differentially private federated learning with privacy numbers you can trust.

The names a user of the Python API needs are here (docs/python-api.md)::

    from privfl import Dataset, Experiment, config_from_dict, federate_iid

They load on first use (PEP 562 ``__getattr__``), so ``import privfl`` and ``privfl --version``
stay cheap and import neither torch nor the rest of privfl. The facade is for users: privfl's
own modules import from the modules that define the names, never from here.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: name -> the module that defines it (loaded on first access)
_LAZY = {
    "Experiment": "privfl.runs.experiment",
    "ExperimentResult": "privfl.runs.result",
    "Dataset": "privfl.data.datasets",
    "FederatedDataset": "privfl.data.datasets",
    "federate_iid": "privfl.data.partition",
    "federate_dirichlet": "privfl.data.partition",
    "config_from_dict": "privfl.config.loader",
    "load_config": "privfl.config.loader",
    "register_model": "privfl.models",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    if name not in _LAZY:
        raise AttributeError(f"module 'privfl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # the next access is a plain lookup
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
