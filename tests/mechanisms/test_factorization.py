"""Matrix factorizations: workloads, errors, lower bound, optimiser (golden T = 2 optimum,
an independent optimisation over Gram matrices at T = 3, never worse than its start) and the
comparison with identity and tree aggregation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize

from privfl.mechanisms.factorization import (
    decoder,
    error_lower_bound,
    factorization_error,
    optimise_factorization,
    sqrt_prefix_coefficients,
    toeplitz_lower,
    workload,
)
from privfl.mechanisms.sensitivity import Participation
from privfl.mechanisms.tree import tree_decoder, tree_encoder, tree_levels, tree_step_variances


def test_workloads() -> None:
    np.testing.assert_array_equal(workload(4), np.tril(np.ones((4, 4))))
    beta, t, s = 0.9, 6, 2
    assert workload(8, momentum=beta)[t, s] == pytest.approx((1 - beta ** (t - s + 1)) / (1 - beta))
    eta = np.linspace(1.0, 0.3, 8)
    a = workload(8, learning_rates=eta)
    assert a[5, 2] == pytest.approx(eta[2]) and a[2, 5] == 0.0  # SGD: theta_t moves by eta_s g_s
    m = workload(8, momentum=beta, learning_rates=eta)
    assert m[5, 2] == pytest.approx(sum(eta[u] * beta ** (u - 2) for u in range(2, 6)))


def test_sqrt_factorization_squares_to_prefix_sums() -> None:
    r = toeplitz_lower(sqrt_prefix_coefficients(50), 50)
    np.testing.assert_allclose(r @ r, workload(50), atol=1e-12)


def test_identity_and_tree_errors_closed_form() -> None:
    steps = 64
    single = Participation.single(steps)
    ident = factorization_error(workload(steps), np.eye(steps), single)
    assert ident.total_at_unit_mu == steps * (steps + 1) / 2 and ident.max_step_at_unit_mu == steps
    tree = factorization_error(
        workload(steps), tree_encoder(steps), single, decoder_matrix=tree_decoder(steps)
    )
    popcounts = sum(bin(t).count("1") for t in range(1, steps + 1))
    assert tree.total_at_unit_mu == pytest.approx(tree_levels(steps) * popcounts)  # 7 * 193
    assert tree.total_at_unit_mu == pytest.approx(1351.0)


def test_golden_optimum_at_two_steps() -> None:
    # min over unit-diagonal X of tr(A^T A X^-1) is (3 - 2 rho)/(1 - rho^2) at rho = (3 - sqrt5)/2,
    # i.e. (3 + sqrt5)/2 = phi^2; the nuclear-norm lower bound is (phi + 1/phi)^2 / 2 = 5/2
    a = workload(2)
    c = optimise_factorization(a, iterations=200)
    err = factorization_error(a, c, Participation.single(2))
    assert err.total_at_unit_mu == pytest.approx((3 + math.sqrt(5)) / 2, rel=1e-7)
    assert error_lower_bound(a) == pytest.approx(2.5, rel=1e-12)


def _gram_optimum(a: np.ndarray) -> float:
    """min over correlation matrices X (unit diagonal) of tr(A^T A X^-1), by Nelder-Mead on
    unit-norm rows of a factor (independent of the optimiser under test)."""
    steps = a.shape[0]
    target = a.T @ a

    def value(theta: np.ndarray) -> float:
        f = theta.reshape(steps, steps)
        f = f / np.linalg.norm(f, axis=1, keepdims=True)
        x = f @ f.T
        if np.linalg.cond(x) > 1e10:
            return 1e10
        return float(np.trace(target @ np.linalg.inv(x)))

    best = math.inf
    for seed in range(4):
        start = np.eye(steps) + 0.3 * np.random.default_rng(seed).random((steps, steps))
        res = optimize.minimize(
            value,
            start.ravel(),
            method="Nelder-Mead",
            options={"maxiter": 20_000, "xatol": 1e-10, "fatol": 1e-12},
        )
        best = min(best, res.fun)
    return best


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_full_band_optimum_matches_gram_optimisation_at_three_steps(momentum: float) -> None:
    a = workload(3, momentum=momentum)
    c = optimise_factorization(a, iterations=500)
    err = factorization_error(a, c, Participation.single(3))
    assert err.total_at_unit_mu == pytest.approx(_gram_optimum(a), rel=1e-6)


def test_optimised_beats_sqrt_tree_and_identity_above_lower_bound() -> None:
    steps = 64
    a, single = workload(steps), Participation.single(steps)
    sqrt = factorization_error(a, toeplitz_lower(sqrt_prefix_coefficients(steps), steps), single)
    opt = factorization_error(a, optimise_factorization(a, iterations=150), single)
    tree_total = tree_levels(steps) * tree_step_variances(steps, "honaker").sum()
    bound = error_lower_bound(a)
    assert bound <= opt.total_at_unit_mu < sqrt.total_at_unit_mu < tree_total < steps**2
    assert opt.total_at_unit_mu < 1.08 * bound  # 282.2 against 266.4


def test_sqrt_beats_tree_at_1024() -> None:
    steps = 1024
    r = sqrt_prefix_coefficients(steps)
    s2 = float((r**2).sum())  # squared sensitivity = the largest row norm^2 of B = R
    sqrt_max, levels = s2 * s2, tree_levels(steps)
    assert sqrt_max == pytest.approx(10.70961, rel=1e-6)
    assert levels * tree_step_variances(steps).max() == 110.0  # 11 levels x 10 set bits
    assert sqrt_max < levels * tree_step_variances(steps, "honaker").max()
    # total: 9902.9 (sqrt) against 56331 (tree) and 32687 (Honaker tree); lower bound 8668.9
    total = s2 * float(np.sum((np.arange(steps, 0, -1)) * r**2))
    assert total == pytest.approx(9902.8923, rel=1e-7)
    assert (
        _prefix_lower_bound(steps) <= total < levels * tree_step_variances(steps, "honaker").sum()
    )


def _prefix_lower_bound(steps: int) -> float:
    """||A||_*^2 / T from the prefix-sum matrix's singular values in closed form,
    sigma_k = 1 / (2 sin((2k - 1) pi / (2 (2T + 1))))."""
    k = np.arange(1, steps + 1)
    return float(
        (1.0 / (2.0 * np.sin((2 * k - 1) * np.pi / (2 * (2 * steps + 1))))).sum() ** 2 / steps
    )


@pytest.mark.parametrize("steps", [1, 5, 64])
def test_lower_bound_closed_form(steps: int) -> None:
    assert error_lower_bound(workload(steps)) == pytest.approx(
        _prefix_lower_bound(steps), rel=1e-12
    )
    assert _prefix_lower_bound(1024) == pytest.approx(8668.85766, rel=1e-8)


def test_banded_optimum_multi_participation() -> None:
    steps, band = 32, 4
    a = workload(steps)
    p = Participation.cyclic(steps, band)  # k = 8 epochs of 4 steps
    banded = optimise_factorization(a, band=band, iterations=100)
    err = factorization_error(a, banded, p)
    assert err.sensitivity.exact and err.sensitivity.value == pytest.approx(math.sqrt(8))
    ident = factorization_error(a, np.eye(steps), p)
    assert err.total_at_unit_mu < ident.total_at_unit_mu
    assert np.all(np.abs(np.triu(banded, 1)) == 0) and np.all(np.tril(banded, -band) == 0)


def test_learning_rate_workload_optimisation_improves_on_start() -> None:
    a = workload(24, momentum=0.9, learning_rates=np.linspace(1.0, 0.1, 24))
    start = toeplitz_lower(sqrt_prefix_coefficients(24), 24)
    start = start / np.linalg.norm(start, axis=0)
    single = Participation.single(24)
    before = factorization_error(a, start, single).total_at_unit_mu
    after = factorization_error(a, optimise_factorization(a, iterations=100), single)
    assert after.total_at_unit_mu < 0.95 * before
    assert after.total_at_unit_mu >= error_lower_bound(a)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 10), st.integers(0, 10_000), st.floats(0.0, 0.95))
def test_every_factorization_is_above_the_lower_bound(steps: int, seed: int, beta: float) -> None:
    rng = np.random.default_rng(seed)
    c = np.tril(rng.normal(size=(steps, steps)))
    c[np.diag_indices(steps)] = 0.5 + rng.random(steps)
    a = workload(steps, momentum=beta)
    err = factorization_error(a, c, Participation.single(steps))
    assert err.total_at_unit_mu >= error_lower_bound(a) * (1 - 1e-10)
    np.testing.assert_allclose(decoder(a, c) @ c, a, atol=1e-8)


def test_validation() -> None:
    with pytest.raises(ValueError, match="momentum"):
        workload(4, momentum=1.0)
    with pytest.raises(ValueError, match="learning_rates"):
        workload(4, learning_rates=[1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="band"):
        optimise_factorization(workload(4), band=5)
    with pytest.raises(ValueError, match="singular"):
        decoder(workload(2), np.array([[1.0, 0.0], [1.0, 0.0]]))
