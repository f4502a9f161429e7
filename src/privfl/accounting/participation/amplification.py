"""Random participation (Hasircioglu and Gunduz 2022): the amplification maps
``eps -> log(1 + g (e^eps - 1))`` and their inverse (the paper's Theorem 2.5, Balle et al. 2018),
and the paper's derived constants at an epsilon (Theorem 4.1: eps', alpha', beta, cbar1, cbar2,
k, c, kappa)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from privfl._validation import check_epsilon, check_rate
from privfl.accounting.logspace import log1mexp


def amplify_epsilon(epsilon: float, rate: float) -> float:
    """``log(1 + rate (e^epsilon - 1))``: the epsilon of a base-epsilon step sampled at ``rate``."""
    eps = check_epsilon("epsilon", epsilon)
    g = check_rate("rate", rate)
    return _amp(eps, g)


def deamplify_epsilon(epsilon: float, rate: float) -> float:
    """``log(1 + (e^epsilon - 1) / rate)``: the base epsilon behind a sampled epsilon."""
    eps = check_epsilon("epsilon", epsilon)
    g = check_rate("rate", rate)
    return _deamp(eps, g)


def _amp(eps: float, g: float) -> float:
    if eps == 0.0 or g == 1.0:
        return eps
    if eps < 1.0:
        return math.log1p(g * math.expm1(eps))
    return eps + math.log(g + (1.0 - g) * math.exp(-eps))


def _deamp(eps: float, g: float) -> float:
    if eps == 0.0 or g == 1.0:
        return eps
    if eps < 1.0:
        return math.log1p(math.expm1(eps) / g)
    return eps + math.log1p(-(1.0 - g) * math.exp(-eps)) - math.log(g)


@dataclass(frozen=True)
class _Constants:
    eps: float
    eps1: float  # eps' (base epsilon at rate pq)
    eps2: float  # eps'' = log(alpha' cb2) = deamp(eps, q) (WCS, Theorem 5.2)
    log_beta: float
    cbar1: float
    cbar2: float
    log_k: float  # log(alpha' cb2)
    log_c: float  # log(alpha' cb1)
    log_kappa: float  # log(1 - (e^eps - 1)(1 - q)/q), -inf if <= 0
    log_kappa_pq: float  # the same at rate pq (CS reverse, per-s1 reverse i = 0)


def _log_kappa(eps: float, g: float) -> float:
    if g == 1.0:
        return 0.0
    x = math.expm1(eps) * (1.0 - g) / g if eps < 700 else math.inf
    return math.log1p(-x) if x < 1.0 else -math.inf


def _constants(eps: float, p: float, q: float) -> _Constants:
    pq = p * q
    eps1 = _deamp(eps, pq)
    eps2 = _deamp(eps, q)
    log_beta = eps - eps1
    beta = math.exp(log_beta)
    if pq == 1.0:
        c1, c2 = 0.0, 1.0
        log_c1 = -math.inf
    else:
        c1 = (1.0 - p) / (1.0 - pq)
        c2 = p * (1.0 - q) / (1.0 - pq)
        log_c1 = math.log1p(-p) - math.log1p(-pq) if p < 1.0 else -math.inf
    one_minus_beta = -math.expm1(log_beta)
    cbar1 = one_minus_beta * c1
    cbar2 = one_minus_beta * c2 + beta
    # alpha' cb1 = c1 (alpha' - alpha) = c1 e^eps1 (1 - beta)
    log_c = log_c1 + eps1 + log1mexp(log_beta) if log_c1 > -math.inf else -math.inf
    return _Constants(
        eps=eps,
        eps1=eps1,
        eps2=eps2,
        log_beta=log_beta,
        cbar1=cbar1,
        cbar2=cbar2,
        log_k=eps2,
        log_c=log_c,
        log_kappa=_log_kappa(eps, q),
        log_kappa_pq=_log_kappa(eps, pq),
    )


def participation_constants(epsilon: float, client_rate: float, record_rate: float) -> dict:
    """The paper's derived quantities at ``epsilon`` (Theorem 4.1), as a dict.

    ``eps1`` = eps', ``alpha1`` = alpha' = e^eps', ``beta``, ``cbar1``, ``cbar2``, ``eps2`` =
    eps'' of Theorem 5.2 (= log(1 + (e^eps - 1)/q)), ``kappa`` = 1 - (e^eps - 1)(1 - q)/q (the
    reverse direction's weight; <= 0 means the reverse delta is 0).
    """
    eps = check_epsilon("epsilon", epsilon)
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    k = _constants(eps, p, q)
    return {
        "eps1": k.eps1,
        "alpha1": math.exp(k.eps1) if k.eps1 < 709 else math.inf,
        "beta": math.exp(k.log_beta),
        "cbar1": k.cbar1,
        "cbar2": k.cbar2,
        "eps2": k.eps2,
        "kappa": 1.0 - math.expm1(eps) * (1.0 - q) / q if eps < 700 else -math.inf,
    }
