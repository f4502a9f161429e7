"""The RDP accountant: each step's curve by sampling scheme, summed over an event, converted.

:class:`RdpAccountant` picks each step's curve (Poisson-subsampled Gaussian, unsampled Gaussian,
fixed-size Gaussian, unsampled Laplace), adds ``count x curve`` over the event's steps
(Mironov 2017, Prop. 1) and converts the total with
:func:`~privfl.accounting.rdp.conversion.epsilon_from_rdp` /
:func:`~privfl.accounting.rdp.conversion.delta_from_rdp`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privfl._validation import check_choice
from privfl.accounting.base import Accountant
from privfl.accounting.events import (
    Neighbouring,
    Noise,
    NoisyStep,
    PrivacyEvent,
    Sampling,
)
from privfl.accounting.rdp.conversion import CONVERSIONS, delta_from_rdp, epsilon_from_rdp
from privfl.accounting.rdp.orders import resolve_orders
from privfl.accounting.rdp.poisson import rdp_poisson_gaussian
from privfl.accounting.rdp.unsampled import rdp_gaussian, rdp_laplace
from privfl.accounting.rdp.without_replacement_gaussian import rdp_without_replacement_gaussian
from privfl.accounting.results import PrivacyResult


def _unsupported_step(step: NoisyStep, neighbouring: Neighbouring) -> str | None:
    sampling = step.effective_sampling
    relation = neighbouring.value
    if step.noise is Noise.GAUSSIAN:
        if sampling is Sampling.NONE:
            return None
        if sampling is Sampling.POISSON and neighbouring is Neighbouring.ADD_REMOVE:
            return None
        if sampling is Sampling.WITHOUT_REPLACEMENT and neighbouring is Neighbouring.REPLACE_ONE:
            return None
        if sampling is Sampling.POISSON:
            return (
                f"Poisson sampling (q={step.sampling_rate:g}) with {relation} neighbours is not "
                "supported (the sampled-Gaussian RDP is for add-remove neighbours)"
            )
        return (
            f"sampling without replacement (q={step.sampling_rate:g}) with {relation} neighbours "
            "is not supported (fixed-size batches are accounted under replace-one neighbours)"
        )
    if step.noise is Noise.LAPLACE and sampling is Sampling.NONE:
        return None
    return (
        f"{step.noise.value} noise with {sampling.value} sampling (q={step.sampling_rate:g}) is "
        "not supported (Laplace noise is only accounted without subsampling)"
    )


@functools.lru_cache(maxsize=4096)
def _step_curve(
    step: NoisyStep, neighbouring: Neighbouring, orders: tuple[float, ...]
) -> np.ndarray:
    """Per-step RDP curve (read-only, cached on the frozen step and the orders tuple)."""
    z = step.noise_multiplier
    replace_one = neighbouring is Neighbouring.REPLACE_ONE
    sampling = step.effective_sampling
    if step.noise is Noise.LAPLACE:
        curve = rdp_laplace(orders, z / 2.0 if replace_one else z)
    elif sampling is Sampling.NONE:
        curve = rdp_gaussian(orders, z, 2.0 if replace_one else 1.0)
    elif sampling is Sampling.POISSON:
        curve = rdp_poisson_gaussian(orders, step.sampling_rate, z)
    else:  # Gaussian, without replacement, replace-one
        curve = rdp_without_replacement_gaussian(orders, step.sampling_rate, z)
    curve = np.asarray(curve, dtype=float)
    curve.setflags(write=False)
    return curve


class RdpAccountant(Accountant):
    """Renyi-DP accountant: sums ``count x per-step RDP`` over an event's steps, then converts.

    Supported steps (``step.effective_sampling``):

    * Gaussian, Poisson, add-remove - :func:`rdp_poisson_gaussian` (MTZ 2019);
    * Gaussian, no sampling - :func:`rdp_gaussian`, sensitivity 1 (add-remove) / 2 (replace-one);
    * Gaussian, without replacement, replace-one - :func:`rdp_without_replacement_gaussian`
      (WBK 2019 Thm. 27, the Gaussian-specific bound; base ``2 a / z^2``, i.e. sigma = z/2
      relative to the replace-one sensitivity 2C);
    * Laplace, no sampling - :func:`rdp_laplace` with scale ``z`` (add-remove) / ``z/2``
      (replace-one); z is the Laplace scale over the (L1) clipping norm.

    Anything else (Poisson sampling with replace-one neighbours, fixed-size sampling with
    add-remove neighbours, subsampled Laplace) is refused by :meth:`unsupported_reason` with a
    sentence naming the combination. Per-step curves are cached (``functools.lru_cache`` on the
    frozen step, the relation and the orders), so repeated :meth:`rdp_curve` calls are cheap.

    Parameters
    ----------
    orders : ``"default"``, ``"legacy"``, a comma list or a sequence (see :func:`resolve_orders`).
    conversion : ``"improved"`` (Balle et al. 2020, default) or ``"classic"`` (Mironov 2017).
    """

    name = "rdp"
    kind = "bound"

    def __init__(self, orders: str | Sequence[float] = "default", conversion: str = "improved"):
        self.orders: tuple[float, ...] = tuple(resolve_orders(orders).tolist())
        self.conversion = check_choice("conversion", conversion, CONVERSIONS)

    @classmethod
    def from_options(cls, options: Any) -> RdpAccountant:
        """The accountant configured by an :class:`~privfl.accounting.methods.AccountingOptions`
        (its ``orders`` and ``conversion``)."""
        return cls(orders=options.orders, conversion=options.conversion)

    def unsupported_reason(self, event: PrivacyEvent) -> str | None:
        return self._first_step_reason(event, _unsupported_step)

    def rdp_curve(self, event: PrivacyEvent) -> np.ndarray:
        """Total RDP of the event at ``self.orders`` (a new, writable array)."""
        self._require_supported(event)
        total = np.zeros(len(self.orders))
        for step, count in event.steps:
            if count:
                total += count * _step_curve(step, event.neighbouring, self.orders)
        return total

    def _note(self, order: float) -> str:
        if math.isnan(order):
            return (
                "the RDP of this event exceeds the float range (about 1.8e308) at every order: "
                "no finite guarantee can be stated"
            )
        if order == max(self.orders):
            return (
                "the optimal order is the largest of the grid; a grid with larger orders may "
                "give a smaller epsilon"
            )
        if len(self.orders) > 1 and order == min(self.orders):
            return (
                "the optimal order is the smallest of the grid; a grid with orders closer to 1 "
                "may give a smaller epsilon"
            )
        return ""

    def _result(
        self, event: PrivacyEvent, epsilon: float, delta: float, order: float
    ) -> PrivacyResult:
        """The labelled result of a conversion whose optimal order is ``order``."""
        return PrivacyResult.for_event(
            event,
            method=self.name,
            kind=self.kind,
            epsilon=epsilon,
            delta=delta,
            note=self._note(order),
            order=order,
            conversion=self.conversion,
        )

    def _epsilon(self, event: PrivacyEvent, delta: float) -> PrivacyResult:
        curve = self.rdp_curve(event)
        epsilon, order = epsilon_from_rdp(self.orders, curve, delta, self.conversion)
        return self._result(event, epsilon, delta, order)

    def _delta(self, event: PrivacyEvent, epsilon: float) -> PrivacyResult:
        curve = self.rdp_curve(event)
        delta, order = delta_from_rdp(self.orders, curve, epsilon, self.conversion)
        return self._result(event, epsilon, delta, order)
