"""One-run auditing (Steinke, Nasr and Jagielski 2023): closed forms, an independent
implementation (jax-privacy 2.0), a Monte Carlo coverage check and monotonicity properties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.accounting.empirical import one_run_epsilon, one_run_guesses, one_run_p_value

#: (m, r, v, delta) -> (epsilon lower bound at beta = 0.05, p-value at epsilon = 1), computed by
#: jax_privacy 2.0.0 `auditing._epsilon_one_run(0.0, m, r, v, 0.05, delta)` and
#: `auditing._one_run_p_value(m, r, v, 1.0, delta)` in a separate venv (pip install jax-privacy,
#: 2026-11-29); its root finder is brentq with xtol 1e-6, hence the tolerance on epsilon.
JAX_PRIVACY = {
    (1000, 1000, 1000, 0.0): (5.8090683371730325, 8.957312358145782e-137),
    (1000, 100, 100, 1e-5): (3.465376229385333, 0.0005633089840961712),
    (1000, 200, 180, 1e-5): (1.796285070718516, 0.0004362245385791604),
    (500, 50, 45, 1e-3): (0.48269004686378386, 0.07876203177351666),
    (10000, 300, 290, 1e-6): (2.822829550967972, 0.00022913656726823573),
}


@pytest.mark.parametrize("case", sorted(JAX_PRIVACY))
def test_matches_jax_privacy(case):
    m, r, v, delta = case
    epsilon, p_value = JAX_PRIVACY[case]
    assert one_run_p_value(m, r, v, 1.0, delta) == pytest.approx(p_value, rel=1e-12)
    assert one_run_epsilon(m, r, v, delta) == pytest.approx(epsilon, abs=2e-6)


@pytest.mark.parametrize("r", [1, 10, 100, 1000])
def test_all_correct_without_delta_is_the_closed_form(r):
    # delta = 0, v = r: p = q^r, so the bound solves q^r = beta: eps = logit(beta^(1/r))
    q = 0.05 ** (1.0 / r)
    expected = max(math.log(q / (1.0 - q)), 0.0)
    assert one_run_epsilon(r, r, r, 0.0) == pytest.approx(expected, abs=1e-9)


def test_half_correct_rejects_nothing():
    assert one_run_epsilon(1000, 1000, 500, 1e-5) == 0.0


def test_p_value_without_delta_is_the_binomial_tail():
    # P[Binomial(3, q) >= 2] = 3 q^2 (1 - q) + q^3 at q = e / (1 + e)
    q = math.e / (1.0 + math.e)
    assert one_run_p_value(3, 3, 2, 1.0, 0.0) == pytest.approx(3 * q**2 * (1 - q) + q**3, rel=1e-14)


def test_coverage_on_randomised_response():
    """eps-DP randomised response (each guess right with prob e^eps/(1+e^eps)) is the worst case
    of the theorem: the bound exceeds the true eps in at most beta = 5 % of runs, and is not
    trivially 0."""
    true_epsilon, m, runs = 1.0, 400, 300
    q = 1.0 / (1.0 + math.exp(-true_epsilon))
    correct = np.random.default_rng(47).binomial(m, q, size=runs)
    bounds = np.array([one_run_epsilon(m, m, int(v), 0.0) for v in correct])
    exceed = int((bounds > true_epsilon).sum())
    # 5 % of 300 is 15; sd sqrt(300 * 0.05 * 0.95) = 3.8: 27 is three sd above
    assert exceed <= 27
    assert np.median(bounds) > 0.6


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.data())
def test_monotone(m, data):
    r = data.draw(st.integers(0, m))
    v = data.draw(st.integers(0, r))
    delta = data.draw(st.sampled_from([0.0, 1e-6, 1e-3]))
    eps = data.draw(st.floats(0.0, 10.0))
    bound = one_run_epsilon(m, r, v, delta)
    if v < r:  # one more correct guess never lowers the bound
        assert one_run_epsilon(m, r, v + 1, delta) >= bound - 1e-9
    assert one_run_epsilon(m, r, v, 2 * delta + 1e-4) <= bound + 1e-9  # more delta, less
    assert one_run_epsilon(m, r, v, delta, beta=0.2) >= bound - 1e-9  # less confidence, more
    assert one_run_p_value(m, r, v, eps + 0.5, delta) >= one_run_p_value(m, r, v, eps, delta)
    if bound > 0:  # the bound is rejected at its own level, just above it is not
        assert one_run_p_value(m, r, v, bound, delta) < 0.05


def test_guesses_take_the_top_and_bottom_scores():
    scores = np.array([0.9, 0.1, 0.8, 0.2, 0.5, 0.7])
    inserted = np.array([True, False, False, False, True, True])
    # top 2: 0.9 (in, right), 0.8 (out, wrong); bottom 2: 0.1 (out, right), 0.2 (out, right)
    assert one_run_guesses(scores, inserted, 2, 2) == (4, 3)
    assert one_run_guesses(scores, inserted, 0, 0) == (0, 0)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: one_run_epsilon(10, 11, 0, 0.0), "r = 11"),
        (lambda: one_run_epsilon(10, 5, 6, 0.0), "v = 6"),
        (lambda: one_run_epsilon(10, 5, 5, 1.0), "delta = 1"),
        (lambda: one_run_epsilon(10, 5, 5, 0.0, beta=0.0), "beta = 0"),
        (lambda: one_run_p_value(10, 5, 5, -1.0, 0.0), "epsilon = -1"),
        (lambda: one_run_guesses(np.zeros(3), np.zeros(2), 1), "equal length"),
        (lambda: one_run_guesses(np.zeros(3), np.zeros(3), 2, 2), "k_out = 2"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
