"""Printed privacy numbers are never below the bound (:mod:`privfl.runs.rounding`): epsilon,
delta and mu round up everywhere they are printed, a lower reference rounds down."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.accounting.results import PrivacyResult
from privfl.runs.card import card_markdown
from privfl.runs.headline import compose_headline, format_delta
from privfl.runs.progress import round_status
from privfl.runs.rounding import format_bound, round_bound


def _bound(epsilon: float, *, delta: float = 1e-5, kind: str = "bound",
           method: str = "pld", mu: float | None = None) -> PrivacyResult:
    extras = {"scope": "", **({"mu": mu} if mu is not None else {})}
    return PrivacyResult(method, kind, epsilon, delta, "client", "add-remove",
                         "poisson (q=0.1) of clients", "final model", 30, extras)


def test_the_headlines_of_the_issue_round_up():
    # rounded to nearest these printed 4.284 and 3.851: below the bounds that were proven
    assert compose_headline(_bound(4.28433), private=True).sentence.startswith(
        "epsilon = 4.285 at delta = 1e-5 (PLD bound, client level).")
    assert "epsilon = 3.852 at" in compose_headline(_bound(3.85104), private=True).sentence
    assert format_delta(1e-5) == "1e-5" and format_delta(2.000001e-7) == "2.00001e-7"


def test_every_surface_rounds_the_same_way():
    result = _bound(3.85104, mu=0.712341)
    # the privacy card (console and report.md), compare's cells and the round line
    assert "| 3.85104 | 1e-05 | 0.712341 |" in card_markdown({}, [result])
    assert "| 3.85105 |" in card_markdown({}, [_bound(3.851041)])
    row = {"round": 30, "scope": "", "privacy": [{**result.to_dict(), "epsilon": 3.85104}]}
    assert round_status({}, row) == "  eps 3.852 (PLD)"


@pytest.mark.parametrize(("value", "digits", "kind", "shown"), [
    (4.28433, 4, "bound", "4.285"), (3.85104, 4, "bound", "3.852"), (6.187, 4, "bound", "6.187"),
    (3.85104, 4, "reference", "3.851"), (3.85104, 3, "estimate", "3.86"),
    (1e-5, 6, "bound", "1e-05"), (0.1 + 0.2, 6, "bound", "0.300001"),
    (123456.7, 6, "bound", "1.2346e+05"), (2.0, 6, "bound", "2"), (0.0, 6, "bound", "0"),
    (math.inf, 4, "bound", "inf"), (math.nan, 4, "bound", "nan"), ("", 6, "bound", ""),
])
def test_golden_strings(value, digits, kind, shown):
    assert format_bound(value, digits, kind=kind) == shown


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-12, 9e4), st.integers(1, 8))
def test_the_printed_number_is_never_below_a_bound_nor_above_a_reference(value, digits):
    # independent check in exact decimal arithmetic against the float's shortest decimal
    exact = Decimal(repr(value))
    up = Decimal(format_bound(value, digits))
    down = Decimal(format_bound(value, digits, kind="reference"))
    assert down <= exact <= up
    # and no coarser than the digits asked for: one unit in the last place at most
    unit = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    assert up - exact < unit + unit / 10 and exact - down < unit + unit / 10
    assert round_bound(value, digits) >= value


@pytest.mark.parametrize(("args", "message"), [
    ((1.0, 0), r"digits = 0 is out of range: must be an integer in \[1, 15\]"),
    ((1.0, 16), r"digits = 16 is out of range"),
])
def test_bad_inputs_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        round_bound(*args)
    with pytest.raises(ValueError, match=r"kind = 'lower' is not allowed"):
        format_bound(1.0, kind="lower")
