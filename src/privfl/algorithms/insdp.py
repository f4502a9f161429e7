"""InsDP-FedSGD and InsDP-FedAvg: instance-level DP federated learning (Xie et al. 2023,
Algorithms 2 and 3).

One round ``t``::

    U_t   <- m clients: all N (m = N, the paper's experiments), m of N uniformly at random
             without replacement, or a cyclic public schedule
    for i in U_t (together, through the CohortTrainer):
        w_i <- V local DP-SGD steps from w_{t-1} (LocalTrainingSpec: batches of B, Poisson at
               q_j = B / n_j or fixed-size without replacement; flat per-example clipping at C;
               noise N(0, sigma^2 C^2 I) on the sum; divided by B), client i's optimizer state
               kept across rounds (as the authors' code does)
    w_t   <- w_{t-1} + eta_s * (1/m) sum_{i in U_t} (w_i - w_{t-1})     (eta_s = 1 in the paper)

InsDP-FedSGD is V = 1 (one DP-SGD step per selected client, Algorithm 2); InsDP-FedAvg takes V
steps (Algorithm 3). Privacy is record-level, per client, combined by the maximum over clients
(parallel composition, Xie et al. 2023 Proposition 3); :class:`InsDpPrivacy` derives every
client's event from the same :class:`~privfl.fl.LocalTrainingSpec` the trainer runs, and also
reports the paper's own accounting (scope ``paper``) beside privfl's tighter bounds.

The *global accuracy* of a round is the mean over clients of the global model's accuracy on
each client's test set (as for PriFedSync): a monitoring value computed without noise, not
covered by the guarantee.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from privfl._validation import check_delta, check_int, check_positive
from privfl.accounting.methods import AccountingOptions, resolve_methods
from privfl.algorithms.algorithm_support import (
    ClientTensors,
    FlatPredictor,
    check_model_and_data,
    check_partition,
    checkpoint_streams,
    checkpoint_tensor,
    flat_model,
    restore_streams,
    seeded_generators,
)
from privfl.algorithms.base import RoundAlgorithm
from privfl.algorithms.cohort_stream import CohortStream, StatsRows
from privfl.algorithms.insdp_plan import InsDpPrivacy
from privfl.algorithms.outputs import RELEASED_ACCURACY, UNNOISED_TRAINING
from privfl.algorithms.protection import protected_train
from privfl.attacks.metrics import attack_monitor
from privfl.config.algorithms.insdp import (
    InsDpFedAvgConfig,
    InsDpFedSgdConfig,
)
from privfl.config.schema import ExperimentConfig, FederatedConfig
from privfl.data.datasets import FederatedDataset
from privfl.fl.chunked_cohorts import RowSum
from privfl.fl.client_store import ClientStore
from privfl.fl.params import put_rows, trainable_parameters
from privfl.fl.spec import LocalTrainingSpec
from privfl.fl.trainer import CohortTrainer
from privfl.mechanisms.secure import SECURE_RANDOM

__all__ = ["InsDpFedAvg", "InsDpFedAvgConfig", "InsDpFedSgd", "InsDpFedSgdConfig",
           "InsDpPrivacy"]



# ---------------------------------------------------------------------------------- algorithm
class _InsDp(RoundAlgorithm):
    """Shared implementation of InsDP-FedSGD and InsDP-FedAvg (see the module docstring).

    Parameters
    ----------
    model
        Architecture; its parameters are the initial global model ``w_0`` (unless
        ``init_params`` is given).
    spec
        Every client's local training (V = ``spec.local_steps``, B, sampling, C, sigma,
        optimizer); the trainer and the privacy plan both read this object.
    data
        The clients' train/test index sets; ``n_j`` enters the accounting.
    clients_per_round, client_sampling
        m (``None``: all N) and how the m are chosen (``"uniform"`` or ``"cyclic"``).
    server_lr
        eta_s > 0: ``w <- w + eta_s * mean(w_i - w)``.
    release
        ``"client-updates"`` or (InsDP-FedSGD only) ``"global-model"``; see
        :mod:`privfl.algorithms.insdp_plan`.
    seed
        Seeds the cohorts (numpy) and all training randomness (a torch generator). With
        ``spec.secure`` the cohorts, batches and noise come from ``os.urandom``.
    delta, accountants, accounting_options, paper_accounting
        Per-round accounting (``delta=None`` turns it off); ``accountants`` among ``rdp``,
        ``pld``; ``paper_accounting`` adds the paper's RDP numbers (scope ``paper``).
    device, eval_batch_size, trainer_options, init_params
        Where tensors live; evaluation batch size; keyword arguments of
        :class:`~privfl.fl.CohortTrainer`; an optional ``name -> tensor`` start model.
    """

    applies_protection: ClassVar[bool] = True  # client-side protection (protection.py)

    _plan_algorithm: ClassVar[str] = ""
    metric_labels: ClassVar[dict[str, str]] = {
        "global_accuracy": "global model (mean over clients)"}
    METRIC_OUTPUTS: ClassVar[dict[str, tuple[bool, str]]] = {
        "global_accuracy": RELEASED_ACCURACY,
        "cohort_size": (True, "the round's cohort size: record-level guarantee that does not "
                        "hide participation (a random cohort is charged to every client)"),
        "train_loss": UNNOISED_TRAINING,
        "clipped_fraction": UNNOISED_TRAINING,
    }

    def __init__(
        self,
        model: nn.Module,
        spec: LocalTrainingSpec,
        data: FederatedDataset,
        *,
        clients_per_round: int | None = None,
        client_sampling: str = "uniform",
        server_lr: float = 1.0,
        release: str = "client-updates",
        seed: int = 0,
        delta: float | None = 1e-5,
        accountants: str | Sequence[str] = ("rdp", "pld"),
        accounting_options: AccountingOptions | None = None,
        paper_accounting: bool = True,
        device: str | torch.device = "cpu",
        eval_batch_size: int = 1000,
        trainer_options: dict[str, Any] | None = None,
        init_params: dict[str, torch.Tensor] | None = None,
        stream: CohortStream | None = None,
        client_store: ClientStore | None = None,
    ) -> None:
        check_model_and_data(model, data)
        if stream is not None and not isinstance(stream, CohortStream):
            raise ValueError(f"stream = {stream!r} is not allowed: must be a CohortStream")
        #: the cohort is trained in chunks sized by its memory budget (privfl.fl.chunked_cohorts)
        self.stream = stream or CohortStream()
        self.seed = check_int("seed", seed, 0)
        # the accountant's view of every client, from the very spec the trainer runs
        self.plan = InsDpPrivacy(
            spec, data.client_sizes, algorithm=self._plan_algorithm,
            clients_per_round=clients_per_round, client_sampling=client_sampling,
            release=release, delta=None if delta is None else check_delta("delta", delta),
            accountants=resolve_methods(accountants), options=accounting_options,
            paper_accounting=paper_accounting, seed=self.seed, sharing=data.record_sharing(),
        )
        self.spec = spec
        self.data = data
        self.num_clients = data.num_clients
        self.clients_per_round = self.plan.clients_per_round
        self.server_lr = check_positive("server_lr", server_lr)
        self.device = torch.device(device)
        self.eval_batch_size = check_int("eval_batch_size", eval_batch_size, 1)
        self.trainer = CohortTrainer(model, spec, **(trainer_options or {}))
        self.dtype = self.trainer.dtype
        self.tensors = ClientTensors(data, self.dtype, self.device)
        self.predictor = FlatPredictor(model, self.trainer.unflatten, self.device,
                                       self.eval_batch_size)
        start = init_params if init_params is not None else trainable_parameters(model)
        self.store = ClientStore(self.num_clients) if client_store is None else client_store
        if not isinstance(self.store, ClientStore) or self.store.rows != self.num_clients:
            raise ValueError(f"client_store = {client_store!r} is not allowed: must be a "
                             f"ClientStore of {self.num_clients} rows")
        self._fresh_state(flat_model(self.trainer, start, self.device))
        # a simulated data-poisoning attack the data carry (privfl.robustness): its success
        # metrics; no update scaling (clients follow DP-SGD, nothing clips their updates)
        self.attack = attack_monitor(data, self.dtype, self.device, scaling=False)
        if self.attack is not None:
            self.metric_labels = {**self.metric_labels, **self.attack.metric_labels}

    def _fresh_state(self, global_model: torch.Tensor) -> None:
        """The algorithm state (everything a checkpoint needs) before round 1: the global model
        ``w_0`` ``[d]``, fresh client optimizer states, no participations, generators seeded
        from ``self.seed``."""
        self.round = 0
        self.global_model = global_model  # w_t, [d]
        # per-client optimizer states for the whole population, in memory or memory-mapped
        self.optimizer_state = self.store.allocate_like(self.trainer.init_optimizer_state(1),
                                                        device=self.device)
        self.participations = np.zeros(self.num_clients, dtype=np.int64)
        self.global_accuracy = np.full(self.num_clients, math.nan)
        self.rng, self.generator = seeded_generators(self.seed, self.device)

    def replica(self, seed: int, init_params: dict[str, torch.Tensor] | None = None) -> _InsDp:
        """A Monte Carlo replica (:mod:`privfl.robustness.montecarlo`): shares this algorithm's
        model, trainer, client data, plan and attack; owns the state the constructor would give
        it with ``seed`` and ``init_params`` (default: this algorithm's global model): round 0,
        fresh client optimizer states, generators seeded from ``seed``."""
        twin = copy.copy(self)
        twin.seed = check_int("seed", seed, 0)
        twin._fresh_state(self.global_model.clone() if init_params is None
                          else flat_model(self.trainer, init_params, self.device))
        return twin

    # ------------------------------------------------------------------ construction
    @classmethod
    def _plan_kwargs(cls, config: ExperimentConfig) -> dict[str, Any]:
        f, p = config.federated, config.privacy
        return {
            "clients_per_round": f.clients_per_round, "client_sampling": f.client_sampling,
            "release": getattr(f, "release", "client-updates"),
            "delta": p.delta if p.enabled else None, "accountants": tuple(p.accountants),
            "paper_accounting": f.paper_accounting,
        }

    @classmethod
    def from_config(cls, config: ExperimentConfig, data: FederatedDataset) -> _InsDp:
        """The algorithm with everything the configuration says."""
        from privfl.algorithms.builders import build_model, build_spec, trainer_options

        kwargs = cls._plan_kwargs(config)
        kwargs["accounting_options"] = None
        return cls(build_model(config, data), build_spec(config), data,
                   server_lr=config.federated.server_lr, seed=config.seed,
                   device=config.run.device, eval_batch_size=config.run.eval_batch_size,
                   trainer_options=trainer_options(config),
                   stream=CohortStream.from_config(config),
                   client_store=ClientStore(data.num_clients,
                                            threshold=config.run.memory_budget), **kwargs)

    @classmethod
    def privacy_plan(cls, config: ExperimentConfig, data: FederatedDataset) -> InsDpPrivacy:
        """The plan alone, from the same spec builder the training uses."""
        from privfl.algorithms.builders import build_spec

        kwargs = cls._plan_kwargs(config)
        kwargs["options"] = None
        return InsDpPrivacy(build_spec(config), data.client_sizes,
                            algorithm=cls._plan_algorithm, seed=config.seed,
                            sharing=data.record_sharing(), **kwargs)

    def setup(self) -> dict[str, str]:
        spec, plan = self.spec, self.plan
        cohort = (f"all N = {self.num_clients} clients every round" if plan.full_participation
                  else f"m = {self.clients_per_round} of N = {self.num_clients} "
                  f"({plan.client_sampling})")
        return {
            "model": f"{type(self.predictor.model).__name__} ({self.trainer.num_params:,} "
                     "parameters)",
            "local training": f"V = {spec.local_steps}, B = {spec.batch_size} ({spec.sampling}), "
                              f"{spec.optimizer} lr {spec.lr:g}"
                              + (f", weight decay {spec.weight_decay:g}"
                                 if spec.weight_decay else ""),
            self.name: f"{cohort}, server lr eta_s = {self.server_lr:g}, release "
                       f"{plan.release}",
            "privacy": "record-level DP, per-client accountants, max over clients (Xie et al. "
                       "2023)" if self.private else "none (non-private baseline)",
        }

    # ------------------------------------------------------------------ evaluation
    def predict(self, x: torch.Tensor, flat_row: torch.Tensor | None = None) -> torch.Tensor:
        """Predicted labels on ``x`` of the global model (or of flat parameters ``flat_row``)."""
        return self.predictor(self.global_model if flat_row is None else flat_row, x)

    def global_accuracies(self) -> np.ndarray:
        """The global model's accuracy on every client's test set (NaN: no test set)."""
        return self.tensors.accuracies(self.predict)

    # ------------------------------------------------------------------ one round
    def select_cohort(self) -> np.ndarray:
        """The round's m clients, sorted: the plan's schedule (m = N or cyclic), or m of N
        uniformly without replacement (the m smallest of N uniforms, from the seeded
        generator or, in secure mode, ``os.urandom``)."""
        if self.plan.full_participation or self.plan.client_sampling == "cyclic":
            return self.plan.scheduled_cohort(self.round + 1)
        source = SECURE_RANDOM if self.secure else self.rng
        return self.plan.sampler.draw(source.random)

    def round_info(self, cohort: np.ndarray) -> dict[str, Any]:
        return {"cohort_size": int(cohort.size)}

    def local_work(self, cohort: np.ndarray) -> dict[str, Any]:
        """V local DP-SGD steps of every selected client from the global model, streamed
        (:mod:`privfl.fl.chunked_cohorts`): chunk by chunk, each chunk's optimizer states taken from
        and put back into the clients' store and its models added to the round's sum
        ``sum_i w_i`` (row by row in cohort order, float64) before the next chunk runs.
        Client-side protection (:mod:`privfl.algorithms.protection`) samples and distorts
        the whole cohort at once: one chunk."""
        total = RowSum(self.global_model.numel(), self.device)
        if self.protection is not None:
            states = ClientStore.take(self.optimizer_state, cohort, self.device)
            trained, states, merged = protected_train(
                self.trainer, self.global_model, [self.tensors.train[j] for j in cohort],
                self.protection, self.generator, self.spec.batch_size, states)
            put_rows(self.optimizer_state, cohort, states)
            total.add(trained)
            self.participations[cohort] += 1
            return {"sum": total, "stats": merged}
        stats = StatsRows()
        for lo, hi, trained, states, part in self.stream.run(  # on the active backend
                self.trainer, self.global_model, self.tensors.train, cohort,
                lambda lo, hi: ClientStore.take(self.optimizer_state, cohort[lo:hi], self.device),
                self.generator):
            put_rows(self.optimizer_state, cohort[lo:hi], states)
            total.add(trained)
            stats.add(part)
        self.participations[cohort] += 1
        return {"sum": total, "stats": stats.merged()}

    def aggregate(self, cohort: np.ndarray, updates: dict[str, Any]) -> None:
        """``w <- w + eta_s * mean_i (w_i - w)`` (post-processing of the private updates);
        ``mean_i w_i`` is the streamed float64 sum divided by m, rounded once."""
        total = updates["sum"]
        mean_update = (total.total / total.count).to(self.dtype) - self.global_model
        self.global_model = self.global_model + self.server_lr * mean_update
        self.store.release()  # a mapped store: its written pages leave the resident set

    def evaluate(self, cohort: np.ndarray, updates: dict[str, Any]) -> dict[str, Any]:
        stats = updates["stats"]
        self.global_accuracy = self.global_accuracies()
        metrics = {
            "global_accuracy": self.tensors.mean_accuracy(self.global_accuracy),
            "train_loss": float(stats.loss.mean()) if stats is not None else math.nan,
            "clipped_fraction": (float(stats.clipped_fraction.mean()) if stats is not None
                                 else math.nan),
        }
        if self.attack is not None:
            metrics.update(self.attack.metrics(self.trainer, self.global_model))
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (tensors and plain Python values only).

        In secure mode the rounds after a restore draw fresh cohorts, batches and noise from
        ``os.urandom``: they continue the run, never replay it.
        """
        return {
            "round": self.round,
            "global_model": self.global_model.detach().cpu().clone(),
            "optimizer_state": {k: self.store.snapshot(v)  # a mapped store: itself, no copy
                                for k, v in self.optimizer_state.items()},
            "participations": torch.from_numpy(self.participations.copy()),
            "global_accuracy": torch.from_numpy(self.global_accuracy.copy()),
            **checkpoint_streams(self.data, self.rng, self.generator),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (same data partition and model required)."""
        check_partition(state, self.data)
        model = checkpoint_tensor(state, "global_model", self.global_model)
        self.trainer.optimizer.check_state(state["optimizer_state"], self.num_clients,
                                           self.trainer.num_params, name="checkpoint optimizer")
        for key, value in self.optimizer_state.items():  # in place, chunk by chunk
            self.store.restore(value, state["optimizer_state"][key])
        self.round = check_int("round", state["round"], 0)
        self.global_model = model
        self.participations = state["participations"].numpy().astype(np.int64).copy()
        self.global_accuracy = state["global_accuracy"].numpy().astype(np.float64).copy()
        restore_streams(state, self.rng, self.generator)

    def global_params(self) -> dict[str, torch.Tensor]:
        """The global model as ``name -> tensor`` (copies)."""
        return {n: v.clone() for n, v in self.predictor.params(self.global_model).items()}

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(clients={self.num_clients}, m={self.clients_per_round}, "
                f"sampling={self.plan.client_sampling!r}, release={self.plan.release!r}, "
                f"round={self.round}, private={self.private})")


class InsDpFedSgd(_InsDp):
    """InsDP-FedSGD (Xie et al. 2023 Algorithm 2): one local DP-SGD step per selected client.

    ``spec.local_steps`` must be 1. ``release="global-model"`` (the default; the paper's
    Proposition 2) accounts the mean update with noise ``sigma sqrt(m)`` and needs
    ``spec.optimizer == "sgd"``; ``"client-updates"`` accounts each client's step alone.
    Other parameters: :class:`_InsDp`.
    """

    name: ClassVar[str] = "insdp-fedsgd"
    title: ClassVar[str] = ("InsDP-FedSGD, instance-level DP with one DP-SGD step per selected "
                            "client (Xie et al. 2023)")
    config_class: ClassVar[type[FederatedConfig]] = InsDpFedSgdConfig
    _plan_algorithm: ClassVar[str] = "fedsgd"

    def __init__(self, model: nn.Module, spec: LocalTrainingSpec, data: FederatedDataset, *,
                 release: str = "global-model", **kwargs: Any) -> None:
        super().__init__(model, spec, data, release=release, **kwargs)


class InsDpFedAvg(_InsDp):
    """InsDP-FedAvg (Xie et al. 2023 Algorithm 3): V local DP-SGD steps per selected client,
    each client's own accountant, the maximum over clients (Proposition 3).

    Parameters: :class:`_InsDp` (``release`` is ``"client-updates"``).
    """

    name: ClassVar[str] = "insdp-fedavg"
    title: ClassVar[str] = ("InsDP-FedAvg, instance-level DP with V local DP-SGD steps per "
                            "selected client (Xie et al. 2023)")
    config_class: ClassVar[type[FederatedConfig]] = InsDpFedAvgConfig
    _plan_algorithm: ClassVar[str] = "fedavg"
