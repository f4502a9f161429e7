"""The ``contraction`` accountant: answers a
:class:`~privfl.accounting.events.LastIterateRelease` (only the last model of projected noisy
SGD is released, Asoodeh et al. 2021) with the contraction bounds and the all-iterates
comparisons (:func:`privfl.accounting.contraction.run_report`). Registered in
:mod:`privfl.accounting.registry`; ``privfl run`` (projected SGD's plan) and ``privfl account
last-iterate`` both reach it through :func:`privfl.accounting.dispatch.evaluate`.
"""

from __future__ import annotations

from privfl.accounting.contraction import run_report
from privfl.accounting.events import LastIterateRelease
from privfl.accounting.methods import AccountingOptions
from privfl.accounting.results import PrivacyResult

__all__ = ["account_last_iterate"]


def account_last_iterate(node: LastIterateRelease, delta: float | None,
                         options: AccountingOptions | None, *,
                         epsilon: float | None = None) -> list[PrivacyResult]:
    """Epsilon at ``delta`` of ``node``'s last-iterate release, then its baselines under the
    step accountants ``node.methods`` (delta at an epsilon is not answered here)."""
    if epsilon is not None or delta is None:
        raise ValueError(f"epsilon = {epsilon!r} is not allowed for a last-iterate release: "
                         "ask for epsilon at a delta")
    if not isinstance(node, LastIterateRelease):
        raise ValueError(f"node = {node!r} is not a LastIterateRelease")
    return run_report(node.run, delta, release=node.release,
                      secret_assignment=node.secret_assignment, methods=node.methods,
                      baselines=node.baselines, options=options, unit=node.unit)
