"""Cohorts of thousands: peak memory and client-updates/s against the cohort size.

Each measurement is one ``privfl run`` of one DP-FedAvg round (the command line of issue 24,
Zheng et al. 2021's MNIST CNN, 1.2 M parameters) in a fresh Python process, which reports its
own peak resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) and the round's wall
time from ``metrics.jsonl``::

    privfl run configs/demo-dp-fedavg.yaml --set data.dataset=fashion-mnist
        --set model.name=zheng2021-mnist-cnn --set federated.client_rate=0.5
        --set federated.rounds=1 --set training.local_steps=1 --set training.batch_size=2
        --set data.test_size=0 --set data.train_size=2 --set federated.adaptive_clipping=false
        --set data.clients=<2 x cohort>

(Fashion-MNIST, 28x28 like MNIST: the 5,000 images of ``mnist-5k`` hold 2,500 clients of two
records, too few for a cohort of 5,000.) client-updates/s = realised cohort / seconds of the
round's local work (training, clipping and summing the cohort; "round s" adds the evaluation on
the 10,000 test images and the accounting, which do not grow with the cohort).
The population row runs 100,000 clients of a LEAF-style partition (``data.partition:
leaf-synthetic``: many small clients of unequal sizes over one shared pool) with 1,000 per
round (fixed-size cohorts).

Targets (issue 24): peak at 5,000 <= 1.3 x peak at 50; client-updates/s within 20 % of the
cohort-50 figure. Ratios are printed against the cohort-50 row of the same invocation.

``--prifedsync N`` adds two PriFedSync rows (Zheng et al. 2021, the same CNN, Adam, so three
``d``-rows of per-client state: the helper model and two moments) for a population of N clients
of two records with about 10 sampled per round: the per-client store in memory
(``run.memory_budget`` above the store's size) and memory-mapped (a budget below it,
:mod:`privfl.fl.client_store`). Each round ends with the run's checkpoint. Besides ``ru_maxrss``
these rows print the peak *anonymous* memory (``RssAnon`` of ``/proc/self/status``, sampled
every 10 ms): the pages of a memory-mapped file count in the resident size while they are
cached, but they are page cache the kernel writes back and reclaims under pressure, not memory
the process holds.

``--dp-dsgd R`` adds DP-DSGD rows (Hasircioglu and Gunduz 2022, the same CNN, one iteration of
about R sampled records over 200 Fashion-MNIST clients) at ``run.memory_budget`` 64 MiB and
1 GiB: the summation units of 64 records per engine call follow the budget
(:mod:`privfl.fl.unit_sums`), so the peak should too; "cohort" is then the realised records.

Run: ``python benchmarks/scale.py`` measures the short default, cohorts of 50, 200 and 1,000
(a few minutes on a quiet 2-core machine); ``--full`` adds issue 24's big rows, the cohort of
5,000 and the population of 100,000 (``--population N --per-round M`` for another one; about
20 minutes more here). ``--cohorts 50 5000`` picks rows, ``--budget 512MiB`` sets
``run.memory_budget``, ``--prifedsync 200`` adds the PriFedSync rows. Peak memory is what a
loaded machine still measures reliably; the speed column needs a quiet one (the load average
is printed at the start and the end).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE = [
    "configs/demo-dp-fedavg.yaml", "--set", "data.dataset=fashion-mnist",
    "--set", "model.name=zheng2021-mnist-cnn", "--set", "federated.rounds=1",
    "--set", "training.local_steps=1", "--set", "training.batch_size=2",
    "--set", "data.test_size=0", "--set", "federated.adaptive_clipping=false",
]


def cohort_args(cohort: int) -> list[str]:
    """Poisson cohorts of expected size ``cohort`` from ``2 cohort`` clients of 2 records."""
    return BASE + ["--set", "data.train_size=2", "--set", "federated.client_rate=0.5",
                   "--set", f"data.clients={2 * cohort}"]


def population_args(clients: int, per_round: int) -> list[str]:
    """``per_round`` of ``clients`` LEAF-style clients (fixed-size cohorts)."""
    return BASE + ["--set", "data.partition=leaf-synthetic", "--set", f"data.clients={clients}",
                   "--set", "federated.client_sampling=fixed-size",
                   "--set", "federated.client_rate=null",
                   "--set", f"federated.cohort_size={per_round}"]


def prifedsync_args(clients: int) -> list[str]:
    """PriFedSync (Adam) over ``clients`` clients of 2 records, about 10 per round."""
    return ["configs/demo.yaml", "--set", "data.dataset=fashion-mnist",
            "--set", "model.name=zheng2021-mnist-cnn", "--set", "model.kwargs={}",
            "--set", "federated.rounds=1",
            "--set", "training.local_steps=1", "--set", "training.batch_size=2",
            "--set", "data.partition=iid", "--set", "data.train_size=2",
            "--set", "data.test_size=0", "--set", f"data.clients={clients}",
            "--set", f"federated.client_rate={min(1.0, 10 / clients)}"]


def dp_dsgd_args(records: int) -> list[str]:
    """One DP-DSGD iteration of about ``records`` records: 200 clients of ``records / 50``,
    p = q = 0.5."""
    return ["configs/demo-dp-dsgd.yaml", "--set", "data.dataset=fashion-mnist",
            "--set", "model.name=zheng2021-mnist-cnn", "--set", "model.kwargs={}",
            "--set", "federated.rounds=1", "--set", "data.clients=200",
            "--set", f"data.train_size={max(1, records // 50)}", "--set", "data.test_size=0",
            "--set", "federated.client_rate=0.5", "--set", "federated.record_rate=0.5"]


def _rss_anon() -> int:
    """Bytes of anonymous resident memory of this process (0 where /proc is missing)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _timed(cls, train: list[float]) -> None:
    local_work = cls.local_work

    def timed(self, cohort, **kwargs):  # the cohort's local work alone (no evaluation)
        begun = time.perf_counter()
        try:
            return local_work(self, cohort, **kwargs)
        finally:
            train[0] += time.perf_counter() - begun

    cls.local_work = timed


def child(args: list[str]) -> None:
    """Run ``privfl run`` in this process; print peak memory and the round's numbers."""
    from privfl.algorithms.dp_dsgd import DpDsgd
    from privfl.algorithms.dp_fedavg import DpFedAvg
    from privfl.algorithms.prifedsync import PriFedSync
    from privfl.cli.main import app

    train = [0.0]
    _timed(DpFedAvg, train)
    _timed(PriFedSync, train)
    _timed(DpDsgd, train)
    anon = [_rss_anon()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            anon[0] = max(anon[0], _rss_anon())

    threading.Thread(target=sample, daemon=True).start()
    out = Path(tempfile.mkdtemp(prefix="privfl-scale-")) / "run"
    started = time.perf_counter()
    try:
        app(["run", *args, "--out", str(out), "--no-progress"], standalone_mode=False)
    except SystemExit as exit_:  # typer exits 0 on success
        if exit_.code not in (0, None):
            raise
    wall = time.perf_counter() - started
    done.set()
    anon[0] = max(anon[0], _rss_anon())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    row = rows[-1]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    cohort = row["cohort_size"] if "cohort_size" in row else row["records"]
    print(json.dumps({"cohort": cohort, "round_s": row["seconds"], "wall_s": wall,
                      "train_s": train[0], "peak": peak, "anon": anon[0]}))


def measure(args: list[str], budget: str | None) -> dict:
    extra = ["--set", f"run.memory_budget={budget}"] if budget else []
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(args + extra)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--cohorts", type=int, nargs="+", default=None,
                        help="expected cohort sizes (default 50 200 1000; --full adds 5000)")
    parser.add_argument("--full", action="store_true",
                        help="issue 24's rows: cohorts 50 200 1000 5000 and the population")
    parser.add_argument("--population", type=int, default=None,
                        help="also a population of this many clients (--full: 100,000)")
    parser.add_argument("--per-round", type=int, default=1000)
    parser.add_argument("--no-population", action="store_true")
    parser.add_argument("--budget", default=None, help="run.memory_budget (default: privfl's)")
    parser.add_argument("--prifedsync", type=int, default=None,
                        help="also PriFedSync over this many clients, store in memory / mapped")
    parser.add_argument("--dp-dsgd", type=int, default=None, metavar="R",
                        help="also DP-DSGD, about R records an iteration, budgets 64MiB / 1GiB")
    opts = parser.parse_args()
    if opts.child:
        child(json.loads(opts.child))
        return
    if opts.cohorts is None:
        opts.cohorts = [50, 200, 1000, 5000] if opts.full else [50, 200, 1000]
    if opts.population is None and opts.full:
        opts.population = 100_000
    import torch

    print(f"zheng2021-mnist-cnn, DP-FedAvg, K = 1, B = 2, one round per process; torch "
          f"{torch.__version__}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"run.memory_budget = {opts.budget or 'default'}")
    print(f"{'run':>28} {'cohort':>7} {'peak MB':>8} {'round s':>8} {'train s':>8} "
          f"{'updates/s':>10} {'peak/ref':>9} {'speed/ref':>10}")
    ref = None
    runs = [(f"cohort ~{c} of {2 * c}", cohort_args(c)) for c in opts.cohorts]
    if opts.population and not opts.no_population:
        runs.append((f"population {opts.population:,}",
                     population_args(opts.population, opts.per_round)))
    for label, args in runs:
        r = measure(args, opts.budget)
        speed = r["cohort"] / r["train_s"]
        if ref is None:
            ref = (r["peak"], speed)
        print(f"{label:>28} {r['cohort']:>7} {r['peak'] / 1e6:>8.0f} {r['round_s']:>8.2f} "
              f"{r['train_s']:>8.2f} {speed:>10.1f} {r['peak'] / ref[0]:>9.2f} "
              f"{speed / ref[1]:>10.2f}", flush=True)
    if opts.prifedsync:
        store = opts.prifedsync * 3 * 1_199_882 * 4  # three rows of the CNN per client
        print(f"PriFedSync, {opts.prifedsync:,} clients: per-client store {store / 1e6:,.0f} MB")
        print(f"{'store':>28} {'cohort':>7} {'peak MB':>8} {'anon MB':>8} {'round s':>8} "
              f"{'wall s':>8}")
        for label, budget in (("in memory", f"{2 * store}"), ("memory-mapped", "256MiB")):
            r = measure(prifedsync_args(opts.prifedsync), budget)
            print(f"{label:>28} {r['cohort']:>7} {r['peak'] / 1e6:>8.0f} "
                  f"{r['anon'] / 1e6:>8.0f} {r['round_s']:>8.2f} {r['wall_s']:>8.2f}",
                  flush=True)
    if opts.dp_dsgd:
        print(f"DP-DSGD, one iteration of about {opts.dp_dsgd:,} records (units of 64)")
        print(f"{'run.memory_budget':>28} {'records':>7} {'peak MB':>8} {'round s':>8} "
              f"{'train s':>8} {'records/s':>10}")
        for budget in ("64MiB", "1GiB"):
            r = measure(dp_dsgd_args(opts.dp_dsgd), budget)
            print(f"{budget:>28} {r['cohort']:>7} {r['peak'] / 1e6:>8.0f} {r['round_s']:>8.2f} "
                  f"{r['train_s']:>8.2f} {r['cohort'] / r['train_s']:>10.1f}", flush=True)
    print(f"load average at end {os.getloadavg()[0]:.2f}; targets: peak/ref <= 1.3 at 5,000, "
          "speed/ref >= 0.8")


if __name__ == "__main__":
    main()
