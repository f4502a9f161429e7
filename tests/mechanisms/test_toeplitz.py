"""Banded Toeplitz factorizations: series algebra against dense matrices, the gradient against
finite differences, the optimiser at T = 1024 against the tree, the square root and the bound."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from privfl.mechanisms.factorization import (
    factorization_error,
    sqrt_prefix_coefficients,
    toeplitz_lower,
    workload,
)
from privfl.mechanisms.sensitivity import Participation
from privfl.mechanisms.toeplitz import (
    _objective,
    inverse_series,
    optimise_toeplitz,
    toeplitz_error,
    toeplitz_workload,
    within_unit_norm,
)
from privfl.mechanisms.tree import tree_levels, tree_step_variances


def test_workload_column_matches_dense() -> None:
    np.testing.assert_allclose(
        toeplitz_lower(toeplitz_workload(12, 0.8), 12), workload(12, momentum=0.8), rtol=1e-14
    )


def test_inverse_series_is_the_inverse_matrix() -> None:
    c = np.array([1.3, -0.4, 0.25, 0.1])
    u = inverse_series(c, 20)
    np.testing.assert_allclose(
        toeplitz_lower(u, 20), np.linalg.inv(toeplitz_lower(c, 20)), atol=1e-13
    )


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_error_equals_dense_and_gradient_equals_finite_differences(momentum: float) -> None:
    steps, band = 40, 6
    c = np.random.default_rng(1).random(band) + np.eye(band)[0]
    a = toeplitz_workload(steps, momentum)
    dense = factorization_error(
        workload(steps, momentum=momentum), toeplitz_lower(c, steps), Participation.single(steps)
    )
    assert toeplitz_error(c, a) == pytest.approx(dense.total_at_unit_mu, rel=1e-12)
    _, grad, _ = _objective(c, a)
    h = 1e-6
    numeric = [
        (_objective(c + h * e, a)[0] - _objective(c - h * e, a)[0]) / (2 * h) for e in np.eye(band)
    ]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6)


def test_optimum_at_1024_beats_sqrt_and_tree_near_the_bound() -> None:
    steps = 1024
    a = toeplitz_workload(steps)
    c = optimise_toeplitz(steps, steps)
    err = toeplitz_error(c, a)
    sqrt = toeplitz_error(
        sqrt_prefix_coefficients(steps) / np.linalg.norm(sqrt_prefix_coefficients(steps)), a
    )
    assert sqrt == pytest.approx(9902.8923, rel=1e-7)
    tree = tree_levels(steps) * tree_step_variances(steps, "honaker").sum()  # 32687
    assert 8668.857 < err < sqrt < tree
    assert err < 1.11 * 8668.857  # 9567.0: within 11 % of ||A||_*^2 / T
    assert np.linalg.norm(c) == pytest.approx(1.0)


def test_banded_optimum_improves_on_its_start() -> None:
    steps, band = 500, 16
    a = toeplitz_workload(steps)
    start = sqrt_prefix_coefficients(band)
    c = optimise_toeplitz(steps, band, iterations=100)
    assert c.size == band
    assert toeplitz_error(c, a) < 0.9 * toeplitz_error(start / np.linalg.norm(start), a)


@settings(max_examples=300, deadline=None)
@example([1e-200])  # its square underflows to 0: the norm must not be computed as 0
@example([1e300, -1e300])  # its squares overflow
@example([5e-324, 1.0])  # a subnormal beside a normal entry
@given(st.lists(st.floats(-1e308, 1e308, allow_nan=False), min_size=1,
                max_size=40).filter(lambda c: any(v != 0 for v in c)))
def test_within_unit_norm_is_below_one_exactly_and_within_1e_14_of_it(values) -> None:
    """BandMF's sensitivity m sqrt(k) takes m = 1 for a C from optimise_toeplitz (the number
    `privfl account bandmf` uses by default, so the run and the command agree bit for bit on any
    CPU): the norm must be below 1 in exact arithmetic (Fractions), and not lose utility
    (at most ~30 ulps below 1)."""
    c = within_unit_norm(values)
    exact = sum(Fraction(float(v)) ** 2 for v in c)
    assert exact < 1
    assert exact > 1 - Fraction(1, 10**14)
    tiny = np.abs(values) < 1e-300 * np.abs(values).max()  # may flush to zero when scaled
    assert np.all((np.sign(c) == np.sign(values)) | tiny)


def test_optimised_toeplitz_has_norm_below_one_in_exact_arithmetic() -> None:
    c = optimise_toeplitz(40, 10, momentum=0.9, iterations=50)
    assert sum(Fraction(float(v)) ** 2 for v in c) < 1


def test_validation() -> None:
    for bad in ([], [0.0, 0.0], [1.0, float("nan")], [[1.0]]):
        with pytest.raises(ValueError, match="c = "):
            within_unit_norm(bad)
    with pytest.raises(ValueError, match="c_0"):
        inverse_series([0.0, 1.0], 3)
    with pytest.raises(ValueError, match="band"):
        optimise_toeplitz(10, 11)
    with pytest.raises(ValueError, match="workload_column"):
        toeplitz_error(np.ones(5), np.ones(3))
