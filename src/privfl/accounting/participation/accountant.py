"""The ``participation`` accountant: answers a
:class:`~privfl.accounting.events.RandomParticipationStep` (DP-DSGD with random client
participation, Hasircioglu and Gunduz 2022) with every requested scheme's per-iteration result
and, over more than one iteration, the composed results
(:func:`privfl.accounting.participation.participation_report`). Registered in
:mod:`privfl.accounting.registry`; ``privfl run`` (DP-DSGD's plan) and ``privfl account
participation`` both reach it through :func:`privfl.accounting.dispatch.evaluate`.
"""

from __future__ import annotations

from privfl.accounting.events import RandomParticipationStep
from privfl.accounting.methods import AccountingOptions
from privfl.accounting.participation.report import participation_report
from privfl.accounting.results import PrivacyResult

__all__ = ["account_participation"]


def account_participation(node: RandomParticipationStep, delta: float | None,
                          options: AccountingOptions | None, *,
                          epsilon: float | None = None) -> list[PrivacyResult]:
    """Epsilon at ``delta`` (or, given ``epsilon`` instead, delta at ``epsilon``) of every
    scheme of ``node`` (per iteration, then composed)."""
    if not isinstance(node, RandomParticipationStep):
        raise ValueError(f"node = {node!r} is not a RandomParticipationStep")
    return participation_report(
        node.client_rate, node.record_rate, node.records, node.noise, clip_norm=node.clip_norm,
        epsilon=epsilon, delta=delta, iterations=node.iterations, methods=node.schemes,
        accountants=node.composition, server=node.server, options=options,
        basic_composition=node.basic_composition)
