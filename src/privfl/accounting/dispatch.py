"""The one dispatcher: what ran (an event tree, :mod:`privfl.accounting.events`) to labelled
results. ``privfl run`` (every algorithm's privacy plan), ``privfl check-privacy``,
``privfl account ...`` and ``privfl calibrate ...`` all call :func:`evaluate`, so one setting
gives one number whichever command prints it.

How each node is read:

* :class:`~privfl.accounting.events.PrivacyEvent` (a leaf): every requested step accountant
  (:func:`privfl.accounting.methods.account`);
* :class:`~privfl.accounting.events.WorstOverClients` / ``HeldByClients``: per method, the
  worst client (or the worst record, composing its holders' events;
  :func:`privfl.accounting.parallel.worst_record_results`);
* :class:`~privfl.accounting.events.Scope`: its event's results, each labelled with the scope;
* :class:`~privfl.accounting.events.Scopes`: for each method, every scope in order;
* a node a paper proves directly (``RandomParticipationStep``, ``LastIterateRelease``): the
  node accountant registered for its type (:mod:`privfl.accounting.registry`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from privfl._validation import check_delta
from privfl.accounting.events import (
    EVENT_TYPES,
    HeldByClients,
    PrivacyEvent,
    Scope,
    Scopes,
    WorstOverClients,
)
from privfl.accounting.methods import AccountingOptions, account, resolve_methods
from privfl.accounting.parallel import worst_record_results
from privfl.accounting.registry import node_accountant
from privfl.accounting.results import PrivacyResult

__all__ = ["evaluate"]


def evaluate(event: object, delta: float, *, methods: str | Iterable[str] = "all",
             options: AccountingOptions | None = None) -> list[PrivacyResult]:
    """The labelled epsilon at ``delta`` of every result ``event`` gives (see the module
    docstring for the order); ``methods`` picks the step accountants (rdp, pld, gdp-clt) of
    the leaves."""
    delta = check_delta("delta", delta)
    if not isinstance(event, EVENT_TYPES):
        raise ValueError(f"event = {event!r} is not allowed: must be one of "
                         f"{', '.join(t.__name__ for t in EVENT_TYPES)}")
    if isinstance(event, PrivacyEvent):
        return account(event, delta=delta, methods=methods, options=options).results
    if isinstance(event, WorstOverClients):
        events = event.events
        holder_sets = event.holder_sets if isinstance(event, HeldByClients) else ()
        return worst_record_results(lambda j, _h: events[j], len(events), holder_sets, delta,
                                    methods=methods, options=options, note=event.note)
    if isinstance(event, Scope):
        return [replace(r, extras={**r.extras, "scope": event.name})
                for r in evaluate(event.event, delta, methods=methods, options=options)]
    if isinstance(event, Scopes):
        return [r for method in resolve_methods(methods) for scope in event.scopes
                for r in evaluate(scope, delta, methods=(method,), options=options)]
    return list(node_accountant(event)(event, delta, options))
