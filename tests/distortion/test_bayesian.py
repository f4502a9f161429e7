"""The finite Bayesian attacker: beliefs, leakage, xi, C2 (spec T1, T9; Lemma B.3)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.distortion.bayesian import (
    BayesianAttacker,
    c2_from_xi,
    log_posteriors,
    max_log_ratio,
    tempered_log_posteriors,
    tempered_xi,
)
from privfl.distortion.divergence import sqrt_js, tv_discrete


@pytest.mark.parametrize(("xi", "c2"), [
    (0.0, 0.0), (0.1, 0.110701379080), (0.5, 0.859140914230), (1.0, 3.194528049465),
    (math.log(2), 1.5), (math.inf, math.inf)])
def test_c2_golden_t1(xi, c2):
    assert c2_from_xi(xi) == pytest.approx(c2, abs=1e-9)


def t9_model():
    attacker = BayesianAttacker.from_likelihood([0.5, 0.5], [[0.15, 0.85], [0.45, 0.55]])
    p = np.array([0.45, 0.55])  # the true data d = 1
    p_tilde = p @ (0.5 * np.eye(2) + 0.25)  # randomised response, keep probability 0.5
    return attacker, p, p_tilde


def test_t9_generative_model_numbers():
    attacker, p, p_tilde = t9_model()
    np.testing.assert_allclose(p_tilde, [0.475, 0.525], atol=1e-15)
    assert tv_discrete(p, p_tilde) == pytest.approx(0.025, abs=1e-15)
    np.testing.assert_allclose(attacker.posterior[0], [0.25, 0.75], atol=1e-12)
    np.testing.assert_allclose(attacker.posterior[1], [0.607142857143, 0.392857142857],
                               atol=1e-12)
    assert attacker.xi(p, p_tilde) == pytest.approx(math.log(2), abs=1e-12)
    assert attacker.c2(p, p_tilde) == pytest.approx(1.5, abs=1e-12)
    np.testing.assert_allclose(attacker.belief(p), [25 / 56, 31 / 56], atol=1e-12)
    np.testing.assert_allclose(attacker.belief(p_tilde), [0.4375, 0.5625], atol=1e-12)
    assert attacker.unprotected_leakage(p) == pytest.approx(0.037944407711, abs=1e-9)
    assert attacker.leakage(p_tilde) == pytest.approx(0.044295463481, abs=1e-9)
    assert attacker.leakage(p_tilde, attacker.belief(p)) == pytest.approx(0.006356462405,
                                                                          abs=1e-9)


def test_t9_simpler_instance():
    attacker = BayesianAttacker([0.5, 0.5], [[0.3, 0.7], [0.6, 0.4]])
    p, p_tilde = [0.75, 0.25], [0.85, 0.15]
    assert attacker.c2(p, p_tilde) == pytest.approx(8 / 9, abs=1e-12)
    assert attacker.unprotected_leakage(p) == pytest.approx(0.089213216047, abs=1e-9)
    assert attacker.leakage(p_tilde) == pytest.approx(0.111195027155, abs=1e-9)


def test_prior_predictive_law_gives_zero_c1():
    # P must be conditional on the TRUE data: the prior-predictive marginal gives F = prior
    attacker, _, _ = t9_model()
    marginal = np.array([0.5, 0.5]) @ np.array([[0.15, 0.85], [0.45, 0.55]])
    assert attacker.unprotected_leakage(marginal) == pytest.approx(0.0, abs=1e-8)


def random_model(seed):
    rng = np.random.default_rng(seed)
    d, w = rng.integers(2, 5), rng.integers(2, 6)
    prior = rng.dirichlet(np.ones(d) * rng.uniform(0.3, 3))
    likelihood = rng.dirichlet(np.ones(w) * rng.uniform(0.3, 3), size=d)
    p = rng.dirichlet(np.ones(w) * rng.uniform(0.3, 3))
    q = rng.dirichlet(np.ones(w) * rng.uniform(0.3, 3))
    if rng.random() < 0.5:
        q = 0.9 * p + 0.1 * q
    return BayesianAttacker.from_likelihood(prior, likelihood), p, q


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_lemma_b3_and_privfl_sharper_constant(seed):
    """sqrt(JS(F~ || F)) <= C2 e^{-xi/2} TV <= C2 TV (Lemma B.3; privfl's proof)."""
    attacker, p, q = random_model(seed)
    xi = attacker.xi(p, q)
    shift = sqrt_js(attacker.belief(q), attacker.belief(p))
    tv = tv_discrete(p, q)
    sharper = c2_from_xi(xi) * math.exp(-xi / 2) * tv
    assert shift <= sharper * (1 + 1e-9) + 1e-12
    assert sharper <= c2_from_xi(xi) * tv + 1e-15
    # and the triangle sandwich around C1 (corrected Lemmas 6.5 and B.1)
    c1, eps_p = attacker.unprotected_leakage(p), attacker.leakage(q)
    assert c1 - sharper - 1e-9 <= eps_p <= c1 + sharper + 1e-9


def test_log_posteriors_and_tempering():
    prior = np.array([0.2, 0.3, 0.5])
    loglik = np.array([[0.0, -1.0, -2.0], [-800.0, 0.0, -900.0]])
    log_post = log_posteriors(loglik, prior)
    post = np.exp(log_post)
    joint = prior * np.exp(loglik[0])
    np.testing.assert_allclose(post[0], joint / joint.sum(), rtol=1e-12)
    np.testing.assert_allclose(post.sum(1), 1.0, rtol=1e-12)
    assert np.isfinite(log_post).all()  # extreme likelihoods stay finite in log space
    tempered = np.exp(tempered_log_posteriors(log_post, prior, 0.1))
    np.testing.assert_allclose(tempered, 0.9 * post + 0.1 * prior, rtol=1e-12)
    assert max_log_ratio(np.log(tempered), prior) <= tempered_xi(prior, 0.1) + 1e-12


def test_tempered_xi_is_attained_by_dominating_candidates():
    prior = np.full(4, 0.25)
    t = 0.1
    assert tempered_xi(prior, t) == pytest.approx(max(math.log(0.9 * 4 + 0.1), math.log(10)))
    # Gaussian kernel, centres in convex position: far-out w make one candidate dominate
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(4, 6))
    w = 200 * centres[rng.integers(4, size=500)] + rng.normal(size=(500, 6))
    loglik = w @ centres.T - 0.5 * (centres**2).sum(1)
    tempered = tempered_log_posteriors(log_posteriors(loglik, prior), prior, t)
    assert max_log_ratio(tempered, prior) == pytest.approx(tempered_xi(prior, t), rel=1e-9)
    assert tempered_xi(prior, 0.0) == math.inf


@pytest.mark.parametrize(("call", "message"), [
    (lambda: c2_from_xi(-0.1), "xi = -0.1"),
    (lambda: BayesianAttacker([0.5, 0.6], [[0.5, 0.5]]), "prior sums to"),
    (lambda: BayesianAttacker.from_likelihood([0.5, 0.5], [[0.5, 0.5]]), "likelihood has"),
    (lambda: t9_model()[0].belief([1.0, 0.0, 0.0]), "law has 3 entries"),
    (lambda: tempered_xi([0.5, 0.5], 1.0), "tempering = 1.0"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
