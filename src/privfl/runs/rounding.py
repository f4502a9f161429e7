"""The one way privfl prints a privacy number: an upper bound is never shown below itself.

Rounding to nearest prints epsilon = 4.28433 as ``4.284`` and 3.85104 as ``3.851``: a number
below the bound that was proven. :func:`format_bound` rounds epsilon, delta and mu *up* (towards
+inf) at a given number of significant digits (``4.28433 -> 4.285``, ``3.85104 -> 3.852``),
and a lower ``reference`` (:class:`~privfl.accounting.results.PrivacyResult`: the truth is at
least this) *down*, so that the printed number keeps the direction of the claim. Estimates are
rounded up too (one rule, and never less conservative). Every console line, card, report.md,
report.html, ``privfl compare`` table and :class:`~privfl.runs.result.ExperimentResult` text
that shows epsilon, delta or mu calls it.

The value rounded is the shortest decimal that reads back as the same float (Python's
``repr``), so a delta given as ``1e-5`` prints ``1e-05``, not ``1.00001e-05`` (the float
``1e-5`` is 8.2e-22 above 1e-5, far below any accountant's precision).
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

__all__ = ["format_bound", "round_bound"]


def round_bound(value: float, digits: int, *, kind: str = "bound") -> float:
    """``value`` rounded to ``digits`` significant digits, up (``bound``, ``estimate``) or down
    (``reference``): ``round_bound(3.85104, 4) == 3.852``; infinities and NaN unchanged."""
    if not isinstance(digits, int) or not 1 <= digits <= 15:
        raise ValueError(f"digits = {digits!r} is out of range: must be an integer in [1, 15]")
    if kind not in ("bound", "estimate", "reference"):
        raise ValueError(f"kind = {kind!r} is not allowed: must be one of bound, estimate, "
                         "reference")
    value = float(value)
    if not math.isfinite(value) or value == 0:
        return value
    exact = Decimal(repr(value))
    step = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return float(exact.quantize(step, rounding=ROUND_FLOOR if kind == "reference"
                                else ROUND_CEILING))


def format_bound(value: Any, digits: int = 6, *, kind: str = "bound") -> str:
    """epsilon, delta or mu as printed everywhere: :func:`round_bound` at ``digits``
    significant digits in ``g`` notation (``6.18701 -> "6.18701"``, ``4.28433`` at 4 digits
    ``-> "4.285"``), from 1e5 on in ``e`` notation with ``digits - 1`` decimals; ``inf``,
    ``nan``; anything that is not a number as ``str`` (e.g. an empty cell)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    rounded = round_bound(value, digits, kind=kind)
    if abs(rounded) >= 1e5:
        return f"{round_bound(value, digits - 1 or 1, kind=kind):.{max(digits - 2, 0)}e}"
    return f"{rounded:.{digits}g}"
