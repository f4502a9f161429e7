"""Flower backend overhead: the DP-FedAvg demo (configs/demo-dp-fedavg.yaml: digits, 100
clients, Poisson q = 0.3, 5 local steps, logistic regression) run locally, on privfl's Ray
backend and on Flower's simulation (privfl's ServerApp and ClientApp, one virtual SuperNode per
client), in one process, one after the other.

Run (in the Flower venv, ``make test-flower`` builds it)::

    .venv-flower/bin/python benchmarks/flower_overhead.py [--rounds 6] [--workers 2] [--no-ray]

Printed per backend: setup seconds (until the first round's metrics row: Ray or Flower start,
workers import torch and build their trainer), the median seconds per round of the remaining
rounds (metrics rows' wall clock ``seconds``: selection, local work, aggregation, evaluation),
the overhead per round against local (median round minus local's median round) and the ratio
round time / local round time. Local is measured before and after the others (load drift).
Every backend's metrics (without timings) and privacy.json are checked equal to local's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))


def _run(backend: str, rounds: int, workers: int, out: Path) -> dict:
    from privfl.backends import use_backend
    from privfl.config import load_config
    from privfl.runs.experiment import Experiment, RunCallbacks

    config = load_config(ROOT / "configs" / "demo-dp-fedavg.yaml",
                         [f"federated.rounds={rounds}"])
    stamps: list[float] = []

    class Clock(RunCallbacks):
        def on_round(self, experiment, metrics):
            stamps.append(time.perf_counter())

    started = time.perf_counter()
    experiment = Experiment.create(config, out)
    if backend == "flower":
        from privfl.flower.apps import simulate

        simulate(experiment, Clock(), workers)
    elif backend == "ray":
        from privfl.backends.ray_backend import RayBackend

        with RayBackend(workers=workers) as ray, use_backend(ray):
            experiment.run(Clock())
    else:
        experiment.run(Clock())
    ended = time.perf_counter()
    gaps = [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)]
    metrics = [{k: v for k, v in m.items() if k != "seconds"} for m in experiment.metrics]
    return {"setup": stamps[0] - started, "round": statistics.median(gaps), "total": ended -
            started, "metrics": metrics,
            "privacy": json.loads((out / "privacy.json").read_text()),
            "cohort": statistics.mean(m["cohort_size"] for m in metrics)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    backends = ["local", *([] if args.no_ray else ["ray"]), "flower", "local"]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n, backend in enumerate(backends):
            key = backend if backend not in results else f"{backend}-again"
            results[key] = _run(backend, args.rounds, args.workers, Path(tmp) / f"{n}-{backend}")
    base = results["local"]
    for key, r in results.items():
        if r["metrics"] != base["metrics"] or r["privacy"] != base["privacy"]:
            raise SystemExit(f"{key}: metrics or privacy.json differ from local")
    local_round = statistics.mean([results["local"]["round"], results["local-again"]["round"]])
    print(f"DP-FedAvg demo, {args.rounds} rounds, mean cohort {base['cohort']:.1f} clients, "
          f"{args.workers} workers; metrics and privacy.json identical on every backend")
    print(f"{'backend':<14}{'setup s':>9}{'s/round':>9}{'overhead s/round':>18}{'ratio':>8}")
    for key, r in results.items():
        print(f"{key:<14}{r['setup']:>9.2f}{r['round']:>9.3f}"
              f"{r['round'] - local_round:>18.3f}{r['round'] / local_round:>8.1f}")


if __name__ == "__main__":
    main()
