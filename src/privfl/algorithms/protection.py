"""A client-side protection hook that any algorithm on the seam can take.

Client-side protection (Zhang, Chen and Yang 2022: record sampling "data generation", then
parameter distortion of the uploaded model) runs inside a client's local work, before anything
reaches the server, like Flower's client mods. An algorithm with a ``protection`` object calls
:func:`protected_train` (or :func:`protected_local_models`) in its local work instead of
training the cohort directly, or :meth:`ProtectionHook.distort` on what its clients send::

    data_k  <- protection.sample_records(data_k)        e.g. each record kept with probability p
    w_k     <- local training from the start model      (a client left with fewer records than
                                                          one batch does not move: no data, no
                                                          step, as Algorithm 2 with an empty S)
    w~_k    <- protection.distort(w_k)                  e.g. Gaussian noise, a random mask

With no protection, algorithms keep their own code path, so their numbers are unchanged.
Protection happens before any server-side DP mechanism and does not enter its accountant: the
server's clipping bounds every update whatever the client did, and a data-independent
distortion of a client-side DP output is post-processing, so the printed guarantee still holds
(the protection's own privacy is a distortion measure, :mod:`privfl.distortion`, not accounted).

:func:`build_protection` turns the ``protection`` section of a configuration
(:mod:`privfl.config.protection`) into a :class:`~privfl.distortion.ClientProtection` for the
algorithm's model (per-layer noise stds resolved against its parameter names), and
:func:`attach_protection` gives it to any algorithm ``privfl run`` builds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

__all__ = ["ConfiguredProtection", "ProtectionHook", "attach_protection", "build_protection",
           "protected_local_models", "protected_train"]


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


def _check_hook(protection: Any) -> None:
    if not isinstance(protection, ProtectionHook):
        raise ValueError(f"protection = {protection!r} is not allowed: must have secure, "
                         "sample_records and distort")


def protected_train(trainer: Any, start: torch.Tensor,
                    data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                    protection: ProtectionHook, generator: torch.Generator, min_records: int,
                    states: Mapping[str, torch.Tensor] | None = None,
                    lr: float | torch.Tensor | None = None, distort: bool = True
                    ) -> tuple[torch.Tensor, Mapping[str, torch.Tensor] | None, Any]:
    """The cohort's protected local models ``[c, d]`` (trained on the sampled records, then
    distorted; ``distort=False``: not yet distorted, for a caller that keeps the local model
    and distorts only the upload), their new optimizer states (rows of
    clients that did not train keep their old state; None if ``states`` is None) and the
    training stats (None if no client had ``min_records`` records left after sampling).

    ``trainer``: a :class:`~privfl.fl.CohortTrainer`; ``start``: the flat start model ``[d]``
    shared by the cohort, or one row per client ``[c, d]``; ``data``: the cohort's ``(x, y)``
    in order; ``min_records``: the fewest records local training accepts (its batch size);
    ``states``, ``lr``: per-row optimizer states and a learning-rate override, as in
    :meth:`CohortTrainer.train <privfl.fl.CohortTrainer.train>`.
    """
    _check_hook(protection)
    data = protection.sample_records(data, generator)
    c = len(data)
    rows = start.unsqueeze(0).expand(c, -1) if start.dim() == 1 else start
    active = [j for j, (_, y) in enumerate(data) if int(y.shape[0]) >= min_records]
    models = rows.clone()
    stats = None
    if active:
        pick = torch.as_tensor(active, dtype=torch.long)
        begin = trainer.unflatten(rows[pick].clone())
        old = None if states is None else {k: v[pick.to(v.device)] for k, v in states.items()}
        rate = lr[pick.to(lr.device)] if isinstance(lr, torch.Tensor) else lr
        params, new, stats = trainer.train(begin, [data[j] for j in active], old, generator,
                                           lr=rate)
        models[pick.to(models.device)] = trainer.flatten(params).to(models.dtype)
        if states is not None and new is not None:
            states = {k: v.clone() for k, v in states.items()}
            for k, v in new.items():
                states[k][pick.to(states[k].device)] = v.to(states[k].dtype)
    return (protection.distort(models, generator) if distort else models), states, stats


def protected_local_models(trainer: Any, start: torch.Tensor,
                           data: Sequence[tuple[torch.Tensor, torch.Tensor]],
                           protection: ProtectionHook, generator: torch.Generator,
                           min_records: int) -> tuple[torch.Tensor, Any]:
    """:func:`protected_train` from one start model ``[d]`` without optimizer states: the
    models ``[c, d]`` and the stats."""
    models, _, stats = protected_train(trainer, start, data, protection, generator,
                                       min_records)
    return models, stats


@dataclass(frozen=True)
class ConfiguredProtection:
    """A configuration's protection for one model: the hook and what the report shows.

    ``hook``: the :class:`~privfl.distortion.ClientProtection`; ``layer_stds``: the resolved
    ``parameter name -> noise std``; ``record_rate``, ``mask_keep_rate``: as configured.
    """

    hook: Any
    layer_stds: dict[str, float]
    record_rate: float
    mask_keep_rate: float | None

    def text(self) -> str:
        """One line for report.md's "what ran": what the protection is, covers and is not."""
        parts = []
        if self.record_rate < 1:
            parts.append(f"records kept with p = {self.record_rate:g}")
        if self.mask_keep_rate is not None:
            parts.append(f"random mask rho = {self.mask_keep_rate:g}")
        stds = self.layer_stds
        if any(s > 0 for s in stds.values()):
            parts.append("Gaussian noise std " + ", ".join(f"{n} {s:g}" for n, s in stds.items()))
        secure = "os.urandom" if self.hook.secure else "the seeded generator"
        return ("Zhang, Chen and Yang 2022 client-side distortion of every upload: "
                + "; ".join(parts) + f" (randomness from {secure}). A distortion measure, "
                "not a DP guarantee: the printed epsilon does not include it; it covers what "
                "each client sends, not the evaluation metrics, the released model's "
                "accuracy or anything computed before the upload")


def build_protection(config: Any, trainer: Any) -> ConfiguredProtection | None:
    """The ``protection`` section of ``config`` for ``trainer``'s model (None when every step
    is off). Patterns of ``protection.layers`` are resolved against the model's parameter
    names (:func:`~privfl.distortion.layers.resolve_layer_stds`); a constant std gives Zhang,
    Chen and Yang 2022's isotropic :class:`~privfl.distortion.GaussianDistortion`."""
    from privfl.config import ConfigError
    from privfl.distortion.layers import LayerGaussianDistortion, resolve_layer_stds
    from privfl.distortion.mechanisms import (
        ClientProtection,
        GaussianDistortion,
        PoissonRecordSampling,
        RandomMask,
    )

    p = config.protection
    if not p.active:
        return None
    names = list(trainer.param_names)
    try:
        stds = resolve_layer_stds(names, p.noise_std, p.layers, key="protection.layers")
    except ValueError as error:
        raise ConfigError(str(error)) from None
    secure = p.is_secure(config.privacy)
    sampling = PoissonRecordSampling(p.record_rate, secure) if p.record_rate < 1 else None
    steps: list[Any] = []
    if p.mask_keep_rate is not None:
        steps.append(RandomMask(p.mask_keep_rate, secure))
    values = set(stds.values())
    if values == {p.noise_std} and p.noise_std > 0:
        steps.append(GaussianDistortion(p.noise_std ** 2, secure))
    elif any(s > 0 for s in values):
        sizes = {n: math.prod(trainer.param_shapes[n]) for n in names}
        steps.append(LayerGaussianDistortion.from_layers(stds, sizes, secure))
    hook = ClientProtection(sampling=sampling, distortions=tuple(steps))
    return ConfiguredProtection(hook, stds, p.record_rate, p.mask_keep_rate)


def attach_protection(algorithm: Any, config: Any) -> Any:
    """Give ``algorithm`` (built by ``privfl run``) the configuration's protection: sets
    ``algorithm.protection`` (the hook its local work applies) and
    ``algorithm.protection_config`` (:class:`ConfiguredProtection`, for the report); returns
    ``algorithm``. An algorithm whose local work does not apply it (class attribute
    ``applies_protection`` false) refuses an active section. Secure mode refuses a protection
    that draws from a seeded generator."""
    from privfl.config import ConfigError

    if not config.protection.active:
        return algorithm
    if not getattr(algorithm, "applies_protection", False):
        raise ConfigError(
            f"protection is not supported by federated.algorithm = "
            f"{config.federated.algorithm!r}: its local work does not apply a client-side "
            "protection (applies_protection is false); remove the protection section")
    configured = build_protection(config, algorithm.trainer)
    if configured is None:
        return algorithm
    if getattr(algorithm, "secure", False) and not configured.hook.secure:
        raise ConfigError(f"protection = {configured.hook!r} is not secure: secure mode needs "
                          "its randomness from os.urandom too")
    algorithm.protection = configured.hook
    algorithm.protection_config = configured
    return algorithm
