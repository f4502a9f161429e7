"""Data generation (Poisson record sampling) in Zhang, Chen and Yang 2022: Lemma 6.9,
Theorems 6.10 and 6.11, and estimators of the parameter variance ``sigma^2``.

Their sampling model (Lemma 6.9, Theorem 6.10) is an UNNORMALISED sum with a unit step over
``N`` averaged sampling rounds, each record included with probability ``p``::

    W~ = W_{t-1} - (1/N) sum_j sum_i g_i 1{i sampled in round j} + delta
    E W~ = W_{t-1} - p sum_i g_i + delta                                  (Lemma 6.9)
    Var[W~ | W_{t-1}] = p (1 - p) sum_i g_i^2 / N                         (Theorem 6.10)

(the statement drops the ``1/N`` of the proof: equal for ``N = 1``, the default here; ``g^2``
is elementwise, and the scalar variance is the trace ``p (1 - p) sum_i ||g_i||^2``).
Algorithm 2 trains instead with the NORMALISED step ``-eta mean_{i in S} g_i``, whose variance
:func:`parameter_variance` gives in mode ``normalized`` (delta method) or ``empirical``.

Theorem 6.11 asks for ``p (1 - p) G >= C6 (C1 - tau)`` with ``G = sum_i ||g_i||^2``; privfl
solves it exactly (:func:`sampling_probability`) and offers the corrected sufficient condition
with factor 150 (the inequality of the paper's proof runs the wrong way: it needs an UPPER bound
on TV, and with Lemma 6.8's noise TV <= 150 (C1 - tau) by Lemma 6.7).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from privfl._validation import (
    check_choice,
    check_int,
    check_nonnegative,
    check_range,
)
from privfl.distortion.bounds import smaller_root
from privfl.distortion.divergence import check_leakage
from privfl.distortion.utility import as_samples

__all__ = [
    "SAMPLING_RULES",
    "SIGMA2_MODES",
    "SamplingRule",
    "expected_update",
    "parameter_variance",
    "sampling_probability",
    "sampling_variance",
]

#: Theorem 6.11 as printed (factor 1) or with privfl's corrected factor 150.
SAMPLING_RULES = {"paper": 1.0, "corrected": 150.0}
#: How ``sigma^2`` of Lemma 6.7 / Algorithm 1 is obtained (the paper never says).
SIGMA2_MODES = ("thm610", "normalized", "empirical")


def _rate(p: float) -> float:
    return check_range("p", p, 0.0, 1.0)


def expected_update(w_prev: object, grads: object, p: float, delta: object = 0.0) -> np.ndarray:
    """Lemma 6.9: ``E W~ = W_{t-1} - p sum_i g_i + delta`` (unit step, unnormalised sum)."""
    g = as_samples("grads", grads)
    w = as_samples("w_prev", w_prev, g.shape[1])[0]
    shift = np.broadcast_to(np.asarray(delta, dtype=float), w.shape)
    if not np.isfinite(shift).all():
        raise ValueError("delta contains NaN or infinity: it must be finite")
    return w - _rate(p) * g.sum(0) + shift


def sampling_variance(grads: object, p: float, rounds: int = 1, reduce: str = "trace"
                      ) -> float | np.ndarray:
    """Theorem 6.10: ``p (1 - p) sum_i g_i^2 / N`` (``N = rounds``; the proof's ``1/N``).

    ``reduce="trace"``: the scalar ``p (1 - p) sum_i ||g_i||^2 / N`` (what Theorem 6.1 uses);
    ``"per-coordinate"``: the vector of coordinate variances.
    """
    g = as_samples("grads", grads)
    p = _rate(p)
    n = check_int("rounds", rounds, 1)
    reduce = check_choice("reduce", reduce, ("trace", "per-coordinate"))
    per = p * (1.0 - p) * (g * g).sum(0) / n
    return float(per.sum()) if reduce == "trace" else per


@dataclass(frozen=True)
class SamplingRule:
    """Theorem 6.11's sampling probability for one rule.

    ``feasible`` False means no ``p`` satisfies the condition (``ratio > 1/4``): then
    ``p_min``/``p_max`` are None. ``binding`` False (``C1 <= tau``): every ``p`` works.
    """

    method: str
    factor: float
    ratio: float
    feasible: bool
    binding: bool
    p_min: float | None
    p_max: float | None
    note: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def sampling_probability(c6: float, c1: float, tau: float, gradient_sq_sum: float,
                         method: str = "paper") -> SamplingRule:
    """Solve ``p (1 - p) G >= factor * C6 (C1 - tau)`` (Theorem 6.11; ``G = sum_i ||g_i||^2``).

    With ``r = factor C6 (C1 - tau) / G``: ``r <= 0``, any ``p`` in [0, 1] (not binding);
    ``0 < r <= 1/4``, ``p in [p_min, 1 - p_min]``, ``p_min = (1 - sqrt(1 - 4 r)) / 2`` (the paper
    takes ``p_min``); ``r > 1/4``, infeasible (``max_p p (1 - p) = 1/4``).
    ``method="paper"``: factor 1, the printed condition, which does NOT make Theorem 6.1's bound
    <= 0 (it uses a lower bound of TV where an upper one is needed). ``"corrected"``: factor 150,
    sufficient when the noise follows Lemma 6.8 (TV <= 150 (C1 - tau), Lemma 6.7) under the
    assumptions of Theorem 6.1.
    """
    method = check_choice("method", method, tuple(SAMPLING_RULES))
    c6 = check_nonnegative("c6", c6)
    c1 = check_leakage("c1", c1)
    tau = check_leakage("tau", tau)
    g = check_range("gradient_sq_sum", gradient_sq_sum, 0.0, low_open=True)
    factor = SAMPLING_RULES[method]
    ratio = factor * c6 * (c1 - tau) / g
    what = ("the printed condition (not sufficient for Theorem 6.1's bound <= 0)"
            if method == "paper" else "sufficient with Lemma 6.8's noise (TV <= 150 (C1 - tau))")
    if ratio <= 0:
        why = ("C1 <= tau: the budget is not binding" if c1 <= tau else
               "C6 = 0: the condition p (1 - p) G >= 0 holds")
        return SamplingRule(method, factor, ratio, True, False, 0.0, 1.0, why + ", any p works")
    if ratio > 0.25:
        return SamplingRule(method, factor, ratio, False, True, None, None,
                            f"infeasible: r = {ratio:.6g} > 1/4 = max p(1 - p); " + what)
    p_min = smaller_root(ratio)
    return SamplingRule(method, factor, ratio, True, True, p_min, 1.0 - p_min, what)


def parameter_variance(grads: object, p: float, mode: str = "thm610", *, lr: float = 1.0,
                       replicas: int = 1000, seed: int = 0, per_coordinate: bool = False
                       ) -> float | np.ndarray:
    """``sigma^2``, the per-coordinate variance of the client's parameter after one sampled
    step (the paper never says how to get it).

    ``thm610``: ``p (1 - p) sum_i g_ij^2`` (their sampling model: unit step, unnormalised sum).
    ``normalized``: Algorithm 2's step ``-lr mean_{i in S} g_i`` by the delta method,
    ``lr^2 (1 - p) / (p M^2) sum_i (g_ij - gbar_j)^2``. ``empirical``: the sample variance of
    ``replicas`` Algorithm 2 steps with fresh Poisson draws (seeded; empty batches do not move).
    Returns the mean over coordinates (the isotropic ``sigma^2`` of Lemma 6.7), or the vector
    with ``per_coordinate=True``.
    """
    from privfl.distortion.mechanisms import PoissonRecordSampling, sampled_mean_steps

    g = as_samples("grads", grads)
    p = check_range("p", p, 0.0, 1.0, low_open=True)
    mode = check_choice("mode", mode, SIGMA2_MODES)
    lr = check_nonnegative("lr", lr)
    m = g.shape[0]
    if mode == "thm610":
        per = sampling_variance(g, p, reduce="per-coordinate")
    elif mode == "normalized":
        per = lr**2 * (1.0 - p) / (p * m * m) * ((g - g.mean(0)) ** 2).sum(0)
    else:
        count = check_int("replicas", replicas, 2)
        generator = torch.Generator().manual_seed(check_int("seed", seed, 0))
        masks = PoissonRecordSampling(p).masks(count, m, generator)
        steps = sampled_mean_steps(torch.from_numpy(g), masks, lr)
        per = steps.var(0, unbiased=True).numpy()
    return per if per_coordinate else float(np.mean(per))
