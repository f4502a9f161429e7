"""Events, method selection and labelled results."""

import math

import pytest

from privfl.accounting.events import (
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    UnsupportedEventError,
    dpsgd_event,
)
from privfl.accounting.methods import account, resolve_methods
from privfl.accounting.results import PrivacyResult


def test_resolve_methods():
    assert resolve_methods("all") == ("rdp", "pld", "gdp-clt")
    assert resolve_methods(["gdp", "pld", "gdp-clt"]) == ("gdp-clt", "pld")
    with pytest.raises(ValueError, match="method"):
        resolve_methods("moments")


def test_every_result_is_fully_labelled():
    report = account(dpsgd_event(1.0, 0.01, 1000), delta=1e-5)
    assert [r.method for r in report.results] == ["rdp", "pld", "gdp-clt"]
    for result in report.results:
        data = result.to_dict()
        for key in (
            "method",
            "kind",
            "epsilon",
            "delta",
            "unit",
            "neighbouring",
            "sampling",
            "release",
            "steps",
        ):
            assert key in data
        assert data["unit"] == "record" and data["neighbouring"] == "add-remove"
        assert data["sampling"] == "poisson (q=0.01)" and data["delta"] == 1e-5
    kinds = {r.method: r.kind for r in report.results}
    assert kinds == {"rdp": "bound", "pld": "bound", "gdp-clt": "estimate"}
    eps = {r.method: r.epsilon for r in report.results}
    assert eps["pld"] < eps["rdp"]


def test_delta_query():
    report = account(dpsgd_event(1.0, 0.01, 1000), epsilon=1.0, methods="pld")
    (result,) = report.results
    assert 0 < result.delta < 1 and result.epsilon == 1.0


def test_unsupported_named_method_raises_and_all_lists_it():
    event = dpsgd_event(1.0, 0.01, 100, sampling="without-replacement", neighbouring="add-remove")
    with pytest.raises(UnsupportedEventError, match="add-remove|without-replacement"):
        account(event, delta=1e-5, methods="pld")
    with pytest.raises(UnsupportedEventError):
        account(event, delta=1e-5, methods="all")  # no accountant supports it


def test_exactly_one_of_delta_epsilon():
    event = dpsgd_event(1.0, 0.01, 10)
    with pytest.raises(ValueError):
        account(event)
    with pytest.raises(ValueError):
        account(event, delta=1e-5, epsilon=1.0)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(noise_multiplier=0.0, sampling_rate=0.1, steps=1), "noise_multiplier"),
        (dict(noise_multiplier=-1.0, sampling_rate=0.1, steps=1), "noise_multiplier"),
        (dict(noise_multiplier=math.nan, sampling_rate=0.1, steps=1), "noise_multiplier"),
        (dict(noise_multiplier=1.0, sampling_rate=0.0, steps=1), "sampling_rate"),
        (dict(noise_multiplier=1.0, sampling_rate=1.5, steps=1), "sampling_rate"),
        (dict(noise_multiplier=1.0, sampling_rate=math.nan, steps=1), "sampling_rate"),
        (dict(noise_multiplier=1.0, sampling_rate=0.1, steps=-1), "steps"),
        (dict(noise_multiplier=1.0, sampling_rate=0.1, steps=1.5), "steps"),
    ],
)
def test_bad_event_input(kwargs, name):
    with pytest.raises(ValueError, match=name) as info:
        dpsgd_event(**kwargs)
    assert "must be" in str(info.value)


def test_delta_validation_in_accountants():
    event = dpsgd_event(1.0, 0.01, 10)
    for bad in (0.0, 1.0, -0.1, math.nan):
        with pytest.raises(ValueError, match="delta"):
            account(event, delta=bad)
    with pytest.raises(ValueError, match="epsilon"):
        account(event, epsilon=-1.0)


def test_sampling_none_requires_rate_one():
    with pytest.raises(ValueError, match="sampling_rate"):
        NoisyStep(1.0, 0.5, Sampling.NONE)
    assert NoisyStep(1.0, 1.0, Sampling.POISSON).effective_sampling is Sampling.NONE


def test_heterogeneous_composition_is_between_parts():
    a, b = NoisyStep(1.0, 0.01), NoisyStep(2.0, 0.02)
    both = PrivacyEvent(((a, 500), (b, 500)), neighbouring=Neighbouring.ADD_REMOVE)
    only_a = PrivacyEvent(((a, 500),))
    eps_both = account(both, delta=1e-5, methods="rdp").results[0].epsilon
    eps_a = account(only_a, delta=1e-5, methods="rdp").results[0].epsilon
    assert eps_both > eps_a
    assert both.total_steps == 1000
    assert both.sampling_label == "poisson (q=0.01), poisson (q=0.02)"


def test_result_kind_validated():
    with pytest.raises(ValueError, match="kind"):
        PrivacyResult("x", "guess", 1.0, 1e-5, "record", "add-remove", "poisson", "all", 1)
