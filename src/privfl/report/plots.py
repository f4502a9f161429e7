"""PNG plots of a run's per-round metrics (matplotlib with the Agg backend; no display)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_accuracy", "plot_privacy"]

_LABELS = {
    "epsilon_pld": "pld, weak (bound)",
    "epsilon_rdp": "rdp, weak (bound)",
    "epsilon_gdp_clt": "gdp-clt, weak (estimate)",
}


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    return Figure(figsize=(7.0, 4.2), dpi=110, layout="constrained")


def _series(metrics: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for row in metrics:
        value = row.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
            value
        ):
            xs.append(int(row["round"]))
            ys.append(float(value))
    return xs, ys


def plot_accuracy(
    metrics: Sequence[dict[str, Any]], path: str | Path, *, title: str = "",
    target: float | None = None,
) -> Path:
    """Personalised (spec A10) and global accuracy per round."""
    fig = _figure()
    ax = fig.add_subplot()
    for key, label, style in (
        ("personalised_accuracy", "personalised (mean over clients)", "-"),
        ("global_accuracy", "global model (mean over clients)", "-"),
        ("personalised_accuracy_cohort", "personalised, this round's cohort", ":"),
    ):
        xs, ys = _series(metrics, key)
        if xs:
            ax.plot(xs, ys, style, label=label, marker="." if len(xs) < 60 else None)
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=0.8, label="target")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no rounds ran", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title or "accuracy per round", fontsize=10)
    path = Path(path)
    fig.savefig(path)
    return path


def plot_privacy(
    metrics: Sequence[dict[str, Any]], path: str | Path, *, delta: float | None = None,
    title: str = "",
) -> Path:
    """Epsilon at delta (each accountant, labelled bound/estimate) and mu_max per round."""
    fig = _figure()
    left = fig.add_subplot(1, 2, 1)
    right = fig.add_subplot(1, 2, 2)
    plotted = False
    for key, label in _LABELS.items():
        xs, ys = _series(metrics, key)
        if xs:
            left.plot(xs, ys, "--" if "estimate" in label else "-", label=label)
            plotted = True
    left.set_xlabel("round")
    left.set_ylabel(f"epsilon at delta = {delta:g}" if delta else "epsilon")
    left.grid(alpha=0.3)
    if plotted:
        left.legend(loc="upper left", fontsize=8)
    else:
        left.text(0.5, 0.5, "non-private run:\nno guarantee", ha="center", va="center",
                  transform=left.transAxes)
    xs, ys = _series(metrics, "mu_max")
    if xs:
        right.plot(xs, ys, "--", color="tab:orange", label="mu_max, weak (CLT estimate)")
        right.legend(loc="upper left", fontsize=8)
    right.set_xlabel("round")
    right.set_ylabel("mu (Theorem 2)")
    right.grid(alpha=0.3)
    fig.suptitle(title or "privacy spent per round (record level, replace-one)", fontsize=10)
    path = Path(path)
    fig.savefig(path)
    return path
