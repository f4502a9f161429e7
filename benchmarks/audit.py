"""Cost of an empirical audit (``privfl audit run``, issue 47) against the same run without
canaries, all measured in this process.

Run ``python benchmarks/audit.py [--canaries 1000] [--only dp-fedavg,dp-ftrl,bandmf-fedavg]
[--set K=V ...]``. For each client-level demo (configs/demo-dp-fedavg.yaml: digits, 100
clients, 40 rounds; configs/demo-dp-ftrl.yaml and configs/demo-bandmf.yaml: 2,000 Fashion-MNIST
clients, 40 rounds; logistic regression everywhere) it times

(a) ``privfl run`` of the configuration (:class:`privfl.runs.experiment.Experiment`, into a
    temporary directory: training, evaluation, accounting, every file): what a user runs;
(b) the same rounds' training alone (cohort, local work, server step; no evaluation, no
    accounting, no files): the audit's own training minus the canaries;
(c) the audit: :func:`~privfl.runs.canary_audit.audit_config` with ``--canaries`` canary
    clients (training with the canaries, their scores, the statistics and the bound) plus
    writing audit.json and report.html,

and prints the seconds and the ratios (c)/(a) (goal <= 1.3) and (c)/(b). Each configuration's
dataset is built once before the timings (so that no timing pays a first read of the data).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import torch

from privfl.algorithms.builders import build_algorithm, build_dataset
from privfl.cli.audit_run import sources
from privfl.config import load_config
from privfl.runs.canary_audit import audit_config, audit_outputs
from privfl.runs.experiment import Experiment
from privfl.runs.html import write_page
from privfl.runs.html_audit import audit_html

DEMOS = {"dp-fedavg": "configs/demo-dp-fedavg.yaml", "dp-ftrl": "configs/demo-dp-ftrl.yaml",
         "bandmf-fedavg": "configs/demo-bandmf.yaml"}


def _run(config) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        Experiment.create(config, Path(tmp) / "run").run()
        return time.perf_counter() - started


def _training(config) -> float:
    started = time.perf_counter()
    algorithm = build_algorithm(config, build_dataset(config))
    for r in range(1, int(config.federated.rounds) + 1):
        cohort = algorithm.select_cohort()
        algorithm.aggregate(cohort, algorithm.local_work(cohort))
        algorithm.round = r
    return time.perf_counter() - started


def _audit(config, canaries: int) -> tuple[float, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        result = audit_config(config, sources(), canaries=canaries)
        (Path(tmp) / "audit.json").write_text(json.dumps(result, default=str))
        write_page(Path(tmp) / "report.html",
                   audit_html(result, audit_outputs(bool(config.privacy.secure))))
        return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--only", default=",".join(DEMOS))
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    print(f"{platform.platform()} | python {platform.python_version()} | {os.cpu_count()} "
          f"CPUs | torch {torch.__version__} | threads {torch.get_num_threads()}")
    print(f"{'algorithm':14} {'run (a) s':>10} {'train (b) s':>12} {'audit (c) s':>12} "
          f"{'(c)/(a)':>8} {'(c)/(b)':>8}  epsilon_lower / bound, verdict")
    for name in args.only.split(","):
        config = load_config(DEMOS[name], args.overrides)
        build_dataset(config)  # the first read of the data is not timed
        run, training = _run(config), _training(config)
        audit, result = _audit(config, args.canaries)
        print(f"{name:14} {run:10.1f} {training:12.1f} {audit:12.1f} {audit / run:8.2f} "
              f"{audit / training:8.2f}  {result['epsilon_lower']:.3g} / "
              f"{result['epsilon_bound']:.3g}, {result['verdict']}", flush=True)


if __name__ == "__main__":
    main()
