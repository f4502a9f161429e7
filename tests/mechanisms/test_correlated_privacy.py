"""One call from (C, participation) to labelled numbers: agrees with the tree accountant, says
when the sensitivity is only a bound, calibrates on the safe side."""

from __future__ import annotations

import numpy as np
import pytest

from privfl.accounting.correlated.accountant import tree_aggregation_results
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


# ------------------------------------------------ BandMF's overlap guard (issue 34, item 9(b))
@pytest.mark.parametrize(("steps", "separation", "k"), [(9, 3, 3), (12, 4, 3), (10, 2, 3)])
def test_banded_release_overlap_guard_at_both_boundaries(steps, separation, k) -> None:
    """band == separation: a client's columns never share a row, m sqrt(k) is the exact
    sensitivity of a banded C with column norms m; band == separation + 1: they overlap, the
    true sensitivity is larger (1.915 for (9, 3, 3), not sqrt(3) = 1.732), and it is refused."""
    from privfl.mechanisms.correlated_privacy import banded_release
    from privfl.mechanisms.factorization import toeplitz_lower
    from privfl.mechanisms.sensitivity import sensitivity
    from privfl.mechanisms.toeplitz import optimise_toeplitz

    participation = Participation(steps, k, separation, "any")
    m = 1.5
    for band in (separation, separation + 1):
        c = m * toeplitz_lower(optimise_toeplitz(steps, band), steps)
        assert np.linalg.norm(c, axis=0).max() == pytest.approx(m, rel=1e-12)
        true = sensitivity(c, participation)
        assert true.exact
        if band == separation:
            event = banded_release(participation, band, 2.0, max_column_norm=m)
            assert event.sensitivity == pytest.approx(m * k**0.5, rel=1e-15)
            assert true.value == pytest.approx(event.sensitivity, rel=1e-12)
        else:
            assert true.value > 1.05 * m * k**0.5  # what m sqrt(k) would understate
            if (steps, separation) == (9, 3):
                assert true.value == pytest.approx(m * 1.9146513, rel=1e-6)
            with pytest.raises(ValueError, match=f"min_separation = {separation} is below band "
                               f"= {band}: the columns overlap"):
                banded_release(participation, band, 2.0, max_column_norm=m)
