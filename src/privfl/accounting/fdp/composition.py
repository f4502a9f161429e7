"""Composition of trade-off functions: the tensor product ``f (x) g`` ([DRS19] Thm. 3.2).

Gaussians compose exactly (``G_mu1 (x) G_mu2 = G_sqrt(mu1^2 + mu2^2)``); any other factor is
tabulated (a lower bound) and the product is computed exactly from the equivalent discrete
pairs, then coarsened to at most ``max_vertices`` supporting lines (again a lower bound).
[DRS19]: Dong, Roth, Su 2019, "Gaussian differential privacy".
:func:`compose` composes several functions, :func:`tensor_power` one function k times.
"""

from __future__ import annotations

import math

import numpy as np

from privfl._validation import check_int
from privfl.accounting.fdp.base import TradeOff, check_tradeoff
from privfl.accounting.fdp.gaussian import GaussianTradeOff, identity
from privfl.accounting.fdp.tabulated import TabulatedTradeOff, upper_envelope
from privfl.accounting.fdp.tabulation import lower_tabulation
from privfl.accounting.gdp.accountant import gdp_compose


def _atoms(f: TabulatedTradeOff) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A discrete pair (P, Q) with T(P, Q) = f: masses P, Q and log likelihood ratios log Q/P.

    Segment k of f carries P mass d alpha_k and Q mass -d beta_k (the Neyman-Pearson test rejects
    atoms in decreasing order of Q/P); f(0) < 1 adds an atom with P mass 0 and Q mass 1 - f(0).
    """
    a, b = f._alphas, f._betas
    p_mass = np.diff(a)
    q_mass = np.maximum(-np.diff(b), 0.0)
    if b[0] < 1.0:
        p_mass = np.concatenate([[0.0], p_mass])
        q_mass = np.concatenate([[1.0 - b[0]], q_mass])
    with np.errstate(divide="ignore"):
        log_ratio = np.log(q_mass) - np.log(p_mass)
    return p_mass, q_mass, log_ratio


def _supporting_envelope(
    alphas: np.ndarray,
    betas: np.ndarray,
    slopes: np.ndarray,
    max_vertices: int,
    symmetric: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """Max of at most ~max_vertices supporting lines of a convex piecewise-linear function.

    Segment k starts at vertex (alphas[k], betas[k]) and has slope ``slopes[k]`` (<= 0); its line
    supports the function, so any maximum of such lines (and of 0) is a LOWER bound. Segments are
    picked evenly along s = alpha - beta (shape), along log(-slope) = epsilon (so the
    (epsilon, delta) profile is kept: epsilon(delta) grows by at most the epsilon spacing) and
    along log(1 - intercept) = log delta(epsilon). For a symmetric function only slopes <= -1 are
    picked and their reflections added, keeping the result symmetric. ``betas`` must be accurate
    relative to their size near 0 (the reflection divides by small slopes).
    """
    usable = np.isfinite(slopes) & (slopes < 0)
    if symmetric:
        usable &= slopes <= -1.0
    index = np.flatnonzero(usable)
    if index.size == 0:
        if symmetric:  # only flat parts: the symmetric function is min(1 - alpha, ...) -> keep 0
            return np.array([0.0, 1.0]), np.array([0.0, 0.0])
        return np.array([0.0, 1.0]), np.array([0.0, 0.0])
    slope = slopes[index]
    intercept = betas[index] - slope * alphas[index]
    per_rule = max((max_vertices // (2 if symmetric else 1)) // 3, 2)
    keys = [
        alphas[index] - betas[index],  # non-decreasing along the segments
        -np.log(-slope),  # non-decreasing
        -np.log(np.maximum(1.0 - intercept, 1e-300)),  # non-decreasing
    ]
    picks = [np.array([0, index.size - 1])]
    for key in keys:
        targets = np.linspace(key[0], key[-1], per_rule)
        picks.append(np.searchsorted(key, targets, side="left").clip(0, index.size - 1))
    chosen = np.unique(np.concatenate(picks))
    line_slopes, line_intercepts = slope[chosen], intercept[chosen]
    if symmetric:  # reflection about beta = alpha of beta = c + s alpha: alpha = c + s beta
        reflected_intercepts = alphas[index][chosen] - betas[index][chosen] / line_slopes
        line_slopes = np.concatenate([line_slopes, 1.0 / line_slopes])
        line_intercepts = np.concatenate([line_intercepts, reflected_intercepts])
    return upper_envelope(
        np.concatenate([line_slopes, [0.0]]), np.concatenate([line_intercepts, [0.0]])
    )


def _coarsen(f: TabulatedTradeOff, max_vertices: int) -> TabulatedTradeOff:
    """f itself if small enough, else a lower bound with about ``max_vertices`` vertices."""
    if f._alphas.size <= max_vertices:
        return f
    slopes = np.diff(f._betas) / np.diff(f._alphas)
    xs, ys = _supporting_envelope(f._alphas[:-1], f._betas[:-1], slopes, max_vertices, f.symmetric)
    return TabulatedTradeOff(
        xs, np.minimum(ys, 1.0 - xs), tol=1e-7, symmetric=True if f.symmetric else None
    )


def _tensor_tabulated(
    f: TabulatedTradeOff, g: TabulatedTradeOff, max_vertices: int
) -> TabulatedTradeOff:
    """Exact f (x) g from the product of the discrete pairs, then coarsened (lower bound)."""
    fp, fq, fr = _atoms(_coarsen(f, max_vertices))
    gp, gq, gr = _atoms(_coarsen(g, max_vertices))
    p_mass = np.multiply.outer(fp, gp).ravel()
    q_mass = np.multiply.outer(fq, gq).ravel()
    with np.errstate(invalid="ignore"):
        log_ratio = np.add.outer(fr, gr).ravel()
    keep = (p_mass > 0) | (q_mass > 0)  # drops the only inf - inf (mass 0 x mass 0) atoms
    p_mass, q_mass, log_ratio = p_mass[keep], q_mass[keep], log_ratio[keep]
    order = np.argsort(-log_ratio, kind="stable")
    p_mass, q_mass, log_ratio = p_mass[order], q_mass[order], log_ratio[order]
    alphas = np.clip(np.concatenate([[0.0], np.cumsum(p_mass)]), 0.0, 1.0)
    # beta_k = 1 - sum_{j<k} q_j = sum_{j>=k} q_j: the tail sum keeps small betas accurate
    head = 1.0 - np.concatenate([[0.0], np.cumsum(q_mass)])
    tail = np.concatenate([np.cumsum(q_mass[::-1])[::-1], [0.0]])
    betas = np.clip(np.where(head > 0.5, head, tail), 0.0, 1.0)
    alphas[-1], betas[-1] = 1.0, 0.0
    symmetric = f.symmetric and g.symmetric
    if log_ratio.size > max_vertices:
        with np.errstate(over="ignore"):
            slopes = np.where(p_mass > 0, -np.exp(log_ratio), -np.inf)
        xs, ys = _supporting_envelope(alphas[:-1], betas[:-1], slopes, max_vertices, symmetric)
        return TabulatedTradeOff(
            xs, np.minimum(ys, 1.0 - xs), tol=1e-7, symmetric=True if symmetric else None
        )
    # equal alphas (P = 0 atoms, or P mass below rounding): keep the last, lowest, beta
    last = np.concatenate([alphas[1:] != alphas[:-1], [True]])
    alphas, betas = alphas[last], betas[last]
    alphas[0] = 0.0
    return TabulatedTradeOff(
        alphas, np.minimum(betas, 1.0 - alphas), tol=1e-7, symmetric=True if symmetric else None
    )


def compose(f: TradeOff, *others: TradeOff, max_vertices: int = 2000) -> TradeOff:
    """Tensor product f (x) g (x) ...: trade-off of the (adaptive) composition ([DRS19] Thm 3.2).

    * all Gaussian: exact, G_mu1 (x) G_mu2 = G_sqrt(mu1^2 + mu2^2); Id (= G_0) is neutral;
    * otherwise each factor is made piecewise linear (:func:`lower_tabulation`, a rigorous lower
      bound, for non-tabulated factors) and the product is computed EXACTLY from the equivalent
      discrete pairs (P, Q): product measures, atoms sorted by likelihood ratio.
      If that has more than ``max_vertices`` segments it is replaced by the maximum of
      ``max_vertices`` of its supporting lines, again a lower bound (never overstates privacy).

    Cost: the product of the vertex counts (memory and time), so keep ``max_vertices`` moderate.
    For many-fold compositions of subsampled Gaussians prefer the PLD accountant.
    """
    max_vertices = check_int("max_vertices", max_vertices, minimum=4)
    result = check_tradeoff("f", f)
    for index, other in enumerate(others):
        other = check_tradeoff(f"others[{index}]", other)
        if isinstance(result, GaussianTradeOff) and isinstance(other, GaussianTradeOff):
            result = GaussianTradeOff(gdp_compose(result.mu, other.mu))
        elif isinstance(other, GaussianTradeOff) and other.mu == 0.0:
            continue
        elif isinstance(result, GaussianTradeOff) and result.mu == 0.0:
            result = other
        else:
            result = _tensor_tabulated(
                lower_tabulation(result), lower_tabulation(other), max_vertices
            )
    return result


def tensor_power(f: TradeOff, k: int, *, max_vertices: int = 2000) -> TradeOff:
    """f^{(x) k}, the k-fold composition (exact for Gaussians: G_{sqrt(k) mu}); see :func:`compose`.

    Uses repeated squaring, so a tabulated f costs O(log k) products.
    """
    f = check_tradeoff("f", f)
    k = check_int("k", k, minimum=0)
    if k == 0:
        return identity()
    if isinstance(f, GaussianTradeOff):
        return GaussianTradeOff(math.sqrt(k) * f.mu)
    result: TradeOff | None = None
    square: TradeOff = f
    while k:
        if k & 1:
            result = (
                square if result is None else compose(result, square, max_vertices=max_vertices)
            )
        k >>= 1
        if k:
            square = compose(square, square, max_vertices=max_vertices)
    assert result is not None
    return result
