"""One quick training run of a reproduction: a configuration (a mapping) run to the end through
the experiment runner (:class:`privfl.runs.experiment.Experiment`, the path of ``privfl run``),
and what it gave (:class:`QuickRun`)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Progress", "QuickRun", "run_config", "training_config"]

#: progress callback: one line of text
Progress = Callable[[str], None]


@dataclass(frozen=True)
class QuickRun:
    """What a finished run gave: its summary (summary.json) and metrics rows."""

    name: str
    summary: dict[str, Any]
    metrics: list[dict[str, Any]]
    seconds: float

    def final(self, key: str) -> float | None:
        value = self.summary.get("final", {}).get(key)
        return float(value) if isinstance(value, (int, float)) else None

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """``(rounds, values)`` of a metric over the logged rounds that have it."""
        xs, ys = [], []
        for row in self.metrics:
            value = row.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                xs.append(int(row["round"]))
                ys.append(float(value))
        return xs, ys


def run_config(raw: Mapping[str, Any], out: Path | None, *, overrides: Sequence[str] = (),
               progress: Progress | None = None) -> QuickRun:
    """Run configuration ``raw`` (a mapping, or loaded from a file by the caller) to the end in
    ``out / raw["name"]`` (a temporary folder when ``out`` is None)."""
    from privfl.runs.experiment import Experiment

    config = training_config(raw, overrides)
    started = time.perf_counter()
    if progress:
        progress(f"training {config.name} ({config.federated.algorithm}, "
                 f"{config.federated.rounds} rounds)")
    with tempfile.TemporaryDirectory(prefix="privfl-reproduce-") as scratch:
        folder = (Path(scratch) if out is None else Path(out)) / config.name
        experiment = Experiment.create(config, folder)
        result = experiment.run()
    seconds = time.perf_counter() - started
    if progress:
        progress(f"  {config.name}: {result.stop_reason} after {seconds:.0f} s")
    return QuickRun(config.name, dict(result.summary), list(result.metrics), seconds)


def training_config(raw: Mapping[str, Any], overrides: Sequence[str]) -> Any:
    """The validated configuration of ``raw`` with ``overrides`` (``key=value``) applied."""
    from privfl.config import apply_overrides, config_from_dict
    from privfl.config.algorithms import register_builtin_algorithms

    register_builtin_algorithms()  # idempotent; the command line has done it already
    return config_from_dict(apply_overrides(raw, overrides))
