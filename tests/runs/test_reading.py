"""The headline in plain words (:mod:`privfl.runs.reading`): the numbers it quotes follow from
(epsilon, delta) alone, the scale is Ponomareva et al. 2023's, and bad inputs are refused."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.runs.reading import plain_reading, scale_tier


def _numbers(text: str) -> tuple[float, float]:
    caught = re.search(r"catches at most (?:almost )?([0-9.]+)%", text).group(1)
    sure = re.search(r"ends at most (?:almost )?([0-9.]+)% sure", text).group(1)
    return float(caught) / 100, float(sure) / 100


def test_the_readings_of_known_guarantees():
    text = plain_reading(1.0, 1e-6, "client")
    assert text.startswith("In plain words: for any one client (everything it holds)")
    assert "whether the client took part at all" in text and "this epsilon is strong." in text
    caught, sure = _numbers(text)
    assert caught == pytest.approx(0.028, abs=1e-12)  # e x 1 % + 1e-6 = 2.718 %, rounded up
    assert sure == pytest.approx(0.74, abs=1e-12)  # e / (1 + e) = 73.1 %, rounded up
    weak = plain_reading(12.52, 1e-5, "record")
    assert "catches at most 100% of those" in weak and "this epsilon is weak: formally" in weak
    assert "Whether a client took part is not hidden." in weak
    # a weak guarantee is not read as protection
    assert "cannot reliably tell" not in weak and "is not kept from telling" in weak
    assert "cannot reliably tell whether that client was used." in text


def test_the_scale_has_three_tiers():
    assert [scale_tier(e) for e in (0.0, 1.0, 1.01, 10.0, 10.5, math.inf)] == [
        "strong", "strong", "reasonable", "reasonable", "weak", "weak"]


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 50.0), st.floats(0.0, 50.0), st.floats(0.0, 1e-3))
def test_larger_epsilon_never_reads_as_more_private(a, b, delta):
    low, high = sorted((a, b))
    caught_low, sure_low = _numbers(plain_reading(low, delta, "record"))
    caught_high, sure_high = _numbers(plain_reading(high, delta, "record"))
    assert 0 <= caught_low <= caught_high <= 1 and 0.5 <= sure_low <= sure_high <= 1
    # the quoted percentages are rounded up: never below the bounds they show
    assert caught_low >= min(1.0, math.exp(low) * 0.01 + delta) - 1e-12
    assert sure_low >= 1 / (1 + math.exp(-low)) - 1e-12


def test_huge_and_infinite_epsilon_do_not_overflow():
    for eps in (700.0, 1e6, math.inf):
        text = plain_reading(eps, 1e-12, "record")
        assert "catches at most 100% of" in text


@pytest.mark.parametrize(("args", "message"), [
    ((float("nan"), 1e-5, "record"), r"epsilon = nan is out of range: must be >= 0"),
    ((-1.0, 1e-5, "record"), r"epsilon = -1.0 is out of range"),
    ((1.0, 1.0, "record"), r"delta = 1.0 is out of range: must be in \[0, 1\)"),
    ((1.0, 1e-5, "user"), r"unit = 'user' is not allowed"),
])
def test_bad_inputs_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        plain_reading(*args)
