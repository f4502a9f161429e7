"""The registry of federated algorithms, keyed by ``federated.algorithm``.

Built-in algorithms are imported lazily (``module:Class``); their ``federated`` models live in
the torch-free :mod:`privfl.config.algorithms`, registered with :mod:`privfl.config.sections`
by :func:`~privfl.config.algorithms.register_builtin_algorithms`. :func:`register` adds an
algorithm at run time (a class following :class:`~privfl.algorithms.base.FederatedAlgorithm`
with a ``config_class``: the pydantic model of its ``federated`` section) and registers that
model too (the schema imports no algorithm).

The built-ins and one line on each are :data:`privfl.config.algorithms.BUILTIN_ALGORITHMS`
(``privfl list algorithms`` prints them).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from privfl._validation import check_choice
from privfl.config.algorithms import (
    BUILTIN_ALGORITHMS,
    builtin_config,
    register_builtin_algorithms,
)
from privfl.config.sections import register_federated_model, unregister_federated_model

__all__ = ["ALGORITHM_NAMES", "algorithm_class", "available", "config_class", "register",
           "unregister"]

#: Built-in algorithms: name -> "module:Class" (the one table, privfl.config.algorithms).
_BUILTIN: dict[str, str] = {name: entry.algorithm for name, entry in BUILTIN_ALGORITHMS.items()}
ALGORITHM_NAMES: tuple[str, ...] = tuple(_BUILTIN)
_REGISTERED: dict[str, Any] = {}


def register(cls: Any) -> Any:
    """Register an algorithm class under ``cls.name`` (usable as a decorator)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"algorithm {cls!r} has no name: set the class attribute `name`")
    if getattr(cls, "config_class", None) is None:
        raise ValueError(f"algorithm {name!r} has no config_class (its federated section)")
    _REGISTERED[name] = cls
    register_federated_model(name, cls.config_class, getattr(cls, "title", ""))
    return cls


def unregister(name: str) -> None:
    """Remove an algorithm added with :func:`register` (built-ins stay)."""
    _REGISTERED.pop(name, None)
    if name in _BUILTIN:
        register_federated_model(name, functools.partial(builtin_config, name),
                                 BUILTIN_ALGORITHMS[name].about)
    else:
        unregister_federated_model(name)


def available() -> tuple[str, ...]:
    """Every registered name: the built-ins that import, then those added at run time."""
    names = []
    for name in _BUILTIN:
        try:
            algorithm_class(name)
        except ImportError:
            continue
        names.append(name)
    return (*names, *(n for n in _REGISTERED if n not in _BUILTIN))


def algorithm_class(name: str) -> Any:
    """The class registered as ``name``."""
    if name in _REGISTERED:
        return _REGISTERED[name]
    check_choice("federated.algorithm", name, (*_BUILTIN, *_REGISTERED))
    module, _, attr = _BUILTIN[name].partition(":")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as error:
        raise ImportError(f"federated.algorithm = {name!r} is not available in this "
                          f"installation ({error})") from None
    _REGISTERED[name] = cls
    return cls


def config_class(name: str) -> Any:
    """The pydantic model of ``name``'s ``federated`` section."""
    return algorithm_class(name).config_class


# the schema validates ``federated`` with these (privfl.config.sections): the built-ins' torch-free
# models (privfl.config.algorithms), so that importing the algorithms is enough in a script
register_builtin_algorithms()
