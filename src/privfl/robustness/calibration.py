"""Confidence bounds for Monte Carlo estimates of expected scores and costs.

The certificates of Xie et al. 2023 need expectations over the training randomness
(``F_c = E[f_c(M(D), x)]``, ``J = E[C(M(D))]``); with M independently trained models they are
estimated by sample means, and a certificate is rigorous (with a stated probability) only when
computed from confidence bounds of those means.

* Hoeffding (1963): for M i.i.d. values in [a, a + w], ``P(mean - E > t) <= exp(-2 M t^2 / w^2)``,
  so ``mean - w sqrt(ln(1/alpha) / (2 M))`` is a lower bound of the expectation with probability
  >= 1 - alpha (:func:`hoeffding_radius`); any [0, 1] scores (softmax or votes).
* Clopper and Pearson (1934): the exact one-sided binomial bounds from Beta quantiles
  (:func:`clopper_pearson_lower`, :func:`clopper_pearson_upper`); for hard votes, where a class's
  vote count over M models is Binomial(M, F_c). Tighter than Hoeffding, above all near 0 and 1.

Selection of the classes. The top class A and runner-up B are chosen on the same samples that
bound them. ``adjustment="simultaneous"`` (the default) makes the bounds hold for every class at
once, so any data-dependent choice of A and B is covered: with C = 2 classes (scores summing to
1, so ``F_B = 1 - F_A``) one two-sided interval of F_0 at level 1 - alpha (alpha/2 per side);
with C > 2 a Bonferroni split over the 2C one-sided bounds (alpha/(2C) each). The certificate
then holds with probability >= 1 - alpha. ``adjustment="none"`` is Xie et al. 2023's calibration
(Section 6.3.3): each of the two one-sided bounds at level 1 - alpha, no adjustment for the
selection; what it guarantees is ``1 - 2 alpha`` (C = 2) or ``1 - 2 C alpha`` (C > 2), which
:func:`guaranteed_confidence` states.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from privfl._validation import check_choice, check_int, check_range

__all__ = [
    "ADJUSTMENTS",
    "check_confidence",
    "check_counts",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "guaranteed_confidence",
    "hoeffding_radius",
    "side_level",
]

#: How the level of each one-sided bound is set (see the module docstring).
ADJUSTMENTS = ("simultaneous", "none")


def check_confidence(confidence: object) -> float:
    """A confidence level in (0, 1)."""
    return check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)


def side_level(confidence: float, classes: int, adjustment: str = "simultaneous") -> float:
    """The error probability of each one-sided bound.

    ``"none"``: ``1 - confidence`` (Xie et al. 2023). ``"simultaneous"``: ``(1 - confidence)/2``
    for two classes (one two-sided interval), ``(1 - confidence)/(2 C)`` for C > 2 (Bonferroni).
    """
    alpha = 1.0 - check_confidence(confidence)
    classes = check_int("classes", classes, 2)
    adjustment = check_choice("adjustment", adjustment, ADJUSTMENTS)
    if adjustment == "none":
        return alpha
    return alpha / (2 if classes == 2 else 2 * classes)


def guaranteed_confidence(
    confidence: float, classes: int, adjustment: str = "simultaneous"
) -> float:
    """The probability with which a certificate from these bounds is proven to hold, when A and B
    are selected on the same samples: ``confidence`` for ``"simultaneous"``; for ``"none"`` the
    union of the lower and upper tails of every class, ``1 - 2 alpha`` (C = 2) or
    ``1 - 2 C alpha`` (C > 2), at least 0."""
    level = side_level(confidence, classes, adjustment)
    if adjustment == "simultaneous":
        return float(confidence)
    events = 2 if classes == 2 else 2 * classes
    return max(0.0, 1.0 - events * level)


def hoeffding_radius(models: int, level: float, width: float = 1.0) -> float:
    """``width * sqrt(ln(1/level) / (2 M))``: one-sided Hoeffding deviation of the mean of M
    i.i.d. values in an interval of length ``width``, exceeded with probability <= ``level``."""
    models = check_int("models", models, 1)
    level = check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    width = check_range("width", width, 0.0, math.inf, low_open=True, high_open=True)
    return width * math.sqrt(math.log(1.0 / level) / (2.0 * models))


def check_counts(
    successes: object, trials: object, names: tuple[str, str] = ("successes", "trials")
) -> tuple[np.ndarray, int]:
    """Integer counts in [0, trials] (as floats) and ``trials`` >= 1; errors name ``names``."""
    trials = check_int(names[1], trials, 1)
    try:
        counts = np.asarray(successes, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{names[0]} = {successes!r} is not an array of counts") from None
    bad = ~np.isfinite(counts) | (counts < 0) | (counts > trials) | (counts != np.round(counts))
    if np.any(bad):
        raise ValueError(
            f"{names[0]} = {float(counts[bad].flat[0])!r} is out of range: must be an integer "
            f"count in [0, {trials}]"
        )
    return counts, trials


def clopper_pearson_lower(successes: object, trials: int, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson lower bound of a binomial proportion: the ``level`` quantile of
    Beta(x, n - x + 1) (0 when x = 0); ``P(p < bound) <= level`` for every p."""
    x, n = check_counts(successes, trials)
    level = check_range("level", level, 0.0, 1.0, low_open=True, high_open=True)
    safe = np.maximum(x, 1.0)
    return np.where(x > 0, stats.beta.ppf(level, safe, n - safe + 1.0), 0.0)


def clopper_pearson_upper(successes: object, trials: int, level: float) -> np.ndarray:
    """One-sided Clopper-Pearson upper bound: ``1 - lower(n - x)``; ``P(p > bound) <= level``."""
    x, n = check_counts(successes, trials)
    return 1.0 - clopper_pearson_lower(n - x, n, level)
