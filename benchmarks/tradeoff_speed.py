"""Speed of the per-coordinate TV work of ``privfl tradeoff``: Imhof's integrand by power sums
against its direct evaluation, both measured in this run.

Run ``python benchmarks/tradeoff_speed.py [--clients K] [--dimension D]``. For each of ``K``
synthetic clients (per-coordinate variances log-uniform on [1.7e-9, 1.1e-5], the range of the
default model's, issue 21; ``D`` = 7850, the default logistic regression's) it does what
``privfl tradeoff``'s default grid does with them (Zhang, Chen and Yang 2022): the calibration
under per-coordinate variances for the TV targets 0.001 and 0.005
(:func:`~privfl.distortion.diagonal.noise_variance_diagonal`), then the TV
(:func:`~privfl.distortion.diagonal.tv_gaussian_diagonal`) at the noise of every Gaussian grid
point (``x`` = 0.01 ... 1e7, Lemma 6.8's and the exact isotropic calibration's noise for both
targets, the diagonal calibration's). It prints the seconds of each integrand, their ratio
(direct / power sums: above 1 means faster), the largest difference between the two TVs and the
largest error either reports, and the largest relative difference of the calibrated noises.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np

from privfl.distortion.calibrate import noise_variance_exact, noise_variance_paper
from privfl.distortion.diagonal import noise_variance_diagonal, tv_gaussian_diagonal

GAUSSIAN = [0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7]
GAPS = [0.001, 0.005]


def _client(seed: int, dimension: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.exp(rng.uniform(math.log(1.7e-9), math.log(1.1e-5), dimension))


def _work(variances: np.ndarray, integrand: str) -> tuple[list[float], list[float],
                                                            list[float], float, float]:
    """``(calibrated noises, TVs, their errors, calibration seconds, TV seconds)``."""
    sigma2, d = float(variances.mean()), variances.size
    started = time.perf_counter()
    calibrated = [noise_variance_diagonal(variances, g, integrand=integrand) for g in GAPS]
    calibration = time.perf_counter() - started
    noises = [x * sigma2 / math.sqrt(d) for x in GAUSSIAN] + calibrated
    for g in GAPS:
        noises += [noise_variance_paper(sigma2, g, d), noise_variance_exact(sigma2, g, d)]
    started = time.perf_counter()
    results = [tv_gaussian_diagonal(variances, variances + s, integrand=integrand)
               for s in noises]
    return (calibrated, [r.tv for r in results], [r.error for r in results], calibration,
            time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--dimension", type=int, default=7850)
    args = parser.parse_args()
    print(f"{platform.platform()} | python {platform.python_version()} | {os.cpu_count()} CPUs "
          f"| numpy {np.__version__} | load average {os.getloadavg()[0]:.1f}")
    seconds = {"direct": [0.0, 0.0], "power sums": [0.0, 0.0]}
    worst_tv = worst_error = worst_noise = 0.0
    for k in range(args.clients):
        v = _client(k, args.dimension)
        out = {}
        for integrand in ("direct", "power sums"):  # interleaved: the same load for both
            out[integrand] = _work(v, integrand)
            seconds[integrand][0] += out[integrand][3]
            seconds[integrand][1] += out[integrand][4]
        (cal_d, tv_d, err_d, *_), (cal_f, tv_f, err_f, *_) = out["direct"], out["power sums"]
        worst_tv = max(worst_tv, max(abs(a - b) for a, b in zip(tv_d, tv_f, strict=True)))
        worst_error = max(worst_error, *err_d, *err_f)
        worst_noise = max(worst_noise, max(abs(a / b - 1) for a, b in zip(cal_d, cal_f,
                                                                          strict=True)))
    print(f"{args.clients} clients, d = {args.dimension}: {len(GAPS)} calibrations and "
          f"{len(GAUSSIAN) + 3 * len(GAPS)} TVs per client")
    print(f"{'integrand':>12} {'calibration s':>14} {'TV s':>8} {'total s':>8}")
    for name, (cal, tv) in seconds.items():
        print(f"{name:>12} {cal:14.2f} {tv:8.2f} {cal + tv:8.2f}")
    direct, fast = seconds["direct"], seconds["power sums"]
    print(f"ratio direct / power sums: calibration {direct[0] / fast[0]:.2f}, TV "
          f"{direct[1] / fast[1]:.2f}, total {sum(direct) / sum(fast):.2f}")
    print(f"largest |TV difference| {worst_tv:.2g} (largest reported error {worst_error:.2g}); "
          f"largest relative difference of the calibrated noises {worst_noise:.2g}")


if __name__ == "__main__":
    main()
