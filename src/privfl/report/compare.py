"""Side-by-side comparison of finished (or partial) run directories at the same rounds.

Used to set a private run against its non-private baseline (seed 000 Figure 1 / Table 1): the
table holds, at each compared round, every run's personalised and global accuracy (mean over
clients' own test sets) and, for private runs, the record-level guarantee reached by then
(``epsilon_pld``: PLD bound; ``mu_max``: Theorem 2 CLT estimate).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfl._validation import check_int
from privfl.config.loader import load_config
from privfl.report.card import format_number, format_percent
from privfl.report.plots import _figure, _series
from privfl.report.rundir import RunDirectory

__all__ = ["RunRecord", "load_run", "common_rounds", "comparison_rows", "comparison_markdown",
           "plot_comparison"]


@dataclass(frozen=True)
class RunRecord:
    """What a comparison needs from one run directory."""

    path: Path
    name: str
    private: bool
    delta: float | None
    sampling: str
    metrics: tuple[dict[str, Any], ...]

    def at(self, round_index: int) -> dict[str, Any]:
        for row in self.metrics:
            if row["round"] == round_index:
                return row
        done = sorted(row["round"] for row in self.metrics)
        raise ValueError(f"round = {round_index!r} is not a completed round of run {self.name!r}: "
                         f"must be one of its rounds {done[0]}..{done[-1]}")


def load_run(path: str | Path) -> RunRecord:
    """Read ``config.yaml`` and ``metrics.jsonl`` of a run directory."""
    run_dir = RunDirectory(path)
    if not run_dir.config.is_file():
        raise ValueError(f"run directory = {str(path)!r} is not a privfl run: no config.yaml")
    config = load_config(run_dir.config)
    metrics = run_dir.read_metrics()
    if not metrics:
        raise ValueError(f"run directory = {str(path)!r} has no completed rounds "
                         "(metrics.jsonl is empty or missing)")
    private = config.privacy.enabled
    t = config.training
    sampling = (f"local batches {t.sampling} (B = {t.batch_size}), clients Poisson "
                f"(p = {config.federated.client_rate:g})")
    return RunRecord(Path(path), config.name, private,
                     config.privacy.delta if private else None, sampling, tuple(metrics))


def common_rounds(runs: Sequence[RunRecord], every: int = 1) -> list[int]:
    """Rounds completed by every run: every ``every``-th one, always the first and the last."""
    check_int("every", every, minimum=1)
    if len(runs) < 1:
        raise ValueError("runs = [] is not allowed: must name at least one run directory")
    shared = set.intersection(*({row["round"] for row in run.metrics} for run in runs))
    if not shared:
        names = ", ".join(str(run.path) for run in runs)
        raise ValueError(f"runs = {names} share no completed round: nothing to compare")
    ordered = sorted(shared)
    chosen = [r for r in ordered if r % every == 0]
    return sorted({ordered[0], *chosen, ordered[-1]})


def _value(row: dict[str, Any], key: str) -> float:
    value = row.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return math.nan


def comparison_rows(runs: Sequence[RunRecord], rounds: Sequence[int]) -> list[dict[str, Any]]:
    """One dict per round: ``{"round": r, run name: {accuracies, epsilon_pld, mu_max}}``."""
    rows = []
    for r in rounds:
        row: dict[str, Any] = {"round": r}
        for run in runs:
            m = run.at(r)
            entry = {k: _value(m, k) for k in ("personalised_accuracy", "global_accuracy")}
            if run.private:
                entry["epsilon_pld"] = _value(m, "epsilon_pld")
                entry["mu_max"] = _value(m, "mu_max")
            row[run.name] = entry
        rows.append(row)
    return rows


def comparison_markdown(runs: Sequence[RunRecord], rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table: accuracies (%) of every run per round, privacy of the private runs."""
    lines = ["| run | directory | private | sampling | rounds completed | delta |",
             "|---|---|---|---|---|---|"]
    for run in runs:
        delta = format_number(run.delta) if run.private else "-"
        lines.append(f"| {run.name} | `{run.path}` | {'yes' if run.private else 'no'} | "
                     f"{run.sampling} | {run.metrics[-1]['round']} | {delta} |")
    header = ["round"]
    for run in runs:
        header += [f"{run.name} personalised %", f"{run.name} global %"]
        if run.private:
            header += [f"{run.name} eps (pld bound)", f"{run.name} mu_max (estimate)"]
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        cells = [str(row["round"])]
        for run in runs:
            entry = row[run.name]
            cells += [format_percent(entry[key], suffix="")
                      for key in ("personalised_accuracy", "global_accuracy")]
            if run.private:
                cells += [format_number(entry["epsilon_pld"]), format_number(entry["mu_max"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Accuracy: mean over clients of the test accuracy on each client's own test "
              "set (personalised: the client's local model; global: the server model). "
              "Privacy: record level, replace-one neighbours, weak federated f-DP (one other "
              "client's view); eps is the PLD bound at delta, mu_max the seed 000 Theorem 2 "
              "CLT estimate."]
    return "\n".join(lines) + "\n"


def plot_comparison(runs: Sequence[RunRecord], path: str | Path, *, title: str = "") -> Path:
    """Personalised (solid) and global (dashed) accuracy per round of every run."""
    fig = _figure()
    ax = fig.add_subplot()
    for index, run in enumerate(runs):
        color = f"C{index % 10}"
        for key, style, label in (("personalised_accuracy", "-", "personalised"),
                                  ("global_accuracy", "--", "global")):
            xs, ys = _series(run.metrics, key)
            if xs:
                ax.plot(xs, ys, style, color=color, label=f"{run.name}: {label}")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy (mean over clients)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title(title or "accuracy per round", fontsize=10)
    path = Path(path)
    fig.savefig(path)
    return path
