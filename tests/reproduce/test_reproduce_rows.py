"""The row of a reproduction table: verdicts from the numbers, printed tolerances, the JSON form."""

from __future__ import annotations

import math

import pytest

from privfl.reproduce.rows import (
    BASES,
    DIFFERS,
    HEADER,
    MATCH,
    Reproduction,
    basis_summary,
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
    assert same.verdict == MATCH and cells(same)[6] == "same"
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
    rep.add(compare("epsilon", "Table 1, read as mu-GDP", 13.9, 13.2, tolerance=None,
                    basis="derived", reason="derived from the printed mu = 2.71"))
    payload = rep.to_dict()
    assert payload["counts"] == {"match": 2, "differs": 1}
    assert payload["counts_by_basis"] == {
        "printed": {"match": 2, "differs": 0}, "derived": {"match": 0, "differs": 1},
        "check": {"match": 0, "differs": 0}, "extension": {"match": 0, "differs": 0}}
    assert payload["reproduced"] == 2
    for row in payload["rows"]:
        assert list(row) == ["quantity", "source", "basis", "paper", "privfl", "rel_diff",
                             "tolerance", "verdict", "reason"]
    assert [row["basis"] for row in payload["rows"]] == ["printed", "printed", "derived"]
    assert payload["rows"][1]["paper"] == [0.005, 0.75]


def test_basis_is_validated_and_a_derived_row_says_from_what():
    with pytest.raises(ValueError, match=r"basis = 'computed' is not allowed: must be one of "
                                         r"printed, derived, check, extension"):
        compare("mu", "Table 1", "2.71", 2.71, basis="computed")
    with pytest.raises(ValueError, match="a derived row must say from which printed number"):
        compare("epsilon", "Table 1", 13.9, 13.9, tolerance=1e-6, basis="derived")
    assert compare("mu", "Table 1", "2.71", 2.71).basis == "printed"  # the default


@pytest.mark.parametrize("basis", BASES)
def test_only_printed_matches_count_as_reproduced(basis):
    rep = Reproduction("p", "title", "quick")
    rep.add(compare("x", "Eq. 1", 1.0, 1.0, tolerance=1e-9, basis=basis, reason="why"))
    rep.add(compare("y", "Eq. 2", 1.0, 2.0, tolerance=1e-9, basis=basis, reason="why"))
    assert rep.counts_by_basis()[basis] == {"match": 1, "differs": 1}
    assert sum(sum(c.values()) for c in rep.counts_by_basis().values()) == 2
    assert rep.reproduced() == (1 if basis == "printed" else 0)
    line = basis_summary(rep.counts_by_basis())
    assert f"{basis} 2 (1 match)" in line
    assert line.endswith(f"reproduced (printed and matching): {rep.reproduced()}")


@pytest.mark.parametrize(("basis", "marked"), [("printed", False), ("check", False),
                                               ("derived", True), ("extension", True)])
def test_a_paper_cell_holding_privfls_value_is_marked(basis, marked):
    row = compare("x", "Eq. 1", 13.8772, 13.8772, tolerance=1e-9, basis=basis, reason="why")
    cell = dict(zip(HEADER, cells(row), strict=True))
    assert cell["basis"] == basis
    assert cell["paper"] == ("13.8772 (privfl's)" if marked else "13.8772")
