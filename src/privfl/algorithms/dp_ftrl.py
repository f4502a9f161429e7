"""DP-FTRL with tree aggregation and server momentum (Kairouz et al. 2021, "Practical and
Private (Deep) Learning without Sampling or Shuffling", Algorithm 1, DP-FTRLM).

User-level DP without sampling: round t's cohort is the schedule's group ``t mod b`` (no secret
sampling; :class:`~privfl.mechanisms.schedule.CyclicGroups`), each client's model update is
clipped to S and the server sums them into ``x_t``. A :class:`~privfl.mechanisms.tree.
TreeAggregator` (noise std z S on every tree node, vanilla or Honaker's online estimator,
optional restarts) turns ``x_0..x_t`` into the noisy prefix sum ``S_t``, and the FTRL step
with momentum beta is::

    m_t = beta m_t-1 + S_t / E[m],      w_t+1 = w_0 + eta m_t

(the updates point downhill, so ``+``; ``E[m] = N / b`` the public group size). Every model is
a post-processing of the tree's noisy nodes ``C x + Z``: one Gaussian mechanism with the
tree's sensitivity under the participation bound (``sqrt(ceil(log2(T + 1)))`` for one
participation), replace-with-zero, client level (:mod:`.correlated_plan`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from privfl.algorithms.correlated_fedavg import CorrelatedFedAvg
from privfl.config.algorithms.correlated import DpFtrlConfig
from privfl.config.schema import FederatedConfig
from privfl.mechanisms.tree import TreeAggregator

__all__ = ["DpFtrl"]


class DpFtrl(CorrelatedFedAvg):
    """DP-FTRL (tree aggregation, server momentum) on the algorithm seam."""

    name: ClassVar[str] = "dp-ftrl"
    title: ClassVar[str] = ("DP-FTRL, user-level DP with tree aggregation and server momentum, "
                            "no sampling (Kairouz et al. 2021)")
    config_class: ClassVar[type[FederatedConfig]] = DpFtrlConfig
    mechanism: ClassVar[str] = "tree"

    def _new_noise(self, size: int) -> TreeAggregator:
        return TreeAggregator(size, self.plan.noise_std, estimator=self.plan.estimator,
                              restart_every=self.plan.restart_every,
                              noise=lambda _level, _index, shape: self._draw(shape))

    def _server_step(self, total: np.ndarray) -> None:
        prefix = self.noise.step(total)  # the noisy sum of x_0 .. x_t
        step = torch.as_tensor(prefix / self.plan.expected_cohort, dtype=self.dtype,
                               device=self.device)
        self.velocity.mul_(self.server_momentum).add_(step)
        self.global_model.copy_(self.initial_model).add_(self.velocity, alpha=self.server_lr)

    def _noise_state(self) -> dict[str, Any]:
        state = self.noise.state_dict()
        return {"steps": state["steps"], "within": state["within"],
                "carry": torch.from_numpy(state["carry"]),
                "stack": [(h, j, torch.from_numpy(t), torch.from_numpy(e))
                          for h, j, t, e in state["stack"]]}

    def _load_noise_state(self, state: dict[str, Any]) -> None:
        self.noise.load_state_dict({
            "steps": state["steps"], "within": state["within"],
            "carry": state["carry"].numpy(),
            "stack": [(h, j, t.numpy(), e.numpy()) for h, j, t, e in state["stack"]]})
