"""Which pydantic model validates the ``federated`` section of each algorithm: a registry.

The configuration schema (:mod:`privfl.config.schema`) names no algorithm and imports none.
Each algorithm registers the model of its ``federated`` section here under its
``federated.algorithm`` name, and the schema reads the registry. The built-in algorithms' models
live in torch-free modules (:mod:`privfl.config.algorithms`) and are registered by one call,
:func:`privfl.config.algorithms.register_builtin_algorithms`, which the application layer makes
once (the command line, :mod:`privfl.runs`, the Flower apps; importing
:mod:`privfl.algorithms` makes it too); :func:`privfl.algorithms.registry.register` adds
an algorithm at run time. A configuration validated before that names an algorithm that is
"not allowed", with that hint.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["algorithm_about", "federated_model", "register_federated_model",
           "registered_algorithms", "unregister_federated_model"]

#: name -> the pydantic model of its ``federated`` section, or a zero-argument loader of it
_MODELS: dict[str, Any] = {}
#: name -> one line on the algorithm (``privfl list algorithms``, ``privfl run --help``)
_ABOUT: dict[str, str] = {}


def register_federated_model(name: str, model: type | Callable[[], type],
                             about: str = "") -> None:
    """Register ``model`` (a pydantic model class, or a zero-argument callable returning one) as
    the ``federated`` section of algorithm ``name``, with one line ``about`` the algorithm; a
    later registration replaces it."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name = {name!r} is not allowed: must be a non-empty string")
    if not callable(model):
        raise ValueError(f"model = {model!r} is not allowed: must be a model class or a loader")
    if not isinstance(about, str):
        raise ValueError(f"about = {about!r} is not allowed: must be a string")
    _MODELS[name] = model
    _ABOUT[name] = " ".join(about.split())


def algorithm_about(name: str) -> str:
    """The line registered about algorithm ``name`` ("" if none)."""
    return _ABOUT.get(name, "")


def unregister_federated_model(name: str) -> None:
    """Forget ``name`` (nothing happens if it was never registered)."""
    _MODELS.pop(name, None)
    _ABOUT.pop(name, None)


def registered_algorithms() -> tuple[str, ...]:
    """The names with a registered ``federated`` model, in registration order."""
    return tuple(_MODELS)


def federated_model(name: Any) -> type:
    """The model registered for ``name``: ValueError naming the registered algorithms if none;
    ImportError if its loader cannot import the algorithm (a missing optional dependency)."""
    entry = _MODELS.get(name) if isinstance(name, str) else None
    if entry is None:
        known = ", ".join(_MODELS) or ("none registered: call privfl.config.algorithms."
                                       "register_builtin_algorithms() first")
        raise ValueError(f"federated.algorithm = {name!r} is not allowed: must be one of {known}")
    if isinstance(entry, type):
        return entry
    model = entry()
    _MODELS[name] = model
    return model
