"""Utility measures: gap, loss conventions, bias-variance, total variance (spec T13-T15, T19)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.distortion.divergence import tv_discrete
from privfl.distortion.utility import (
    bias,
    expected_gap,
    federated_average,
    gap,
    parameter_discrepancy,
    proxy_utility_loss,
    total_variance,
    trace_variance,
    utility_loss,
    variance_reduction,
)


def test_utility_loss_sign_conventions_t13():
    w, w_star, w_tilde = [1.0, 2.0], [0.0, 0.0], [1.5, 1.5]
    assert utility_loss(w, w_tilde, w_star, "paper-definition") == pytest.approx(0.5)
    assert utility_loss(w, w_tilde, w_star) == pytest.approx(-0.5)


def test_sum_of_squares_example_t14():
    x, w_star, w = np.array([1.0, 2.0]), np.zeros(2), np.array([1.0, 1.0])
    loss = float((x @ w_star - x @ w) ** 2)
    assert loss == 9.0
    assert gap(w, w_star, c=float(x @ x)) == 10.0 and loss <= gap(w, w_star, c=float(x @ x))


def test_bias_variance_decomposition_t15():
    rng = np.random.default_rng(0)
    samples = rng.multivariate_normal([1.0, 2.0], np.diag([0.25, 1.0]), size=200_000)
    parts = expected_gap(samples, [0.0, 0.0])
    assert parts.gap == pytest.approx(parts.trace_variance + parts.bias_squared, rel=1e-12)
    assert parts.gap == pytest.approx(6.25, rel=0.01)
    assert trace_variance(samples) == pytest.approx(1.25, rel=0.01)
    assert bias(samples, [0, 0]) == pytest.approx(np.sqrt(5), rel=0.01)


def test_law_of_total_variance_t19():
    rng = np.random.default_rng(1)
    outer = rng.normal(0, 2.0, size=(400, 1, 3))  # Var(E[W | W_prev]) = 4 per coordinate
    groups = outer + rng.normal(0, 0.5, size=(400, 300, 3))  # E Var[W | W_prev] = 0.25
    total, within, between = total_variance(groups)
    assert total == pytest.approx(within + between, rel=1e-9)
    assert within == pytest.approx(3 * 0.25, rel=0.03)
    assert between == pytest.approx(3 * 4.0, rel=0.2)


def test_proxy_drops_the_distortions_variance():
    rng = np.random.default_rng(2)
    w = rng.normal(1.0, 0.1, size=(50_000, 4))
    w_tilde = w + rng.normal(0, 0.3, size=w.shape)  # zero-mean noise, variance 0.09
    literal = utility_loss(w, w_tilde, np.zeros(4))
    assert literal == pytest.approx(4 * 0.09, rel=0.05)
    proxy = proxy_utility_loss(w, w_tilde.mean(0), np.zeros(4))
    shift = float(w_tilde.mean(0) @ w_tilde.mean(0) - w.mean(0) @ w.mean(0))  # Monte Carlo
    assert proxy == pytest.approx(-trace_variance(w) + shift, rel=1e-9)  # -tr Var W + O(1/sqrt n)
    assert proxy < 0 < literal
    assert variance_reduction([0.1, 0.3]) == pytest.approx(-0.2)
    assert parameter_discrepancy(2.6, 0.5) == pytest.approx(1.3)
    assert federated_average([[1.0, 2.0], [3.0, 6.0]]) == 3.0


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 8), st.integers(0, 2**32 - 1))
def test_bounded_function_tv_inequality_t19(n, seed):
    """Lemmas E.1/E.2: |E_P f - E_P~ f| <= (max f - min f) TV(P, P~)."""
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n))
    f = rng.normal(size=n) * rng.uniform(0.1, 10)
    assert abs(p @ f - q @ f) <= (f.max() - f.min()) * tv_discrete(p, q) + 1e-12


@pytest.mark.parametrize(("call", "message"), [
    (lambda: gap([[1.0, np.nan]], [0, 0]), "w contains NaN"),
    (lambda: gap([1.0, 2.0], [0.0]), "w_star has dimension 1"),
    (lambda: gap([1.0], [0.0], c=0), "c = 0"),
    (lambda: utility_loss([1.0], [1.0], [0.0], "other"), "convention = 'other'"),
    (lambda: total_variance(np.zeros((2, 3))), "groups has shape"),
    (lambda: parameter_discrepancy(1.0, 1.5), "tv = 1.5"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
