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

__all__ = ["Registered", "node_accountant", "register", "registered", "step_factory"]


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


_REGISTRY: dict[str, Registered] = {}


def register(name: str, target: str, *, node: type | None = None) -> None:
    """Register accountant ``name`` implemented by ``target`` (``"module:attribute"``); ``node``
    is the event-tree node type a node accountant answers. A name is registered once."""
    if not isinstance(name, str) or not name or name in _REGISTRY:
        raise ValueError(f"name = {name!r} is not allowed: must be a new, non-empty accountant "
                         f"name (registered: {', '.join(_REGISTRY)})")
    if not isinstance(target, str) or ":" not in target:
        raise ValueError(f"target = {target!r} is not allowed: must be 'module:attribute'")
    _REGISTRY[name] = Registered(name, target, node)


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


# the built-in accountants: one line each
register("rdp", "privfl.accounting.rdp:RdpAccountant.from_options")
register("pld", "privfl.accounting.pld.accountant:PldAccountant.from_options")
register("gdp-clt", "privfl.accounting.gdp.accountant:GdpCltAccountant.from_options")
register("participation", "privfl.accounting.participation.accountant:account_participation",
         node=RandomParticipationStep)
register("contraction", "privfl.accounting.contraction.accountant:account_last_iterate",
         node=LastIterateRelease)
register("correlated-noise", "privfl.accounting.correlated.accountant:account_correlated_noise",
         node=CorrelatedNoiseRelease)
