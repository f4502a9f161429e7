"""PriFedSync (Zheng et al. 2021, Algorithm 1) with local NoisySGD / noisy Adam (Algorithm 2).

One round ``r``::

    Omega <- each client i independently with probability p   (Poisson client sampling)
             empty Omega: "redraw" until non-empty (reference code) or "skip" the round
    for i in Omega (together, through the CohortTrainer):
        w~_i <- K local private steps of client i from its current model h~_i, with its own
                persistent optimizer state (LocalTrainingSpec: fixed-size batches of B drawn
                without replacement, flat clipping at C, Gaussian noise z C on the sum, / B)
        evaluate w~_i on client i's test set                    (personalised accuracy)
    w~_global <- (1 - eta) w~_global + eta * mean_{i in Omega} w~_i
    h~_i <- F_i(w~_global) for i in Omega; client i continues from h~_i next time it is sampled
    evaluate w~_global on every client's test set               (global accuracy)

Privacy (record level; Zheng et al. 2021, Theorem 2). Only noised models leave a client, so
everything the server does — the mean over the *realised* cohort (dividing by |Omega| is
post-processing of private models, not a sensitivity-calibrated sum), the helper maps, the
redraw or skip of empty cohorts — is post-processing. The plan (:class:`PriFedSyncPrivacy`)
derives every client's event from the **same** :class:`~privfl.fl.LocalTrainingSpec` that
configures the trainer (:meth:`~privfl.fl.LocalTrainingSpec.privacy_event`: ``K * r`` steps of
that spec's noise multiplier z and batch sampling; replace-one neighbours for fixed-size batches
as in Theorem 2, add/remove for Poisson batches) and takes the worst client, a record held by
several clients composing its holders' events
(:func:`privfl.accounting.parallel.worst_record_results`); ``gdp-clt`` is Theorem 2's CLT mu
(an estimate). Theorem 2 counts ``K * r`` steps for every client whatever p, so neither the
client sampling, the redraw policy nor skipped rounds change the number: a skipped round still
counts (conservative).

Metrics (docs/run.md, "Metrics"): the *personalised accuracy* of round r is the mean over all m
clients of each client's accuracy on its own test set, measured right after its latest local
training (stale for clients not sampled in r, 0 for clients never sampled yet — the reference code's
definition). The *global accuracy* is the mean over clients of the global model's accuracy on each
client's test set. Both are computed from the clients' data without noise: they are monitoring
values for the experimenter, not covered by the privacy guarantee.

A simulated poisoning attack the data carry (Xie et al. 2023; backdoor, label flip, DBA: the
clients only poison data, no server clips their models, so update scaling is refused) adds
``attack_success`` / ``attack_loss`` of the global model and ``attack_success_personalised`` /
``attack_loss_personalised``, the mean over the honest clients of their latest personalised
model's values (:class:`~privfl.attacks.metrics.PersonalisedAttack`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from privfl._validation import (
    check_choice,
    check_delta,
    check_int,
    check_range,
    check_rate,
)
from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import Scopes
from privfl.accounting.fdp.federated import STRONG_RELEASE, WEAK_RELEASE, federated_event
from privfl.accounting.methods import AccountingOptions, resolve_methods
from privfl.accounting.results import PrivacyResult
from privfl.algorithms.algorithm_support import (
    ClientTensors,
    FlatPredictor,
    check_model_and_data,
    check_partition,
    checkpoint_streams,
    checkpoint_tensor,
    data_fingerprint,
    restore_streams,
    seeded_generators,
)
from privfl.algorithms.base import RoundAlgorithm, as_replace_one
from privfl.algorithms.outputs import UNNOISED_TRAINING
from privfl.algorithms.plan_results import PlanResults
from privfl.algorithms.prifedsync_helpers import HelperMap, make_helper
from privfl.algorithms.protection import protected_train
from privfl.attacks.metrics import PersonalisedAttack, attack_monitor
from privfl.backends import train_clients
from privfl.config.algorithms.prifedsync import EMPTY_COHORT_POLICIES, PriFedSyncConfig
from privfl.config.schema import ExperimentConfig, FederatedConfig
from privfl.data.datasets import FederatedDataset
from privfl.data.sharing import RecordSharing
from privfl.fl.client_store import ClientStore
from privfl.fl.params import put_rows, trainable_parameters
from privfl.fl.spec import LocalTrainingSpec
from privfl.fl.trainer import CohortTrainer
from privfl.mechanisms.secure import SECURE_RANDOM, randomness_text

__all__ = ["EMPTY_COHORT_POLICIES", "PriFedSync", "PriFedSyncConfig", "PriFedSyncPrivacy"]

_MAX_REDRAWS = 100_000


class PriFedSyncPrivacy(PlanResults):
    """PriFedSync's privacy plan: record-level federated f-DP (Zheng et al. 2021 Theorem 2).

    Derived from the run's :class:`~privfl.fl.LocalTrainingSpec` (the trainer's own object) and
    the clients' record counts. Per client j the event is ``spec.privacy_event(n_j, rounds)``;
    the *weak* scope (one other client sees j's helper-model stream) is the worst client's
    guarantee, the *strong* scope (all m - 1 others collude) the paper's composition over
    ``(m - 1) K R`` steps (valid, very loose: docs/accountants/federated-fdp.md, "Departures", item
    2). Theorem 2 assumes every record belongs to one client; a record held by several clients
    (``sharing``, an overlapping partition such as the reference code's CIFAR split) composes its
    holders' events (:func:`~privfl.accounting.parallel.worst_record_results`), so its mu is
    ``sqrt(sum of the holders' mu_j^2)``.
    """

    unit = "record"
    primary_scope = "weak"
    #: why each scope (the headline's scope advice, :mod:`privfl.runs.headline`)
    scope_notes = {
        "weak": "any one other client sees a client's helper-model stream, the federated "
                "f-DP of Zheng et al. 2021",
        "strong": "all other clients collude and pool what they see; report this one if they "
                  "may; valid but very loose",
    }

    def __init__(self, spec: LocalTrainingSpec, client_sizes: np.ndarray, *, client_rate: float,
                 empty_cohort: str, delta: float | None, accountants: Sequence[str],
                 options: AccountingOptions | None, seed: int,
                 sharing: RecordSharing | None = None) -> None:
        self.spec = spec
        self.client_sizes = np.asarray(client_sizes, dtype=np.int64)
        self.num_clients = int(self.client_sizes.size)
        self.sharing = RecordSharing() if sharing is None else sharing
        if not isinstance(self.sharing, RecordSharing):
            raise ValueError(f"sharing = {sharing!r} is not allowed: must be a RecordSharing "
                             "(FederatedDataset.record_sharing())")
        self.client_rate = client_rate
        self.empty_cohort = empty_cohort
        self.delta = delta
        self.accountants = resolve_methods(accountants)
        self.options = options
        self.seed = seed
        self._cache: dict[tuple[int, bool], list[PrivacyResult]] = {}

    @property
    def private(self) -> bool:
        return self.spec.private

    @property
    def secure(self) -> bool:
        return self.spec.secure

    def client_events(self, rounds: int, *, colluders: int = 1):
        """Every client's record-level event after ``rounds`` rounds (``colluders`` copies of
        its K R steps for the strong scope)."""
        release = WEAK_RELEASE if colluders == 1 else STRONG_RELEASE
        return [self.spec.privacy_event(int(n), colluders * rounds, release=release)
                for n in np.unique(self.client_sizes)]

    def replace_one_events(self, rounds: int) -> list[Any]:
        """The weak scope's client events re-read under replace-one neighbours."""
        return as_replace_one(self.client_events(rounds))

    def event(self, rounds: int) -> Scopes:
        """What the run releases after ``rounds`` >= 1 rounds, as the event tree that
        ``privfl account fedfdp`` builds too
        (:func:`~privfl.accounting.fdp.federated.federated_event`): client position j's weak
        and strong events, and the sets of clients sharing a record."""
        rounds = check_int("rounds", rounds, 1)
        by_size = [{int(n): e for n, e in zip(np.unique(self.client_sizes),
                                              self.client_events(rounds, colluders=c),
                                              strict=True)}
                   for c in (1, self.num_clients - 1)]
        weak, strong = ([events[int(n)] for n in self.client_sizes] for events in by_size)
        return federated_event(weak, strong, self.sharing.holder_sets)

    def _compose(self, rounds: int, full: bool) -> list[PrivacyResult]:
        """Weak and strong guarantees after ``rounds`` >= 1 rounds:
        :func:`~privfl.accounting.dispatch.evaluate` of :meth:`event` (results and caching:
        :class:`~privfl.algorithms.plan_results.PlanResults`).

        A record held by several clients (``sharing``) composes its holders' K R steps (weak)
        or their strong events (strong); disjoint clients give the worst client's guarantee.
        """
        return evaluate(self.event(rounds), self.delta, methods=self._accountants(full),
                        options=self.options)

    def card(self, rounds: int) -> dict[str, Any]:
        return _card(self, rounds)


def _card(algorithm: PriFedSyncPrivacy, rounds: int) -> dict[str, Any]:
    """Card rows of PriFedSync's plan after ``rounds`` rounds."""
    spec = algorithm.spec
    sizes = algorithm.client_sizes
    m = algorithm.num_clients
    n_text = f"{int(sizes[0])}" if sizes.min() == sizes.max() else (
        f"{int(sizes.min())}..{int(sizes.max())}"
    )
    policy = {
        "redraw": "empty cohorts redrawn",
        "skip": "empty cohorts skip the round (still counted)",
    }[algorithm.empty_cohort]
    clients = (
        f"Poisson, p = {algorithm.client_rate:g} per round ({policy}); p does not enter "
        "Theorem 2, which counts every round"
    )
    steps = spec.local_steps * rounds
    randomness = randomness_text(algorithm.secure, algorithm.seed, private=algorithm.private)
    if not algorithm.private:
        why = "no clipping, no noise" if spec.clip_norm is None else "clipping without noise"
        return {
            "privacy": f"NONE: non-private baseline ({why}); no guarantee, epsilon = inf",
            "clients": f"{m} clients, n_j = {n_text} records",
            "local training": f"K = {spec.local_steps} steps of B = {spec.batch_size} "
            f"({spec.sampling}), {spec.optimizer} lr {spec.lr:g}",
            "client sampling": clients,
            "randomness": randomness,
            "rounds": rounds,
        }
    z = spec.noise_multiplier
    fixed = spec.sampling == "without-replacement"
    batches = "without replacement" if fixed else "Poisson (expected size B)"
    return {
        "unit": "record (one example of one client); client participation is not hidden",
        "neighbouring": "replace-one (one record of one client swapped)" if fixed
        else "add/remove (one record of one client added or removed; Poisson batches)",
        "sampling": f"local batches {batches}, B/n_j = {spec.batch_size}/{n_text} "
        f"(q = {spec.batch_size / float(sizes.min()):.6g}, largest over clients); clients "
        f"{clients}",
        "noise": f"Gaussian, paper sigma = {z / 2:g} (noise multiplier z = {z:g}; std "
        f"z*C = {spec.noise_std:g} on the sum of clipped gradients, divided by B)",
        "clipping": f"flat L2 per example, C = {spec.clip_norm:g}",
        "steps": f"K*R = {spec.local_steps}*{rounds} = {steps} per client (every round counts)",
        "delta": algorithm.delta,
        "release": "helper models sent to clients: weak = one other client sees its stream; "
        "strong = all other clients collude (paper's composition, very loose)",
        "threat model": "untrusted server and clients: only noised models leave a client; "
        "the batches, the cohorts and the noise must stay secret (see randomness)",
        "randomness": randomness,
        "clients": f"m = {m}",
        "record multiplicity": algorithm.sharing.describe(),
    }


class PriFedSync(RoundAlgorithm):
    """PriFedSync (Zheng et al. 2021) over a :class:`~privfl.data.FederatedDataset`.

    Parameters
    ----------
    model
        Architecture; its current parameters are the initialisation ``w_0`` of every client and
        of the global model (unless ``init_params`` is given).
    spec
        Local training of every client (K, B, sampling, clip norm, noise, optimizer). The
        trainer and the accountant both read this object.
    data
        Clients' train/test index sets; ``n_j`` (``data.client_sizes``) enters the accounting.
        Inputs are used as stored (normalise the dataset beforehand if wanted).
    client_rate
        p, Poisson client sampling probability per round.
    server_lr
        eta in ``(0, 1]``: ``w~_global <- (1 - eta) w~_global + eta * mean``.
    helper, alpha
        ``"interpolation"`` (eq. 2.1, weight ``alpha`` on the global model), ``"identity"``
        (FedAvg), or a :class:`~privfl.algorithms.prifedsync_helpers.HelperMap`.
    empty_cohort
        ``"redraw"`` (the reference code: draw again until some client is sampled) or
        ``"skip"`` (the round passes with no training; it still counts for privacy).
    seed
        Seeds client sampling (numpy) and all training randomness (a torch generator). With
        ``spec.secure`` (secure mode) the cohorts, the local batches and the noise come from
        ``os.urandom`` instead (:data:`privfl.mechanisms.SECURE_RANDOM`); the seed then drives
        only what the guarantee does not rely on (model-internal randomness such as dropout).
    delta, accountants, accounting_options
        ``delta`` for the per-round (epsilon, delta) numbers; accountants among ``gdp-clt``
        (Theorem 2's CLT mu, an estimate), ``pld``, ``rdp`` (bounds). ``delta=None`` turns
        per-round accounting off.
    lr_decay_every, lr_decay_gamma
        Optional per-client step decay of the local learning rate: ``lr * gamma ** (c // every)``
        with ``c`` the client's number of previous participations (StepLR stepped once per
        participated round, as in the reference code). Data-independent: no privacy cost.
    device, eval_batch_size, trainer_options
        Where tensors live; evaluation batch size; keyword arguments of
        :class:`~privfl.fl.CohortTrainer` (``layout``, ``chunk_size``, ...).
    init_params
        Optional ``name -> tensor`` starting model instead of ``model``'s parameters.
    """

    def __init__(
        self,
        model: nn.Module,
        spec: LocalTrainingSpec,
        data: FederatedDataset,
        *,
        client_rate: float = 1.0,
        server_lr: float = 1.0,
        helper: str | HelperMap = "interpolation",
        alpha: float = 0.1,
        empty_cohort: str = "redraw",
        seed: int = 0,
        delta: float | None = 1e-5,
        accountants: str | Sequence[str] = ("gdp-clt", "pld"),
        accounting_options: AccountingOptions | None = None,
        lr_decay_every: int | None = None,
        lr_decay_gamma: float = 1.0,
        device: str | torch.device = "cpu",
        eval_batch_size: int = 1000,
        trainer_options: dict[str, Any] | None = None,
        init_params: dict[str, torch.Tensor] | None = None,
        client_store: ClientStore | None = None,
    ) -> None:
        if not isinstance(spec, LocalTrainingSpec):
            raise ValueError(f"spec = {spec!r} is not allowed: must be a LocalTrainingSpec")
        check_model_and_data(model, data)
        if data.num_clients < 2:
            raise ValueError(f"data has {data.num_clients} clients: PriFedSync needs >= 2")
        self.spec = spec
        self.data = data
        self.num_clients = data.num_clients
        self.client_rate = check_rate("client_rate", client_rate)
        self.server_lr = check_range("server_lr", server_lr, 0.0, 1.0, low_open=True)
        self.helper: HelperMap = (
            make_helper(helper, alpha) if isinstance(helper, str) else helper
        )
        if not callable(self.helper):
            raise ValueError(f"helper = {helper!r} is not allowed: must be a name or callable")
        self.empty_cohort = check_choice("empty_cohort", empty_cohort, EMPTY_COHORT_POLICIES)
        self.seed = check_int("seed", seed, 0)
        self.delta = None if delta is None else check_delta("delta", delta)
        self.accountants = resolve_methods(accountants)
        self.accounting_options = accounting_options
        self.lr_decay_every = (
            None if lr_decay_every is None else check_int("lr_decay_every", lr_decay_every, 1)
        )
        self.lr_decay_gamma = check_range("lr_decay_gamma", lr_decay_gamma, 0.0, 1.0,
                                          low_open=True)
        self.device = torch.device(device)
        self.eval_batch_size = check_int("eval_batch_size", eval_batch_size, 1)
        self.client_sizes = data.client_sizes.copy()
        for j, n in enumerate(self.client_sizes):
            spec.check_records(int(n), f"data.client_sizes[{j}]")
        # the accountant's view of every client, from the very spec the trainer runs
        self.plan = PriFedSyncPrivacy(
            spec, self.client_sizes, client_rate=self.client_rate,
            empty_cohort=self.empty_cohort, delta=self.delta, accountants=self.accountants,
            options=accounting_options, seed=self.seed, sharing=data.record_sharing(),
        )

        self.trainer = CohortTrainer(model, spec, **(trainer_options or {}))
        self._predict = FlatPredictor(model, self.trainer.unflatten, self.device,
                                      self.eval_batch_size)
        self._eval_model = self._predict.model
        self.dtype = self.trainer.dtype
        start = init_params if init_params is not None else trainable_parameters(model)
        w0 = self.trainer.flatten({n: start[n].detach().unsqueeze(0) for n in
                                   self.trainer.param_names}).to(self.device)
        self.tensors = ClientTensors(data, self.dtype, self.device)
        self.train_data, self.test_data = self.tensors.train, self.tensors.test
        self.test_sizes = self.tensors.test_sizes

        # algorithm state (everything a checkpoint needs)
        self.round = 0
        # per-client state for the whole population, in memory or memory-mapped (client_store)
        self.store = ClientStore(self.num_clients) if client_store is None else client_store
        if not isinstance(self.store, ClientStore) or self.store.rows != self.num_clients:
            raise ValueError(f"client_store = {client_store!r} is not allowed: must be a "
                             f"ClientStore of {self.num_clients} rows")
        rows = self.store.allocate_like({"local": w0, **self.trainer.init_optimizer_state(1)},
                                        device=self.device)
        self.local = self.store.fill_rows(rows.pop("local"), w0[0])  # h~_i, [m, d]
        self.global_model = w0[0].clone()  # w~_global, [d]
        self.optimizer_state = rows
        self.participations = np.zeros(self.num_clients, dtype=np.int64)
        self.personal_accuracy = np.zeros(self.num_clients, dtype=np.float64)
        self.evaluated = np.zeros(self.num_clients, dtype=bool)
        self.global_accuracy = np.full(self.num_clients, math.nan)
        self.rng, self.generator = seeded_generators(self.seed, self.device)
        # a simulated data-poisoning attack the data carry (privfl.robustness): its success on
        # the global model and on the honest clients' personalised models
        self.attack = attack_monitor(data, self.dtype, self.device, scaling=False)
        self.attack_personal = (None if self.attack is None else
                                PersonalisedAttack(self.attack, self.num_clients))
        if self.attack_personal is not None:
            self.metric_labels = {**self.metric_labels, **self.attack_personal.metric_labels}

    # ------------------------------------------------------------------ data
    def data_fingerprint(self) -> str:
        """SHA-256 of the partition (client train/test indices): a resume must match it."""
        return data_fingerprint(self.data)

    # ------------------------------------------------------------------ the seam
    name: ClassVar[str] = "prifedsync"
    title: ClassVar[str] = ("PriFedSync, record-level federated f-DP with personalised helper "
                            "models (Zheng et al. 2021)")
    config_class: ClassVar[type[FederatedConfig]] = PriFedSyncConfig
    applies_protection: ClassVar[bool] = True  # client-side protection (protection.py)
    metric_labels: ClassVar[dict[str, str]] = {
        "personalised_accuracy": "personalised (mean over clients)",
        "global_accuracy": "global model (mean over clients)",
        "personalised_accuracy_cohort": "personalised, this round's cohort",
    }
    _POST = (True, "post-processing of the clients' noised model streams on held-out test data "
             "(everything a PriFedSync run computes from a record is)")
    _PARTICIPATION = (True, "client participation is not hidden (record level): the bound "
                      "counts every round for every client")
    METRIC_OUTPUTS: ClassVar[dict[str, tuple[bool, str]]] = {
        "personalised_accuracy": _POST,
        "personalised_accuracy_cohort": _POST,
        "global_accuracy": _POST,
        "attack_success_personalised": _POST,
        "attack_loss_personalised": _POST,
        "cohort_size": _PARTICIPATION,
        "redraws": _PARTICIPATION,
        "skipped": _PARTICIPATION,
        "clients_evaluated": _PARTICIPATION,
        "train_loss": UNNOISED_TRAINING,
        "clipped_fraction": UNNOISED_TRAINING,
    }

    @classmethod
    def from_config(cls, config: ExperimentConfig, data: FederatedDataset) -> PriFedSync:
        """PriFedSync with everything the configuration says."""
        from privfl.algorithms.builders import build_model, build_spec, trainer_options

        model = build_model(config, data)
        spec = build_spec(config)
        f, p, t = config.federated, config.privacy, config.training
        return cls(
            model, spec, data, client_rate=f.client_rate, server_lr=f.server_lr,
            helper=f.helper, alpha=f.alpha, empty_cohort=f.empty_cohort, seed=config.seed,
            delta=p.delta if p.enabled else None, accountants=tuple(p.accountants),
            lr_decay_every=t.lr_decay_every, lr_decay_gamma=t.lr_decay_gamma,
            device=config.run.device, eval_batch_size=config.run.eval_batch_size,
            trainer_options=trainer_options(config),
            client_store=ClientStore(data.num_clients, threshold=config.run.memory_budget),
        )

    @classmethod
    def privacy_plan(cls, config: ExperimentConfig, data: FederatedDataset) -> PriFedSyncPrivacy:
        """The plan alone, from the same spec builder the training uses."""
        from privfl.algorithms.builders import build_spec

        spec = build_spec(config)
        f, p = config.federated, config.privacy
        return PriFedSyncPrivacy(
            spec, data.client_sizes, client_rate=f.client_rate, empty_cohort=f.empty_cohort,
            delta=p.delta if p.enabled else None, accountants=tuple(p.accountants),
            options=None, seed=config.seed, sharing=data.record_sharing(),
        )

    def setup(self) -> dict[str, str]:
        spec = self.spec
        helper = getattr(self.helper, "name", repr(self.helper))
        alpha = getattr(self.helper, "alpha", None)
        return {
            "model": f"{type(self._eval_model).__name__} ({self.trainer.num_params:,} "
            "parameters)",
            "local training": f"K = {spec.local_steps}, B = {spec.batch_size} ({spec.sampling}), "
            f"{spec.optimizer} lr {spec.lr:g}"
            + (f", weight decay {spec.weight_decay:g}" if spec.weight_decay else ""),
            "PriFedSync": f"p = {self.client_rate:g}, eta = {self.server_lr:g}, helper {helper}"
            + (f" (alpha = {alpha:g})" if alpha is not None else "")
            + f", empty cohorts: {self.empty_cohort}",
            "privacy": "record-level federated f-DP (Zheng et al. 2021 Theorem 2)"
            if self.private else "none (non-private baseline)",
        }

    # ------------------------------------------------------------------ sampling
    def sample_cohort(self) -> tuple[np.ndarray, int]:
        """Poisson client sampling: ``(sorted client indices, number of redraws)``.

        Client j joins iff ``u_j < p`` for a float64 uniform ``u_j`` (53 random bits) from the
        seeded numpy generator or, in secure mode, from ``os.urandom``: the same Poisson(p)
        scheme either way. With ``empty_cohort="skip"`` the result may be empty.
        """
        source = SECURE_RANDOM if self.secure else self.rng
        redraws = 0
        while True:
            chosen = np.flatnonzero(source.random(self.num_clients) < self.client_rate)
            if chosen.size or self.empty_cohort == "skip":
                return chosen, redraws
            redraws += 1
            if redraws >= _MAX_REDRAWS:
                raise RuntimeError(
                    f"client_rate = {self.client_rate} with {self.num_clients} clients drew "
                    f"{redraws} empty cohorts in a row"
                )

    def _learning_rates(self, cohort: np.ndarray) -> torch.Tensor | None:
        if self.lr_decay_every is None or self.lr_decay_gamma == 1.0:
            return None
        powers = self.participations[cohort] // self.lr_decay_every
        rates = self.spec.lr * np.power(self.lr_decay_gamma, powers.astype(np.float64))
        return torch.as_tensor(rates, dtype=self.dtype, device=self.device)

    # ------------------------------------------------------------------ evaluation
    def _params(self, flat_row: torch.Tensor) -> dict[str, torch.Tensor]:
        return self._predict.params(flat_row)

    def predict(self, flat_row: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Predicted labels of the model with flat parameters ``flat_row`` ([d]) on ``x``."""
        return self._predict(flat_row, x)

    def client_accuracy(self, flat_row: torch.Tensor, client: int) -> float:
        """Accuracy of a model on one client's test set (NaN if it has none)."""
        return self.tensors.client_accuracy(lambda x: self._predict(flat_row, x), client)

    def global_accuracies(self, flat_row: torch.Tensor | None = None) -> np.ndarray:
        """Per-client accuracy of one model (default: the global model) on every test set."""
        flat_row = self.global_model if flat_row is None else flat_row
        return self.tensors.accuracies(lambda x: self._predict(flat_row, x))

    def personalised_accuracy(self) -> float:
        """The paper's metric (docs/run.md, "Metrics"): mean over clients (with a test set) of
        the latest personalised accuracy, 0 for clients never sampled yet."""
        has = self.test_sizes > 0
        return float(self.personal_accuracy[has].mean()) if has.any() else math.nan

    # ------------------------------------------------------------------ one round
    def select_cohort(self) -> tuple[np.ndarray, int]:
        return self.sample_cohort()

    def round_info(self, cohort: tuple[np.ndarray, int]) -> dict[str, Any]:
        chosen, redraws = cohort
        return {"cohort_size": int(chosen.size), "redraws": redraws,
                "skipped": bool(chosen.size == 0)}

    def local_work(self, cohort: tuple[np.ndarray, int]) -> dict[str, Any] | None:
        """K private local steps of every sampled client, then its personalised accuracy."""
        chosen, _ = cohort
        if not chosen.size:
            return None
        states = ClientStore.take(self.optimizer_state, chosen, self.device)
        start = ClientStore.take({"w": self.local}, chosen, self.device)["w"]  # cohort rows
        if self.protection is not None:  # client-side protection (fl.algorithms.protection)
            trained, states, stats = protected_train(
                self.trainer, start, [self.train_data[j] for j in chosen],
                self.protection, self.generator, self.spec.batch_size, states,
                lr=self._learning_rates(chosen), distort=False)
        else:
            trained, states, stats = train_clients(  # on the active backend (privfl.backends)
                self.trainer, start, self.train_data, chosen, states,
                self.generator, lr=self._learning_rates(chosen))  # w~_i, [c, d]
        put_rows(self.optimizer_state, chosen, states)
        self.participations[chosen] += 1
        # personalised models, right after local training (the paper's metric; docs/run.md)
        accs = np.array([self.client_accuracy(trained[k], j) for k, j in enumerate(chosen)])
        self.personal_accuracy[chosen] = np.nan_to_num(accs, nan=0.0)
        self.evaluated[chosen] = True
        if self.attack_personal is not None:
            self.attack_personal.record(self.trainer, trained, chosen)
        if self.protection is not None:  # the client keeps w~_i and uploads it distorted
            trained = self.protection.distort(trained, self.generator)
        return {"trained": trained, "stats": stats, "accuracies": accs}

    def aggregate(self, cohort: tuple[np.ndarray, int], updates: dict[str, Any] | None) -> None:
        """Post-processing of the private models: the global step, then the helper maps."""
        if updates is None:
            return
        chosen, _ = cohort
        trained = updates["trained"]
        mean = trained.mean(0)
        self.global_model = torch.lerp(self.global_model, mean, self.server_lr)
        helpers = self.helper(trained, self.global_model, chosen)
        if tuple(helpers.shape) != tuple(trained.shape):
            raise ValueError(
                f"helper returned shape {tuple(helpers.shape)}: must be {tuple(trained.shape)}"
            )
        self.local[torch.as_tensor(chosen)] = helpers.to(self.local.device, self.local.dtype)
        self.store.release()  # a mapped store: its written pages leave the resident set

    def evaluate(self, cohort: tuple[np.ndarray, int],
                 updates: dict[str, Any] | None) -> dict[str, Any]:
        cohort_acc = loss = clipped = math.nan
        if updates is not None:
            accs = updates["accuracies"]
            cohort_acc = float(np.nanmean(accs)) if np.isfinite(accs).any() else math.nan
            if updates["stats"] is not None:  # None: record sampling left nobody training
                loss = float(updates["stats"].loss.mean())
                clipped = float(updates["stats"].clipped_fraction.mean())
        self.global_accuracy = self.global_accuracies()
        metrics = {
            "personalised_accuracy": self.personalised_accuracy(),
            "personalised_accuracy_cohort": cohort_acc,
            "global_accuracy": self.tensors.mean_accuracy(self.global_accuracy),
            "clients_evaluated": int(self.evaluated.sum()),
            "train_loss": loss,
            "clipped_fraction": clipped,
        }
        if self.attack is not None:
            metrics.update(self.attack.metrics(self.trainer, self.global_model))
            metrics.update(self.attack_personal.metrics())
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (tensors and plain Python values only).

        In secure mode the generator states are saved too, but the rounds after a restore draw
        fresh cohorts, batches and noise from ``os.urandom``: they continue the run, never
        replay it.
        """
        return {
            "round": self.round,
            "local": self.store.snapshot(self.local),  # a mapped store: itself, not a copy
            "global_model": self.global_model.detach().cpu().clone(),
            "optimizer_state": {k: self.store.snapshot(v)
                                for k, v in self.optimizer_state.items()},
            "participations": torch.from_numpy(self.participations.copy()),
            "personal_accuracy": torch.from_numpy(self.personal_accuracy.copy()),
            "evaluated": torch.from_numpy(self.evaluated.copy()),
            "global_accuracy": torch.from_numpy(self.global_accuracy.copy()),
            **checkpoint_streams(self.data, self.rng, self.generator),
            **(self.attack_personal.state_dict() if self.attack_personal is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (same data partition and model required)."""
        check_partition(state, self.data)
        global_model = checkpoint_tensor(state, "global_model", self.global_model)
        self.trainer.optimizer.check_state(state["optimizer_state"], self.num_clients,
                                           self.trainer.num_params, name="checkpoint optimizer")
        self.store.restore(self.local, state["local"])  # in place, chunk by chunk
        for key, value in self.optimizer_state.items():
            self.store.restore(value, state["optimizer_state"][key])
        if self.attack_personal is not None:
            self.attack_personal.load_state_dict(state)
        self.round = check_int("round", state["round"], 0)
        self.global_model = global_model
        self.participations = state["participations"].numpy().astype(np.int64).copy()
        self.personal_accuracy = state["personal_accuracy"].numpy().astype(np.float64).copy()
        self.evaluated = state["evaluated"].numpy().astype(bool).copy()
        self.global_accuracy = state["global_accuracy"].numpy().astype(np.float64).copy()
        restore_streams(state, self.rng, self.generator)

    def global_params(self) -> dict[str, torch.Tensor]:
        """The global model as ``name -> tensor`` (copies)."""
        return {n: v.clone() for n, v in self._params(self.global_model).items()}

    def client_params(self, client: int) -> dict[str, torch.Tensor]:
        """Client ``client``'s current model (its helper model h~_i) as ``name -> tensor``."""
        client = check_int("client", client, 0)
        if client >= self.num_clients:
            raise ValueError(f"client = {client} is out of range: must be in "
                             f"[0, {self.num_clients - 1}]")
        return {n: v.clone() for n, v in self._params(self.local[client]).items()}

    def __repr__(self) -> str:
        return (f"PriFedSync(clients={self.num_clients}, p={self.client_rate}, "
                f"eta={self.server_lr}, helper={self.helper!r}, round={self.round}, "
                f"private={self.private})")
