"""`privfl audit run`: train once with canary clients inside, compare an empirical lower bound on
epsilon with the run's proven bound (issue 47; first slice: client-level DP-FedAvg).

Threat model of the guarantee (client level, add/remove one client, Poisson client sampling at
rate q, every global model released): the auditor adds ``m`` canary clients, each present in the
population independently with probability 1/2 (the secret bits). A present canary is sampled in
each round like any client (Poisson, rate q) and sends ``S_t u_j``: a fixed random unit direction
``u_j`` of the model space times the round's clip norm, so clipping leaves it unchanged and it
has the sensitivity the accountant assumes (Andrew et al. 2024, random canary clients). The
server's aggregation, noise and the released global models are the algorithm's own code.

Score of canary j, from the released models only: the sum over rounds of the cosine between
``u_j`` and the released update ``Delta_t = w_{t+1} - w_t``. Power: a null canary's cosine is
about N(0, 1/d) and an inserted one gains ``S_t / (E[m] |Delta_t|)`` per round it joins, so the
audit separates well only when the model dimension d is large against the inserted canaries and
the real clients' drift (docs/audit.md: on digits' logistic regression, d = 650, it is weak).

From the scores and the bits:

* ``epsilon_lower``: the one-run lower bound of Steinke, Nasr and Jagielski 2023 at confidence
  1 - beta (guess "in" for the k/2 highest, "out" for the k/2 lowest scores, k over
  :data:`GUESS_FRACTIONS` of m; the confidence is split over the k by Bonferroni);
* ``epsilon_lower_clopper_pearson``: Jagielski et al. 2020's bound, threshold chosen on half the
  canaries (a second lower bound at the same confidence; the verdict reads only the first);
* ``epsilon_estimate``: Andrew et al. 2024's Gaussian fit (an estimate, not a bound);
* ``epsilon_bound``: the tightest proven bound of the configured run (its headline), same delta.

Verdict: ``consistent`` when epsilon_lower <= epsilon_bound, ``VIOLATED`` otherwise: then, with
probability at least 1 - beta, the code that ran is not (epsilon_bound, delta)-DP for one client.

What the audit writes (``audit.json``) is a release: it is a function of the audited run's
released global models (covered by the printed guarantee for the real clients) and of the
auditor's own randomness (canary directions and bits, independent of the clients' data), so it is
post-processing, covered by the same guarantee. It names the canary bits' confidence, not any
client's data. The canary run's models themselves are not written.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from privfl._validation import check_int, check_range
from privfl.accounting.empirical import (
    gaussian_fit_epsilon,
    one_run_epsilon,
    one_run_guesses,
    split_threshold_epsilon,
)

#: the algorithms this slice audits (the other seven: issue 47, later sessions)
AUDITED = ("dp-fedavg",)
#: numbers of guesses tried, as fractions of the canaries (Bonferroni over these)
GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
CONSISTENT, VIOLATED = "consistent", "VIOLATED"


def _check_auditable(algorithm: Any) -> None:
    name = getattr(algorithm, "name", "?")
    if name not in AUDITED:
        raise ValueError(f"federated.algorithm = {name!r} cannot be audited yet: must be one of "
                         f"{', '.join(AUDITED)} (issue 47)")
    plan = algorithm.plan
    if not plan.private:
        raise ValueError("privacy.noise_multiplier = 0: a non-private run has no bound to audit")
    if plan.client_sampling != "poisson":
        raise ValueError(f"federated.client_sampling = {plan.client_sampling!r} cannot be "
                         "audited yet: must be 'poisson'")
    if algorithm.protection is not None or algorithm.clipping.median:
        raise ValueError("client-side protection and median clipping cannot be audited yet")
    probe = torch.zeros(1, 1)
    if algorithm.aggregation.client_weights(np.zeros(1, dtype=np.int64), probe) is not None:
        raise ValueError("a weighted aggregation cannot be audited yet: canaries need the "
                         "unweighted mean")


def cosine_scores(directions: np.ndarray, step: np.ndarray) -> np.ndarray:
    """``cos(u_j, step)`` for unit rows ``u_j`` of ``directions`` (zeros for a zero step)."""
    norm = float(np.linalg.norm(step))
    return directions @ step / norm if norm > 0.0 else np.zeros(directions.shape[0])


def _scores(algorithm: Any, directions: np.ndarray, inserted: np.ndarray,
            rng: np.random.Generator, rounds: int) -> np.ndarray:
    """Train ``rounds`` rounds with the present canaries sampled in; return each canary's sum
    over rounds of the cosine with the released update ``Delta_t = w_{t+1} - w_t``."""
    rate = algorithm.plan.sampling_rate
    scores = np.zeros(directions.shape[0])
    for r in range(1, rounds + 1):
        cohort = algorithm.select_cohort()
        work = algorithm.local_work(cohort)
        joined = inserted & (rng.random(inserted.size) < rate)
        accumulator = work["round"]
        if joined.any():
            rows = torch.as_tensor(directions[joined] * accumulator.clip_norm,
                                   dtype=algorithm.dtype, device=algorithm.device)
            # unweighted aggregation (checked): the id only passes the range check
            accumulator.add(rows, np.zeros(int(joined.sum()), dtype=np.int64))
        before = algorithm.global_model.detach().clone()
        algorithm.aggregate(cohort, work)
        algorithm.round = r
        step = (algorithm.global_model - before).double().cpu().numpy()
        scores += cosine_scores(directions, step)
    return scores


def guess_counts(m: int) -> list[int]:
    """The even numbers of guesses k tried for m canaries: ``GUESS_FRACTIONS`` of m, >= 2."""
    return sorted({max(2, round(f * m)) // 2 * 2 for f in GUESS_FRACTIONS if f * m >= 2})


def _one_run(scores: np.ndarray, inserted: np.ndarray, delta: float,
             beta: float) -> tuple[float, int, int]:
    """The best one-run bound over :func:`guess_counts`, each at ``beta / len(counts)``."""
    m = scores.size
    ks = guess_counts(m)
    best, best_k = 0.0, 0
    for k in ks:
        r, v = one_run_guesses(scores, inserted, k // 2, k // 2)
        value = one_run_epsilon(m, r, v, delta, beta=beta / len(ks))
        if value > best:
            best, best_k = value, k
    return best, best_k, len(ks)


def audit_config(config: Any, *, canaries: int = 1000, seed: int = 0,
                 beta: float = 0.05) -> dict[str, Any]:
    """Run the audit of a configuration (module docstring); return audit.json's content."""
    from privfl.algorithms.base import tightest_bound
    from privfl.algorithms.builders import build_algorithm, build_dataset

    canaries = check_int("canaries", canaries, minimum=4)
    seed = check_int("seed", seed)
    beta = check_range("beta", beta, 0.0, 0.5, low_open=True, high_open=True)
    data = build_dataset(config)
    algorithm = build_algorithm(config, data)
    _check_auditable(algorithm)
    plan, rounds = algorithm.plan, int(config.federated.rounds)
    rng = np.random.default_rng([seed, 47])
    d = int(algorithm.global_model.numel())
    directions = rng.standard_normal((canaries, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    inserted = rng.random(canaries) < 0.5
    scores = _scores(algorithm, directions, inserted, rng, rounds)
    delta = float(plan.delta)
    lower, guesses, tries = _one_run(scores, inserted, delta, beta)
    bound = tightest_bound(algorithm.privacy(rounds))
    fit = (gaussian_fit_epsilon(scores[inserted], scores[~inserted], delta)
           if 2 <= inserted.sum() <= canaries - 2 else None)
    epsilon_bound = math.inf if bound is None else float(bound.epsilon)
    return {
        "algorithm": algorithm.name,
        "rounds": rounds,
        "delta": delta,
        "confidence": 1.0 - beta,
        "epsilon_lower": lower,
        "epsilon_lower_method": (
            "one-run audit (Steinke, Nasr and Jagielski 2023, Theorem 5.2 with delta): "
            f"lower bound at confidence {1 - beta:g}, {guesses} guesses (half in, half out; "
            f"Bonferroni over {tries} guess counts)"),
        "epsilon_lower_clopper_pearson": split_threshold_epsilon(
            scores, inserted, delta, beta, seed=seed),
        "epsilon_estimate": None if fit is None else fit.epsilon,
        "epsilon_estimate_method": (
            "ESTIMATE, not a bound: Gaussian fit of the canary scores (Andrew et al. 2024), "
            "mu-GDP at delta" + ("" if fit is None else f", mu = {fit.mu:.6g}")),
        "epsilon_bound": epsilon_bound,
        "epsilon_bound_method": None if bound is None else bound.method,
        "unit": "client", "neighbouring": "add/remove one client",
        "sampling": f"Poisson client sampling, q = {plan.sampling_rate:g}",
        "canaries": canaries,
        "canaries_inserted": int(inserted.sum()),
        "canary_update": "clip norm S_t times a fixed random unit direction",
        "score": "sum over rounds of cos(canary direction, released global model update)",
        "verdict": CONSISTENT if lower <= epsilon_bound else VIOLATED,
        "release": ("covered: post-processing of the audited run's released global models and "
                    "of the auditor's canary directions and bits (independent of the data)"),
    }
