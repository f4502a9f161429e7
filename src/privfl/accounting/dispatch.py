"""The one dispatcher: what ran (an event tree, :mod:`privfl.accounting.events`) to labelled
results. ``privfl run`` (every algorithm's privacy plan), ``privfl check-privacy``,
``privfl account ...`` and ``privfl calibrate ...`` all call :func:`evaluate`, so one setting
gives one number whichever command prints it. One exception in form only: ``privfl account
dpsgd``, whose event is a single :class:`~privfl.accounting.events.PrivacyEvent` leaf, calls
:func:`privfl.accounting.methods.account` itself (what :func:`evaluate` calls for a leaf, with the
same arguments) because it also lists the methods that do not support the event.

How each node is read:

* :class:`~privfl.accounting.events.PrivacyEvent` (a leaf): every requested step accountant
  (:func:`privfl.accounting.methods.account`);
* :class:`~privfl.accounting.events.WorstOverClients` / ``HeldByClients``: per method, the
  worst client (or the worst record, composing its holders' events, each client's event for
  the record's holder count: ``HeldByClients.client_event``;
  :func:`privfl.accounting.parallel.worst_record_results`);
* :class:`~privfl.accounting.events.Scope`: its event's results, each labelled with the scope;
* :class:`~privfl.accounting.events.Scopes`: for each method, every scope in order;
* a node a paper proves directly (``RandomParticipationStep``, ``LastIterateRelease``): the
  node accountant registered for its type (:mod:`privfl.accounting.registry`).

Given ``epsilon`` instead of ``delta``, the same path answers delta at epsilon (``privfl account
dpsgd --epsilon``, ``privfl account participation --epsilon``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from privfl._validation import check_delta, check_epsilon
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


def evaluate(event: object, delta: float | None = None, *, epsilon: float | None = None,
             methods: str | Iterable[str] = "all",
             options: AccountingOptions | None = None) -> list[PrivacyResult]:
    """The labelled epsilon at ``delta`` (or, given ``epsilon`` instead, the delta at
    ``epsilon``) of every result ``event`` gives (see the module docstring for the order);
    ``methods`` picks the step accountants (rdp, pld, gdp-clt) of the leaves.

    Delta at epsilon is answered for a :class:`PrivacyEvent`, a node accountant that takes
    ``epsilon`` (random participation) and scopes of them; a worst-over-clients node refuses it
    with a ValueError (its worst client is chosen by epsilon)."""
    if (delta is None) == (epsilon is None):
        raise ValueError(f"epsilon = {epsilon!r}, delta = {delta!r}: give exactly one of "
                         "epsilon and delta")
    delta = None if delta is None else check_delta("delta", delta)
    epsilon = None if epsilon is None else check_epsilon("epsilon", epsilon)
    if not isinstance(event, EVENT_TYPES):
        raise ValueError(f"event = {event!r} is not allowed: must be one of "
                         f"{', '.join(t.__name__ for t in EVENT_TYPES)}")
    if isinstance(event, PrivacyEvent):
        return account(event, delta=delta, epsilon=epsilon, methods=methods,
                       options=options).results
    if isinstance(event, WorstOverClients):
        if delta is None:
            raise ValueError(f"epsilon = {epsilon!r} is not allowed for a "
                             f"{type(event).__name__} event: ask for epsilon at a delta")
        holder_sets = event.holder_sets if isinstance(event, HeldByClients) else ()
        return worst_record_results(event.client_event, len(event.events), holder_sets, delta,
                                    methods=methods, options=options, note=event.note)
    if isinstance(event, Scope):
        return [replace(r, extras={**r.extras, "scope": event.name})
                for r in evaluate(event.event, delta, epsilon=epsilon, methods=methods,
                                  options=options)]
    if isinstance(event, Scopes):
        return [r for method in resolve_methods(methods) for scope in event.scopes
                for r in evaluate(scope, delta, epsilon=epsilon, methods=(method,),
                                  options=options)]
    answer = node_accountant(event)
    if delta is None:
        return list(answer(event, None, options, epsilon=epsilon))
    return list(answer(event, delta, options))
