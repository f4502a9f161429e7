"""BandMF-FedAvg: federated averaging with banded matrix-factorization noise (Choquette-Choo
et al. 2023, "(Amplified) Banded Matrix Factorization: A unified approach to private
training"; the mechanism of Gboard's production models, Xu et al. 2023).

Round t's cohort is the schedule's group ``t mod b`` — every member, or (``sampling_rate`` q <
1) each member independently with probability q, secretly (cyclic Poisson sampling,
:class:`~privfl.mechanisms.schedule.CyclicGroups`). Each client's update is clipped to S, the
server sums them into ``x_t`` and adds row t of ``C^{-1} Z`` (Z i.i.d. N(0, (z S)^2)), streamed
by :class:`~privfl.mechanisms.banded_noise.BandedNoise` from the last ``band - 1`` noise vectors
(C: a banded Toeplitz encoder optimised for prefix sums with the server momentum,
:func:`~privfl.mechanisms.toeplitz.optimise_toeplitz`). Then::

    Delta = (x_t + w_t) / E[m],   v <- beta v + Delta,   w <- w + eta v

Every model is a post-processing of ``C x + Z``: privacy from the participation bound
(sensitivity ``m sqrt(k)`` for band <= b) or, with q < 1, from BandMF's amplification
(:mod:`.correlated_plan`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from privfl.algorithms.correlated_fedavg import CorrelatedFedAvg
from privfl.config.algorithms.correlated import BandMfFedAvgConfig
from privfl.config.schema import FederatedConfig
from privfl.mechanisms.banded_noise import BandedNoise

__all__ = ["BandMfFedAvg"]


class BandMfFedAvg(CorrelatedFedAvg):
    """BandMF-FedAvg (banded correlated noise, optional cyclic Poisson sampling)."""

    name: ClassVar[str] = "bandmf-fedavg"
    title: ClassVar[str] = ("BandMF-FedAvg, user-level DP with banded matrix-factorization noise "
                            "(Choquette-Choo et al. 2023)")
    config_class: ClassVar[type[FederatedConfig]] = BandMfFedAvgConfig
    mechanism: ClassVar[str] = "banded"

    def _new_noise(self, size: int) -> BandedNoise:
        return BandedNoise(self.plan.coefficients(), size, self.plan.noise_std)

    def _server_step(self, total: np.ndarray) -> None:
        noise = self.noise.step(self._draw(self.noise.shape))  # row t of C^-1 Z
        step = torch.as_tensor((total + noise) / self.plan.expected_cohort, dtype=self.dtype,
                               device=self.device)
        self.velocity.mul_(self.server_momentum).add_(step)
        self.global_model.add_(self.velocity, alpha=self.server_lr)

    def _noise_state(self) -> dict[str, Any]:
        state = self.noise.state_dict()
        return {"steps": state["steps"], "history": torch.from_numpy(state["history"])}

    def _load_noise_state(self, state: dict[str, Any]) -> None:
        self.noise.load_state_dict({"steps": state["steps"],
                                    "history": state["history"].numpy()})
