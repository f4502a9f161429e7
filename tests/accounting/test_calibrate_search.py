"""privfl's one noise search (accounting/noise_search.py): safe side, limits, scan."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.accounting.noise_search import (
    NOISE_MAX,
    NOISE_MIN,
    RTOL,
    RTOL_CLOSED_FORM,
    NoiseOutOfRangeError,
    log_bisect,
    smallest_noise_search,
)


@settings(max_examples=60, deadline=None)
@given(root=st.floats(min_value=2e-6, max_value=5e5), fine=st.booleans())
def test_monotone_target_safe_side_within_rtol(root, fine):
    rtol = RTOL_CLOSED_FORM if fine else RTOL
    seen = []

    def meets(z):
        seen.append(z)
        return z >= root

    z = smallest_noise_search(meets, rtol=rtol)
    assert z >= root  # met when re-evaluated: never the end below the target
    assert z <= root * (1.0 + rtol) * (1.0 + 1e-15)
    assert min(seen) >= NOISE_MIN / 2.0 and max(seen) <= NOISE_MAX


def test_bracket_starts_at_one_and_walks_powers_of_two():
    seen = []

    def meets(z):
        seen.append(z)
        return z >= 5.3

    smallest_noise_search(meets, rtol=0.5)
    assert seen[:4] == [1.0, 2.0, 4.0, 8.0]


def test_out_of_range_says_which_side():
    with pytest.raises(NoiseOutOfRangeError) as below:
        smallest_noise_search(lambda z: True)
    assert below.value.side == "below" and "1e-06" in str(below.value)
    with pytest.raises(NoiseOutOfRangeError) as above:
        smallest_noise_search(lambda z: False)
    assert above.value.side == "above" and "1e+06" in str(above.value)
    assert isinstance(above.value, ValueError)
    # the limits are the same for every caller: a root just beyond NOISE_MAX is out of range
    with pytest.raises(NoiseOutOfRangeError):
        smallest_noise_search(lambda z: z >= 1.5 * NOISE_MAX)


def test_scan_takes_the_last_crossing_from_above():
    """A non-monotone target (met on (0.5, 2) and above 7, not met elsewhere): the answer is the
    smallest noise at which the target holds at every scanned noise above it, i.e. 7."""
    grid = np.geomspace(0.1, 100.0, 61)

    def meets(z):
        return 0.5 < z < 2.0 or z >= 7.0

    z = smallest_noise_search(meets, rtol=1e-10, scan=grid)
    assert z == pytest.approx(7.0, rel=1e-9) and z >= 7.0
    # without the scan the bracket from 1 stops in the first interval: the scan is needed
    assert smallest_noise_search(meets, rtol=1e-10) == pytest.approx(0.5, rel=1e-9)


def test_scan_doubles_past_the_grid_and_says_when_never_failing():
    grid = np.geomspace(0.1, 10.0, 11)
    z = smallest_noise_search(lambda z: z >= 300.0, rtol=1e-8, scan=grid)
    assert 300.0 <= z <= 300.0 * (1 + 1e-8)
    with pytest.raises(NoiseOutOfRangeError) as err:
        smallest_noise_search(lambda z: True, scan=grid)
    assert err.value.side == "below"
    with pytest.raises(NoiseOutOfRangeError) as err:
        smallest_noise_search(lambda z: z > 2 * NOISE_MAX, scan=grid)
    assert err.value.side == "above"


def test_log_bisect_either_order_and_halt():
    assert log_bisect(lambda z: z >= 3.0, 1.0, 4.0, 1e-9) == pytest.approx(3.0, rel=1e-8)
    assert log_bisect(lambda z: z <= 3.0, 4.0, 1.0, 1e-9) == pytest.approx(3.0, rel=1e-8)
    calls = []

    def meets(z):
        calls.append(z)
        return z >= 3.0

    # halted after two evaluations (2 and 2.83, both below 3): the good end is returned as is
    assert log_bisect(meets, 1.0, 4.0, 1e-9, halt=lambda: len(calls) >= 2) == 4.0
    assert calls == [2.0, math.sqrt(8.0)]
