"""The schema of a ``privfl run`` configuration (pydantic, every section closed to unknown keys).

A configuration has seven sections; every key has a default, so ``{}`` is a valid (demo-like)
configuration. See ``docs/run.md`` for the reference with examples.

``data``        which dataset and how it is split across clients
``model``       which architecture (:func:`privfl.models.build_model`) and its keyword arguments
``training``    local training of a client in one round (:class:`privfl.fl.LocalTrainingSpec`)
``privacy``     clipping, noise, delta, accountants; ``enabled: false`` for non-private baselines
``federated``   PriFedSync: rounds, client sampling rate, empty-cohort policy, server step, helper
``stop``        optional early stops: a privacy budget, a target accuracy
``run``         execution only (device, threads, checkpoints); never changes the result

Privacy-relevant numbers (``training.batch_size``, ``training.local_steps``,
``training.sampling``, ``privacy.clip_norm``, ``privacy.sigma`` / ``privacy.noise_multiplier``)
appear exactly once here; the run builds ONE :class:`~privfl.fl.LocalTrainingSpec` from them and
both the trainer and the accountant read that object.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "DATASET_NAMES",
    "DataConfig",
    "ExperimentConfig",
    "FederatedConfig",
    "ModelConfig",
    "PrivacyConfig",
    "RunConfig",
    "StopConfig",
    "TrainingConfig",
]

#: Datasets ``data.dataset`` accepts (loaders in :mod:`privfl.data`).
DATASET_NAMES = ("mnist-5k", "fashion-mnist", "mnist", "cifar10", "digits", "synthetic")
SINGLE_SPLIT = ("mnist-5k", "digits", "synthetic")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class DataConfig(_Section):
    """Dataset and partition across clients."""

    dataset: Literal["mnist-5k", "fashion-mnist", "mnist", "cifar10", "digits", "synthetic"] = (
        "mnist-5k"
    )
    root: str | None = Field(
        None, description="folder holding the dataset files (default: privfl's data home)"
    )
    download: bool = Field(False, description="download mnist / cifar10 if missing")
    normalize: bool = Field(True, description="standardise inputs with the dataset's mean/std")
    test_fraction: float = Field(
        0.2, gt=0, lt=1, description="test share for single-split sources (mnist-5k, digits)"
    )
    synthetic_examples: int = Field(2000, ge=2, description="size of the synthetic dataset")
    partition: Literal["shards", "dirichlet", "iid"] = "shards"
    clients: int = Field(20, ge=2, description="m: number of clients")
    shards_per_client: int = Field(2, ge=1, description="shards: shards per client")
    shard_size: int | None = Field(None, ge=1, description="shards: records per shard")
    train_size: int | None = Field(
        None, ge=1, description="dirichlet / iid: training records per client"
    )
    test_size: int | None = Field(
        100, ge=0, description="test records per client (iid: null = equal split of the pool)"
    )
    test_replace: bool = Field(True, description="shards: draw test records with replacement")
    beta: float = Field(0.5, gt=0, description="dirichlet: concentration")
    disjoint: bool = Field(False, description="dirichlet: no record shared between clients")
    test_sampling: Literal["proportions", "train-labels"] = "proportions"


class ModelConfig(_Section):
    """An architecture from :mod:`privfl.models` (``num_classes``/``input_shape`` filled in)."""

    name: str = "mlp"
    kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        from privfl.models import MODELS

        if value not in MODELS:
            raise ValueError(f"must be one of {', '.join(MODELS)}")
        return value


class TrainingConfig(_Section):
    """Local training of one client in one round (seed 000 Algorithm 2)."""

    local_steps: int = Field(12, ge=1, description="K: local steps per round")
    batch_size: int = Field(16, ge=1, description="B: local batch size")
    sampling: Literal["without-replacement", "poisson"] = "without-replacement"
    optimizer: Literal["sgd", "momentum", "adam"] = "adam"
    lr: float = Field(0.005, gt=0)
    momentum: float = Field(0.9, ge=0, lt=1)
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = Field(1e-8, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    lr_decay_every: int | None = Field(
        None, ge=1, description="multiply lr by lr_decay_gamma every this many participations"
    )
    lr_decay_gamma: float = Field(1.0, gt=0, le=1)

    @field_validator("betas")
    @classmethod
    def _betas(cls, value: tuple[float, float]) -> tuple[float, float]:
        for beta in value:
            if not 0 <= beta < 1:
                raise ValueError("each beta must be in [0, 1)")
        return value


class PrivacyConfig(_Section):
    """Record-level DP of local training (seed 000 Theorem 2 accounting)."""

    enabled: bool = Field(True, description="false: no clipping, no noise (baseline)")
    sigma: float | None = Field(
        None, gt=0,
        description="seed 000's sigma: noise std / (2C) on the sum (z = 2 sigma); default 1",
    )
    noise_multiplier: float | None = Field(
        None, gt=0, description="z: noise std / C on the sum (Opacus convention)"
    )
    clip_norm: float = Field(1.0, gt=0, description="C: flat L2 clip norm per example")
    delta: float = Field(1e-5, gt=0, lt=1)
    accountants: list[Literal["gdp-clt", "pld", "rdp"]] = Field(
        default_factory=lambda: ["gdp-clt", "pld"]
    )
    secure: bool = Field(
        False,
        description="secure mode: noise, local batches and client sampling from os.urandom "
        "(production; not reproducible)",
    )
    secure_noise: bool | None = Field(
        None, exclude=True,
        description="deprecated alias of secure (same meaning); config.yaml records secure",
    )

    @model_validator(mode="after")
    def _secure_alias(self) -> PrivacyConfig:
        if self.secure_noise is not None:
            if "secure" in self.model_fields_set and self.secure != self.secure_noise:
                raise ValueError(
                    f"privacy.secure = {str(self.secure).lower()} and privacy.secure_noise = "
                    f"{str(self.secure_noise).lower()} disagree: privacy.secure_noise is a "
                    "deprecated alias of privacy.secure; give only privacy.secure"
                )
            self.secure = self.secure_noise
            self.secure_noise = None
        return self

    @model_validator(mode="after")
    def _noise(self) -> PrivacyConfig:
        if self.enabled:
            if self.sigma is not None and self.noise_multiplier is not None:
                raise ValueError(
                    "privacy.sigma and privacy.noise_multiplier: both given; with "
                    "privacy.enabled give exactly one (noise_multiplier = 2 * sigma)"
                )
            if self.sigma is None and self.noise_multiplier is None:
                self.sigma = 1.0  # the default: seed 000's sigma = 1 (noise multiplier 2)
            if not self.accountants:
                raise ValueError(
                    "privacy.accountants = [] must name at least one of gdp-clt, pld, rdp"
                )
        return self

    @property
    def z(self) -> float:
        """The noise multiplier (0 when disabled)."""
        if not self.enabled:
            return 0.0
        return self.noise_multiplier if self.noise_multiplier is not None else 2.0 * self.sigma


class FederatedConfig(_Section):
    """PriFedSync (seed 000 Algorithm 1)."""

    algorithm: Literal["prifedsync"] = "prifedsync"
    rounds: int = Field(30, ge=1, description="R: synchronisation rounds")
    client_rate: float = Field(0.5, gt=0, le=1, description="p: Poisson client sampling rate")
    empty_cohort: Literal["redraw", "skip"] = "redraw"
    server_lr: float = Field(1.0, gt=0, le=1, description="eta: aggregation step")
    helper: Literal["interpolation", "identity"] = "interpolation"
    alpha: float = Field(0.1, ge=0, le=1, description="interpolation weight of the global model")


class StopConfig(_Section):
    """Optional stops: before a round that would exceed a budget, after a target accuracy."""

    epsilon: float | None = Field(
        None, gt=0, description="budget on epsilon at privacy.delta (pld bound if computed)"
    )
    mu: float | None = Field(None, gt=0, description="budget on the Theorem 2 mu_max (estimate)")
    target_accuracy: float | None = Field(None, gt=0, le=1)
    target_metric: Literal["personalised", "global"] = "personalised"


class RunConfig(_Section):
    """Execution settings; none of them changes the result of a run."""

    device: str = "cpu"
    threads: int | None = Field(None, ge=1, description="torch intra-op threads")
    checkpoint_every: int = Field(1, ge=1)
    keep_checkpoints: int = Field(2, ge=1)
    max_rounds: int | None = Field(
        None, ge=1, description="rounds to run in this invocation, then stop (resume later)"
    )
    eval_batch_size: int = Field(1000, ge=1)


class ExperimentConfig(_Section):
    """A complete ``privfl run`` configuration."""

    name: str = "run"
    description: str = ""
    seed: int = Field(0, ge=0)
    data: DataConfig = Field(default_factory=DataConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    federated: FederatedConfig = Field(default_factory=FederatedConfig)
    stop: StopConfig = Field(default_factory=StopConfig)
    run: RunConfig = Field(default_factory=RunConfig)

    @model_validator(mode="after")
    def _consistent(self) -> ExperimentConfig:
        if self.privacy.enabled and self.training.sampling != "without-replacement":
            raise ValueError(
                f"training.sampling = {self.training.sampling!r} is not allowed with "
                "privacy.enabled: seed 000's Theorem 2 accountant assumes without-replacement "
                "batches"
            )
        if not self.privacy.enabled and (self.stop.epsilon is not None or self.stop.mu is not None):
            raise ValueError(
                "stop.epsilon / stop.mu need privacy.enabled: a non-private run has no budget"
            )
        if self.stop.epsilon is not None and "pld" not in self.privacy.accountants and (
            "rdp" not in self.privacy.accountants
        ):
            raise ValueError(
                "stop.epsilon needs a bound accountant in privacy.accountants (pld or rdp)"
            )
        if self.stop.mu is not None and "gdp-clt" not in self.privacy.accountants:
            raise ValueError("stop.mu needs gdp-clt in privacy.accountants")
        return self
