"""Calibration: solutions sit on the safe side of the target and are tight."""

import pytest

from privfl.accounting.calibrate import (
    DpSgdTemplate,
    calibrate_noise,
    max_sampling_rate,
    max_steps,
)


def eps(z, q, t, method="rdp"):
    return DpSgdTemplate(delta=1e-5, method=method).epsilon(z, q, t).epsilon


def test_noise_is_smallest_that_meets_target():
    result = calibrate_noise(1.0, 1e-5, 0.01, 1000, rtol=1e-5)
    z = result.value
    assert result.result.epsilon <= 1.0
    assert eps(z * (1 - 1e-4), 0.01, 1000) > 1.0
    assert result.parameter == "noise_multiplier" and result.result.kind == "bound"


def test_noise_with_pld_is_below_rdp():
    rdp = calibrate_noise(1.0, 1e-5, 0.01, 1000, method="rdp").value
    pld = calibrate_noise(1.0, 1e-5, 0.01, 1000, method="pld").value
    assert pld < rdp


def test_max_steps_is_largest_within_budget():
    result = max_steps(2.0, 1e-5, 0.01, 1.0)
    t = int(result.value)
    assert t > 0 and result.result.epsilon <= 2.0
    assert eps(1.0, 0.01, t + 1) > 2.0


def test_max_steps_zero_when_one_step_is_too_much():
    assert max_steps(0.01, 1e-5, 1.0, 0.5).value == 0


def test_max_sampling_rate_is_largest_within_budget():
    result = max_sampling_rate(1.0, 1e-5, 1.0, 1000, rtol=1e-5)
    q = result.value
    assert result.result.epsilon <= 1.0
    assert eps(1.0, min(1.0, q * (1 + 1e-4)), 1000) > 1.0


def test_max_sampling_rate_full_batch_when_affordable():
    assert max_sampling_rate(50.0, 1e-5, 5.0, 10).value == 1.0


@pytest.mark.parametrize(
    "call,name",
    [
        (lambda: calibrate_noise(-1.0, 1e-5, 0.01, 10), "epsilon"),
        (lambda: calibrate_noise(1.0, 1.0, 0.01, 10), "delta"),
        (lambda: calibrate_noise(1.0, 1e-5, 0.0, 10), "sampling_rate"),
        (lambda: calibrate_noise(1.0, 1e-5, 0.01, 2.5), "steps"),
        (lambda: max_steps(1.0, 1e-5, 0.01, -2.0), "noise_multiplier"),
        (lambda: max_sampling_rate(1.0, 1e-5, 1.0, -1), "steps"),
        (lambda: calibrate_noise(0.0, 1e-5, 0.01, 10), "epsilon"),
    ],
)
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
