"""Select a run's headline numbers from its plan (:mod:`privfl.runs.headline` words them).

The headline bound is ``tightest_bound(budget_results(plan, results))``: the number budgets use
(:mod:`privfl.algorithms.base`); every other scope contributes its own tightest bound, so
that the report can say what a reader with another threat model should quote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from privfl.accounting.results import PrivacyResult
from privfl.algorithms.base import budget_results, headline_scopes, tightest_bound
from privfl.runs.headline import Headline, compose_headline

__all__ = ["plan_headline"]


def plan_headline(plan: Any, results: Sequence[PrivacyResult],
                  bound: PrivacyResult | None = None) -> Headline:
    """The headline of ``results`` (``plan``'s labelled guarantees after the rounds that ran;
    the plan may name ``scope_notes``: ``scope -> why``); ``bound``: the headline bound when
    it is not one of ``results`` (a privacy budget's filter, :mod:`privfl.runs.budget`)."""
    if not getattr(plan, "private", False) or not results:
        return compose_headline(None, private=False)
    scopes = headline_scopes(plan)
    by_scope: dict[str, list[PrivacyResult]] = {}
    for r in results:
        scope = str(r.extras.get("scope", ""))
        if scope not in scopes:
            by_scope.setdefault(scope, []).append(r)
    others = {scope: best for scope, rows in by_scope.items()
              if (best := tightest_bound(rows)) is not None}
    if bound is None:
        bound = tightest_bound(budget_results(plan, results))
    return compose_headline(bound, private=True,
                            scopes=scopes, others=others,
                            notes=getattr(plan, "scope_notes", None) or {})
