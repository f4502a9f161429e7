"""The ``federated`` section of PriFedSync (Zheng et al. 2021, Algorithm 1): a torch-free module,
so that a configuration is validated before torch is imported (:mod:`privfl.config.algorithms`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfl.config.schema import ExperimentConfig, FederatedConfig

__all__ = ["EMPTY_COHORT_POLICIES", "PriFedSyncConfig"]

#: What to do when Poisson client sampling selects nobody.
EMPTY_COHORT_POLICIES = ("redraw", "skip")


class PriFedSyncConfig(FederatedConfig):
    """``federated`` section of PriFedSync (Zheng et al. 2021, Algorithm 1)."""

    algorithm: Literal["prifedsync"] = "prifedsync"
    client_rate: float = Field(0.5, gt=0, le=1, description="p: Poisson client sampling rate")
    empty_cohort: Literal["redraw", "skip"] = "redraw"
    server_lr: float = Field(1.0, gt=0, le=1, description="eta: aggregation step")
    helper: Literal["interpolation", "identity"] = "interpolation"
    alpha: float = Field(0.1, ge=0, le=1, description="interpolation weight of the global model")

    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("gdp-clt", "pld")
    TARGET_METRICS: ClassVar[tuple[str, ...]] = ("personalised", "global")
    PAPER_SIGMA: ClassVar[bool] = True
    ATTACKS: ClassVar[tuple[str, ...]] = ("backdoor", "label-flip", "dba")

    def check(self, config: ExperimentConfig) -> None:
        privacy = config.privacy
        if privacy.enabled and privacy.sigma is None and privacy.noise_multiplier is None:
            privacy.sigma = 1.0  # the default: Zheng et al.'s sigma = 1 (noise multiplier 2)
