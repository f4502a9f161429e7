"""RDP of one step without subsampling: the Gaussian and the Laplace mechanism.

Gaussian: ``alpha s^2 / (2 z^2)`` (Mironov 2017, Prop. 7); Laplace with scale b over the L1
sensitivity: ``(1/(a-1)) log(a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b})`` (Mironov 2017,
Prop. 6). Both take any order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privfl._validation import check_positive
from privfl.accounting.rdp.orders import orders_array


def _log_expm1_minus_x(x: float) -> float:
    """``log(expm1(x) - x)`` (the argument is positive for every ``x != 0``)."""
    if x == 0.0:
        return -math.inf
    if math.isinf(x):
        return x if x > 0 else math.inf  # expm1(-inf) - (-inf) = inf
    if abs(x) < 1e-150:  # x^2/2 would underflow: log(x^2/2) directly (relative error O(x))
        return 2.0 * math.log(abs(x)) - math.log(2.0)
    if abs(x) < 0.5:
        total, term, k = 0.0, x * x / 2.0, 2
        while True:  # sum_{k>=2} x^k / k!  (relative to x^2, converges fast for |x| < 1/2)
            total += term
            k += 1
            term *= x / k
            if abs(term) < 1e-18 * abs(total):
                return math.log(total)
    if x > 0:
        return x + math.log1p(-(1.0 + x) * math.exp(-x))
    return math.log(math.expm1(x) - x)


def rdp_gaussian(
    orders: Sequence[float] | np.ndarray, noise_multiplier: float, sensitivity: float = 1.0
) -> np.ndarray:
    """RDP of the Gaussian mechanism: ``alpha * s^2 / (2 z^2)`` (Mironov 2017, Prop. 7).

    ``noise_multiplier`` z is noise std / C and ``sensitivity`` s the L2 sensitivity in units
    of C (1 for add/remove, 2 for replace-one under the library's conventions).
    """
    alphas = orders_array(orders)
    z = check_positive("noise_multiplier", noise_multiplier)
    s = check_positive("sensitivity", sensitivity)
    with np.errstate(over="ignore", divide="ignore"):  # inf beyond the float range
        return alphas * s * s / (2.0 * z * z)


def rdp_laplace(orders: Sequence[float] | np.ndarray, scale: float) -> np.ndarray:
    """RDP of the Laplace mechanism with scale b relative to L1 sensitivity 1 (Mironov 2017,
    Prop. 6): ``(1/(a-1)) log( a/(2a-1) e^{(a-1)/b} + (a-1)/(2a-1) e^{-a/b} )``.

    Evaluated as ``log1p(N / (2a - 1)) / (a - 1)`` with
    ``N = a g((a-1)/b) + (a-1) g(-a/b)``, ``g(x) = expm1(x) - x >= 0``: no cancellation, so
    the result keeps full relative accuracy even for very large b.
    """
    alphas = orders_array(orders)
    b = check_positive("scale", scale)
    out = np.empty(alphas.shape)
    for n, a in enumerate(alphas):
        with np.errstate(over="ignore"):  # (a - 1)/b = inf for the tiniest b: rdp is inf
            log_n = np.logaddexp(
                math.log(a) + _log_expm1_minus_x((a - 1.0) / b),
                math.log(a - 1.0) + _log_expm1_minus_x(-a / b),
            )
        out[n] = float(np.logaddexp(0.0, log_n - math.log(2.0 * a - 1.0))) / (a - 1.0)
    return out
