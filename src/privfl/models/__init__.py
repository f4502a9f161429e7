"""The papers' models (torch) and a registry to build them by name.

==========================  ==================================================  =================
name                        model                                               default parameters
==========================  ==================================================  =================
zheng2021-mnist-cnn         :class:`Zheng2021MnistCNN` (log_softmax, dropout)   1,199,882
zheng2021-cifar-cnn         :class:`Zheng2021CifarCNN` (no ReLU after conv3)    122,570
xie2023-mnist-cnn           :class:`SmallConvNet`, 2 classes                    25,746
xie2023-cifar-cnn           :class:`Xie2023CifarCNN`, 2 classes                 130,434 (143,076
                                                                                with 100)
hasircioglu2022-emnist-cnn  :class:`SmallConvNet`, 62 classes (assumed)         27,726
logreg                      :class:`LogisticRegression`                         7,850 on 1x28x28,
                                                                                10 classes
mlp                         :class:`MLP` (200, 200)                             199,210 on
                                                                                1x28x28, 10 classes
xie2023-sent140-lstm        :class:`Xie2023Sent140LSTM` (GloVe 300-d, LSTM      1,098,242 with
                            2 x 256, last step)                                 frozen embeddings
leaf-shakespeare-lstm       :class:`LeafShakespeareLSTM` (8-d, LSTM 2 x 256)    798,720 + 265 V
==========================  ==================================================  =================

A paper's model is named by its first author and year (Zheng et al. 2021, Xie et al. 2023,
Hasircioglu and Gunduz 2022). The names of earlier privfl versions (``seed0-mnist-cnn``, ...)
still work: :data:`MODEL_ALIASES` maps each to its current name, :func:`resolve_model_name`
translates one (with a ``DeprecationWarning``), and :data:`MODELS` finds a model under either.

``build_model(name, **kwargs)`` passes keyword arguments to the class (e.g. ``num_classes``,
``input_shape``, ``dropout``); :func:`count_parameters` counts (trainable) parameters.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from torch import nn

from privfl._validation import check_choice
from privfl.config.model_names import MODEL_ALIASES, register_model_name
from privfl.models.architectures import (
    MLP,
    LogisticRegression,
    SmallConvNet,
    Xie2023CifarCNN,
    Zheng2021CifarCNN,
    Zheng2021MnistCNN,
)
from privfl.models.text import LeafShakespeareLSTM, TextLSTM, Xie2023Sent140LSTM

__all__ = [
    "MLP",
    "MODELS",
    "MODEL_ALIASES",
    "LeafShakespeareLSTM",
    "LogisticRegression",
    "SmallConvNet",
    "TextLSTM",
    "Xie2023CifarCNN",
    "Xie2023Sent140LSTM",
    "Zheng2021CifarCNN",
    "Zheng2021MnistCNN",
    "build_model",
    "count_parameters",
    "list_models",
    "register_model",
    "resolve_model_name",
]

ModelEntry = tuple[Callable[..., nn.Module], dict]

#: deprecated class name -> current class (``from privfl.models import Seed0MnistCNN`` works)
_CLASS_ALIASES: dict[str, type[nn.Module]] = {
    "Seed0MnistCNN": Zheng2021MnistCNN,
    "Seed0CifarCNN": Zheng2021CifarCNN,
    "Seed2CifarCNN": Xie2023CifarCNN,
}


class ModelRegistry(Mapping[str, ModelEntry]):
    """Current model name -> (class, default keyword arguments).

    Iterating, ``len`` and ``keys()`` give the current names only; looking up (``[]``, ``in``,
    ``get``) also accepts a deprecated alias of :data:`MODEL_ALIASES` and finds its model.
    """

    def __init__(self, entries: Mapping[str, ModelEntry], aliases: Mapping[str, str]) -> None:
        missing = sorted(set(aliases.values()) - set(entries))
        if missing:
            raise ValueError(f"aliases = {missing!r} name no registered model")
        self._entries = dict(entries)
        self._aliases = dict(aliases)

    def canonical(self, name: str) -> str:
        """The current name of ``name`` (itself unless it is a deprecated alias)."""
        return self._aliases.get(name, name)

    def __getitem__(self, name: str) -> ModelEntry:
        return self._entries[self.canonical(name)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"ModelRegistry({', '.join(self._entries)})"

    def add(self, name: str, entry: ModelEntry) -> None:
        """Register ``name`` (see :func:`register_model`)."""
        self._entries[name] = entry


#: name -> (class, default keyword arguments); deprecated aliases are found too
MODELS = ModelRegistry(
    {
        "zheng2021-mnist-cnn": (Zheng2021MnistCNN, {}),
        "zheng2021-cifar-cnn": (Zheng2021CifarCNN, {}),
        "xie2023-mnist-cnn": (SmallConvNet, {"num_classes": 2}),
        "xie2023-cifar-cnn": (Xie2023CifarCNN, {"num_classes": 2}),
        "hasircioglu2022-emnist-cnn": (SmallConvNet, {"num_classes": 62}),
        "logreg": (LogisticRegression, {}),
        "mlp": (MLP, {}),
        "xie2023-sent140-lstm": (Xie2023Sent140LSTM, {}),
        "leaf-shakespeare-lstm": (LeafShakespeareLSTM, {}),
    },
    MODEL_ALIASES,
)


_BUILTIN_MODELS = frozenset(MODELS)


def register_model(name: str, factory: Callable[..., nn.Module], **defaults: Any) -> None:
    """Make your own architecture usable as ``model.name: NAME`` in a configuration.

    ``factory(**kwargs)`` returns an ``nn.Module`` (a class or a function); it is given
    ``num_classes`` and ``input_shape`` from the data when its signature takes them, then
    ``defaults`` and the configuration's ``model.kwargs``. A resumed run needs the same
    registration in its process. Built-in names cannot be replaced; registering a name again
    replaces your earlier factory.
    """
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"name = {name!r} is not allowed: must be a non-empty name")
    if name in _BUILTIN_MODELS or name in MODEL_ALIASES:
        raise ValueError(f"name = {name!r} is not allowed: it is a built-in model's name")
    if not callable(factory):
        raise ValueError(f"factory = {factory!r} is not callable: must return an nn.Module")
    MODELS.add(name, (factory, dict(defaults)))
    register_model_name(name)  # model.name accepts it (checked without torch)


def list_models() -> list[str]:
    """Names accepted by :func:`build_model` (current names; deprecated aliases not listed)."""
    return list(MODELS)


def resolve_model_name(name: str) -> str:
    """The current name of a registered model: ``name`` itself, or the name a deprecated alias
    stands for (with a ``DeprecationWarning`` naming both).

    Raises ``ValueError`` naming the value and the registered names when ``name`` is neither.
    """
    if isinstance(name, str) and name in MODEL_ALIASES:
        current = MODEL_ALIASES[name]
        warnings.warn(
            f"model name {name!r} is deprecated: it is {current!r} (the same model)",
            DeprecationWarning,
            stacklevel=2,
        )
        return current
    return check_choice("name", name, MODELS)


def build_model(name: str, **kwargs) -> nn.Module:
    """Build a registered model; ``kwargs`` override its defaults.

    ``name`` may be a deprecated alias (:data:`MODEL_ALIASES`; a ``DeprecationWarning``).
    Raises ``ValueError`` for an unknown name, an argument the model does not take, or an
    argument out of range (the message names it).
    """
    name = resolve_model_name(name)
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


def __getattr__(name: str) -> type[nn.Module]:
    """Deprecated class names (``Seed0MnistCNN`` ...) resolve to the current classes."""
    if name in _CLASS_ALIASES:
        current = _CLASS_ALIASES[name]
        warnings.warn(
            f"privfl.models.{name} is deprecated: use privfl.models.{current.__name__}",
            DeprecationWarning,
            stacklevel=2,
        )
        return current
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
