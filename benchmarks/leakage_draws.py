"""Speed of the leakage draws of ``privfl tradeoff``: scored in the attacker's projection against
built in ``d`` dimensions, and the vectorised bootstrap against one ``sqrt_js`` per replicate,
both measured in this run.

Run ``python benchmarks/leakage_draws.py [--draws R] [--dimension D] [--repeats N]``. One
synthetic client of the default model's shape (``D`` = 7850 parameters, 100 records, ``J`` = 4
candidates; Zhang, Chen and Yang 2022's Bayesian attacker) and ``R`` = 480 draws: for Gaussian
distortion and record sampling it times
:func:`~privfl.distortion.draws.protected_loglik` with the first 48 draws built (the default)
and with all ``R`` built (what every draw cost before), and checks that the built path and the
projection agree (sampling: the same numbers; Gaussian: the built head). It then times the
leakage bootstrap (200 replicates) by :func:`~privfl.distortion.divergence.sqrt_js_rows`
against a loop of :func:`~privfl.distortion.divergence.sqrt_js`. Prints seconds and ratios
(built / projected, loop / vectorised: above 1 means faster).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from types import SimpleNamespace

import numpy as np
import torch

from privfl.distortion.divergence import sqrt_js, sqrt_js_rows
from privfl.distortion.draws import diagonal_gaussian_loglik, protected_loglik
from privfl.distortion.mechanisms import (
    GaussianDistortion,
    PoissonRecordSampling,
    sampled_mean_steps,
)

RECORDS, CANDIDATES, SIDE = 100, 4, 48


def _client(draws: int, dimension: int) -> tuple[SimpleNamespace, SimpleNamespace]:
    g = torch.Generator().manual_seed(0)
    grads = 0.01 * torch.randn(RECORDS, dimension, generator=g, dtype=torch.float64)
    w_prev = torch.randn(dimension, generator=g, dtype=torch.float64)
    masks = PoissonRecordSampling(0.5).masks(draws, RECORDS, g)
    samples = w_prev + sampled_mean_steps(grads, masks, 0.1)
    centres = samples.mean(0) + 1e-4 * torch.randn(CANDIDATES, dimension, generator=g,
                                                   dtype=torch.float64)
    variances = torch.exp(torch.empty(dimension, dtype=torch.float64).uniform_(
        np.log(1.7e-9), np.log(1.1e-5), generator=g))
    client = SimpleNamespace(samples=samples, centres=centres, size=RECORDS, w_prev=w_prev,
                             grads=grads, lr=0.1)
    return client, SimpleNamespace(variances=variances, ignore_zeros=False)


def _time(call, repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        out = call()
        best = min(best, time.perf_counter() - started)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=480)
    parser.add_argument("--dimension", type=int, default=7850)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; R = {args.draws}, d = {args.dimension}, torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads; best of {args.repeats}")
    client, kernel = _client(args.draws, args.dimension)
    for mechanism in (GaussianDistortion(1e-6), PoissonRecordSampling(0.3)):
        def build(mechanism=mechanism):
            """Every draw built in d dimensions and scored there (before)."""
            generator = torch.Generator().manual_seed(1)
            if isinstance(mechanism, PoissonRecordSampling):
                masks = mechanism.masks(args.draws, RECORDS, generator)
                drawn = client.w_prev + sampled_mean_steps(client.grads, masks, client.lr)
            else:
                drawn = mechanism(client.samples, generator)
            return diagonal_gaussian_loglik(drawn, client.centres, kernel.variances)

        def project(mechanism=mechanism):
            return protected_loglik(client, mechanism, kernel, torch.Generator().manual_seed(1),
                                    SIDE)[0]
        built_s, built = _time(build, args.repeats)
        projected_s, projected = _time(project, args.repeats)
        rows = args.draws if isinstance(mechanism, PoissonRecordSampling) else SIDE
        agree = float(np.max(np.abs(built[:rows] - projected[:rows])) /
                      max(np.max(np.abs(built[:rows])), 1e-300))
        print(f"{mechanism.name:>9}: built {built_s:.3f} s, projected {projected_s:.3f} s, "
              f"ratio {built_s / projected_s:.1f}; shared rows agree to {agree:.1e} (relative)")
    rng = np.random.default_rng(0)
    post = rng.dirichlet(np.ones(CANDIDATES), size=args.draws)
    picks = rng.integers(args.draws, size=(200, args.draws))
    weights = np.zeros((200, args.draws))
    np.add.at(weights, (np.arange(200)[:, None], picks), 1.0 / args.draws)
    prior = np.full(CANDIDATES, 1.0 / CANDIDATES)
    boot = weights @ post
    loop_s, loop = _time(lambda: [sqrt_js(b / b.sum(), prior) for b in boot], args.repeats)
    rows_s, vector = _time(lambda: sqrt_js_rows(boot, prior), args.repeats)
    print(f"bootstrap: loop {loop_s:.4f} s, vectorised {rows_s:.4f} s, ratio "
          f"{loop_s / rows_s:.0f}; agree to {float(np.max(np.abs(np.array(loop) - vector))):.1e}")


if __name__ == "__main__":
    main()
