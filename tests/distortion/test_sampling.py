"""Data generation: Lemma 6.9, Theorem 6.10, the Theorem 6.11 solver, sigma^2 (spec T5, T6,
T19)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.distortion.sampling import (
    expected_update,
    parameter_variance,
    sampling_probability,
    sampling_variance,
)

G_SCALAR = np.array([[1.0], [-2.0], [0.5], [3.0], [-1.0]])
G_VECTOR = np.array([[1, 0], [-2, 1], [0.5, 0.5], [3, -1], [-1, 2]], dtype=float)


def monte_carlo_sums(grads, p, draws, rounds=1, seed=0):
    """Their sampling model: (1/N) sum_j sum_i g_i 1{i sampled in round j}."""
    rng = np.random.default_rng(seed)
    masks = rng.random((draws, rounds, grads.shape[0])) < p
    return (masks.astype(float) @ grads).mean(1)


def test_lemma_6_9_and_theorem_6_10_scalar_t5():
    w = np.array([0.7])
    assert expected_update(w, G_SCALAR, 0.3)[0] == pytest.approx(0.7 - 0.45)
    assert expected_update(w, G_SCALAR, 0.3, delta=0.1)[0] == pytest.approx(0.35)
    assert sampling_variance(G_SCALAR, 0.3) == pytest.approx(3.2025, abs=1e-12)
    assert sampling_variance(G_SCALAR, 0.3, rounds=4) == pytest.approx(0.800625, abs=1e-12)
    sums = monte_carlo_sums(G_SCALAR, 0.3, 400_000)[:, 0]
    assert sums.mean() == pytest.approx(0.45, abs=4 * np.sqrt(3.2025 / 4e5))
    assert sums.var() == pytest.approx(3.2025, rel=0.02)
    averaged = monte_carlo_sums(G_SCALAR, 0.3, 100_000, rounds=4, seed=1)[:, 0]
    assert averaged.var() == pytest.approx(0.800625, rel=0.03)


def test_theorem_6_10_vector_t5():
    per = sampling_variance(G_VECTOR, 0.3, reduce="per-coordinate")
    np.testing.assert_allclose(per, [3.2025, 1.3125], atol=1e-12)
    assert sampling_variance(G_VECTOR, 0.3) == pytest.approx(4.515, abs=1e-12)
    sums = monte_carlo_sums(G_VECTOR, 0.3, 300_000, seed=2)
    np.testing.assert_allclose(sums.var(0), [3.2025, 1.3125], rtol=0.02)


@pytest.mark.parametrize(("c6", "c1", "tau", "g", "expected"), [
    (1, 0.5, 0.495, 15.25, (3.27868852459e-4, 3.27976420992e-4, None)),
    (10, 0.5, 0.495, 0.25, (0.2, 0.276393202250, 0.723606797750)),
])
def test_theorem_6_11_feasible_t6(c6, c1, tau, g, expected):
    ratio, p_min, p_max = expected
    rule = sampling_probability(c6, c1, tau, g)
    assert rule.feasible and rule.binding
    assert rule.ratio == pytest.approx(ratio, abs=1e-12)
    assert rule.p_min == pytest.approx(p_min, abs=1e-11)
    if p_max is not None:
        assert rule.p_max == pytest.approx(p_max, abs=1e-11)
    assert rule.p_min * (1 - rule.p_min) * g == pytest.approx(c6 * (c1 - tau), rel=1e-9)


def test_theorem_6_11_infeasible_and_not_binding_t6():
    rule = sampling_probability(10, 0.5, 0.49, 0.25)
    assert not rule.feasible and rule.p_min is None and rule.ratio == pytest.approx(0.4)
    assert "infeasible" in rule.note
    free = sampling_probability(1, 0.3, 0.35, 1.0)
    assert free.feasible and not free.binding and (free.p_min, free.p_max) == (0.0, 1.0)
    corrected = sampling_probability(1, 0.5, 0.495, 15.25, "corrected")
    assert corrected.ratio == pytest.approx(150 * 3.27868852459e-4)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.01, 100), st.floats(0, 0.8), st.floats(0, 0.8), st.floats(0.01, 1e4))
def test_p_interval_satisfies_eq_19_at_its_ends_and_fails_outside_t19(c6, c1, tau, g):
    rule = sampling_probability(c6, c1, tau, g)
    need = c6 * (c1 - tau)
    if not rule.feasible:
        assert 0.25 * g < need
        return
    for p in (rule.p_min, rule.p_max):
        assert p * (1 - p) * g >= need * (1 - 1e-9) - 1e-12
    if rule.binding and rule.p_min > 1e-6:
        for p in (rule.p_min * (1 - 1e-6), 1 - rule.p_min * (1 - 1e-6)):
            assert p * (1 - p) * g < need


def test_poisson_sampling_size_moments_t19():
    rng = np.random.default_rng(5)
    m, p = 200, 0.3
    sizes = (rng.random((50_000, m)) < p).sum(1)
    assert sizes.mean() == pytest.approx(p * m, abs=4 * np.sqrt(m * p * (1 - p) / 5e4))
    assert sizes.var() == pytest.approx(m * p * (1 - p), rel=0.03)


def test_sigma2_estimators_agree_with_monte_carlo():
    rng = np.random.default_rng(0)
    grads = rng.normal(size=(200, 3)) + np.array([1.0, -0.5, 0.0])
    p, lr = 0.2, 0.7
    thm610 = parameter_variance(grads, p, "thm610", per_coordinate=True)
    np.testing.assert_allclose(thm610, p * (1 - p) * (grads**2).sum(0))
    normalized = parameter_variance(grads, p, "normalized", lr=lr)
    empirical = parameter_variance(grads, p, "empirical", lr=lr, replicas=40_000, seed=3)
    assert empirical == pytest.approx(normalized, rel=0.05)  # delta method vs Monte Carlo


@pytest.mark.parametrize(("call", "message"), [
    (lambda: sampling_variance(G_SCALAR, 1.5), "p = 1.5"),
    (lambda: sampling_variance(G_SCALAR, 0.5, rounds=0), "rounds = 0"),
    (lambda: sampling_probability(1, 0.5, 0.4, 0.0), "gradient_sq_sum = 0"),
    (lambda: sampling_probability(-1, 0.5, 0.4, 1.0), "c6 = -1"),
    (lambda: sampling_probability(1, 0.5, 0.4, 1.0, "other"), "method = 'other'"),
    (lambda: parameter_variance(G_SCALAR, 0.0), "p = 0"),
    (lambda: expected_update([0.0, 1.0], G_SCALAR, 0.5), "w_prev has dimension 2"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
