"""Monte Carlo training benchmark: M DP-FedAvg replicas trained together against one after another.

Run ``python benchmarks/certify.py [--models 100] [--model mlp|logreg|cnn] [--layout batched]``.

Configuration (user level, scaled down from Xie et al. 2023's MNIST UserDP-FedAvg setting):
MNIST 5k subset, digits 0 vs 1 (about 800 train / 190 test records), N = 200 clients of 4
records, Poisson client sampling q = 0.1 (E[m] = 20 clients per round), K = 10 local
non-private steps of B = 4 (momentum SGD, lr 0.02, weight decay 5e-4), z = 1.8, S = 0.7,
delta = 0.0029, R = 3 rounds; model ``--model`` (``mlp``: 784-32-2, 25,186 parameters;
``logreg``: 1,570; ``cnn``: Xie et al. 2023's MNIST CNN, 25,746).

Measured in one process, each mode after a warm-up run of 2 replicas (first-call costs):

* ``together`` — :func:`privfl.robustness.montecarlo.train_replicas` in layout ``--layout``:
  the replicas' local work gathered into one engine call per step;
* ``serial`` — :func:`~privfl.robustness.montecarlo.train_replicas_serially`, same layout:
  every replica built and trained alone, one after another. Its models, hard labels and
  probabilities are asserted equal to ``together`` bit for bit;
* ``serial-default`` — the same in the engine's default layout (looped on CPU, what ``privfl
  run`` uses): results equal up to float summation order (the largest difference is printed).

The ratio ``serial / together`` is the gain of training the replicas together (target >= 5;
see docs/benchmarks.md for what this machine gives and why).
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

from privfl.algorithms.builders import build_dataset
from privfl.config import config_from_dict
from privfl.robustness import montecarlo as mc

MODELS = {
    "mlp": {"name": "mlp", "kwargs": {"hidden": [32]}},
    "logreg": {"name": "logreg"},
    "cnn": {"name": "xie2023-mnist-cnn", "kwargs": {"num_classes": 2}},
}


def configuration(model: str):
    return config_from_dict({
        "name": f"certify-benchmark-{model}",
        "seed": 0,
        "data": {"dataset": "mnist-5k", "classes": [0, 1], "test_fraction": 0.21,
                 "partition": "iid", "clients": 200, "train_size": 4, "test_size": None},
        "model": MODELS[model],
        "training": {"local_steps": 10, "batch_size": 4, "sampling": "without-replacement",
                     "optimizer": "momentum", "momentum": 0.9, "lr": 0.02,
                     "weight_decay": 0.0005},
        "privacy": {"enabled": True, "noise_multiplier": 1.8, "clip_norm": 0.7,
                    "delta": 0.0029},
        "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_sampling": "poisson",
                      "client_rate": 0.1},
        "run": {"threads": 1},
    })


def bits(t: torch.Tensor) -> torch.Tensor:
    """The float32 bit patterns (NaN-safe equality)."""
    return t.contiguous().view(torch.int32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=100, help="M replicas (default 100)")
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp")
    parser.add_argument("--layout", choices=("batched", "looped"), default="batched",
                        help="engine layout of 'together' and 'serial' (default batched)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = configuration(args.model)
    data = build_dataset(config)
    # the benchmark times training, not reading the MNIST subset: every mode gets these data
    mc._data = lambda cfg, given: data
    print(f"UserDP-FedAvg (DP-FedAvg), MNIST 5k digits 0 vs 1, {data.num_clients} clients x 4 "
          f"records, q = 0.1, K = 10, B = 4, R = 3, model {args.model}, M = {args.models}")
    print(f"torch {torch.__version__}, python {platform.python_version()}, {os.cpu_count()} "
          f"CPUs, 1 torch thread; load average at start {os.getloadavg()[0]:.2f}")
    modes = [("together", mc.train_replicas, args.layout),
             ("serial", mc.train_replicas_serially, args.layout),
             ("serial-default", mc.train_replicas_serially, None)]
    started = time.perf_counter()
    results = {}
    for name, train, layout in modes:
        train(config, 2, layout=layout)  # warm-up
        tick = time.perf_counter()
        result = train(config, args.models, layout=layout, keep_weights=True)
        results[name] = (time.perf_counter() - tick, result)
    together, serial, default = (results[n][1] for n in ("together", "serial", "serial-default"))
    assert torch.equal(bits(together.weights), bits(serial.weights)), "models differ"
    for name in together.predictions:
        assert np.array_equal(together.predictions[name], serial.predictions[name])
        assert np.array_equal(together.probabilities[name], serial.probabilities[name])
    gap = float((together.weights - default.weights).abs().max())
    print(f"timing: {time.perf_counter() - started:.0f} s, load average at end "
          f"{os.getloadavg()[0]:.2f}\n")
    print(f"{'mode':16s} {'layout':8s} {'seconds':>8s} {'ms/replica':>11s}  details")
    for name, _, _ in modes:
        seconds, result = results[name]
        info = result.info
        extra = (f"wave {info['wave']}, {info['engine_calls']} engine calls, "
                 f"{info['engine_rows']} rows" if name == "together" else
                 f"setup {info['seconds_setup']:.2f} s, training {info['seconds_training']:.2f} s")
        print(f"{name:16s} {info['layout']:8s} {seconds:8.2f} "
              f"{1000 * seconds / args.models:11.1f}  {extra}")
    t, s, d = (results[n][0] for n in ("together", "serial", "serial-default"))
    print(f"\nsame models, labels and probabilities as serial: bit for bit "
          f"(M = {args.models}); serial-default differs by at most {gap:.2g} (float "
          "summation order, amplified by training)")
    print(f"mean test accuracy of a replica: {together.accuracy().mean():.4f}; "
          + together.privacy.lines()[0])
    print(f"serial / together          = {s / t:6.2f}   (target >= 5)")
    print(f"serial-default / together  = {d / t:6.2f}   (against the engine's default layout)")


if __name__ == "__main__":
    main()
