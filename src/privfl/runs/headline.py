"""The headline: one sentence that says what a run's privacy number is, and which scope to report.

The number is the one budgets and the privacy card use, never recomputed here: the tightest
rigorous bound (:func:`~privfl.algorithms.base.tightest_bound`) among the results valid for
what the run releases (:func:`~privfl.algorithms.base.budget_results`, i.e. the plan's
:func:`~privfl.algorithms.base.headline_scopes`), selected by
:func:`privfl.runs.plan_headline.plan_headline` (this module only words it, so that
``report`` does not import the engine). The sentence reads::

    epsilon = 12.52 at delta = 1e-5 (PLD bound, record level, weak scope)

followed by the scope advice: which scope(s) the number is for and why (a plan may explain its
scopes in an optional ``scope_notes`` mapping ``scope -> text``), and the tightest bound of
every other scope, so that a reader whose threat model is another scope reports that one.
Estimates never make a headline: without a rigorous bound the sentence says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from privfl.accounting.results import PrivacyResult
from privfl.runs.reading import READ_RELATIONS, plain_reading
from privfl.runs.rounding import format_bound

__all__ = ["Headline", "compose_headline", "format_delta", "method_name"]


def format_delta(delta: float) -> str:
    """delta rounded up (:func:`~privfl.runs.rounding.format_bound`) without exponent padding:
    ``1e-05 -> "1e-5"``, ``0.001 -> "0.001"``."""
    text = format_bound(float(delta))
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else ""
        text = f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text


def method_name(method: str) -> str:
    """Accountant names as people write them: short alphabetic ones upper case (``pld ->
    PLD``, ``rdp -> RDP``), the others unchanged (``gdp-clt``, ``contraction``)."""
    return method.upper() if method.isalpha() and len(method) <= 4 else method


def _epsilon(value: float) -> str:
    """epsilon rounded up to 4 significant digits (``3.85104 -> "3.852"``)."""
    return format_bound(value, 4)


def _clause(result: PrivacyResult, scope: str) -> str:
    unit = f"{result.unit} level"
    where = f", {scope} scope" if scope else ""
    return (f"epsilon = {_epsilon(result.epsilon)} at delta = {format_delta(result.delta)} "
            f"({method_name(result.method)} {result.kind}, {unit}{where})")


@dataclass(frozen=True)
class Headline:
    """The headline of a run's privacy (see the module docstring).

    ``sentence``: the one sentence; ``advice``: which scope to report and why (may be empty);
    ``result``: the headline bound (None without one); ``others``: ``scope -> tightest bound``
    of the scopes outside the headline; ``reading``: the bound in plain words
    (:func:`privfl.runs.reading.plain_reading`; empty without a bound)."""

    sentence: str
    advice: str = ""
    result: PrivacyResult | None = None
    others: Mapping[str, PrivacyResult] = field(default_factory=dict)
    reading: str = ""

    def to_dict(self) -> dict[str, Any]:
        """summary.json's ``headline``."""
        out: dict[str, Any] = {"sentence": self.sentence, "advice": self.advice,
                               "reading": self.reading}
        if self.result is not None:
            r = self.result
            out.update(epsilon=float(r.epsilon), delta=float(r.delta), method=r.method,
                       kind=r.kind, unit=r.unit, neighbouring=r.neighbouring,
                       scope=str(r.extras.get("scope", "")))
        return out

    def text(self) -> str:
        """The sentence, the advice and the plain-words reading, as ``privfl run`` prints them
        (one paragraph each)."""
        return "\n\n".join(p for p in (self.sentence, self.advice, self.reading) if p)


def compose_headline(best: PrivacyResult | None, *, private: bool,
                     scopes: Sequence[str] = (), others: Mapping[str, PrivacyResult] | None = None,
                     notes: Mapping[str, str] | None = None) -> Headline:
    """The headline from the already selected numbers (selection:
    :func:`privfl.runs.plan_headline.plan_headline`).

    ``best``: the tightest rigorous bound valid for what is released (None: none);
    ``private``: False for a non-private run; ``scopes``: the headline scopes; ``others``:
    ``scope -> tightest bound`` of every other scope; ``notes``: ``scope -> why``."""
    notes = notes or {}
    others = dict(others or {})
    if not private:
        return Headline("No privacy guarantee: this run is not private (no noise is added), so "
                        "nothing it releases is protected.")
    if best is None:
        return Headline("No rigorous bound: the accountants of this run give only estimates "
                        "(see the card), which can be below the true epsilon; add a bound "
                        "accountant (pld or rdp) to privacy.accountants.")
    scopes = tuple(s for s in scopes if s)
    sentence = _clause(best, str(best.extras.get("scope", ""))) + "."
    advice = []
    if scopes:
        which = " or ".join(scopes)
        why = "; ".join(notes[s] if len(scopes) == 1 else f"{s}: {notes[s]}"
                        for s in scopes if s in notes)
        advice.append(f"Report the {which} scope: "
                      + (f"{why}." if why else "the one valid for what this run releases."))
    for other, r in others.items():
        why = f" ({notes[other]})" if other in notes else ""
        advice.append(f"Other scope, {other}{why}: {_clause(r, other)}.")
    reading = (plain_reading(best.epsilon, best.delta, best.unit, best.neighbouring)
               if best.unit in ("record", "client") and best.neighbouring in READ_RELATIONS
               else "")
    return Headline(sentence, " ".join(advice), best, others, reading)
