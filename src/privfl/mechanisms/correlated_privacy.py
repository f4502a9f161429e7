"""From an encoder C and a participation bound to labelled privacy numbers, in one call.

The sensitivity of C (:func:`privfl.mechanisms.sensitivity.sensitivity`, exact or a sound
bound) feeds the Gaussian-mechanism accountant of
:mod:`privfl.accounting.correlated_noise`; the sampling label says which participation bound
the guarantee assumes and whether the sensitivity is exact or a bound (both are bounds on
epsilon: an upper bound on s only makes epsilon larger).
"""

from __future__ import annotations

from collections.abc import Sequence

from privfl.accounting.correlated_noise import (
    METHODS,
    calibrate_noise_multiplier,
    gaussian_mechanism_results,
)
from privfl.accounting.results import PrivacyResult
from privfl.mechanisms.sensitivity import Participation, Sensitivity, sensitivity


def participation_label(participation: Participation, found: Sensitivity) -> str:
    """``"<participation>; sensitivity exact|upper bound (<how>)"``."""
    how = "exact" if found.exact else "upper bound"
    return f"{participation.label}; sensitivity {how} ({found.method})"


def factorization_privacy(
    encoder: object,
    participation: Participation,
    noise_multiplier: float,
    delta: float,
    *,
    methods: Sequence[str] = METHODS,
) -> tuple[Sensitivity, list[PrivacyResult]]:
    """The sensitivity of ``encoder`` under ``participation`` and the labelled (epsilon, delta)
    of ``C x + N(0, z^2)`` released over ``participation.steps`` rounds."""
    found = sensitivity(encoder, participation)
    results = gaussian_mechanism_results(
        noise_multiplier,
        found.value,
        delta,
        steps=participation.steps,
        participation=participation_label(participation, found),
        methods=methods,
    )
    return found, results


def calibrate_factorization(
    encoder: object, participation: Participation, epsilon: float, delta: float
) -> tuple[float, Sensitivity, list[PrivacyResult]]:
    """The smallest noise multiplier meeting ``(epsilon, delta)`` (exact GDP), with the
    sensitivity and the labelled results at that noise."""
    found = sensitivity(encoder, participation)
    z = calibrate_noise_multiplier(epsilon, delta, found.value)
    results = gaussian_mechanism_results(
        z,
        found.value,
        delta,
        steps=participation.steps,
        participation=participation_label(participation, found),
    )
    return z, found, results
