"""Configuration of ``privfl tradeoff``: a ``privfl run`` configuration plus a ``tradeoff``
section (the grids of the mechanisms, the measurement and the bounds' constants).

The ``privfl run`` part (``data``, ``model``, ``training``, ``federated``, ...) trains the base
federated model; it must use ``federated.algorithm: dp-fedavg`` (with ``privacy.enabled:
false`` it is plain FedAvg). :data:`DEFAULT_TRADEOFF` is the built-in default, the same as
``configs/tradeoff-default.yaml``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from privfl.config import ConfigError, ExperimentConfig, apply_overrides, config_from_dict
from privfl.config.loader import read_yaml

__all__ = ["DEFAULT_TRADEOFF", "TradeoffSettings", "load_tradeoff"]

#: The built-in default (``privfl tradeoff`` without CONFIG; configs/tradeoff-default.yaml).
#: Logistic regression trained by FedAvg on the MNIST 5k subset, 10 IID clients of 100 records.
DEFAULT_TRADEOFF: dict[str, Any] = {
    "name": "tradeoff-default",
    "description": "utility-privacy trade-off of Zhang, Chen and Yang 2022 on FedAvg-trained "
                   "logistic regression, MNIST 5k subset, 10 IID clients of 100 records",
    "seed": 0,
    "data": {"dataset": "mnist-5k", "partition": "iid", "clients": 10, "train_size": 100,
             "test_size": 100},
    "model": {"name": "logreg"},
    "training": {"local_steps": 5, "batch_size": 20, "optimizer": "sgd", "lr": 0.1,
                 "weight_decay": 0.001},
    "privacy": {"enabled": False},
    "federated": {"algorithm": "dp-fedavg", "rounds": 20, "client_rate": 1.0},
    "run": {"threads": 1},
    "tradeoff": {
        "replicas": 480,
        "sampling_rate": 0.5,
        "candidates": 4,
        "gaussian": [0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7],
        "mask": [0.99999, 0.9999, 0.999, 0.99, 0.9],
        "sampling": [0.1, 0.3, 0.7, 0.9, 1.0],
        "gaps": [0.001, 0.005],
        "protected_rounds": 10,
    },
}


Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
KeepRate = Annotated[float, Field(ge=0, le=1)]
Rate = Annotated[float, Field(gt=0, le=1)]
Gap = Annotated[float, Field(gt=0, lt=1)]


class TradeoffSettings(BaseModel):
    """The ``tradeoff`` section (every key optional)."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    replicas: int = Field(480, ge=2, le=100_000, description="Monte Carlo draws of the measured "
                          "round per client and grid point")
    sampling_rate: float = Field(0.5, gt=0, lt=1, description="p0: record sampling rate of the "
                                 "unprotected step (Algorithm 2)")
    lr: float | None = Field(None, gt=0, description="eta of the measured step (default "
                             "training.lr)")
    candidates: int = Field(4, ge=2, le=64, description="J: the attacker's candidates for one "
                            "record of each client (a uniform prior)")
    tempering: float = Field(0.1, ge=0, lt=1, description="t: the attacker's posterior is "
                             "mixed with the prior, (1 - t) posterior + t prior, which makes xi "
                             "and C2 finite (t = 0: xi is infinite for its Gaussian kernel)")
    attacker: Literal["matched", "fixed"] = Field(
        "matched", description="the attacker's kernel: matched to each point's release, or "
        "fixed at the unprotected one (the paper's f(d | w) as a constant)")
    aggregation: Literal["size", "uniform"] = "size"
    gaussian: list[Positive] = Field(default_factory=lambda: list(
        DEFAULT_TRADEOFF["tradeoff"]["gaussian"]), description="x = sigma_eps^2 sqrt(d) / "
        "sigma^2 (Lemma 6.7's argument) of each Gaussian distortion")
    mask: list[KeepRate] = Field(default_factory=lambda: list(
        DEFAULT_TRADEOFF["tradeoff"]["mask"]), description="keep rates rho of the random mask")
    sampling: list[Rate] = Field(default_factory=lambda: list(
        DEFAULT_TRADEOFF["tradeoff"]["sampling"]), description="record rates p")
    gaps: list[Gap] = Field(default_factory=lambda: list(
        DEFAULT_TRADEOFF["tradeoff"]["gaps"]), description="TV targets C1 - tau for Lemma "
        "6.8's noise, the exact isotropic calibration and the calibration under per-coordinate "
        "variances")
    c6: float | None = Field(None, gt=0, description="C6 of Theorem 6.1 (null: from C3, C4, "
                             "C5 measured on held-out draws of each point, which the checks of "
                             "Theorems 6.1 and 6.12 do not use)")
    gamma: float = Field(1.0, gt=0, description="gamma of Theorem 6.13")
    nfl_delta: float | None = Field(None, gt=0, description="Delta of Theorem 6.13 (null: "
                                    "Theorem 6.14's C_d = C2 / C6)")
    protected_rounds: int = Field(10, ge=0, le=10_000, description="rounds of training with each "
                                  "protection through the hook (0: skip)")


def _settings_error(error: ValidationError) -> str:
    parts = []
    for e in error.errors():
        key = "tradeoff"
        for part in e.get("loc", ()):
            key += f"[{part}]" if isinstance(part, int) else f".{part}"
        message = str(e.get("msg", "")).removeprefix("Value error, ")
        if e.get("type") == "extra_forbidden":
            parts.append(f"{key} is not a known key: allowed keys in tradeoff are "
                         f"{', '.join(TradeoffSettings.model_fields)}")
        elif message.startswith("Input should be"):  # a range, a type or a choice
            verdict = ("is out of range" if str(e.get("type")).startswith(("greater", "less"))
                       else "is not allowed")
            parts.append(f"{key} = {e.get('input')!r} {verdict}: must be "
                         f"{message.removeprefix('Input should be ')}")
        else:
            parts.append(f"{key} = {e.get('input')!r} is not allowed: {message}")
    return "; ".join(parts)


def load_tradeoff(path: str | Path | None = None, overrides: tuple[str, ...] = ()
                  ) -> tuple[ExperimentConfig, TradeoffSettings]:
    """The experiment (base training) and the trade-off settings of a YAML file, or of
    :data:`DEFAULT_TRADEOFF` when ``path`` is None; ``overrides`` are ``--set key=value``."""
    raw: Mapping[str, Any] = copy.deepcopy(DEFAULT_TRADEOFF) if path is None else read_yaml(path)
    raw = apply_overrides(raw, overrides)
    section = raw.pop("tradeoff", None) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"tradeoff = {section!r} is not allowed: must be a mapping of keys")
    try:
        settings = TradeoffSettings.model_validate(section)
    except ValidationError as error:
        raise ConfigError(_settings_error(error)) from None
    federated = raw.get("federated")
    # before the algorithm's own section is validated (its keys differ from dp-fedavg's)
    algorithm = (federated.get("algorithm", "prifedsync") if isinstance(federated, Mapping)
                 else "dp-fedavg")
    if algorithm != "dp-fedavg":
        raise ConfigError(f"federated.algorithm = {algorithm!r} is not allowed: privfl tradeoff "
                          "trains its base model with dp-fedavg (FedAvg with privacy.enabled: "
                          "false)")
    config = config_from_dict(raw)
    _check_sampling_rate(config, settings)
    return config, settings


def _check_sampling_rate(config: ExperimentConfig, settings: TradeoffSettings) -> None:
    """The unprotected step must be able to sample a record: ``p0 n_k >= 1`` in expectation for
    the smallest client (else most draws are empty steps and the variances vanish)."""
    records = config.data.train_size
    if isinstance(records, int) and settings.sampling_rate * records < 1.0:
        raise ConfigError(f"tradeoff.sampling_rate = {settings.sampling_rate!r} is out of range "
                          f"for {records} records per client: must be >= 1 / {records} = "
                          f"{1.0 / records:.4g} (at least one sampled record expected)")
