"""The headline in plain words (:mod:`privfl.runs.reading`): every sentence follows from the
numbers beside it, over a grid of epsilon from 0.1 to infinity, for add/remove and replace-one;
the numbers it quotes are the tight (epsilon, delta) test region rounded up; bad inputs are
refused."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.runs.reading import attack_bound, plain_reading, scale_tier, verdict

GRID = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 2.3, 2.31, 2.5, 3.0, 3.85104, 3.9, 3.92, 4.5, 5.0,
        6.187, 8.0, 10.0, 10.5, 12.52, 20.0, 50.0, 700.0, 1e6, math.inf)


def _numbers(text: str) -> tuple[float, float, float]:
    """(TPR at 1 %, TPR at 0.1 %, posterior) as printed, as fractions."""
    one = re.search(r"accuses 1% of the .*? catches at most ([0-9.]+)% of those", text)
    tenth = re.search(r"accuses 0\.1% at most ([0-9.]+)% \(", text)
    sure = re.search(r"ends at most ([0-9.]+)% sure", text)
    return tuple(float(m.group(1)) / 100 for m in (one, tenth, sure))


def _tpr(epsilon: float, delta: float, fpr: float) -> float:
    """An independent form of the tight region: TPR <= 1 - f(FPR), with the trade-off
    function f(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a)) of (epsilon,
    delta)-DP (Dong, Roth and Su 2019, Proposition 2.5)."""
    if math.isinf(epsilon):
        return 1.0
    return 1.0 - max(0.0, 1.0 - delta - math.exp(epsilon) * fpr if epsilon < 700 else 0.0,
                     math.exp(-epsilon) * (1.0 - delta - fpr))


def _shown_up(shown: float, bound: float) -> bool:
    """Printed at three significant digits, rounded up: never below, at most one step above."""
    return bound - 1e-12 <= shown <= bound * 1.01 + 1e-12


@pytest.mark.parametrize("relation", ["add-remove", "replace-one"])
@pytest.mark.parametrize("unit", ["record", "client"])
@pytest.mark.parametrize("delta", [0.0, 1e-5, 1e-3])
def test_every_sentence_follows_from_its_numbers_over_the_grid(relation, unit, delta):
    for eps in GRID:
        text = plain_reading(eps, delta, unit, relation)
        one, tenth, sure = _numbers(text)
        tpr_one, tpr_tenth = _tpr(eps, delta, 0.01), _tpr(eps, delta, 0.001)
        posterior = 1.0 if eps > 700 else 1 / (1 + math.exp(-eps))
        assert _shown_up(one, tpr_one) and _shown_up(tenth, tpr_tenth), (eps, text)
        assert _shown_up(sure, posterior), (eps, text)
        # the verdict: "cannot reliably tell" only while nine in ten go undetected at 1 %
        # false accusations; "rule out little" from a test that may catch half at 1 %
        reliable = "cannot reliably tell" in text
        exposed = "(the bounds rule out little)" in text
        partial = "may be able to tell" in text
        assert reliable + exposed + partial == 1, text
        assert reliable == (tpr_one <= 0.10) and exposed == (tpr_one >= 0.50), (eps, one)
        if one > 0.10:
            assert not reliable
        # the scale: its tier, and where attacks are not ruled out, not read as protection
        tier = scale_tier(eps)
        assert f"this epsilon is {tier}" in text
        assert ("not a claim that attacks fail" in text) == (not reliable and tier != "weak")
        # what the relation hides
        if relation == "replace-one":
            assert "took part at all" not in text and "was used" not in text
            assert "which of two possible values" in text and ", not whether" in text
        else:
            assert "which of two" not in text and "was in the training data" in text
            assert ("This covers whether the client took part at all." in text) == (
                unit == "client")
        # delta as what (epsilon, delta)-DP says, never a chance of failing
        assert "may not hold" not in text and "times as likely in one world as in the " \
            "other, plus delta" in text


def test_the_readings_of_known_guarantees():
    # the main job: 3.85104 at 1e-5, record level, replace-one (PriFedSync's fixed batches)
    demo = plain_reading(3.85104, 1e-5, "record", "replace-one")
    # e^3.85104 x 1 % + 1e-5 = 47.05 %: three significant digits rounded up
    assert "catches at most 47.1% of those that had the second" in demo
    assert "0.1% at most 4.71% (" in demo and "ends at most 98% sure" in demo
    assert "may be able to tell which of two values that record had in some cases" in demo
    assert "not whether a record or a client took part" in demo
    # dp-fedavg's demo: 6.187 at 1e-5, client level, add/remove
    fedavg = plain_reading(6.187, 1e-5, "client", "add-remove")
    assert "is not kept from telling whether that client was used" in fedavg
    assert "catches at most 99.8% of those that were" in fedavg
    assert "this epsilon is reasonable, a name for what published models reach" in fedavg
    strong = plain_reading(1.0, 1e-6, "client", "add-remove")
    assert strong.startswith("In plain words: for any one client (everything it holds)")
    assert "cannot reliably tell whether that client was used" in strong
    assert "catches at most 2.72% of" in strong and "ends at most 73.2% sure" in strong
    assert "this epsilon is strong." in strong and "delta = 1e-06 is the extra" in strong


def test_the_thresholds_sit_where_the_docstring_says():
    # TPR at 1 % = 10 % at epsilon = ln(10) (delta 0); 50 % at ln(50)
    assert verdict(math.log(10) - 1e-9, 0.0) == "reliable"
    assert verdict(math.log(10) + 1e-6, 0.0) == "partial"
    assert verdict(math.log(50) - 1e-6, 0.0) == "partial"
    assert verdict(math.log(50) + 1e-9, 0.0) == "exposed"
    # the second branch of the region binds at large FPR: 1 - e^-1 (1 - 0 - 0.5) = 0.816
    assert attack_bound(1.0, 0.0, 0.5) == pytest.approx(1 - math.exp(-1) * 0.5, rel=1e-12)


def test_the_scale_has_three_tiers():
    assert [scale_tier(e) for e in (0.0, 1.0, 1.01, 10.0, 10.5, math.inf)] == [
        "strong", "strong", "reasonable", "reasonable", "weak", "weak"]


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 50.0), st.floats(0.0, 50.0), st.floats(0.0, 1e-3))
def test_larger_epsilon_never_reads_as_more_private(a, b, delta):
    low, high = sorted((a, b))
    numbers_low = _numbers(plain_reading(low, delta, "record", "add-remove"))
    numbers_high = _numbers(plain_reading(high, delta, "record", "add-remove"))
    assert all(0 <= x <= y <= 1 for x, y in zip(numbers_low, numbers_high, strict=True))
    assert _shown_up(numbers_low[0], _tpr(low, delta, 0.01))


@pytest.mark.parametrize(("args", "message"), [
    ((float("nan"), 1e-5, "record", "add-remove"), r"epsilon = nan is out of range: must be >= 0"),
    ((-1.0, 1e-5, "record", "add-remove"), r"epsilon = -1.0 is out of range"),
    ((1.0, 1.0, "record", "add-remove"), r"delta = 1.0 is out of range: must be in \[0, 1\)"),
    ((1.0, 1e-5, "user", "add-remove"), r"unit = 'user' is not allowed"),
    ((1.0, 1e-5, "record", "swap"), r"neighbouring = 'swap' is not allowed"),
])
def test_bad_inputs_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        plain_reading(*args)


def test_a_false_positive_rate_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match=r"false_positive_rate = 1.5 is out of range: must be "
                                         r"in \[0, 1\]"):
        attack_bound(1.0, 1e-5, 1.5)
