"""One row of a reproduction table: a quantity, the paper's value, privfl's, and the verdict.

A :class:`Row` compares what a paper prints (``paper``, with ``source``: its table, figure,
equation or section) with what privfl computes (``privfl``). Values are numbers, a closed interval
``(low, high)`` (a range the paper's own bound gives) or a short text (a qualitative claim such as
an ordering). :func:`compare` builds a row and decides its verdict from the numbers alone:

* ``match``: ``|rel_diff| <= tolerance`` (numbers), ``low <= privfl <= high`` (the paper's
  interval), ``low <= paper <= high`` (privfl's interval: the prediction interval of training
  seeds, :mod:`privfl.reproduce.seeds`), or the same text;
* ``differs``: anything else, and every row without a tolerance (a training run at another scale
  or on another dataset is never a match). A ``differs`` row must say why (``reason``): the
  paper's error, a different dataset or scale, a bound privfl proves tighter, an estimate the paper
  presents as a bound.

Every row has a ``basis``, what its ``paper`` column is (:data:`BASES`):

* ``printed``: a number or claim the paper prints, or a formula it prints evaluated on the stated
  inputs, with its table, figure or equation (``source``);
* ``derived``: privfl's conversion of a printed number (the ``reason`` says from which), so the
  ``paper`` column holds privfl's value;
* ``check``: an identity or formula evaluated twice (both columns privfl's; a match tests
  privfl's code, not the paper);
* ``extension``: privfl's own result, not in the paper.

Only ``printed`` rows that match count as reproduced (:meth:`Reproduction.reproduced`).

The relative difference is ``(privfl - paper) / |paper|``. ``tolerance="printed"`` is half a unit
of the last digit the paper prints, relative to its value (``"2.71"``: 0.005 / 2.71), the
precision at which a recomputed number can match a printed one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = ["BASES", "HEADER", "MATCH", "DIFFERS", "Reproduction", "Row", "basis_summary",
           "cells", "compare", "format_value", "printed_tolerance", "rel_diff"]

MATCH, DIFFERS = "match", "differs"
#: what a row's ``paper`` column is (see the module docstring)
BASES = ("printed", "derived", "check", "extension")
#: the columns of a printed table (:func:`cells`)
HEADER = ("quantity", "source", "basis", "paper", "privfl", "rel. diff", "tolerance", "verdict",
          "reason")

#: a paper's or privfl's value: a number, an interval (low, high), a text, or None (no value)
Value = float | tuple[float, float] | str | None


def printed_tolerance(text: str) -> float:
    """Half a unit of the last printed digit of ``text``, relative to its value
    (``"2.71"`` -> 0.005 / 2.71; ``"1.5e-6"`` -> 0.05e-6 / 1.5e-6)."""
    number = Decimal(text.strip())
    if not number.is_finite() or number == 0:
        raise ValueError(f"paper value {text!r}: a printed tolerance needs a finite, non-zero "
                         "number")
    exponent = number.as_tuple().exponent
    assert isinstance(exponent, int)
    return float(Decimal(5).scaleb(exponent - 1) / abs(number))


def rel_diff(paper: Value, privfl: Value) -> float | None:
    """``(privfl - paper) / |paper|`` for two finite numbers (paper non-zero), else None."""
    if not (_is_number(paper) and _is_number(privfl)) or paper == 0:
        return None
    return (float(privfl) - float(paper)) / abs(float(paper))


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


@dataclass(frozen=True)
class Row:
    """One compared quantity (see the module docstring); ``kind`` is ``"accounting"`` or
    ``"training"``, ``paper_text`` the paper's value as printed (for display)."""

    quantity: str
    source: str
    paper: Value
    privfl: Value
    rel_diff: float | None
    tolerance: float | None
    verdict: str
    reason: str
    kind: str = "accounting"
    paper_text: str = ""
    basis: str = "printed"

    def within_tolerance(self) -> bool:
        """Whether the values agree as a ``match`` needs (recomputed from the values)."""
        return _agrees(self.paper, self.privfl, self.tolerance)

    def to_dict(self) -> dict[str, Any]:
        """The row as ``--json`` prints it: quantity, source, basis, paper, privfl, rel_diff,
        tolerance, verdict, reason (an interval is a two-element list)."""
        def plain(value: Value) -> Any:
            if isinstance(value, tuple):
                return [float(v) for v in value]
            if isinstance(value, float) and not math.isfinite(value):
                return str(value)
            return value

        return {"quantity": self.quantity, "source": self.source, "basis": self.basis,
                "paper": plain(self.paper),
                "privfl": plain(self.privfl), "rel_diff": self.rel_diff,
                "tolerance": self.tolerance, "verdict": self.verdict, "reason": self.reason}


def _agrees(paper: Value, privfl: Value, tolerance: float | None) -> bool:
    if isinstance(paper, tuple):
        return _is_number(privfl) and paper[0] <= float(privfl) <= paper[1]
    if isinstance(paper, str) or isinstance(privfl, str):
        return isinstance(paper, str) and paper == privfl
    if isinstance(privfl, tuple):  # privfl's interval (training seeds): the paper's number in it
        return _is_number(paper) and privfl[0] <= float(paper) <= privfl[1]
    diff = rel_diff(paper, privfl)
    return diff is not None and tolerance is not None and abs(diff) <= tolerance * (1 + 1e-9)


def compare(quantity: str, source: str, paper: Value | str, privfl: Value, *,
            tolerance: float | str | None = "printed", reason: str = "",
            kind: str = "accounting", basis: str = "printed") -> Row:
    """A :class:`Row` with its verdict (see the module docstring).

    ``paper`` given as a numeric string (``"2.71"``) is the number as printed: its value is
    compared and ``tolerance="printed"`` derives from its digits; ``privfl`` an interval: the
    paper's number must lie in it (``tolerance="interval"``). ``tolerance=None``: the row
    cannot match (it differs, for ``reason``). A row that differs without a ``reason`` is a
    programming error (ValueError): every difference is explained. ``basis`` is one of
    :data:`BASES`; a ``derived`` row says from which printed number in its ``reason``.
    """
    if basis not in BASES:
        raise ValueError(f"basis = {basis!r} is not allowed: must be one of {', '.join(BASES)}")
    if basis == "derived" and not reason.strip():
        raise ValueError(f"{quantity}: a derived row must say from which printed number "
                         "(reason)")
    paper_text = ""
    if isinstance(paper, str) and _numeric(paper):
        paper_text, paper = paper, float(paper)
    if isinstance(paper, (tuple, str)):  # an interval or a text: no relative tolerance
        tolerance = None
        agrees = _agrees(paper, privfl, None)
    elif isinstance(privfl, tuple):  # privfl's interval: containment, unless tolerance is None
        if tolerance not in (None, "interval"):
            raise ValueError(f"tolerance = {tolerance!r} is not allowed with privfl's interval "
                             f"{privfl!r}: 'interval' (the paper's number must lie in it) or "
                             "None")
        agrees = tolerance is not None and _agrees(paper, privfl, None)
        tolerance = None
    else:
        if tolerance == "printed":
            if not paper_text:
                raise ValueError(f"{quantity}: tolerance='printed' needs the paper's value as "
                                 "printed (a numeric string)")
            tolerance = printed_tolerance(paper_text)
        elif isinstance(tolerance, str):
            raise ValueError(f"tolerance = {tolerance!r} is not allowed: a number, 'printed' or "
                             "None")
        agrees = tolerance is not None and _agrees(paper, privfl, tolerance)
    verdict = MATCH if agrees else DIFFERS
    if verdict == DIFFERS and not reason.strip():
        raise ValueError(f"{quantity}: the values differ (paper {paper!r}, privfl {privfl!r}) "
                         "and no reason is given")
    return Row(quantity, source, paper, privfl, rel_diff(paper, privfl), tolerance, verdict,
               reason.strip(), kind, paper_text, basis)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@dataclass
class Reproduction:
    """What ``privfl reproduce PAPER`` computed: the rows, the figures (``privfl.runs.html``
    :class:`~privfl.runs.html.Figure` s, built lazily by the HTML writer from ``curves``), notes,
    and how long it took."""

    paper: str
    title: str
    scale: str
    rows: list[Row] = field(default_factory=list)
    #: figure id -> {"title", "xtitle", "ytitle", "log", "traces": [{"name", "x", "y", ...}]}
    curves: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: the paper-scale runs: one line each (what runs, how long, which data)
    plan: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0

    def add(self, rows: Sequence[Row] | Row) -> None:
        self.rows.extend([rows] if isinstance(rows, Row) else rows)

    def counts(self) -> dict[str, int]:
        """``{"match": n, "differs": m}``."""
        return {verdict: sum(row.verdict == verdict for row in self.rows)
                for verdict in (MATCH, DIFFERS)}

    def counts_by_basis(self) -> dict[str, dict[str, int]]:
        """``{basis: {"match": n, "differs": m}}`` for every basis of :data:`BASES`."""
        return {basis: {verdict: sum(row.verdict == verdict and row.basis == basis
                                     for row in self.rows) for verdict in (MATCH, DIFFERS)}
                for basis in BASES}

    def reproduced(self) -> int:
        """The rows that reproduce a printed number or claim: basis ``printed``, verdict
        ``match`` (the only ones that count as reproduced)."""
        return self.counts_by_basis()["printed"][MATCH]

    def to_dict(self) -> dict[str, Any]:
        return {"paper": self.paper, "title": self.title, "scale": self.scale,
                "wall_seconds": self.wall_seconds, "counts": self.counts(),
                "counts_by_basis": self.counts_by_basis(), "reproduced": self.reproduced(),
                "rows": [row.to_dict() for row in self.rows], "notes": list(self.notes),
                "plan": list(self.plan)}


def basis_summary(counts_by_basis: dict[str, dict[str, int]]) -> str:
    """One line of counts by basis, e.g. ``printed 56 (40 match), derived 19 (0 match), check
    14 (14 match), extension 1 (1 match); reproduced (printed and matching): 40``."""
    parts = [f"{basis} {sum(counts.values())} ({counts[MATCH]} match)"
             for basis, counts in counts_by_basis.items()]
    return (", ".join(parts) + f"; reproduced (printed and matching): "
            f"{counts_by_basis['printed'][MATCH]}")


def format_value(value: Any, text: str = "") -> str:
    """A value for a table: the paper's printed text, a number to 6 significant digits, an
    interval, a text, or '-' (none)."""
    if text:
        return text
    if value is None:
        return "-"
    if isinstance(value, tuple):
        return f"[{format_value(value[0])}, {format_value(value[1])}]"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.6g}"
    return str(value)


def _percent(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.3g} %" if value else "0 %"


def cells(row: Row) -> tuple[str, ...]:
    """The row as the table's text cells (:data:`HEADER`); a ``paper`` cell that holds
    privfl's value (basis ``derived`` or ``extension``) says so."""
    tolerance = "-" if row.tolerance is None else f"{100 * row.tolerance:.3g} %"
    if isinstance(row.paper, (tuple, str)) and row.verdict == "match":
        tolerance = "within" if isinstance(row.paper, tuple) else "same"
    paper = format_value(row.paper, row.paper_text)
    if row.basis in ("derived", "extension") and row.paper is not None:
        paper += " (privfl's)"  # the paper column holds privfl's value, not the paper's
    return (row.quantity, row.source, row.basis, paper,
            format_value(row.privfl), _percent(row.rel_diff), tolerance, row.verdict,
            row.reason)
