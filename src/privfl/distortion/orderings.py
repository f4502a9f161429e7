"""Which orderings of Monte Carlo leakage estimates are resolved by the draws.

``privfl tradeoff`` estimates the leakage ``eps_p`` of each grid point (Zhang, Chen and Yang
2022) from ``R`` draws per client, with a bootstrap standard error. Two estimates ``a`` and
``b`` are *within one standard error* when ``|a - b| <= se(a - b)``: their ordering is then not
resolved, and another seed may flip it.

The standard error of the difference comes from PAIRED bootstrap replicates where the points
carry them (``eps_p_replicates``, ``c1_replicates``: the same resampling of the same draws for
both, which ``privfl tradeoff`` arranges with common random numbers: every point reuses the
unprotected draws and the same noise, mask and sampling uniforms, and every client one set of
bootstrap weights), ``se(a - b) = std_b(a_b - b_b)``: positively correlated estimates have a
difference far less noisy than ``sqrt(s_a^2 + s_b^2)``, the independent combination used where
no replicates are given. Since a standard error falls as ``1 / sqrt(R)``, about
``R (se(a - b) / |a - b|)^2`` draws would put the difference at one standard error
(:func:`draws_to_resolve`).

:func:`leakage_orderings` compares each point with the unprotected leakage ``C1`` it is measured
against, and each point with the next one of its mechanism (in grid order).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privfl._validation import check_int

__all__ = ["draws_to_resolve", "largest_unresolved", "leakage_orderings", "paired_se",
           "within_one_se"]


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


def paired_se(first: object, second: object) -> float:
    """Standard error of a difference from paired bootstrap replicates: ``std(first -
    second)`` (population std, as the bootstrap's own standard errors)."""
    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size < 2:
        raise ValueError(f"replicates of shapes {a.shape} and {b.shape} are not paired: give "
                         "two 1-D arrays of the same length >= 2")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("replicates contain NaN or infinity: they must be finite")
    return float(np.std(a - b))


def _row(first: str, a: float, se_a: float, second: str, b: float, se_b: float,
         draws: int, paired: tuple[object, object] | None = None) -> dict[str, Any]:
    se = math.hypot(se_a, se_b) if paired is None else paired_se(*paired)
    unresolved = abs(a - b) <= se
    return {"first": first, "second": second, "difference": a - b, "se": se,
            "se_method": "independent" if paired is None else "paired bootstrap",
            "within_one_se": unresolved,
            "draws_to_resolve": draws_to_resolve(draws, a - b, se) if unresolved else None}


def _replicates(point: Mapping[str, Any], key: str) -> object | None:
    return point.get(f"{key}_replicates")


def leakage_orderings(points: Sequence[Mapping[str, Any]], draws: int) -> list[dict[str, Any]]:
    """Each point's ``eps_p`` against its ``C1`` (``first`` the point, ``second`` ``"C1"``),
    and against the next point of the same mechanism: ``difference`` (first minus second),
    ``se`` (``se_method``: ``paired bootstrap`` where both carry replicates, else
    ``independent``), ``within_one_se`` and, for unresolved ones, ``draws_to_resolve``. Points
    whose leakage or standard error is not finite are skipped."""
    r = check_int("draws", draws, 1)
    usable = [p for p in points if all(math.isfinite(p[k]) for k in
                                       ("eps_p", "eps_p_se", "c1", "c1_se"))]

    def pair(a: Mapping[str, Any], ka: str, b: Mapping[str, Any], kb: str
             ) -> tuple[object, object] | None:
        ra, rb = _replicates(a, ka), _replicates(b, kb)
        return None if ra is None or rb is None else (ra, rb)

    rows = [_row(_label(p), p["eps_p"], p["eps_p_se"], "C1", p["c1"], p["c1_se"], r,
                 pair(p, "eps_p", p, "c1")) for p in usable]
    for a, b in zip(usable, usable[1:], strict=False):
        if a["mechanism"] == b["mechanism"]:
            rows.append(_row(_label(a), a["eps_p"], a["eps_p_se"], _label(b), b["eps_p"],
                             b["eps_p_se"], r, pair(a, "eps_p", b, "eps_p")))
    return rows


def largest_unresolved(rows: Sequence[Mapping[str, Any]]) -> float:
    """The largest ``|difference| + se`` over the unresolved rows (0 if none): every unresolved
    pair's leakages differ by less than this (at one standard error), a tie at that
    precision."""
    return max((abs(r["difference"]) + r["se"] for r in rows if r["within_one_se"]),
               default=0.0)
