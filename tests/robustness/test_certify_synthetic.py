"""End-to-end validity without training: a Gaussian mechanism whose exact (epsilon, delta) and
true flip point are known (the synthetic check of Xie et al. 2023's certificates).

Output ``mu + N(0, sigma^2)`` with user sensitivity 1: k changed users move mu by up to k. Its
exact delta(epsilon) is the analytic Gaussian (Balle and Wang 2018), ``gdp_delta(eps, 1/sigma)``.
The classifier ``1{output > 0}`` has ``F_A = Phi(mu/sigma)``, ``F_B = 1 - F_A`` and truly flips
(or ties) at the first whole number of users k* = ceil(mu). Theorem 3 certifies the whole numbers
k < K, so K must never exceed k*. (The real-valued reading K <= mu is not a theorem: group
privacy is for whole k, and it fails, e.g. mu = 0.25, sigma = 0.375, eps = 1.) The same harness
checks Theorem 6 with the cost ``C = C_bar * 1{output > 0}``: ``J(D'_k) = C_bar Phi((mu -+ k)/
sigma)``.
"""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from privfl.accounting.gdp.accountant import gdp_delta
from privfl.robustness.certify import certified_k
from privfl.robustness.inefficacy import attack_inefficacy_bounds


def synthetic_k(mu: float, sigma: float, eps: float) -> tuple[float, float]:
    delta = float(gdp_delta(eps, 1.0 / sigma))
    top = norm.cdf(mu / sigma)
    return certified_k(top, 1.0 - top, eps, delta), delta


@pytest.mark.parametrize(
    ("eps", "delta", "ks"),
    [
        (0.25, 0.0234855, (1.3650, 3.2926, 4.6157)),
        (0.5, 0.00270888, (0.7995, 2.1019, 3.5959)),
        (1.0, 2.92427e-6, (0.4035, 1.0680, 1.8800)),
    ],
)
def test_golden_values_sigma_4(eps, delta, ks):
    for mu, expected in zip((2.0, 5.0, 8.0), ks, strict=True):
        k, d = synthetic_k(mu, 4.0, eps)
        assert d == pytest.approx(delta, rel=2e-5)
        assert k == pytest.approx(expected, abs=5e-5)
        assert k <= mu


@settings(max_examples=400, deadline=None)
@given(st.floats(0.05, 30.0), st.floats(0.3, 20.0), st.floats(0.02, 4.0))
def test_certified_k_never_exceeds_the_true_flip_point(mu, sigma, eps):
    k, delta = synthetic_k(mu, sigma, eps)
    if delta >= 1.0 or mu / sigma > 8.0:  # vacuous guarantee / F_B below float resolution
        return
    flip = math.ceil(mu)  # the fewest users that flip (or tie) the prediction
    assert 0.0 <= k <= flip * (1 + 1e-9)
    # and the integers certified (k < K) never include a flipping one
    assert all(j < mu for j in range(math.ceil(k)))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.floats(0.3, 20.0), st.floats(0.02, 4.0))
def test_at_whole_mu_the_flip_point_is_mu(mu, sigma, eps):
    k, delta = synthetic_k(float(mu), sigma, eps)
    if delta < 1.0 and mu / sigma <= 8.0:
        assert k <= mu * (1 + 1e-9)


def test_the_real_valued_reading_fails_between_integers():
    k, delta = synthetic_k(0.25, 0.375, 1.0)
    assert delta < 1.0 and 0.25 < k < 1.0  # K > mu, yet only k = 0 is certified: valid


@settings(max_examples=200, deadline=None)
@given(st.floats(-5.0, 10.0), st.floats(0.5, 10.0), st.floats(0.05, 3.0),
       st.integers(0, 12), st.floats(0.1, 3.0))
def test_theorem6_brackets_the_true_attack_effect(mu, sigma, eps, k, c_bar):
    delta = float(gdp_delta(eps, 1.0 / sigma))
    if delta >= 1.0:
        return
    clean = c_bar * norm.cdf(mu / sigma)
    lower, upper = attack_inefficacy_bounds(clean, eps, delta, c_bar, k)
    # the k attackers move the output mean down (to reduce C) or up (to raise it)
    for shifted in (mu - k, mu + k):
        true = c_bar * norm.cdf(shifted / sigma)
        assert lower - 1e-12 <= true <= upper + 1e-12
    assert lower <= clean <= upper


def test_the_bound_is_not_vacuous_here():
    # the certificate is close to the truth in the tested region, so the property test bites
    k, _ = synthetic_k(8.0, 4.0, 0.5)
    assert 0.4 * 8.0 < k < 8.0
    assert math.isclose(synthetic_k(2.0, 4.0, 0.25)[0], 1.3650, abs_tol=5e-5)
