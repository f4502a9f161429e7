"""Accountants registered by name: adding one is one module plus one :func:`register` line.

Two kinds of accountant register here:

* a **step accountant** answers a :class:`~privfl.accounting.events.PrivacyEvent` (a composition
  of noisy steps): ``rdp`` (Renyi DP, Mironov 2017; bound), ``pld`` (pessimistic privacy loss
  distribution, Koskela et al. 2020 / dp-accounting; bound), ``gdp-clt`` (Gaussian DP central
  limit, Bu et al. 2020 / Dong, Roth and Su 2019; estimate). Its factory takes the
  :class:`~privfl.accounting.methods.AccountingOptions` and returns an
  :class:`~privfl.accounting.base.Accountant`.
* a **node accountant** answers one node type of the event tree whose guarantee a paper proves
  directly: ``participation`` (:class:`~privfl.accounting.events.RandomParticipationStep`,
  Hasircioglu and Gunduz 2022) and ``contraction``
  (:class:`~privfl.accounting.events.LastIterateRelease`, Asoodeh et al. 2021). Its function
  takes ``(node, delta, options)`` and returns the labelled results.

Factories are named as ``"module:attribute"`` and imported on first use, so that registering
costs no import (the accountants' modules import numpy/scipy and dp-accounting).

Every name a user can put in ``privacy.accountants`` or give ``privfl account`` is a
:class:`Method` registered here with what its number is (``kind``: a bound, an estimate, or a
reference that is rigorous only for another mechanism), one line on it, and whether it is
recomputed from round 1 at each evaluation (``from_scratch``: too costly for every round's
metrics row). A step accountant is the method of its own name; a node accountant lists the
methods it answers. The configuration's validation, ``privfl list accountants``, the command
line's choices and the per-round accounting cadence all read this table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from privfl.accounting.events import (
    CorrelatedNoiseRelease,
    LastIterateRelease,
    RandomParticipationStep,
)

__all__ = ["KINDS", "Method", "Registered", "is_bound", "method", "methods", "node_accountant",
           "register", "register_method", "registered", "step_factory"]

#: what a method's number is: a rigorous bound, an approximation that may fall below the truth,
#: or a value rigorous only for another (more private) mechanism, shown for comparison
KINDS = ("bound", "estimate", "reference")


@dataclass(frozen=True)
class Registered:
    """One registered accountant: ``target`` (``"module:attribute"``) and, for a node
    accountant, the event-tree node type it answers (None: a step accountant)."""

    name: str
    target: str
    node: type | None = None

    def load(self) -> Callable[..., Any]:
        module, _, attribute = self.target.partition(":")
        value: Any = importlib.import_module(module)
        for part in attribute.split("."):
            value = getattr(value, part)
        return value


@dataclass(frozen=True)
class Method:
    """A name ``privacy.accountants`` and ``privfl account`` accept, and what its number is."""

    name: str
    kind: str  #: one of :data:`KINDS`
    about: str  #: one line: the method and where it comes from
    from_scratch: bool = False  #: recomputed from round 1 at every evaluation

    def describe(self) -> str:
        """``about`` and its kind, as ``privfl list accountants`` prints it."""
        article = "an" if self.kind == "estimate" else "a"
        return f"{self.about}: {article} {self.kind}"


_REGISTRY: dict[str, Registered] = {}
_METHODS: dict[str, Method] = {}


def register(name: str, target: str, *, node: type | None = None, kind: str | None = None,
             about: str | None = None, from_scratch: bool = False) -> None:
    """Register accountant ``name`` implemented by ``target`` (``"module:attribute"``); ``node``
    is the event-tree node type a node accountant answers (its methods are registered with
    :func:`register_method`). A step accountant (``node=None``) is also the method ``name``:
    ``kind``, ``about`` and ``from_scratch`` describe it. A name is registered once."""
    if not isinstance(name, str) or not name or name in _REGISTRY:
        raise ValueError(f"name = {name!r} is not allowed: must be a new, non-empty accountant "
                         f"name (registered: {', '.join(_REGISTRY)})")
    if not isinstance(target, str) or ":" not in target:
        raise ValueError(f"target = {target!r} is not allowed: must be 'module:attribute'")
    if node is None:
        register_method(name, kind=kind, about=about, from_scratch=from_scratch)
    elif kind is not None or about is not None:
        raise ValueError(f"kind/about = {kind!r}/{about!r} are not allowed for node accountant "
                         f"{name!r}: register its methods with register_method")
    _REGISTRY[name] = Registered(name, target, node)


def register_method(name: str, *, kind: str | None, about: str | None,
                    from_scratch: bool = False) -> None:
    """Register method ``name`` (a name ``privacy.accountants`` accepts) with its ``kind``
    (:data:`KINDS`) and one line ``about`` it. A name is registered once."""
    if not isinstance(name, str) or not name or name in _METHODS:
        raise ValueError(f"name = {name!r} is not allowed: must be a new, non-empty method name "
                         f"(registered: {', '.join(_METHODS)})")
    if kind not in KINDS:
        raise ValueError(f"kind = {kind!r} is not allowed for method {name!r}: must be one of "
                         f"{', '.join(KINDS)}")
    if not isinstance(about, str) or not about.strip():
        raise ValueError(f"about = {about!r} is not allowed for method {name!r}: must be one "
                         "line on what it is")
    _METHODS[name] = Method(name, kind, about.strip(), bool(from_scratch))


def unregister(name: str) -> None:
    """Remove accountant and method ``name`` (for tests that register a toy one)."""
    _REGISTRY.pop(name, None)
    _METHODS.pop(name, None)


def methods() -> dict[str, Method]:
    """Every registered method, in registration order."""
    return dict(_METHODS)


def method(name: str) -> Method:
    """The registered method ``name``."""
    if name not in _METHODS:
        raise ValueError(f"accountant = {name!r} is not allowed: must be one of "
                         f"{', '.join(_METHODS)}")
    return _METHODS[name]


def is_bound(name: str) -> bool:
    """Whether method ``name``'s number is a rigorous bound (a budget may rest on it)."""
    return method(name).kind == "bound"


def registered(*, nodes: bool | None = None) -> tuple[str, ...]:
    """Registered names in registration order (``nodes``: only node accountants if True, only
    step accountants if False)."""
    return tuple(n for n, r in _REGISTRY.items()
                 if nodes is None or (r.node is not None) == nodes)


def step_factory(name: str) -> Callable[..., Any]:
    """The factory ``options -> Accountant`` of step accountant ``name``."""
    entry = _REGISTRY.get(name)
    if entry is None or entry.node is not None:
        raise ValueError(f"method = {name!r} is not allowed: must be one of "
                         f"{', '.join(registered(nodes=False))}")
    return entry.load()


def node_accountant(node: object) -> Callable[..., Any]:
    """The function ``(node, delta, options) -> list[PrivacyResult]`` registered for the type
    of ``node``."""
    for entry in _REGISTRY.values():
        if entry.node is not None and type(node) is entry.node:
            return entry.load()
    raise ValueError(f"event = {type(node).__name__} is not allowed: no accountant is "
                     "registered for it")


# the built-in accountants and their methods: one registration each
register("rdp", "privfl.accounting.rdp:RdpAccountant.from_options", kind="bound",
         about="Renyi DP over exact fractional orders, converted to (epsilon, delta)")
register("pld", "privfl.accounting.pld.accountant:PldAccountant.from_options", kind="bound",
         about="privacy loss distribution with pessimistic discretisation", from_scratch=True)
register("gdp-clt", "privfl.accounting.gdp.accountant:GdpCltAccountant.from_options",
         kind="estimate", about="Gaussian DP by the central limit theorem (Zheng et al. 2021)")
register("participation", "privfl.accounting.participation.accountant:account_participation",
         node=RandomParticipationStep)
register_method("per-s1-convexity", kind="bound",
                about="dp-dsgd: random participation by joint convexity over each client's own "
                      "sampling (Hasircioglu and Gunduz 2022 setting)")
register_method("wcs", kind="bound",
                about="dp-dsgd: random participation with participation revealed")
register_method("ols", kind="bound", about="dp-dsgd: Poisson sampling of records at rate q alone")
register_method("theorem-4.1", kind="estimate",
                about="dp-dsgd: Hasircioglu and Gunduz 2022 Theorem 4.1 (Eq. 6), one "
                      "configuration's delta (can fall below the truth)")
register_method("cs", kind="reference",
                about="dp-dsgd: centralised Poisson sampling at rate p q (rigorous only for that "
                      "more private mechanism)")
register("contraction", "privfl.accounting.contraction.accountant:account_last_iterate",
         node=LastIterateRelease)
register_method("contraction", kind="bound",
                about="projected-sgd: last-iterate bound by contraction of the E_gamma divergence "
                      "(Asoodeh et al. 2021)")
register_method("contraction-sharpened", kind="bound",
                about="projected-sgd: the same contraction with privfl's sharpened chain rule")
register("correlated-noise", "privfl.accounting.correlated.accountant:account_correlated_noise",
         node=CorrelatedNoiseRelease)
register_method("gdp", kind="bound",
                about="dp-ftrl, bandmf-fedavg: the exact Gaussian-DP curve of the correlated-noise "
                      "mechanism on its sensitivity (replace-with-zero)")
