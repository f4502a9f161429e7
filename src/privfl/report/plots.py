"""PNG plots of a run's per-round metrics (matplotlib with the Agg backend; no display).

Generic over algorithms: :func:`plot_accuracy` draws the metrics an algorithm declares
(``metric_labels``), :func:`plot_privacy` one line per (accountant, scope) of the per-round
``privacy`` entries (:func:`privfl.fl.algorithms.base.privacy_entries`), dashed for estimates,
and any Gaussian-DP mu on the right.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_accuracy", "plot_privacy", "privacy_series"]


def _figure():
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    return Figure(figsize=(7.0, 4.2), dpi=110, layout="constrained")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value
    )


def _series(metrics: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for row in metrics:
        value = row.get(key)
        if _number(value):
            xs.append(int(row["round"]))
            ys.append(float(value))
    return xs, ys


def privacy_series(
    metrics: Sequence[dict[str, Any]], field: str = "epsilon"
) -> dict[tuple[str, str, str], tuple[list[int], list[float]]]:
    """``(method, kind, scope) -> (rounds, values of field)`` from the rows' privacy entries."""
    series: dict[tuple[str, str, str], tuple[list[int], list[float]]] = {}
    for row in metrics:
        for entry in row.get("privacy", ()) or ():
            if not isinstance(entry, Mapping) or not _number(entry.get(field)):
                continue
            key = (str(entry.get("method")), str(entry.get("kind")), str(entry.get("scope", "")))
            xs, ys = series.setdefault(key, ([], []))
            xs.append(int(row["round"]))
            ys.append(float(entry[field]))
    return series


def _label(method: str, kind: str, scope: str) -> str:
    return f"{method}{', ' + scope if scope else ''} ({kind})"


def plot_accuracy(
    metrics: Sequence[dict[str, Any]], path: str | Path,
    labels: Mapping[str, str] | None = None, *, title: str = "", target: float | None = None,
) -> Path:
    """Each metric of ``labels`` (key -> legend text) per round; the first ones solid."""
    labels = labels or {"global_accuracy": "global model"}
    fig = _figure()
    ax = fig.add_subplot()
    for index, (key, label) in enumerate(labels.items()):
        xs, ys = _series(metrics, key)
        if xs:
            ax.plot(xs, ys, "-" if index < 2 else ":", label=label,
                    marker="." if len(xs) < 60 else None)
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
    _save(fig, path)
    return path


def plot_privacy(
    metrics: Sequence[dict[str, Any]], path: str | Path, *, delta: float | None = None,
    title: str = "",
) -> Path:
    """Epsilon at delta of every accountant and scope (labelled bound/estimate) per round, and
    the Gaussian-DP mu of the results that carry one."""
    fig = _figure()
    left = fig.add_subplot(1, 2, 1)
    right = fig.add_subplot(1, 2, 2)
    epsilons = privacy_series(metrics)
    for (method, kind, scope), (xs, ys) in epsilons.items():
        left.plot(xs, ys, "-" if kind == "bound" else "--", label=_label(method, kind, scope))
    left.set_xlabel("round")
    left.set_ylabel(f"epsilon at delta = {delta:g}" if delta else "epsilon")
    left.set_yscale("log" if any(min(ys) > 0 and max(ys) / min(ys) > 100
                                 for _, ys in epsilons.values()) else "linear")
    left.grid(alpha=0.3)
    if epsilons:
        left.legend(loc="upper left", fontsize=7)
    else:
        left.text(0.5, 0.5, "non-private run:\nno guarantee", ha="center", va="center",
                  transform=left.transAxes)
    mus = privacy_series(metrics, "mu")
    for (method, kind, scope), (xs, ys) in mus.items():
        right.plot(xs, ys, "--" if kind != "bound" else "-", label=_label(method, kind, scope))
    if mus:
        right.legend(loc="upper left", fontsize=7)
    else:
        right.text(0.5, 0.5, "no Gaussian-DP mu reported", ha="center", va="center",
                   transform=right.transAxes)
    right.set_xlabel("round")
    right.set_ylabel("mu (Gaussian DP)")
    right.grid(alpha=0.3)
    fig.suptitle(title or "privacy spent per round", fontsize=10)
    path = Path(path)
    _save(fig, path)
    return path


def _save(fig: Any, path: Path) -> None:
    """Save ``fig`` to ``path`` through a temporary file (never through a link at ``path``)."""
    from privfl.report.rundir import write_atomically

    write_atomically(path, lambda stream: fig.savefig(stream, format=path.suffix[1:] or "png"))
