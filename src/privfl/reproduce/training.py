"""Training runs of a reproduction: quick runs from built-in configurations, paper-scale runs from
the shipped ``configs/<paper>/`` files, both through the experiment runner
(:class:`privfl.runs.experiment.Experiment`), the path of ``privfl run``.

A quick run is a configuration (a mapping) small enough for seconds to a minute on two CPU cores,
on built-in or Debian data (:mod:`.runner`), repeated over seeds (:mod:`.seeds`: every training
row is judged by the seeds' interval). A paper-scale run (:class:`PaperRun`) names a shipped
configuration, the paper's quantity it measures, what it costs, its data and the offline
fallback; :func:`paper_rows` runs those whose data are on this machine at several seeds, or only
plans them (``dry_run``), and a run whose data cannot be had offline becomes a row that says how
to get them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfl.reproduce.rows import Row, compare
from privfl.reproduce.runner import Progress, QuickRun, run_config, training_config
from privfl.reproduce.seeds import PERCENT, ROUNDS, compare_spread, run_seeds, spread

__all__ = ["PaperRun", "QuickRun", "configs_root", "paper_plan", "paper_rows", "run_config"]

def configs_root() -> Path | None:
    """The ``configs/`` folder of a source checkout (next to ``src/``), or None."""
    root = Path(__file__).resolve().parents[3] / "configs"
    return root if root.is_dir() else None


@dataclass(frozen=True)
class PaperRun:
    """One paper-scale training run: a shipped configuration and the paper's number it measures.

    ``config`` is relative to ``configs/``; ``overrides`` are ``key=value`` settings on top;
    ``metric`` a key of the summary's ``final`` section (an accuracy, compared in percent) or
    ``"rounds_to_target"``; ``paper`` the value as printed; ``hours`` the estimated time on two
    CPU cores (``gpu``: the paper used a GPU, one is advised). ``substitute`` says why the
    configuration's data differ from the paper's (then the row cannot match); ``fallback``
    what runs instead when the paper's data cannot be had offline (a substitute, said in the
    plan and in the row of a run that is not here)."""

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
    fallback: str = ""

    def line(self) -> str:
        device = "GPU advised" if self.gpu else "CPU"
        data = f"{self.paper_dataset}" + (f" (here: {self.substitute})" if self.substitute else "")
        sets = "".join(f" --set {o}" for o in self.overrides)
        return (f"privfl run configs/{self.config}{sets}: about {_hours(self.hours)} per seed on "
                f"2 CPU cores ({device}); data: {data}"
                + (f"; fallback: {self.fallback}" if self.fallback else "")
                + f"; measures {self.quantity} ({self.source}, the paper: {self.paper})")


def _hours(hours: float) -> str:
    return f"{hours * 60:.0f} min" if hours < 1 else f"{hours:.1f} h"


def paper_plan(runs: Sequence[PaperRun], seeds: int = 1) -> list[str]:
    """One line per paper-scale run, and the total time at ``seeds`` seeds."""
    total = sum(run.hours for run in runs) * seeds
    return [run.line() for run in runs] + [
        f"total: {len(runs)} runs x {seeds} seeds, about {_hours(total)} on 2 CPU cores"]


def _limits(run: PaperRun) -> tuple[float, float]:
    """The range of ``run``'s measured value: rounds (at least 1) or a percentage."""
    return ROUNDS if run.metric == "rounds_to_target" else PERCENT


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


def paper_rows(runs: Sequence[PaperRun], out: Path | None, *, dry_run: bool,
               progress: Progress | None = None, seeds: int = 2) -> list[Row]:
    """Rows of the paper-scale runs: run each whose configuration and data are here at
    ``seeds`` seeds (with ``dry_run`` only check that they are; the row judges the paper's value
    by the seeds' interval, :func:`privfl.reproduce.seeds.compare_spread`), else a row that says
    what is missing and how to get it."""
    from privfl.config import read_yaml

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
        config = training_config(raw, run.overrides)
        key = config.data.model_dump_json()
        if key not in absent_data:
            absent_data[key] = _missing_data(config)
        if absent_data[key]:
            rows.append(missing(f"the data are not on this machine: {absent_data[key]}"
                                + (f"; fallback: {run.fallback}" if run.fallback else "")))
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
            run.quantity, run.source, run.paper,
            spread(results, lambda r, run=run: _value(run, r), _limits(run)),
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
        rep.plan = paper_plan(runs, seeds)
        if training:
            rep.add(paper_rows(runs, out, dry_run=dry_run, progress=progress, seeds=seeds))
        rep.notes.append(unwired)
    return rep

