"""A client-side protection hook that any algorithm on the seam can take.

Client-side protection (Zhang, Chen and Yang 2022: record sampling "data generation", then
parameter distortion of the uploaded model) runs inside a client's local work, before anything
reaches the server, like Flower's client mods. An algorithm that accepts a ``protection``
object calls :func:`protected_local_models` in its local work instead of training the cohort
directly::

    data_k  <- protection.sample_records(data_k)        e.g. each record kept with probability p
    w_k     <- local training from the start model      (a client left with fewer records than
                                                          one batch does not move: no data, no
                                                          step, as Algorithm 2 with an empty S)
    w~_k    <- protection.distort(w_k)                  e.g. Gaussian noise, a random mask

With no protection, algorithms keep their own code path, so their numbers are unchanged.
Protection happens before any server-side DP mechanism and does not enter its accountant: the
server's clipping bounds every update whatever the client did, so a server-side guarantee still
holds (the protection's own privacy is measured by :mod:`privfl.distortion`, not accounted).
Implementations: :class:`privfl.distortion.mechanisms.ClientProtection`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["ProtectionHook", "protected_local_models"]


@runtime_checkable
class ProtectionHook(Protocol):
    """What an algorithm needs from a client-side protection (see the module docstring)."""

    @property
    def secure(self) -> bool:
        """Every random step draws from ``os.urandom``."""
        ...

    def sample_records(self, data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                       generator: torch.Generator | None = None
                       ) -> list[tuple[torch.Tensor, torch.Tensor]]: ...

    def distort(self, models: torch.Tensor, generator: torch.Generator | None = None
                ) -> torch.Tensor: ...


def protected_local_models(trainer: Any, start: torch.Tensor,
                           data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                           protection: ProtectionHook, generator: torch.Generator,
                           min_records: int) -> tuple[torch.Tensor, Any]:
    """The cohort's protected local models ``[c, d]`` and the training stats (None if no
    client had ``min_records`` records left after sampling).

    ``trainer``: a :class:`~privfl.fl.CohortTrainer`; ``start``: the flat start model ``[d]``
    shared by the cohort; ``data``: the cohort's ``(x, y)`` in order; ``min_records``: the fewest
    records local training accepts (its batch size).
    """
    if not isinstance(protection, ProtectionHook):
        raise ValueError(f"protection = {protection!r} is not allowed: must have secure, "
                         "sample_records and distort")
    data = protection.sample_records(data, generator)
    active = [j for j, (_, y) in enumerate(data) if int(y.shape[0]) >= min_records]
    models = start.unsqueeze(0).expand(len(data), -1).clone()
    stats = None
    if active:
        begin = trainer.unflatten(start.unsqueeze(0).expand(len(active), -1).clone())
        params, _, stats = trainer.train(begin, [data[j] for j in active], None, generator)
        models[active] = trainer.flatten(params).to(models.dtype)
    return protection.distort(models, generator), stats
