"""The headline in plain words: what an attacker can and cannot learn at a run's (epsilon, delta).

Everything the reading says follows from (epsilon, delta)-DP alone, for any attacker who sees
the outputs the guarantee covers and knows everything else. (epsilon, delta)-DP compares two
worlds that differ in one unit (record or client) as the neighbouring relation says: with or
without it (add/remove), or with one of two values for it (replace-one: a guarantee that hides
*which* value, not *whether* the unit took part), or with its contributions zeroed
(replace-with-zero). Every event has probability at most ``e^epsilon`` times its probability
in the other world, plus ``delta``.

* The hypothesis-testing view (Wasserman and Zhou 2010; the tight region of Kairouz, Oh and
  Viswanath 2015, Theorem 2.1): a test between the two worlds whose false-positive rate is
  ``FPR`` has a true-positive rate at most
  ``TPR(FPR) = min(1, e^epsilon FPR + delta, 1 - e^-epsilon (1 - delta - FPR))``. The reading
  quotes it at FPR = 1 % and 0.1 % (:data:`FALSE_POSITIVE_RATES`), where membership attacks are
  judged (Carlini et al. 2022, *Membership inference attacks from first principles*).
* An attacker who thought both worlds equally likely ends at most ``e^epsilon / (1 +
  e^epsilon)`` sure of the right one (the e^epsilon factor alone; delta adds its own slack).

Percentages are rounded up to three significant digits (:func:`~privfl.runs.rounding.
round_bound`: 47.05 % prints 47.1 %), never shown below the bound. The verdict sentence is
chosen from these numbers (:func:`verdict`): ``cannot reliably tell`` only when a test that
wrongly accuses 1 % catches at most 10 % (:data:`RELIABLE`: at least nine in ten go undetected);
``is not kept from telling`` when a test that wrongly accuses 1 % may catch half or more
(:data:`EXPOSED`: an attack that works on most); in between, ``may be able to tell ... in some
cases``. The scale is the
three tiers of Ponomareva et al. 2023 (*How to DP-fy ML*, JAIR 77, Section 5.2): epsilon <= 1
strong, <= 10 reasonable (the range most published DP deep learning reports), above 10 weak;
where the numbers allow strong attacks the reading says that the tier names what is published,
not that attacks fail. All are worst-case bounds implied by the guarantee, not a measured attack.
"""

from __future__ import annotations

import math

from privfl._validation import check_choice
from privfl.runs.rounding import format_bound, round_bound

__all__ = ["EXPOSED", "FALSE_POSITIVE_RATES", "READ_RELATIONS", "RELIABLE", "attack_bound",
           "plain_reading", "scale_tier", "verdict"]

#: the false-positive rates at which the attack success is quoted (1 % and 0.1 %)
FALSE_POSITIVE_RATES = (0.01, 0.001)
#: TPR at 1 % FPR up to which an attacker "cannot reliably tell" (nine in ten go undetected)
RELIABLE = 0.10
#: TPR at 1 % FPR from which the guarantee "rules out little" (half may be caught)
EXPOSED = 0.50

_UNITS = {  # who, it, many
    "record": ("any one training record (one example of one client)", "that record", "records"),
    "client": ("any one client (everything it holds)", "that client", "clients"),
}
#: the neighbouring relations the reading words
READ_RELATIONS = ("add-remove", "replace-one", "replace-with-zero")


def scale_tier(epsilon: float) -> str:
    """``strong`` (epsilon <= 1), ``reasonable`` (<= 10) or ``weak`` (above 10): the tiers of
    Ponomareva et al. 2023, Section 5.2."""
    if not epsilon >= 0:  # NaN too
        raise ValueError(f"epsilon = {epsilon!r} is out of range: must be >= 0")
    return "strong" if epsilon <= 1 else "reasonable" if epsilon <= 10 else "weak"


def attack_bound(epsilon: float, delta: float, false_positive_rate: float) -> float:
    """The largest true-positive rate of any test at ``false_positive_rate`` against
    (epsilon, delta)-DP: ``min(1, e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))`` (Kairouz,
    Oh and Viswanath 2015, Theorem 2.1)."""
    scale_tier(epsilon)
    _check_delta(delta)
    if not 0 <= false_positive_rate <= 1:
        raise ValueError(f"false_positive_rate = {false_positive_rate!r} is out of range: "
                         "must be in [0, 1]")
    grow = math.exp(min(epsilon, 700.0))
    return min(1.0, grow * false_positive_rate + delta,
               1.0 - (1.0 - delta - false_positive_rate) / grow)


def verdict(epsilon: float, delta: float) -> str:
    """``reliable`` (TPR at 1 % FPR <= :data:`RELIABLE`), ``exposed`` (>= :data:`EXPOSED`) or
    ``partial``: which verdict sentence the reading prints."""
    at_one = attack_bound(epsilon, delta, FALSE_POSITIVE_RATES[0])
    return "reliable" if at_one <= RELIABLE else "exposed" if at_one >= EXPOSED else "partial"


def plain_reading(epsilon: float, delta: float, unit: str, neighbouring: str) -> str:
    """One paragraph: what (epsilon, delta)-DP at ``unit`` (record or client) between
    ``neighbouring`` datasets (add-remove, replace-one, replace-with-zero) lets an attacker
    learn, with the scale it sits on (module docstring)."""
    tier = scale_tier(epsilon)
    _check_delta(delta)
    who, it, many = _UNITS[check_choice("unit", unit, _UNITS)]
    relation = check_choice("neighbouring", neighbouring, READ_RELATIONS)
    question, worlds, accused, caught, hidden = _relation_words(relation, unit, it, many)
    at_one, at_tenth = (_percent(attack_bound(epsilon, delta, a)) for a in FALSE_POSITIVE_RATES)
    sure = _percent(1.0 / (1.0 + math.exp(-min(epsilon, 700.0))))
    judged = verdict(epsilon, delta)
    told = {"reliable": f"cannot reliably tell {question}",
            "partial": f"may be able to tell {question} in some cases",
            "exposed": f"is not kept from telling {question} (the bounds rule out little)"
            }[judged]
    scale = (f"this epsilon is {tier}." if judged == "reliable" else
             f"this epsilon is {tier}: formally valid, but little protection against a "
             "determined attacker." if tier == "weak" else
             f"this epsilon is {tier}, a name for what published models reach, not a claim "
             "that attacks fail: the numbers above are what it allows.")
    return (
        f"In plain words: for {who}, the guarantee compares two worlds that differ only in "
        f"{worlds}.{hidden} An attacker who sees the outputs this guarantee covers and knows "
        f"everything else {told}: any test that wrongly accuses 1% of the {many} {accused} "
        f"catches at most {at_one} of those {caught}, and one that wrongly accuses 0.1% at "
        f"most {at_tenth} (the tight (epsilon, delta) test region of Kairouz, Oh and Viswanath "
        "2015: min(e^epsilon x FPR + delta, 1 - e^-epsilon x (1 - delta - FPR))). An attacker "
        f"who thought both worlds equally likely ends at most {sure} sure of the right one "
        "(from the e^epsilon factor; delta adds its own slack). On the usual scale "
        "(Ponomareva et al. 2023, How to DP-fy ML, Section 5.2: epsilon <= 1 strong, <= 10 "
        f"reasonable, above 10 weak) {scale} delta = {format_bound(delta)} is the extra "
        "probability the e^epsilon factor does not cover: any event (set of outputs) is at "
        "most e^epsilon times as likely in one world as in the other, plus delta; it should be "
        f"well below one over the number of {many}.")


def _relation_words(relation: str, unit: str, it: str, many: str
                    ) -> tuple[str, str, str, str, str]:
    """(question, the worlds' difference, the accused, the caught, what is not hidden)."""
    record = unit == "record"
    if relation == "replace-one":
        hidden = (" It hides which value the data had, not whether a record or a client took "
                  "part." if record else " It hides which data the client held, not whether "
                  "it took part.")
        return (f"which of two values {it} had", f"which of two possible values {it} had",
                "that had the first value", "that had the second", hidden)
    if relation == "replace-with-zero":
        return (f"whether {it} contributed", f"whether {it}'s contributions were counted or "
                "replaced by zeros", "whose contributions were zeroed", "whose were counted",
                f" It hides what {it} contributed, not whether it was enrolled.")
    hidden = (" Whether a client took part is not hidden." if record else
              " This covers whether the client took part at all.")
    return (f"whether {it} was used", f"whether {it} was in the training data",
            "that were not used", "that were", hidden)


def _check_delta(delta: float) -> None:
    if not 0 <= delta < 1:
        raise ValueError(f"delta = {delta!r} is out of range: must be in [0, 1)")


def _percent(fraction: float) -> str:
    """An upper bound as a percentage rounded up to three significant digits (never below the
    bound): ``0.47051 -> "47.1%"``, ``0.027192 -> "2.72%"``, ``1 -> "100%"``."""
    percent = 100.0 * min(fraction, 1.0)
    return f"{round_bound(percent, 3):.3g}%" if percent > 0 else "0%"
