"""Protection mechanisms (spec T18) and the client-side hook on DP-FedAvg."""

import math

import numpy as np
import pytest
import torch

from privfl.algorithms.builders import build_dataset
from privfl.algorithms.dp_fedavg import DpFedAvg
from privfl.config import config_from_dict
from privfl.distortion.mechanisms import (
    ClientProtection,
    GaussianDistortion,
    PoissonRecordSampling,
    RandomMask,
    aggregate,
    sampled_mean_steps,
)


def test_aggregation_t18():
    models = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    torch.testing.assert_close(aggregate(models, [10, 30]),
                               torch.tensor([0.25, 0.75], dtype=torch.float64))
    torch.testing.assert_close(aggregate(models, weights="uniform"),
                               torch.tensor([0.5, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="sizes is missing"):
        aggregate(models)


def test_gaussian_distortion_moments():
    rows = torch.zeros(4000, 50, dtype=torch.float64)
    out = GaussianDistortion(0.09)(rows, torch.Generator().manual_seed(0))
    assert float(out.mean()) == pytest.approx(0.0, abs=4 * 0.3 / math.sqrt(2e5))
    assert float(out.var()) == pytest.approx(0.09, rel=0.01)
    assert float(rows.abs().sum()) == 0.0  # input untouched
    assert GaussianDistortion(0.0)(rows).abs().sum() == 0
    assert GaussianDistortion(0.5).tv(1.0, 3) == pytest.approx(
        __import__("privfl.distortion.divergence", fromlist=["x"]).tv_gaussian_isotropic(
            1.0, 1.5, 3))


def test_random_mask_keeps_rho_and_has_tv_one_minus_rho_to_the_d():
    rows = torch.ones(20_000, 5, dtype=torch.float64)
    mask = RandomMask(0.8)
    out = mask(rows, torch.Generator().manual_seed(1))
    assert float(out.mean()) == pytest.approx(0.8, abs=0.01)
    touched = float((out == 0).any(1).double().mean())  # P~(some zero) - P(some zero) = TV
    assert touched == pytest.approx(mask.tv(5), abs=0.015)
    assert mask.tv(5) == pytest.approx(1 - 0.8**5)


def test_poisson_record_sampling_and_algorithm_2_step():
    sampler = PoissonRecordSampling(0.3)
    masks = sampler.masks(40_000, 10, torch.Generator().manual_seed(2))
    assert float(masks.double().mean()) == pytest.approx(0.3, abs=0.005)
    grads = torch.arange(10, dtype=torch.float64).unsqueeze(1)
    steps = sampled_mean_steps(grads, masks, lr=0.5)
    sizes = masks.sum(1)
    row = int(torch.nonzero(sizes > 0)[0])
    expected = -0.5 * grads[masks[row]].mean()
    assert float(steps[row, 0]) == pytest.approx(float(expected))
    assert bool((steps[sizes == 0] == 0).all())  # empty S: no step
    assert sampler.select(0).numel() == 0


def small_config(**federated):
    return config_from_dict({
        "seed": 3, "data": {"dataset": "digits", "partition": "iid", "clients": 6,
                            "test_size": 10},
        "model": {"name": "logreg"},
        "training": {"local_steps": 2, "batch_size": 8, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"enabled": False},
        "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_rate": 1.0, **federated}})


def run_rounds(protection=None, rounds=3, config=None):
    config = config or small_config()
    data = build_dataset(config)
    algorithm = DpFedAvg.from_config(config, data)
    algorithm.protection = protection
    metrics = [algorithm.run_round() for _ in range(rounds)]
    return algorithm, metrics


def test_hook_off_or_empty_leaves_dp_fedavg_unchanged():
    plain, _ = run_rounds()
    empty, _ = run_rounds(ClientProtection())
    torch.testing.assert_close(plain.global_model, empty.global_model, rtol=0, atol=0)


def test_hook_distorts_and_samples():
    plain, _ = run_rounds()
    noisy, _ = run_rounds(ClientProtection(distortions=(GaussianDistortion(1e-2),)))
    assert not torch.equal(plain.global_model, noisy.global_model)
    # one round from the same start: the aggregate moves by the mean of 6 noises (var 1e-2 / 6)
    a, _ = run_rounds(rounds=1)
    b, _ = run_rounds(ClientProtection(distortions=(GaussianDistortion(1e-2),)), rounds=1)
    assert float((b.global_model - a.global_model).var()) == pytest.approx(1e-2 / 6, rel=0.1)
    # record sampling at p = 0.01 leaves fewer records than a batch: nobody trains
    start, _ = run_rounds(rounds=0)
    none, metrics = run_rounds(ClientProtection(sampling=PoissonRecordSampling(0.01)), rounds=1)
    torch.testing.assert_close(none.global_model, start.global_model, rtol=0, atol=0)
    assert math.isnan(metrics[0]["train_loss"])
    half, _ = run_rounds(ClientProtection(sampling=PoissonRecordSampling(0.5)), rounds=1)
    assert not torch.equal(half.global_model, start.global_model)


def test_secure_mode_refuses_a_seeded_protection():
    config = config_from_dict({**small_config().model_dump(mode="json"),
                               "privacy": {"enabled": True, "noise_multiplier": 1.0,
                                           "secure": True}})
    data = build_dataset(config)
    algorithm = DpFedAvg.from_config(config, data)
    with pytest.raises(ValueError, match="not secure"):
        DpFedAvg(algorithm.predictor.model, algorithm.spec, data, algorithm.plan,
                 protection=ClientProtection(distortions=(GaussianDistortion(0.1),)))
    secure = ClientProtection(distortions=(GaussianDistortion(0.1, secure=True),))
    assert DpFedAvg(algorithm.predictor.model, algorithm.spec, data, algorithm.plan,
                    protection=secure).protection is secure


@pytest.mark.parametrize(("call", "message"), [
    (lambda: GaussianDistortion(-1.0), "noise_variance = -1.0"),
    (lambda: RandomMask(1.5), "keep_rate = 1.5"),
    (lambda: PoissonRecordSampling(0.0), "rate = 0.0"),
    (lambda: GaussianDistortion(1.0)(torch.zeros(3)), "models must be"),
    (lambda: ClientProtection(sampling=0.5), "sampling = 0.5"),
    (lambda: aggregate(torch.zeros(2, 3), [1, -1]), "sizes = "),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_distortions_keep_numpy_free_rows_shape():
    rows = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    out = ClientProtection(distortions=(RandomMask(0.5), GaussianDistortion(0.1))).distort(
        rows, torch.Generator().manual_seed(1))
    assert out.shape == rows.shape and not np.shares_memory(out.numpy(), rows.numpy())
