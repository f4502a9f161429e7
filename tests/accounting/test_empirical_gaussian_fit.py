"""Andrew et al. 2024's Gaussian-fit epsilon estimate: an exact small case and consistency on
Gaussian scores of known mu."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privfl.accounting.empirical import gaussian_fit_epsilon
from privfl.accounting.gdp import gdp_epsilon


def test_small_exact_case():
    # means 2 and 0, sample variances 2 and 2: pooled sd sqrt(2), mu = 2 / sqrt(2)
    fit = gaussian_fit_epsilon(np.array([1.0, 3.0]), np.array([-1.0, 1.0]), 1e-5)
    assert (fit.mean_in, fit.mean_out, fit.sd) == (2.0, 0.0, pytest.approx(math.sqrt(2)))
    assert fit.mu == pytest.approx(math.sqrt(2), rel=1e-14)
    assert fit.epsilon == pytest.approx(float(gdp_epsilon(1e-5, math.sqrt(2))), rel=1e-12)


def test_recovers_mu_on_gaussian_scores():
    rng = np.random.default_rng(3)
    fit = gaussian_fit_epsilon(rng.normal(1.5, 0.3, 20000), rng.normal(0.0, 0.3, 20000), 1e-5)
    # mu = 5; standard error of mu_hat about sqrt(2 / 20000 + mu^2 / 40000) = 0.027
    assert fit.mu == pytest.approx(5.0, abs=0.1)
    assert fit.epsilon == pytest.approx(float(gdp_epsilon(1e-5, 5.0)), rel=0.03)


def test_no_gap_and_no_spread():
    assert gaussian_fit_epsilon(np.array([0.0, 1.0]), np.array([0.0, 2.0]), 1e-5).epsilon == 0.0
    flat = gaussian_fit_epsilon(np.array([1.0, 1.0]), np.array([0.0, 0.0]), 1e-5)
    assert flat.epsilon == math.inf


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="scores_in"):
        gaussian_fit_epsilon(np.array([1.0]), np.zeros(3), 1e-5)
    with pytest.raises(ValueError, match="delta = 0"):
        gaussian_fit_epsilon(np.zeros(3), np.zeros(3), 0.0)
