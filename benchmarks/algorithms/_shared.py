"""What the algorithm benchmarks share: the engine benchmark as a module, a FederatedDataset over
the clients' pairs, and the alternating timer (importable because ``benchmarks/algorithms`` is
the script's directory, or put on ``sys.path`` by ``benchmarks/engine.py --algorithms``)."""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

_ENGINE = Path(__file__).resolve().parents[1] / "engine.py"


def load_engine():
    """``benchmarks/engine.py`` as a module (its Opacus baseline and constants)."""
    spec = importlib.util.spec_from_file_location("privfl_bench_engine", _ENGINE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def federation(data, test_per_client: int = 10):
    """The clients' ``(x, y)`` pairs as a FederatedDataset over one pool (train = test pool)."""
    import numpy as np
    import torch

    from privfl.data import Dataset, FederatedDataset

    x = torch.cat([xj for xj, _ in data]).numpy()
    y = torch.cat([yj for _, yj in data]).numpy()
    pool = Dataset(x, y, "random-mnist/train", 10, normalized=True)
    sizes = [len(yj) for _, yj in data]
    starts = np.cumsum([0, *sizes[:-1]])
    train = [np.arange(s, s + n) for s, n in zip(starts, sizes, strict=True)]
    test = [np.arange(s, s + test_per_client) for s in starts]
    return FederatedDataset(pool, pool, train, test, name=f"random-mnist({len(sizes)})")


def alternate(runs: Mapping[str, Callable[[int], object]], rounds: int,
              first: int = 0) -> dict[str, float]:
    """Seconds each method spent over rounds ``first .. first + rounds - 1``: every round runs
    all methods (``run(round_index)``), in rotated order, so load changes on a shared machine
    hit them alike."""
    names = list(runs)
    seconds = dict.fromkeys(names, 0.0)
    for r in range(first, first + rounds):
        turn = (r - first) % len(names)
        for name in names[turn:] + names[:turn]:
            start = time.perf_counter()
            runs[name](r)
            seconds[name] += time.perf_counter() - start
    return seconds
