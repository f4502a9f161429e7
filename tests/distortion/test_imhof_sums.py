"""Imhof's integrand by power sums (the fast path of the per-coordinate TV) against the direct
evaluation, within the truncation bound it reports; and the known closed form."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.distortion.diagonal import (
    _imhof_difference,
    noise_variance_diagonal,
    tv_gaussian_diagonal,
)
from privfl.distortion.divergence import tv_gaussian_isotropic
from privfl.distortion.imhof import SERIES_RADIUS, PowerSums, terms_direct


def _envelope(lam, u, k):
    """``(1 + sum |x|) / (u rho(u))``: the scale of the rounding errors of either evaluation."""
    x = lam[None, :] * u[:, None]
    return (1.0 + np.abs(x) @ k) * np.exp(-0.25 * (np.log1p(x * x) @ k)) / u


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(-6.0, 6.0), st.booleans(), st.integers(1, 50)),
                min_size=1, max_size=300),
       st.floats(-5.0, 5.0), st.floats(-4.0, 4.0), st.integers(0, 2**32 - 1))
def test_power_sums_equal_the_direct_integrand_within_their_bound(coords, log_scale, shift,
                                                                   seed):
    lam = np.array([(-1.0 if negative else 1.0) * 10.0 ** e for e, negative, _ in coords])
    k = np.array([float(m) for *_, m in coords])
    u = 10.0 ** (np.random.default_rng(seed).uniform(-3.0, 3.0, 200) - log_scale)
    fast, bound = PowerSums(lam, k).terms(shift, u)
    direct = terms_direct(lam, shift, u, k)
    assert np.all(bound >= 0)
    assert np.all(np.abs(fast - direct) <= bound + 1e-12 * _envelope(lam, u, k))


def test_the_series_are_used_and_their_bound_is_tiny():
    lam = np.exp(np.random.default_rng(1).uniform(-20.0, 0.0, 5000))
    sums = PowerSums(lam, np.ones(lam.size))
    assert sums.series
    u = np.array([0.5, 50.0, 5e3])
    share = [(np.abs(lam * x) > SERIES_RADIUS) & (np.abs(lam * x) < 1 / SERIES_RADIUS)
             for x in u]
    assert max(s.mean() for s in share) < 0.3  # most coordinates go through the series
    fast, bound = sums.terms(0.3, u)
    assert np.all(bound <= 1e-18 * np.abs(_envelope(lam, u, np.ones(lam.size))))
    assert np.allclose(fast, terms_direct(lam, 0.3, u, np.ones(lam.size)), rtol=0, atol=1e-12)


def test_a_few_large_coordinates_go_through_the_series_in_one_over_x():
    lam = np.array([-30.0, 1e-3, 0.02, 0.5, 40.0])  # at u = 1: two large, two small, one direct
    k = np.array([1.0, 3.0, 2.0, 1.0, 1.0])
    u = np.array([0.7, 1.0, 2.0])
    fast, bound = PowerSums(lam, k).terms(-0.4, u)
    direct = terms_direct(lam, -0.4, u, k)
    assert np.all(bound < 1e-20) and np.all(np.abs(direct) > 1e-3)
    assert np.allclose(fast, direct, rtol=1e-13, atol=0)


def test_a_spread_too_wide_for_the_powers_is_evaluated_directly():
    lam = np.array([1e-9, 1.0, 1e4])
    sums = PowerSums(lam, np.ones(3))
    assert not sums.series
    u = np.array([0.1, 1.0, 10.0])
    fast, bound = sums.terms(0.0, u)
    assert np.array_equal(fast, terms_direct(lam, 0.0, u, np.ones(3))) and not bound.any()


@pytest.mark.parametrize("integrand", ["power sums", "direct"])
@pytest.mark.parametrize(("d", "ratio"), [(2, 1.5), (50, 1.2), (30, 1.5), (100, 3.0),
                                          (2000, 1.0004), (2000, 1.02), (7850, 1.00005)])
def test_the_numerical_inversion_keeps_the_isotropic_closed_form_to_4e_11(integrand, d, ratio):
    """Equal ratios forced through the numerical inversion (the closed form is not used)."""
    tv, error = _imhof_difference(np.full(d, ratio), np.ones(d), integrand)
    assert error < 1e-11
    assert abs(tv - tv_gaussian_isotropic(1.0, ratio, d)) <= 4e-11


def _variances(draw_spread, d, seed):
    return np.exp(np.random.default_rng(seed).uniform(0.0, draw_spread, d)) * 1e-9


@settings(max_examples=25, deadline=None)
@given(st.floats(0.1, 9.0), st.integers(2, 3000), st.floats(-4.0, 1.0),
       st.integers(0, 2**32 - 1))
def test_fast_tv_equals_the_direct_one_within_the_reported_errors(spread, d, log_x, seed):
    a = _variances(spread, d, seed)
    b = a + 10.0 ** log_x * float(a.mean()) / math.sqrt(d)
    fast = tv_gaussian_diagonal(a, b)
    direct = tv_gaussian_diagonal(a, b, integrand="direct")
    assert fast.method == direct.method
    assert abs(fast.tv - direct.tv) <= fast.error + direct.error + 1e-13


def test_calibration_by_power_sums_equals_the_direct_one():
    a = _variances(math.log(1.1e-5 / 1.7e-9), 4000, 0)
    for target in (0.001, 0.005):
        fast = noise_variance_diagonal(a, target)
        assert fast == pytest.approx(noise_variance_diagonal(a, target, integrand="direct"),
                                     rel=1e-8)
        assert tv_gaussian_diagonal(a, a + fast).tv == pytest.approx(target, rel=1e-8)


@pytest.mark.parametrize("call", [
    lambda: tv_gaussian_diagonal([1.0, 2.0], [2.0, 3.0], integrand="fast"),
    lambda: noise_variance_diagonal([1.0, 2.0], 0.1, integrand=None),
])
def test_an_unknown_integrand_is_one_line(call):
    with pytest.raises(ValueError, match=r"integrand = .* is not allowed: must be one of "
                                         r"'power sums', 'direct'") as info:
        call()
    assert "\n" not in str(info.value)
