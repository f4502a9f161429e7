"""Canary clients for client-level guarantees (a :class:`~privfl.runs.canary_source.CanarySource`;
Andrew et al. 2024, "One-shot Empirical Privacy Estimation for Federated Learning").

Generic over the algorithms with server-side client-level DP through the algorithm seam
(:meth:`~privfl.algorithms.base.RoundAlgorithm.canary_cohort` and
:meth:`~privfl.algorithms.base.RoundAlgorithm.add_canaries`): dp-fedavg (Poisson client
sampling), dp-ftrl and bandmf-fedavg (cyclic groups, optionally Poisson within the group).

Canary i has a fixed random unit direction ``u_i`` of the model space (i.i.d. Gaussian,
normalised; the auditor's generator). If inserted, it is a client of the population: in each
round the algorithm's schedule says whether it may take part (public) and its sampling whether
it does (secret), and it then sends ``10 S_t u_i`` (:data:`CANARY_NORM` clip norms along its
direction), which the server's clipping must bring to ``S_t u_i``: its sensitivity is exactly one
client's when the clipping works, and a clipping bug shows (Andrew et al. send ``S_t u_i``,
which no clipping changes). The server's clipping, noise, aggregation and model step are the
algorithm's own code.

Score of canary i, from the released global models only (these guarantees release every
round's model): the sum, over the rounds t in which canary i *may* take part (public: every
round under Poisson sampling; its group's rounds under cyclic groups), of its coefficient
``b_i(t)`` in the least-squares fit of the released update ``Delta_t = w_{t+1} - w_t`` on all m
directions that may take part in round t, ``b(t) = (U U^T)^-1 U Delta_t`` (U: those
directions, ``[k, d]``). The sum never
reads whether the canary did take part (secret sampling) nor its bit. The fit removes the
cross-talk of the other canaries, which limits Andrew et al.'s cosine ``cos(u_i, Delta_t)``:
with k canaries in a round a null canary's cosine has standard deviation ``sqrt(1/d)`` against an
inserted one's ``1/sqrt(k)``, and when the same canaries join every round (cyclic groups, q = 1)
the rounds repeat that error instead of averaging it out. When the canaries that may join a
round outnumber half the model's dimension (the fit is ill-conditioned) the score is the
cosine. Power then
comes from the noise: an inserted canary's coefficient is ``eta S_t / E[m]`` per round it joins,
against the noise's ``eta z S_t / E[m]`` (docs/audit.md).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch

from privfl.runs.canary_source import CanaryScores

#: a canary's upload norm in clip norms: above 1, so that the server's clipping must act
#: (a clipping bug shows), and clipped to exactly S_t when it does
CANARY_NORM = 10.0

__all__ = ["CANARY_NORM", "ClientCanaries", "cosine_scores", "least_squares_decoder",
           "unit_directions"]


def cosine_scores(directions: np.ndarray, step: np.ndarray) -> np.ndarray:
    """``cos(u_j, step)`` for unit rows ``u_j`` of ``directions`` (zeros for a zero step)."""
    norm = float(np.linalg.norm(step))
    return directions @ step / norm if norm > 0.0 else np.zeros(directions.shape[0])


def least_squares_decoder(directions: np.ndarray) -> np.ndarray | None:
    """``(U U^T)^-1 U`` ``[m, d]`` for the unit rows U of ``directions``: its product with a
    vector gives that vector's least-squares coefficients on the rows. None when the fit is
    ill-conditioned (more than d/2 rows: use the cosine)."""
    m, d = directions.shape
    if 2 * m > d:
        return None
    return np.linalg.solve(directions @ directions.T, directions)


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
        decoders: dict[bytes, np.ndarray | None] = {}  # one per public eligibility pattern
        fitted = True
        scores = np.zeros(m)
        for r in range(1, rounds + 1):
            cohort = algorithm.select_cohort()
            may, joins = algorithm.canary_cohort(m, rng.random(m))
            work = algorithm.local_work(cohort)
            sent = joins & inserted
            algorithm.add_canaries(work, torch.as_tensor(
                directions[sent], dtype=algorithm.dtype, device=algorithm.device),
                CANARY_NORM)
            before = algorithm.global_model.detach().clone()
            algorithm.aggregate(cohort, work)
            algorithm.round = r
            step = (algorithm.global_model - before).double().cpu().numpy()
            key = np.packbits(may).tobytes()
            if key not in decoders:
                decoders[key] = least_squares_decoder(directions[may])
            decoder = decoders[key]
            fitted = fitted and decoder is not None
            scores[may] += (cosine_scores(directions[may], step) if decoder is None
                            else decoder @ step)
        return CanaryScores(scores, inserted.astype(bool), rounds,
                            self.describe(algorithm, fitted=fitted))

    @staticmethod
    def describe(algorithm: Any, *, fitted: bool = True) -> dict[str, str]:
        """The :data:`~privfl.runs.canary_source.DESCRIPTION_KEYS` texts for ``algorithm``."""
        card = algorithm.plan.card(max(algorithm.round, 1))
        return {
            "canary": (f"client sending {CANARY_NORM:g} S_t (S_t: the round's clip norm) "
                       "times a fixed random unit direction, clipped by the server (random "
                       "canary clients, Andrew et al. 2024); sampled by the algorithm's own "
                       "client schedule and sampling"),
            "score": "sum over the rounds the canary may join (public schedule) of " + (
                "its coefficient in the least-squares fit of the released global model update "
                "w_{t+1} - w_t on the directions of the canaries that may join the round"
                if fitted else
                "cos(canary direction, released global model update w_{t+1} - w_t) (Andrew et "
                "al. 2024; in some round more canaries may join than half the model's "
                "dimension)"),
            "neighbouring": str(card.get("neighbouring", "add/remove one client")),
            "sampling": str(card.get("sampling", card.get("clients", ""))),
            "released": str(card.get("release", "every round's global model")),
        }
