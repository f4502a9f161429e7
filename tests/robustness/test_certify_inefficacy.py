"""Certified attack inefficacy (Xie et al. 2023, Theorem 6) and the minimum number of attackers
(Corollary 7): golden values, invariants, the Monte Carlo calibrated form and bad inputs."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.robustness.calibration import hoeffding_radius
from privfl.robustness.certify import group_delta
from privfl.robustness.inefficacy import (
    attack_inefficacy_bounds,
    certify_attack_inefficacy,
    min_attackers,
)


def test_theorem6_nonnegative_golden():
    ks = [0, 1, 2, 3, 4, 5, 10, 20]
    lower, upper = attack_inefficacy_bounds(0.45, 0.4344, 0.0029, 0.5, ks)
    np.testing.assert_allclose(
        lower, [0.45, 0.290505, 0.187207, 0.120306, 0.076978, 0.048916, 0.003212, 0.0],
        atol=5e-7)
    np.testing.assert_allclose(upper, [0.45] + [0.5] * 7, atol=5e-7)


def test_theorem6_nonpositive_golden():
    lower, upper = attack_inefficacy_bounds(-0.3, 0.5, 1e-5, 2.0, [0, 1, 2, 5], sign="nonpositive")
    np.testing.assert_allclose(lower, [-0.3, -0.494636, -0.815538, -2.0], atol=5e-7)
    np.testing.assert_allclose(upper, [-0.3, -0.181947, -0.110344, -0.024597], atol=5e-7)


def test_extreme_epsilon():
    # huge epsilon: Theorem 6 degenerates to [0, C_bar]; Corollary 7 to ln(tau)/eps
    assert attack_inefficacy_bounds(0.3, 2000.0, 1e-5, 1.0, 1) == (0.0, 1.0)
    assert min_attackers(0.3, 2000.0, 1e-5, 1.0, 4.0) == pytest.approx(math.log(4) / 2000)
    # tiny epsilon: k_min -> J (1 - 1/tau) / (C_bar delta) (first order), not 0 or NaN
    assert min_attackers(0.3, 1e-12, 1e-5, 1.0, 4.0) == pytest.approx(
        0.3 * 0.75 / 1e-5, rel=1e-6)
    assert min_attackers(-0.3, 1e-12, 1e-5, 1.0, 2.0, sign="nonpositive") == pytest.approx(
        0.3 / 1e-5, rel=1e-6)


def test_pure_dp_and_huge_k():
    lower, upper = attack_inefficacy_bounds(0.3, 0.5, 0.0, 1.0, [0, 1, 3])
    np.testing.assert_allclose(lower, 0.3 * np.exp(-0.5 * np.arange(4)[[0, 1, 3]]))
    np.testing.assert_allclose(upper, np.minimum(0.3 * np.exp(0.5 * np.array([0, 1, 3])), 1.0))
    with np.errstate(over="raise", invalid="raise"):  # no overflow warnings, no NaN
        lower, upper = attack_inefficacy_bounds(0.0, 0.5, 0.0, 1.0, [1e6])
        assert (lower, upper) == (0.0, 0.0)
        lower, upper = attack_inefficacy_bounds(0.2, 0.5, 1e-5, 1.0, 1e6)
        assert (lower, upper) == (0.0, 1.0)


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.01, 3.0), st.floats(0.0, 0.1), st.floats(0.1, 5.0),
       st.integers(0, 40), st.sampled_from(["nonnegative", "nonpositive"]))
def test_bounds_bracket_the_clean_value_and_widen_with_k(frac, eps, delta, c_bar, k, sign):
    clean = frac * c_bar if sign == "nonnegative" else -frac * c_bar
    lower, upper = attack_inefficacy_bounds(clean, eps, delta, c_bar, [k, k + 1], sign=sign)
    assert lower[0] <= clean <= upper[0]
    assert lower[1] <= lower[0] + 1e-15 and upper[1] >= upper[0] - 1e-15
    low, high = (0.0, c_bar) if sign == "nonnegative" else (-c_bar, 0.0)
    assert low <= lower[1] and upper[1] <= high
    # the paper's form of the lower bound (C >= 0), e^{-k eps} J - (1 - e^{-k eps}) d C / (e^e - 1)
    if sign == "nonnegative":
        paper = math.exp(-k * eps) * clean - (1 - math.exp(-k * eps)) / math.expm1(eps) * (
            delta * c_bar)
        assert lower[0] == pytest.approx(max(paper, 0.0), abs=1e-12)
        grown = math.exp(k * eps) * clean + group_delta(eps, delta, k) * c_bar
        assert upper[0] == pytest.approx(min(grown, c_bar), rel=1e-12)


@pytest.mark.parametrize(
    ("eps", "delta", "expected"),
    [(0.4187, 0.0029, [0, 0.960137, 1.638997, 3.261853, 5.355007]),
     (0.3593, 1e-5, [0, 1.128446, 1.929080, 3.858079, 6.407807])],
)
def test_corollary7_nonnegative_golden(eps, delta, expected):
    np.testing.assert_allclose(min_attackers(0.4, eps, delta, 0.5, [1, 1.5, 2, 4, 10]),
                               expected, atol=5e-7)


def test_corollary7_nonpositive_and_pure_golden():
    assert min_attackers(-0.3, 0.5, 1e-5, 2.0, 2.0, sign="nonpositive") == pytest.approx(
        1.386192, abs=5e-7)
    assert min_attackers(-0.3, 0.5, 1e-5, 2.0, 1.0, sign="nonpositive") == 0.0
    assert min_attackers(0.3, 0.5, 0.0, 2.0, 2.0) == pytest.approx(1.386294, abs=5e-7)
    assert min_attackers(0.0, 0.5, 0.0, 2.0, 3.0) == 0.0


@settings(max_examples=300, deadline=None)
@given(st.floats(0.01, 1.0), st.floats(0.01, 3.0), st.floats(0.0, 0.05), st.floats(0.1, 5.0),
       st.floats(1.0, 50.0), st.sampled_from(["nonnegative", "nonpositive"]))
def test_corollary7_is_where_the_lower_bound_meets_the_target(frac, eps, delta, c_bar, tau,
                                                             sign):
    clean = frac * c_bar if sign == "nonnegative" else -frac * c_bar
    if sign == "nonpositive":
        tau = min(tau, -c_bar / clean)
    target = clean / tau if sign == "nonnegative" else tau * clean
    k = min_attackers(clean, eps, delta, c_bar, tau, sign=sign)
    assert k >= 0.0
    if k > 0.0:
        lower_at_k = attack_inefficacy_bounds(clean, eps, delta, c_bar, k, sign=sign)[0]
        assert lower_at_k == pytest.approx(target, rel=1e-8, abs=1e-12)
        before = attack_inefficacy_bounds(clean, eps, delta, c_bar, 0.999 * k, sign=sign)[0]
        assert before > target - 1e-12  # fewer attackers cannot reach the target


def test_monte_carlo_form_uses_the_hoeffding_ends():
    rng = np.random.default_rng(3)
    costs = rng.uniform(0.0, 0.5, 100)
    cert = certify_attack_inefficacy(costs, 0.5, 0.4344, 0.0029, [0, 1, 2, 5], confidence=0.99)
    r = hoeffding_radius(100, 0.005, width=0.5)
    assert cert.clean_lower == pytest.approx(costs.mean() - r)
    assert cert.clean_upper == pytest.approx(costs.mean() + r)
    low, _ = attack_inefficacy_bounds(costs.mean() - r, 0.4344, 0.0029, 0.5, [0, 1, 2, 5])
    _, high = attack_inefficacy_bounds(costs.mean() + r, 0.4344, 0.0029, 0.5, [0, 1, 2, 5])
    np.testing.assert_allclose(cert.lower, low)
    np.testing.assert_allclose(cert.upper, high)
    assert cert.kind == "bound" and cert.confidence == 0.99
    assert cert.privacy.models == 100 and cert.privacy.certification_epsilon == pytest.approx(
        43.44)
    assert "Theorem 6" in cert.theorem
    # Corollary 7 at the calibrated J: the smaller of the two ends (k_min grows with J here)
    assert cert.min_attackers(2.0) == pytest.approx(
        min_attackers(cert.clean_lower, 0.4344, 0.0029, 0.5, 2.0))
    estimate = certify_attack_inefficacy(costs, 0.5, 0.4344, 0.0029, [1], method="estimate")
    assert estimate.kind == "estimate" and estimate.confidence is None
    assert estimate.lower[0] > cert.lower[1]
    record = cert.to_dict()
    assert record["k"] == [0.0, 1.0, 2.0, 5.0] and record["privacy"]["epsilon"] == 0.4344


def test_monte_carlo_interval_covers_the_clean_expectation():
    rng = np.random.default_rng(4)
    truth, models, repeats = 0.3, 50, 3000
    misses = 0
    for costs in rng.beta(3.0, 7.0, size=(repeats, models)):  # mean 0.3 in [0, 1]
        cert = certify_attack_inefficacy(costs, 1.0, 1.0, 1e-5, [0], confidence=0.8)
        misses += not cert.clean_lower <= truth <= cert.clean_upper
    assert misses / repeats <= 0.2


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: attack_inefficacy_bounds(0.6, 0.5, 1e-5, 0.5, 1), "clean = 0.6 is out of range"),
        (lambda: attack_inefficacy_bounds(-0.1, 0.5, 1e-5, 0.5, 1), "clean = -0.1"),
        (lambda: attack_inefficacy_bounds(0.1, 0.5, 1e-5, 0.5, 1, sign="nonpositive"),
         "clean = 0.1 is out of range"),
        (lambda: attack_inefficacy_bounds(0.1, 0.5, 1e-5, 0.0, 1), "cost_bound = 0.0"),
        (lambda: attack_inefficacy_bounds(0.1, 0.5, 1e-5, 0.5, -2), "k = -2.0 is out of range"),
        (lambda: attack_inefficacy_bounds(0.1, -0.5, 1e-5, 0.5, 1), "epsilon = -0.5"),
        (lambda: attack_inefficacy_bounds(0.1, 0.5, 1.5, 0.5, 1), "delta = 1.5"),
        (lambda: attack_inefficacy_bounds(0.1, 0.5, 0.0, 0.5, 1, sign="neg"), "sign = 'neg'"),
        (lambda: min_attackers(0.3, 0.5, 1e-5, 0.5, 0.5), "tau = 0.5 is out of range"),
        (lambda: min_attackers(-0.3, 0.5, 1e-5, 0.5, 2.0, sign="nonpositive"),
         "tau = 2.0 is out of range"),
        (lambda: certify_attack_inefficacy([0.1, 0.7], 0.5, 0.5, 1e-5, [1]), "costs = 0.7"),
        (lambda: certify_attack_inefficacy([], 0.5, 0.5, 1e-5, [1]), "costs has shape"),
        (lambda: certify_attack_inefficacy([0.1], 0.5, 0.5, 1e-5, [1], confidence=0.0),
         "confidence = 0.0"),
    ],
)
def test_bad_inputs_one_line(call, fragment):
    with pytest.raises(ValueError) as error:
        call()
    assert fragment in str(error.value) and "\n" not in str(error.value)
