"""Record-level guarantees of federated runs whose clients each account their own records.

Each record belongs to exactly one client, and a client's records only enter what that client
releases, so the record-level guarantee of the whole run is the **worst client's** (parallel
composition; Xie et al. 2023 section 3.5 "combined by the maximum", Zheng et al. 2021 Theorem 2's
mu_max). :func:`worst_client_results` asks every accountant about every distinct client event and
keeps, per method, the largest epsilon, labelled with that client's event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from privfl._validation import check_delta
from privfl.accounting.events import PrivacyEvent
from privfl.accounting.methods import AccountingOptions, build_accountant, resolve_methods
from privfl.accounting.results import PrivacyResult

__all__ = ["worst_client_results"]


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
        accountant = build_accountant(method, options)
        for event in distinct:
            reason = accountant.unsupported_reason(event)
            if reason is not None:
                from privfl.accounting.events import UnsupportedEventError

                raise UnsupportedEventError(f"the {method} accountant cannot handle this: "
                                            f"{reason}")
        worst_event, worst = max(
            ((event, accountant.epsilon(event, delta)) for event in distinct),
            key=lambda pair: pair[1].epsilon,
        )
        merged_note = "; ".join(part for part in (worst.note, note) if part)
        results.append(PrivacyResult.for_event(
            worst_event, method=worst.method, kind=worst.kind, epsilon=worst.epsilon,
            delta=delta, note=merged_note, **{**worst.extras, **extras},
        ))
    return results
