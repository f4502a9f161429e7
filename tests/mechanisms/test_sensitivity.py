"""Participation schemes and the sensitivity of C: exact cases against brute force over every
pattern, the bound against the signed 1-D truth, hypothesis invariants."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.mechanisms.factorization import sqrt_prefix_coefficients, toeplitz_lower
from privfl.mechanisms.sensitivity import (
    Participation,
    max_separated_sum,
    sensitivity,
    sensitivity_brute_force,
    sign_brute_force,
)


def _banded(steps: int, band: int, rng: np.random.Generator, signed: bool = False) -> np.ndarray:
    c = rng.random((steps, steps)) + 0.1
    if signed:
        c = c * rng.choice([-1.0, 1.0], size=c.shape)
    i, j = np.indices(c.shape)
    return np.where((i >= j) & (i - j < band), c, 0.0)


def _patterns_by_definition(steps: int, k: int, b: int) -> set[tuple[int, ...]]:
    found = set()
    for size in range(1, k + 1):
        for p in itertools.combinations(range(steps), size):
            if all(q - r >= b for r, q in zip(p, p[1:], strict=False)):
                found.add(p)
    return found


@pytest.mark.parametrize(("steps", "k", "b"), [(6, 2, 2), (9, 3, 3), (10, 4, 2), (7, 1, 7)])
def test_patterns_are_every_separated_subset(steps: int, k: int, b: int) -> None:
    p = Participation(steps, k, b)
    listed = list(p.patterns())
    assert len(listed) == len(set(listed)) == p.pattern_count()
    assert set(listed) == _patterns_by_definition(steps, k, b)


def test_cyclic_patterns() -> None:
    p = Participation.cyclic(10, 4)
    assert p.max_participations == 3
    assert list(p.patterns()) == [(0, 4, 8), (1, 5, 9), (2, 6), (3, 7)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("steps", "k", "b", "band"), [(8, 2, 3, 3), (10, 3, 3, 2), (9, 4, 2, 2)])
def test_banded_exact_equals_brute_force(seed: int, steps: int, k: int, b: int, band: int) -> None:
    rng = np.random.default_rng(seed)
    p = Participation(steps, k, b)
    for signed in (False, True):
        c = _banded(steps, band, rng, signed)
        got = sensitivity(c, p)
        assert got.exact and got.method.startswith("banded")
        # band <= b: the columns of a pattern have disjoint supports, signs do not matter
        assert got.value == pytest.approx(sensitivity_brute_force(np.abs(c), p), rel=1e-12)
        assert got.value == pytest.approx(sign_brute_force(c, p), rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_nonnegative_dense_exact_by_enumeration(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = np.tril(rng.random((9, 9)))
    p = Participation(9, 3, 2)
    got = sensitivity(c, p)
    assert got.exact and "every pattern" in got.method
    assert got.value == pytest.approx(sensitivity_brute_force(c, p), rel=1e-13)
    assert got.value == pytest.approx(sign_brute_force(c, p), rel=1e-12)  # signs cannot help


@pytest.mark.parametrize("seed", range(3))
def test_bound_is_sound_and_reasonably_tight(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = np.tril(rng.random((10, 10)))
    p = Participation(10, 3, 2)
    exact = sensitivity_brute_force(c, p)
    bound = sensitivity(c, p, brute_force_limit=0)
    assert not bound.exact
    assert exact <= bound.value + 1e-12
    assert bound.value <= 1.5 * exact


@pytest.mark.parametrize("seed", range(3))
def test_bound_is_sound_with_mixed_signs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(9, 9))
    for p in (Participation(9, 3, 2), Participation.cyclic(9, 3)):
        got = sensitivity(c, p)
        assert not got.exact
        assert sign_brute_force(c, p) <= got.value + 1e-12


def test_cyclic_exact_for_nonnegative_sqrt_factorization() -> None:
    steps = 12
    c = toeplitz_lower(sqrt_prefix_coefficients(steps), steps)
    for period in (3, 4, 6):
        p = Participation.cyclic(steps, period)
        got = sensitivity(c, p)
        assert got.exact
        assert got.value == pytest.approx(sensitivity_brute_force(c, p), rel=1e-14)


def test_single_participation_is_max_column_norm() -> None:
    c = np.array([[1.0, 0.0], [2.0, -3.0]])
    got = sensitivity(c, Participation.single(2))
    assert got.exact and got.value == pytest.approx(math.sqrt(9.0))


def test_identity_sensitivity_is_sqrt_k() -> None:
    for k, b in ((1, 1), (3, 4), (5, 2)):
        got = sensitivity(np.eye(12), Participation(12, k, b))
        assert got.exact and got.value == pytest.approx(math.sqrt(k), rel=1e-15)


def test_max_separated_sum_small_cases() -> None:
    w = np.array([5.0, 1.0, 4.0, 0.0, 3.0])
    assert max_separated_sum(w, 1, 1) == 5.0
    assert max_separated_sum(w, 2, 2) == 9.0  # 5 + 4
    assert max_separated_sum(w, 3, 2) == 12.0  # 5 + 4 + 3
    assert max_separated_sum(w, 2, 3) == 8.0  # 5 + 3 (steps 0 and 4)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.integers(1, 4), st.integers(1, 3), st.integers(0, 10_000))
def test_sensitivity_monotone_in_k_and_separation(steps: int, k: int, b: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    c = np.tril(rng.random((steps, steps)))
    most = -(-steps // b)
    if k > most:
        return
    base = sensitivity(c, Participation(steps, k, b)).value
    if k + 1 <= most:  # one more participation never lowers it
        assert sensitivity(c, Participation(steps, k + 1, b)).value >= base - 1e-12
    if b > 1:  # a weaker separation never lowers it
        assert sensitivity(c, Participation(steps, k, b - 1)).value >= base - 1e-12
    assert base >= np.linalg.norm(c, axis=0).max() - 1e-12


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 4), st.integers(0, 10_000))
def test_dynamic_programme_equals_enumeration(steps: int, b: int, seed: int) -> None:
    w = np.random.default_rng(seed).random(steps)
    for k in range(1, -(-steps // b) + 1):
        brute = max(w[list(p)].sum() for p in Participation(steps, k, b).patterns())
        assert max_separated_sum(w, k, b) == pytest.approx(brute, rel=1e-14)


def test_validation() -> None:
    with pytest.raises(ValueError, match="max_participations = 4"):
        Participation(10, 4, 4)
    with pytest.raises(ValueError, match="cyclic"):
        Participation(10, 2, 4, "cyclic")
    with pytest.raises(ValueError, match="columns"):
        sensitivity(np.eye(3), Participation.single(4))
    with pytest.raises(ValueError, match="participation"):
        sensitivity(np.eye(3), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="weights"):
        max_separated_sum(np.array([-1.0]), 1, 1)
