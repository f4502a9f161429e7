"""The shared log-space helpers against mpmath (50 digits) and the one safe-side epsilon solver."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from privfl.accounting.fdp import from_epsilon_delta
from privfl.accounting.gdp.accountant import gdp_delta, gdp_epsilon, gdp_log_delta
from privfl.accounting.logspace import LOG_2, log1mexp, log_expm1, logsubexp, logsumexp
from privfl.accounting.safe_epsilon import EPSILON_MAX, smallest_safe_epsilon


@pytest.fixture(autouse=True, scope="module")
def _mpmath_50_digits():
    """This module's references use 50 digits (a scoped setting: mpmath's precision is global)."""
    with mpmath.workdps(50):
        yield

U = 2.0**-52


def _close(computed: float, exact: mpmath.mpf, ulps: float = 4.0) -> bool:
    """|computed - exact| <= ulps * u * max(1, |exact|) (+ the smallest subnormal)."""
    truth = float(exact)
    return abs(computed - truth) <= ulps * U * max(1.0, abs(truth)) + 5e-324


def _ref_log1mexp(x: float) -> mpmath.mpf:
    return mpmath.log(-mpmath.expm1(mpmath.mpf(x)))  # expm1: no cancellation at tiny x


def _ref_log_expm1(x: float) -> mpmath.mpf:
    return mpmath.log(mpmath.expm1(mpmath.mpf(x)))


negative = st.floats(min_value=-800.0, max_value=-5e-324, allow_nan=False)
tiny_negative = st.floats(min_value=-1e-3, max_value=-5e-324)
positive = st.floats(min_value=5e-324, max_value=1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=400, deadline=None)
@given(st.one_of(negative, tiny_negative))
def test_log1mexp_matches_mpmath(x):
    assert _close(log1mexp(x), _ref_log1mexp(x))
    assert _close(float(log1mexp(np.array([x]))[0]), _ref_log1mexp(x))


@settings(max_examples=400, deadline=None)
@given(positive)
def test_log_expm1_matches_mpmath(x):
    assert _close(log_expm1(x), _ref_log_expm1(x))
    assert _close(float(log_expm1(np.array([x]))[0]), _ref_log_expm1(x))


@pytest.mark.parametrize(
    "x", [-5e-324, -1e-300, -1e-17, -1e-8, -0.5, -LOG_2, math.nextafter(-LOG_2, 0.0), -1.0,
          -30.0, -700.0, -745.0]
)
def test_log1mexp_at_the_extremes_and_the_switch(x):
    assert _close(log1mexp(x), _ref_log1mexp(x), ulps=2.0)


@pytest.mark.parametrize("x", [5e-324, 1e-300, 1e-17, 1e-3, 0.5, 1.0, 30.0, 709.0, 710.0, 1e300])
def test_log_expm1_at_the_extremes(x):
    assert _close(log_expm1(x), _ref_log_expm1(x), ulps=2.0)


def test_edge_values():
    assert log1mexp(0.0) == -math.inf
    assert log1mexp(1e-300) == -math.inf  # a difference that rounded above 0: 1 - e^0 = 0
    assert log1mexp(-math.inf) == 0.0
    assert log_expm1(0.0) == -math.inf
    assert log_expm1(math.inf) == math.inf
    assert math.isnan(log1mexp(math.nan)) and math.isnan(log_expm1(math.nan))
    arr = log1mexp(np.array([0.0, -math.inf, -1.0]))
    assert arr[0] == -math.inf and arr[1] == 0.0
    assert arr[2] == pytest.approx(math.log1p(-math.exp(-1.0)), rel=1e-15)
    arr = log_expm1(np.array([0.0, math.inf, 2.0]))
    assert arr[0] == -math.inf and arr[1] == math.inf
    assert arr[2] == pytest.approx(math.log(math.expm1(2.0)), rel=1e-15)


@settings(max_examples=200, deadline=None)
@given(st.floats(-700, 700), st.floats(1e-6, 50.0))
def test_logsubexp_matches_mpmath(a, gap):
    b = a - gap
    exact = mpmath.log(mpmath.exp(mpmath.mpf(a)) - mpmath.exp(mpmath.mpf(b)))
    assert _close(logsubexp(a, b), exact, ulps=8.0)
    assert _close(float(logsubexp(np.array([a]), b)[0]), exact, ulps=8.0)
    assert logsubexp(a, -math.inf) == a


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1000.0, 1000.0), min_size=1, max_size=20))
def test_logsumexp_matches_mpmath(values):
    exact = mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in values))
    assert _close(logsumexp(values), exact, ulps=8.0 * len(values))
    rows = logsumexp(np.array([values, values]), axis=1)
    assert rows.shape == (2,) and rows[0] == rows[1] == logsumexp(values)


def test_logsumexp_edges():
    assert logsumexp([]) == -math.inf
    assert logsumexp([-math.inf, -math.inf]) == -math.inf
    assert logsumexp([1.0, math.inf]) == math.inf
    rows = logsumexp(np.array([[-math.inf, -math.inf], [0.0, 0.0], [math.inf, 1.0]]), axis=1)
    assert rows[0] == -math.inf and rows[1] == pytest.approx(math.log(2.0)) and rows[2] == math.inf


# ------------------------------------------------------------------ the safe-side solver
@settings(max_examples=100, deadline=None)
@given(st.floats(0.01, 60.0), st.floats(1e-14, 0.5))
@example(31.5843838088823, 0.26044453715259613)  # log-space and direct delta differ by 3e-16
def test_solver_is_on_the_safe_side_and_tight(mu, delta):
    eps = smallest_safe_epsilon(lambda e: gdp_log_delta(e, mu), delta)
    assert gdp_delta(eps, mu) <= delta  # safe side, on the caller's scale
    below = eps - 1e-9 * max(1.0, eps)  # and tight: a hair below, delta is too large
    assert below < 0.0 or gdp_delta(below, mu) > delta


def test_solver_limits():
    # delta(0) already small enough: 0; a curve that never reaches the target: inf
    assert smallest_safe_epsilon(lambda e: -50.0, 1e-5) == 0.0
    assert smallest_safe_epsilon(lambda e: -1.0, 1e-5) == math.inf
    # exactly at the float range: the largest float is still a finite answer
    def edge(e: float) -> float:
        return 0.0 if e < EPSILON_MAX else -math.inf

    assert smallest_safe_epsilon(edge, 0.5) == EPSILON_MAX
    # a root at 2^40 (beyond any old cap): found finite, to the solver's tolerance
    root = 2.0**40
    found = smallest_safe_epsilon(lambda e: -e / root, math.exp(-1.0))
    assert root <= found <= root * (1.0 + 1e-14)


def test_large_epsilon_is_infinite_at_the_same_size_everywhere():
    # the Gaussian-DP curve (first guess mu^2/2) stays finite far beyond the old caps (2^19 for
    # trade-offs, 2^20 for random participation, 1e12 for contraction; see test_solver_limits) ...
    assert gdp_epsilon(1e-5, 1e100) == pytest.approx(5e199, rel=1e-12)
    # a general trade-off function goes through the same solver: for (700, 0)-DP,
    # delta(eps) = (e^700 - e^eps) / (e^700 + 1), so eps(delta) = 700 + log(1 - delta (1 + e^-700))
    pure = from_epsilon_delta([(700.0, 0.0)])
    assert pure.epsilon(1e-5) == pytest.approx(700.0 + math.log1p(-1e-5), rel=1e-13)
    assert pure.delta(pure.epsilon(1e-5)) <= 1e-5
    # ... and become inf only beyond the float range, like the closed forms
    assert math.isinf(gdp_epsilon(1e-5, 1.9e154))
