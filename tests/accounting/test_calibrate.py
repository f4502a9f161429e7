"""Calibration: solutions sit on the safe side of the target and are tight; every answer says
its kind, and a search cap or an accountant that gave up is flagged, never silent."""

import pytest

from privfl.accounting.calibrate import solve as cal
from privfl.accounting.calibrate.solve import (
    DEFAULT_METHOD,
    DpSgdTemplate,
    calibrate_noise,
    max_sampling_rate,
    max_steps,
)
from privfl.accounting.events import Neighbouring, Sampling


def eps(z, q, t, method="rdp"):
    return DpSgdTemplate(delta=1e-5, method=method).epsilon(z, q, t).epsilon


def test_noise_is_smallest_that_meets_target():
    result = calibrate_noise(1.0, 1e-5, 0.01, 1000, rtol=1e-5, method="rdp")
    z = result.value
    assert result.result.epsilon <= 1.0
    assert eps(z * (1 - 1e-4), 0.01, 1000) > 1.0
    assert result.parameter == "noise_multiplier" and result.result.kind == "bound"
    assert result.kind == "bound" and not result.capped and result.warning == ""


def test_default_method_is_pld_the_tightest():
    assert DEFAULT_METHOD == "pld" and DpSgdTemplate(delta=1e-5).method == "pld"
    result = calibrate_noise(1.0, 1e-5, 0.01, 1000, rtol=1e-5)
    assert result.result.method == "pld" and result.kind == "bound"
    z = result.value
    assert result.result.epsilon <= 1.0
    assert eps(z * (1 - 1e-4), 0.01, 1000, method="pld") > 1.0
    data = result.to_dict()
    assert data["method"] == "pld" and data["kind"] == "bound" and data["capped"] is False
    assert "warning" not in data


def test_noise_with_pld_is_below_rdp():
    rdp = calibrate_noise(1.0, 1e-5, 0.01, 1000, method="rdp").value
    pld = calibrate_noise(1.0, 1e-5, 0.01, 1000, method="pld").value
    assert pld < rdp


def test_pld_is_much_tighter_for_fixed_size_batches():
    """Fixed-size batches (replace-one): RDP's noise is far larger than PLD's (issue 8)."""
    template = {"sampling": Sampling.WITHOUT_REPLACEMENT, "neighbouring": Neighbouring.REPLACE_ONE}
    rdp = calibrate_noise(1.0, 1e-5, 0.01, 1000, method="rdp", **template).value
    pld = calibrate_noise(1.0, 1e-5, 0.01, 1000, **template).value
    assert rdp > 1.5 * pld  # 5.42 against 3.18


@pytest.mark.parametrize("method", ["gdp", "gdp-clt"])
def test_calibration_on_an_estimate_is_labelled_an_estimate(method):
    result = calibrate_noise(1.0, 1e-5, 0.01, 1000, method=method)
    assert result.kind == "estimate" and result.result.kind == "estimate"
    assert result.result.method == "gdp-clt"
    assert "estimate" in result.warning and "not a bound" in result.warning
    data = result.to_dict()
    assert data["kind"] == "estimate" and data["result"]["kind"] == "estimate"
    assert "warning" in data
    steps = max_steps(2.0, 1e-5, 0.01, 1.0, method=method)
    rate = max_sampling_rate(1.0, 1e-5, 1.0, 1000, method=method)
    for answer in (steps, rate):
        assert answer.kind == "estimate" and "estimate" in answer.warning


def test_max_steps_is_largest_within_budget():
    result = max_steps(2.0, 1e-5, 0.01, 1.0, method="rdp")
    t = int(result.value)
    assert t > 0 and result.result.epsilon <= 2.0
    assert eps(1.0, 0.01, t + 1) > 2.0
    assert not result.capped and result.warning == ""


def test_max_steps_with_pld_is_largest_within_budget():
    result = max_steps(2.0, 1e-5, 0.01, 1.0)
    t = int(result.value)
    assert result.result.method == "pld" and result.result.epsilon <= 2.0
    assert eps(1.0, 0.01, t + 1, method="pld") > 2.0
    assert t > max_steps(2.0, 1e-5, 0.01, 1.0, method="rdp").value


def test_max_steps_zero_when_one_step_is_too_much():
    assert max_steps(0.01, 1e-5, 1.0, 0.5).value == 0


def test_max_steps_at_the_search_cap_is_flagged():
    """`--epsilon 1e6` used to come back as T = 1e9 without a word: the cap is not a solution."""
    result = max_steps(1e6, 1e-5, 0.01, 1.0, method="rdp")
    assert result.value == 10**9 and result.capped
    assert "search cap" in result.warning and "1,000,000,000" in result.warning
    assert result.to_dict()["capped"] is True and result.to_dict()["warning"] == result.warning
    small = max_steps(1e6, 1e-5, 0.01, 1.0, method="rdp", limit=1000)
    assert small.value == 1000 and small.capped and "1,000" in small.warning


def test_search_stops_where_the_accountant_cannot_evaluate(monkeypatch):
    """An accountant that cannot answer beyond some T (the PLD's FFT budget) stops the search at
    the largest certified T, flagged; the failing T is never reported as certified."""
    real = DpSgdTemplate.epsilon
    calls = []

    def limited(self, noise_multiplier, sampling_rate, steps):
        calls.append(steps)
        if steps > 3000:
            raise ValueError("would need an FFT of too many points: use fewer steps")
        return real(self, noise_multiplier, sampling_rate, steps)

    monkeypatch.setattr(cal.DpSgdTemplate, "epsilon", limited)
    result = max_steps(1e3, 1e-5, 0.01, 1.0, method="rdp")
    assert result.value == 2048 and result.capped  # 4096 failed: no bisection near the limit
    assert max(calls) == 4096 and calls.count(4096) == 1
    assert "could not evaluate steps = 4,096" in result.warning
    assert "too many points" in result.warning and "more steps" in result.warning
    assert result.result.steps == 2048 and result.result.epsilon <= 1e3


def test_first_evaluation_error_propagates(monkeypatch):
    def broken(self, noise_multiplier, sampling_rate, steps):
        raise ValueError("discretization = 1e-9 is out of range")

    monkeypatch.setattr(cal.DpSgdTemplate, "epsilon", broken)
    with pytest.raises(ValueError, match="discretization"):
        max_steps(1.0, 1e-5, 0.01, 1.0)


def test_noise_search_below_an_unevaluable_noise_is_flagged(monkeypatch):
    real = DpSgdTemplate.epsilon

    def limited(self, noise_multiplier, sampling_rate, steps):
        if noise_multiplier < 0.3:
            raise ValueError("would need an FFT of too many points")
        return real(self, noise_multiplier, sampling_rate, steps)

    monkeypatch.setattr(cal.DpSgdTemplate, "epsilon", limited)
    result = calibrate_noise(500.0, 1e-5, 0.01, 10, method="rdp")
    assert result.value >= 0.3 and result.capped and "less noise" in result.warning
    assert result.result.epsilon <= 500.0


def test_max_sampling_rate_is_largest_within_budget():
    result = max_sampling_rate(1.0, 1e-5, 1.0, 1000, rtol=1e-5, method="rdp")
    q = result.value
    assert result.result.epsilon <= 1.0
    assert eps(1.0, min(1.0, q * (1 + 1e-4)), 1000) > 1.0


def test_max_sampling_rate_full_batch_when_affordable():
    result = max_sampling_rate(50.0, 1e-5, 5.0, 10)
    assert result.value == 1.0 and not result.capped  # a solution: the budget is not binding


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
        (lambda: calibrate_noise(1.0, 1e-5, 0.01, 10, method="exact"), "method"),
    ],
)
def test_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_pld_max_steps_starts_from_rdp_and_is_within_rtol_of_the_largest():
    """PLD certifies at least RDP's steps; the answer is certified and within 1e-3 of the most."""
    from privfl.accounting.calibrate.solve import max_steps
    from privfl.accounting.events import dpsgd_event
    from privfl.accounting.pld.accountant import PldAccountant

    rdp = max_steps(8.0, 1e-5, 0.01, 1.0, method="rdp")
    pld = max_steps(8.0, 1e-5, 0.01, 1.0)
    assert (pld.result.method, pld.kind) == ("pld", "bound")
    assert pld.value >= rdp.value and pld.result.epsilon <= 8.0
    beyond = int(pld.value * (1 + 2e-3)) + 1
    assert PldAccountant().epsilon(dpsgd_event(1.0, 0.01, beyond), 1e-5).epsilon > 8.0
