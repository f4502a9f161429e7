"""Monte Carlo estimates of the hockey-stick divergence, with rigorous or CLT intervals.

Monte Carlo (:func:`monte_carlo_hockey_stick`)
----------------------------------------------
With X ~ P and the privacy loss ``L = log p(X) - log q(X)`` (a sum over factors for products),
``E_g(P || Q) = E[(1 - e^{epsilon - L})_+]``, the mean of a variable in [0, 1]. The estimator is
the sample mean over ``samples`` i.i.d. draws from a seeded ``numpy.random.Generator``, drawn in
chunks (memory stays bounded). Intervals at level ``confidence``:

* ``"bernstein"`` (default, rigorous for every n >= 2): the empirical-Bernstein bound of Maurer
  and Pontil (2009, Theorem 4) applied to Y and 1 - Y, each side at ``(1 - confidence) / 2``:
  ``mean +- ( sqrt(2 V ln(4 / (1 - c)) / n) + 7 ln(4 / (1 - c)) / (3 (n - 1)) )`` with V the
  unbiased sample variance. Each one-sided bound holds with probability >= 1 - (1 - c)/2.
* ``"clt"``: ``mean +- z_{(1+c)/2} sd / sqrt(n)``, the usual normal approximation (not a
  guarantee; poor when few draws have L > epsilon).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from privfl._validation import check_choice, check_epsilon, check_int, check_range
from privfl.accounting.audit.laws import Law, MixtureLaw, aligned_factors, check_law

INTERVALS = ("bernstein", "clt")


@dataclass(frozen=True)
class MonteCarloEstimate:
    """Monte Carlo estimate of ``E_g(P || Q)`` with an interval at level ``confidence``.

    ``interval`` names the interval: ``"bernstein"`` (empirical Bernstein, rigorous for every
    n; each one-sided end holds with probability >= 1 - (1 - confidence)/2) or ``"clt"`` (normal
    approximation). ``std_error`` is the sample standard deviation over sqrt(samples).
    """

    estimate: float
    lower: float
    upper: float
    std_error: float
    samples: int
    confidence: float
    interval: str
    seed: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "lower": self.lower,
            "upper": self.upper,
            "std_error": self.std_error,
            "samples": self.samples,
            "confidence": self.confidence,
            "interval": self.interval,
            "seed": self.seed,
        }


def _loss_sampler(P: Law, Q: Law) -> list[tuple[MixtureLaw, MixtureLaw, int]]:
    if isinstance(P, MixtureLaw) and isinstance(Q, MixtureLaw):
        return [(P, Q, 1)]
    return aligned_factors(P, Q)


def _interval(
    mean: float, variance: float, n: int, confidence: float, kind: str
) -> tuple[float, float]:
    if kind == "clt":
        z = float(special.ndtri(0.5 + 0.5 * confidence))
        half = z * math.sqrt(variance / n)
    else:  # Maurer & Pontil (2009), Thm 4, on Y and 1 - Y, each side at (1 - c)/2
        log_term = math.log(4.0 / (1.0 - confidence))
        half = math.sqrt(2.0 * variance * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
    return max(0.0, mean - half), min(1.0, mean + half)


def _monte_carlo(
    P: Law,
    Q: Law,
    epsilon: float,
    samples: int,
    rng: np.random.Generator,
    confidence: float,
    interval: str,
    seed: int | None,
) -> MonteCarloEstimate:
    factors = _loss_sampler(P, Q)
    steps = sum(c for _, _, c in factors)
    chunk = max(1, min(samples, (1 << 22) // max(1, steps)))
    count = 0
    mean = 0.0
    m2 = 0.0
    done = 0
    while done < samples:
        n = min(chunk, samples - done)
        loss = np.zeros(n)
        for p, q, c in factors:
            x = p.sample((n, c), rng)
            loss += (p.logpdf(x) - q.logpdf(x)).sum(axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            y = np.where(loss > epsilon, -np.expm1(epsilon - loss), 0.0)
        y = np.where(np.isposinf(loss), 1.0, y)
        # Chan et al. parallel update of mean and sum of squared deviations
        batch_mean = float(np.mean(y))
        batch_m2 = float(np.sum((y - batch_mean) ** 2))
        total = count + n
        delta_mean = batch_mean - mean
        mean += delta_mean * n / total
        m2 += batch_m2 + delta_mean * delta_mean * count * n / total
        count = total
        done += n
    variance = m2 / (count - 1)
    lower, upper = _interval(mean, variance, count, confidence, interval)
    return MonteCarloEstimate(
        estimate=mean,
        lower=lower,
        upper=upper,
        std_error=math.sqrt(variance / count),
        samples=count,
        confidence=confidence,
        interval=interval,
        seed=seed,
    )


def _rng(seed: object) -> tuple[np.random.Generator, int | None]:
    if isinstance(seed, np.random.Generator):
        return seed, None
    if seed is None:
        return np.random.default_rng(), None
    value = check_int("seed", seed, minimum=0)
    return np.random.default_rng(value), value


def monte_carlo_hockey_stick(
    P: Law,
    Q: Law,
    epsilon: float,
    samples: int,
    *,
    seed: int | np.random.Generator | None = 0,
    confidence: float = 0.99,
    interval: str = "bernstein",
) -> MonteCarloEstimate:
    """Monte Carlo ``E_g(P || Q) = E_{X~P}[(1 - e^{epsilon - L(X)})_+]``, L = log p/q.

    ``samples`` (>= 2) i.i.d. draws from ``P`` (for a product, one draw per step, losses summed),
    using ``numpy.random.default_rng(seed)`` (or the given Generator). ``interval`` is
    ``"bernstein"`` (rigorous empirical-Bernstein interval) or ``"clt"`` (normal approximation),
    at two-sided level ``confidence`` in (0, 1).
    """
    P = check_law("P", P)
    Q = check_law("Q", Q)
    epsilon = check_epsilon("epsilon", epsilon)
    samples = check_int("samples", samples, minimum=2)
    confidence = check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)
    interval = check_choice("interval", interval, INTERVALS)
    rng, seed_value = _rng(seed)
    return _monte_carlo(P, Q, epsilon, samples, rng, confidence, interval, seed_value)
