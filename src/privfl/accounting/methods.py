"""Pick accountants by name and ask them all about one event.

Method names: ``rdp`` (Renyi DP, bound), ``pld`` (pessimistic privacy loss distribution, bound),
``gdp-clt`` (Gaussian-DP central limit approximation, estimate; exact GDP when nothing is
subsampled). ``gdp`` is accepted as an alias of ``gdp-clt``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from privfl._validation import check_choice, check_delta, check_epsilon
from privfl.accounting.base import Accountant, check_event
from privfl.accounting.events import AccountingLimitError, PrivacyEvent, UnsupportedEventError
from privfl.accounting.registry import registered, step_factory
from privfl.accounting.results import PrivacyResult

#: the step accountants (:mod:`privfl.accounting.registry`), in registration order
ALIASES = {"gdp": "gdp-clt"}


@dataclass(frozen=True)
class AccountingOptions:
    """Knobs of the numerical accountants (the event itself says what ran)."""

    orders: str | Sequence[float] = "default"
    conversion: str = "improved"
    discretization: float = 1e-4


@dataclass
class AccountingReport:
    """Results of every requested method that supports the event, and why the others did not."""

    results: list[PrivacyResult] = field(default_factory=list)
    unsupported: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        data: dict = {"results": [r.to_dict() for r in self.results]}
        if self.unsupported:
            data["unsupported"] = dict(self.unsupported)
        return data


def resolve_methods(methods: str | Iterable[str]) -> tuple[str, ...]:
    """Expand ``"all"`` and aliases; refuse unknown names."""
    names = [methods] if isinstance(methods, str) else list(methods)
    steps = registered(nodes=False)  # read now: an accountant may be registered at run time
    resolved: list[str] = []
    for name in names:
        check_choice("method", name, (*steps, *ALIASES, "all"))
        for canonical in steps if name == "all" else (ALIASES.get(name, name),):
            if canonical not in resolved:
                resolved.append(canonical)
    return tuple(resolved)


def build_accountant(method: str, options: AccountingOptions | None = None) -> Accountant:
    """The accountant behind a method name, configured by ``options``."""
    options = options or AccountingOptions()
    (method,) = resolve_methods(method)
    return step_factory(method)(options)


def account(
    event: PrivacyEvent,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    methods: str | Iterable[str] = "all",
    options: AccountingOptions | None = None,
) -> AccountingReport:
    """Ask each method for epsilon at ``delta`` (or delta at ``epsilon``).

    With ``methods="all"`` a method that cannot handle the event is listed in
    ``report.unsupported`` with its reason, and so is a method whose numerics refuse the event
    (:class:`AccountingLimitError`, e.g. a PLD grid over its memory budget, or a ``MemoryError``):
    the other methods still answer. A method asked for by name that cannot handle the event
    raises :class:`UnsupportedEventError`, and one whose numerics refuse it raises that
    refusal (a ``ValueError`` naming the argument to change). If no method answers, a
    ``ValueError`` lists every reason.
    """
    check_event(event)
    if (delta is None) == (epsilon is None):
        raise ValueError("give exactly one of delta and epsilon")
    if delta is not None:
        delta = check_delta("delta", delta)
    else:
        epsilon = check_epsilon("epsilon", epsilon)
    requested_all = methods == "all" or (not isinstance(methods, str) and "all" in methods)
    report = AccountingReport()
    refused = False
    for method in resolve_methods(methods):
        accountant = build_accountant(method, options)
        reason = accountant.unsupported_reason(event)
        if reason is not None:
            if not requested_all:
                raise UnsupportedEventError(f"the {method} accountant cannot handle this: {reason}")
            report.unsupported[method] = reason
            continue
        try:
            if delta is not None:
                report.results.append(accountant.epsilon(event, delta))
            else:
                report.results.append(accountant.delta(event, epsilon))
        except (AccountingLimitError, MemoryError) as error:
            if not requested_all:
                if isinstance(error, MemoryError):
                    raise AccountingLimitError(_out_of_memory(method, error)) from None
                raise
            refused = True
            report.unsupported[method] = (
                _out_of_memory(method, error) if isinstance(error, MemoryError) else str(error)
            )
    if not report.results:
        error_type = AccountingLimitError if refused else UnsupportedEventError
        raise error_type(
            "no accountant supports this event: "
            + "; ".join(f"{m}: {r}" for m, r in report.unsupported.items())
        )
    return report


def _out_of_memory(method: str, error: MemoryError) -> str:
    detail = " ".join(str(error).split())
    return (
        f"the {method} accountant ran out of memory ({detail or 'MemoryError'}); "
        "this event needs a cheaper setting or another method"
    )
