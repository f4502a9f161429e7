"""The subsampling operator ``C_p(f) = min{f_p, f_p^{-1}}**`` (Zheng et al. 2021, Sec. 3.4).

The trade-off of one step of an f-DP mechanism on a uniformly random subset of fixed size
``p n`` drawn without replacement, replace-one neighbours. Closed form for Gaussians
(:class:`SubsampledGaussianTradeOff`, Dong, Roth, Su 2019, Thm. 4.2), exact for tabulated
functions, a rigorous lower bound otherwise (:func:`subsample`).
"""

from __future__ import annotations

import math

import numpy as np

from privfl._validation import check_nonnegative, check_probability
from privfl.accounting.fdp.base import TradeOff, check_tradeoff
from privfl.accounting.fdp.gaussian import GaussianTradeOff, identity
from privfl.accounting.fdp.operators import MixtureTradeOff, mixed_epsilon
from privfl.accounting.fdp.tabulated import TabulatedTradeOff, lower_hull
from privfl.accounting.fdp.tabulation import lower_tabulation
from privfl.accounting.gdp.accountant import gdp_delta, gdp_epsilon


class SubsampledGaussianTradeOff(TradeOff):
    """C_p(G_mu) in closed form ([DRS19] Thm 4.2; Zheng et al. 2021, Section 3.4), p in [0, 1].

    With x* = Phi(-mu/2) the fixed point of G_mu and f_p = p G_mu + (1 - p) Id:
    ``C_p(alpha) = f_p(alpha)`` on [0, x*], ``x* + f_p(x*) - alpha`` on [x*, f_p(x*)] and
    ``f_p^{-1}(alpha)`` on [f_p(x*), 1]. f_p^{-1} is evaluated by bisection to double precision.
    The (epsilon, delta) profile is exact: ``delta(eps) = p delta_mu(eps')`` with
    ``e^eps' = 1 + (e^eps - 1)/p`` (privacy amplification by subsampling of G_mu).
    This is the trade-off of one step of an f-DP mechanism on a uniformly random subset of fixed
    size p n without replacement, replace-one neighbours.
    """

    symmetric = True

    def __init__(self, mu: float, p: float) -> None:
        self.mu = check_nonnegative("mu", mu)
        self.p = check_probability("p", p)
        self.base = GaussianTradeOff(self.mu)
        self.mixture = MixtureTradeOff(self.base, self.p)
        self.x_star = self.base.fixed_point()
        self.y_star = float(self.mixture._evaluate(np.asarray(self.x_star)))

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        alpha = np.asarray(alpha, float)
        result = self.x_star + self.y_star - alpha
        left = alpha <= self.x_star
        right = alpha >= self.y_star
        if np.any(left):
            result = np.where(left, self.mixture._evaluate(np.where(left, alpha, 0.0)), result)
        if np.any(right):
            result = np.where(right, self.mixture._inverse(np.where(right, alpha, 1.0)), result)
        return result

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        return self._evaluate(beta)

    def fixed_point(self) -> float:
        return 0.5 * (self.x_star + self.y_star)

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        eps = np.asarray(epsilon, float)
        if self.p == 0.0 or self.mu == 0.0:
            return np.zeros_like(eps)
        return self.p * np.asarray(gdp_delta(mixed_epsilon(eps, self.p), self.mu))

    def _epsilon(self, delta: float) -> float:
        if self.p == 0.0 or self.mu == 0.0 or delta / self.p >= 1.0:
            return 0.0
        inner = float(gdp_epsilon(delta / self.p, self.mu))
        # e^eps = 1 + p (e^eps' - 1), without overflow
        return inner + math.log(self.p + (1.0 - self.p) * math.exp(-inner))

    def __repr__(self) -> str:
        return f"SubsampledGaussianTradeOff(mu={self.mu!r}, p={self.p!r})"


def subsample(f: TradeOff, p: float) -> TradeOff:
    """Subsampling operator C_p(f) = min{f_p, f_p^{-1}}** (Zheng et al. 2021, Sec. 3.4), symmetric.

    * ``GaussianTradeOff``: closed form :class:`SubsampledGaussianTradeOff` (accurate to ~1e-15);
    * ``TabulatedTradeOff``: exact (the lower convex hull of the vertices of f_p and f_p^{-1});
    * anything else: the same hull built from :func:`lower_tabulation` of f_p, a rigorous lower
      bound on C_p(f) within its certified gap (1e-8 vertically and horizontally).

    ``p = 0`` gives Id; ``p = 1`` gives f for symmetric f (min{f, f^{-1}}** otherwise).
    """
    f = check_tradeoff("f", f)
    p = check_probability("p", p)
    if p == 0.0:
        return identity()
    if isinstance(f, GaussianTradeOff):
        return f if (p == 1.0 or f.mu == 0.0) else SubsampledGaussianTradeOff(f.mu, p)
    if p == 1.0 and f.symmetric:
        return f
    if isinstance(f, TabulatedTradeOff):
        a, b = f.alphas, f.betas
        mixed = p * b + (1.0 - p) * (1.0 - a)
    else:
        table = lower_tabulation(MixtureTradeOff(f, p))
        a, mixed = table.alphas, table.betas
    # graph of f_p plus its reflection (the graph of f_p^{-1}, with its vertical parts)
    xs = np.concatenate([a, mixed, [0.0, 1.0]])
    ys = np.concatenate([mixed, a, [1.0, 0.0]])
    hx, hy = lower_hull(xs, ys)
    hy = np.minimum(hy, 1.0 - hx)
    return TabulatedTradeOff(hx, hy, symmetric=True)
