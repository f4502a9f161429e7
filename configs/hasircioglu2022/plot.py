"""Accuracy curves of the Hasircioglu and Gunduz 2022 runs (the paper's Figures 6-7, scaled).

``python configs/hasircioglu2022/plot.py RUNS_DIR OUT_DIR`` reads ``RUNS_DIR/fmnist-6.x-*/``
(run directories written by ``privfl run``) and writes ``OUT_DIR/hasircioglu2022-6.x.png``: the
global model's test accuracy per iteration, one line per run, labelled with the scheme whose
calibrated noise it ran at, that noise and the server learning rate (from each run's
``config.yaml``); dashed for Theorem 4.1 (an estimate), dotted for the lr ablations.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import yaml


def _curve(run: Path) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for line in (run / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        value = row.get("global_accuracy")
        if isinstance(value, float) and math.isfinite(value):
            xs.append(row["round"])
            ys.append(100 * value)
    return xs, ys


COLOURS = {"nonprivate": "black", "per-s1-convexity": "tab:red", "theorem-4.1": "tab:purple",
           "wcs": "tab:blue", "ols": "tab:green"}


def _label(run: Path) -> tuple[str, str, str]:
    """Legend text, line style and colour of a run."""
    config = yaml.safe_load((run / "config.yaml").read_text())
    lr = config["federated"]["server_lr"]
    if not config["privacy"]["enabled"]:
        return f"non-private, lr {lr:g}", "-", COLOURS["nonprivate"]
    scheme = run.name.split("-", 2)[2].replace(f"-lr{lr:g}", "")
    z = config["privacy"]["noise_multiplier"]
    kind = " (estimate)" if scheme == "theorem-4.1" else ""
    style = "--" if scheme == "theorem-4.1" else (":" if "-lr" in run.name else "-")
    return f"{scheme}{kind}: z = {z:.3g}, lr {lr:g}", style, COLOURS[scheme]


def main(argv: list[str] | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        raise SystemExit("usage: plot.py RUNS_DIR OUT_DIR")
    runs, out = Path(args[0]), Path(args[1])
    for scenario in ("6.1", "6.2"):
        found = sorted(p for p in runs.glob(f"fmnist-{scenario}-*") if (p / "config.yaml")
                       .is_file())
        if not found:
            continue
        fig = Figure(figsize=(9.0, 4.4), dpi=110, layout="constrained")
        ax = fig.add_subplot()
        for run in found:
            label, style, colour = _label(run)
            ax.plot(*_curve(run), style, color=colour, label=label, marker=".")
        ax.set_xlabel("iteration")
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.set_title(f"DP-DSGD with random participation, section {scenario} scaled to "
                     "Fashion-MNIST\nnoise calibrated by each scheme for (0.015, 1e-6) per "
                     "iteration", fontsize=9)
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
        fig.savefig(out / f"hasircioglu2022-{scenario}.png")


if __name__ == "__main__":
    main()
