"""Federated training with correlated noise and no sampling: the shared round of ``dp-ftrl``
(:mod:`.dp_ftrl`) and ``bandmf-fedavg`` (:mod:`.bandmf_fedavg`).

One round t (0-based)::

    cohort  <- plan.schedule.cohort(t): group t mod b (BandMF with q < 1: each member with
               probability q, uniforms from the seeded generator or os.urandom)
    for k in cohort (together, on the vectorised engine):
        u_k <- K local non-private steps from w_t, minus w_t
    x_t     <- sum_k clip(u_k, S)                       (flat clipping, float64)
    w_t+1   <- the subclass's server step on x_t plus its correlated noise
               (DP-FTRL: the tree's noisy prefix sum; BandMF: row t of C^-1 Z)

The noise is drawn with :func:`privfl.mechanisms.gaussian_noise` from the run's torch generator,
or from os.urandom in secure mode; the cohorts and the noise come from the plan
(:class:`~.correlated_plan.CorrelatedPrivacy`), whose event the accountant answers. Metrics:
the global accuracy (a released model on test data) and monitoring values computed without noise.
The constructor's checks, the streamed local work, the metrics and the checkpoints are
DP-FedAvg's too (:class:`~.server_fedavg.ServerFedAvg`).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from privfl.algorithms.algorithm_support import checkpoint_tensor
from privfl.algorithms.cohort_stream import StatsRows
from privfl.algorithms.correlated_plan import CorrelatedPrivacy
from privfl.algorithms.outputs import RELEASED_ACCURACY, UNNOISED_TRAINING
from privfl.algorithms.server_fedavg import ServerFedAvg
from privfl.config.schema import ExperimentConfig
from privfl.data.datasets import FederatedDataset
from privfl.fl.aggregation import UpdateClipping
from privfl.fl.spec import LocalTrainingSpec
from privfl.mechanisms.noise import gaussian_noise
from privfl.mechanisms.secure import SECURE_RANDOM

__all__ = ["CorrelatedFedAvg"]


class CorrelatedFedAvg(ServerFedAvg):
    """The round shared by DP-FTRL and BandMF-FedAvg; subclasses set the plan's mechanism and
    implement :meth:`_new_noise`, :meth:`_server_step` and the noise state's checkpoint."""

    mechanism: ClassVar[str] = ""
    local_only: ClassVar[str | None] = (
        "the server's correlated-noise state (the tree's nodes, BandMF's last b - 1 noise "
        "vectors) is not carried by the distributed backends or privfl.flower's apps yet")
    metric_labels: ClassVar[dict[str, str]] = {
        "global_accuracy": "global model (mean over clients)"}
    METRIC_OUTPUTS: ClassVar[dict[str, tuple[bool, str]]] = {
        "global_accuracy": RELEASED_ACCURACY,
        "cohort_size": (True, "the size of the round's group: public (the schedule)"),
        "train_loss": UNNOISED_TRAINING,
        "clipped_fraction": UNNOISED_TRAINING,
        "update_norm": (False, "norm of the unnoised mean of the clients' updates"),
        "noise_std": (True, "z S: public settings"),
    }

    def __init__(self, model: nn.Module, spec: LocalTrainingSpec, data: FederatedDataset,
                 plan: CorrelatedPrivacy, **options: Any) -> None:
        """``options``: those of :class:`~.server_fedavg.ServerFedAvg` (server_lr,
        server_momentum, seed, device, eval_batch_size, trainer_options, init_params,
        stream)."""
        super().__init__(model, spec, data, plan, **options)
        self.clipping = UpdateClipping("flat")
        self.initial_model = self.global_model.clone()
        self.noise = self._new_noise(self.global_model.numel()) if plan.private else None

    def _check_plan(self, plan: Any, data: FederatedDataset) -> None:
        if not isinstance(plan, CorrelatedPrivacy) or plan.mechanism != self.mechanism:
            raise ValueError(f"plan = {plan!r} is not allowed: must be a CorrelatedPrivacy "
                             f"with mechanism {self.mechanism!r}")
        if plan.schedule.num_clients != data.num_clients:
            raise ValueError(f"plan.schedule.num_clients = {plan.schedule.num_clients}: data "
                             f"has {data.num_clients} clients")

    # ------------------------------------------------------------------ subclass hooks
    def _new_noise(self, size: int) -> Any:
        raise NotImplementedError

    def _server_step(self, total: np.ndarray) -> None:
        """Fold the round's clipped sum ``x_t`` (float64, [d]) into the model."""
        raise NotImplementedError

    def _draw(self, shape: tuple[int, ...]) -> np.ndarray:
        """Fresh i.i.d. N(0, (z S)^2) for one noise vector: the run's generator, or os.urandom
        in secure mode."""
        return gaussian_noise(shape, self.plan.noise_std, generator=self.generator,
                              secure=self.plan.secure, dtype=torch.float64,
                              device="cpu").numpy()

    def _noise_state(self) -> dict[str, Any]:
        return {}

    def _load_noise_state(self, state: dict[str, Any]) -> None:
        del state

    # ------------------------------------------------------------------ the seam
    @classmethod
    def privacy_plan(cls, config: ExperimentConfig, data: FederatedDataset) -> CorrelatedPrivacy:
        return CorrelatedPrivacy.from_config(config, data.num_clients)

    def setup(self) -> dict[str, str]:
        plan = self.plan
        return {
            "model": self._model_text(),
            "local training": f"{self._local_text()}, non-private",
            "clients": plan.schedule.label(),
            "server": f"eta = {self.server_lr:g}, momentum {self.server_momentum:g}",
            "privacy": (f"client-level, z = {plan.noise_multiplier:g}, S = {plan.clip_norm:g}"
                        if plan.private else "none (non-private baseline)"),
        }

    def output_classes(self) -> dict[str, tuple[bool, str]]:
        out = dict(self.METRIC_OUTPUTS)
        if self.plan.schedule.sampled:
            out["cohort_size"] = (False, "the realised Poisson cohort size within the group: "
                                  "the amplified guarantee's sampling is secret")
        return out

    # ------------------------------------------------------------------ one round
    def select_cohort(self) -> np.ndarray:
        """Round ``self.round``'s cohort from the plan's schedule."""
        schedule = self.plan.schedule
        if not schedule.sampled:
            return schedule.cohort(self.round)
        source = SECURE_RANDOM if self.plan.secure else self.rng
        return schedule.cohort(self.round, source.random(schedule.group(self.round).size))

    def local_work(self, cohort: np.ndarray) -> dict[str, Any]:
        """The cohort's local training, clipped to S and summed (float64) chunk by chunk."""
        d = self.global_model.numel()
        total = torch.zeros(d, dtype=torch.float64, device=self.device)
        stats, norms, clipped = StatsRows(), [], []
        for _, _, updates in self._chunk_updates(cohort, stats):
            total += self._clipped_sum(updates, norms, clipped)
        return {"total": total, "stats": stats.merged() if cohort.size else None,
                "norms": torch.cat(norms) if norms else None,
                "clipped": torch.cat(clipped) if clipped else None}

    def canary_cohort(self, canaries: int, uniforms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Canary clients (:meth:`RoundAlgorithm.canary_cohort`): canary i belongs to group
        ``i mod b`` (public, as a client's group is), may join that group's rounds only, and
        joins them all (q = 1) or each with probability q (uniform below q), so that it obeys
        the participation bound the accountant assumes."""
        if not self.plan.private:
            raise ValueError("privacy.noise_multiplier = 0: a non-private run has no canary "
                             "clients to audit (no bound)")
        uniforms = np.asarray(uniforms, dtype=float)
        if uniforms.shape != (canaries,):
            raise ValueError(f"uniforms has shape {uniforms.shape}: must be ({canaries},)")
        schedule = self.plan.schedule
        may = np.arange(canaries) % schedule.groups == self.round % schedule.groups
        return may, may & (uniforms < schedule.sampling_rate)

    def add_canaries(self, updates: dict[str, Any], directions: torch.Tensor,
                     factor: float) -> None:
        """Canary uploads ``factor S u_i``, clipped and summed as the clients' updates are
        (:meth:`_clipped_sum`; their norms stay out of the monitoring metrics) and added to the
        round's clipped sum ``x_t`` (float64)."""
        if directions.shape[0]:
            rows = directions.to(self.dtype) * (factor * self.plan.clip_norm)
            updates["total"] += self._clipped_sum(rows, [], [])

    def _clipped_sum(self, updates: torch.Tensor, norms: list[torch.Tensor],
                     clipped: list[torch.Tensor]) -> torch.Tensor:
        """``sum_k clip(u_k, S)`` (float64, ``[d]``) of the rows ``updates`` ``[c, d]`` (no
        clipping without privacy); their norms and clipped bits are appended to ``norms`` and
        ``clipped`` (monitoring)."""
        if self.plan.private:
            result = self.clipping.clip(updates, self.plan.clip_norm)
            updates = result.updates
            norms.append(result.norms)
            clipped.append(~result.unclipped)
        return updates.double().sum(0)

    def aggregate(self, cohort: np.ndarray, updates: dict[str, Any]) -> None:
        total = updates["total"].cpu().numpy()
        if not self.plan.private:  # the plain mean over the public group size
            step = torch.as_tensor(total / max(cohort.size, 1), dtype=self.dtype)
            self.velocity.mul_(self.server_momentum).add_(step.to(self.device))
            self.global_model.add_(self.velocity, alpha=self.server_lr)
            return
        self._server_step(total)

    def evaluate(self, cohort: np.ndarray, updates: dict[str, Any]) -> dict[str, Any]:
        metrics = self._global_metrics(updates["stats"])
        if self.plan.private:
            norms, clipped = updates["norms"], updates["clipped"]
            metrics.update(
                noise_std=self.plan.noise_std,
                clipped_fraction=float(clipped.double().mean()) if clipped is not None
                else math.nan,
                update_norm=float(norms.double().mean()) if norms is not None else math.nan)
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def _server_state(self) -> dict[str, Any]:
        return {"initial_model": self.initial_model.detach().cpu().clone(),
                "noise": self._noise_state() if self.noise is not None else {}}

    def _load_server_state(self, state: dict[str, Any]) -> None:
        self.initial_model = checkpoint_tensor(state, "initial_model", self.initial_model)
        if self.noise is not None:
            self._load_noise_state(state["noise"])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(clients={self.num_clients}, round={self.round}, "
                f"private={self.plan.private})")
