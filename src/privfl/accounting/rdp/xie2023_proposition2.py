"""Xie et al. 2023, Proposition 2 (InsDP-FedSGD) exactly as printed.

The paper's formula: the Wang-Balle-Kasiviswanathan 2019 Theorem 9 bound
(:func:`~privfl.accounting.rdp.without_replacement.rdp_without_replacement`) composed over the
rounds and converted by the improved conversion; kept to reproduce the paper, not as an
accountant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privfl._validation import check_delta, check_int, check_positive, check_rate
from privfl.accounting.rdp.conversion import epsilon_from_rdp
from privfl.accounting.rdp.orders import orders_array
from privfl.accounting.rdp.without_replacement import rdp_without_replacement


def xie2023_proposition2_epsilon(
    noise_multiplier: float,
    batch_rate: float,
    user_rate: float,
    cohort_size: int,
    rounds: int,
    delta: float,
    orders: Sequence[float] | np.ndarray | None = None,
) -> tuple[float, float]:
    """Epsilon of Xie et al. 2023, Proposition 2 (InsDP-FedSGD, Section 5.1.1) exactly as printed.

    ``eps = min_a  T rdp'(a) + log((a-1)/a) - (log delta + log a) / (a - 1)`` where ``rdp'`` is
    the Wang-Balle-Kasiviswanathan 2019 Theorem 9 bound (:func:`rdp_without_replacement`) at
    sampling rate ``p q`` with the base ``e(a) = a / (2 m sigma^2)`` (Gaussian RDP at multiplier
    ``sigma sqrt(m)``, sensitivity 1 as the paper prints it) and ``e(inf) = inf``; Xie et al.
    2023's sigma is the noise multiplier z (``noise_multiplier``). Orders are the integers
    2 ... 256 unless given (the bound is for integer orders).

    This reproduces the paper's formula, NOT its Figure 9: for sigma = 3, p = 0.4, q = 10/30,
    m = 10, T = 200 it gives 3.9697 at delta = 1e-4 (order 4), while the figure's 0.87 matches
    the Poisson sampled-Gaussian accountant. Returns ``(epsilon, optimal order)``.
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    p = check_rate("batch_rate", batch_rate)
    q = check_rate("user_rate", user_rate)
    m = check_int("cohort_size", cohort_size, minimum=1)
    t = check_int("rounds", rounds, minimum=0)
    delta = check_delta("delta", delta)
    alphas = np.arange(2.0, 257.0) if orders is None else orders_array(orders)
    z_mean = z * math.sqrt(m)  # the multiplier of the mean of the m noisy updates
    per_round = rdp_without_replacement(alphas, p * q, lambda a: a / (2.0 * z_mean * z_mean))
    return epsilon_from_rdp(alphas, t * per_round, delta, conversion="improved")
