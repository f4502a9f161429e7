"""The headline in plain words: what an attacker can and cannot learn at a run's (epsilon, delta).

Two readings follow from (epsilon, delta)-DP alone, for any attacker who sees the outputs the
guarantee covers and knows everything else (the hypothesis-testing view of Wasserman and Zhou
2010 and Kairouz, Oh and Viswanath 2015):

* a membership test that wrongly flags a fraction ``alpha`` of the units that were not used
  catches at most ``exp(epsilon) * alpha + delta`` of those that were (shown at alpha = 1 %);
* an attacker who thought it an even chance that the unit was used can end at most
  ``exp(epsilon) / (1 + exp(epsilon))`` sure (ignoring the delta chance).

The scale is the three tiers of Ponomareva et al. 2023 (*How to DP-fy ML*, JAIR 77, Section
5.2): epsilon <= 1 strong, <= 10 reasonable (the range most published DP deep learning
reports), above 10 weak. Both readings are worst-case bounds implied by the guarantee, not a
measured attack.
"""

from __future__ import annotations

import math

from privfl._validation import check_choice

__all__ = ["FALSE_POSITIVE_RATE", "plain_reading", "scale_tier"]

#: the false-positive rate at which the membership reading is given
FALSE_POSITIVE_RATE = 0.01

_WHAT = {
    "record": ("any one training record (one example of one client)",
               "that record", "records", " Whether a client took part is not hidden."),
    "client": ("any one client (everything it holds)", "that client", "clients",
               " This covers whether the client took part at all."),
}


def scale_tier(epsilon: float) -> str:
    """``strong`` (epsilon <= 1), ``reasonable`` (<= 10) or ``weak`` (above 10): the tiers of
    Ponomareva et al. 2023, Section 5.2."""
    if not epsilon >= 0:  # NaN too
        raise ValueError(f"epsilon = {epsilon!r} is out of range: must be >= 0")
    return "strong" if epsilon <= 1 else "reasonable" if epsilon <= 10 else "weak"


def plain_reading(epsilon: float, delta: float, unit: str) -> str:
    """One paragraph: what (epsilon, delta)-DP at ``unit`` (record or client) lets an attacker
    learn, with the scale it sits on (module docstring)."""
    tier = scale_tier(epsilon)
    if not 0 <= delta < 1:
        raise ValueError(f"delta = {delta!r} is out of range: must be in [0, 1)")
    who, it, many, participation = _WHAT[check_choice("unit", unit, _WHAT)]
    alpha = FALSE_POSITIVE_RATE
    caught = min(1.0, math.exp(min(epsilon, 700.0)) * alpha + delta)
    sure = 1.0 / (1.0 + math.exp(-min(epsilon, 700.0)))
    return (
        f"In plain words: for {who}, an attacker who sees the outputs this guarantee covers "
        f"and knows everything else "
        + (f"cannot reliably tell whether {it} was used." if tier != "weak" else
           f"is not kept from telling whether {it} was used: the bounds rule out little.")
        + " Any test that "
        f"wrongly accuses {alpha:.0%} of the {many} that were not used catches at most "
        f"{_percent(caught)} of those that were (e^epsilon x {alpha:.0%} + delta; Kairouz, Oh "
        "and Viswanath 2015), and an attacker who thought it an even chance ends at most "
        f"{_percent(sure)} sure (ignoring the delta chance).{participation} On the usual "
        "scale (Ponomareva et al. 2023, How to DP-fy ML, Section 5.2: epsilon <= 1 strong, "
        f"<= 10 reasonable, above 10 weak) this epsilon is {tier}"
        + (": formally valid, but little protection against a determined attacker."
           if tier == "weak" else ".")
        + f" delta = {delta:g} is the chance the guarantee may not hold at all; it should be "
        f"well below one over the number of {many}.")


def _percent(fraction: float) -> str:
    """An upper bound as a percentage rounded up (never below the bound): whole percents from
    10 %, one decimal below, more digits near 100 % (``2.8%``, ``48%``, ``99.97%``)."""
    percent = 100.0 * fraction
    for digits in range(0, 7):
        scale = 10**digits
        shown = math.ceil(percent * scale) / scale
        if shown < 100 and (digits or percent >= 10):
            return f"{shown:.{digits}f}%"
        if shown >= 100 and fraction >= 1:
            return "100%"
    return "almost 100%"
