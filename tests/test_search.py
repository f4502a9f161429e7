"""privfl._search.first_round_where against a linear scan, and its input checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfl._search import first_round_where


@given(after=st.integers(-50, 50), span=st.integers(1, 200), turn=st.integers(-60, 300))
def test_equals_a_linear_scan(after, span, turn):
    upto = after + span
    asked = []

    def holds(r):
        asked.append(r)
        return r >= turn

    expected = next((r for r in range(after + 1, upto) if r >= turn), upto)
    if turn <= after:  # not a valid question (true at `after`): any answer in range is allowed
        assert after < first_round_where(after, upto, holds) <= upto
        return
    assert first_round_where(after, upto, holds) == expected
    assert all(after < r < upto for r in asked)  # never asks the ends
    assert len(asked) <= span.bit_length()


@pytest.mark.parametrize(("after", "upto", "match"), [
    (3, 3, "upto = 3 is out of range: must be > after = 3"),
    (5, 2, "upto = 2 is out of range"),
    (1.5, 4, "after = 1.5 is not allowed"),
    (0, True, "upto = True is not allowed"),
])
def test_bad_ranges_are_refused(after, upto, match):
    with pytest.raises(ValueError, match=match):
        first_round_where(after, upto, lambda r: True)
