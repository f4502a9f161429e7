"""Training runs of a reproduction: quick runs from built-in configurations, paper-scale runs from
the shipped ``configs/<paper>/`` files, both through the experiment runner
(:class:`privfl.runs.experiment.Experiment`), the path of ``privfl run``.

A quick run is a configuration (a mapping) small enough for seconds to a minute on two CPU cores,
on built-in or Debian data, seeded (so a quick reproduction is deterministic). A paper-scale run
(:class:`PaperRun`) names a shipped configuration, the paper's quantity it measures, and what it
costs; :func:`paper_rows` runs those whose data are on this machine, or only plans them
(``dry_run``), and a run whose data cannot be had offline becomes a row that says how to get them.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfl.reproduce.rows import Row, compare

__all__ = ["PaperRun", "QuickRun", "configs_root", "paper_plan", "paper_rows", "run_config"]

#: progress callback: one line of text
Progress = Callable[[str], None]


def configs_root() -> Path | None:
    """The ``configs/`` folder of a source checkout (next to ``src/``), or None."""
    root = Path(__file__).resolve().parents[3] / "configs"
    return root if root.is_dir() else None


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

    config = _config(raw, overrides)
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


@dataclass(frozen=True)
class PaperRun:
    """One paper-scale training run: a shipped configuration and the paper's number it measures.

    ``config`` is relative to ``configs/``; ``overrides`` are ``key=value`` settings on top;
    ``metric`` a key of the summary's ``final`` section (an accuracy, compared in percent) or
    ``"rounds_to_target"``; ``paper`` the value as printed; ``hours`` the estimated time on two
    CPU cores (``gpu``: the paper used a GPU, one is advised). ``substitute`` says why the
    configuration's data differ from the paper's (then the row cannot match)."""

    name: str
    config: str
    quantity: str
    source: str
    paper: str
    metric: str
    hours: float
    paper_dataset: str
    overrides: tuple[str, ...] = ()
    gpu: bool = False
    substitute: str = ""
    tolerance: float = 0.02

    def line(self) -> str:
        device = "GPU advised" if self.gpu else "CPU"
        data = f"{self.paper_dataset}" + (f" (here: {self.substitute})" if self.substitute else "")
        sets = "".join(f" --set {o}" for o in self.overrides)
        return (f"privfl run configs/{self.config}{sets}: about {_hours(self.hours)} on 2 CPU "
                f"cores ({device}); data: {data}; measures {self.quantity}")


def _hours(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"


def paper_plan(runs: Sequence[PaperRun]) -> list[str]:
    """One line per paper-scale run, and the total time."""
    total = sum(run.hours for run in runs)
    return [run.line() for run in runs] + [
        f"total: {len(runs)} runs, about {_hours(total)} on 2 CPU cores"]


def _value(run: PaperRun, result: QuickRun) -> float | None:
    if run.metric == "rounds_to_target":
        value = result.summary.get("rounds_to_target")
        return float(value) if isinstance(value, (int, float)) else None
    value = result.final(run.metric)
    return None if value is None else 100.0 * value


def _missing_data(config: Any) -> str:
    """Why the data of ``config`` are not on this machine ("" when they are)."""
    from privfl.algorithms.builders import build_dataset
    from privfl.config import config_from_dict

    raw = config.model_dump(mode="json")
    offline = config_from_dict({**raw, "data": {**raw["data"], "download": False}})
    try:
        build_dataset(offline)
    except OSError as error:  # DatasetNotFoundError and friends: how to get the data
        return " ".join(str(error).split())
    return ""


def _config(raw: Mapping[str, Any], overrides: Sequence[str]) -> Any:
    from privfl.config import apply_overrides, config_from_dict
    from privfl.config.algorithms import register_builtin_algorithms

    register_builtin_algorithms()  # idempotent; the command line has done it already
    return config_from_dict(apply_overrides(raw, overrides))


def paper_rows(runs: Sequence[PaperRun], out: Path | None, *, dry_run: bool,
               progress: Progress | None = None, seeds: int = 2) -> list[Row]:
    """Rows of the paper-scale runs: run each whose configuration and data are here at
    ``seeds`` seeds (with ``dry_run`` only check that they are; the row judges the paper's value
    by the seeds' interval, :func:`privfl.reproduce.seeds.compare_spread`), else a row that says
    what is missing and how to get it."""
    from privfl.config import read_yaml
    from privfl.reproduce.seeds import compare_spread, run_seeds, spread

    root = configs_root()
    rows = []
    absent_data: dict[str, str] = {}  # data section -> why it is not here
    for run in runs:
        def missing(why: str, run: PaperRun = run) -> Row:
            return compare(run.quantity, run.source, run.paper, None, tolerance=None,
                           reason=f"not run: {why}", kind="training")

        path = None if root is None else root / run.config
        if path is None or not path.is_file():
            rows.append(missing(f"configs/{run.config} is not here (the configs/ folder of a "
                                "source checkout of privfl)"))
            continue
        raw = read_yaml(path)
        config = _config(raw, run.overrides)
        key = config.data.model_dump_json()
        if key not in absent_data:
            absent_data[key] = _missing_data(config)
        if absent_data[key]:
            rows.append(missing(f"the data are not on this machine: {absent_data[key]}"))
            continue
        if dry_run:
            rows.append(missing(f"dry run (data here; about {_hours(run.hours)} per seed on 2 "
                                f"CPU cores, {seeds} seeds)"))
            continue
        results = run_seeds(raw, seeds, None if out is None else Path(out) / "runs",
                            overrides=run.overrides, progress=progress)
        values = [_value(run, result) for result in results]
        hours = sum(result.seconds for result in results) / 3600
        if any(value is None or not math.isfinite(value) for value in values):
            rows.append(missing(f"a seed did not report {run.metric}: {values}"))
            continue
        rows.append(compare_spread(
            run.quantity, run.source, run.paper, spread(results, lambda r, run=run: _value(run, r)),
            scale=run.substitute or None,
            reason=f"the paper's clients, rounds and model ({hours:.1f} h)"))
    return rows


def reproduce_with_training(
    rep: Any, scale: str, out: Path | None, *, accounting: Callable[[Any], None],
    quick: Callable[[Any, Path | None, Progress | None, int], None],
    paper: Callable[[], Sequence[PaperRun]], unwired: str, training: bool, dry_run: bool,
    progress: Progress | None, seeds: int) -> Any:
    """A paper's reproduction ``rep`` (:class:`~privfl.reproduce.rows.Reproduction`) with its
    accounting rows, then its quick training at ``seeds`` seeds (``scale`` quick;
    :mod:`privfl.reproduce.seeds`) or its paper-scale runs and plan (``scale`` paper;
    ``unwired``: the note on the runs that are not wired)."""
    accounting(rep)
    if training and scale == "quick":
        quick(rep, out, progress, seeds)
    if scale == "paper":
        runs = paper()
        rep.plan = paper_plan(runs)
        if training:
            rep.add(paper_rows(runs, out, dry_run=dry_run, progress=progress, seeds=seeds))
        rep.notes.append(unwired)
    return rep

