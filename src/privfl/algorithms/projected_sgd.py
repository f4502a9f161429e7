"""Projected noisy SGD with a trusted aggregator, only the final model released (Asoodeh et al.
2021, Algorithm 1, the lost minus sign restored).

The n clients of the federated dataset are the paper's users; a user's "record" x_j is its whole
local dataset. One round ``t`` (a round of the runner)::

    B_t   <- the users of round t: block t of a secret uniformly random permutation of the n
             users (``schedule: one-pass``, the paper: every user exactly once, T <= n/m), or a
             fresh secret uniform subset of m users (``schedule: independent``, not in the
             paper: docs/accountants/last-iterate.md, "Formulas")
    g_j   <- (1/n_j) sum_{records i of user j} clip_L(grad l(W_{t-1}, x_i))   (||g_j|| <= L)
    W_t   <- proj_rho(W_{t-1} - eta_t [(1/m)(sum_{j in B_t} g_j + N(0, (z L)^2 I)) + l2 W_{t-1}])
    release W_T only (``release: last``), or W_tau for a secret tau ~ Uniform{1..T}
    (``release: random-stop``, kept by reservoir sampling so any stopping round is uniform)

The noise ``N(0, (z L)^2 I)`` on the sum is the sum of the m users' shares ``N(0, sigma^2 I)``
with the paper's per-user ``sigma = z L / sqrt(m)`` (its Section III-B); privfl draws it at the
trusted aggregator (a sum of independent Gaussians: the same distribution).
``proj_rho(w) = w min(1, rho/||w||)`` around 0 acts on the *noisy* update; ``W_0`` is the model's
seeded initialisation projected onto the ball (data-independent). The L2 term ``l2 W`` (the gradient
of ``(l2/2)||W||^2`` in every user's loss) is data-independent and added after the noise; replacing
one user changes only its clipped ``g_j``.

Privacy (:class:`ProjectedSgdPrivacy`): client level (a user's whole data), replace-one user,
against an observer of the released model only, from the last-iterate accountant
:mod:`privfl.accounting.contraction` with ``r1 = 2/z``: the contraction bound (Theorem 2;
Corollary 3 for ``random-stop``; the multi-round extension for ``independent``) and its
sharpened chain rule (scope ``last-iterate``, primary), beside the composition accountants for
releasing every iterate (scope ``all-iterates``). The diameter of one gradient step on
ball(rho) is ``2 (rho + eta_t L)`` (any loss, clipping; needs ``eta_t l2 <= 2``), or ``2 rho``
when ``convex: true`` asserts convex, beta-smooth per-record losses that are
``lipschitz``-Lipschitz with ``lipschitz <= L`` (clipping never binds) and every
``eta_t <= 2 / (beta + l2)``. Settings that void these theorems are refused, and a clipped
gradient seen during a ``convex`` run stops it (the claim was false).

What is released, and so which bound is the headline (the smallest valid one for it):

* ``release: last`` / ``random-stop`` with ``evaluate: final`` and ``keep_private_state:
  false`` (the default): the released model only. Both scopes bound it (releasing every
  iterate releases more), so the headline is the tightest bound of either scope. While the run
  is in progress its checkpoints (W_t, the secret schedule, the generator states, W_tau) are
  private state; the runner deletes them when the run finishes and writes the released model
  to ``model.pt`` (:attr:`ProjectedSgdPrivacy.hidden_state`).
* ``evaluate: every-round`` (each round's model is measured and the measure published) or
  ``keep_private_state: true`` (the checkpoints stay): intermediate models are released, so
  the headline is the all-iterates bound (scope ``all-iterates``, primary); an all-iterates
  accountant (pld or rdp) is then required.

Monitoring: the released model's accuracy on the pooled test set after the last planned round
(``evaluate: final``), or every round's model (``every-round``, with ``model_norm`` of W_t and
the unnoised ``train_loss`` / ``clipped_fraction`` of the round's users, which no bound covers:
``run.outputs: guarantee-only`` keeps those out of the run directory).

A simulated poisoning attack the data carry (Xie et al. 2023; backdoor, label flip, DBA: the
users only poison data, and the aggregator does not clip a user's gradient, so update scaling
is refused) adds ``attack_success`` / ``attack_loss`` of the released model whenever its
accuracy is measured (NaN otherwise), on the attack test set with the inputs bounded as the
loss bounds them (``input_bound``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from privfl._validation import (
    check_choice,
    check_delta,
    check_int,
    check_nonnegative,
    check_positive,
)
from privfl.accounting.contraction import (
    ProjectedNoisySGD,
)
from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import LastIterateRelease, Unit
from privfl.accounting.methods import AccountingOptions
from privfl.accounting.results import PrivacyResult
from privfl.algorithms.algorithm_support import (
    FlatPredictor,
    check_model_and_data,
    check_partition,
    checkpoint_streams,
    checkpoint_tensor,
    restore_streams,
    seeded_generators,
)
from privfl.algorithms.base import RoundAlgorithm, zero_rounds
from privfl.algorithms.cohort_stream import CohortStream
from privfl.algorithms.outputs import RELEASED_ACCURACY, UNNOISED_TRAINING
from privfl.attacks.metrics import attack_monitor
from privfl.config.algorithms.projected_sgd import (
    CONVEX_MODELS,
    LAST_ITERATE_ACCOUNTANTS,
    ProjectedSgdConfig,
    check_settings,
)
from privfl.config.schema import ExperimentConfig, FederatedConfig
from privfl.data.datasets import FederatedDataset
from privfl.fl.cohort_sampler import CohortSampler
from privfl.fl.params import trainable_parameters
from privfl.fl.spec import LocalTrainingSpec
from privfl.fl.trainer import CohortTrainer, cross_entropy_loss
from privfl.fl.unit_sums import clipped_units, plain_units, unit_bytes, units_per_chunk
from privfl.mechanisms.noise import standard_normal_
from privfl.mechanisms.secure import SECURE_RANDOM, randomness_text

__all__ = ["ProjectedSgd", "ProjectedSgdConfig", "ProjectedSgdPrivacy",
           "check_settings", "project_"]

#: Users per forward of :meth:`ProjectedSgd.objective` (a monitoring value, not the round's sum).
_CHUNK_USERS = 1024


def logreg_constants(input_norm: float) -> tuple[float, float]:
    """``(smoothness, lipschitz)`` of the multinomial logistic (cross-entropy) loss of one record
    whose input has L2 norm <= ``input_norm`` = B, in the weights and bias of a linear model.

    With x~ = (x, 1), the gradient is ``(p - e_y) x~^T``, of norm ``||p - e_y|| ||x~|| <=
    sqrt(2) sqrt(B^2 + 1)``, and the Hessian is ``(diag p - p p^T) (x) x~ x~^T``, whose largest
    eigenvalue is at most ``(1/2) ||x~||^2`` (the softmax Hessian's is at most 1/2; Boehning
    1992): smoothness ``(B^2 + 1)/2``, Lipschitz constant ``sqrt(2 (B^2 + 1))``."""
    b2 = check_nonnegative("input_norm", input_norm) ** 2 + 1.0
    return b2 / 2.0, math.sqrt(2.0 * b2)


def check_model_constants(*, model: str, smoothness: float | None, lipschitz: float | None,
                          input_norm: float, source: str, prefix: str = "federated.") -> None:
    """Refuse ``convex: true`` claims the model makes checkable: for ``logreg``, a
    ``smoothness`` or ``lipschitz`` below :func:`logreg_constants` of the largest input norm
    (``source`` says where that norm comes from). Other models are refused earlier
    (:data:`CONVEX_MODELS`)."""
    if model not in CONVEX_MODELS:
        raise ValueError(f"{prefix}convex = true is not allowed with model.name = {model!r}: "
                         f"its constants cannot be checked (convex models: "
                         f"{', '.join(CONVEX_MODELS)})")
    beta, lip = logreg_constants(input_norm)
    for name, claimed, true, formula in (("smoothness", smoothness, beta, "(B^2 + 1)/2"),
                                         ("lipschitz", lipschitz, lip, "sqrt(2 (B^2 + 1))")):
        if claimed is not None and claimed < true * (1 - 1e-12):
            raise ValueError(
                f"{prefix}{name} = {claimed:g} is out of range: logistic regression on inputs "
                f"of L2 norm <= B = {input_norm:.6g} ({source}) has {name} up to {formula} = "
                f"{true:.6g}; must be >= {true:.6g}"
            )


def project_(flat: torch.Tensor, radius: float) -> torch.Tensor:
    """``w <- w min(1, rho/||w||)`` in place (each row of ``[.., d]``): projection onto the L2
    ball of radius ``radius`` around 0; returns ``flat``."""
    norms = torch.linalg.vector_norm(flat, dim=-1, keepdim=True)
    scale = torch.clamp(radius / norms.clamp_min(torch.finfo(flat.dtype).tiny), max=1.0)
    return flat.mul_(scale)


class ProjectedSgdPrivacy:
    """The privacy plan of projected noisy SGD: the single copy of what the guarantee rests on.

    The training reads the users per round, the schedule of rounds, the learning rates
    (:meth:`lr_at`), the clip norm, the noise std (:attr:`noise_std`), the radius and the
    release policy from this object; :meth:`results` hands the same numbers to
    :func:`~privfl.accounting.contraction.run_report` (unit client, replace-one user).

    Results carry ``extras["scope"]``: ``"last-iterate"`` (primary: the contraction bounds for
    the released model) or ``"all-iterates"`` (composition accountants if every iterate were
    released, for comparison).
    """

    unit = "client"
    #: why each scope (the headline's scope advice, :mod:`privfl.runs.headline`)
    scope_notes = {
        "last-iterate": "only the final model is released, the intermediate ones stay hidden "
                        "(Asoodeh et al. 2021)",
        "all-iterates": "every intermediate model is released too",
    }

    def __init__(self, *, users: int, cohort_size: int, rounds: int, radius: float,
                 clip_norm: float | None, noise_multiplier: float, lr: float | None = 0.5,
                 lr_schedule: str = "constant", l2: float = 0.0, schedule: str = "one-pass",
                 release: str = "last", convex: bool = False, smoothness: float | None = None,
                 lipschitz: float | None = None, delta: float = 1e-5,
                 accountants: Sequence[str] = ("contraction", "contraction-sharpened", "pld"),
                 secure: bool = False, options: AccountingOptions | None = None,
                 seed: int = 0, intermediate_released: bool = False) -> None:
        check_settings(users=users, cohort_size=cohort_size, rounds=rounds, lr=lr,
                       lr_schedule=lr_schedule, l2=l2, schedule=schedule, release=release,
                       convex=convex, smoothness=smoothness, lipschitz=lipschitz,
                       clip_norm=clip_norm)
        self.users = int(users)
        self.cohort_size = int(cohort_size)
        self.rounds = int(rounds)
        self.radius = check_positive("radius", radius)
        self.clip_norm = None if clip_norm is None else check_positive("clip_norm", clip_norm)
        self.noise_multiplier = check_nonnegative("noise_multiplier", noise_multiplier)
        if self.clip_norm is None and self.noise_multiplier:
            raise ValueError(f"noise_multiplier = {noise_multiplier!r} is out of range: must be "
                             "0 when clip_norm is None (unbounded sensitivity)")
        self.lr_schedule = lr_schedule
        self.lr = float(lr) if lr_schedule == "constant" else None
        self.l2 = float(l2)
        self.schedule = schedule
        self.release = release
        self.convex = bool(convex)
        self.smoothness = smoothness
        self.lipschitz = lipschitz
        self.delta = check_delta("delta", delta)
        names = [accountants] if isinstance(accountants, str) else list(accountants)
        self.accountants = tuple(dict.fromkeys(check_choice("accountants", a,
                                                            ProjectedSgdConfig.accountants())
                                               for a in names))
        if not any(a in LAST_ITERATE_ACCOUNTANTS for a in self.accountants):
            raise ValueError(f"accountants = {list(self.accountants)!r} is not allowed: must "
                             "include contraction and/or contraction-sharpened")
        if not isinstance(intermediate_released, bool):
            raise ValueError(f"intermediate_released = {intermediate_released!r} is not a bool")
        self.intermediate_released = intermediate_released
        if intermediate_released and all(a in LAST_ITERATE_ACCOUNTANTS for a in self.accountants):
            raise ValueError(
                f"accountants = {list(self.accountants)!r} has no all-iterates accountant: "
                "intermediate models are published (federated.evaluate = every-round or "
                "federated.keep_private_state = true), so the headline must be an all-iterates "
                "bound; add pld or rdp to privacy.accountants"
            )
        if not isinstance(secure, bool):
            raise ValueError(f"secure = {secure!r} is not a bool")
        self.secure = secure
        self.options = options
        self.seed = seed
        self._cache: dict[int, list[PrivacyResult]] = {}

    # ------------------------------------------------------------------ what is released
    @property
    def primary_scope(self) -> str:
        """``last-iterate``, or ``all-iterates`` when intermediate models are published."""
        return "all-iterates" if self.intermediate_released else "last-iterate"

    @property
    def headline_scopes(self) -> tuple[str, ...]:
        """Scopes valid for what is released: both for the released model alone (releasing
        every iterate releases more, so an all-iterates bound also bounds the last iterate),
        only all-iterates once intermediate models are published."""
        return (("all-iterates",) if self.intermediate_released
                else ("last-iterate", "all-iterates"))

    @property
    def hidden_state(self) -> bool:
        """The guarantee assumes the intermediate state never published (the runner deletes
        the checkpoints when the run finishes)."""
        return self.private and not self.intermediate_released

    # ------------------------------------------------------------------ what the training uses
    @property
    def private(self) -> bool:
        return self.clip_norm is not None and self.noise_multiplier > 0.0

    @property
    def noise_std(self) -> float:
        """z L: std per coordinate of the noise on the *sum* of the m user gradients."""
        return 0.0 if self.clip_norm is None else self.noise_multiplier * self.clip_norm

    @property
    def paper_sigma(self) -> float:
        """The paper's per-user sigma: ``z L / sqrt(m)`` (aggregated std eta sigma / sqrt(m))."""
        return self.noise_std / math.sqrt(self.cohort_size)

    def lr_at(self, t: int) -> float:
        """eta_t of round t >= 1: ``lr`` or ``1/(l2 t)``."""
        t = check_int("t", t, 1)
        return self.lr if self.lr is not None else 1.0 / (self.l2 * t)

    @property
    def accountant_smoothness(self) -> float | None:
        """beta + l2: the smoothness of a user's whole loss (what the accountant checks)."""
        return None if not self.convex else float(self.smoothness) + self.l2

    def run(self, rounds: int) -> ProjectedNoisySGD:
        """The accountant's description of the first ``rounds`` >= 1 rounds."""
        rounds = check_int("rounds", rounds, 1)
        lr: float | list[float] = (
            self.lr if self.lr is not None else [self.lr_at(t) for t in range(1, rounds + 1)]
        )
        return ProjectedNoisySGD(
            self.users, self.cohort_size, self.clip_norm, self.radius, lr, self.paper_sigma,
            convex=self.convex, smooth=self.accountant_smoothness, rounds=rounds,
            schedule=self.schedule,
        )

    # ------------------------------------------------------------------ what the accountant gets
    def results(self, rounds: int) -> list[PrivacyResult]:
        """Last-iterate and all-iterates guarantees of the model released after ``rounds``
        rounds (empty when not private; rounds = 0: epsilon 0 with the labels of round 1)."""
        rounds = check_int("rounds", rounds, 0)
        if not self.private:
            return []
        if rounds not in self._cache:
            if rounds == 0:
                self._cache[0] = zero_rounds(self.results(1))
            else:
                methods = tuple(a for a in self.accountants if a not in LAST_ITERATE_ACCOUNTANTS)
                node = LastIterateRelease(self.run(rounds), release=self.release,
                                          unit=Unit.CLIENT, methods=methods)
                report = evaluate(node, self.delta, options=self.options)
                self._cache[rounds] = [
                    replace(r, extras={**r.extras, "scope": "last-iterate"
                                       if r.method in LAST_ITERATE_ACCOUNTANTS else "all-iterates"})
                    for r in report if r.method in self.accountants
                ]
        return self._cache[rounds]

    def card(self, rounds: int) -> dict[str, Any]:
        """Privacy-card rows after ``rounds`` rounds."""
        n, m = self.users, self.cohort_size
        if self.schedule == "one-pass":
            sampling = (f"one pass: a secret uniformly random partition of the n = {n} users "
                        f"into {n // m} batches of m = {m}; round t uses batch t (each user at "
                        "most once)")
        else:
            sampling = (f"independent rounds: a fresh secret uniform subset of m = {m} of the "
                        f"n = {n} users every round (q = {m / n:.6g}; multi-round extension "
                        "derived by privfl, not in the paper)")
        lr = (f"eta = {self.lr:g}" if self.lr is not None
              else f"eta_t = 1/(l2 t) = 1/({self.l2:g} t)")
        randomness = randomness_text(self.secure, self.seed, private=self.private)
        if not self.private:
            return {"privacy": "NONE: non-private baseline (no clipping, no noise); no "
                    "guarantee", "users": f"n = {n}", "sampling": sampling,
                    "rounds": rounds, "step": lr, "randomness": randomness}
        rule = ("2 rho (convex: true: convex, beta-smooth, Lipschitz losses, lr <= 2/(beta + "
                f"l2) = {2.0 / self.accountant_smoothness:g})"
                if self.convex and self.accountant_smoothness else
                "2 rho (convex: true, beta + l2 = 0)" if self.convex else
                "2 (rho + eta_t L) (any loss with clipped gradients)")
        model = {"last": "the final model W_T",
                 "random-stop": "W_tau, tau ~ Uniform{1..T} secret (reservoir)"}[self.release]
        if self.intermediate_released:
            release = (f"{model} AND every intermediate model W_1..W_T (published by "
                       "evaluate: every-round or kept in the checkpoints by keep_private_state:"
                       " true): the headline is the all-iterates bound")
        else:
            release = (f"{model} only (model.pt); the checkpoints (W_t, the secret schedule, "
                       "the generator states) are private state while the run is in progress "
                       "and deleted when it finishes; the headline is the tightest bound of "
                       "either scope (an all-iterates bound also bounds the last iterate)")
        card = {
            "unit": "client (a user: its whole local dataset)",
            "neighbouring": "replace-one user (n public)",
            "sampling": sampling,
            "noise": f"Gaussian N(0, (z L)^2 I) on the sum of the m user gradients, z = "
            f"{self.noise_multiplier:g}, std z L = {self.noise_std:g} (the paper's per-user "
            f"sigma = z L / sqrt(m) = {self.paper_sigma:.6g}); added by the trusted aggregator "
            "before the projection",
            "clipping": f"per record at L = {self.clip_norm:g}; a user's gradient is the mean "
            "of its clipped record gradients (norm <= L)",
            "projection": f"L2 ball of radius rho = {self.radius:g} around 0 after every "
            f"round; diameter of a step {rule}",
            "step": lr + (f", plus l2 = {self.l2:g} times W (data-independent)"
                          if self.l2 else ""),
            "steps": f"T = {rounds} rounds",
            "delta": self.delta,
            "release": release + "; last-iterate rows (scope last-iterate) cover the released "
            "model alone; all-iterates rows cover every W_t",
            "threat model": "trusted aggregator; the guarantee is against observers of the "
            "released model (users of round t receive W_{t-1} and are not covered); the "
            "batches, the noise and tau stay secret",
            "randomness": randomness,
            "users": f"n = {n}",
        }
        if rounds >= 1:
            diag = self.results(rounds)[0].extras
            card["contraction"] = (
                f"r1 = 2/z = {diag['entry_r']:.6g}, rc = {diag['contraction_r']:.6g}, "
                f"theta(rc) = {diag['contraction_coefficient']:.6g} at the reported epsilon")
        return card


# ------------------------------------------------------------------------------- the algorithm
@dataclass
class Update:
    """The users' work of one round: their mean gradient and monitoring values."""

    mean: torch.Tensor  #: [d] (1/m) sum_j g_j (no noise)
    loss: float  #: mean per-record loss over the round's users (monitoring)
    clipped_fraction: float  #: records with norm > L (NaN without clipping)
    max_norm: float  #: largest per-record gradient norm (NaN without clipping)


class ProjectedSgd(RoundAlgorithm):
    """Projected noisy SGD with a trusted aggregator (Asoodeh et al. 2021, Algorithm 1).

    Parameters
    ----------
    model
        Architecture; its seeded initialisation projected onto ball(rho) is W_0.
    data
        The users (clients) and their local data; the released model is evaluated on the union
        of the clients' test sets, or the whole test set if they have none.
    plan
        :class:`ProjectedSgdPrivacy`: everything the training and the accountant share.
    seed
        Seeds the partition / batches and the reservoir (numpy) and the noise (torch);
        in secure mode (``plan.secure``) those come from ``os.urandom``.
    input_bound
        Scale every input (train and test) to L2 norm <= this (part of the loss).
    evaluate
        ``"final"`` (accuracy after round ``plan.rounds`` only) or ``"every-round"``.
    stream
        :class:`~privfl.algorithms.cohort_stream.CohortStream`: the memory budget
        (``run.memory_budget``) that sets how many users one engine call takes (or a fixed
        number); every user is a summation unit, so the result is the same bits for any
        (:mod:`privfl.fl.unit_sums`).
    """

    #: why the local work runs in the driver's process, not through privfl.backends'
    #: train_clients (measured on the demo configurations: a round's gradient takes 1-5 ms here,
    #: a sharded call's overhead 70-130 ms); a distributed backend refuses the algorithm
    local_only: ClassVar[str | None] = (
        "a round is one clipped gradient per user at the server's model (no local "
        "steps), summed user by user in cohort order; a round of the shipped "
        "configurations is one engine call of a few hundred small users (Ray would add "
        "about 0.1 s a call to 1-5 ms of work)")

    name: ClassVar[str] = "projected-sgd"
    title: ClassVar[str] = ("projected noisy SGD, only the final model released (Asoodeh et al. "
                            "2021)")
    config_class: ClassVar[type[FederatedConfig]] = ProjectedSgdConfig
    applies_protection: ClassVar[bool] = True  # client-side protection (protection.py)
    metric_labels: ClassVar[dict[str, str]] = {"global_accuracy": "released model (test set)"}
    METRIC_OUTPUTS: ClassVar[dict[str, tuple[bool, str]]] = {
        "users": (True, "m, the users per round: a public setting"),
        "train_loss": UNNOISED_TRAINING,
        "clipped_fraction": UNNOISED_TRAINING,
    }

    def output_classes(self) -> dict[str, tuple[bool, str]]:
        """The released model's accuracy and W_t's norm: covered when the headline covers
        the models they are computed from (every round's only under all-iterates)."""
        classes = dict(self.METRIC_OUTPUTS)
        if self.evaluate_mode == "final" or self.plan.intermediate_released:
            classes["global_accuracy"] = RELEASED_ACCURACY
        if self.plan.intermediate_released:
            classes["model_norm"] = (True, "the norm of W_t, released under the all-iterates "
                                     "headline")
        return classes

    def __init__(self, model: nn.Module, data: FederatedDataset, plan: ProjectedSgdPrivacy, *,
                 seed: int = 0, input_bound: float | None = None, evaluate: str = "final",
                 device: str | torch.device = "cpu", eval_batch_size: int = 1000,
                 trainer_options: dict[str, Any] | None = None,
                 init_params: dict[str, torch.Tensor] | None = None,
                 stream: CohortStream | None = None) -> None:
        check_model_and_data(model, data)
        if stream is not None and not isinstance(stream, CohortStream):
            raise ValueError(f"stream = {stream!r} is not allowed: must be a CohortStream")
        self.stream = stream or CohortStream()
        if not isinstance(plan, ProjectedSgdPrivacy):
            raise ValueError(f"plan = {plan!r} is not allowed: must be a ProjectedSgdPrivacy")
        if plan.users != data.num_clients:
            raise ValueError(f"plan.users = {plan.users} does not match the {data.num_clients} "
                             "clients of data: build the plan from the same data")
        self.plan = plan
        self.data = data
        self.seed = check_int("seed", seed, 0)
        self.input_bound = None if input_bound is None else check_positive("input_bound",
                                                                           input_bound)
        self.evaluate_mode = check_choice("evaluate", evaluate, ("final", "every-round"))
        self.device = torch.device(device)
        # the engine: clipped per-record gradient sums at L; its batch fields are not used
        spec = LocalTrainingSpec(local_steps=1, batch_size=1, clip_norm=plan.clip_norm,
                                 noise_multiplier=plan.noise_multiplier, optimizer="sgd",
                                 lr=1.0, secure=plan.secure)
        self.trainer = CohortTrainer(model, spec, **(trainer_options or {}))
        self.dtype = self.trainer.dtype
        self._model = copy.deepcopy(model).to(self.device)
        self._predict = FlatPredictor(model, self.trainer.unflatten, self.device,
                                      eval_batch_size)
        start = init_params if init_params is not None else trainable_parameters(model)
        self.params = project_(self.trainer.flatten(
            {n: start[n].detach().unsqueeze(0) for n in self.trainer.param_names}
        ).to(self.device), plan.radius)  # W_0 in ball(rho), [1, d]
        self.released = self.params.clone()  # the model that would be released now
        self._load_data()
        self.round = 0
        self.global_accuracy = math.nan
        self.rng, self.generator = seeded_generators(self.seed, self.device)
        n, m = plan.users, plan.cohort_size
        self.order = (np.argsort(self._uniforms(n), kind="stable")
                      if plan.schedule == "one-pass" else None)  # the secret partition
        self._batches = n // m
        # a simulated data-poisoning attack the data carry (privfl.robustness): its success on
        # the released model, inputs bounded like the test set's
        self.attack = attack_monitor(data, self.dtype, self.device, scaling=False,
                                     inputs=self._bounded)
        if self.attack is not None:
            self.metric_labels = {**self.metric_labels, **self.attack.metric_labels}

    # ------------------------------------------------------------------ data
    def _bounded(self, x: np.ndarray) -> torch.Tensor:
        t = torch.as_tensor(np.ascontiguousarray(x)).to(self.device, self.dtype)
        if self.input_bound is not None and t.shape[0]:
            flat = t.reshape(t.shape[0], -1)
            project_(flat, self.input_bound)
        return t

    def _load_data(self) -> None:
        data = self.data
        sizes = data.client_sizes.astype(np.int64)
        self.sizes = torch.as_tensor(sizes, device=self.device)
        width = int(sizes.max())
        # users' records as rows [n, width] of indices into data.train (padded) and a mask
        index = np.zeros((data.num_clients, width), dtype=np.int64)
        mask = np.zeros((data.num_clients, width), dtype=bool)
        for j, idx in enumerate(data.train_indices):
            index[j, : idx.size] = idx
            index[j, idx.size:] = idx[0]
            mask[j, : idx.size] = True
        self._index = torch.as_tensor(index, device=self.device)
        self._mask = torch.as_tensor(mask, device=self.device)
        self._x = self._bounded(data.train.x)
        self._y = torch.as_tensor(np.ascontiguousarray(data.train.y)).to(self.device,
                                                                          torch.int64)
        tests = [np.asarray(i, dtype=np.int64) for i in (data.test_indices or [])]
        pooled = (np.concatenate(tests) if tests and sum(t.size for t in tests)
                  else np.arange(len(data.test)))
        self._test_x = self._bounded(data.test.x[pooled])
        self._test_y = torch.as_tensor(np.ascontiguousarray(data.test.y[pooled])).to(
            self.device, torch.int64)

    # ------------------------------------------------------------------ construction
    @classmethod
    def privacy_plan(cls, config: ExperimentConfig, data: FederatedDataset
                     ) -> ProjectedSgdPrivacy:
        """The plan alone (no model): the training and ``privfl check-privacy`` both use it."""
        f, p = config.federated, config.privacy
        if f.convex:
            if f.input_bound is not None:
                norm, source = f.input_bound, "federated.input_bound"
            else:
                x = np.asarray(data.train.x, dtype=np.float64).reshape(len(data.train.x), -1)
                norm = float(np.sqrt((x * x).sum(1)).max()) if x.size else 0.0
                source = "the largest training input; set federated.input_bound to fix it"
            check_model_constants(model=config.model.name, smoothness=f.smoothness,
                                  lipschitz=f.lipschitz, input_norm=norm, source=source)
        return ProjectedSgdPrivacy(
            users=data.num_clients, cohort_size=f.users_per_round, rounds=f.rounds,
            radius=f.radius, clip_norm=p.clip_norm if p.enabled else None,
            noise_multiplier=p.z, lr=f.lr, lr_schedule=f.lr_schedule, l2=f.l2,
            schedule=f.schedule, release=f.release, convex=f.convex, smoothness=f.smoothness,
            lipschitz=f.lipschitz, delta=p.delta, accountants=tuple(p.accountants),
            secure=p.secure, seed=config.seed,
            intermediate_released=f.evaluate == "every-round" or f.keep_private_state,
        )

    @classmethod
    def from_config(cls, config: ExperimentConfig, data: FederatedDataset) -> ProjectedSgd:
        """Projected noisy SGD with everything the configuration says."""
        from privfl.algorithms.builders import build_model, trainer_options

        f = config.federated
        return cls(build_model(config, data), data, cls.privacy_plan(config, data),
                   seed=config.seed, input_bound=f.input_bound, evaluate=f.evaluate,
                   device=config.run.device, eval_batch_size=config.run.eval_batch_size,
                   trainer_options=trainer_options(config),
                   stream=CohortStream.from_config(config))

    def setup(self) -> dict[str, str]:
        plan = self.plan
        lr = (f"eta = {plan.lr:g}" if plan.lr is not None else f"eta_t = 1/({plan.l2:g} t)")
        rows = {
            "model": f"{type(self._model).__name__} ({self.trainer.num_params:,} parameters)",
            "projected SGD": f"n = {plan.users} users, m = {plan.cohort_size} per round "
            f"({plan.schedule}), {lr}, l2 = {plan.l2:g}, rho = {plan.radius:g}, release "
            f"{plan.release}" + (f", inputs scaled to norm <= {self.input_bound:g}"
                                 if self.input_bound is not None else ""),
            "privacy": (f"client-level, last iterate (Asoodeh et al. 2021), z = "
                        f"{plan.noise_multiplier:g}, L = {plan.clip_norm:g}")
            if plan.private else "none (non-private baseline)",
        }
        if self.evaluate_mode == "every-round":
            rows["evaluation"] = ("every round on intermediate models: these accuracies are "
                                  "outside the last-iterate guarantee")
        return rows

    # ------------------------------------------------------------------ the four stages
    def _uniforms(self, count: int) -> np.ndarray:
        return SECURE_RANDOM.random(count) if self.plan.secure else self.rng.random(count)

    def select_cohort(self) -> np.ndarray:
        """The round's users: block t of the secret permutation (one pass), or the m users
        with the smallest of n fresh float64 uniform keys (a uniform m-subset)."""
        m = self.plan.cohort_size
        if self.order is not None:
            t = self.round  # 0-based block of the round about to run
            if t >= self._batches:
                raise ValueError(f"round {t + 1} is out of range: the one-pass schedule has "
                                 f"{self._batches} rounds (every user once)")
            return np.sort(self.order[t * m: (t + 1) * m])
        return CohortSampler.fixed_size(self.plan.users, m).draw(self._uniforms)

    def round_info(self, cohort: np.ndarray) -> dict[str, Any]:
        return {"users": int(cohort.size)}

    def local_work(self, cohort: np.ndarray) -> Update:
        """Every user's mean clipped record gradient at W_{t-1} (users as rows of the engine),
        averaged over the m users. Each user is a summation unit, added in cohort order, as
        many users per engine call as the memory budget allows (:mod:`privfl.fl.unit_sums`);
        with a client-side protection, each user's gradient is distorted (one user at a time)
        before the server adds it."""
        users = torch.as_tensor(cohort, device=self.device)
        index, mask = self._index[users], self._mask[users]
        sizes = self.sizes[users].to(self.dtype)
        per_unit = unit_bytes(self.trainer, self._x[:1], self._y[:1], index.shape[1])
        chunk = units_per_chunk(users.numel(), per_unit, self.stream.budget(self.device),
                                self.stream.chunk)
        if self.plan.clip_norm is None:
            def unit_sum(u):
                grad, losses = self._plain(self._x[index[u: u + 1]], self._y[index[u: u + 1]],
                                           mask[u: u + 1], sizes[u: u + 1])
                return self._distorted(grad.unsqueeze(0))[0], losses, mask[u: u + 1]

            totals = plain_units(self.trainer.num_params, self.device, users.numel(), chunk,
                                 unit_sum, seed=self.seed, round=self.round)
        else:
            totals = clipped_units(
                self.trainer, self.params, self._x, self._y, index, mask, chunk,
                transform=lambda rows, lo, hi: self._distorted(rows / sizes[lo:hi, None]),
                seed=self.seed, round=self.round)
        m, records = self.plan.cohort_size, max(1, totals.records)
        mean = totals.total.result(self.dtype) / m
        if self.plan.clip_norm is None:
            return Update(mean, totals.loss / records, math.nan, math.nan)
        return Update(mean, totals.loss / records, totals.clipped / records, totals.max_norm)

    def _distorted(self, per_user: torch.Tensor) -> torch.Tensor:
        """Each user's gradient (a row) distorted alone by the client-side protection
        (:mod:`privfl.algorithms.protection`), so the draws do not depend on the chunks."""
        if self.protection is None:
            return per_user
        return torch.cat([self.protection.distort(per_user[j: j + 1], self.generator)
                          for j in range(per_user.shape[0])])

    def _plain(self, x, y, mask, sizes):
        """Sum over users of their mean unclipped gradients (the non-private baseline)."""
        leaves = {n: v[0].detach().requires_grad_(True)
                  for n, v in self.trainer.unflatten(self.params).items()}
        flat_x = x.reshape(-1, *x.shape[2:])
        weights = (mask.to(self.dtype) / sizes.unsqueeze(1)).reshape(-1)
        with torch.enable_grad():
            losses = cross_entropy_loss(functional_call(self._model, leaves, (flat_x,)),
                                        y.reshape(-1))
            grads = torch.autograd.grad((losses * weights).sum(), list(leaves.values()),
                                        allow_unused=True)
        flat = torch.cat([(torch.zeros_like(v) if g is None else g).reshape(-1)
                          for v, g in zip(leaves.values(), grads, strict=True)])
        return flat, losses.detach().reshape(mask.shape)

    def noise(self) -> torch.Tensor:
        """N(0, (z L)^2 I) on the sum of the users' gradients (the sum of their shares)."""
        out = torch.empty(self.trainer.num_params, dtype=self.dtype, device=self.device)
        standard_normal_(out, self.generator, secure=self.plan.secure)
        return out.mul_(self.plan.noise_std)

    def aggregate(self, cohort: np.ndarray, updates: Update) -> None:
        """``W_t = proj_rho(W_{t-1} - eta_t ((sum g_j + noise)/m + l2 W_{t-1}))``; then the
        released model (the last, or the reservoir's W_tau)."""
        plan = self.plan
        if plan.convex and updates.max_norm > plan.lipschitz * (1 + 1e-6):
            raise ValueError(
                f"federated.convex = true claimed per-record gradients of norm <= lipschitz = "
                f"{plan.lipschitz:g}, but round {self.round + 1} met one of norm "
                f"{updates.max_norm:.6g}: the claim is false and the diameter 2 rho does not "
                "hold; set convex: false (or a correct lipschitz and input_bound)"
            )
        step = updates.mean
        if plan.private:
            step = step + self.noise() / plan.cohort_size
        if plan.l2:
            step = step + plan.l2 * self.params[0]
        eta = plan.lr_at(self.round + 1)
        self.params = project_(self.params - eta * step.unsqueeze(0), plan.radius)
        t = self.round + 1
        if plan.release == "last" or t == 1 or self._uniforms(1)[0] < 1.0 / t:
            self.released = self.params.clone()

    @torch.no_grad()
    def accuracy(self, flat: torch.Tensor | None = None) -> float:
        """Accuracy of a model (default: the released one) on the evaluation set."""
        flat = self.released if flat is None else flat
        if self._test_y.numel() == 0:
            return math.nan
        predicted = self._predict(flat[0], self._test_x)
        return float((predicted == self._test_y).to(torch.float64).mean())

    def evaluate(self, cohort: np.ndarray, updates: Update) -> dict[str, Any]:
        """The released model's accuracy (``final``: after the last planned round only)."""
        if self.evaluate_mode == "final" and self.round != self.plan.rounds:
            return {"global_accuracy": math.nan,
                    **(self.attack.unmeasured() if self.attack is not None else {})}
        self.global_accuracy = self.accuracy()
        metrics = {"global_accuracy": self.global_accuracy}
        if self.attack is not None:
            metrics.update(self.attack.metrics(self.trainer, self.released[0]))
        if self.evaluate_mode == "every-round":  # training-data values: monitoring only
            metrics.update(train_loss=updates.loss, clipped_fraction=updates.clipped_fraction,
                           model_norm=float(torch.linalg.vector_norm(self.params)))
        return metrics

    @torch.no_grad()
    def objective(self, flat: torch.Tensor | None = None) -> float:
        """``F(W) = (1/n) sum_j mean_i l(W, x_ji) + (l2/2)||W||^2`` over every user's records
        (inputs bounded, no clipping): what the rounds minimise in expectation. Computed from
        the private data without noise (for experiments such as Corollary 1's gap)."""
        flat = self.released if flat is None else flat
        params = self._predict.params(flat[0])
        weights = self._mask.to(torch.float64) / self.sizes.to(torch.float64).unsqueeze(1)
        total = 0.0
        for lo in range(0, self._index.shape[0], _CHUNK_USERS):
            index = self._index[lo: lo + _CHUNK_USERS]
            x, y = self._x[index.reshape(-1)], self._y[index.reshape(-1)]
            losses = cross_entropy_loss(functional_call(self._model, params, (x,)), y)
            total += float((losses.to(torch.float64).reshape(index.shape)
                            * weights[lo: lo + _CHUNK_USERS]).sum())
        reg = 0.5 * self.plan.l2 * float(torch.linalg.vector_norm(flat.to(torch.float64)) ** 2)
        return total / self.plan.users + reg

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: W_t, the released model, the secret
        partition, every RNG state. In secure mode the rounds after a restore draw fresh
        batches (independent schedule), noise and reservoir decisions from ``os.urandom``."""
        return {
            "round": self.round,
            "params": self.params.detach().cpu().clone(),
            "released": self.released.detach().cpu().clone(),
            "order": None if self.order is None else torch.from_numpy(self.order.copy()),
            "global_accuracy": float(self.global_accuracy),
            **checkpoint_streams(self.data, self.rng, self.generator),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (same data partition and model required)."""
        check_partition(state, self.data)
        params = checkpoint_tensor(state, "params", self.params)
        released = checkpoint_tensor(state, "released", self.released)
        order = state["order"]
        if (order is None) != (self.order is None):
            raise ValueError("checkpoint schedule does not match this run's federated.schedule")
        self.round = check_int("round", state["round"], 0)
        self.params, self.released = params, released
        self.order = None if order is None else order.numpy().astype(np.int64).copy()
        self.global_accuracy = float(state["global_accuracy"])
        restore_streams(state, self.rng, self.generator)

    def global_params(self) -> dict[str, torch.Tensor]:
        """The released model as ``name -> tensor`` (copies)."""
        return {n: v.clone() for n, v in self._predict.params(self.released[0]).items()}

    def __repr__(self) -> str:
        plan = self.plan
        return (f"ProjectedSgd(users={plan.users}, m={plan.cohort_size}, "
                f"schedule={plan.schedule!r}, rho={plan.radius}, round={self.round}, "
                f"private={plan.private})")
