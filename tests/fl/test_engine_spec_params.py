"""LocalTrainingSpec (validation, the accountant's view derived from it) and stacking helpers."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from _engine_helpers import TinyCNN

from privfl.accounting.events import Neighbouring, NoisyStep, Sampling, Unit
from privfl.accounting.fdp.federated import ClientTraining
from privfl.fl import (
    CohortTrainer,
    LocalTrainingSpec,
    load_params,
    put_rows,
    replicate_params,
    stack_params,
    take_rows,
    unstack_params,
)


def test_privacy_step_is_derived_from_the_spec():
    spec = LocalTrainingSpec(local_steps=38, batch_size=16, clip_norm=1.0, noise_multiplier=2.0,
                             optimizer="adam", lr=1e-3)
    step = spec.privacy_step(600)
    assert step == NoisyStep(2.0, 16 / 600, Sampling.WITHOUT_REPLACEMENT)
    assert spec.noise_std == 2.0 and spec.private
    event = spec.privacy_event(600, rounds=10)
    assert event.total_steps == 380 and event.neighbouring is Neighbouring.REPLACE_ONE
    assert event.unit is Unit.RECORD
    # Zheng et al. 2021's accounting object for this client (paper sigma 1, z = 2) has this step
    client = ClientTraining(records=600, batch_size=16, local_steps=38, noise_multiplier=2.0)
    assert client.step() == step
    poisson = LocalTrainingSpec(local_steps=2, batch_size=4, sampling="poisson", clip_norm=2.0,
                                noise_multiplier=1.1)
    assert poisson.privacy_step(40) == NoisyStep(1.1, 0.1, Sampling.POISSON)
    assert poisson.privacy_event(40, 3).neighbouring is Neighbouring.ADD_REMOVE
    assert poisson.noise_std == pytest.approx(2.2)
    with pytest.raises(ValueError, match="records = 10"):
        spec.privacy_step(10)


def test_non_private_specs_refuse_a_privacy_step():
    for spec in (LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=None),
                 LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=1.0)):
        assert not spec.private
        with pytest.raises(ValueError, match="not differentially private"):
            spec.privacy_step(10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"local_steps": 0}, "local_steps = 0"),
        ({"batch_size": -2}, "batch_size = -2"),
        ({"sampling": "shuffling"}, "sampling = 'shuffling'"),
        ({"clip_norm": 0.0}, "clip_norm = 0"),
        ({"noise_multiplier": -1.0}, "noise_multiplier = -1"),
        ({"clip_norm": None, "noise_multiplier": 1.0}, "noise_multiplier = 1.0"),
        ({"optimizer": "rmsprop"}, "optimizer = 'rmsprop'"),
        ({"lr": 0.0}, "lr = 0"),
        ({"momentum": 1.0}, "momentum = 1"),
        ({"betas": (0.9, 1.0)}, r"betas\[1\] = 1"),
        ({"betas": 0.9}, "betas = 0.9"),
        ({"weight_decay": -0.1}, "weight_decay = -0.1"),
        ({"secure_noise": "yes"}, "secure_noise = 'yes'"),
        ({"secure": 1}, "secure = 1"),
        ({"secure": True, "secure_noise": False}, "secure = True and secure_noise = False"),
    ],
)
def test_spec_validation_names_the_argument(kwargs, message):
    base = {"local_steps": 2, "batch_size": 4, "clip_norm": 1.0, "noise_multiplier": 1.0}
    with pytest.raises(ValueError, match=message):
        LocalTrainingSpec(**{**base, **kwargs})


def test_secure_noise_is_a_deprecated_alias_of_secure():
    assert not LocalTrainingSpec(local_steps=2, batch_size=4).secure
    alias = LocalTrainingSpec(local_steps=2, batch_size=4, secure_noise=True)
    assert alias.secure
    assert alias == LocalTrainingSpec(local_steps=2, batch_size=4, secure=True)
    assert dataclasses.replace(alias, lr=0.5).secure  # replace keeps the resolved value
    assert not dataclasses.replace(alias, secure=False).secure
    assert "secure_noise" not in repr(alias) and "secure=True" in repr(alias)


def test_stacking_round_trips():
    torch.manual_seed(0)
    models = [TinyCNN() for _ in range(3)]
    stacked = stack_params(models)
    assert stacked["conv1.weight"].shape == (3, 4, 1, 3, 3)
    rows = unstack_params(stacked)
    for model, row in zip(models, rows, strict=True):
        for name, p in model.named_parameters():
            assert torch.equal(row[name], p.detach())
    again = stack_params(rows)
    assert all(torch.equal(again[n], stacked[n]) for n in stacked)
    target = TinyCNN()
    load_params(target, stacked, 2)
    assert torch.equal(target.fc1.weight, models[2].fc1.weight)
    copies = replicate_params(models[0], 4)
    assert all(torch.equal(copies[n][3], copies[n][0]) for n in copies)
    picked = take_rows(stacked, [2, 0])
    assert torch.equal(picked["fc2.bias"][0], stacked["fc2.bias"][2])
    put_rows(copies, [1], take_rows(stacked, [2]))
    assert torch.equal(copies["fc2.bias"][1], stacked["fc2.bias"][2])
    trainer = CohortTrainer(TinyCNN(), LocalTrainingSpec(local_steps=1, batch_size=1))
    flat = trainer.flatten(stacked)
    assert flat.shape == (3, trainer.num_params)
    assert all(torch.equal(v, stacked[n]) for n, v in trainer.unflatten(flat).items())


def test_stacking_bad_input():
    with pytest.raises(ValueError, match="sources"):
        stack_params([])
    with pytest.raises(ValueError, match=r"sources\[1\]"):
        stack_params([TinyCNN(), {"w": torch.zeros(1)}])
    with pytest.raises(ValueError, match="count = 0"):
        replicate_params(TinyCNN(), 0)
    with pytest.raises(ValueError, match="index = 5"):
        load_params(TinyCNN(), stack_params([TinyCNN()]), 5)
    with pytest.raises(ValueError, match="index"):
        take_rows(stack_params([TinyCNN()]), [3])
