"""Which orderings of Monte Carlo leakage estimates are resolved by the draws.

``privfl tradeoff`` estimates the leakage ``eps_p`` of each grid point (Zhang, Chen and Yang
2022) from ``R`` draws per client, with a bootstrap standard error. Two estimates ``a`` and
``b`` with standard errors ``s_a`` and ``s_b`` are *within one standard error* when::

    |a - b| <= sqrt(s_a^2 + s_b^2)

(the errors combined as if independent; the points share the unprotected draws, so this is an
approximation). Their ordering is then not resolved: another seed may flip it. Since a standard
error falls as ``1 / sqrt(R)``, about ``R (sqrt(s_a^2 + s_b^2) / |a - b|)^2`` draws would put
the difference at one standard error (:func:`draws_to_resolve`).

:func:`leakage_orderings` compares each point with the unprotected leakage ``C1`` it is measured
against, and each point with the next one of its mechanism (in grid order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from privfl._validation import check_int

__all__ = ["draws_to_resolve", "leakage_orderings", "within_one_se"]


def within_one_se(a: float, se_a: float, b: float, se_b: float) -> bool:
    """Whether ``|a - b| <= sqrt(se_a^2 + se_b^2)`` (an unresolved ordering)."""
    for name, value in (("se_a", se_a), ("se_b", se_b)):
        if not value >= 0:
            raise ValueError(f"{name} = {value!r} is out of range: a standard error must be "
                             ">= 0")
    return abs(a - b) <= math.hypot(se_a, se_b)


def draws_to_resolve(draws: int, difference: float, se: float) -> float:
    """About how many draws put ``|difference|`` at one standard error ``se`` measured with
    ``draws`` (``se`` falls as ``1 / sqrt(R)``): ``R (se / difference)^2``, rounded up; inf
    for a zero difference."""
    r = check_int("draws", draws, 1)
    if not se >= 0:
        raise ValueError(f"se = {se!r} is out of range: a standard error must be >= 0")
    if difference == 0:
        return math.inf
    return float(math.ceil(r * (se / difference) ** 2))


def _label(point: Mapping[str, Any]) -> str:
    return f"{point['mechanism']} {point['parameter']}={point['value']:g}"


def _row(first: str, a: float, se_a: float, second: str, b: float, se_b: float,
         draws: int) -> dict[str, Any]:
    se = math.hypot(se_a, se_b)
    unresolved = within_one_se(a, se_a, b, se_b)
    return {"first": first, "second": second, "difference": a - b, "se": se,
            "within_one_se": unresolved,
            "draws_to_resolve": draws_to_resolve(draws, a - b, se) if unresolved else None}


def leakage_orderings(points: Sequence[Mapping[str, Any]], draws: int) -> list[dict[str, Any]]:
    """Each point's ``eps_p`` against its ``C1`` (``first`` the point, ``second`` ``"C1"``),
    and against the next point of the same mechanism: ``difference`` (first minus second),
    ``se``, ``within_one_se`` and, for unresolved ones, ``draws_to_resolve``. Points whose
    leakage or standard error is not finite are skipped."""
    r = check_int("draws", draws, 1)
    usable = [p for p in points if all(math.isfinite(p[k]) for k in
                                       ("eps_p", "eps_p_se", "c1", "c1_se"))]
    rows = [_row(_label(p), p["eps_p"], p["eps_p_se"], "C1", p["c1"], p["c1_se"], r)
            for p in usable]
    for a, b in zip(usable, usable[1:], strict=False):
        if a["mechanism"] == b["mechanism"]:
            rows.append(_row(_label(a), a["eps_p"], a["eps_p_se"], _label(b), b["eps_p"],
                             b["eps_p_se"], r))
    return rows
