"""Helper maps F_i of PriFedSync (Zheng et al. 2021, Algorithm 1): global model -> i's helper.

A helper map is called once per round with the cohort's freshly trained private models and the
new global model (both flat: ``[c, d]`` and ``[d]``) and returns the ``[c, d]`` helper models
the server pushes to the cohort. It only combines already-private models, so it is
post-processing and costs no privacy (Zheng et al. 2021, Section 2;
docs/run.md, "The algorithm", step 5).

* :class:`IdentityHelper` — ``F_i(w) = w``: every client receives the global model (FedAvg).
* :class:`InterpolationHelper` — eq. 2.1, ``F_i(w) = (1 - alpha) w~_i + alpha w``
  (``alpha = 0.1`` in all of Zheng et al.'s experiments; ``alpha = 1`` equals the identity,
  ``alpha = 0`` keeps purely local models).

Any callable with the same signature (``local, global_model, clients -> [c, d]``) can be passed
to :class:`~privfl.algorithms.prifedsync.PriFedSync` as a custom map, e.g. an
attention-weighted combination; it must use only the private models it is given.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from privfl._validation import check_choice, check_probability

__all__ = ["HELPERS", "HelperMap", "IdentityHelper", "InterpolationHelper", "make_helper"]

#: Names accepted by :func:`make_helper`.
HELPERS = ("interpolation", "identity")


class HelperMap(Protocol):
    """``(local [c, d], global_model [d], clients [c]) -> helpers [c, d]``."""

    name: str

    def __call__(
        self, local: torch.Tensor, global_model: torch.Tensor, clients: np.ndarray
    ) -> torch.Tensor: ...


class IdentityHelper:
    """``F_i(w) = w`` (FedAvg): the helper is the global model."""

    name = "identity"

    def __call__(
        self, local: torch.Tensor, global_model: torch.Tensor, clients: np.ndarray
    ) -> torch.Tensor:
        return global_model.unsqueeze(0).expand_as(local).clone()

    def __repr__(self) -> str:
        return "IdentityHelper()"


class InterpolationHelper:
    """``F_i(w) = (1 - alpha) w~_i + alpha w`` with w~_i client i's private model (eq. 2.1)."""

    name = "interpolation"

    def __init__(self, alpha: float = 0.1) -> None:
        self.alpha = check_probability("alpha", alpha)

    def __call__(
        self, local: torch.Tensor, global_model: torch.Tensor, clients: np.ndarray
    ) -> torch.Tensor:
        # lerp: local + alpha (global - local) = (1 - alpha) local + alpha global
        return torch.lerp(local, global_model.unsqueeze(0).expand_as(local), self.alpha)

    def __repr__(self) -> str:
        return f"InterpolationHelper(alpha={self.alpha!r})"


def make_helper(name: str, alpha: float = 0.1) -> HelperMap:
    """The helper map called ``name`` (``"interpolation"`` uses ``alpha``)."""
    name = check_choice("helper", name, HELPERS)
    if name == "identity":
        return IdentityHelper()
    return InterpolationHelper(alpha)
