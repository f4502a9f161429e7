"""One call from (C, participation) to labelled numbers: agrees with the tree accountant, says
when the sensitivity is only a bound, calibrates on the safe side."""

from __future__ import annotations

import numpy as np
import pytest

from privfl.accounting.correlated_noise import tree_aggregation_results
from privfl.mechanisms.correlated_privacy import calibrate_factorization, factorization_privacy
from privfl.mechanisms.sensitivity import Participation
from privfl.mechanisms.tree import tree_encoder


def test_tree_encoder_gives_the_tree_accountant() -> None:
    found, results = factorization_privacy(tree_encoder(100), Participation.single(100), 2.0, 1e-6)
    assert found.exact and found.value == pytest.approx(7**0.5)
    for ours, tree in zip(results, tree_aggregation_results(100, 2.0, 1e-6), strict=True):
        assert ours.epsilon == pytest.approx(tree.epsilon, rel=1e-12)
        assert "sensitivity exact" in ours.sampling and ours.unit == "client"


def test_bound_is_labelled_and_not_below_exact() -> None:
    c = np.random.default_rng(0).normal(size=(9, 9))
    found, results = factorization_privacy(c, Participation(9, 3, 2), 3.0, 1e-5, methods=("gdp",))
    assert not found.exact and "sensitivity upper bound" in results[0].sampling


def test_calibration_round_trip() -> None:
    c = np.tril(np.ones((16, 16))) / 4.0
    z, found, results = calibrate_factorization(c, Participation.cyclic(16, 4), 1.5, 1e-5)
    gdp = results[0]
    assert found.exact and gdp.epsilon <= 1.5 and gdp.epsilon == pytest.approx(1.5, rel=1e-9)
    assert gdp.extras["noise_multiplier"] == z
