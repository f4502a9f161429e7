"""The worst instance of a family of adversarial pairs (privfl.accounting.audit.search): the
maximiser against a closed form, the grid and Brent's stage, and input checks."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from privfl.accounting.audit.pairs import gaussian_pair
from privfl.accounting.audit.search import maximise_delta


def _gaussian_delta(mu: float, epsilon: float) -> float:
    """Balle and Wang 2018: delta(epsilon) of N(mu, 1) against N(0, 1)."""
    return norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * norm.cdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize("peak", [0.3, 0.55, 0.91])
def test_an_interior_maximum_is_found_to_xatol_with_the_closed_form_delta(peak):
    def family(a: float):  # sensitivity largest (1) at a = peak
        return gaussian_pair(sensitivity=1.0 - (a - peak) ** 2, std=1.0)

    worst = maximise_delta(family, 0.0, 1.0, 0.5, grid=11, xatol=1e-4)
    assert worst.parameter == pytest.approx(peak, abs=2e-3)
    assert worst.delta == pytest.approx(_gaussian_delta(1.0, 0.5), rel=1e-6)
    assert worst.grid_best()[1] <= worst.delta * (1 + 1e-12)
    xs = [x for x, _ in worst.evaluations]
    assert len(xs) > 11 and xs == sorted(xs) and xs[0] == 0.0 and xs[-1] == 1.0


def test_a_maximum_at_the_edge_is_the_edge():
    worst = maximise_delta(lambda a: gaussian_pair(sensitivity=a, std=1.0), 0.1, 2.0, 1.0,
                           grid=5)
    assert worst.parameter == pytest.approx(2.0, abs=1e-3)
    assert worst.delta == pytest.approx(_gaussian_delta(worst.parameter, 1.0), rel=1e-6)


def test_bad_input_names_the_argument():
    family = lambda a: gaussian_pair(sensitivity=1.0, std=1.0)  # noqa: E731
    with pytest.raises(ValueError, match=r"\[low, high\] = \[1.0, 1.0\]"):
        maximise_delta(family, 1.0, 1.0, 0.5)
    with pytest.raises(ValueError, match="grid"):
        maximise_delta(family, 0.0, 1.0, 0.5, grid=2)
    with pytest.raises(ValueError, match="epsilon"):
        maximise_delta(family, 0.0, 1.0, -0.5)
    with pytest.raises(ValueError, match="xatol"):
        maximise_delta(family, 0.0, 1.0, 0.5, xatol=0.0)
