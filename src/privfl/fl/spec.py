"""What one client does locally in a round: :class:`LocalTrainingSpec`.

This LocalTrainingSpec is the single copy of the local-training settings. The trainer
(:class:`privfl.fl.CohortTrainer`) reads sampling, clipping and noise from it, and the
accountant's view is *derived* from the same object (:meth:`LocalTrainingSpec.privacy_step`,
:meth:`LocalTrainingSpec.privacy_event`), so the two cannot disagree.

One local step of client ``j`` with ``n_j`` records::

    I     <- batch: B of n_j without replacement, or Poisson with q = B / n_j
    g_i   <- per-example gradient of the loss at example i in I (all parameters, flat)
    s     <- sum_{i in I} g_i * min(1, C / ||g_i||)
    g~    <- (s + N(0, (z C)^2 I_d)) / B             # B fixed, never |I|
    theta <- optimizer(theta, g~ [+ weight_decay * theta])

With ``clip_norm=None`` the step is non-private: ``g~ = sum_i g_i / B``.
"""

from __future__ import annotations

from dataclasses import InitVar, dataclass

from privfl._validation import (
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_range,
)
from privfl.accounting.events import (
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    Unit,
)
from privfl.mechanisms.sampling import BATCH_SAMPLING

__all__ = ["OPTIMIZERS", "LocalTrainingSpec"]

#: Local optimizers fed with the noisy gradient (post-processing).
OPTIMIZERS = ("sgd", "momentum", "adam")


@dataclass(frozen=True)
class LocalTrainingSpec:
    """Local (DP-)SGD of every client in a round.

    Parameters
    ----------
    local_steps
        K, optimizer steps per client per round.
    batch_size
        B: the exact batch size (``without-replacement``) or the expected one (``poisson``,
        rate ``B / n_j``). The noisy sum is always divided by this B.
    sampling
        ``"without-replacement"`` (Zheng et al. 2021) or ``"poisson"``.
    clip_norm
        C, flat L2 clip norm per example; ``None`` trains without clipping or noise
        (non-private baseline; :meth:`privacy_step` then refuses).
    noise_multiplier
        z: noise std ``z * C`` on the sum of clipped gradients (Zheng et al.: ``z = 2 sigma``).
        0 with a clip norm clips without noise (no privacy). Must be 0 without a clip norm.
    optimizer
        ``"sgd"``, ``"momentum"`` (heavy ball, PyTorch convention, no dampening) or ``"adam"``
        (PyTorch's Adam; weight decay as L2 added to the gradient).
    lr, momentum, betas, eps, weight_decay
        Optimizer settings. Weight decay is data-independent, added after the noise.
    secure
        Secure mode: draw the noise (:func:`privfl.mechanisms.secure_standard_normal`) and
        every batch (:data:`privfl.mechanisms.SECURE_RANDOM`) from ``os.urandom``, the
        operating system's CSPRNG, instead of the seeded generator — what the accountant's
        secret subsampling assumes. The batch scheme (exactly B without replacement, or Poisson
        at q = B / n_j) is unchanged. Use it in production; results are not reproducible.
        PriFedSync also draws its cohorts from ``os.urandom`` when it is set.
    secure_noise
        Deprecated alias of ``secure`` (same meaning), accepted by the constructor only
        (an ``InitVar``: read ``spec.secure``): ``True`` turns secure mode on;
        ``secure=True, secure_noise=False`` is refused as contradictory.
    """

    local_steps: int
    batch_size: int
    sampling: str = Sampling.WITHOUT_REPLACEMENT.value
    clip_norm: float | None = 1.0
    noise_multiplier: float = 0.0
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    secure: bool = False
    secure_noise: InitVar[bool | None] = None

    def __post_init__(self, secure_noise: bool | None) -> None:
        set_ = object.__setattr__
        set_(self, "local_steps", check_int("local_steps", self.local_steps, minimum=1))
        set_(self, "batch_size", check_int("batch_size", self.batch_size, minimum=1))
        sampling = self.sampling.value if isinstance(self.sampling, Sampling) else self.sampling
        set_(self, "sampling", check_choice("sampling", sampling, BATCH_SAMPLING))
        if self.clip_norm is not None:
            set_(self, "clip_norm", check_positive("clip_norm", self.clip_norm))
        z = check_nonnegative("noise_multiplier", self.noise_multiplier)
        if self.clip_norm is None and z != 0.0:
            raise ValueError(
                f"noise_multiplier = {z!r} is out of range: must be 0 when clip_norm is None "
                "(noise without clipping has unbounded sensitivity)"
            )
        set_(self, "noise_multiplier", z)
        set_(self, "optimizer", check_choice("optimizer", self.optimizer, OPTIMIZERS))
        set_(self, "lr", check_positive("lr", self.lr))
        set_(self, "momentum", check_range("momentum", self.momentum, 0.0, 1.0, high_open=True))
        try:
            beta1, beta2 = self.betas
        except (TypeError, ValueError) as error:
            raise ValueError(f"betas = {self.betas!r} is not a pair of numbers") from error
        set_(
            self,
            "betas",
            (
                check_range("betas[0]", beta1, 0.0, 1.0, high_open=True),
                check_range("betas[1]", beta2, 0.0, 1.0, high_open=True),
            ),
        )
        set_(self, "eps", check_positive("eps", self.eps))
        set_(self, "weight_decay", check_nonnegative("weight_decay", self.weight_decay))
        if not isinstance(self.secure, bool):
            raise ValueError(f"secure = {self.secure!r} is not a bool")
        if secure_noise is not None:
            if not isinstance(secure_noise, bool):
                raise ValueError(f"secure_noise = {secure_noise!r} is not a bool")
            if self.secure and not secure_noise:
                raise ValueError(
                    "secure = True and secure_noise = False disagree: secure_noise is a "
                    "deprecated alias of secure; give only secure"
                )
            set_(self, "secure", secure_noise)

    # ------------------------------------------------------------------ derived settings
    @property
    def private(self) -> bool:
        """True when every step clips and adds noise (``clip_norm`` set and ``z > 0``)."""
        return self.clip_norm is not None and self.noise_multiplier > 0.0

    @property
    def noise_std(self) -> float:
        """Noise standard deviation on the *sum* of clipped gradients, ``z * C`` (0 if none)."""
        return 0.0 if self.clip_norm is None else self.noise_multiplier * self.clip_norm

    @property
    def sampling_scheme(self) -> Sampling:
        return Sampling(self.sampling)

    def check_records(self, records: int, name: str = "records") -> int:
        """``records`` as an int, refusing a client with fewer records than ``batch_size``."""
        records = check_int(name, records, minimum=1)
        if self.batch_size > records:
            raise ValueError(
                f"{name} = {records} is out of range: must be >= batch_size = {self.batch_size} "
                f"({self.sampling} sampling needs q = batch_size / records <= 1)"
            )
        return records

    def sampling_rate(self, records: int) -> float:
        """q = B / n for a client with ``records`` records."""
        return self.batch_size / self.check_records(records)

    # ------------------------------------------------------------------ the accountant's view
    def privacy_step(self, records: int) -> NoisyStep:
        """One local step of a client with ``records`` records, as the accountant sees it.

        Raises ``ValueError`` for a non-private spec (no clip norm or ``z = 0``).
        """
        if not self.private:
            raise ValueError(
                f"clip_norm = {self.clip_norm!r}, noise_multiplier = {self.noise_multiplier!r}: "
                "this local training is not differentially private (needs clip_norm > 0 and "
                "noise_multiplier > 0)"
            )
        return NoisyStep(
            noise_multiplier=self.noise_multiplier,
            sampling_rate=self.sampling_rate(records),
            sampling=self.sampling_scheme,
        )

    def default_neighbouring(self) -> Neighbouring:
        """Replace-one for fixed-size batches (Zheng et al. 2021), add/remove for Poisson."""
        if self.sampling_scheme is Sampling.WITHOUT_REPLACEMENT:
            return Neighbouring.REPLACE_ONE
        return Neighbouring.ADD_REMOVE

    def privacy_event(
        self,
        records: int,
        rounds: int,
        *,
        neighbouring: Neighbouring | str | None = None,
        release: str = "all-iterates",
    ) -> PrivacyEvent:
        """``local_steps * rounds`` steps of one client (record-level), all steps composed."""
        rounds = check_int("rounds", rounds, minimum=0)
        relation = self.default_neighbouring() if neighbouring is None else neighbouring
        return PrivacyEvent(
            ((self.privacy_step(records), self.local_steps * rounds),),
            neighbouring=Neighbouring(relation),
            unit=Unit.RECORD,
            release=release,
        )
