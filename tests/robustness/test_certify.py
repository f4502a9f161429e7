"""Certified prediction (Xie et al. 2023, Eq. 5 and 6), its cap K_max and group privacy delta_k:
golden values recomputed independently from the paper's formulas, invariants, bad inputs."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.robustness.certify import (
    certification_privacy,
    certified_k,
    certified_k_from_bounds,
    certify_prediction,
    group_delta,
    k_max,
    max_attackers,
    theorem2_holds,
)

# (F_A, F_B, epsilon, delta, K, Eq. 5 holds)
TABLE = [
    (0.9, 0.1, 0.5, 0.0, 2.197225, True),
    (1.0, 0.0, 0.6298, 0.0029, 4.537444, True),
    (0.95, 0.05, 0.6298, 0.0029, 2.289528, True),
    (0.8, 0.2, 0.6298, 0.0029, 1.090842, True),
    (0.6, 0.4, 0.6298, 0.0029, 0.319728, False),
    (1.0, 0.0, 0.1451, 0.0029, 13.799243, True),
    (1.0, 0.0, 0.4187, 0.0029, 6.203307, True),
    (1.0, 0.0, 0.3593, 1e-5, 14.854403, True),
    (1.0, 0.0, 0.6546, 1e-5, 8.733804, True),
    (0.99, 0.01, 0.2247, 1e-6, 10.224137, True),
    (0.7, 0.3, 1.0, 1e-5, 0.423643, False),
    (0.5, 0.5, 0.5, 0.001, 0.0, False),
]


@pytest.mark.parametrize(("top", "runner", "eps", "delta", "k", "eq5"), TABLE)
def test_certified_k_golden(top, runner, eps, delta, k, eq5):
    assert certified_k(top, runner, eps, delta) == pytest.approx(k, abs=5e-7)
    assert theorem2_holds(top, runner, eps, delta) is eq5
    cert = certify_prediction(top, runner, eps, delta)
    assert cert.certified_k == pytest.approx(k, abs=5e-7)
    assert cert.theorem2_holds is eq5


def test_certified_k_vectorised_equals_scalar():
    tops, runners = np.array([r[0] for r in TABLE[1:10]]), np.array([r[1] for r in TABLE[1:10]])
    got = certified_k(tops, runners, 0.6298, 0.0029)
    assert got.shape == (9,)
    for top, runner, value in zip(tops, runners, got, strict=True):
        assert value == certified_k(float(top), float(runner), 0.6298, 0.0029)


# K_max for the privacy levels of the paper's tables (delta per setting)
K_MAX = [
    (0.0029, [6.9269, 4.8913, 2.8305, 1.8504, 0.8694, 0.6298, 0.4187, 0.2808],
     [0.922, 1.097, 1.521, 2.033, 3.549, 4.537, 6.203, 8.414]),
    (0.0029, [0.8781, 0.546, 0.4527, 0.3663, 0.2444, 0.1451],
     [3.522, 5.062, 5.843, 6.871, 9.348, 13.799]),
    (1e-6, [1.7151, 0.7382, 0.579, 0.4102, 0.2247], [4.470, 9.417, 11.721, 16.012, 27.675]),
    (1e-5, [3.5691, 1.0587, 0.6373, 0.4589, 0.3593, 0.2484, 0.2251, 0.2029],
     [2.109, 5.736, 8.942, 11.955, 14.854, 20.626, 22.515, 24.695]),
    (1e-5, [4.6978, 1.4949, 0.9067, 0.6546, 0.513, 0.4221, 0.3587, 0.3158],
     [1.724, 4.266, 6.564, 8.734, 10.831, 12.875, 14.876, 16.660]),
]


@pytest.mark.parametrize(("delta", "epsilons", "caps"), K_MAX)
def test_k_max_golden(delta, epsilons, caps):
    for eps, cap in zip(epsilons, caps, strict=True):
        assert k_max(eps, delta) == pytest.approx(cap, abs=5e-4)
        assert k_max(eps, delta) == pytest.approx(certified_k(1.0, 0.0, eps, delta), rel=1e-12)


def test_k_max_pure_dp_and_tiny_delta():
    assert k_max(0.5, 0.0) == math.inf
    assert certified_k(0.9, 0.0, 0.5, 0.0) == math.inf
    # no overflow: ln(1 + (e^eps - 1)/delta) at eps = 800 is about eps + ln(1/delta)
    assert k_max(800.0, 1e-300) == pytest.approx((800 + 300 * math.log(10)) / 1600, rel=1e-12)


def test_extreme_inputs_stay_accurate():
    with np.errstate(over="raise", invalid="raise"):
        # F_A = delta, F_B = 0: K = ln(e^eps) / (2 eps) = 1/2 at every epsilon
        for eps in (1e-9, 1e-3, 1.0, 50.0, 2000.0):
            assert certified_k(2.6e-217, 0.0, eps, 2.6e-217) == pytest.approx(0.5, rel=1e-14)
        # tiny epsilon: K -> (F_A - F_B) / (2 delta) (first order in eps)
        assert certified_k(0.9, 0.1, 1e-300, 1e-5) == pytest.approx(0.8 / 2e-5, rel=1e-9)
        # huge epsilon: ln(F_A / F_B) / (2 eps) up to the delta terms
        assert certified_k(0.9, 0.1, 1000.0, 1e-5) == pytest.approx(math.log(9) / 2000, rel=1e-9)
        assert certified_k(0.9, 0.0, 1000.0, 1e-5) == pytest.approx(
            (1000 + math.log(0.9 / 1e-5)) / 2000, rel=1e-12)
        assert k_max(1e-300, 1e-5) == pytest.approx(1 / 2e-5, rel=1e-9)
        assert group_delta(1e-20, 1e-5, 3) == pytest.approx(3e-5, rel=1e-12)


def test_group_delta_golden():
    ks = [1, 2, 3, 5, 10]
    np.testing.assert_allclose(
        group_delta(0.6298, 0.0029, ks), [0.0029, 0.0083440, 0.0185636, 0.0737624, 1.79337],
        rtol=2e-5)
    np.testing.assert_allclose(
        group_delta(0.3593, 1e-5, ks), [1e-5, 2.43233e-5, 4.48389e-5, 1.16313e-4, 8.17506e-4],
        rtol=2e-5)
    assert group_delta(0.6298, 0.0029, 0) == 0.0
    assert group_delta(0.5, 0.0, 7) == 0.0
    assert group_delta(1.0, 1e-5, 1e4) == math.inf  # overflow is vacuous, not an error


@settings(max_examples=200, deadline=None)
@given(st.floats(0.01, 5.0), st.floats(1e-8, 0.5), st.integers(1, 30))
def test_group_delta_is_the_geometric_sum(eps, delta, k):
    assert group_delta(eps, delta, k) == pytest.approx(
        delta * sum(math.exp(j * eps) for j in range(k)), rel=1e-10)


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.01, 5.0), st.floats(1e-9, 0.2))
def test_k_above_one_iff_eq5_and_eq6_is_group_eq5(a, b, eps, delta):
    top, runner = max(a, b), min(a, b)
    k = certified_k(top, runner, eps, delta)
    e5 = top > math.exp(2 * eps) * runner + (1 + math.exp(eps)) * delta
    if abs(k - 1.0) > 1e-9:  # away from the boundary, where rounding decides
        assert (k > 1.0) == e5 == theorem2_holds(top, runner, eps, delta)
    assert 0.0 <= k <= k_max(eps, delta) * (1 + 1e-12)
    # Eq. 6 solves F_A > e^{2 k eps} F_B + (1 + e^{k eps}) delta_k for k
    for kk in (0.5 * k, 0.99 * k):
        if kk > 0:
            dk = group_delta(eps, delta, kk)
            assert top >= math.exp(2 * kk * eps) * runner + (1 + math.exp(kk * eps)) * dk - 1e-12


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0),
       st.floats(0.001, 10.0), st.floats(0.001, 10.0), st.floats(0.0, 0.3))
def test_k_monotone(a, b, c, eps1, eps2, delta):
    lo, mid, hi = sorted((a, b, c))
    # non-decreasing in F_A, non-increasing in F_B
    assert certified_k(hi, lo, eps1, delta) >= certified_k(mid, lo, eps1, delta) - 1e-12
    assert certified_k(hi, mid, eps1, delta) <= certified_k(hi, lo, eps1, delta) + 1e-12
    # non-increasing in epsilon when F_A >= delta (always so for a simplex's top score
    # F_A >= 1/C when delta < 1/C): phi(eps) = 2 eps K is concave with phi(0) = 0
    small, large = sorted((eps1, eps2))
    if hi >= delta:
        k_small, k_large = certified_k(hi, lo, small, delta), certified_k(hi, lo, large, delta)
        assert k_small >= k_large * (1 - 1e-12) - 1e-12


def test_k_can_grow_with_epsilon_when_delta_exceeds_top():
    # outside F_A >= delta the monotonicity in epsilon fails (so the condition is needed)
    assert certified_k(4.4e-5, 1.1e-6, 5.76, 1.46e-4) > certified_k(4.4e-5, 1.1e-6, 1.74, 1.46e-4)


def test_pure_dp_closed_form_and_tie():
    assert certified_k(0.9, 0.1, 0.5, 0.0) == pytest.approx(math.log(9.0), rel=1e-12)
    assert certified_k(0.3, 0.3, 0.7, 0.01) == 0.0
    assert certified_k(0.0, 0.0, 0.7, 0.0) == 0.0  # 0/0 is a tie, not a NaN


def test_k_from_crossing_bounds_is_negative():
    assert certified_k_from_bounds(0.4, 0.6, 0.5, 1e-3) < 0.0
    assert certified_k_from_bounds(0.6, 0.4, 0.5, 1e-3) == certified_k(0.6, 0.4, 0.5, 1e-3)


def test_max_attackers():
    assert max_attackers(2.197) == 2
    assert max_attackers(2.0) == 1  # Theorem 3 certifies k < K
    assert max_attackers(0.3) == 0
    assert max_attackers(0.0) is None and max_attackers(-0.1) is None
    assert max_attackers(math.inf) is None


def test_certificate_says_what_it_is():
    user = certify_prediction(0.95, 0.05, 0.6298, 0.0029).to_dict()
    assert user["kind"] == "bound" and "Theorem 3" in user["theorem"]
    assert user["unit"] == "user" and user["k_max"] == pytest.approx(4.537444, abs=1e-6)
    assert user["max_attackers"] == 2
    inst = certify_prediction(0.95, 0.05, 0.6298, 0.0029, unit="instance")
    assert "Theorem 4" in inst.theorem and "records" in inst.theorem
    privacy = certification_privacy(0.1451, 0.0029, 70)
    assert privacy.certification_epsilon == pytest.approx(10.157)  # Xie et al. 2023: 10.15
    assert privacy.certification_delta == pytest.approx(0.203)


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: certified_k(1.2, 0.1, 0.5, 0.0), "top = 1.2 is out of range"),
        (lambda: certified_k(0.9, -0.1, 0.5, 0.0), "runner_up = -0.1 is out of range"),
        (lambda: certified_k(0.3, 0.4, 0.5, 0.0), "runner_up = 0.4 is out of range: must be <="),
        (lambda: certified_k(0.9, 0.1, 0.0, 0.0), "epsilon = 0.0 is out of range"),
        (lambda: certified_k(0.9, 0.1, -1.0, 0.0), "epsilon = -1.0 is out of range"),
        (lambda: certified_k(0.9, 0.1, 0.5, 1.0), "delta = 1.0 is out of range"),
        (lambda: certified_k(0.9, 0.1, 0.5, -1e-3), "delta = -0.001 is out of range"),
        (lambda: certified_k(float("nan"), 0.1, 0.5, 0.0), "top = nan"),
        (lambda: group_delta(0.5, 1e-5, -1), "k = -1.0 is out of range"),
        (lambda: certification_privacy(0.5, 1e-5, 0), "models = 0 is out of range"),
        (lambda: certify_prediction(0.9, 0.1, 0.5, 0.0, unit="client"), "unit = 'client'"),
        (lambda: certified_k([0.9, 0.8], [0.1, 0.2, 0.3], 0.5, 0.0), "runner_up has shape"),
    ],
)
def test_bad_inputs_one_line(call, fragment):
    with pytest.raises(ValueError) as error:
        call()
    assert fragment in str(error.value) and "\n" not in str(error.value)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(300.0, 1e300),
       st.sampled_from([0.0, 1e-12, 1e-3]))
def test_theorem2_at_huge_epsilon_agrees_with_eq6_without_overflow(a, b, eps, delta):
    """e^{2 eps} overflows past eps ~ 355 (and (F_A - F_B)(e^eps - 1) / delta sooner): Eq. 5
    and Eq. 6 must still agree, with no OverflowError and no spurious infinite K."""
    top, runner = max(a, b), min(a, b)
    holds = theorem2_holds(top, runner, eps, delta)
    k = certified_k(top, runner, eps, delta)
    assert holds == (k > 1.0)
    assert math.isinf(k) == (runner == 0.0 and delta == 0.0 and top > 0.0)
    if runner >= 1e-6:
        assert not holds  # e^{2 eps} F_B > 1 >= F_A


def test_eq6_at_huge_epsilon_and_tiny_delta_is_finite():
    """(F_A - F_B)(e^eps - 1) / delta overflows at eps = 683, delta = 1e-12 although
    K = (eps + ln(1 / delta)) / (2 eps) = 0.520 is small (found by the property test above)."""
    expected = (683.0 + math.log(1e12) + math.log1p(-math.exp(-683.0))) / (2 * 683.0)
    assert certified_k(1.0, 0.0, 683.0, 1e-12) == pytest.approx(expected, rel=1e-12)
