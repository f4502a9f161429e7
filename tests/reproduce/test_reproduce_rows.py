"""The row of a reproduction table: verdicts from the numbers, printed tolerances, the JSON form."""

from __future__ import annotations

import math

import pytest

from privfl.reproduce.rows import (
    DIFFERS,
    MATCH,
    Reproduction,
    cells,
    compare,
    format_value,
    printed_tolerance,
    rel_diff,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("2.71", 0.005 / 2.71), ("6.9269", 0.00005 / 6.9269), ("15.0", 0.05 / 15.0),
    ("1e-6", 0.5e-6 / 1e-6), ("90.03", 0.005 / 90.03), ("22.4", 0.05 / 22.4)])
def test_printed_tolerance_is_half_a_unit_of_the_last_digit(text, expected):
    assert printed_tolerance(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("text", ["0", "nan", "inf"])
def test_printed_tolerance_refuses_what_has_no_precision(text):
    with pytest.raises(ValueError, match="printed tolerance"):
        printed_tolerance(text)


def test_a_number_matches_within_the_printed_precision_and_no_further():
    row = compare("mu", "Table 1", "2.71", 2.7110)
    assert row.verdict == MATCH and row.paper == 2.71 and row.paper_text == "2.71"
    assert row.rel_diff == pytest.approx(0.001 / 2.71)
    assert row.within_tolerance()
    drifted = compare("mu", "Table 1", "2.71", 2.7151, reason="drifted")
    assert drifted.verdict == DIFFERS and not drifted.within_tolerance()
    assert compare("x", "s", "2.71", 2.715).verdict == MATCH  # the edge is included


def test_a_difference_must_be_explained():
    with pytest.raises(ValueError, match="no reason"):
        compare("mu", "Table 1", "2.71", 3.0)
    with pytest.raises(ValueError, match="no reason"):
        compare("accuracy", "Table 1", "90.03", 90.03, tolerance=None)  # cannot match


def test_no_tolerance_means_the_row_cannot_match():
    row = compare("accuracy", "Table 1", "90.03", 90.03, tolerance=None, reason="other data")
    assert row.verdict == DIFFERS and row.rel_diff == 0.0 and row.tolerance is None


def test_intervals_and_texts():
    inside = compare("TV", "Lemma 6.7", (0.005, 0.75), 0.1367)
    assert inside.verdict == MATCH and inside.rel_diff is None and inside.tolerance is None
    outside = compare("TV", "Lemma 6.7", (0.005, 0.75), 0.9, reason="outside")
    assert outside.verdict == DIFFERS
    same = compare("order", "Figure 1", "personalised > global", "personalised > global")
    assert same.verdict == MATCH and cells(same)[5] == "same"
    other = compare("order", "Figure 1", "a > b", "b > a", reason="reversed")
    assert other.verdict == DIFFERS
    missing = compare("sigma", "Section 6.2", "0.646", None, tolerance=None, reason="none")
    assert missing.verdict == DIFFERS and missing.rel_diff is None


def test_rel_diff_and_formatting():
    assert rel_diff(2.0, 3.0) == 0.5 and rel_diff(-2.0, -3.0) == -0.5
    assert rel_diff(0.0, 1.0) is None and rel_diff(1.0, None) is None
    assert rel_diff(1.0, math.nan) is None
    assert format_value(None) == "-" and format_value((0.005, 0.75)) == "[0.005, 0.75]"
    assert format_value(2.711029845, "2.71") == "2.71" and format_value(2.711029845) == "2.71103"


def test_the_json_row_has_the_documented_keys():
    rep = Reproduction("p", "title", "quick")
    rep.add(compare("mu", "Table 1", "2.71", 2.711))
    rep.add([compare("TV", "Lemma 6.7", (0.005, 0.75), 0.1)])
    payload = rep.to_dict()
    assert payload["counts"] == {"match": 2, "differs": 0}
    for row in payload["rows"]:
        assert list(row) == ["quantity", "source", "paper", "privfl", "rel_diff", "tolerance",
                             "verdict", "reason"]
    assert payload["rows"][1]["paper"] == [0.005, 0.75]
