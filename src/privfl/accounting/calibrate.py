"""Solve for the missing one of (noise multiplier, steps, sampling rate) under an (epsilon, delta)
budget, with any accountant that supports the event.

Every solution is on the safe side of the target: the returned noise is the smallest found whose
epsilon is <= the target (never the bracket end below it), the returned steps and rate are the
largest whose epsilon is <= the target. The epsilon actually certified at the solution is
returned alongside, so nothing the user asked for is silently changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from privfl._validation import check_delta, check_epsilon, check_int, check_positive, check_rate
from privfl.accounting.events import Neighbouring, Noise, Sampling, Unit, dpsgd_event
from privfl.accounting.methods import AccountingOptions, build_accountant
from privfl.accounting.results import PrivacyResult


@dataclass(frozen=True)
class Calibration:
    """The solved parameter, its value, and the accountant's answer at that value."""

    parameter: str
    value: float
    target_epsilon: float
    result: PrivacyResult

    def to_dict(self) -> dict:
        return {
            "parameter": self.parameter,
            "value": self.value,
            "target_epsilon": self.target_epsilon,
            "result": self.result.to_dict(),
        }


@dataclass(frozen=True)
class DpSgdTemplate:
    """Everything about a DP-SGD run except the parameter being solved for."""

    delta: float
    method: str = "rdp"
    sampling: Sampling = Sampling.POISSON
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    unit: Unit = Unit.RECORD
    noise: Noise = Noise.GAUSSIAN
    options: AccountingOptions = AccountingOptions()

    def epsilon(self, noise_multiplier: float, sampling_rate: float, steps: int) -> PrivacyResult:
        event = dpsgd_event(
            noise_multiplier,
            sampling_rate,
            steps,
            sampling=self.sampling,
            neighbouring=self.neighbouring,
            unit=self.unit,
            noise=self.noise,
        )
        return build_accountant(self.method, self.options).epsilon(event, self.delta)


def _log_bisect(ok: Callable[[float], bool], bad: float, good: float, rtol: float) -> float:
    """Shrink [bad, good] (either order) in log space until the ratio is within 1 + rtol.

    ``ok(good)`` is True and ``ok(bad)`` is False; returns the final ``good`` end.
    """
    while abs(math.log(good / bad)) > math.log1p(rtol):
        middle = math.sqrt(good * bad)
        if ok(middle):
            good = middle
        else:
            bad = middle
    return good


def calibrate_noise(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    *,
    rtol: float = 1e-4,
    **template: object,
) -> Calibration:
    """Smallest noise multiplier z (within relative ``rtol``) with epsilon(z) <= ``epsilon``."""
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon == 0:
        raise ValueError("epsilon = 0.0 is out of range: no finite noise reaches epsilon 0")
    setting = DpSgdTemplate(delta=check_delta("delta", delta), **template)
    sampling_rate = check_rate("sampling_rate", sampling_rate)
    steps = check_int("steps", steps, minimum=1)
    rtol = check_positive("rtol", rtol)

    def ok(z: float) -> bool:
        return setting.epsilon(z, sampling_rate, steps).epsilon <= epsilon

    if ok(1.0):
        good, bad = 1.0, 0.5
        while ok(bad):
            good, bad = bad, bad / 2.0
            if bad < 1e-6:
                raise ValueError(
                    f"epsilon = {epsilon!r} is out of range: met even with noise multiplier "
                    "1e-6; calibrating below that is not meaningful"
                )
    else:
        bad, good = 1.0, 2.0
        while not ok(good):
            bad, good = good, good * 2.0
            if good > 1e6:
                raise ValueError(
                    f"epsilon = {epsilon!r} is out of range: not reached with noise multipliers "
                    "up to 1e6"
                )
    z = _log_bisect(ok, bad, good, rtol)
    return Calibration("noise_multiplier", z, epsilon, setting.epsilon(z, sampling_rate, steps))


def max_steps(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    noise_multiplier: float,
    *,
    limit: int = 10**9,
    **template: object,
) -> Calibration:
    """Largest number of steps T <= ``limit`` with epsilon(T) <= ``epsilon`` (0 if none fits)."""
    epsilon = check_epsilon("epsilon", epsilon)
    setting = DpSgdTemplate(delta=check_delta("delta", delta), **template)
    sampling_rate = check_rate("sampling_rate", sampling_rate)
    noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
    limit = check_int("limit", limit, minimum=1)

    def ok(steps: int) -> bool:
        return setting.epsilon(noise_multiplier, sampling_rate, steps).epsilon <= epsilon

    good, bad = 0, 1
    while bad <= limit and ok(bad):
        good, bad = bad, bad * 2
    bad = min(bad, limit + 1)
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if ok(middle) else (good, middle)
    result = setting.epsilon(noise_multiplier, sampling_rate, good)
    return Calibration("steps", good, epsilon, result)


def max_sampling_rate(
    epsilon: float,
    delta: float,
    noise_multiplier: float,
    steps: int,
    *,
    rtol: float = 1e-4,
    **template: object,
) -> Calibration:
    """Largest sampling rate q in (0, 1] (to relative ``rtol``) with epsilon(q) <= ``epsilon``."""
    epsilon = check_epsilon("epsilon", epsilon)
    setting = DpSgdTemplate(delta=check_delta("delta", delta), **template)
    noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
    steps = check_int("steps", steps, minimum=1)
    rtol = check_positive("rtol", rtol)

    def ok(q: float) -> bool:
        return setting.epsilon(noise_multiplier, q, steps).epsilon <= epsilon

    if ok(1.0):
        q = 1.0
    else:
        good = 0.5
        while not ok(good):
            good /= 2.0
            if good < 1e-12:
                raise ValueError(
                    f"epsilon = {epsilon!r} is out of range: not reached with sampling rates "
                    "down to 1e-12"
                )
        q = _log_bisect(ok, min(1.0, good * 2.0), good, rtol)
    return Calibration("sampling_rate", q, epsilon, setting.epsilon(noise_multiplier, q, steps))
