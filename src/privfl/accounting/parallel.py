"""Record-level guarantees of federated runs whose clients each account their own records.

When each record belongs to exactly one client, and a client's records only enter what that
client releases, the record-level guarantee of the whole run is the **worst client's** (parallel
composition; Xie et al. 2023 section 3.5 "combined by the maximum", Zheng et al. 2021 Theorem 2's
mu_max). :func:`worst_client_results` asks every accountant about every distinct client event and
keeps, per method, the largest epsilon, labelled with that client's event.

A record held by ``k`` clients (an overlapping partition) enters all ``k`` holders' releases:
each holder trains on its own copy with its own sampling and noise, so the record's privacy loss
is the adaptive **composition** of the holders' mechanisms (for Gaussian DP the holders' mu
compose as sqrt(sum mu_j^2); for RDP the curves add; for PLD the loss distributions convolve).
:func:`worst_record_results` composes the holders of every shared record and reports the worst
record; with disjoint clients it is :func:`worst_client_results`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from privfl._validation import check_delta, check_int
from privfl.accounting.events import (
    AccountingLimitError,
    PrivacyEvent,
    UnsupportedEventError,
    compose_events,
)
from privfl.accounting.methods import AccountingOptions, build_accountant, resolve_methods
from privfl.accounting.results import PrivacyResult

__all__ = ["MAX_HOLDER_COMBINATIONS", "worst_client_results", "worst_record_results"]

#: The most distinct holder combinations (after dropping those inside another) that
#: :func:`worst_record_results` composes one by one.
MAX_HOLDER_COMBINATIONS = 64


def worst_client_results(
    events: Sequence[PrivacyEvent],
    delta: float,
    *,
    methods: str | Iterable[str],
    options: AccountingOptions | None = None,
    note: str = "max over clients of the per-client composition",
    **extras: object,
) -> list[PrivacyResult]:
    """Per method, the largest epsilon at ``delta`` over the clients' ``events``.

    ``events`` holds one event per client (repeats are accounted once); ``extras`` (e.g.
    ``scope="weak"``) are added to every result. A method that cannot handle an event raises
    :class:`~privfl.accounting.events.UnsupportedEventError`.
    """
    delta = check_delta("delta", delta)
    distinct = list(dict.fromkeys(events))
    if not distinct:
        raise ValueError("events = [] is out of range: must hold one event per client")
    results = []
    for method in resolve_methods(methods):
        worst_event, worst = _worst(distinct, delta, method, options)
        results.append(_labelled(worst_event, worst, delta, note, extras))
    return results


def _worst(events: Sequence[PrivacyEvent], delta: float, method: str,
           options: AccountingOptions | None) -> tuple[PrivacyEvent, PrivacyResult]:
    """The event with the largest epsilon at ``delta`` under ``method``, and its result."""
    accountant = build_accountant(method, options)
    for event in events:
        reason = accountant.unsupported_reason(event)
        if reason is not None:
            raise UnsupportedEventError(f"the {method} accountant cannot handle this: {reason}")
    return max(((event, accountant.epsilon(event, delta)) for event in events),
               key=lambda pair: pair[1].epsilon)


def _labelled(event: PrivacyEvent, worst: PrivacyResult, delta: float, note: str,
              extras: dict) -> PrivacyResult:
    merged_note = "; ".join(part for part in (worst.note, note) if part)
    return PrivacyResult.for_event(
        event, method=worst.method, kind=worst.kind, epsilon=worst.epsilon, delta=delta,
        note=merged_note, **{**worst.extras, **extras},
    )


def holder_combinations(
    client_event: Callable[[int, int], PrivacyEvent],
    num_clients: int,
    holder_sets: Iterable[Sequence[int]],
) -> list[Counter]:
    """The multisets of events whose composition bounds some record, none inside another.

    Every client alone (its unshared records) and every set of clients holding a common
    record give one multiset ``{client_event(j, h) : j in set}`` (``h`` = the set's size).
    A multiset contained in another is dropped: composing more mechanisms never lowers the
    privacy loss, so the larger one bounds both records.
    """
    num_clients = check_int("num_clients", num_clients, 1)
    found: dict[frozenset, Counter] = {}
    for holders in [(j,) for j in range(num_clients)] + [tuple(s) for s in holder_sets]:
        if len(set(holders)) != len(holders) or not all(
                isinstance(j, int) and 0 <= j < num_clients for j in holders):
            raise ValueError(f"holder_sets entry {holders!r} is out of range: must be distinct "
                             f"client positions in [0, {num_clients - 1}]")
        combination = Counter(client_event(j, len(holders)) for j in holders)
        found.setdefault(frozenset(combination.items()), combination)
    kept: list[Counter] = []
    for combination in sorted(found.values(), key=lambda c: -c.total()):
        if not any(all(other[e] >= n for e, n in combination.items()) for other in kept):
            kept.append(combination)
    return kept


def worst_record_results(
    client_event: Callable[[int, int], PrivacyEvent],
    num_clients: int,
    holder_sets: Iterable[Sequence[int]],
    delta: float,
    *,
    methods: str | Iterable[str],
    options: AccountingOptions | None = None,
    note: str = "max over clients of the per-client composition",
    **extras: object,
) -> list[PrivacyResult]:
    """Per method, the largest epsilon over records, each record composing its holders.

    ``client_event(j, h)`` is client ``j``'s event when it is one of ``h`` holders of a record
    (most plans ignore ``h``; a plan whose release mixes the holders' noises may not);
    ``holder_sets`` lists the sets of clients that share a record (empty: disjoint clients,
    exactly :func:`worst_client_results`). Results of a shared record carry
    ``extras["holders"]`` (how many clients hold the worst record) and say so in the note.
    """
    delta = check_delta("delta", delta)
    holder_sets = [tuple(s) for s in holder_sets]
    if not holder_sets:
        events = [client_event(j, 1) for j in range(check_int("num_clients", num_clients, 1))]
        return worst_client_results(events, delta, methods=methods, options=options,
                                    note=note, **extras)
    combinations = holder_combinations(client_event, num_clients, holder_sets)
    if len(combinations) > MAX_HOLDER_COMBINATIONS:
        raise AccountingLimitError(
            f"holder_sets give {len(combinations)} distinct combinations of clients' events "
            f"sharing a record: more than {MAX_HOLDER_COMBINATIONS} to compose one by one; use "
            "a disjoint partition (data.disjoint: true)")
    composed = {compose_events(list(c.elements())): c.total() for c in combinations}
    k = max(len(s) for s in holder_sets)
    results = []
    for method in resolve_methods(methods):
        event, worst = _worst(list(composed), delta, method, options)
        holders = composed[event]
        shared = (f"records held by up to k = {k} clients: each record's loss is the "
                  f"composition of its holders' mechanisms; the worst record has {holders} "
                  "holder(s)")
        results.append(_labelled(event, worst, delta, "; ".join(filter(None, (note, shared))),
                                 {**extras, "holders": holders}))
    return results
