"""The ``federated`` section of DP-DSGD with random participation (Hasircioglu and Gunduz 2022): a
torch-free module, so that a configuration is validated before torch is imported
(:mod:`privfl.config.algorithms`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfl.accounting.participation import SCHEMES
from privfl.config.algorithms.unused_training import refuse_training_section
from privfl.config.schema import ExperimentConfig, FederatedConfig

__all__ = ["SERVERS", "DpDsgdConfig"]

#: Who adds the noise and what the server sees (:mod:`privfl.algorithms.dp_dsgd`).
SERVERS = ("trusted", "untrusted", "untrusted-participants-only", "secure-aggregation")


class DpDsgdConfig(FederatedConfig):
    """``federated`` section of DP-DSGD with random participation (Hasircioglu and Gunduz 2022).

    ``rounds`` is the number of iterations T (one noisy gradient step each). Shared sections:
    ``privacy.noise_multiplier`` is z = sigma / C, the noise std on the *sum* of clipped
    gradients in units of the clip norm (the paper's sigma when C = 1, as in all its
    experiments; default 1), ``privacy.clip_norm`` is C (per record), ``privacy.accountants``
    lists the participation schemes to report (``theorem-4.1`` is an estimate, ``cs`` a lower
    reference, the others bounds), ``privacy.delta`` the delta of every reported pair (per
    iteration and composed). ``privacy.enabled: false`` is the paper's non-private run (no
    clipping, no noise). The ``training`` section is not used (the local work is one clipped
    gradient sum per iteration; the server step is set here): any non-default value there is
    refused. ``privacy.sigma`` (Zheng et al. 2021's convention) is refused.
    """

    algorithm: Literal["dp-dsgd"] = "dp-dsgd"
    client_rate: float = Field(0.1, gt=0, le=1, description="p: client participation probability")
    record_rate: float = Field(0.1, gt=0, le=1, description="q: record sampling probability")
    server_lr: float = Field(0.002, gt=0, description="eta: server learning rate")
    server_momentum: float = Field(0.9, ge=0, lt=1, description="mu: server momentum")
    server: Literal["trusted", "untrusted", "untrusted-participants-only",
                    "secure-aggregation"] = "trusted"
    composition: list[Literal["rdp", "pld"]] = Field(
        default_factory=lambda: ["rdp", "pld"], min_length=1,
        description="accountants composing cs / ols / wcs over the iterations",
    )
    eval_every: int = Field(1, ge=1, description="global accuracy every this many iterations "
                            "(and at iteration 1 and the last planned one)")

    #: the random-participation accountant's methods (its own node, no step events)
    OWN_ACCOUNTANTS: ClassVar[tuple[str, ...]] = SCHEMES
    STEP_ACCOUNTANTS: ClassVar[bool] = False
    #: cs (a lower reference, not a guarantee) only when asked for
    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("per-s1-convexity", "wcs", "ols",
                                                      "theorem-4.1")
    TARGET_METRICS: ClassVar[tuple[str, ...]] = ("global",)
    ATTACKS: ClassVar[tuple[str, ...]] = ("backdoor", "label-flip", "dba")

    def check(self, config: ExperimentConfig) -> None:
        privacy = config.privacy
        if privacy.sigma is not None:
            raise ValueError(
                f"privacy.sigma = {privacy.sigma!r} is not allowed for federated.algorithm = "
                "'dp-dsgd': it is Zheng et al. 2021's convention (PriFedSync only); give "
                "privacy.noise_multiplier = z (noise std z * C on the sum of clipped gradients)"
            )
        refuse_training_section(config, "dp-dsgd", "one clipped gradient sum per iteration",
                                "federated.record_rate, federated.server_lr and "
                                "federated.server_momentum")
        if self.server == "untrusted-participants-only" and privacy.enabled:
            bad = [a for a in privacy.accountants if a not in ("wcs", "ols")]
            if bad:
                raise ValueError(
                    f"privacy.accountants = {privacy.accountants!r} is not allowed with "
                    "federated.server = 'untrusted-participants-only': the server learns who "
                    "participates, so only wcs and ols hold; set privacy.accountants: [wcs, ols]"
                )
        if privacy.enabled and privacy.noise_multiplier is None:
            privacy.noise_multiplier = 1.0  # the default, written to config.yaml
