"""Input validation shared by every public function.

Each checker raises ``ValueError`` whose message names the argument, the value it got and
the allowed range, e.g. ``noise_multiplier = -1.0 is out of range: must be in (0, inf)``.
They return the value converted to the checked type so callers can write
``z = check_positive("noise_multiplier", z)``.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Iterable

import numpy as np

#: The largest step count (or other count) accepted: the int64 maximum, 2^63 - 1 (about 9.2e18).
#: Accountants keep counts in numpy arrays and floats; far beyond any run that can happen.
MAX_COUNT = 2**63 - 1


def _show(value: object) -> str:
    """``repr(value)``, shortened for integers too long to read in a one-line message."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and abs(value) > 10**30:
        # str() of a huge int is slow and refused beyond 4300 digits: count digits by bit length
        size = abs(int(value))
        digits = int((size.bit_length() - 1) * math.log10(2.0))  # 10^digits <= size, or nearly
        if digits < 100_000:  # exact: the count of 10^k <= size
            digits += (size >= 10**digits) + (size >= 10 ** (digits + 1))
            return f"{'-' if value < 0 else ''}<a {digits}-digit integer>"
        return f"{'-' if value < 0 else ''}<an integer of about {digits + 1} digits>"
    return repr(value)


def _fail(name: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"{name} = {_show(value)} is out of range: must be {allowed}")


def check_real(name: str, value: object) -> float:
    """A finite real number (bools, strings, NaN and infinities are refused)."""
    if type(value) is float and math.isfinite(value):  # the common case, checked in hot loops
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} = {_show(value)} is not a real number")
    try:
        value = float(value)
    except OverflowError:  # an int beyond the float range (about 1.8e308)
        raise _fail(name, value, "finite (within the float range, about 1.8e308)") from None
    if math.isnan(value):
        raise _fail(name, value, "a number, not NaN")
    if math.isinf(value):
        raise _fail(name, value, "finite")
    return value


def check_range(
    name: str,
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A finite real number in the interval given by ``low``, ``high`` and openness flags."""
    if type(value) is float and math.isfinite(value):  # the common case, checked in hot loops
        x = value
    else:
        if (
            isinstance(value, numbers.Real)
            and not isinstance(value, numbers.Integral)  # ints are never NaN (nor too big)
            and math.isnan(value)
        ):
            raise _fail(name, float(value),
                        _interval(low, high, low_open, high_open) + ", not NaN")
        x = check_real(name, value)
    too_low = x <= low if low_open else x < low
    too_high = x >= high if high_open else x > high
    if too_low or too_high:
        raise _fail(name, x, _interval(low, high, low_open, high_open))
    return x


def _interval(low: float, high: float, low_open: bool, high_open: bool) -> str:
    return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"


def check_positive(name: str, value: object) -> float:
    """A finite real number > 0."""
    return check_range(name, value, 0.0, math.inf, low_open=True, high_open=True)


def check_nonnegative(name: str, value: object) -> float:
    """A finite real number >= 0."""
    return check_range(name, value, 0.0, math.inf, high_open=True)


def check_epsilon(name: str, value: object) -> float:
    """An epsilon: finite and >= 0."""
    return check_nonnegative(name, value)


def check_delta(name: str, value: object) -> float:
    """A delta: strictly inside (0, 1)."""
    return check_range(name, value, 0.0, 1.0, low_open=True, high_open=True)


def check_rate(name: str, value: object) -> float:
    """A sampling rate or probability in (0, 1], at least the smallest normal float (a
    subnormal rate has lost its precision: accountants would be slow or meaningless)."""
    rate = check_range(name, value, 0.0, 1.0, low_open=True)
    if rate < sys.float_info.min:
        raise ValueError(f"{name} = {_show(value)} is out of range: must be >= "
                         f"{sys.float_info.min!r} (the smallest normal float) and <= 1")
    return rate


def check_probability(name: str, value: object) -> float:
    """A probability in [0, 1]."""
    return check_range(name, value, 0.0, 1.0)


def check_int(name: str, value: object, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer >= ``minimum`` and, if given, <= ``maximum`` (floats with an integral value
    such as 3.0 are accepted). Step counts use ``maximum=MAX_COUNT`` (2^63 - 1)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} = {value!r} is not an integer")
    if (
        isinstance(value, numbers.Integral)
        or isinstance(value, numbers.Real)
        and math.isfinite(value)
        and float(value).is_integer()
    ):
        result = int(value)
    else:
        raise ValueError(
            f"{name} = {_show(value)} is not an integer: must be an integer >= {minimum}"
        )
    if result < minimum:
        raise _fail(name, result, f"an integer >= {minimum}")
    if maximum is not None and result > maximum:
        limit = "2^63 - 1 = 9223372036854775807" if maximum == MAX_COUNT else str(maximum)
        raise _fail(name, result, f"an integer in [{minimum}, {limit}]")
    return result


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """One of a fixed set of strings."""
    options = list(choices)
    if value not in options:
        raise ValueError(f"{name} = {value!r} is not allowed: must be one of {', '.join(options)}")
    return str(value)


def check_orders(name: str, orders: object) -> np.ndarray:
    """A non-empty 1-D array of finite Renyi orders, each > 1, returned sorted and unique."""
    try:
        array = np.asarray(orders, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} = {orders!r} is not a list of numbers") from error
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} = {orders!r} must be a non-empty list of orders > 1")
    bad = array[~np.isfinite(array) | (array <= 1.0)]
    if bad.size:
        raise _fail(name, float(bad[0]), "a list of finite orders, each in (1, inf)")
    return np.unique(array)


def check_range_array(
    name: str,
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> tuple[np.ndarray, bool]:
    """Validate a scalar or array argument elementwise; return ``(float array, was_scalar)``.

    Errors are the ``ValueError`` of :func:`check_range` for the first bad
    element (naming the argument, the value and the allowed range).
    """
    bounds = {"low": low, "high": high, "low_open": low_open, "high_open": high_open}
    if isinstance(value, numbers.Real) or (isinstance(value, np.ndarray) and value.ndim == 0):
        scalar = value.item() if isinstance(value, np.ndarray) else value
        return np.asarray(check_range(name, scalar, **bounds), dtype=float), True
    if isinstance(value, (str, bytes, bool)):
        check_range(name, value, **bounds)  # raises: not a real number
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} = {value!r} is not a real number or an array of them") from error
    if array.ndim == 0:
        return np.asarray(check_range(name, float(array), **bounds), dtype=float), True
    too_low = array <= low if low_open else array < low
    too_high = array >= high if high_open else array > high
    bad = ~np.isfinite(array) | too_low | too_high
    if np.any(bad):
        check_range(name, float(array[bad][0]), **bounds)  # raises with the standard message
    return array, False


def as_scalar_or_array(array: np.ndarray, scalar: bool) -> float | np.ndarray:
    """Undo :func:`check_range_array`'s promotion: a float for scalar input, else the array."""
    return float(array) if scalar else array
