"""Cost per round of the correlated-noise generators against independent noise and a round's
server aggregation.

Run ``python benchmarks/correlated_noise.py [--rounds 2000] [--band 64] [--dim 100000]
[--clients 100] [--train-rounds 5]``. It streams ``--rounds`` rounds of

(a) banded MF noise (:class:`privfl.mechanisms.banded_noise.BandedNoise`, a Toeplitz band of
    ``--band`` coefficients, d = ``--dim`` coordinates): one fresh Gaussian plus ``band - 1``
    axpys per round, memory ``(band - 1) d`` floats;
(b) tree aggregation (:class:`privfl.mechanisms.tree.TreeAggregator`, vanilla);
(c) the baseline: one independent Gaussian of d coordinates (DP-FedAvg's noise);
(d) a round's server aggregation: clip and sum ``--clients`` client updates of d coordinates
    (a lower bound on a training round, which also trains every client),

and prints the mean milliseconds per round and the ratios (a)/(c), (a)/(d), (b)/(c) measured in
this run. Then the training rounds themselves: ``bandmf-fedavg`` and ``dp-ftrl`` built from
their demos (configs/demo-bandmf.yaml, configs/demo-dp-ftrl.yaml: 2,000 Fashion-MNIST clients,
logistic regression, d = 7,850) with ``--rounds`` T and ``--band`` b (BandMF: b groups;
DP-FTRL: 40 groups), ``--train-rounds`` whole rounds timed (``run_round``: cohort, local
training, clipping, noise, server step, evaluation, accounting), against their own noise
generator at the model's dimension stepped ``--rounds`` times (the algorithm's draw and
``BandedNoise.step`` / ``TreeAggregator.step``): the ratio is the noise's share of a round.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

from privfl.mechanisms.banded_noise import BandedNoise
from privfl.mechanisms.factorization import sqrt_prefix_coefficients
from privfl.mechanisms.tree import TreeAggregator


def _per_round(step, rounds: int) -> float:
    start = time.perf_counter()
    for _ in range(rounds):
        step()
    return (time.perf_counter() - start) / rounds * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--band", type=int, default=64)
    parser.add_argument("--dim", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--train-rounds", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    d = args.dim
    coeffs = sqrt_prefix_coefficients(args.band)
    banded = BandedNoise(coeffs, d, 1.0, rng=rng)
    tree = TreeAggregator(d, 1.0, rng=rng)
    zeros = np.zeros(d)
    updates = rng.normal(size=(args.clients, d))

    def aggregate() -> None:
        norms = np.linalg.norm(updates, axis=1)
        (updates * np.minimum(1.0, 1.0 / norms)[:, None]).sum(axis=0)

    rounds = args.rounds
    agg_rounds = max(1, rounds // 10)
    banded_ms = _per_round(banded.step, rounds)
    tree_ms = _per_round(lambda: tree.step(zeros), rounds)
    gauss_ms = _per_round(lambda: rng.normal(0.0, 1.0, d), rounds)
    agg_ms = _per_round(aggregate, agg_rounds)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"rounds={rounds} band={args.band} dim={d} clients={args.clients}")
    print(
        f"(a) banded MF noise      {banded_ms:8.3f} ms/round  memory "
        f"{(args.band - 1) * d * 8 / 2**20:.1f} MiB"
    )
    print(f"(b) tree aggregation     {tree_ms:8.3f} ms/round")
    print(f"(c) independent Gaussian {gauss_ms:8.3f} ms/round")
    print(f"(d) server aggregation   {agg_ms:8.3f} ms/round ({args.clients} clients)")
    print(
        f"ratios: (a)/(c) = {banded_ms / gauss_ms:.2f}, (a)/(d) = {banded_ms / agg_ms:.2f}, "
        f"(b)/(c) = {tree_ms / gauss_ms:.2f}"
    )

    _training_rounds(args)


def _training_rounds(args: argparse.Namespace) -> None:
    """Whole training rounds of both algorithms against their noise generators."""
    from privfl.config.loader import load_config
    from privfl.runs.experiment import build_algorithm

    configs = Path(__file__).resolve().parents[1] / "configs"
    settings = {
        "bandmf-fedavg": ("demo-bandmf.yaml", [f"federated.band={args.band}",
                                               f"federated.min_separation={args.band}"]),
        "dp-ftrl": ("demo-dp-ftrl.yaml", ["federated.min_separation=40"]),
    }
    for name, (file, overrides) in settings.items():
        config = load_config(configs / file, [f"federated.rounds={args.rounds}", *overrides])
        started = time.perf_counter()
        algorithm = build_algorithm(config)
        built = time.perf_counter() - started
        round_ms = _per_round(algorithm.run_round, args.train_rounds)
        noise_ms = _noise_per_round(algorithm, args.rounds)
        print(f"{name}: d = {algorithm.global_model.numel()}, cohort "
              f"{algorithm.plan.expected_cohort:g} clients, built in {built:.1f} s; training "
              f"round {round_ms:8.1f} ms (mean of {args.train_rounds}); its noise "
              f"{noise_ms:6.3f} ms/round over {args.rounds} rounds: "
              f"{noise_ms / round_ms:.4f} of a round")


def _noise_per_round(algorithm: object, rounds: int) -> float:
    """ms per round of a fresh noise generator of ``algorithm``'s kind, with its own draws."""
    d = algorithm.global_model.numel()
    noise = algorithm._new_noise(d)
    if isinstance(noise, BandedNoise):
        return _per_round(lambda: noise.step(algorithm._draw((d,))), rounds)
    zeros = np.zeros(d)
    return _per_round(lambda: noise.step(zeros), rounds)

if __name__ == "__main__":
    main()
