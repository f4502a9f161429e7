"""The ``federated`` section of projected noisy SGD with last-iterate release (Asoodeh et al. 2021,
Algorithm 1) and the settings its theorems need (:func:`check_settings`): a torch-free module,
so that a configuration is validated before torch is imported (:mod:`privfl.config.algorithms`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from privfl._validation import check_choice, check_int, check_nonnegative, check_positive
from privfl.accounting.contraction import RELEASES, SCHEDULES
from privfl.config.algorithms.unused_training import refuse_training_section
from privfl.config.schema import ExperimentConfig, FederatedConfig

__all__ = ["CONVEX_MODELS", "LAST_ITERATE_ACCOUNTANTS", "LR_SCHEDULES",
           "ProjectedSgdConfig", "check_settings"]

#: privacy.accountants: the last-iterate bounds, then the all-iterates composition accountants.
LAST_ITERATE_ACCOUNTANTS = ("contraction", "contraction-sharpened")
LR_SCHEDULES = ("constant", "inverse-time")
#: Models whose cross-entropy is convex in the parameters (``convex: true`` is refused otherwise).
CONVEX_MODELS = ("logreg",)


class ProjectedSgdConfig(FederatedConfig):
    """``federated`` section of projected noisy SGD with last-iterate release (Asoodeh et al.
    2021, Algorithm 1).

    The clients of ``data`` are the n users; ``rounds`` is T (one pass: T <= n/m and m must
    divide n). Shared sections: ``privacy.clip_norm`` is L, the per-record gradient clip (a
    user's gradient is the mean of its clipped per-record gradients, so ``||g_j|| <= L``);
    ``privacy.noise_multiplier`` is z, the noise std ``z L`` on the *sum* of the m user
    gradients (the paper's per-user sigma is ``z L / sqrt(m)``; entry argument ``r1 = 2/z``);
    ``privacy.accountants`` among ``contraction``, ``contraction-sharpened`` (last iterate; at
    least one) and ``pld``, ``rdp`` (every iterate released, for comparison);
    ``privacy.enabled: false`` trains without clipping or noise (no guarantee). The
    ``training`` section is not used (one gradient per user per round; the step is set here):
    any non-default value there is refused, as is ``privacy.sigma``.

    Keys: ``users_per_round`` (m), ``radius`` (rho), ``lr`` (eta, constant schedule) or
    ``lr_schedule: inverse-time`` (eta_t = 1/(l2 t), Corollary 1), ``l2`` (lambda: the
    ``(l2/2)||W||^2`` term of every user's loss), ``schedule`` (``one-pass`` | ``independent``),
    ``release`` (``last`` | ``random-stop``, one pass only), ``convex`` with ``smoothness``
    (beta of the per-record loss) and ``lipschitz`` (its Lipschitz constant, <= L) for the
    diameter 2 rho, ``input_bound`` (each input scaled to L2 norm <= this: part of the loss, so
    a linear model's constants are known: logreg with inputs of norm <= B has per-record
    Lipschitz constant ``sqrt(2 (B^2 + 1))`` and smoothness ``(B^2 + 1)/2``, the 1 from the
    bias; claims below these are refused, :func:`check_model_constants`), ``evaluate``
    (``final`` | ``every-round``: publishes intermediate models, so the headline becomes the
    all-iterates bound), ``keep_private_state`` (keep the checkpoints after the run finishes:
    they hold every intermediate model, so the headline becomes the all-iterates bound).
    """

    algorithm: Literal["projected-sgd"] = "projected-sgd"
    users_per_round: int = Field(10, ge=1, description="m: users per round")
    radius: float = Field(1.0, gt=0, description="rho: radius of the projection ball")
    lr: float | None = Field(None, gt=0, description="eta: learning rate of lr_schedule "
                             "constant (default 0.5); not used by inverse-time")
    lr_schedule: Literal["constant", "inverse-time"] = "constant"
    l2: float = Field(0.0, ge=0, description="lambda: L2 term (lambda/2)||W||^2 of every loss")
    schedule: Literal["one-pass", "independent"] = "one-pass"
    release: Literal["last", "random-stop"] = "last"
    convex: bool = Field(False, description="assert convex, smooth, Lipschitz per-record losses")
    smoothness: float | None = Field(None, ge=0, description="beta of the per-record loss")
    lipschitz: float | None = Field(None, gt=0, description="Lipschitz constant of the "
                                    "per-record loss (convex: true; <= privacy.clip_norm)")
    input_bound: float | None = Field(None, gt=0, description="scale each input to L2 norm "
                                      "<= this (part of the loss)")
    evaluate: Literal["final", "every-round"] = "final"
    keep_private_state: bool = Field(False, description="keep the checkpoints (intermediate "
                                     "models, the secret schedule, generator states) after the "
                                     "run finishes; the headline becomes the all-iterates bound")

    OWN_ACCOUNTANTS: ClassVar[tuple[str, ...]] = LAST_ITERATE_ACCOUNTANTS
    #: step accountants not offered for the all-iterates comparison (rigorous ones only)
    UNSUPPORTED_STEP_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("gdp-clt",)
    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("contraction", "contraction-sharpened",
                                                      "pld")
    TARGET_METRICS: ClassVar[tuple[str, ...]] = ("global",)
    ATTACKS: ClassVar[tuple[str, ...]] = ("backdoor", "label-flip", "dba")

    def check(self, config: ExperimentConfig) -> None:
        refuse_training_section(config, "projected-sgd", "one gradient per user per round",
                                "federated.lr, federated.lr_schedule and federated.l2")
        privacy = config.privacy
        if privacy.enabled and not any(a in LAST_ITERATE_ACCOUNTANTS for a in privacy.accountants):
            raise ValueError(
                f"privacy.accountants = {privacy.accountants!r} has no last-iterate accountant: "
                "federated.algorithm = 'projected-sgd' releases only the final model; add "
                "contraction and/or contraction-sharpened"
            )
        if config.stop.target_accuracy is not None:
            raise ValueError(
                f"stop.target_accuracy = {config.stop.target_accuracy!r} is not allowed for "
                "federated.algorithm = 'projected-sgd': a stop decided by the accuracy of "
                "intermediate models makes the released round depend on them, which the "
                "last-iterate guarantee does not cover"
            )
        if self.lr_schedule == "constant" and self.lr is None:
            self.lr = 0.5  # the default, written to config.yaml
        if self.users_per_round > config.data.clients:
            raise ValueError(
                f"federated.users_per_round = {self.users_per_round} is out of range: must be "
                f"<= data.clients = {config.data.clients} (the users)"
            )
        check_settings(
            users=config.data.clients, cohort_size=self.users_per_round,
            rounds=None, lr=self.lr, lr_schedule=self.lr_schedule, l2=self.l2,
            schedule=self.schedule, release=self.release, convex=self.convex,
            smoothness=self.smoothness, lipschitz=self.lipschitz,
            clip_norm=privacy.clip_norm if privacy.enabled else None, prefix="federated.",
        )
        if self.convex and config.model.name not in CONVEX_MODELS:
            raise ValueError(
                f"federated.convex = true is not allowed with model.name = "
                f"{config.model.name!r}: its loss is not convex in the parameters (convex "
                f"models: {', '.join(CONVEX_MODELS)}); use convex: false (diameter 2(rho + eta L))"
            )
        if self.convex and config.protection.mask_keep_rate is not None:
            raise ValueError(
                f"federated.convex = true is not allowed with protection.mask_keep_rate = "
                f"{config.protection.mask_keep_rate!r}: the convex contraction needs each "
                "gradient step to be non-expansive, which is not proven for a masked step; use "
                "convex: false (diameter 2(rho + eta L)) or remove the mask"
            )


def check_settings(
    *, users: int, cohort_size: int, rounds: int | None, lr: float | None, lr_schedule: str,
    l2: float, schedule: str, release: str, convex: bool, smoothness: float | None,
    lipschitz: float | None, clip_norm: float | None, prefix: str = "",
) -> None:
    """Refuse settings that void the last-iterate theorems (``prefix`` names config keys:
    ``cohort_size`` m is then ``federated.users_per_round``, the key of Asoodeh et al. 2021's m).

    * one pass: m divides n and T <= n/m (``rounds=None`` skips this: the configuration check
      leaves it to the plan, because a resume may extend ``federated.rounds``); ``random-stop``
      only with one pass;
    * ``constant`` needs ``lr``; ``inverse-time`` needs ``l2 > 0`` and no ``lr`` (unused);
    * every ``eta_t l2 <= 2`` (else the step ``(1 - eta l2) w`` expands the ball);
    * ``convex`` needs clipping (a private run), ``lipschitz <= clip_norm`` (clipping never
      binds), ``smoothness`` and every ``eta_t <= 2 / (smoothness + l2)``; ``lipschitz`` and
      ``smoothness`` are refused without ``convex`` (they would not be used).
    """
    n = check_int(f"{prefix}users", users, 1)
    m_name = f"{prefix}users_per_round" if prefix else "cohort_size"
    m = check_int(m_name, cohort_size, 1)
    rounds = None if rounds is None else check_int(f"{prefix}rounds", rounds, 1)
    schedule = check_choice(f"{prefix}schedule", schedule, SCHEDULES)
    release = check_choice(f"{prefix}release", release, RELEASES)
    lr_schedule = check_choice(f"{prefix}lr_schedule", lr_schedule, LR_SCHEDULES)
    l2 = check_nonnegative(f"{prefix}l2", l2)
    if m > n:
        raise ValueError(f"{m_name} = {m} is out of range: must be <= {n} users")
    if schedule == "one-pass":
        if n % m:
            raise ValueError(
                f"{m_name} = {m} does not divide the {n} users: the one-pass "
                "schedule is a random partition into equal batches (Algorithm 1)"
            )
        if rounds is not None and rounds > n // m:
            raise ValueError(
                f"{prefix}rounds = {rounds} is out of range: schedule one-pass has at most "
                f"n/m = {n}/{m} = {n // m} rounds (every user once); use schedule: independent "
                "for more"
            )
    elif release != "last":
        raise ValueError(
            f"{prefix}release = {release!r} is not allowed with schedule = 'independent': random "
            "stopping (Corollary 3) is defined for the one-pass partition"
        )
    if lr_schedule == "inverse-time":
        if l2 == 0.0:
            raise ValueError(f"{prefix}l2 = 0.0 is out of range: lr_schedule inverse-time "
                             "(eta_t = 1/(l2 t)) needs l2 > 0")
        if lr is not None:
            raise ValueError(f"{prefix}lr = {lr!r} is not used with lr_schedule inverse-time "
                             "(eta_t = 1/(l2 t)): remove it")
        first_lr = 1.0 / l2
    else:
        if lr is None:
            raise ValueError(f"{prefix}lr = None is out of range: lr_schedule constant needs "
                             "the learning rate eta > 0")
        first_lr = check_positive(f"{prefix}lr", lr)
    if first_lr * l2 > 2.0:
        raise ValueError(
            f"{prefix}lr = {first_lr:g} is out of range with l2 = {l2:g}: lr * l2 must be <= 2 "
            "(else the step (1 - lr l2) W expands the ball and the diameter bound fails)"
        )
    if not convex:
        for name, value in (("smoothness", smoothness), ("lipschitz", lipschitz)):
            if value is not None:
                raise ValueError(f"{prefix}{name} = {value!r} is only used with {prefix}convex "
                                 "= true (the diameter 2 rho): remove it or set convex: true")
        return
    if clip_norm is None:
        raise ValueError(
            f"{prefix}convex = true claims a Lipschitz constant, but there is no clipping "
            "(privacy disabled): the gradient norms would rest on an unchecked claim"
        )
    if lipschitz is None:
        raise ValueError(f"{prefix}lipschitz = None is out of range: convex = true needs the "
                         "per-record Lipschitz constant (<= privacy.clip_norm, so clipping "
                         "never changes a gradient)")
    if check_positive(f"{prefix}lipschitz", lipschitz) > clip_norm:
        raise ValueError(
            f"{prefix}lipschitz = {lipschitz:g} is out of range: must be <= privacy.clip_norm "
            f"= {clip_norm:g} (clipping a gradient breaks the non-expansive step of convex: true)"
        )
    if smoothness is None:
        raise ValueError(f"{prefix}smoothness = None is out of range: convex = true needs the "
                         "smoothness beta of the per-record loss (the step needs lr <= "
                         "2/(beta + l2))")
    beta = check_nonnegative(f"{prefix}smoothness", smoothness)
    if beta + l2 > 0 and first_lr > 2.0 / (beta + l2):
        raise ValueError(
            f"{prefix}lr = {first_lr:g} is out of range: convex = true needs every lr_t <= "
            f"2/(smoothness + l2) = {2.0 / (beta + l2):g} (the gradient step is non-expansive "
            "only then); use convex: false (diameter 2(rho + lr L))"
        )
