"""The accountants' share of every demo's wall time, before and after a change.

Run ``python benchmarks/accounting_share.py [--rounds N] [--before REV]`` from the repository
root. For every demo config (``configs/demo.yaml`` and ``configs/demo-*.yaml``, their own
number of rounds) it builds the experiment (no run directory), computes the planned privacy as
``privfl run`` does before its first round (untimed: it also pays the one-off imports), runs the
first ``N`` rounds (default 4; ``--rounds 0``: the config's own ``federated.rounds``, the whole
run) of ``run_round`` and times, inside them, every call of the
privacy plan's ``results`` and ``round_results`` (the per-round accounting: what summary.json
reports as ``accounting_seconds``). The timer wraps the plan class's methods, so it measures any
version of the code alike.

``--before REV`` also measures the sources of git revision REV (default: ``main``), checked out
with ``git worktree add --detach`` into a temporary folder that is removed afterwards, in the
same process environment and one after the other (each measurement in its own interpreter, with
``PYTHONPATH`` set to that tree's ``src``). It prints, per demo, the wall time of the rounds,
the accounting seconds and their share, before and after, and the ratio of accounting times.
Planned cards (the privacy of the configured number of rounds, computed once before the loop)
are not counted: ``wall_seconds`` does not count them either.

The ``floor`` column is the least any exact per-round PLD composition at the same grid could
cost: every FFT composition the rounds ran (``pld_compose._fft_compose``) is recorded with its
length N, and one inverse real FFT of each length is timed afterwards (the median of 5). Even
an accountant that kept each step's spectrum and composed a round by one complex product would
still pay that inverse transform to read epsilon off the composed PMF, so a floor above 10 % of
the wall time means the target cannot be met by computing every configured method every round.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMOS = ["demo.yaml", "demo-dp-dsgd.yaml", "demo-dp-fedavg.yaml", "demo-insdp-fedavg.yaml",
         "demo-insdp-fedsgd.yaml", "demo-projected-sgd.yaml", "demo-dp-ftrl.yaml",
         "demo-bandmf.yaml"]
#: demos whose data are optional (Fashion-MNIST): skipped, and said so, where they are absent
OPTIONAL_DATA = {"demo-dp-ftrl.yaml", "demo-bandmf.yaml"}


def _inverse_fft_seconds(size: int) -> float:
    """Median seconds of one inverse real FFT of length ``size`` (scipy, as pld_compose)."""
    import numpy as np
    from scipy import fft as sp_fft

    spectrum = np.exp(1j * np.linspace(0.0, 1.0, size // 2 + 1))
    times = []
    for _ in range(5):
        started = time.perf_counter()
        sp_fft.irfft(spectrum, size)
        times.append(time.perf_counter() - started)
    return sorted(times)[2]


def _record_fft_lengths(sizes: list[int]) -> None:
    """Record the length of every FFT composition (any version of pld_compose that has
    ``_fft_compose(tilted, size)``; nothing is recorded for one that has not)."""
    try:
        from privfl.accounting.pld import compose as pld_compose
    except ImportError:
        return
    original = getattr(pld_compose, "_fft_compose", None)
    if original is None:
        return

    def recorded(tilted, size):
        sizes.append(int(size))
        return original(tilted, size)

    pld_compose._fft_compose = recorded


def measure(config: str, rounds: int) -> dict:
    """Wall and accounting seconds of ``rounds`` rounds of ``config`` (in this interpreter),
    and the inverse-FFT floor of its PLD compositions."""
    from privfl.config.loader import load_config
    from privfl.runs.experiment import Experiment
    from privfl.runs.rundir import RunDirectory

    cfg = load_config(ROOT / "configs" / config)
    rounds = rounds or cfg.federated.rounds  # 0: the whole run, as privfl run runs it
    with tempfile.TemporaryDirectory() as tmp:
        experiment = Experiment(cfg, RunDirectory(Path(tmp) / "run"))
    experiment.planned_privacy()  # as privfl run does before round 1 (not timed)
    algorithm = experiment.algorithm
    plan_class = type(algorithm.plan)
    spent = [0.0]

    def timer(original):
        def timed(self, r):
            started = time.perf_counter()
            try:
                return original(self, r)
            finally:
                spent[0] += time.perf_counter() - started
        return timed

    # a per-round row asks round_results where the plan has it (privfl.algorithms.cadence)
    for name in ("results", "round_results"):
        if hasattr(plan_class, name):
            setattr(plan_class, name, timer(getattr(plan_class, name)))
    sizes: list[int] = []
    _record_fft_lengths(sizes)
    started = time.perf_counter()
    for _ in range(rounds):
        algorithm.run_round()
    wall = time.perf_counter() - started
    floor = sum(_inverse_fft_seconds(size) for size in sizes)
    return {"config": config, "wall": wall, "accounting": spent[0], "floor": floor,
            "compositions": len(sizes), "largest_fft": max(sizes, default=0)}


def _run_tree(src: Path, config: str, rounds: int) -> dict | None:
    """One measurement in its own interpreter on the sources ``src``; None for a demo of
    :data:`OPTIONAL_DATA` whose data are absent."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--one", config, "--rounds", str(rounds)],
                         env=env, capture_output=True, text=True, cwd=ROOT)
    if out.returncode and config in OPTIONAL_DATA and "DatasetNotFoundError" in out.stderr:
        return None
    if out.returncode:
        raise RuntimeError(f"{config}: the measurement failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4,
                        help="rounds per demo (0: each config's own federated.rounds)")
    parser.add_argument("--before", default=None, help="git revision to compare with (main)")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.rounds)))
        return
    trees = {"after": ROOT / "src"}
    tmp = None
    if args.before:
        tmp = Path(tempfile.mkdtemp(prefix="privfl-before-"))
        subprocess.run(["git", "worktree", "add", "--detach", str(tmp / "tree"), args.before],
                       cwd=ROOT, check=True, capture_output=True)
        trees = {"before": tmp / "tree" / "src", **trees}
    try:
        what = f"{args.rounds} rounds per demo" if args.rounds else "each demo's whole run"
        print(f"{what}; seconds (share of the rounds' wall time)")
        header = f"{'demo':28s}" + "".join(f"{name + ' wall':>13s}{name + ' acct':>20s}"
                                           for name in trees)
        print(header + ("  acct after/before" if len(trees) == 2 else "")
              + "  floor (share), compositions, largest FFT [after]")
        for config in DEMOS:
            rows = {name: _run_tree(src, config, args.rounds) for name, src in trees.items()}
            if any(row is None for row in rows.values()):
                print(f"{config:28s}  skipped: its optional data (Fashion-MNIST) are absent")
                continue
            line = f"{config:28s}"
            for row in rows.values():
                share = row["accounting"] / row["wall"]
                line += f"{row['wall']:13.2f}{row['accounting']:11.2f} ({share:5.1%})"
            if len(rows) == 2:
                line += f"  {rows['after']['accounting'] / rows['before']['accounting']:.2f}"
            after = rows["after"]
            line += (f"  {after['floor']:.3f} ({after['floor'] / after['wall']:5.1%}), "
                     f"{after['compositions']}, {after['largest_fft']:,}")
            print(line, flush=True)
    finally:
        if tmp is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(tmp / "tree")],
                           cwd=ROOT, check=False, capture_output=True)


if __name__ == "__main__":
    main()
