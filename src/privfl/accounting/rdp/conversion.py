"""RDP curve -> (epsilon, delta): the classic and the improved conversion.

Composition adds RDP curves order by order (Mironov 2017, Prop. 1); :func:`epsilon_from_rdp` and
:func:`delta_from_rdp` turn the total curve into the best (epsilon, delta) over the orders, by
Mironov 2017, Prop. 3 (``"classic"``) or Balle et al. 2020 / Canonne-Kamath-Steinke 2020
(``"improved"``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privfl._validation import check_choice, check_delta, check_epsilon
from privfl.accounting.rdp.orders import orders_array

CONVERSIONS = ("improved", "classic")


def _curve(orders: object, rdp: object) -> tuple[np.ndarray, np.ndarray]:
    alphas = orders_array(orders)
    try:
        values = np.asarray(rdp, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"rdp = {rdp!r} is not a list of numbers") from error
    if values.shape != alphas.shape:
        raise ValueError(
            f"rdp has shape {values.shape} but orders has shape {alphas.shape}: they must match"
        )
    bad = values[np.isnan(values) | (values < 0)]
    if bad.size:
        raise ValueError(f"rdp = {float(bad[0])!r} is out of range: must be in [0, inf]")
    return alphas, values


def epsilon_from_rdp(
    orders: Sequence[float] | np.ndarray,
    rdp: Sequence[float] | np.ndarray,
    delta: float,
    conversion: str = "improved",
) -> tuple[float, float]:
    """Smallest epsilon over the orders such that the RDP curve implies (epsilon, delta)-DP.

    * ``"classic"`` (Mironov 2017, Prop. 3): ``eps = rdp(a) + log(1/delta) / (a - 1)``.
    * ``"improved"`` (Balle et al. 2020, arXiv:2001.05990; Canonne-Kamath-Steinke 2020,
      arXiv:2004.00010, Prop. 12):
      ``eps = rdp(a) + log((a-1)/a) - (log delta + log a) / (a - 1)``, clipped at 0; in addition
      ``eps = 0`` when ``delta^2 > 1 - exp(-rdp(a))``: ``D_1 = KL <= D_a`` and the
      Bretagnolle-Huber inequality give ``TV <= sqrt(1 - exp(-KL)) <= delta``, and TV is the
      delta at epsilon 0 (same rule as dp-accounting's ``compute_epsilon``).

    In both, ``rdp(a) = 0`` means the two output distributions are equal (``eps = 0``) and
    infinite values are skipped. Returns ``(epsilon, optimal order)``; ``(inf, nan)`` if every
    value is infinite.
    """
    alphas, values = _curve(orders, rdp)
    delta = check_delta("delta", delta)
    conversion = check_choice("conversion", conversion, CONVERSIONS)
    finite = np.isfinite(values)
    if not finite.any():
        return math.inf, math.nan
    a, r = (alphas, values) if finite.all() else (alphas[finite], values[finite])
    if conversion == "classic":
        eps = r - math.log(delta) / (a - 1.0)
    else:
        eps = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
        eps = np.where(delta * delta + np.expm1(-r) > 0, 0.0, eps)
        eps = np.maximum(eps, 0.0)
    eps = np.where(r == 0, 0.0, eps)
    best = int(np.argmin(eps))
    return float(eps[best]), float(a[best])


def delta_from_rdp(
    orders: Sequence[float] | np.ndarray,
    rdp: Sequence[float] | np.ndarray,
    epsilon: float,
    conversion: str = "improved",
) -> tuple[float, float]:
    """Smallest delta over the orders such that the RDP curve implies (epsilon, delta)-DP.

    * ``"classic"`` (Mironov 2017): ``delta = exp((a - 1)(rdp(a) - eps))``.
    * ``"improved"`` (Balle et al. 2020, arXiv:2001.05990):
      ``log delta = (a - 1)(rdp(a) - eps + log((a-1)/a)) - log a``, and also
      ``delta <= sqrt(1 - exp(-rdp(a)))`` (KL <= D_a with Bretagnolle-Huber, as above).

    ``rdp(a) = 0`` gives delta 0; infinite values are skipped; delta is capped at 1. Returns
    ``(delta, optimal order)``; ``(1.0, nan)`` if every value is infinite.
    """
    alphas, values = _curve(orders, rdp)
    epsilon = check_epsilon("epsilon", epsilon)
    conversion = check_choice("conversion", conversion, CONVERSIONS)
    finite = np.isfinite(values)
    if not finite.any():
        return 1.0, math.nan
    a, r = (alphas, values) if finite.all() else (alphas[finite], values[finite])
    if conversion == "classic":
        log_delta = (a - 1.0) * (r - epsilon)
    else:
        log_delta = (a - 1.0) * (r - epsilon + np.log1p(-1.0 / a)) - np.log(a)
        with np.errstate(divide="ignore"):
            log_kl = 0.5 * np.log(-np.expm1(-r))
        log_delta = np.minimum(log_delta, log_kl)
    log_delta = np.where(r == 0, -np.inf, log_delta)
    best = int(np.argmin(log_delta))
    return float(math.exp(min(log_delta[best], 0.0))), float(a[best])
