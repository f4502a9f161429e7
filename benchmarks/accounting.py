"""Accounting benchmarks: privfl's PLD accountant against dp-accounting, and RDP vs PLD.

Run ``python benchmarks/accounting.py [--repeats N]``. It prints

(a) the wall time of privfl's PLD epsilon and of dp-accounting's ``PLDAccountant`` for
    Poisson-subsampled Gaussian DP-SGD (q = 0.01, z = 1, T = 100000, delta = 1e-6, add/remove,
    discretisation 1e-4), both measured cold (no cached step PLDs) in this run, their ratio
    (target <= 1) and both epsilons;
(b) the epsilon gap between RDP and PLD for that setting and a few others.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from importlib.metadata import version

import dp_accounting
import numpy as np
import scipy
from dp_accounting import dp_event

from privfl.accounting.events import dpsgd_event
from privfl.accounting.pld import accountant as pld
from privfl.accounting.rdp import RdpAccountant

INTERVAL = 1e-4
SETTING = {"q": 0.01, "z": 1.0, "steps": 100_000, "delta": 1e-6}

#: (label, noise multiplier z, sampling rate q, steps T, delta, sampling, neighbouring)
GAP_SETTINGS = [
    ("benchmark", 1.0, 0.01, 100_000, 1e-6, "poisson", "add-remove"),
    ("small q, long", 1.1, 0.004, 250_000, 1e-5, "poisson", "add-remove"),
    ("large q", 0.8, 0.1, 1_000, 1e-5, "poisson", "add-remove"),
    ("high noise", 4.0, 0.05, 10_000, 1e-5, "poisson", "add-remove"),
    ("unsampled", 10.0, 1.0, 100, 1e-5, "none", "add-remove"),
    ("tiny delta, long", 1.0, 0.01, 100_000, 1e-12, "poisson", "add-remove"),
    ("tiny delta, 1e6 steps", 50.0, 0.2, 1_000_000, 1e-12, "poisson", "add-remove"),
    ("Zheng et al. 2021 MNIST row 1", 2.0, 16 / 600, 3534, 1e-5, "without-replacement",
     "replace-one"),
    ("Zheng et al. 2021 CIFAR row 13", 2.0, 16 / 500, 14976, 1e-5, "without-replacement",
     "replace-one"),
]


def _machine() -> str:
    return (
        f"{platform.platform()} | python {platform.python_version()} | "
        f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}) | "
        f"numpy {np.__version__} | scipy {scipy.__version__} | "
        f"dp-accounting {version('dp-accounting')}"
    )


def _time_privfl() -> tuple[float, float]:
    pld.clear_cache()  # measure cold: the step PMFs are built inside the timed region
    event = dpsgd_event(SETTING["z"], SETTING["q"], SETTING["steps"])
    start = time.perf_counter()
    result = pld.PldAccountant(value_discretization_interval=INTERVAL).epsilon(
        event, SETTING["delta"]
    )
    return time.perf_counter() - start, result.epsilon


def _time_dp_accounting() -> tuple[float, float]:
    start = time.perf_counter()
    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=INTERVAL)
    accountant.compose(
        dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(SETTING["q"], dp_event.GaussianDpEvent(SETTING["z"])),
            SETTING["steps"],
        )
    )
    epsilon = accountant.get_epsilon(SETTING["delta"])
    return time.perf_counter() - start, epsilon


def speed(repeats: int) -> None:
    print(
        f"(a) speed: Poisson Gaussian, q = {SETTING['q']}, z = {SETTING['z']}, "
        f"T = {SETTING['steps']}, delta = {SETTING['delta']:g}, add/remove, "
        f"interval = {INTERVAL:g}; {repeats} repeats, interleaved, cold caches"
    )
    ours, theirs = [], []
    eps_ours = eps_theirs = float("nan")
    for _ in range(repeats):
        seconds, eps_ours = _time_privfl()
        ours.append(seconds)
        seconds, eps_theirs = _time_dp_accounting()
        theirs.append(seconds)
    for name, times in (("privfl PldAccountant", ours), ("dp-accounting PLDAccountant", theirs)):
        print(
            f"    {name:30s} median {statistics.median(times):8.3f} s   "
            f"min {min(times):8.3f} s   all {', '.join(f'{t:.3f}' for t in times)}"
        )
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"    ratio privfl / dp-accounting (medians): {ratio:.3f}  (target <= 1)")
    print(f"    ratio of minima: {min(ours) / min(theirs):.3f}")
    print(f"    epsilon privfl        = {eps_ours:.9f}")
    print(f"    epsilon dp-accounting = {eps_theirs:.9f}")
    print(f"    relative difference   = {(eps_ours - eps_theirs) / eps_theirs:+.2e}")


def gaps() -> None:
    print(
        "(b) epsilon gap, RDP (privfl RdpAccountant) vs PLD (privfl PldAccountant); "
        "gap = eps_rdp - eps_pld, ratio = eps_rdp / eps_pld, t_pld in s (step PLDs may be cached)"
    )
    header = (
        f"    {'setting':20s} {'z':>5s} {'q':>8s} {'T':>7s} {'delta':>6s} {'sampling':>19s} "
        f"{'relation':>11s} {'eps_rdp':>9s} {'eps_pld':>9s} {'gap':>8s} {'ratio':>6s} {'t_pld':>6s}"
    )
    print(header)
    rdp = RdpAccountant()
    accountant = pld.PldAccountant(value_discretization_interval=INTERVAL)
    for label, z, q, steps, delta, sampling, relation in GAP_SETTINGS:
        event = dpsgd_event(z, q, steps, sampling=sampling, neighbouring=relation)
        eps_rdp = rdp.epsilon(event, delta).epsilon
        start = time.perf_counter()
        eps_pld = accountant.epsilon(event, delta).epsilon
        seconds = time.perf_counter() - start
        print(
            f"    {label:20s} {z:5g} {q:8.4g} {steps:7d} {delta:6.0e} {sampling:>19s} "
            f"{relation:>11s} {eps_rdp:9.4f} {eps_pld:9.4f} {eps_rdp - eps_pld:8.4f} "
            f"{eps_rdp / eps_pld:6.3f} {seconds:6.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of each (default 3)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats = {args.repeats} is out of range: must be >= 1")
    print(f"machine: {_machine()}")
    speed(args.repeats)
    gaps()


if __name__ == "__main__":
    main()
