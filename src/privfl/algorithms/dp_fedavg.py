"""Client-level DP-FedAvg (McMahan et al. 2018; UserDP-FedAvg of Xie et al. 2023, Algorithm 1),
with adaptive clipping (Andrew et al. 2021).

One round ``t``::

    cohort  <- Poisson: each of the N clients independently with probability q
               fixed-size: m of the N clients uniformly without replacement
               (an empty Poisson cohort is NOT redrawn: the round releases noise only)
    for k in cohort (together, through the CohortTrainer):
        w_k <- K local non-private steps from w_t (LocalTrainingSpec without clipping or noise;
               a fresh optimizer state every round, as Xie et al.'s code)
        u_k <- w_k - w_t
    Delta   <- ServerSideDp: clip each u_k to S_t, sum, + N(0, (z_u S_t)^2 I), / E[m]
               (E[m] = q N or m: the expected cohort size, never the realised one)
    v       <- beta v + Delta;  w_t+1 <- w_t + eta v          (server step; beta = 0: plain)
    S_t+1   <- adaptive clipping: S_t exp(-eta_C (b~ - gamma)) (Andrew et al. 2021), or S

Privacy (client level; :class:`DpFedAvgPrivacy`). The unit is one client's whole dataset. A
round is the subsampled Gaussian mechanism on the sum of clipped updates with the EFFECTIVE
noise multiplier ``z = privacy.noise_multiplier`` (with adaptive clipping the update noise
``z_u`` and the count noise ``sigma_b`` satisfy ``z = (z_u^-2 + (2 sigma_b)^-2)^(-1/2)``,
Andrew et al. 2021 Theorem 1), and ``R`` rounds compose (every global model is released):

* Poisson client sampling at rate q: add/remove-one-client neighbours, q;
* fixed-size cohorts of m out of N: replace-one-client neighbours (the population stays N),
  q = m / N, the sampled-without-replacement Gaussian (never accounted as Poisson).

Both the sampling and the noise the trainer and the server use come from the plan's own fields
(:attr:`DpFedAvgPrivacy.step`), so the accountant sees what ran. RDP and PLD give bounds,
``gdp-clt`` an estimate. ``federated.paper_accounting`` adds Xie et al. 2023's numbers (Poisson
RDP over the legacy orders with the classic conversion; their Tables 4-6) with scope
``paper``: a bound when the clients are Poisson-sampled, an estimate (labelled so) when the
cohorts are fixed-size, which the paper accounts as Poisson. The median clipping variants
choose the threshold from the round's updates, a leakage no accountant charges: their results
are labelled estimates.

Metric: the *global accuracy* is the mean over clients (with a test set) of the global model's
accuracy on each client's test set (like PriFedSync's); it and the clipping statistics other than
the noisy unclipped fraction are monitoring values, computed without noise.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from privfl._validation import check_choice, check_delta, check_int, check_range
from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import Neighbouring, NoisyStep, PrivacyEvent, Sampling, Unit
from privfl.accounting.methods import (
    AccountingOptions,
    build_accountant,
    resolve_methods,
)
from privfl.accounting.results import PrivacyResult
from privfl.algorithms.algorithm_support import flat_model
from privfl.algorithms.base import as_replace_one
from privfl.algorithms.cohort_stream import StatsRows
from privfl.algorithms.outputs import RELEASED_ACCURACY, UNNOISED_TRAINING
from privfl.algorithms.plan_results import PlanResults
from privfl.algorithms.protection import protected_local_models
from privfl.algorithms.server_fedavg import ServerFedAvg, local_spec
from privfl.attacks.metrics import attack_monitor
from privfl.config.algorithms.dp_fedavg import (
    CLIENT_SAMPLING,
    COUNT_NOISE_DIVISOR,
    DpFedAvgConfig,
)
from privfl.config.schema import ExperimentConfig, FederatedConfig
from privfl.data.datasets import FederatedDataset
from privfl.fl.aggregation import (
    CLIPPINGS,
    MEDIAN_CLIPPINGS,
    AdaptiveClipping,
    DpAggregate,
    MeanAggregation,
    MeanRound,
    ServerSideDp,
    UpdateClipping,
    update_noise_multiplier,
)
from privfl.fl.cohort_sampler import CohortSampler
from privfl.fl.spec import LocalTrainingSpec
from privfl.mechanisms.secure import SECURE_RANDOM, randomness_text

__all__ = ["CLIENT_SAMPLING", "DpFedAvg", "DpFedAvgConfig", "DpFedAvgPrivacy", "local_spec"]

_PAPER_OPTIONS = AccountingOptions(orders="legacy", conversion="classic")
_RELEASE = "all-iterates"


# ------------------------------------------------------------------------------ the plan
class DpFedAvgPrivacy(PlanResults):
    """DP-FedAvg's privacy plan: client-level, one subsampled Gaussian step per round.

    Parameters
    ----------
    num_clients
        N, the population.
    client_sampling, client_rate, cohort_size
        ``"poisson"`` with rate q, or ``"fixed-size"`` with m of N.
    noise_multiplier
        z, the effective noise multiplier of a round (0: non-private, no clipping, no noise).
    clip_norm
        S (the initial clip norm with adaptive clipping, the cap of the median variants).
    clipping
        One of :data:`~privfl.fl.aggregation.CLIPPINGS`.
    adaptive
        :class:`~privfl.fl.aggregation.AdaptiveClipping` or None.
    delta, accountants, options
        ``delta`` of the (epsilon, delta) numbers (None: accounting off); accountants among
        rdp, pld (bounds) and gdp-clt (an estimate).
    paper_accounting
        Also report Xie et al. 2023's numbers (scope ``paper``).
    secure, seed
        Secure mode (cohorts, batches, noise from ``os.urandom``); the seed otherwise.
    """

    unit = "client"
    primary_scope = ""

    def __init__(
        self,
        *,
        num_clients: int,
        client_sampling: str = "poisson",
        client_rate: float | None = None,
        cohort_size: int | None = None,
        noise_multiplier: float,
        clip_norm: float = 1.0,
        clipping: str = "flat",
        adaptive: AdaptiveClipping | None = None,
        delta: float | None = 1e-5,
        accountants: str | Sequence[str] = ("rdp", "pld"),
        options: AccountingOptions | None = None,
        paper_accounting: bool = False,
        secure: bool = False,
        seed: int = 0,
    ) -> None:
        self.num_clients = check_int("num_clients", num_clients, 1)
        self.client_sampling = check_choice("client_sampling", client_sampling, CLIENT_SAMPLING)
        # one sampler: select_cohort draws from it, the accountant's step reads it
        self.sampler = (CohortSampler.poisson(self.num_clients, client_rate)
                        if self.client_sampling == "poisson"
                        else CohortSampler.fixed_size(self.num_clients, cohort_size))
        self.noise_multiplier = check_range("noise_multiplier", noise_multiplier, 0.0)
        self.clip_norm = check_range("clip_norm", clip_norm, 0.0, low_open=True)
        self.clipping = check_choice("clipping", clipping, CLIPPINGS)
        if adaptive is not None and not isinstance(adaptive, AdaptiveClipping):
            raise ValueError(f"adaptive = {adaptive!r} is not an AdaptiveClipping")
        if adaptive is not None and self.clipping in MEDIAN_CLIPPINGS:
            raise ValueError(f"clipping = {self.clipping!r} with adaptive clipping: both set "
                             "the threshold")
        if not self.private and (adaptive is not None or self.clipping != "flat"
                                 or paper_accounting):
            raise ValueError("adaptive clipping, a non-flat clipping and paper_accounting need "
                             "noise_multiplier > 0 (a non-private run neither clips nor noises)")
        self.adaptive = adaptive
        self.update_noise = (
            self.noise_multiplier if adaptive is None or not self.private
            else update_noise_multiplier(self.noise_multiplier, adaptive.count_noise))
        self.delta = None if delta is None else check_delta("delta", delta)
        self.accountants = resolve_methods(accountants)
        self.options = options
        self.paper_accounting = bool(paper_accounting)
        self.secure = bool(secure)
        self.seed = check_int("seed", seed, 0)
        self._cache: dict[tuple[int, bool], list[PrivacyResult]] = {}
        if self.private:
            event = self.event(1)
            for method in self.accountants:
                reason = build_accountant(method, options).unsupported_reason(event)
                if reason is not None:
                    raise ValueError(f"privacy.accountants: {method} cannot account this run: "
                                     f"{reason}")

    @classmethod
    def from_config(cls, config: ExperimentConfig, num_clients: int) -> DpFedAvgPrivacy:
        """The plan of a configuration (``num_clients`` from the built dataset)."""
        f, p = config.federated, config.privacy
        expected = (f.client_rate * num_clients if f.client_sampling == "poisson"
                    else float(f.cohort_size))
        adaptive = None
        if p.enabled and f.adaptive_clipping:
            adaptive = AdaptiveClipping(
                target_quantile=f.target_quantile, learning_rate=f.clip_learning_rate,
                count_noise=f.count_noise or expected / COUNT_NOISE_DIVISOR)
        return cls(
            num_clients=num_clients, client_sampling=f.client_sampling,
            client_rate=f.client_rate, cohort_size=f.cohort_size, noise_multiplier=p.z,
            clip_norm=p.clip_norm, clipping=f.clipping, adaptive=adaptive,
            delta=p.delta if p.enabled else None, accountants=tuple(p.accountants),
            paper_accounting=f.paper_accounting, secure=p.secure, seed=config.seed)

    # ---------------------------------------------------------------- what the accountant sees
    @property
    def private(self) -> bool:
        return self.noise_multiplier > 0.0

    @property
    def client_rate(self) -> float | None:
        """q of Poisson cohorts (None for fixed-size ones): the sampler's."""
        return self.sampler.rate

    @property
    def cohort_size(self) -> int | None:
        """m of fixed-size cohorts (None for Poisson ones): the sampler's."""
        return self.sampler.size

    @property
    def expected_cohort(self) -> float:
        return self.sampler.expected_size

    @property
    def sampling_rate(self) -> float:
        return self.sampler.sampling_rate

    @property
    def sampling(self) -> Sampling:
        """The client sampling scheme as the accountant names it (the sampler's)."""
        return self.sampler.sampling

    @property
    def neighbouring(self) -> Neighbouring:
        """Add/remove one client for Poisson cohorts, replace one for fixed-size cohorts."""
        return self.sampler.neighbouring

    @property
    def step(self) -> NoisyStep:
        """One round: the sampled Gaussian at the effective z and the client sampling rate."""
        if not self.private:
            raise ValueError("noise_multiplier = 0: this run is not differentially private")
        return NoisyStep(self.noise_multiplier, self.sampling_rate, self.sampling)

    def event(self, rounds: int) -> PrivacyEvent:
        """``rounds`` rounds, every global model released (client level)."""
        rounds = check_int("rounds", rounds, 0)
        return PrivacyEvent(((self.step, rounds),), neighbouring=self.neighbouring,
                            unit=Unit.CLIENT, release=_RELEASE,
                            description="client-level DP-FedAvg rounds")

    def replace_one_events(self, rounds: int) -> list[PrivacyEvent]:
        """The rounds' event re-read under replace-one neighbours (certification)."""
        return as_replace_one([self.event(rounds)])

    def paper_event(self, rounds: int) -> PrivacyEvent:
        """Xie et al. 2023's view: Poisson client sampling at rate q, add/remove neighbours."""
        rounds = check_int("rounds", rounds, 0)
        step = NoisyStep(self.noise_multiplier, self.sampling_rate, Sampling.POISSON)
        return PrivacyEvent(((step, rounds),), unit=Unit.CLIENT, release=_RELEASE)

    def _compose(self, rounds: int, full: bool) -> list[PrivacyResult]:
        """Labelled client-level guarantees after ``rounds`` >= 1 rounds, each accountant in
        turn, then (``paper_accounting``) Xie et al. 2023's own RDP in scope ``paper``
        (results and caching: :class:`~privfl.algorithms.plan_results.PlanResults`)."""
        median = (f"the clipping = {self.clipping!r} threshold is the cohort's median update "
                  "norm, which no accountant charges: not a bound for what ran"
                  if self.clipping in MEDIAN_CLIPPINGS else "")
        extras = {"noise_multiplier": self.noise_multiplier,
                  "expected_cohort": self.expected_cohort}
        if self.adaptive is not None:
            extras.update(update_noise=self.update_noise, count_noise=self.adaptive.count_noise)
        results = []
        for method in self._accountants(full):
            for r in evaluate(self.event(rounds), self.delta, methods=method,
                              options=self.options):
                results.append(_relabel(r, extras, not_a_bound=median))
        if self.paper_accounting:
            fixed = ("Xie et al. 2023 account their fixed-size cohorts as Poisson: this "
                     "Poisson number does not bound fixed-size cohorts (replace-one)"
                     if self.sampling is not Sampling.POISSON else "")
            for r in evaluate(self.paper_event(rounds), self.delta, methods="rdp",
                              options=_PAPER_OPTIONS):
                results.append(_relabel(
                    r, {**extras, "scope": "paper"}, not_a_bound="; ".join(
                        filter(None, (median, fixed))),
                    note="Xie et al. 2023's accounting (Tables 4-6): Poisson RDP over the "
                         "legacy orders, classic conversion"))
        return results

    def card(self, rounds: int) -> dict[str, Any]:
        return _card(self, rounds)


def _relabel(result: PrivacyResult, extras: dict[str, Any], *, not_a_bound: str = "",
             note: str = "") -> PrivacyResult:
    """Add extras and notes; a bound that does not bound what ran (``not_a_bound`` says why)
    becomes an estimate."""
    kind = "estimate" if not_a_bound and result.kind == "bound" else result.kind
    notes = "; ".join(n for n in (result.note, note, not_a_bound) if n)
    return dataclasses.replace(result, kind=kind, extras={**result.extras, **extras},
                               note=notes)


def _card(plan: DpFedAvgPrivacy, rounds: int) -> dict[str, Any]:
    """Card rows of DP-FedAvg's plan after ``rounds`` rounds."""
    n = plan.num_clients
    if plan.client_sampling == "poisson":
        clients = (f"Poisson: each of N = {n} clients with q = {plan.client_rate:g} per round "
                   f"(expected cohort E[m] = qN = {plan.expected_cohort:g}; an empty cohort "
                   "releases noise only)")
    else:
        clients = (f"fixed-size: m = {plan.cohort_size} of N = {n} clients uniformly without "
                   f"replacement (q = m/N = {plan.sampling_rate:.6g})")
    randomness = randomness_text(plan.secure, plan.seed, private=plan.private)
    if not plan.private:
        return {
            "privacy": "NONE: non-private baseline (no clipping, no noise); no guarantee, "
                       "epsilon = inf",
            "client sampling": clients,
            "aggregation": "unweighted mean of the realised cohort's updates",
            "randomness": randomness,
            "rounds": rounds,
        }
    s = plan.clip_norm
    clipping = {
        "flat": f"flat: each client's whole update to L2 norm S = {s:g}",
        "per-layer": f"per layer: tensor j to S_j = S/sqrt(L) (sum_j S_j^2 = S^2, S = {s:g}; "
                     "McMahan et al. 2018)",
        "flat-median": f"flat at S_t = min(S, median of the cohort's update norms), S = {s:g} "
                       "(Geyer et al. 2017 as in Xie et al. 2023): NOT accounted",
        "per-layer-median": f"per layer at S_j = median of the cohort's layer norms, scaled to "
                            f"sqrt(sum_j S_j^2) <= S = {s:g} (Xie et al. 2023): NOT accounted",
    }[plan.clipping]
    z = plan.noise_multiplier
    noise = (f"Gaussian N(0, (z S_t)^2 I) once per round on the sum of clipped updates, "
             f"z = {z:g}, isotropic")
    if plan.adaptive is not None:
        a = plan.adaptive
        clipping += (f"; adaptive (Andrew et al. 2021): S_0 = {s:g}, S_t+1 = S_t exp(-eta_C "
                     f"(b~ - gamma)), gamma = {a.target_quantile:g}, eta_C = "
                     f"{a.learning_rate:g}")
        noise = (f"Gaussian on the update sum with z_u = {plan.update_noise:.6g} (std z_u S_t) "
                 f"and on the centred unclipped count with sigma_b = {a.count_noise:g}: "
                 f"effective z = (z_u^-2 + (2 sigma_b)^-2)^-1/2 = {z:g} (Andrew et al. 2021 "
                 "Theorem 1)")
    neighbouring = ("add/remove one client (all of its records)" if plan.sampling is
                    Sampling.POISSON else
                    "replace one client's data (population fixed at N; fixed-size cohorts)")
    return {
        "unit": "client (all records of one client)",
        "neighbouring": neighbouring,
        "sampling": f"clients {clients}; local batches do not enter the guarantee",
        "noise": noise,
        "clipping": clipping,
        "aggregation": f"(sum of clipped updates + noise) / E[m] = / {plan.expected_cohort:g}, "
                       "the expected cohort size (never the realised one); unweighted",
        "steps": f"R = {rounds} rounds, one noisy release each",
        "delta": plan.delta,
        "release": "every round's global model (all iterates)",
        "threat model": "trusted server: it sees the clients' raw updates, clips and noises "
                        "them; only the noised global models are released",
        "randomness": randomness,
        "clients": f"N = {n}",
    }


# ------------------------------------------------------------------------------ the algorithm
class DpFedAvg(ServerFedAvg):
    """Client-level DP-FedAvg over a :class:`~privfl.data.FederatedDataset`.

    Parameters
    ----------
    model, spec, data
        As :class:`~privfl.algorithms.server_fedavg.ServerFedAvg`: ``spec`` is non-private
        (``clip_norm=None``), the guarantee is client level and comes from the server's
        clipping and noise.
    plan
        :class:`DpFedAvgPrivacy`: client sampling, noise, clipping and accounting. The round
        reads its sampling and noise from this object, the accountant its events.
    options
        :class:`~privfl.algorithms.server_fedavg.ServerFedAvg`'s: ``server_lr`` eta and
        ``server_momentum`` beta (``v <- beta v + Delta; w <- w + eta v``), ``seed`` (client
        sampling and all training randomness; in secure mode, ``plan.secure``, cohorts,
        batches and noise come from ``os.urandom``), ``device``, ``eval_batch_size``,
        ``trainer_options``, ``init_params``, ``stream``.
    protection
        Optional client-side protection (:mod:`privfl.algorithms.protection`, e.g. a
        :class:`privfl.distortion.ClientProtection`): record sampling before and parameter
        distortion after local training; None (default) leaves the round unchanged.
    """

    name: ClassVar[str] = "dp-fedavg"
    title: ClassVar[str] = ("DP-FedAvg, client-level DP (McMahan et al. 2018; UserDP-FedAvg of "
                            "Xie et al. 2023) with adaptive clipping (Andrew et al. 2021)")
    config_class: ClassVar[type[FederatedConfig]] = DpFedAvgConfig
    applies_protection: ClassVar[bool] = True  # client-side protection (protection.py)
    metric_labels: ClassVar[dict[str, str]] = {
        "global_accuracy": "global model (mean over clients)",
    }
    METRIC_OUTPUTS: ClassVar[dict[str, tuple[bool, str]]] = {
        "global_accuracy": RELEASED_ACCURACY,
        "cohort_size": (False, "the realised Poisson cohort size: the guarantee's client "
                        "sampling is secret"),
        "train_loss": UNNOISED_TRAINING,
        "clipped_fraction": UNNOISED_TRAINING,
        "update_norm": (False, "norm of the unnoised mean of the clients' updates"),
        "unclipped_estimate": (True, "the noised count of unclipped updates (adaptive clipping), "
                               "accounted in the effective noise multiplier"),
        "clip_norm": (True, "the clip norm S_t: fixed, or set from the noised counts"),
        "noise_std": (True, "z S_t: follows from the clip norm"),
    }

    def output_classes(self) -> dict[str, tuple[bool, str]]:
        """The clip norm and the noise std are covered unless a median clipping chose them:
        then they are (a function of) the exact median of the cohort's raw update norms."""
        classes = dict(self.METRIC_OUTPUTS)
        if self.plan.clipping in MEDIAN_CLIPPINGS:
            median = (False, f"federated.clipping = {self.plan.clipping!r}: set from the exact "
                      "median of the cohort's unnoised update norms")
            classes.update(clip_norm=median, noise_std=median)
        return classes

    def __init__(
        self,
        model: nn.Module,
        spec: LocalTrainingSpec,
        data: FederatedDataset,
        plan: DpFedAvgPrivacy,
        *,
        protection: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(model, spec, data, plan, **options)
        self.aggregation = MeanAggregation(self.num_clients)
        sizes = tuple(math.prod(self.trainer.param_shapes[n]) for n in self.trainer.param_names)
        self.clipping = UpdateClipping(plan.clipping, sizes)
        self.dp = None if not plan.private else ServerSideDp(
            self.aggregation, self.clipping, noise_multiplier=plan.noise_multiplier,
            clip_norm=plan.clip_norm, expected_cohort=plan.expected_cohort,
            adaptive=plan.adaptive, secure=plan.secure)
        self.protection = protection
        # a simulated attack the data carry (privfl.robustness): scaling and success metrics
        self.attack = attack_monitor(data, self.dtype, self.device)
        if self.attack is not None:
            self.metric_labels = {**self.metric_labels, **self.attack.metric_labels}
        if protection is not None and plan.secure and not protection.secure:
            raise ValueError(f"protection = {protection!r} is not secure: secure mode needs "
                             "its randomness from os.urandom too")

    def _check_plan(self, plan: Any, data: FederatedDataset) -> None:
        if not isinstance(plan, DpFedAvgPrivacy):
            raise ValueError(f"plan = {plan!r} is not allowed: must be a DpFedAvgPrivacy")
        if plan.num_clients != data.num_clients:
            raise ValueError(f"plan.num_clients = {plan.num_clients}: data has "
                             f"{data.num_clients} clients")

    def replica(self, seed: int,
                init_params: dict[str, torch.Tensor] | None = None) -> DpFedAvg:
        """A Monte Carlo replica (:mod:`privfl.robustness.montecarlo`): shares this algorithm's
        model, trainer, client data, plan and attack; owns the state the constructor would give
        it with ``seed`` and ``init_params`` (default: this algorithm's global model): round 0,
        no server momentum, the plan's clip norm, generators seeded from ``seed``."""
        twin = copy.copy(self)
        twin.seed = check_int("seed", seed, 0)
        start = (self.global_model.clone() if init_params is None
                 else flat_model(self.trainer, init_params, self.device))
        twin._fresh_state(start)
        if self.dp is not None:
            twin.dp = copy.copy(self.dp)
            twin.dp.load_state_dict({"clip_norm": self.plan.clip_norm})
        return twin

    # ------------------------------------------------------------------ the seam
    @classmethod
    def privacy_plan(cls, config: ExperimentConfig, data: FederatedDataset) -> DpFedAvgPrivacy:
        """The plan alone (no model, no training)."""
        return DpFedAvgPrivacy.from_config(config, data.num_clients)

    def setup(self) -> dict[str, str]:
        spec, plan = self.spec, self.plan
        sampling = (f"Poisson q = {plan.client_rate:g}" if plan.client_sampling == "poisson"
                    else f"fixed-size m = {plan.cohort_size}")
        adaptive = ""
        if plan.adaptive is not None:
            a = plan.adaptive
            adaptive = (f", adaptive (gamma = {a.target_quantile:g}, eta_C = "
                        f"{a.learning_rate:g}, sigma_b = {a.count_noise:g})")
        return {
            "model": self._model_text(),
            "local training": self._local_text()
                              + (f", weight decay {spec.weight_decay:g}" if spec.weight_decay
                                 else "") + ", non-private, fresh optimizer state every round",
            "DP-FedAvg": f"clients {sampling}, eta = {self.server_lr:g}"
                         + (f", server momentum {self.server_momentum:g}"
                            if self.server_momentum else ""),
            "privacy": (f"client-level, z = {plan.noise_multiplier:g}, S = {plan.clip_norm:g} "
                        f"({plan.clipping} clipping{adaptive})") if plan.private
            else "none (non-private baseline)",
        }

    # ------------------------------------------------------------------ one round
    def select_cohort(self) -> np.ndarray:
        """The round's cohort (sorted client indices) by the plan's client sampling: client j
        joins iff ``u_j < q`` (Poisson), or the m smallest of N uniforms (fixed-size, uniform
        without replacement); uniforms from the seeded generator or ``os.urandom``."""
        source = SECURE_RANDOM if self.plan.secure else self.rng
        return self.plan.sampler.draw(source.random)

    def local_work(self, cohort: np.ndarray, *, keep_updates: bool = False) -> dict[str, Any]:
        """K local non-private steps of every sampled client from the global model.

        Streamed (:mod:`privfl.fl.chunked_cohorts`): the cohort is trained in chunks on the active
        backend and every chunk's updates are clipped and added to the round's sum
        (``"round"``: a :class:`DpRound`, or a :class:`MeanRound` without privacy) before the
        next chunk runs, so memory does not grow with the cohort. ``keep_updates`` (and the
        median clippings, which need every norm first, and client-side protection, which
        perturbs the whole cohort) keeps the updates the clients send, ``[c, d]``
        (``"updates"``), instead; :meth:`aggregate` gives the same model from either."""
        if self.protection is not None:  # client-side protection (fl.algorithms.protection)
            if not cohort.size:
                return {"updates": self.global_model.new_zeros(0, self.global_model.numel()),
                        "stats": None}
            models, stats = protected_local_models(
                self.trainer, self.global_model, [self.tensors.train[j] for j in cohort],
                self.protection, self.generator, self.spec.batch_size)
            return {"updates": self._sent(models.sub_(self.global_model), cohort),
                    "stats": stats}
        d = self.global_model.numel()
        whole = keep_updates or (self.dp is not None and self.clipping.median)
        if whole:
            acc = None
            kept = []
        elif self.dp is not None:
            acc = self.dp.begin(d, self.dtype, self.device)
        else:
            acc = MeanRound(self.aggregation, d, self.device)
        stats = StatsRows()
        for lo, hi, sent in self._chunk_updates(cohort, stats):  # on the active backend
            updates = self._sent(sent, cohort[lo:hi])
            if whole:
                kept.append(updates)
            else:
                acc.add(updates, cohort[lo:hi])
        if whole:
            return {"updates": torch.cat(kept) if kept else self.global_model.new_zeros(0, d),
                    "stats": stats.merged()}
        return {"round": acc, "stats": stats.merged()}

    def _sent(self, updates: torch.Tensor, cohort: np.ndarray) -> torch.Tensor:
        """What the clients send: their updates, the attackers' scaled by gamma (model
        replacement) BEFORE the server clips them (no attack: unchanged)."""
        return updates if self.attack is None else self.attack.scale_updates(updates, cohort)

    def canary_cohort(self, canaries: int, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Canary clients (:meth:`RoundAlgorithm.canary_cohort`): each may join every round and
        joins iff its uniform is below q, as a client of Poisson sampling does."""
        plan = self.plan
        if not plan.private:
            raise ValueError("privacy.noise_multiplier = 0: a non-private run has no canary "
                             "clients to audit (no bound)")
        if plan.client_sampling != "poisson":
            raise ValueError(f"federated.client_sampling = {plan.client_sampling!r}: canary "
                             "clients need 'poisson' (fixed-size cohorts: replace-one "
                             "neighbours, not audited yet)")
        if self.protection is not None or self.clipping.median:
            raise ValueError("client-side protection and median clipping have no canary "
                             "clients yet: they need the whole cohort before clipping")
        if self.aggregation.client_weights(np.zeros(1, dtype=np.int64),
                                           self.global_model[:1]) is not None:
            raise ValueError("a weighted aggregation has no canary clients yet: canaries need "
                             "the unweighted mean")
        uniforms = np.asarray(uniforms, dtype=float)
        if uniforms.shape != (canaries,):
            raise ValueError(f"uniforms has shape {uniforms.shape}: must be ({canaries},)")
        return np.ones(canaries, dtype=bool), uniforms < plan.sampling_rate

    def add_canaries(self, updates: dict[str, Any], directions: torch.Tensor,
                     factor: float) -> None:
        """Canary uploads ``factor S_t u_i`` clipped and summed by the round's :class:`DpRound`
        (their ids are client 0's: the unweighted mean ignores them, canary_cohort checked
        it)."""
        acc = updates.get("round")
        if acc is None or self.dp is None:
            raise ValueError("updates: canaries need the streamed DP round of local_work")
        if directions.shape[0]:
            acc.add(directions.to(self.dtype) * (factor * acc.clip_norm),
                    np.zeros(directions.shape[0], dtype=np.int64))

    def aggregate(self, cohort: np.ndarray, updates: dict[str, Any]) -> None:
        """The server step: the DP wrapper's noisy mean (or the plain mean), then eta, beta."""
        result: DpAggregate | None = None
        acc = updates.get("round")
        if acc is None:  # the whole cohort's updates (median clipping, protection)
            rows = updates["updates"]
            if self.dp is not None:
                result = self.dp(rows, cohort, self.generator)
                step = result.step
            elif rows.shape[0]:
                acc = MeanRound(self.aggregation, rows.shape[1], self.device)
                acc.add(rows, cohort)
                step = acc.mean(self.dtype)
            else:
                step = torch.zeros_like(self.global_model)
        elif self.dp is not None:
            result = self.dp.finish(acc, self.generator)
            step = result.step
        elif acc.sum.count:
            step = acc.mean(self.dtype)
        else:
            step = torch.zeros_like(self.global_model)
        updates["dp"] = result
        if self.server_momentum:
            self.velocity.mul_(self.server_momentum).add_(step)
            step = self.velocity
        self.global_model.add_(step, alpha=self.server_lr)

    def evaluate(self, cohort: np.ndarray, updates: dict[str, Any]) -> dict[str, Any]:
        metrics = self._global_metrics(updates["stats"])
        result = updates.get("dp")
        if result is not None:
            metrics.update(
                clip_norm=result.clip_norm, noise_std=result.noise_std,
                clipped_fraction=result.clipped_fraction, update_norm=result.mean_norm)
            if result.unclipped_estimate is not None:
                metrics["unclipped_estimate"] = result.unclipped_estimate
        if self.attack is not None:
            metrics.update(self.attack.metrics(self.trainer, self.global_model))
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def _server_state(self) -> dict[str, Any]:
        return {"dp": self.dp.state_dict() if self.dp is not None else {}}

    def _load_server_state(self, state: dict[str, Any]) -> None:
        if self.dp is not None:
            self.dp.load_state_dict(state["dp"])

    def __repr__(self) -> str:
        return (f"DpFedAvg(clients={self.num_clients}, {self.plan.client_sampling}, "
                f"round={self.round}, private={self.plan.private})")
