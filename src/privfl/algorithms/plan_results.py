"""The results of a privacy plan, per round count: cached, zero rounds, and the per-round set.

A plan composes its configured accountants over ``r`` rounds (:meth:`PlanResults._compose`).
Some accountants answer ``r`` rounds at the cost of one step (RDP: ``r x`` a cached curve;
closed forms; the CLT estimate); others recompute the whole composition for every ``r``: the
sampled PLD's FFT composition (its length is set by the composed window, not by the number of
steps; docs/accounting.md, "Why the sampled PLD is not composed incrementally") and the basic
composition of DP-DSGD's per-iteration bounds (a new root solve at delta / r). A per-round
metrics row (:class:`~privfl.algorithms.cadence.AccountingCadence`) carries
:meth:`PlanResults.round_results`: every configured accountant except those, named by
:attr:`PlanResults.round_skips`. :meth:`PlanResults.results` is always the full set: privacy.json,
summary.json, the card, ``check-privacy`` and ``privfl account`` read it.
"""

from __future__ import annotations

from typing import Any

from privfl._validation import check_int
from privfl.accounting.registry import method
from privfl.accounting.results import PrivacyResult, zero_rounds

__all__ = ["PlanResults"]


def _from_scratch(name: str) -> bool:
    """Whether accountant ``name``'s answer for r rounds is a composition recomputed from
    scratch (the registry's ``from_scratch``; a name outside the registry is not)."""
    try:
        return method(name).from_scratch
    except ValueError:
        return False


class PlanResults:
    """Mixin of a privacy plan whose guarantees compose ``self.accountants``.

    The plan sets ``accountants``, ``private``, ``delta`` and ``_cache = {}`` and implements
    :meth:`_compose` (a plan whose per-round set is not "``accountants`` without the PLD" also
    overrides :attr:`round_skips`); this class answers :meth:`results` (every accountant) and
    :meth:`round_results` (those whose round costs one step), each cached per round count, with
    epsilon 0 and the labels of one round for ``rounds = 0``.
    """

    accountants: Any
    private: bool
    delta: float | None
    _cache: dict[tuple[int, bool], list[PrivacyResult]]

    def _compose(self, rounds: int, full: bool) -> list[PrivacyResult]:
        """The labelled guarantees of ``rounds`` >= 1 rounds: every configured accountant, or
        (``full`` False) those of a per-round row (without :attr:`round_skips`)."""
        raise NotImplementedError

    def _accountants(self, full: bool) -> tuple[str, ...]:
        """``accountants``, or (``full`` False) those whose round costs one step."""
        return tuple(a for a in self.accountants
                     if full or not _from_scratch(a))

    @property
    def round_skips(self) -> tuple[str, ...]:
        """The results a per-round row leaves out (method names; empty: none), because each
        round count recomputes them from scratch."""
        return tuple(a for a in self.accountants if _from_scratch(a))

    def results(self, rounds: int) -> list[PrivacyResult]:
        """Labelled guarantees of every configured accountant after ``rounds`` rounds (empty
        when not private or ``delta`` is None; ``rounds = 0``: epsilon 0, the same labels)."""
        return self._cached(rounds, full=True)

    def round_results(self, rounds: int) -> list[PrivacyResult]:
        """What a per-round metrics row carries after ``rounds`` rounds: :meth:`results`
        without :attr:`round_skips` (the same list when there is nothing to skip)."""
        return self._cached(rounds, full=not self.round_skips)

    def _cached(self, rounds: int, full: bool) -> list[PrivacyResult]:
        rounds = check_int("rounds", rounds, 0)
        if not self.private or self.delta is None:
            return []
        key = (rounds, full)
        if key not in self._cache:
            results = self._compose(max(rounds, 1), full)
            self._cache[key] = zero_rounds(results) if rounds == 0 else results
        return self._cache[key]

