"""The names ``model.name`` accepts, known without importing torch.

:mod:`privfl.models` (which imports torch) builds the models; this module only knows their
names, so that a configuration is validated, and a typo answered, before torch is imported.
``BUILTIN_MODEL_NAMES`` is a static list: ``tests/models/test_model_names.py`` checks it against
:data:`privfl.models.MODELS`. :func:`privfl.models.register_model` adds a name here too
(:func:`register_model_name`), so a model registered at run time validates as well.
"""

from __future__ import annotations

__all__ = ["BUILTIN_MODEL_ABOUT", "BUILTIN_MODEL_NAMES", "MODEL_ALIASES", "current_model_name",
           "model_names", "register_model_name"]

#: The built-in models (privfl.models.MODELS), in its order, each with the line ``privfl list
#: models`` prints: its class's first docstring paragraph and its default arguments
#: (tests/models/test_model_names.py rebuilds these lines from the classes).
BUILTIN_MODEL_ABOUT: dict[str, str] = {
    "zheng2021-mnist-cnn": "Zheng et al. 2021's MNIST CNN (the PyTorch MNIST example net), "
                           "1,199,882 parameters.",
    "zheng2021-cifar-cnn": "Zheng et al. 2021's CIFAR-10 CNN (TensorFlow tutorial CNN as in "
                           "their code), 122,570 parameters.",
    "xie2023-mnist-cnn": "The Opacus / TF-Privacy MNIST CNN: Xie et al. 2023's MNIST model, "
                         "Hasircioglu and Gunduz 2022's EMNIST model. (defaults: num_classes = 2)",
    "xie2023-cifar-cnn": "Xie et al. 2023's CIFAR model (the Opacus CIFAR-10 example CNN). "
                         "(defaults: num_classes = 2)",
    "hasircioglu2022-emnist-cnn": "The Opacus / TF-Privacy MNIST CNN: Xie et al. 2023's MNIST "
                                  "model, Hasircioglu and Gunduz 2022's EMNIST model. "
                                  "(defaults: num_classes = 62)",
    "logreg": "Multinomial logistic regression: flatten, one Linear layer, logits.",
    "mlp": "Fully connected network: flatten, hidden layers with activation, logits.",
    "xie2023-sent140-lstm": "Xie et al. 2023's Sent140 LSTM (after Li et al. 2018): E = 300 "
                            "(GloVe), two layers of H = 256, two classes; embeddings frozen when "
                            "read from GloVe (LEAF, Li et al. 2018) unless "
                            "freeze_embeddings=False. 1,098,242 trainable parameters with "
                            "frozen embeddings.",
    "leaf-shakespeare-lstm": "LEAF's Shakespeare character LSTM: E = 8, two layers of H = 256, "
                             "one output per character of the vocabulary (num_classes "
                             "defaults to V; the target is the next character).",
}

#: The built-in models' names (privfl.models.MODELS), in its order.
BUILTIN_MODEL_NAMES: tuple[str, ...] = tuple(BUILTIN_MODEL_ABOUT)

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
