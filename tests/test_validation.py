"""privfl._validation's range checks: the fast path for plain floats (hot accounting loops)
answers exactly as the general path does, for every value and interval."""

from __future__ import annotations

import math
import numbers

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfl._validation import check_range, check_real


def _reference_range(name, value, low, high, low_open, high_open):
    """The general path: numbers.Real, NaN, infinities, then the interval."""
    allowed = f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} is not a real number")
    if math.isnan(float(value)):
        raise ValueError(allowed + ", not NaN")
    x = float(value)
    if math.isinf(x):
        raise ValueError("finite")
    if (x <= low if low_open else x < low) or (x >= high if high_open else x > high):
        raise ValueError(allowed)
    return x


VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6),
                   st.floats(allow_nan=True).map(np.float64), st.booleans(), st.just("1.0"))


@given(VALUES, st.floats(-10, 10), st.floats(0, 10), st.booleans(), st.booleans())
def test_check_range_answers_as_the_general_path(value, low, width, low_open, high_open):
    high = low + width
    try:
        expected = _reference_range("x", value, low, high, low_open, high_open)
    except ValueError as error:
        with pytest.raises(ValueError) as raised:
            check_range("x", value, low, high, low_open=low_open, high_open=high_open)
        if "not NaN" in str(error) or "finite" in str(error):
            assert ("NaN" in str(raised.value)) == ("NaN" in str(error))
        return
    got = check_range("x", value, low, high, low_open=low_open, high_open=high_open)
    assert got == expected and type(got) is float


@pytest.mark.parametrize("value, text", [(math.nan, "not NaN"), (math.inf, "finite"),
                                         (-math.inf, "finite"), (True, "not a real number"),
                                         (2.5, "in [0, 1]")])
def test_the_messages_name_the_argument_and_the_range(value, text):
    with pytest.raises(ValueError, match="rate") as raised:
        check_range("rate", value, 0.0, 1.0)
    assert text in str(raised.value)
    if isinstance(value, float) and math.isfinite(value):
        assert check_real("rate", value) == value
