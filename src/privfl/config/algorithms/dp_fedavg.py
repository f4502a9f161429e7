"""The ``federated`` section of client-level DP-FedAvg (McMahan et al. 2018; Xie et al. 2023
Algorithm 1; adaptive clipping of Andrew et al. 2021): a torch-free module, so that a
configuration is validated before torch is imported (:mod:`privfl.config.algorithms`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfl.accounting.update_clipping import MEDIAN_CLIPPINGS, update_noise_multiplier
from privfl.config.schema import ExperimentConfig, FederatedConfig

__all__ = ["CLIENT_SAMPLING", "COUNT_NOISE_DIVISOR", "DpFedAvgConfig"]

#: How cohorts are drawn: Poisson(q) or fixed-size m of N without replacement.
CLIENT_SAMPLING = ("poisson", "fixed-size")
#: Andrew et al. 2021's default count noise: sigma_b = E[m] / 20.
COUNT_NOISE_DIVISOR = 20.0


class DpFedAvgConfig(FederatedConfig):
    """``federated`` section of client-level DP-FedAvg (McMahan et al. 2018; Xie et al. 2023
    Algorithm 1; adaptive clipping of Andrew et al. 2021).

    Shared sections, as this algorithm reads them:

    * ``privacy.noise_multiplier`` z (required): the effective noise multiplier of one round on
      the sum of clipped client updates; ``privacy.clip_norm`` S: the L2 clip norm of each
      client's whole update (the initial one with adaptive clipping, the cap of the median
      variants); ``privacy.delta``, ``privacy.accountants`` (rdp, pld: bounds; gdp-clt: an
      estimate); ``privacy.secure``: cohorts, local batches and noise from ``os.urandom``.
      ``privacy.sigma`` (PriFedSync's convention) is refused.
    * ``training``: the clients' local NON-private training, ``local_steps`` steps of
      ``batch_size`` records (one epoch of a client with n records is ceil(n / B) steps) with
      ``optimizer``, ``lr``, ``momentum``, ``weight_decay``; a fresh optimizer state every
      round. ``training.lr_decay_*`` is refused (not implemented for this algorithm).

    Keys here: ``client_sampling`` (``poisson`` with ``client_rate`` q, default 0.1, or
    ``fixed-size`` with ``cohort_size`` m), ``server_lr`` eta and ``server_momentum`` beta,
    ``clipping`` (flat, per-layer, flat-median, per-layer-median), ``adaptive_clipping`` with
    ``target_quantile`` gamma, ``clip_learning_rate`` eta_C and ``count_noise`` sigma_b
    (default E[m] / 20), and ``paper_accounting`` (also report Xie et al. 2023's accounting).
    """

    algorithm: Literal["dp-fedavg"] = "dp-fedavg"
    client_sampling: Literal["poisson", "fixed-size"] = "poisson"
    client_rate: float | None = Field(
        None, gt=0, le=1, description="q: Poisson client sampling rate (default 0.1)")
    cohort_size: int | None = Field(
        None, ge=1, description="m: clients per round for fixed-size sampling")
    server_lr: float = Field(1.0, gt=0, description="eta: server step on the noisy mean")
    server_momentum: float = Field(0.0, ge=0, lt=1, description="beta: server momentum")
    clipping: Literal["flat", "per-layer", "flat-median", "per-layer-median"] = "flat"
    adaptive_clipping: bool = Field(False, description="Andrew et al. 2021 quantile tracking")
    target_quantile: float = Field(0.5, ge=0, le=1, description="gamma: unclipped fraction")
    clip_learning_rate: float = Field(0.2, ge=0, description="eta_C: geometric clip step (0: "
                                      "S stays fixed; the noised unclipped fraction is still "
                                      "reported as unclipped_estimate and accounted)")
    count_noise: float | None = Field(
        None, gt=0, description="sigma_b: noise std on the unclipped count (default E[m]/20)")
    paper_accounting: bool = Field(
        False, description="also report Xie et al. 2023's RDP (legacy orders, classic "
        "conversion, Poisson) with scope 'paper'")

    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("rdp", "pld")
    TARGET_METRICS: ClassVar[tuple[str, ...]] = ("global",)
    ATTACKS: ClassVar[tuple[str, ...]] = ("backdoor", "label-flip", "dba", "scaling")

    def check(self, config: ExperimentConfig) -> None:
        privacy, clients = config.privacy, config.data.clients
        if self.client_sampling == "poisson":
            if self.cohort_size is not None:
                raise ValueError(
                    f"federated.cohort_size = {self.cohort_size} is not allowed with "
                    "federated.client_sampling = 'poisson' (give client_rate, or use "
                    "client_sampling: fixed-size)")
            if self.client_rate is None:
                self.client_rate = 0.1
        else:
            if self.client_rate is not None:
                raise ValueError(
                    f"federated.client_rate = {self.client_rate} is not allowed with "
                    "federated.client_sampling = 'fixed-size' (give cohort_size)")
            if self.cohort_size is None:
                raise ValueError("federated.cohort_size is required with "
                                 "federated.client_sampling = 'fixed-size'")
            if self.cohort_size > clients:
                raise ValueError(f"federated.cohort_size = {self.cohort_size} is out of range: "
                                 f"must be <= data.clients = {clients}")
        if config.training.lr_decay_every is not None or config.training.lr_decay_gamma != 1.0:
            raise ValueError("training.lr_decay_every / lr_decay_gamma are not supported by "
                             "dp-fedavg (local training restarts every round)")
        if not privacy.enabled:
            asked = [name for name, on in (
                (f"federated.clipping = {self.clipping!r}", self.clipping != "flat"),
                ("federated.adaptive_clipping", self.adaptive_clipping),
                ("federated.paper_accounting", self.paper_accounting)) if on]
            if asked:
                raise ValueError(f"{', '.join(asked)} need privacy.enabled (a non-private run "
                                 "neither clips nor noises)")
            return
        if self.clipping in MEDIAN_CLIPPINGS:
            if self.adaptive_clipping:
                raise ValueError(f"federated.clipping = {self.clipping!r} and "
                                 "federated.adaptive_clipping both set the threshold: use flat "
                                 "or per-layer with adaptive clipping")
            if config.stop.epsilon is not None:
                raise ValueError(f"stop.epsilon needs a rigorous bound: federated.clipping = "
                                 f"{self.clipping!r} is not accounted (its results are "
                                 "estimates)")
        if self.adaptive_clipping and privacy.noise_multiplier is not None:
            expected = self.expected_cohort(clients)
            sigma_b = self.count_noise or expected / COUNT_NOISE_DIVISOR
            try:
                update_noise_multiplier(privacy.noise_multiplier, sigma_b)
            except ValueError:
                raise ValueError(
                    f"privacy.noise_multiplier = {privacy.noise_multiplier:g} is out of range "
                    f"for federated.count_noise = {sigma_b:g}"
                    + ("" if self.count_noise else f" (default E[m]/20 = {expected:g}/20)")
                    + f": adaptive clipping needs noise_multiplier < 2 * count_noise = "
                    f"{2 * sigma_b:g}; raise federated.count_noise") from None

    def expected_cohort(self, clients: int) -> float:
        """E[m]: ``q N`` (Poisson) or ``m`` (fixed-size)."""
        if self.client_sampling == "poisson":
            return (self.client_rate or 0.1) * clients
        return float(self.cohort_size or 0)
