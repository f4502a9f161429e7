"""Generic RDP bound for fixed-size batches drawn without replacement (replace-one neighbours).

Wang, Balle & Kasiviswanathan 2019 (AISTATS), Theorem 9: an upper bound on the RDP of any base
mechanism run on a uniformly random subset of fixed size (:func:`rdp_without_replacement`).
Gaussian steps use the tighter Gaussian-specific Theorem 27 bound of
:mod:`privfl.accounting.rdp.without_replacement_gaussian`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from privfl._validation import check_nonnegative, check_rate
from privfl.accounting.logspace import logsumexp
from privfl.accounting.rdp.log_terms import log_abs_expm1, log_binom
from privfl.accounting.rdp.orders import check_subsampled_orders, orders_array


def rdp_without_replacement(
    orders: Sequence[float] | np.ndarray,
    sampling_rate: float,
    base_rdp: Callable[[float], float],
    *,
    base_rdp_inf: float = math.inf,
) -> np.ndarray:
    """Upper bound on the RDP of a mechanism run on a uniformly random fixed-size subset drawn
    without replacement (replace-one neighbours); Wang, Balle & Kasiviswanathan 2019
    (AISTATS, "Subsampled Renyi DP and analytical moments accountant"), Theorem 9.

    For integer ``alpha >= 2``, with ``g = sampling_rate`` (= m/n) and ``e(.) = base_rdp``::

        rdp'(alpha) <= 1/(alpha-1) log( 1 + g^2 C(alpha,2) min{4 (e^{e(2)} - 1),
                                                 e^{e(2)} min{2, (e^{e(inf)} - 1)^2}}
                        + sum_{j=3}^{alpha} g^j C(alpha,j) e^{(j-1) e(j)} min{2, (e^{e(inf)}-1)^j} )

    ``base_rdp_inf`` is ``e(inf)`` (infinite for the Gaussian, so each ``min{2, .}`` is 2).
    A fractional order uses the bound at ``ceil(alpha)`` (valid: Renyi divergence is
    non-decreasing in the order). ``g = 1`` returns ``base_rdp`` itself.

    Parameters
    ----------
    orders : 1-D sequence of orders > 1.
    sampling_rate : g in (0, 1].
    base_rdp : callable order -> RDP of the base mechanism under replace-one neighbours
        (for the Gaussian with multiplier z: ``lambda a: 2 * a / z**2``, sensitivity 2C).
    base_rdp_inf : the base mechanism's RDP at order infinity (>= 0, may be ``inf``).
    """
    alphas = orders_array(orders)
    g = check_rate("sampling_rate", sampling_rate)
    if not callable(base_rdp):
        raise ValueError(f"base_rdp = {base_rdp!r} is not allowed: must be a callable order -> RDP")
    if not (isinstance(base_rdp_inf, (int, float)) and base_rdp_inf == math.inf):
        base_rdp_inf = check_nonnegative("base_rdp_inf", base_rdp_inf)

    def base(order: float) -> float:
        value = base_rdp(order)
        try:
            value = float(value)
        except (TypeError, ValueError) as error:
            raise ValueError(f"base_rdp({order:g}) = {value!r} is not a number") from error
        if math.isnan(value) or value < 0:
            raise ValueError(
                f"base_rdp({order:g}) = {value!r} is out of range: must be in [0, inf]"
            )
        return value

    if g == 1.0:
        return np.array([base(float(a)) for a in alphas])
    check_subsampled_orders(alphas)
    top = int(math.ceil(float(alphas.max())))
    top = max(top, 2)
    base_values = {j: base(float(j)) for j in range(2, top + 1)}
    # log min{2, (e^{e(inf)} - 1)^j}
    if base_rdp_inf == math.inf:
        log_exp_inf_m1 = math.inf
    else:
        log_exp_inf_m1 = float(log_abs_expm1(np.array([base_rdp_inf]))[0])

    def log_cap(power: int) -> float:
        return min(math.log(2.0), power * log_exp_inf_m1)

    out = np.empty(alphas.shape)
    cache: dict[int, float] = {}
    for n, a in enumerate(alphas):
        order = max(int(math.ceil(a)), 2)
        if order not in cache:
            e2 = base_values[2]
            log_second = min(
                math.log(4.0) + float(log_abs_expm1(np.array([e2]))[0]),
                e2 + log_cap(2),
            )
            terms = [2 * math.log(g) + math.log(order * (order - 1) / 2.0) + log_second]
            if order >= 3:
                js = np.arange(3, order + 1, dtype=float)
                ej = np.array([base_values[int(j)] for j in js])
                caps = np.array([log_cap(int(j)) for j in js])
                terms.extend(js * math.log(g) + log_binom(float(order), js) + (js - 1) * ej + caps)
            log_sum = logsumexp(np.array(terms))
            cache[order] = float(np.logaddexp(0.0, log_sum)) / (order - 1.0)
        out[n] = cache[order]
    return out
