"""What an algorithm needs to run a simulated attack: update scaling and success measures.

:class:`AttackMonitor` is built by an algorithm from its federated dataset (``None`` when the
data carry no attack, :func:`attack_monitor`), so a clean run's code path is unchanged. It holds
the attack test set on the training device and gives, per evaluated round:

* ``attack_success`` — the fraction of the attack test set classified as the target label:
  the backdoor success rate (triggered test images of other classes) or, for a label flip,
  the target-class rate of the source-class test images (Xie et al. 2023 Section 6);
* ``attack_loss`` — the attack's cost C of Xie et al. 2023 (Examples 4 and 5): the mean
  cross-entropy of the model's outputs against the target label on the attack test set
  (unbounded; certification bounds it, :mod:`privfl.robustness.inefficacy`).

Both are computed without noise from test data: monitoring values, not covered by the privacy
guarantee. :func:`attack_outcomes` computes them for ``M`` stacked models at once (clients or
Monte Carlo replicas). An algorithm whose loss transforms its inputs (projected noisy SGD's
``input_bound``) passes that transform as ``inputs``, so the attack test set reaches the model
as its test set does.

Personalised models (PriFedSync, Zheng et al. 2021): :class:`PersonalisedAttack` keeps the
latest ``attack_success`` / ``attack_loss`` of every *honest* client's personalised model (a
client holding no poisoned record), measured right after its local training, and reports their
mean over the honest clients measured so far as ``attack_success_personalised`` /
``attack_loss_personalised``.

Update scaling (model replacement, Bagdasaryan et al. 2020): :meth:`AttackMonitor.scale_updates`
multiplies the attackers' rows of a cohort's updates by gamma — what the attacker sends,
``w_global + gamma (w_local - w_global)`` — before any server-side clipping, which therefore
still bounds every client's contribution by the clip norm S: the DP guarantee is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.nn import functional

from privfl._validation import check_int, check_positive
from privfl.attacks.poisoning import AttackDescription, attack_of
from privfl.data.datasets import FederatedDataset

__all__ = ["ATTACK_METRICS", "AttackMonitor", "PersonalisedAttack", "attack_monitor",
           "attack_outcomes", "scale_attacker_updates"]

#: The per-round keys of :meth:`AttackMonitor.metrics`.
ATTACK_METRICS = ("attack_success", "attack_loss")


def attack_outcomes(outputs: torch.Tensor, target: int, loss_cap: float | None = None
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(success [M], loss [M])`` of ``M`` models' outputs ``[M, N, classes]`` on an attack
    test set: the fraction of argmax predictions equal to ``target`` and the mean cross-entropy
    against ``target`` (float64). ``loss_cap``: each example's cross-entropy clamped to
    ``[0, loss_cap]`` before averaging, a cost bounded by C_bar = ``loss_cap`` as Xie et al.
    2023's Theorem 6 requires (None: unbounded, as their plots)."""
    if outputs.dim() != 3 or outputs.shape[1] == 0:
        raise ValueError(f"outputs has shape {tuple(outputs.shape)}: must be [M, N, classes] "
                         "with N >= 1")
    classes = outputs.shape[2]
    if loss_cap is not None:
        loss_cap = check_positive("loss_cap", loss_cap)
    if not 0 <= int(target) < classes:
        raise ValueError(f"target = {target} is out of range: must be in [0, {classes - 1}]")
    logits = outputs.to(torch.float64)
    success = (logits.argmax(-1) == int(target)).to(torch.float64).mean(1)
    labels = torch.full(logits.shape[:2], int(target), dtype=torch.int64, device=logits.device)
    losses = functional.cross_entropy(logits.reshape(-1, classes), labels.reshape(-1),
                                      reduction="none").reshape(labels.shape)
    if loss_cap is not None:
        losses = losses.clamp(max=loss_cap)
    return success, losses.mean(1)


def scale_attacker_updates(updates: torch.Tensor, cohort: np.ndarray,
                           attack: AttackDescription | None) -> torch.Tensor:
    """``updates [c, d]`` of ``cohort`` (client positions) with the attackers' rows multiplied
    by ``attack.gamma`` (in place; unchanged without an attack or with gamma = 1)."""
    if attack is None or attack.gamma == 1.0 or not len(cohort):
        return updates
    if updates.dim() != 2 or updates.shape[0] != len(cohort):
        raise ValueError(f"updates has shape {tuple(updates.shape)}: must be [c={len(cohort)}, "
                         "d], one row per cohort member")
    mask = attack.is_attacker(cohort)
    if mask.any():
        rows = torch.as_tensor(np.flatnonzero(mask), device=updates.device)
        updates[rows] *= attack.gamma
    return updates


class AttackMonitor:
    """An attack's test tensors on the device, its success measures and its update scaling.

    Parameters
    ----------
    attack
        The data's :class:`~privfl.attacks.poisoning.AttackDescription`.
    dtype, device
        Those of the models evaluated.
    inputs
        Optional map from the attack test images (numpy) to the model's input tensor, for an
        algorithm whose loss transforms its inputs (default: the images as stored).
    """

    def __init__(self, attack: AttackDescription, dtype: torch.dtype,
                 device: torch.device | str,
                 inputs: Callable[[np.ndarray], torch.Tensor] | None = None) -> None:
        if not isinstance(attack, AttackDescription):
            raise ValueError(f"attack = {type(attack).__name__} is not allowed: must be an "
                             "AttackDescription")
        if inputs is not None and not callable(inputs):
            raise ValueError(f"inputs = {inputs!r} is not allowed: must be callable or None")
        self.attack = attack
        images = np.ascontiguousarray(attack.test.x)
        x = torch.as_tensor(images) if inputs is None else inputs(images)
        self.x = x.to(device=device, dtype=dtype)

    @property
    def metric_labels(self) -> dict[str, str]:
        """``attack_success`` with what it measures (added to an algorithm's metric labels)."""
        return {"attack_success": self.attack.success_label}

    def outcomes(self, trainer: Any, models: torch.Tensor, loss_cap: float | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(success [M], loss [M])`` of flat models ``[M, d]`` (or ``[d]``) of ``trainer``'s
        architecture (a :class:`~privfl.fl.CohortTrainer`); ``loss_cap`` as in
        :func:`attack_outcomes`."""
        rows = models.unsqueeze(0) if models.dim() == 1 else models
        return attack_outcomes(trainer.forward(rows, self.x), self.attack.target_label,
                               loss_cap)

    def metrics(self, trainer: Any, model: torch.Tensor) -> dict[str, float]:
        """``attack_success`` and ``attack_loss`` of one flat model ``[d]`` (a round's global
        model)."""
        success, loss = self.outcomes(trainer, model)
        return {"attack_success": float(success[0]), "attack_loss": float(loss[0])}

    @staticmethod
    def unmeasured() -> dict[str, float]:
        """The keys of :meth:`metrics` as NaN (a round that evaluates no model)."""
        return dict.fromkeys(ATTACK_METRICS, math.nan)

    def honest(self, clients: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``clients`` (positions) hold no poisoned record (at the
        instance level every client but the one holding the poisoned records)."""
        poisoned = [j for j, rows in self.attack.records.items() if len(rows)]
        return ~np.isin(np.asarray(clients, dtype=np.int64), np.asarray(poisoned, np.int64))

    def scale_updates(self, updates: torch.Tensor, cohort: np.ndarray) -> torch.Tensor:
        """:func:`scale_attacker_updates` with this attack."""
        return scale_attacker_updates(updates, cohort, self.attack)

    def __repr__(self) -> str:
        return f"AttackMonitor({self.attack.text()})"


def attack_monitor(data: FederatedDataset, dtype: torch.dtype, device: torch.device | str, *,
                   scaling: bool = True,
                   inputs: Callable[[np.ndarray], torch.Tensor] | None = None
                   ) -> AttackMonitor | None:
    """The monitor of the attack ``data`` carries (None without one). ``scaling=False``: the
    algorithm has no server-side clipping, so an attack with gamma != 1 is refused.
    ``inputs``: as :class:`AttackMonitor`'s."""
    attack = attack_of(data)
    if attack is None:
        return None
    if attack.test.normalized != data.test.normalized:
        raise ValueError("data.test was (un)normalised after poisoning: the attack test set no "
                         "longer matches it; poison the data in their final form")
    if not scaling and attack.gamma != 1.0:
        raise ValueError(f"attack gamma = {attack.gamma:g} is not allowed for this algorithm: "
                         "update scaling needs a server that clips every client update "
                         "(dp-fedavg)")
    return AttackMonitor(attack, dtype, device, inputs)


class PersonalisedAttack:
    """The attack's success on the honest clients' personalised models (Zheng et al. 2021).

    Client ``i``'s value is that of its latest personalised model, measured right after its
    local training (stale for clients not in the current cohort, as PriFedSync's personalised
    accuracy); clients holding a poisoned record are never measured. :meth:`metrics` gives the
    mean over the honest clients measured so far (NaN before the first):
    ``attack_success_personalised`` and ``attack_loss_personalised``.

    Parameters
    ----------
    monitor
        The run's :class:`AttackMonitor`.
    num_clients
        m, the clients of the federated dataset.
    """

    KEYS = ("attack_success_personalised", "attack_loss_personalised")

    def __init__(self, monitor: AttackMonitor, num_clients: int) -> None:
        if not isinstance(monitor, AttackMonitor):
            raise ValueError(f"monitor = {type(monitor).__name__} is not allowed: must be an "
                             "AttackMonitor")
        self.monitor = monitor
        self.num_clients = check_int("num_clients", num_clients, 1)
        self.values = np.full((self.num_clients, 2), math.nan)  # [m, (success, loss)]

    @property
    def metric_labels(self) -> dict[str, str]:
        """``attack_success`` (the global model) and ``attack_success_personalised``."""
        label = self.monitor.attack.success_label
        return {"attack_success": f"{label} (global model)",
                "attack_success_personalised": f"{label} (personalised models, mean over "
                                               "honest clients)"}

    def record(self, trainer: Any, models: torch.Tensor, clients: np.ndarray) -> None:
        """Measure the personalised models ``[c, d]`` of ``clients`` (positions); the rows of
        clients holding poisoned records are skipped."""
        clients = np.asarray(clients, dtype=np.int64)
        if models.dim() != 2 or models.shape[0] != clients.size:
            raise ValueError(f"models has shape {tuple(models.shape)}: must be "
                             f"[c={clients.size}, d], one row per client")
        honest = self.monitor.honest(clients)
        if not honest.any():
            return
        rows = torch.as_tensor(np.flatnonzero(honest), device=models.device)
        success, loss = self.monitor.outcomes(trainer, models[rows])
        self.values[clients[honest]] = torch.stack([success, loss], 1).cpu().numpy()

    def metrics(self) -> dict[str, float]:
        """Mean success and loss over the honest clients measured so far (NaN if none)."""
        measured = self.values[np.isfinite(self.values[:, 0])]
        if not measured.shape[0]:
            return dict.fromkeys(self.KEYS, math.nan)
        return dict(zip(self.KEYS, (float(v) for v in measured.mean(0)), strict=True))

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The per-client values (a checkpoint entry)."""
        return {"attack_personalised": torch.from_numpy(self.values.copy())}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (ValueError if missing or of another shape)."""
        saved = state.get("attack_personalised")
        if saved is None or tuple(saved.shape) != self.values.shape:
            raise ValueError(f"checkpoint attack_personalised is "
                             f"{'missing' if saved is None else tuple(saved.shape)}: this run "
                             f"has an attack on {self.num_clients} clients; resume with the "
                             "configuration the checkpoint was written with")
        self.values = saved.numpy().astype(np.float64).copy()
