"""The smallest safe epsilon for a target delta: one solver, one set of limits, every accountant.

Every accountant whose delta(epsilon) has no closed-form inverse (the Gaussian-DP curve, a
general trade-off function, random participation, last-iterate contraction) calls
:func:`smallest_safe_epsilon` with its ``log delta(epsilon)``, which must be non-increasing in
epsilon. The answer is

* ``0.0`` when ``delta(0) <= delta``;
* else the root of ``log delta(epsilon) = log delta`` found by Brent's method (Brent 1973) on a
  bracket ``[low, high]`` built by doubling ``high`` from ``start`` (1 unless the accountant
  knows a better first guess), to within ``XTOL + RTOL * epsilon``,
  then moved up (steps doubling from that tolerance, never past ``high``) until
  ``exp(log delta(epsilon)) <= delta (1 - SAFE_MARGIN)`` holds as a float: the returned epsilon
  is always on the safe side of the target, on the scale the caller sees, also where the
  caller's own delta(epsilon) (computed directly, not through the log) differs from
  ``exp(log delta)`` in the last units (a 3e-16 relative difference was seen at mu = 31.6);
* ``inf`` when even ``EPSILON_MAX``, the largest float (~1.8e308), does not reach the target:
  ``inf`` means "beyond the float range", in every module, as for the closed-form RDP and GDP
  conversions, which overflow to ``inf`` at the same size. (A huge finite epsilon says nothing
  about privacy, but it is still the truth, and a cap below the float range would turn the same
  guarantee into a number in one module and into ``inf`` in another.)

``-inf`` values of ``log delta`` (delta = 0 exactly) are clipped to -1e300 for the root finder.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable

from scipy import optimize

__all__ = ["EPSILON_MAX", "RTOL", "SAFE_MARGIN", "XTOL", "smallest_safe_epsilon"]

#: Largest finite epsilon any accountant reports (the largest float); beyond it, ``inf``.
EPSILON_MAX = sys.float_info.max
#: Absolute and relative tolerance of the root (scipy's brentq allows rtol >= 4 * 2^-52).
XTOL = 1e-15
RTOL = 1e-15
#: Relative margin below the target delta that the returned epsilon keeps (a few float units:
#: two computations of one delta(epsilon), in log space and directly, differ that much).
SAFE_MARGIN = 16 * sys.float_info.epsilon
_MAX_ITER = 500
_SAFE_STEPS = 80


def smallest_safe_epsilon(
    log_delta: Callable[[float], float], delta: float, *, start: float = 1.0
) -> float:
    """Smallest epsilon in ``[0, EPSILON_MAX]`` with ``exp(log_delta(epsilon)) <= delta``, found
    to ``XTOL + RTOL * epsilon`` and rounded up to the safe side; ``inf`` if none (see module
    docstring). ``log_delta`` must be non-increasing; ``delta`` in (0, 1] and ``start`` > 0 (the
    first upper end of the bracket) are not validated here: the accountants validate their
    public arguments."""
    if math.exp(log_delta(0.0)) <= delta * (1.0 - SAFE_MARGIN):
        return 0.0
    target = math.log(delta)
    low, high = 0.0, min(max(start, XTOL), EPSILON_MAX)
    while log_delta(high) > target:
        if high >= EPSILON_MAX:
            return math.inf
        low, high = high, min(2.0 * high, EPSILON_MAX)

    def gap(eps: float) -> float:
        return max(log_delta(eps), -1e300) - target

    root = float(optimize.brentq(gap, low, high, xtol=XTOL, rtol=RTOL, maxiter=_MAX_ITER))
    step = max(XTOL, RTOL * root)
    for _ in range(_SAFE_STEPS):
        if math.exp(log_delta(root)) <= delta * (1.0 - SAFE_MARGIN):
            return root
        root = min(high, root + step)
        step *= 2.0
    return high
