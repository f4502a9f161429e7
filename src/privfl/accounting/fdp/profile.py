"""What any trade-off function implies, and checks that a function is one.

f-DP implies (epsilon, delta(epsilon))-DP with ``delta(epsilon) = 1 - inf_alpha (f(alpha) +
e^epsilon alpha)`` (Dong, Roth, Su 2019, Prop. 2.12): :func:`epsilon_delta_profile`,
:func:`epsilon_for_delta`, and the total variation bound ``delta(0)``
(:func:`total_variation_bound`). :func:`is_symmetric` and :func:`is_convex` check a function on
a grid.
"""

from __future__ import annotations

import numpy as np

from privfl._validation import check_nonnegative
from privfl.accounting.fdp.base import TradeOff, _alpha, check_tradeoff


def total_variation_bound(f: TradeOff) -> float:
    """sup_E |P(E) - Q(E)| allowed by f: delta(0) = 1 - min_alpha (f(alpha) + alpha).

    Every test has type I + type II error >= 1 - this. For G_mu it is 2 Phi(mu/2) - 1.
    """
    f = check_tradeoff("f", f)
    return float(f.delta(0.0))


def epsilon_delta_profile(f: TradeOff, epsilons: float | np.ndarray) -> float | np.ndarray:
    """delta(epsilon) = 1 + f*(-e^epsilon) = 1 - inf_alpha (f(alpha) + e^epsilon alpha).

    f-DP implies (epsilon, delta(epsilon))-DP for every epsilon >= 0 ([DRS19] Prop. 2.12; an
    equivalence for symmetric f). Closed form for Gaussians (and C_p of Gaussians), exact over the
    vertices for tabulated f, golden-section search (absolute accuracy ~1e-12) otherwise.
    """
    return check_tradeoff("f", f).delta(epsilons)


def epsilon_for_delta(f: TradeOff, delta: float) -> float:
    """Smallest epsilon >= 0 with delta(epsilon) <= delta; ``inf`` if none (delta < 1 - f(0))."""
    return check_tradeoff("f", f).epsilon(delta)


# =========================================================================== checks
def _check_grid(grid: object) -> np.ndarray:
    if grid is None:
        return np.linspace(0.0, 1.0, 1001)
    return _alpha("grid", grid)[0].ravel()


def is_symmetric(f: TradeOff, grid: object = None, tol: float = 1e-9) -> bool:
    """Whether f equals its generalised inverse on ``grid`` (default 1001 points) to ``tol``."""
    f = check_tradeoff("f", f)
    tol = check_nonnegative("tol", tol)
    alphas = _check_grid(grid)
    return bool(np.max(np.abs(f(alphas) - f.inv(alphas))) <= tol)


def is_convex(f: TradeOff, grid: object = None, tol: float = 1e-9) -> bool:
    """Whether f lies on or below the chord of neighbouring grid points (to ``tol``)."""
    f = check_tradeoff("f", f)
    tol = check_nonnegative("tol", tol)
    a = np.unique(_check_grid(grid))
    if a.size < 3:
        return True
    b = np.asarray(f(a), float)
    chord = b[:-2] + (b[2:] - b[:-2]) * ((a[1:-1] - a[:-2]) / (a[2:] - a[:-2]))
    return bool(np.all(b[1:-1] - chord <= tol))
