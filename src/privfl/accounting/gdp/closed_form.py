"""Closed form of unsampled Gaussian steps: exact mu-GDP, no discretisation.

T adaptive releases of a sum with L2 sensitivity s (in units of the clip norm C) plus
N(0, (z C)^2 I) noise are exactly mu-GDP with ``mu = sqrt(sum_T (s/z)^2)`` (Dong, Roth and Su
2019, Corollary 3.3; ``s = 1`` under add/remove, ``s = 2`` under replace-one, where the sum
moves by ``v' - v`` with ``||v' - v|| <= 2``). The privacy profile of mu-GDP is

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)

(their Corollary 2.13), so (epsilon, delta) needs neither a loss grid nor an FFT: the PLD
accountant (:mod:`privfl.accounting.pld`) answers an event made of such steps only here, at
any mu (its grid refused mu = 100 before). The value is the exact one raised by the relative
error allowance of the computed profile, so it is an upper bound, never below the exact value.
"""

from __future__ import annotations

import math

from privfl._validation import check_delta, check_range
from privfl.accounting.events import Neighbouring, Noise, NoisyStep, PrivacyEvent, Sampling
from privfl.accounting.gdp.accountant import GDP_RELATIVE_ERROR, gdp_delta, gdp_epsilon

__all__ = ["CLOSED_FORM", "gdp_closed_form", "unsampled_gaussian", "unsampled_gaussian_mu"]

#: The ``closed_form`` label of a PLD result answered here instead of on a grid.
CLOSED_FORM = "exact mu-GDP (no step is subsampled)"



def unsampled_gaussian(step: NoisyStep) -> bool:
    """Whether ``step`` is a Gaussian release of every record (q = 1): exactly GDP."""
    if not isinstance(step, NoisyStep):
        raise ValueError(f"step = {step!r} is not a NoisyStep")
    return step.noise is Noise.GAUSSIAN and step.effective_sampling is Sampling.NONE


def unsampled_gaussian_mu(event: PrivacyEvent) -> float:
    """mu of the event's unsampled Gaussian steps together, ``sqrt(sum count (s/z)^2)``
    (0 when it has none; other steps are ignored)."""
    if not isinstance(event, PrivacyEvent):
        raise ValueError(f"event = {event!r} is not a PrivacyEvent")
    sensitivity = 2.0 if event.neighbouring is Neighbouring.REPLACE_ONE else 1.0
    mu2 = 0.0
    for step, count in event.steps:
        if count > 0 and unsampled_gaussian(step):
            ratio = sensitivity / step.noise_multiplier
            mu2 += count * (ratio * ratio)
    return math.sqrt(mu2)


def gdp_closed_form(mu: float, *, delta: float | None = None,
                    epsilon: float | None = None) -> tuple[float, float]:
    """``(epsilon, delta)`` of mu-GDP given one of them, on the safe side: the delta at
    ``epsilon`` raised by :data:`GDP_RELATIVE_ERROR`, or the smallest epsilon whose so-raised
    delta is at most ``delta`` (:func:`~privfl.accounting.gdp.gdp_epsilon`, which applies the
    same margin). ``mu = inf`` gives epsilon inf / delta 1."""
    if not isinstance(mu, (int, float)) or isinstance(mu, bool) or not mu >= 0.0:
        raise ValueError(f"mu = {mu!r} is out of range: must be a real number >= 0 (inf allowed)")
    mu = float(mu)
    if (delta is None) == (epsilon is None):
        raise ValueError(f"delta = {delta!r}, epsilon = {epsilon!r} is not allowed: give "
                         "exactly one of them")
    if delta is not None:
        delta = check_delta("delta", delta)
        if mu == 0.0:
            return 0.0, delta
        if math.isinf(mu):
            return math.inf, delta
        return float(gdp_epsilon(delta, mu)), delta  # GDP_RELATIVE_ERROR applied there
    if not (isinstance(epsilon, float) and epsilon == math.inf):
        epsilon = check_range("epsilon", epsilon, 0.0, math.inf)
    if mu == 0.0 or math.isinf(epsilon):
        return epsilon, 0.0
    if math.isinf(mu):
        return epsilon, 1.0
    return epsilon, min(float(gdp_delta(epsilon, mu)) * (1.0 + GDP_RELATIVE_ERROR), 1.0)
