"""TV between Gaussians with per-coordinate variances, and the calibration that uses it."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from privfl.distortion.calibrate import (
    AnisotropyWarning,
    mask_keep_rate,
    noise_calibrations,
    noise_variance_exact,
)
from privfl.distortion.diagonal import (
    noise_variance_diagonal,
    tv_diagonal_bracket,
    tv_diagonal_monte_carlo,
    tv_gaussian_diagonal,
)
from privfl.distortion.divergence import tv_gaussian_isotropic
from privfl.distortion.mechanisms import GaussianDistortion


def log_uniform(d, low=1.7e-9, high=1.1e-5, seed=0):
    """Per-coordinate variances spanning the range of the default model's (issue 21)."""
    return np.exp(np.random.default_rng(seed).uniform(math.log(low), math.log(high), d))


@pytest.mark.parametrize(("d", "ratio"), [(1, 1.5), (2, 1.5), (3, 2.0), (6, 1.1), (10, 1.05),
                                          (30, 1.5), (100, 3.0), (2000, 1.0004), (2000, 1.02)])
def test_numerical_inversion_matches_the_isotropic_closed_form(d, ratio):
    a = np.linspace(1.0, 2.0, d)
    exact = tv_gaussian_isotropic(1.0, ratio, d)
    equal = tv_gaussian_diagonal(a, a * ratio)  # equal ratios: the chi-square form
    assert equal.method.startswith("exact") and equal.tv == pytest.approx(exact, rel=1e-12)
    b = a * ratio
    b[0] *= 1 + 1e-9  # unequal ratios: Imhof's inversion (moves the TV by < 1e-9)
    numerical = tv_gaussian_diagonal(a, b)
    if d > 1:
        assert numerical.method.startswith("numerical")
        assert numerical.error < 1e-8
    assert numerical.tv == pytest.approx(exact, abs=2e-9)
    assert numerical.tv_lower <= numerical.tv <= numerical.tv_upper


def _inner(alpha, beta, s_p, s_q):
    """``int |alpha N(x; 0, s_p) - beta N(x; 0, s_q)| dx`` in closed form: the two terms
    cross at ``|x| = c`` (if at all), so the integral is ``|D| + |alpha - beta - D|`` with
    ``D`` the signed integral over ``|x| < c``."""
    if alpha == 0 or beta == 0 or s_p == s_q:
        return abs(alpha - beta)
    c2 = (math.log(beta / alpha) + 0.5 * math.log(s_p / s_q)) / (0.5 / s_q - 0.5 / s_p)
    if c2 <= 0:
        return abs(alpha - beta)
    c = math.sqrt(c2)
    inside = (alpha * (2 * stats.norm.cdf(c / math.sqrt(s_p)) - 1)
              - beta * (2 * stats.norm.cdf(c / math.sqrt(s_q)) - 1))
    return abs(inside) + abs(alpha - beta - inside)


def _tv_by_quadrature(a, b):
    """``1/2 int |p - q|`` in two dimensions: the inner integral in closed form, the outer by
    adaptive quadrature (independent of the inversion)."""
    def outer(x):
        alpha = stats.norm.pdf(x, scale=math.sqrt(a[0]))
        beta = stats.norm.pdf(x, scale=math.sqrt(b[0]))
        return _inner(alpha, beta, a[1], b[1])

    return 0.5 * integrate.quad(outer, -np.inf, np.inf, epsabs=1e-12, limit=400)[0]


@pytest.mark.parametrize(("a", "b"), [([1.0, 2.0], [0.5, 5.0]), ([1.0, 1.0], [1.5, 1.2]),
                                      ([0.3, 4.0], [0.31, 9.0])])
def test_two_dimensions_against_direct_quadrature(a, b):
    result = tv_gaussian_diagonal(a, b)
    assert result.tv == pytest.approx(_tv_by_quadrature(a, b), abs=1e-8)
    assert result.tv_lower <= result.tv <= result.tv_upper


def test_monte_carlo_agrees_on_the_anisotropic_default_range():
    v = log_uniform(2000)
    for noise in (1e-11, 1e-10):
        result = tv_gaussian_diagonal(v, v + noise)
        estimate, se = tv_diagonal_monte_carlo(v, v + noise, draws=8000, seed=3)
        assert abs(estimate - result.tv) <= 4 * se
        assert result.tv_lower <= result.tv <= result.tv_upper


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.floats(0.05, 20), st.floats(0.05, 20)), min_size=1, max_size=40))
def test_bracket_contains_the_tv(pairs):
    a, b = np.array(pairs).T
    lower, _, upper, _ = tv_diagonal_bracket(a, b)
    tv = tv_gaussian_diagonal(a, b).tv
    assert 0 <= lower <= tv + 1e-9 and tv - 1e-9 <= upper <= 1


def test_isotropic_calibration_is_far_off_on_anisotropic_parameters():
    """Issue 21's finding on a synthetic stand-in for the default model (d = 2000, variances
    from 1.7e-9 to 1.1e-5): the exact ISOTROPIC calibration for TV 0.005 (sigma^2 = the mean
    variance) reaches a TV over 40 times the target; the diagonal calibration reaches it."""
    v = log_uniform(2000)
    isotropic = noise_variance_exact(float(v.mean()), 0.005, v.size)
    reached = tv_gaussian_diagonal(v, v + isotropic)
    estimate, se = tv_diagonal_monte_carlo(v, v + isotropic, draws=4000, seed=1)
    assert abs(estimate - reached.tv) <= 4 * se
    assert reached.tv > 40 * 0.005 and reached.tv_lower > 10 * 0.005  # certified
    noise = noise_variance_diagonal(v, 0.005)
    assert tv_gaussian_diagonal(v, v + noise).tv == pytest.approx(0.005, rel=1e-6)
    assert noise < isotropic / 50


def test_noise_calibrations_with_per_coordinate_variances_warn_and_add_the_diagonal_row():
    v = log_uniform(500)
    with pytest.warns(AnisotropyWarning, match="per-coordinate variances span"):
        rows = noise_calibrations(v, 0.005)
    paper, exact, diagonal = rows
    assert [r.method for r in rows] == ["paper", "exact", "diagonal"]
    assert exact.noise_variance == pytest.approx(noise_variance_exact(v.mean(), 0.005, 500))
    assert exact.tv > 10 * 0.005 and exact.warning and paper.warning
    assert diagonal.tv == pytest.approx(0.005, rel=1e-6) and not diagonal.warning
    assert diagonal.tv_lower <= diagonal.tv <= diagonal.tv_upper
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # equal variances: no warning, same noise
        paper, exact, diagonal = noise_calibrations(np.full(100, 2.0), 0.005)
    assert diagonal.noise_variance == pytest.approx(exact.noise_variance, rel=1e-8)
    assert exact.tv == pytest.approx(0.005, rel=1e-9)


def test_gaussian_distortion_tv_takes_per_coordinate_variances():
    v = log_uniform(300)
    assert GaussianDistortion(1e-9).tv(v, 300) == pytest.approx(
        tv_gaussian_diagonal(v, v + 1e-9).tv)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: tv_gaussian_diagonal([1.0, -1.0], [1.0, 1.0]),
     "variances[1] = -1.0 is out of range: every variance must be in (0, inf)"),
    (lambda: tv_gaussian_diagonal([1.0, 2.0], [1.0]),
     "variances has 2 entries and distorted_variances 1"),
    (lambda: tv_gaussian_diagonal([[1.0]], [[1.0]]), "variances has shape (1, 1)"),
    (lambda: noise_variance_diagonal([1.0, 2.0], 1.0), "target_tv = 1.0 is infeasible"),
    (lambda: noise_calibrations([1.0, 2.0], 0.005, 3), "dimension = 3 does not match"),
    (lambda: mask_keep_rate(1e-12, 10**7), "gap = 1e-12 is out of range for dimension"),
])
def test_bad_input_is_one_line(call, message):
    with pytest.raises(ValueError, match=None) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_mask_keep_rate_keeps_tiny_gaps():
    # issue 21: mask_keep_rate(1e-12, 1e7) returned 1.0 (a mask with TV 0)
    rho = mask_keep_rate(1e-6, 10**7)
    assert rho < 1.0
    # rho is the double nearest (1 - 1e-6)^(1e-7): within 2^-53 of 1 - 1e-13
    assert -math.expm1(10**7 * math.log(rho)) == pytest.approx(1e-6, rel=2e-3)
