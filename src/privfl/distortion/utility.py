"""Utility measures of Zhang, Chen and Yang 2022: the parameter gap, utility loss and its parts.

Conventions (the paper is inconsistent on each; privfl's choices):

* ``GAP(W) = C ||W - W*||^2`` (their Definition 1; ``C = 1`` by default), and for a random
  parameter the expected gap ``E ||W - W*||^2``, which decomposes as (Lemma 6.2)::

      E ||W - W*||^2 = tr Var[W] + ||E W - W*||^2 = Var[W] + Bias(W)^2

* utility loss = the INCREASE of the expected gap caused by the protection (their Appendix L)::

      eps_u = GAP(W~) - GAP(W)                      convention "loss-increase" (default)

  Their Definition 3 prints the opposite sign, ``GAP(W) - GAP(W~)`` (convention
  "paper-definition"); eq. (4) averages ``eps_u`` over clients and rounds.
* Theorem 6.1 bounds a *proxy* that evaluates the protected parameter at its conditional mean
  ``E[W~ | W_{t-1}]`` (:func:`proxy_utility_loss`); measured literally, added variance raises
  the loss instead of lowering it.
* variance reduction ``-E(Var[W~ | W_{t-1}])`` and model parameter discrepancy ``C6 TV`` are the
  two terms of Theorem 6.1 (their section 6.1).

Samples are arrays ``[n, d]`` (one parameter per row); ``Var`` is the population variance
(divide by ``n``), so the decomposition holds exactly on samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfl._validation import (
    check_choice,
    check_nonnegative,
    check_positive,
    check_probability,
)

__all__ = [
    "UTILITY_CONVENTIONS",
    "GapDecomposition",
    "as_samples",
    "bias",
    "expected_gap",
    "federated_average",
    "gap",
    "parameter_discrepancy",
    "proxy_utility_loss",
    "total_variance",
    "trace_variance",
    "utility_loss",
    "variance_reduction",
]

#: Sign conventions of the utility loss (see the module docstring).
UTILITY_CONVENTIONS = ("loss-increase", "paper-definition")


def as_samples(name: str, value: object, dimension: int | None = None) -> np.ndarray:
    """A finite ``[n, d]`` float array (a single ``[d]`` parameter becomes one row)."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {value!r} is not an array of numbers") from None
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise ValueError(f"{name} has shape {np.shape(value)}: must be [d] or [n, d] with "
                         "n, d >= 1")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} contains NaN or infinity: every entry must be finite")
    if dimension is not None and array.shape[1] != dimension:
        raise ValueError(f"{name} has dimension {array.shape[1]}: must be {dimension}")
    return array


def _optimum(w_star: object, dimension: int) -> np.ndarray:
    return as_samples("w_star", w_star, dimension)[0]


def gap(w: object, w_star: object, c: float = 1.0) -> float:
    """``C * mean_rows ||w - W*||^2`` (their eq. 1; the expected gap over sample rows)."""
    samples = as_samples("w", w)
    c = check_positive("c", c)
    diff = samples - _optimum(w_star, samples.shape[1])[None, :]
    return float(c * np.einsum("ij,ij->i", diff, diff).mean())


def trace_variance(w: object) -> float:
    """``tr Var[W] = E ||W - E W||^2`` over sample rows (population variance)."""
    samples = as_samples("w", w)
    return float(samples.var(axis=0).sum())


def bias(w: object, w_star: object) -> float:
    """``Bias(W) = ||E W - W*||`` over sample rows (their Lemmas 6.3 and D.1)."""
    samples = as_samples("w", w)
    return float(np.linalg.norm(samples.mean(0) - _optimum(w_star, samples.shape[1])))


@dataclass(frozen=True)
class GapDecomposition:
    """Lemma 6.2: ``gap = trace_variance + bias_squared`` (exact on samples)."""

    gap: float
    trace_variance: float
    bias_squared: float


def expected_gap(w: object, w_star: object) -> GapDecomposition:
    """The expected gap of sample rows and its bias-variance decomposition (Lemma 6.2)."""
    samples = as_samples("w", w)
    var = trace_variance(samples)
    b = bias(samples, w_star)
    return GapDecomposition(var + b * b, var, b * b)


def utility_loss(w: object, w_tilde: object, w_star: object,
                 convention: str = "loss-increase") -> float:
    """Utility loss from unprotected ``w`` and protected ``w_tilde`` parameters (rows: samples).

    ``loss-increase`` (default, their Appendix L): ``GAP(W~) - GAP(W)``; ``paper-definition``
    (their Definition 3 as printed): ``GAP(W) - GAP(W~)``. Gaps are expected gaps over rows.
    """
    convention = check_choice("convention", convention, UTILITY_CONVENTIONS)
    loss = gap(w_tilde, w_star) - gap(w, w_star)
    return loss if convention == "loss-increase" else -loss


def proxy_utility_loss(w: object, conditional_means: object, w_star: object) -> float:
    """Their Appendix L proxy: ``E ||E[W~ | W_{t-1}] - W*||^2 - E ||W - W*||^2``.

    ``conditional_means`` holds one row ``E[W~ | W_{t-1}]`` per outer draw of ``W_{t-1}`` (a
    single row for a fixed previous model). This is what Theorem 6.1 bounds: the distortion's
    own variance is left out, so it can be negative even when the literal loss is positive.
    """
    return gap(conditional_means, w_star) - gap(w, w_star)


def variance_reduction(conditional_variances: object) -> float:
    """``-E(Var[W~_t | W_{t-1}])``: minus the mean of the given conditional variances."""
    values = np.asarray(conditional_variances, dtype=float).reshape(-1)
    if values.size == 0 or not np.isfinite(values).all() or (values < 0).any():
        raise ValueError(f"conditional_variances = {conditional_variances!r} must be a "
                         "non-empty list of finite variances >= 0")
    return -float(values.mean())


def parameter_discrepancy(c6: float, tv: float) -> float:
    """``C6 * TV(P_t || P~_t)``: the model parameter discrepancy of Theorem 6.1."""
    return check_nonnegative("c6", c6) * check_probability("tv", tv)


def total_variance(groups: object) -> tuple[float, float, float]:
    """Law of total variance (their eq. 29) on nested samples ``[outer, inner, d]``.

    Returns ``(total, within, between)`` with ``total = within + between``:
    ``within = E(Var[W | W_{t-1}])`` (mean over outer draws of the inner trace variance) and
    ``between = Var(E[W | W_{t-1}])`` (trace variance of the inner means).
    """
    array = np.asarray(groups, dtype=float)
    if array.ndim != 3 or 0 in array.shape or not np.isfinite(array).all():
        raise ValueError(f"groups has shape {array.shape}: must be a finite [outer, inner, d] "
                         "array with every size >= 1")
    within = float(array.var(axis=1).sum(axis=1).mean())
    between = float(array.mean(axis=1).var(axis=0).sum())
    total = float(array.reshape(-1, array.shape[2]).var(axis=0).sum())
    return total, within, between


def federated_average(losses: object) -> float:
    """Their eq. (4): ``(1/K)(1/T) sum_k sum_t eps_{u,t}^(k)`` of a ``[K, T]`` table (or the
    eq. (6) average of leakages over clients)."""
    table = np.asarray(losses, dtype=float)
    if table.size == 0 or not np.isfinite(table).all():
        raise ValueError(f"losses = {losses!r} must be a non-empty table of finite numbers")
    return float(table.mean())
