"""The ``federated`` sections of DP-FTRL (Kairouz et al. 2021) and BandMF-FedAvg
(Choquette-Choo et al. 2023): a torch-free module, so that a configuration is validated before
torch is imported (:mod:`privfl.config.algorithms`).

Shared sections, as both algorithms read them:

* ``privacy.noise_multiplier`` z (required): the std of the i.i.d. Gaussian ``Z`` of the
  factorization ``C x + Z`` divided by ``privacy.clip_norm`` S, the L2 clip norm of each
  client's whole model update; ``privacy.delta``; ``privacy.accountants`` among gdp (exact
  Gaussian DP), pld, rdp (all bounds; default all three); ``privacy.secure``: the noise and
  (BandMF with sampling) the cohorts from ``os.urandom``.
* ``training``: the clients' local non-private training (a fresh optimizer state every round).

The participation pattern is stated here, and the training's cohorts and the accountant's event
both come from it (:class:`privfl.mechanisms.schedule.CyclicGroups`): the N clients form
``min_separation`` b balanced groups and round t uses group ``t mod b``, so every client joins
at most ``ceil(R / b)`` rounds, exactly b apart (b >= R, the default of DP-FTRL: one
participation per client).
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfl.config.schema import ExperimentConfig, FederatedConfig

__all__ = ["BandMfFedAvgConfig", "CorrelatedConfig", "DpFtrlConfig"]


class CorrelatedConfig(FederatedConfig):
    """Keys both correlated-noise algorithms share (see the module docstring)."""

    min_separation: int | None = Field(
        None, ge=1, description="b: balanced client groups, round t uses group t mod b (each "
        "client at most ceil(R / b) rounds, b apart); default: see the algorithm")
    server_lr: float = Field(1.0, gt=0, description="eta: server learning rate")
    server_momentum: float = Field(0.9, ge=0, lt=1, description="beta: server momentum")

    #: the correlated-noise accountant's methods (one Gaussian mechanism: no step events)
    OWN_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("gdp", "pld", "rdp")
    STEP_ACCOUNTANTS: ClassVar[bool] = False
    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("gdp", "pld", "rdp")
    TARGET_METRICS: ClassVar[tuple[str, ...]] = ("global",)

    def groups(self) -> int:
        """b, the number of groups (the separation)."""
        return self.min_separation or self.rounds

    def check(self, config: ExperimentConfig) -> None:
        clients = config.data.clients
        if self.groups() > clients:
            raise ValueError(f"federated.min_separation = {self.groups()} is out of range: "
                             f"must be <= data.clients = {clients} (every group needs a client)")
        if config.training.lr_decay_every is not None or config.training.lr_decay_gamma != 1.0:
            raise ValueError(f"training.lr_decay_every / lr_decay_gamma are not supported by "
                             f"{self.algorithm} (local training restarts every round)")


class DpFtrlConfig(CorrelatedConfig):
    """``federated`` section of DP-FTRL with tree aggregation and server momentum (Kairouz et
    al. 2021): ``min_separation`` b (default R: one participation per client), ``estimator``
    (vanilla or honaker: Honaker's online variance reduction), ``restart_every`` (restart the
    tree every R' rounds, 0: never), ``server_lr`` eta and ``server_momentum`` beta of the FTRL
    step ``m_t = beta m_t-1 + S_t / E[m]``, ``w_t = w_0 + eta m_t`` (S_t the noisy prefix sum)."""

    algorithm: Literal["dp-ftrl"] = "dp-ftrl"
    estimator: Literal["vanilla", "honaker"] = Field(
        "honaker", description="tree estimator: vanilla sums, or Honaker's online variance "
        "reduction (same privacy, lower error)")
    restart_every: int = Field(0, ge=0, description="R': restart the tree every R' rounds "
                               "(0: one tree)")
    server_lr: float = Field(0.1, gt=0, description="eta: FTRL step on the momentum of the "
                             "noisy prefix sums")


class BandMfFedAvgConfig(CorrelatedConfig):
    """``federated`` section of BandMF-FedAvg (Choquette-Choo et al. 2023): ``band`` b_C
    (non-zero diagonals of the optimised banded Toeplitz encoder C), ``min_separation`` b
    (groups; default the band, which must not exceed it), ``sampling_rate`` q (< 1: cyclic
    Poisson sampling within the groups, amplified accounting; needs secret sampling in
    deployment), ``server_lr`` eta and ``server_momentum`` beta (``v <- beta v + Delta``,
    ``w <- w + eta v``)."""

    algorithm: Literal["bandmf-fedavg"] = "bandmf-fedavg"
    band: int = Field(4, ge=1, description="b_C: non-zero diagonals of the banded encoder C")
    sampling_rate: float = Field(
        1.0, gt=0, le=1, description="q: Poisson rate within the round's group (< 1: BandMF "
        "amplification, which needs secret sampling in deployment)")

    def groups(self) -> int:
        return self.min_separation or self.band

    def check(self, config: ExperimentConfig) -> None:
        super().check(config)
        if self.groups() < self.band and self.groups() < self.rounds:
            raise ValueError(f"federated.min_separation = {self.groups()} is out of range: must "
                             f"be >= federated.band = {self.band} (a client's columns of C "
                             "must not share a row)")
        if self.sampling_rate < 1.0 and self.groups() != self.band:
            raise ValueError(f"federated.sampling_rate = {self.sampling_rate:g} (amplification) "
                             f"needs federated.min_separation = federated.band = {self.band} "
                             "(Choquette-Choo et al. 2023: b groups for a band of b)")
