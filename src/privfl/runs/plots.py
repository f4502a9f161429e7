"""PNG plots of a run's per-round metrics (matplotlib with the Agg backend; no display).

Generic over algorithms: :func:`plot_accuracy` draws the metrics an algorithm declares
(``metric_labels``), :func:`plot_privacy` one line per (accountant, scope) of the per-round
``privacy`` entries (:func:`privfl.algorithms.base.privacy_entries`), dashed for estimates:
the headline's scopes in the first panel, the other scopes (e.g. a strong scope ten times
larger) in a second one, any Gaussian-DP mu in the last; each panel's y axis is logarithmic
when its values span more than a factor 30. :func:`plot_health` draws the health signals
(:func:`health_keys`: training loss, clipped fraction, ...), one small panel each, titled
"outside the guarantee" where the run's classification says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["HEALTH_SKIP", "health_keys", "plot_accuracy", "plot_health", "plot_privacy",
           "privacy_series"]

#: per-round keys that are not health signals: the index and the privacy numbers
HEALTH_SKIP = frozenset({"round", "epsilon", "mu", "released_rounds"})


def figure():
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
    fig = figure()
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


def _log_if_wide(ax: Any, series: Sequence[Sequence[float]]) -> None:
    values = [v for ys in series for v in ys if v > 0]
    wide = bool(values) and max(values) / min(values) > 30
    ax.set_yscale("log" if wide else "linear")


def _epsilon_panel(ax: Any, epsilons: Mapping[tuple[str, str, str], tuple[list[int],
                   list[float]]], ylabel: str, title: str) -> None:
    for (method, kind, scope), (xs, ys) in epsilons.items():
        # markers: a series logged on some rounds only (privacy_methods) may be one point
        ax.plot(xs, ys, "-" if kind == "bound" else "--", label=_label(method, kind, scope),
                marker="." if len(xs) < 60 else None)
    _log_if_wide(ax, [ys for _, ys in epsilons.values()])
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    if epsilons:
        ax.legend(loc="upper left", fontsize=7)
    else:
        ax.text(0.5, 0.5, "non-private run:\nno guarantee", ha="center", va="center",
                transform=ax.transAxes)


def plot_privacy(
    metrics: Sequence[dict[str, Any]], path: str | Path, *, delta: float | None = None,
    title: str = "", headline_scopes: Sequence[str] = (),
) -> Path:
    """Epsilon at delta of every accountant and scope (labelled bound/estimate) per round, and
    the Gaussian-DP mu of the results that carry one. ``headline_scopes``: the scopes of the
    headline (first panel); the others get a panel of their own."""
    epsilons = privacy_series(metrics)
    scopes = set(headline_scopes)
    main = {k: v for k, v in epsilons.items() if not scopes or k[2] in scopes}
    other = {k: v for k, v in epsilons.items() if k not in main}
    mus = privacy_series(metrics, "mu")
    fig = figure()
    panels = 2 + bool(other)
    fig.set_size_inches(4.2 * panels, 4.2)
    ylabel = f"epsilon at delta = {delta:g}" if delta else "epsilon"
    _epsilon_panel(fig.add_subplot(1, panels, 1), main, ylabel,
                   f"headline scope{'s' if len(scopes) > 1 else ''} ({', '.join(sorted(scopes))})"
                   if scopes and other else "epsilon")
    if other:
        _epsilon_panel(fig.add_subplot(1, panels, 2), other, ylabel, "other scopes")
    right = fig.add_subplot(1, panels, panels)
    for (method, kind, scope), (xs, ys) in mus.items():
        right.plot(xs, ys, "--" if kind != "bound" else "-", label=_label(method, kind, scope),
                   marker="." if len(xs) < 60 else None)
    if mus:
        right.legend(loc="upper left", fontsize=7)
        _log_if_wide(right, [ys for _, ys in mus.values()])
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


def health_keys(metrics: Sequence[Mapping[str, Any]], accuracy: Sequence[str]) -> list[str]:
    """The numeric per-round keys that are neither accuracies nor privacy numbers (first-seen
    order): the run's health signals."""
    skip = HEALTH_SKIP | set(accuracy)
    return [key for key in dict.fromkeys(k for row in metrics for k in row)
            if key not in skip and any(_number(row.get(key)) for row in metrics)]


def plot_health(
    metrics: Sequence[dict[str, Any]], path: str | Path, keys: Sequence[str], *,
    covered: Mapping[str, bool], title: str = "",
) -> Path:
    """One small panel per key of ``keys`` (per round), titled "outside the guarantee" unless
    ``covered[key]``."""
    from matplotlib.ticker import MaxNLocator

    fig = figure()
    columns = min(3, max(1, len(keys)))
    lines = max(1, math.ceil(len(keys) / columns))
    fig.set_size_inches(3.4 * columns, 2.6 * lines + 0.5)
    for index, key in enumerate(keys):
        ax = fig.add_subplot(lines, columns, index + 1)
        xs, ys = _series(metrics, key)
        ax.plot(xs, ys, "-", marker="." if len(xs) < 60 else None)
        inside = covered.get(key, False)
        ax.set_title(key if inside else f"{key}\n(outside the guarantee)", fontsize=8,
                     color="black" if inside else "#b26a00")
        ax.set_xlabel("round", fontsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if not keys:
        ax = fig.add_subplot()
        ax.text(0.5, 0.5, "no health signals logged", ha="center", va="center",
                transform=ax.transAxes)
    fig.suptitle(title or "health signals per round", fontsize=10)
    path = Path(path)
    _save(fig, path)
    return path


def _save(fig: Any, path: Path) -> None:
    """Save ``fig`` to ``path`` through a temporary file (never through a link at ``path``)."""
    from privfl.runs.rundir import write_atomically

    write_atomically(path, lambda stream: fig.savefig(stream, format=path.suffix[1:] or "png"))
