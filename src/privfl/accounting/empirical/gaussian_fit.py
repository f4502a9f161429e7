"""Gaussian-fit epsilon *estimate* from canary scores (Andrew et al. 2024, ICLR).

Andrew, Kairouz, Oh, Oprea, McMahan and Suriyakumar 2024, "One-shot Empirical Privacy Estimation
for Federated Learning": random canary clients whose update is a fixed random direction are
inserted in a run; the statistic of each canary is the cosine between its direction and the
released model update. Directions never inserted give the null scores. The scores of both groups
are fitted by Gaussians with a common (pooled) standard deviation

    mu_hat = (mean_in - mean_out) / sqrt((var_in + var_out) / 2),

and the estimate is the epsilon of mu_hat-GDP at delta (Dong, Roth and Su 2022):
``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``. This is an *estimate*, not a bound:
it assumes Gaussian scores and has no confidence level. Andrew et al. fit two Gaussians of
different variances; the equal-variance fit here is the one whose privacy curve is exactly
mu-GDP (a documented simplification).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privfl._validation import check_delta
from privfl.accounting.gdp import gdp_epsilon


@dataclass(frozen=True)
class GaussianFit:
    """The fitted means, pooled standard deviation, mu and epsilon estimate (at ``delta``)."""

    mean_in: float
    mean_out: float
    sd: float
    mu: float
    epsilon: float
    delta: float


def _scores(name: str, values: np.ndarray) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or array.size < 2 or not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name} (shape {array.shape}) must be a 1-D array of >= 2 finite scores"
        )
    return array


def gaussian_fit_epsilon(
    scores_in: np.ndarray, scores_out: np.ndarray, delta: float
) -> GaussianFit:
    """Andrew et al. 2024's estimate from inserted and null canary scores (module docstring).

    ``mu`` is clamped at 0 (inserted canaries scoring lower than the null carry no evidence). A
    zero pooled variance with different means gives mu = epsilon = inf. ``delta`` in (0, 1).
    """
    inside = _scores("scores_in", scores_in)
    outside = _scores("scores_out", scores_out)
    delta = check_delta("delta", delta)
    mean_in, mean_out = float(inside.mean()), float(outside.mean())
    sd = math.sqrt(0.5 * (float(inside.var(ddof=1)) + float(outside.var(ddof=1))))
    gap = max(mean_in - mean_out, 0.0)
    if gap == 0.0:
        mu = 0.0
    elif sd == 0.0:
        mu = math.inf
    else:
        mu = gap / sd
    epsilon = math.inf if math.isinf(mu) else float(gdp_epsilon(delta, mu))
    return GaussianFit(mean_in, mean_out, sd, mu, epsilon, delta)
