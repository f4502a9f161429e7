"""Log-space arithmetic shared by every accountant: one implementation of each helper.

Each function takes a Python/numpy scalar (and returns a ``float``, for hot scalar loops) or an
array (and returns an array of the same shape). Conventions:

* :func:`log1mexp` ``(x) = log(1 - e^x)`` for ``x <= 0``. Computed as ``log(-expm1(x))`` for
  ``x > -log 2`` and ``log1p(-exp(x))`` otherwise: the switch point of Maechler 2012 ("Accurately
  computing log(1 - exp(-|a|))", Rmpfr vignette), where both forms keep full relative accuracy
  (``expm1`` is accurate near 0, ``log1p`` wherever ``e^x <= 1/2``). ``x >= 0`` gives ``-inf``:
  the callers pass differences ``b - a`` of log values with ``b <= a`` that may round to 0 or a
  hair above it, whose true value ``1 - e^x`` is 0.
* :func:`log_expm1` ``(x) = log(e^x - 1) = x + log1mexp(-x)`` for ``x >= 0`` (``-inf`` at 0,
  ``inf`` at inf): no overflow for large ``x`` (``e^x`` is never formed) and full accuracy for
  tiny ``x`` (``-expm1(-x)`` is accurate there). ``x <= 0`` gives ``-inf``.
* :func:`logsubexp` ``(a, b) = log(e^a - e^b) = a + log1mexp(b - a)`` for ``a >= b``.
* :func:`logsumexp` ``(values, axis=None) = log sum e^values`` with the maximum factored out
  (plain numpy, much cheaper than :func:`scipy.special.logsumexp` on the short vectors of the
  accountants' inner loops); an empty input or all ``-inf`` gives ``-inf``, any ``+inf`` gives
  ``+inf``.

Accuracy (tested against mpmath at 50 digits, ``tests/accounting/test_logspace.py``): a few
units in the last place relative to ``max(1, |result|)``; the absolute error near the zero of
``log_expm1`` (``x = log 2``) is the condition number of the function times the rounding of
``x``, which no float implementation avoids.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["LOG_2", "log1mexp", "log_expm1", "logsubexp", "logsumexp"]

#: log 2: the switch point of :func:`log1mexp` (Maechler 2012)
LOG_2 = math.log(2.0)


def _is_scalar(x: Any) -> bool:
    return isinstance(x, (float, int)) and not isinstance(x, bool)


def log1mexp(x: Any) -> Any:
    """``log(1 - e^x)`` for ``x <= 0`` (``-inf`` for ``x >= 0``), see the module docstring."""
    if _is_scalar(x):
        x = float(x)
        if x >= 0.0:
            return -math.inf
        return math.log(-math.expm1(x)) if x > -LOG_2 else math.log1p(-math.exp(x))
    arr = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        near = np.minimum(arr, 0.0)
        out = np.where(arr > -LOG_2, np.log(-np.expm1(near)), np.log1p(-np.exp(near)))
    return np.where(arr >= 0.0, -np.inf, out)


def log_expm1(x: Any) -> Any:
    """``log(e^x - 1)`` for ``x >= 0`` (``-inf`` for ``x <= 0``, ``inf`` at inf)."""
    if _is_scalar(x):
        x = float(x)
        if x <= 0.0:
            return -math.inf
        if x == math.inf:
            return math.inf
        return x + log1mexp(-x)
    arr = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        out = arr + log1mexp(-arr)
    out = np.where(arr <= 0.0, -np.inf, out)
    return np.where(arr == np.inf, np.inf, out)


def logsubexp(a: Any, b: Any) -> Any:
    """``log(e^a - e^b)`` for ``a >= b`` (``a`` when ``b = -inf``; ``-inf`` when ``a <= b``)."""
    if _is_scalar(a) and _is_scalar(b):
        if b == -math.inf:
            return float(a)
        return float(a) + log1mexp(float(b) - float(a))
    a_arr, b_arr = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
    with np.errstate(invalid="ignore"):
        out = a_arr + log1mexp(b_arr - a_arr)
    return np.where(np.isneginf(b_arr), a_arr, out)


def logsumexp(values: Any, axis: int | None = None) -> Any:
    """``log sum exp(values)`` over all entries (a float) or along ``axis`` (an array)."""
    arr = np.asarray(values, dtype=float)
    if axis is None:
        if arr.size == 0:
            return -math.inf
        top = float(arr.max())  # the methods: the same reductions without numpy's wrappers
        if not math.isfinite(top):
            return top
        return top + math.log(float(np.exp(arr - top).sum()))
    top = np.max(arr, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.log(np.sum(np.exp(arr - safe), axis=axis, keepdims=True)) + safe
    total = np.where(np.isnan(top), np.nan, total)
    return np.squeeze(total, axis=axis)
