"""The server side of FedAvg with server-side DP, shared by DP-FedAvg (:mod:`.dp_fedavg`) and
the correlated-noise rounds of DP-FTRL and BandMF-FedAvg (:mod:`.correlated_fedavg`).

Every such algorithm keeps one flat global model ``w`` ``[d]`` and a server velocity ``v``;
a round's cohort runs K local NON-private steps from ``w`` (:func:`local_spec`: the clients
neither clip nor noise, the server does) and sends ``u_k = w_k - w``; the server clips, sums,
noises and takes its step. :class:`ServerFedAvg` holds what they share:

* the constructor's checks (a torch model and a :class:`~privfl.data.FederatedDataset`, a
  non-private :class:`~privfl.fl.LocalTrainingSpec`, a plan of the subclass's kind for the
  data's clients, secure mode agreeing between spec and plan, eta > 0, beta in [0, 1)), the
  trainer, the client tensors and the flat predictor;
* :meth:`ServerFedAvg.from_config` (every setting from the configuration);
* :meth:`ServerFedAvg._chunk_updates`: the cohort's local training streamed chunk by chunk on
  the active backend (:mod:`privfl.fl.chunked_cohorts`), each chunk's updates ``[c, d]``
  handed to the subclass before the next chunk runs, so memory does not grow with the cohort;
* the metrics every one reports (the global model's accuracy, a released model on test data;
  the local training loss, a monitoring value without noise);
* checkpoints of ``(round, w, v)`` and both generators (:meth:`ServerFedAvg._server_state` adds
  a subclass's own state: DP-FedAvg's adaptive clip norm, the correlated noise).

A subclass implements :meth:`ServerFedAvg._check_plan`, :meth:`~ServerFedAvg.privacy_plan`,
the round (select, local work, aggregate) and its state hooks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from privfl._validation import check_int, check_range
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
from privfl.config.schema import ExperimentConfig
from privfl.data.datasets import FederatedDataset
from privfl.fl.params import trainable_parameters
from privfl.fl.spec import LocalTrainingSpec
from privfl.fl.trainer import CohortTrainer

__all__ = ["ServerFedAvg", "local_spec"]


def local_spec(config: ExperimentConfig) -> LocalTrainingSpec:
    """The clients' local training: non-private (no clipping, no noise), from ``training``."""
    from privfl.config import ConfigError

    t = config.training
    try:
        return LocalTrainingSpec(
            local_steps=t.local_steps, batch_size=t.batch_size, sampling=t.sampling,
            clip_norm=None, noise_multiplier=0.0, optimizer=t.optimizer, lr=t.lr,
            momentum=t.momentum, betas=tuple(t.betas), eps=t.eps,
            weight_decay=t.weight_decay, secure=config.privacy.secure)
    except ValueError as error:
        raise ConfigError(f"training settings: {error}") from None


class ServerFedAvg(RoundAlgorithm):
    """FedAvg whose server clips and noises (see the module docstring).

    Parameters
    ----------
    model
        Architecture; its parameters (or ``init_params``) are the initial global model.
    spec
        The clients' local training; must be non-private (``clip_norm=None``).
    data
        The clients' train/test index sets.
    plan
        The subclass's privacy plan (:meth:`_check_plan`): the round reads its sampling and
        noise from it, the accountant its event.
    server_lr, server_momentum
        eta > 0 and beta in [0, 1).
    seed
        Seeds client sampling (numpy) and all training randomness (one torch generator).
    device, eval_batch_size, trainer_options, init_params, stream
        Where tensors live; evaluation batch size; keyword arguments of
        :class:`~privfl.fl.CohortTrainer`; optional ``name -> tensor`` starting model; the
        cohort's chunking (:class:`~privfl.algorithms.cohort_stream.CohortStream`).
    """

    def __init__(
        self,
        model: nn.Module,
        spec: LocalTrainingSpec,
        data: FederatedDataset,
        plan: Any,
        *,
        server_lr: float = 1.0,
        server_momentum: float = 0.0,
        seed: int = 0,
        device: str | torch.device = "cpu",
        eval_batch_size: int = 1000,
        trainer_options: dict[str, Any] | None = None,
        init_params: dict[str, torch.Tensor] | None = None,
        stream: CohortStream | None = None,
    ) -> None:
        check_model_and_data(model, data)
        if not isinstance(spec, LocalTrainingSpec):
            raise ValueError(f"spec = {spec!r} is not allowed: must be a LocalTrainingSpec")
        if spec.clip_norm is not None:
            raise ValueError(f"spec.clip_norm = {spec.clip_norm!r} is not allowed: "
                             f"{self.name}'s local training is non-private (clip_norm=None), "
                             "the server clips and noises; record-level local DP-SGD is "
                             "insdp-fedavg")
        self._check_plan(plan, data)
        if plan.secure != spec.secure:
            raise ValueError(f"plan.secure = {plan.secure} and spec.secure = {spec.secure} "
                             "disagree: secure mode covers cohorts, batches and noise")
        self.spec, self.data, self.plan = spec, data, plan
        self.num_clients = data.num_clients
        self.server_lr = check_range("server_lr", server_lr, 0.0, low_open=True)
        self.server_momentum = check_range("server_momentum", server_momentum, 0.0, 1.0,
                                           high_open=True)
        self.seed = check_int("seed", seed, 0)
        self.device = torch.device(device)
        self.eval_batch_size = check_int("eval_batch_size", eval_batch_size, 1)
        for j, n in enumerate(data.client_sizes):
            spec.check_records(int(n), f"data.client_sizes[{j}]")
        self.trainer = CohortTrainer(model, spec, **(trainer_options or {}))
        self.dtype = self.trainer.dtype
        self.tensors = ClientTensors(data, self.dtype, self.device)
        self.predictor = FlatPredictor(model, self.trainer.unflatten, self.device,
                                       self.eval_batch_size)
        if stream is not None and not isinstance(stream, CohortStream):
            raise ValueError(f"stream = {stream!r} is not allowed: must be a CohortStream")
        #: the cohort is trained in chunks sized by its memory budget (privfl.fl.chunked_cohorts)
        self.stream = stream or CohortStream()
        start = init_params if init_params is not None else trainable_parameters(model)
        self._fresh_state(flat_model(self.trainer, start, self.device))

    def _check_plan(self, plan: Any, data: FederatedDataset) -> None:
        """ValueError unless ``plan`` is this algorithm's kind of plan for ``data``'s clients."""
        raise NotImplementedError

    def _fresh_state(self, global_model: torch.Tensor) -> None:
        """The state before round 1: the global model ``[d]``, no server momentum, generators
        seeded from ``self.seed``."""
        self.round = 0
        self.global_model = global_model
        self.velocity = torch.zeros_like(global_model)
        self.rng, self.generator = seeded_generators(self.seed, self.device)

    # ------------------------------------------------------------------ the seam
    @classmethod
    def from_config(cls, config: ExperimentConfig, data: FederatedDataset) -> ServerFedAvg:
        """The algorithm with everything the configuration says."""
        from privfl.algorithms.builders import build_model, trainer_options

        f = config.federated
        return cls(
            build_model(config, data), local_spec(config), data,
            cls.privacy_plan(config, data), server_lr=f.server_lr,
            server_momentum=f.server_momentum, seed=config.seed, device=config.run.device,
            eval_batch_size=config.run.eval_batch_size,
            trainer_options=trainer_options(config), stream=CohortStream.from_config(config))

    def _model_text(self) -> str:
        """The setup row ``model``: the architecture and its parameter count."""
        return (f"{type(self.predictor.model).__name__} ({self.trainer.num_params:,} "
                "parameters)")

    def _local_text(self) -> str:
        """The start of the setup row ``local training``: K, B, sampling, optimizer, lr."""
        spec = self.spec
        return (f"K = {spec.local_steps}, B = {spec.batch_size} ({spec.sampling}), "
                f"{spec.optimizer} lr {spec.lr:g}")

    # ------------------------------------------------------------------ one round
    def round_info(self, cohort: np.ndarray) -> dict[str, Any]:
        return {"cohort_size": int(cohort.size)}

    def _chunk_updates(self, cohort: np.ndarray,
                       stats: StatsRows) -> Iterator[tuple[int, int, torch.Tensor]]:
        """The cohort's K local non-private steps from the global model, chunk by chunk on the
        active backend: ``(lo, hi, u)`` with ``u = w_k - w`` ``[hi - lo, d]`` for clients
        ``cohort[lo:hi]`` (consume it before the next chunk); each chunk's loss rows go to
        ``stats``."""
        for lo, hi, models, _, part in self.stream.run(
                self.trainer, self.global_model, self.tensors.train, cohort, None,
                self.generator, keep_states=False):
            stats.add(part)
            yield lo, hi, models.sub_(self.global_model)

    def _global_metrics(self, stats: Any) -> dict[str, Any]:
        """``global_accuracy`` (the global model, mean over the clients' test sets) and
        ``train_loss`` (the cohort's mean local loss; NaN for an empty cohort)."""
        accs = self.tensors.accuracies(lambda x: self.predictor(self.global_model, x))
        return {
            "global_accuracy": self.tensors.mean_accuracy(accs),
            "train_loss": float(stats.loss.mean()) if stats is not None else math.nan,
        }

    # ------------------------------------------------------------------ checkpoints
    def _server_state(self) -> dict[str, Any]:
        """A subclass's own checkpoint entries (besides round, model, velocity, streams)."""
        return {}

    def _load_server_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_server_state`'s entries from ``state``."""
        del state

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly (in secure mode: to continue, not replay)."""
        return {
            "round": self.round,
            "global_model": self.global_model.detach().cpu().clone(),
            "velocity": self.velocity.detach().cpu().clone(),
            **self._server_state(),
            **checkpoint_streams(self.data, self.rng, self.generator),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (same data partition and model required)."""
        check_partition(state, self.data)
        model = checkpoint_tensor(state, "global_model", self.global_model)
        velocity = checkpoint_tensor(state, "velocity", self.velocity)
        self.round = check_int("round", state["round"], 0)
        self.global_model, self.velocity = model, velocity
        self._load_server_state(state)
        restore_streams(state, self.rng, self.generator)

    def global_params(self) -> dict[str, torch.Tensor]:
        """The global model as ``name -> tensor`` (copies)."""
        return {n: v.clone() for n, v in self.predictor.params(self.global_model).items()}
