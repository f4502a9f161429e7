"""The PLD accountant answers unsampled Gaussian events in closed form (exact mu-GDP).

Cross-checks: the closed form is never below the exact mu-GDP value and above it by at most the
profile's error allowance; it equals the discretised composition (the path it replaces) to its
grid error; the steps count through mu = sqrt(T) s / z; and events with a sampled step still
go through the discretised composition.
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.accounting.events import PrivacyEvent, dpsgd_event
from privfl.accounting.gdp.accountant import gdp_delta, gdp_epsilon
from privfl.accounting.gdp.closed_form import (
    GDP_RELATIVE_ERROR,
    gdp_closed_form,
    unsampled_gaussian_mu,
)
from privfl.accounting.pld.accountant import PldAccountant, composed_epsilon, poisson_gaussian_pld


@settings(max_examples=40, deadline=None)
@given(z=st.floats(0.3, 50.0), steps=st.integers(1, 10_000),
       relation=st.sampled_from(["add-remove", "replace-one"]),
       delta=st.sampled_from([1e-3, 1e-5, 1e-9, 1e-12]))
def test_closed_form_is_the_exact_gdp_value_on_the_safe_side(z, steps, relation, delta):
    event = dpsgd_event(z, 1.0, steps, sampling="none", neighbouring=relation)
    s = 2.0 if relation == "replace-one" else 1.0
    mu = math.sqrt(steps) * s / z
    result = PldAccountant().epsilon(event, delta)
    exact = float(gdp_epsilon(delta, mu))
    assert result.kind == "bound" and result.extras["mu"] == pytest.approx(mu, rel=1e-12)
    # the GDP value itself, with the same error allowance (one path)
    assert result.epsilon == float(gdp_epsilon(delta, result.extras["mu"]))
    assert abs(result.epsilon - exact) <= 1e-7 * max(exact, 1e-3)
    with mpmath.workdps(60):  # never below the exact root: the exact delta there is <= delta
        e, m = mpmath.mpf(result.epsilon), mpmath.mpf(result.extras["mu"])
        assert mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2) <= delta
    at = PldAccountant().delta(event, max(exact, 0.1))
    truth = float(gdp_delta(max(exact, 0.1), mu))
    assert truth <= at.delta <= truth * (1.0 + 2.0 * GDP_RELATIVE_ERROR)


@pytest.mark.parametrize(("z", "steps", "delta"), [(10.0, 100, 1e-5), (3.0, 16, 1e-6),
                                                    (1.5, 1, 1e-8)])
def test_closed_form_matches_the_discretised_composition_it_replaces(z, steps, delta):
    closed = PldAccountant().epsilon(dpsgd_event(z, 1.0, steps, sampling="none"), delta).epsilon
    grid = composed_epsilon(poisson_gaussian_pld(z, 1.0), steps, delta)
    assert closed <= grid  # the pessimistic grid can only add
    assert closed == pytest.approx(grid, rel=1e-6)


def test_steps_count_through_mu():
    four = PldAccountant().epsilon(dpsgd_event(2.0, 1.0, 4, sampling="none"), 1e-5)
    one = PldAccountant().epsilon(dpsgd_event(1.0, 1.0, 1, sampling="none"), 1e-5)
    assert four.extras["mu"] == one.extras["mu"] == 1.0
    assert four.epsilon == one.epsilon
    assert four.steps == 4 and one.steps == 1


def test_a_mu_beyond_the_grid_is_answered():
    event = dpsgd_event(1.0, 1.0, 10_000, sampling="none")  # mu = 100: an FFT of 1.2e8 points
    result = PldAccountant().epsilon(event, 1e-5)
    assert result.epsilon == pytest.approx(float(gdp_epsilon(1e-5, 100.0)), rel=1e-9)
    assert unsampled_gaussian_mu(event) == 100.0


def test_an_event_with_a_sampled_step_is_still_composed_on_the_grid():
    sampled = dpsgd_event(1.0, 0.01, 100)
    plain = dpsgd_event(4.0, 1.0, 3, sampling="none")
    mixed = PrivacyEvent(sampled.steps + plain.steps)
    result = PldAccountant().epsilon(mixed, 1e-5)
    assert "fft_error_bound" in result.extras and "closed_form" not in result.extras
    alone = PldAccountant().epsilon(sampled, 1e-5).epsilon
    assert result.epsilon > alone


def test_closed_form_arguments_are_checked():
    with pytest.raises(ValueError, match="exactly one"):
        gdp_closed_form(1.0)
    with pytest.raises(ValueError, match="mu"):
        gdp_closed_form(-1.0, delta=1e-5)
    assert gdp_closed_form(math.inf, delta=1e-5) == (math.inf, 1e-5)
    assert gdp_closed_form(0.0, epsilon=1.0) == (1.0, 0.0)


@settings(max_examples=30, deadline=None)
@given(z=st.floats(0.5, 20.0), rounds=st.integers(2, 8), per_round=st.integers(1, 200))
def test_closed_form_round_by_round_is_monotone_and_equals_one_event(z, rounds, per_round):
    """A run asks round 1, 2, ... in turn: each answer is the one of the rounds given as
    separate groups (to the rounding of summing mu^2 in another order), and one more round
    never lowers epsilon."""
    accountant = PldAccountant()
    got = [accountant.epsilon(dpsgd_event(z, 1.0, r * per_round, sampling="none"), 1e-6)
           for r in range(1, rounds + 1)]
    split = PrivacyEvent(tuple(dpsgd_event(z, 1.0, per_round, sampling="none").steps * rounds))
    assert accountant.epsilon(split, 1e-6).epsilon == pytest.approx(got[-1].epsilon, rel=1e-12)
    epsilons = [r.epsilon for r in got]
    assert epsilons == sorted(epsilons) and epsilons[0] < epsilons[-1]
