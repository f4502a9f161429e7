"""The Gaussian trade-off function ``G_mu`` (Dong, Roth, Su 2019) and the identity ``G_0``.

``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)``, closed forms throughout: it is its own inverse,
its fixed point is ``Phi(-mu/2)`` and its (epsilon, delta) profile is that of mu-GDP
(:func:`~privfl.accounting.gdp.accountant.gdp_delta`).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from privfl._validation import check_nonnegative
from privfl.accounting.fdp.base import TradeOff
from privfl.accounting.gdp.accountant import gdp_delta, gdp_epsilon


class GaussianTradeOff(TradeOff):
    """G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu) = T(N(0, 1), N(mu, 1)); mu >= 0.

    Symmetric (its inverse is G_mu); fixed point Phi(-mu/2); (epsilon, delta) profile
    :func:`~privfl.accounting.gdp.accountant.gdp_delta`.
    ``G_0`` is the identity ``1 - alpha``.
    """

    symmetric = True

    def __init__(self, mu: float) -> None:
        self.mu = check_nonnegative("mu", mu)

    def _evaluate(self, alpha: np.ndarray) -> np.ndarray:
        # Phi^{-1}(1 - alpha) = -Phi^{-1}(alpha): accurate for small alpha.
        return special.ndtr(-special.ndtri(alpha) - self.mu)

    def _inverse(self, beta: np.ndarray) -> np.ndarray:
        return self._evaluate(beta)

    def fixed_point(self) -> float:
        return float(special.ndtr(-self.mu / 2.0))

    def _delta(self, epsilon: np.ndarray) -> np.ndarray:
        return np.asarray(gdp_delta(epsilon, self.mu), dtype=float)

    def _epsilon(self, delta: float) -> float:
        return float(gdp_epsilon(delta, self.mu))

    def __repr__(self) -> str:
        return f"GaussianTradeOff(mu={self.mu!r})"


def identity() -> GaussianTradeOff:
    """Id(alpha) = 1 - alpha (perfect privacy), represented as G_0."""
    return GaussianTradeOff(0.0)
