"""Operators on trade-off functions: mixture with perfect privacy, inverse, client sampling.

* :func:`mixture` ``f_p = p f + (1 - p) Id`` (Zheng et al. 2021, Sec. 3.4);
* :func:`inverse` ``f^{-1}``, the trade-off function ``T(Q, P)`` when ``f = T(P, Q)``;
* :func:`client_sampling_lower_bound` ``max(f, 1 - alpha - p^2)``, one round with Poisson
  client sampling (Zheng et al. 2021, Lemma 3.8).
"""

from __future__ import annotations

import numpy as np

from privfl._validation import check_probability
from privfl.accounting.fdp.base import TradeOff, check_tradeoff
from privfl.accounting.fdp.tabulated import TabulatedTradeOff, lower_hull


def mixed_epsilon(epsilon: np.ndarray, p: float) -> np.ndarray:
    """epsilon' with e^epsilon' = 1 + (e^epsilon - 1) / p, computed without overflow."""
    return epsilon + np.log(np.exp(-epsilon) + (-np.expm1(-epsilon)) / p)


class MixtureTradeOff(TradeOff):
    """f_p = p f + (1 - p) Id (Zheng et al. 2021, Section 3.4): the p-mixture of f with Id."""

    def __init__(self, f: TradeOff, p: float) -> None:
        self.f = check_tradeoff("f", f)
        self.p = check_probability("p", p)
        self.symmetric = self.p == 0.0 or (self.p == 1.0 and f.symmetric)

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return self.p * self.f._evaluate(alpha) + (1.0 - self.p) * (1.0 - alpha)

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        # f_p + e^eps alpha = (1 - p) + p (f + e^eps' alpha) with p e^eps' = e^eps - 1 + p.
        if self.p == 0.0:
            return np.zeros_like(np.asarray(epsilon, float))
        return self.p * self.f._delta(mixed_epsilon(np.asarray(epsilon, float), self.p))

    def __repr__(self) -> str:
        return f"MixtureTradeOff({self.f!r}, p={self.p!r})"


def mixture(f: TradeOff, p: float) -> MixtureTradeOff:
    """f_p(alpha) = p f(alpha) + (1 - p)(1 - alpha), p in [0, 1]."""
    return MixtureTradeOff(f, p)


class InverseTradeOff(TradeOff):
    """The generalised inverse f^{-1}(alpha) = inf{t : f(t) <= alpha}: T(Q, P) when f = T(P, Q)."""

    def __init__(self, f: TradeOff) -> None:
        self.f = check_tradeoff("f", f)
        self.symmetric = f.symmetric

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return self.f._inverse(alpha)

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        return self.f._evaluate(beta)

    def __repr__(self) -> str:
        return f"InverseTradeOff({self.f!r})"


def inverse(f: TradeOff) -> TradeOff:
    """The generalised inverse of f as a trade-off function (f itself when f is symmetric)."""
    f = check_tradeoff("f", f)
    if f.symmetric:
        return f
    if isinstance(f, TabulatedTradeOff):
        return _reflect_tabulated(f)
    return InverseTradeOff(f)


def _reflect_tabulated(f: TabulatedTradeOff) -> TabulatedTradeOff:
    # reflected vertices, plus (1, 0): the inverse is 0 on [f(0), 1]; at beta = 0 the hull keeps
    # the lowest reflected alpha, the first zero of f
    xs = np.concatenate([f.betas, [1.0]])
    ys = np.concatenate([f.alphas, [0.0]])
    hx, hy = lower_hull(xs, ys)
    return TabulatedTradeOff(hx, np.minimum(hy, 1.0 - hx))


class ClientSampledTradeOff(TradeOff):
    """g(alpha) = max(f(alpha), 1 - alpha - p^2): Zheng et al. 2021, Lemma 3.8 (see there)."""

    def __init__(self, f: TradeOff, p: float) -> None:
        self.f = check_tradeoff("f", f)
        self.p = check_probability("p", p)
        self.symmetric = f.symmetric

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        return np.maximum(self.f._evaluate(alpha), 1.0 - alpha - self.p**2)

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        # {t : max(f, h)(t) <= beta} is the intersection of two upper intervals
        return np.maximum(self.f._inverse(beta), np.maximum(0.0, 1.0 - self.p**2 - beta))

    def __repr__(self) -> str:
        return f"ClientSampledTradeOff({self.f!r}, p={self.p!r})"


def client_sampling_lower_bound(f: TradeOff, p: float) -> ClientSampledTradeOff:
    """Zheng et al. 2021, Lemma 3.8: one round with Poisson client sampling at rate p is g-DP,
    ``g(alpha) = max(f(alpha), 1 - alpha - p^2)``.

    Setting: a federated round where client j's local training is f-DP and each client is sampled
    independently with probability p; the attacked record's client j and the observing client i
    are both sampled with probability p^2, the only event in which the two output laws differ
    (Lemma B.1: a mixture differing on an event of mass p_E is max{f, 1 - alpha - p_E}-DP). g is
    convex, so it is a trade-off function. Zheng et al. 2021's Theorem 2 drops the p^2 branch.
    """
    return ClientSampledTradeOff(f, p)
