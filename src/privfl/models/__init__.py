"""The papers' models (torch) and a registry to build them by name.

==================  ==========================================  ============================
name                model                                       default parameters
==================  ==========================================  ============================
seed0-mnist-cnn     :class:`Seed0MnistCNN` (log_softmax, dropout)  1,199,882
seed0-cifar-cnn     :class:`Seed0CifarCNN` (no ReLU after conv3)   122,570
seed2-mnist-cnn     :class:`SmallConvNet`, 2 classes            25,746
seed2-cifar-cnn     :class:`Seed2CifarCNN`, 2 classes           130,434 (143,076 with 100)
seed3-emnist-cnn    :class:`SmallConvNet`, 62 classes (assumed)  27,726
logreg              :class:`LogisticRegression`                 7,850 on 1x28x28, 10 classes
mlp                 :class:`MLP` (200, 200)                     199,210 on 1x28x28, 10 classes
==================  ==========================================  ============================

``build_model(name, **kwargs)`` passes keyword arguments to the class (e.g. ``num_classes``,
``input_shape``, ``dropout``); :func:`count_parameters` counts (trainable) parameters.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from torch import nn

from privfl._validation import check_choice
from privfl.models.architectures import (
    MLP,
    LogisticRegression,
    Seed0CifarCNN,
    Seed0MnistCNN,
    Seed2CifarCNN,
    SmallConvNet,
)

__all__ = [
    "MLP",
    "MODELS",
    "LogisticRegression",
    "Seed0CifarCNN",
    "Seed0MnistCNN",
    "Seed2CifarCNN",
    "SmallConvNet",
    "build_model",
    "count_parameters",
    "list_models",
]

#: name -> (class, default keyword arguments)
MODELS: dict[str, tuple[Callable[..., nn.Module], dict]] = {
    "seed0-mnist-cnn": (Seed0MnistCNN, {}),
    "seed0-cifar-cnn": (Seed0CifarCNN, {}),
    "seed2-mnist-cnn": (SmallConvNet, {"num_classes": 2}),
    "seed2-cifar-cnn": (Seed2CifarCNN, {"num_classes": 2}),
    "seed3-emnist-cnn": (SmallConvNet, {"num_classes": 62}),
    "logreg": (LogisticRegression, {}),
    "mlp": (MLP, {}),
}


def list_models() -> list[str]:
    """Names accepted by :func:`build_model`."""
    return list(MODELS)


def build_model(name: str, **kwargs) -> nn.Module:
    """Build a registered model; ``kwargs`` override its defaults.

    Raises ``ValueError`` for an unknown name, an argument the model does not take, or an
    argument out of range (the message names it).
    """
    name = check_choice("name", name, MODELS)
    cls, defaults = MODELS[name]
    accepted = [
        p.name for p in inspect.signature(cls).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    for key in kwargs:
        if key not in accepted:
            raise ValueError(
                f"{key} = {kwargs[key]!r} is not allowed for model {name!r}: it takes "
                f"{', '.join(accepted) or 'no arguments'}"
            )
    return cls(**{**defaults, **kwargs})


def count_parameters(model: nn.Module, *, trainable_only: bool = True) -> int:
    """Number of scalar parameters (only those with ``requires_grad`` by default)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model = {type(model).__name__} is not allowed: must be a torch Module")
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
