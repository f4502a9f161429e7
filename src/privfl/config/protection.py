"""The ``protection`` section of a ``privfl run`` configuration: client-side distortion.

Zhang, Chen and Yang 2022's protection of each client's upload, for every algorithm that
``privfl run`` runs (applied by :mod:`privfl.algorithms.protection`)::

    data_k <- each record kept with probability record_rate          (their Algorithm 2)
    w_k    <- the client's local work on data_k
    w~_k   <- w_k * mask, each coordinate kept with probability mask_keep_rate   (extension)
    w~_k   <- w~_k + N(0, diag(s_i^2))                               (their Algorithm 3)

where ``s_i`` is the noise std of the parameter holding coordinate ``i``: the std of the first
(only) ``layers`` pattern that matches the parameter's name (:func:`fnmatch.fnmatchcase`, e.g.
``"fc1.*"``, ``"*.bias"``), else ``noise_std``. A pattern that matches no parameter of the
model, or a parameter matched by two patterns, is refused when the model is built.

This is a distortion measure (the TV distance between the protected and unprotected uploads,
:mod:`privfl.distortion`), NOT a differential-privacy guarantee: it does not enter any
accountant and the printed epsilon does not include it. Kept free of torch and of
:mod:`privfl.config.schema` (which imports it).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["GRADIENT_ALGORITHMS", "RECORD_SAMPLING_ALGORITHMS", "ProtectionConfig"]

#: Algorithms whose printed guarantee survives a client-side Poisson thinning of its records
#: while private: DP-FedAvg's guarantee is client-level and the server clips every update. The
#: record-level accountants of the others assume each client's full data (their sampling rates
#: are B / n_k or p over all n_k records), so ``record_rate < 1`` is refused for them unless
#: ``privacy.enabled: false``.
RECORD_SAMPLING_ALGORITHMS = ("dp-fedavg",)
#: Algorithms whose clients send gradients of records the algorithm samples itself: no record
#: thinning on top (distortion of each client's message is allowed).
GRADIENT_ALGORITHMS = ("dp-dsgd", "projected-sgd")


class ProtectionConfig(BaseModel):
    """Client-side protection of every upload (Zhang, Chen and Yang 2022); off by default."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    record_rate: float = Field(
        1.0, gt=0, le=1, description="p: each local record joins the round's local data with "
        "probability p (Algorithm 2's data generation); 1 = off")
    mask_keep_rate: float | None = Field(
        None, gt=0, le=1, description="rho: each uploaded coordinate kept with probability "
        "rho, zeroed otherwise (random-mask compression); null = off")
    noise_std: float = Field(
        0.0, ge=0, description="default std of the Gaussian distortion added to every "
        "uploaded coordinate (Algorithm 3's sigma_eps); 0 = off")
    layers: dict[str, float] = Field(
        default_factory=dict, description="parameter-name pattern (fnmatch, e.g. 'fc1.*') -> "
        "noise std of the parameters it matches, instead of noise_std")
    secure: bool | None = Field(
        None, description="draw the protection's randomness from os.urandom; null = as "
        "privacy.secure (secure mode refuses false)")

    @field_validator("record_rate", "mask_keep_rate", "noise_std", mode="before")
    @classmethod
    def _number(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a number, not a boolean")
        return value

    @field_validator("layers", mode="before")
    @classmethod
    def _layers(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValueError("must be a mapping of parameter-name patterns to noise stds")
        for pattern, std in value.items():
            if not isinstance(pattern, str) or not pattern.strip():
                raise ValueError(f"protection.layers: pattern {pattern!r} is not allowed: "
                                 "must be a non-empty string")
            if (isinstance(std, bool) or not isinstance(std, (int, float))
                    or not math.isfinite(std) or std < 0):
                raise ValueError(f"protection.layers[{pattern!r}] = {std!r} is out of range: "
                                 "must be a finite noise std >= 0")
        return value

    @property
    def active(self) -> bool:
        """Any step is on."""
        return (self.record_rate < 1 or self.mask_keep_rate is not None
                or self.noise_std > 0 or any(s > 0 for s in self.layers.values()))

    def check(self, privacy: Any, algorithm: str) -> None:
        """Cross-section rules (``privacy``: the PrivacyConfig; ``algorithm``: the name)."""
        if privacy.secure and self.secure is False:
            raise ValueError("protection.secure = false is not allowed with privacy.secure = "
                             "true: secure mode needs the protection's randomness from "
                             "os.urandom too (leave protection.secure out)")
        if self.record_rate < 1 and algorithm in GRADIENT_ALGORITHMS:
            raise ValueError(
                f"protection.record_rate = {self.record_rate!r} is not allowed for "
                f"federated.algorithm = {algorithm!r}: its clients send gradients of records "
                "the algorithm samples itself; use 1 (distortion only)")
        if (self.record_rate < 1 and privacy.enabled
                and algorithm not in RECORD_SAMPLING_ALGORITHMS):
            raise ValueError(
                f"protection.record_rate = {self.record_rate!r} is not allowed for "
                f"federated.algorithm = {algorithm!r} with privacy.enabled: its record-level "
                "accountant assumes each client's full data; use 1, or "
                f"{', '.join(RECORD_SAMPLING_ALGORITHMS)}, or privacy.enabled: false")

    def is_secure(self, privacy: Any) -> bool:
        """Whether the protection draws from ``os.urandom``."""
        return bool(privacy.secure) if self.secure is None else self.secure
