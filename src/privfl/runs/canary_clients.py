"""Canary clients for client-level guarantees (a :class:`~privfl.runs.canary_source.CanarySource`;
Andrew et al. 2024, "One-shot Empirical Privacy Estimation for Federated Learning").

Generic over the algorithms with server-side client-level DP through the algorithm seam
(:meth:`~privfl.algorithms.base.RoundAlgorithm.canary_cohort` and
:meth:`~privfl.algorithms.base.RoundAlgorithm.add_canaries`): dp-fedavg (Poisson client
sampling), dp-ftrl and bandmf-fedavg (cyclic groups, optionally Poisson within the group).

Canary i has a fixed random unit direction ``u_i`` of the model space (i.i.d. Gaussian,
normalised; the auditor's generator). If inserted, it is a client of the population: in each
round the algorithm's schedule says whether it may take part (public) and its sampling whether
it does (secret), and it then sends ``S_t u_i``, the round's clip norm times its direction, so
clipping leaves it unchanged and its sensitivity is exactly one client's. The server's
clipping, noise, aggregation and model step are the algorithm's own code.

Score of canary i, from the released global models only (these guarantees release every
round's model): ``sum_t cos(u_i, w_{t+1} - w_t)`` over the rounds t in which canary i *may*
take part (public: every round under Poisson sampling; its group's rounds under cyclic groups).
The sum never reads whether it did take part (secret sampling) nor its bit. A null canary's
cosine is about N(0, 1/d); an inserted one gains about ``S_t / (E[m] |Delta_t| / eta)`` in a
round it joins, so power needs a model dimension d large against the canaries that join a
round together and the real clients' drift (docs/audit.md).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from privfl.runs.canary_source import CanaryScores

__all__ = ["ClientCanaries", "cosine_scores", "unit_directions"]


def cosine_scores(directions: np.ndarray, step: np.ndarray) -> np.ndarray:
    """``cos(u_j, step)`` for unit rows ``u_j`` of ``directions`` (zeros for a zero step)."""
    norm = float(np.linalg.norm(step))
    return directions @ step / norm if norm > 0.0 else np.zeros(directions.shape[0])


def unit_directions(rng: np.random.Generator, count: int, dimension: int) -> np.ndarray:
    """``count`` i.i.d. uniformly random unit vectors of R^dimension (normalised Gaussians),
    float64 ``[count, dimension]``."""
    directions = rng.standard_normal((count, dimension))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    return directions


class ClientCanaries:
    """Canary clients (module docstring) for any algorithm implementing the seam's
    ``canary_cohort`` and ``add_canaries``."""

    unit: ClassVar[str] = "client"

    def run(self, algorithm: Any, inserted: np.ndarray, rng: np.random.Generator,
            rounds: int) -> CanaryScores:
        m = int(inserted.size)
        directions = unit_directions(rng, m, int(algorithm.global_model.numel()))
        scores = np.zeros(m)
        for r in range(1, rounds + 1):
            cohort = algorithm.select_cohort()
            may, joins = algorithm.canary_cohort(m, rng.random(m))
            work = algorithm.local_work(cohort)
            sent = joins & inserted
            algorithm.add_canaries(work, torch.as_tensor(
                directions[sent], dtype=algorithm.dtype, device=algorithm.device))
            before = algorithm.global_model.detach().clone()
            algorithm.aggregate(cohort, work)
            algorithm.round = r
            step = (algorithm.global_model - before).double().cpu().numpy()
            scores[may] += cosine_scores(directions[may], step)
        return CanaryScores(scores, inserted.astype(bool), rounds, self.describe(algorithm))

    @staticmethod
    def describe(algorithm: Any) -> dict[str, str]:
        """The :data:`~privfl.runs.canary_source.DESCRIPTION_KEYS` texts for ``algorithm``."""
        card = algorithm.plan.card(max(algorithm.round, 1))
        return {
            "canary": ("client sending the round's clip norm S_t times a fixed random unit "
                       "direction (Andrew et al. 2024); sampled by the algorithm's own client "
                       "schedule and sampling"),
            "score": ("sum over the rounds the canary may join (public schedule) of cos(canary "
                      "direction, released global model update w_{t+1} - w_t)"),
            "neighbouring": str(card.get("neighbouring", "add/remove one client")),
            "sampling": str(card.get("sampling", card.get("clients", ""))),
            "released": str(card.get("release", "every round's global model")),
        }
