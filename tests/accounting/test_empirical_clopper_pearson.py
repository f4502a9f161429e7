"""Clopper-Pearson epsilon lower bounds: closed forms, jax-privacy 2.0 pinned values, Monte Carlo
coverage on a Gaussian mechanism of known epsilon, and power with weak noise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfl.accounting.empirical import (
    clopper_pearson_epsilon,
    clopper_pearson_upper,
    split_threshold_epsilon,
)
from privfl.accounting.gdp import gdp_epsilon

#: (errors, trials) -> upper bound at confidence 0.975, from jax_privacy 2.0.0
#: `auditing._clopper_pearson_upper(k, n, 0.025)` (separate venv, 2026-11-29)
JAX_PRIVACY = {(0, 500): 0.007350610051907784, (3, 100): 0.08517605297428002,
               (50, 100): 0.601678870496699}


@pytest.mark.parametrize("case", sorted(JAX_PRIVACY))
def test_upper_matches_jax_privacy(case):
    assert clopper_pearson_upper(*case, 0.025) == pytest.approx(JAX_PRIVACY[case], rel=1e-12)


@pytest.mark.parametrize("trials", [1, 20, 1000])
def test_upper_with_no_errors_is_the_closed_form(trials):
    # P[0 errors] = (1 - p)^n = beta at the bound
    expected = 1 - 0.05 ** (1 / trials)
    assert clopper_pearson_upper(0, trials, 0.05) == pytest.approx(expected, rel=1e-12)
    assert clopper_pearson_upper(trials, trials, 0.05) == 1.0


def test_perfect_separation_bound():
    upper = 1 - 0.025 ** (1 / 500)
    expected = math.log((1 - 1e-5 - upper) / upper)
    assert clopper_pearson_epsilon(0, 500, 0, 500, 1e-5) == pytest.approx(expected, rel=1e-12)
    assert clopper_pearson_epsilon(250, 500, 250, 500, 1e-5) == 0.0


def test_coverage_and_power_on_a_gaussian_mechanism():
    """Scores N(mu, 1) for inserted canaries and N(0, 1) for left-out ones are the output of a
    mu-GDP mechanism: the bound exceeds its exact epsilon in at most 5 % of runs (it is usually
    far below it), and a large mu gives a large bound."""
    delta, runs, m = 1e-5, 200, 1000
    rng = np.random.default_rng(7)
    true_epsilon = float(gdp_epsilon(delta, 2.0))
    exceed, bounds = 0, []
    for run in range(runs):
        bits = rng.random(m) < 0.5
        scores = rng.normal(0.0, 1.0, m) + 2.0 * bits
        bounds.append(split_threshold_epsilon(scores, bits, delta, seed=run))
        exceed += bounds[-1] > true_epsilon
    assert exceed <= 10 + 9  # 5 % of 200, plus three sd
    assert np.median(bounds) > 0.5
    bits = rng.random(m) < 0.5
    strong = split_threshold_epsilon(rng.normal(0.0, 1.0, m) + 20.0 * bits, bits, delta)
    # perfect separation on about 500 counted canaries, 250 of each: log((1 - u) / u)
    assert strong > 3.5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: clopper_pearson_upper(5, 4, 0.05), "errors = 5"),
        (lambda: clopper_pearson_upper(0, 0, 0.05), "trials = 0"),
        (lambda: clopper_pearson_epsilon(0, 5, 0, 5, 1.5), "delta = 1.5"),
        (lambda: split_threshold_epsilon(np.zeros(3), np.zeros(3), 1e-5), ">= 4"),
        (lambda: split_threshold_epsilon(np.full(4, np.nan), np.zeros(4), 1e-5), "NaN"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
