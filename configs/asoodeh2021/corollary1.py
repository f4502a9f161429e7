"""Corollary 1 of Asoodeh et al. 2021: the optimality gap of projected noisy SGD's final model
on an L2-regularised logistic regression against the bound
``E[F(W_T)] - min F <= 2 beta (D^2 + (G^2 + d sigma^2)/m) / (lambda^2 T)``.

Run from the repository root::

    python configs/asoodeh2021/corollary1.py [--config configs/asoodeh2021/digits-corollary1.yaml]
                                             [--seeds 10] [--noise-multiplier Z] [--json]

The configuration gives the data pool (its training split), the model (logreg), the users n
(``data.clients``), m, rho, z, L, lambda (``federated.l2``) and beta (``federated.smoothness``).
Each seed draws the n users i.i.d. (with replacement) from the pool, as the corollary assumes,
so F is the pool's regularised risk; F* comes from projected gradient descent on the pool with
step 1/(beta + lambda). Constants: D = L + lambda rho bounds ||grad F|| on the ball, G^2 = L^2
bounds a user's gradient variance, sigma = z L / sqrt(m) is the paper's per-user noise, d the
number of parameters (the paper prints sigma^2 where isotropic noise has d sigma^2; both are
shown).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from privfl.accounting.contraction import corollary1_utility_bound
from privfl.algorithms.builders import build_dataset, build_model
from privfl.algorithms.projected_sgd import ProjectedSgd, project_
from privfl.config import config_from_dict, read_yaml
from privfl.data import FederatedDataset

HERE = Path(__file__).resolve().parent


def _algorithm(config, data: FederatedDataset, seed: int) -> ProjectedSgd:
    config = config.model_copy(deep=True)
    config.data.clients = data.num_clients
    plan = ProjectedSgd.privacy_plan(config, data)
    if plan.users != plan.cohort_size * (plan.users // plan.cohort_size):
        raise ValueError("users must be a multiple of users_per_round")
    return ProjectedSgd(build_model(config, data), data, plan, seed=seed,
                        input_bound=config.federated.input_bound)


def _one_user_each(pool, test, indices) -> FederatedDataset:
    return FederatedDataset(pool, test, [np.array([i]) for i in indices],
                            [np.zeros(0, dtype=np.int64)] * len(indices))


def minimum(config, pool, test) -> tuple[float, float]:
    """(F*, ||w*||, the pool as users) by projected gradient descent on the whole pool."""
    everyone = _one_user_each(pool, test, np.arange(len(pool)))
    raw = config.model_dump(mode="json")
    raw["federated"].update(users_per_round=len(pool), rounds=1)
    raw["data"]["clients"] = len(pool)
    algo = _algorithm(config_from_dict(raw), everyone, 0)
    f = config.federated
    w = torch.zeros_like(algo.params)
    for _ in range(500):
        algo.params = w
        g = algo.local_work(np.arange(len(pool))).mean + f.l2 * w[0]
        w = project_(w - g[None] / (f.smoothness + f.l2), f.radius)
    return algo.objective(w), float(w.norm()), algo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(HERE / "digits-corollary1.yaml"))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--noise-multiplier", type=float, default=None,
                        help="override privacy.noise_multiplier (z)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    raw = read_yaml(args.config)
    if args.noise_multiplier is not None:
        raw["privacy"]["noise_multiplier"] = args.noise_multiplier
    config = config_from_dict(raw)
    f, p = config.federated, config.privacy
    source = build_dataset(config)
    pool, test = source.train, source.test
    started = time.perf_counter()
    f_star, w_norm, everyone = minimum(config, pool, test)
    gaps, accuracies = [], []
    algo = None
    for seed in range(args.seeds):
        users = np.random.default_rng(seed).integers(0, len(pool), size=config.data.clients)
        algo = _algorithm(config, _one_user_each(pool, test, users), seed)
        for _ in range(f.rounds):
            cohort = algo.select_cohort()
            algo.aggregate(cohort, algo.local_work(cohort))
            algo.round += 1
        gaps.append(everyone.objective(algo.released) - f_star)
        accuracies.append(algo.accuracy())
    plan = algo.plan
    L, lam, beta = p.clip_norm, f.l2, f.smoothness + f.l2
    common = dict(smooth=beta, strong_convexity=lam, rounds=f.rounds,
                  batch_size=f.users_per_round, grad_bound=L + lam * f.radius,
                  grad_variance=L**2, noise=plan.paper_sigma if plan.private else 0.0)
    bound = corollary1_utility_bound(**common, dim=algo.trainer.num_params)
    printed = corollary1_utility_bound(**common, dim=1)
    privacy = {r.method: r.epsilon for r in plan.results(f.rounds)} if plan.private else {}
    result = {
        "config": args.config, "seeds": args.seeds, "users": config.data.clients,
        "rounds": f.rounds, "users_per_round": f.users_per_round, "radius": f.radius,
        "noise_multiplier": p.z, "l2": lam, "parameters": algo.trainer.num_params,
        "f_star": f_star, "minimiser_norm": w_norm,
        "gap_mean": float(np.mean(gaps)), "gap_sd": float(np.std(gaps, ddof=1)),
        "gap_max": float(np.max(gaps)), "bound": bound, "bound_paper_sigma2": printed,
        "accuracy_mean": float(np.mean(accuracies)), "epsilon": privacy,
        "delta": p.delta, "seconds": time.perf_counter() - started,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"F* = {f_star:.6f} (||w*|| = {w_norm:.4f} < rho = {f.radius:g})")
    print(f"gap E[F(W_T)] - F* over {args.seeds} seeds: {result['gap_mean']:.4g} "
          f"(sd {result['gap_sd']:.2g}, max {result['gap_max']:.4g})")
    print(f"Corollary 1 bound: {bound:.4g} with d sigma^2 (d = {algo.trainer.num_params}), "
          f"{printed:.4g} as printed (sigma^2); gap / bound = {result['gap_mean'] / bound:.3g}")
    print(f"released-model accuracy {result['accuracy_mean']:.4f}; epsilon at delta = "
          f"{p.delta:g}: " + ", ".join(f"{k} {v:.4g}" for k, v in privacy.items()))
    if not math.isfinite(bound):
        raise SystemExit("bound is not finite")


if __name__ == "__main__":
    main()
