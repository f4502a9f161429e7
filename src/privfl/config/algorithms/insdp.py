"""The ``federated`` sections of InsDP-FedAvg and InsDP-FedSGD (Xie et al. 2023 Algorithms 3 and
2): a torch-free module, so that a configuration is validated before torch is imported
(:mod:`privfl.config.algorithms`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfl.config.schema import ExperimentConfig, FederatedConfig

__all__ = ["DEFAULT_NOISE_MULTIPLIER", "InsDpFedAvgConfig", "InsDpFedSgdConfig"]

#: The noise multiplier of a private run that gives none (Xie et al. 2023's sigma).
DEFAULT_NOISE_MULTIPLIER = 1.0


class InsDpFedAvgConfig(FederatedConfig):
    """``federated`` section of InsDP-FedAvg (Xie et al. 2023 Algorithm 3).

    Shared sections, as this algorithm reads them: ``training.local_steps`` is V (local DP-SGD
    steps per round), ``training.batch_size`` is B (the batch sampling rate of client j is
    ``q_j = B / n_j``; ``training.sampling: poisson`` is the paper's accounting assumption,
    ``without-replacement`` is accounted under replace-one neighbours), ``training.optimizer``
    and its settings run each client's local steps (the paper: ``momentum`` 0.9, weight decay
    5e-4; each client keeps its optimizer state across rounds). ``privacy.noise_multiplier`` is
    the paper's sigma (noise std sigma*C on each client's sum of clipped per-example gradients;
    default 1.0), ``privacy.clip_norm`` is C (the paper's S). ``privacy.sigma`` (PriFedSync's
    convention) and ``training.lr_decay_every`` are refused.
    """

    algorithm: Literal["insdp-fedavg"] = "insdp-fedavg"
    clients_per_round: int | None = Field(
        None, ge=1, description="m: clients per round (null: all N clients every round)")
    client_sampling: Literal["uniform", "cyclic"] = Field(
        "uniform", description="uniform: m of N at random (every round charged to every "
        "client); cyclic: a public schedule (each client charged its own rounds)")
    server_lr: float = Field(1.0, gt=0, description="eta_s: w += eta_s * mean update")
    paper_accounting: bool = Field(
        True, description="also report the paper's RDP accounting (scope 'paper')")

    #: step accountants not offered for this plan (its rigorous bounds are rdp and pld)
    UNSUPPORTED_STEP_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("gdp-clt",)
    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("rdp", "pld")
    TARGET_METRICS: ClassVar[tuple[str, ...]] = ("global",)
    ATTACKS: ClassVar[tuple[str, ...]] = ("backdoor", "label-flip", "dba")

    def check(self, config: ExperimentConfig) -> None:
        privacy, training = config.privacy, config.training
        name = f"federated.algorithm = {self.algorithm!r}"
        if privacy.sigma is not None:
            raise ValueError(
                f"privacy.sigma = {privacy.sigma!r} is not allowed for {name}: sigma is "
                "PriFedSync's convention (Zheng et al. 2021); give privacy.noise_multiplier "
                "(Xie et al. 2023's sigma: noise std / C on the sum)")
        if privacy.enabled and privacy.noise_multiplier is None:
            privacy.noise_multiplier = DEFAULT_NOISE_MULTIPLIER
        if training.lr_decay_every is not None:
            raise ValueError(f"training.lr_decay_every = {training.lr_decay_every!r} is not "
                             f"supported by {name}: leave it unset")
        if self.clients_per_round is not None and config.data.clients < self.clients_per_round:
            raise ValueError(
                f"federated.clients_per_round = {self.clients_per_round} is out of range: must "
                f"be at most data.clients = {config.data.clients}")


class InsDpFedSgdConfig(InsDpFedAvgConfig):
    """``federated`` section of InsDP-FedSGD (Xie et al. 2023 Algorithm 2).

    As :class:`InsDpFedAvgConfig`, with exactly one local DP-SGD step per selected client
    (``training.local_steps`` is 1; another value is refused) and ``release``: ``global-model``
    (default, the paper's Proposition 2: only the mean of the m updates leaves a trusted
    aggregator, so one record faces noise sigma*sqrt(m); needs ``training.optimizer: sgd``,
    which is then the default) or ``client-updates`` (the server sees each update: noise sigma).
    """

    algorithm: Literal["insdp-fedsgd"] = "insdp-fedsgd"  # type: ignore[assignment]
    release: Literal["global-model", "client-updates"] = Field(
        "global-model", description="what the guarantee's adversary sees")

    def check(self, config: ExperimentConfig) -> None:
        super().check(config)
        training = config.training
        name = f"federated.algorithm = {self.algorithm!r}"
        if "local_steps" in training.model_fields_set and training.local_steps != 1:
            raise ValueError(
                f"training.local_steps = {training.local_steps} is not allowed for {name}: "
                "FedSGD takes one DP-SGD step per selected client and round (use insdp-fedavg "
                "for V local steps)")
        training.local_steps = 1
        if self.release == "global-model":
            if "optimizer" in training.model_fields_set and training.optimizer != "sgd":
                raise ValueError(
                    f"training.optimizer = {training.optimizer!r} is not allowed for {name} "
                    "with federated.release = 'global-model': the sigma*sqrt(m) noise of the "
                    "mean update needs plain SGD (or set federated.release: client-updates)")
            training.optimizer = "sgd"
