"""The names ``model.name`` accepts, known without importing torch.

:mod:`privfl.models` (which imports torch) builds the models; this module only knows their
names, so that a configuration is validated, and a typo answered, before torch is imported.
``BUILTIN_MODEL_NAMES`` is a static list: ``tests/models/test_model_names.py`` checks it against
:data:`privfl.models.MODELS`. :func:`privfl.models.register_model` adds a name here too
(:func:`register_model_name`), so a model registered at run time validates as well.
"""

from __future__ import annotations

__all__ = ["BUILTIN_MODEL_NAMES", "MODEL_ALIASES", "current_model_name", "model_names",
           "register_model_name"]

#: The built-in models (privfl.models.MODELS), in its order.
BUILTIN_MODEL_NAMES: tuple[str, ...] = (
    "zheng2021-mnist-cnn",
    "zheng2021-cifar-cnn",
    "xie2023-mnist-cnn",
    "xie2023-cifar-cnn",
    "hasircioglu2022-emnist-cnn",
    "logreg",
    "mlp",
)

#: deprecated model name -> current name (earlier versions named models by internal numbers)
MODEL_ALIASES: dict[str, str] = {
    "seed0-mnist-cnn": "zheng2021-mnist-cnn",
    "seed0-cifar-cnn": "zheng2021-cifar-cnn",
    "seed2-mnist-cnn": "xie2023-mnist-cnn",
    "seed2-cifar-cnn": "xie2023-cifar-cnn",
    "seed3-emnist-cnn": "hasircioglu2022-emnist-cnn",
}

_REGISTERED: list[str] = []


def register_model_name(name: str) -> None:
    """Accept ``name`` in ``model.name`` (called by :func:`privfl.models.register_model`)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name = {name!r} is not allowed: must be a non-empty string")
    if name not in BUILTIN_MODEL_NAMES and name not in _REGISTERED:
        _REGISTERED.append(name)


def model_names() -> tuple[str, ...]:
    """The current names ``model.name`` accepts: the built-ins, then those registered."""
    return (*BUILTIN_MODEL_NAMES, *_REGISTERED)


def current_model_name(name: str) -> str:
    """``name`` itself, or the current name a deprecated alias stands for; ValueError naming
    the accepted names otherwise."""
    if isinstance(name, str) and name in MODEL_ALIASES:
        return MODEL_ALIASES[name]
    if name not in model_names():
        raise ValueError(f"must be one of {', '.join(model_names())}")
    return name
