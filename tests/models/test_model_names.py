"""The names ``model.name`` accepts without torch (:mod:`privfl.config.model_names`) are exactly
:mod:`privfl.models`'s, and a model registered at run time validates too."""

from __future__ import annotations

import pytest
import torch

from privfl import models
from privfl.config import config_from_dict
from privfl.config.model_names import (
    BUILTIN_MODEL_ABOUT,
    BUILTIN_MODEL_NAMES,
    MODEL_ALIASES,
    model_names,
)


def test_the_static_list_is_the_models_registry():
    assert list(BUILTIN_MODEL_NAMES) == sorted(models._BUILTIN_MODELS,
                                               key=list(models.MODELS).index)
    assert models.MODEL_ALIASES is MODEL_ALIASES
    assert set(MODEL_ALIASES.values()) <= set(BUILTIN_MODEL_NAMES)


def test_an_alias_is_stored_as_its_current_name_and_a_typo_names_the_models():
    raw = {"model": {"name": "seed0-mnist-cnn"}}
    assert config_from_dict(raw).model.name == "zheng2021-mnist-cnn"
    with pytest.raises(ValueError, match="model.name = 'mlpp' is not allowed: must be one of "
                       "zheng2021-mnist-cnn, .*logreg, mlp"):
        config_from_dict({"model": {"name": "mlpp"}})


def test_a_registered_model_validates_in_a_configuration():
    name = "test-model-names-linear"
    with pytest.raises(ValueError, match=name):
        config_from_dict({"model": {"name": name}})
    before = dict(models.MODELS._entries)
    try:
        models.register_model(name, lambda num_classes=10, input_shape=(1, 8, 8):
                              torch.nn.Linear(64, num_classes))
        assert name in model_names()
        assert config_from_dict({"model": {"name": name}}).model.name == name
    finally:
        models.MODELS._entries.clear()
        models.MODELS._entries.update(before)


def test_the_static_lines_are_the_classes_docstrings_and_defaults():
    from privfl.cli.info import _first_line

    for name, about in BUILTIN_MODEL_ABOUT.items():
        factory, defaults = models.MODELS[name]
        given = ", ".join(f"{k} = {v}" for k, v in defaults.items())
        assert about == _first_line(factory) + (f" (defaults: {given})" if given else ""), name
