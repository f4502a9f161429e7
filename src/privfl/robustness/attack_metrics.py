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
Monte Carlo replicas).

Update scaling (model replacement, Bagdasaryan et al. 2020): :meth:`AttackMonitor.scale_updates`
multiplies the attackers' rows of a cohort's updates by gamma — what the attacker sends,
``w_global + gamma (w_local - w_global)`` — before any server-side clipping, which therefore
still bounds every client's contribution by the clip norm S: the DP guarantee is unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional

from privfl._validation import check_positive
from privfl.data.datasets import FederatedDataset
from privfl.robustness.attacks import AttackDescription, attack_of

__all__ = ["AttackMonitor", "attack_monitor", "attack_outcomes", "scale_attacker_updates"]


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
        The data's :class:`~privfl.robustness.attacks.AttackDescription`.
    dtype, device
        Those of the models evaluated.
    """

    def __init__(self, attack: AttackDescription, dtype: torch.dtype,
                 device: torch.device | str) -> None:
        if not isinstance(attack, AttackDescription):
            raise ValueError(f"attack = {type(attack).__name__} is not allowed: must be an "
                             "AttackDescription")
        self.attack = attack
        self.x = torch.as_tensor(np.ascontiguousarray(attack.test.x)).to(device=device,
                                                                         dtype=dtype)

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

    def scale_updates(self, updates: torch.Tensor, cohort: np.ndarray) -> torch.Tensor:
        """:func:`scale_attacker_updates` with this attack."""
        return scale_attacker_updates(updates, cohort, self.attack)

    def __repr__(self) -> str:
        return f"AttackMonitor({self.attack.text()})"


def attack_monitor(data: FederatedDataset, dtype: torch.dtype, device: torch.device | str, *,
                   scaling: bool = True) -> AttackMonitor | None:
    """The monitor of the attack ``data`` carries (None without one). ``scaling=False``: the
    algorithm has no server-side clipping, so an attack with gamma != 1 is refused."""
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
    return AttackMonitor(attack, dtype, device)
