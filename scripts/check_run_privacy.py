"""Check a PriFedSync run's per-round privacy against `privfl account fedfdp`.

For each checked round R of RUN_DIR/metrics.jsonl, this calls the command line
``privfl account fedfdp --records n --batch-size B --local-steps K --rounds R --sigma SIGMA
--clients m --delta DELTA --client-rate p --json`` with the settings read from the run's
config.yaml (n = the smallest client dataset, which has the largest B/n and so mu_max), and
compares its weak mu (gdp-clt estimate), weak and strong epsilon (gdp-clt estimate, pld bound)
with what the run logged. The run logged numbers derived from the engine's LocalTrainingSpec;
the command line derives them from the raw settings: agreement shows that the training and the
accountant saw the same sampling, noise and step count.

    python scripts/check_run_privacy.py runs/fmnist-p0.5-sigma1 [--every 5] [--rtol 1e-9]

Exit status 0 when every checked round agrees, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.config.loader import load_config
from privfl.fl.algorithms.experiment import build_dataset
from privfl.report.rundir import RunDirectory

# metrics.jsonl key -> (method, scope, field) of the `privfl account fedfdp --json` results
KEYS = {
    "mu_max": ("gdp-clt", "weak", "mu"),
    "epsilon_gdp_clt": ("gdp-clt", "weak", "epsilon"),
    "epsilon_pld": ("pld", "weak", "epsilon"),
    "mu_strong": ("gdp-clt", "strong", "mu"),
    "epsilon_gdp_clt_strong": ("gdp-clt", "strong", "epsilon"),
    "epsilon_pld_strong": ("pld", "strong", "epsilon"),
}


def cli_results(args: list[str]) -> dict[tuple[str, str], dict]:
    result = CliRunner().invoke(app, ["account", "fedfdp", *args, "--json"])
    if result.exit_code != 0:
        raise SystemExit(f"privfl account fedfdp {' '.join(args)} failed:\n{result.output}")
    payload = json.loads(result.stdout)
    return {(r["method"], r["scope"]): r for r in payload["results"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--every", type=int, default=1, help="check every EVERY-th round")
    parser.add_argument("--rtol", type=float, default=1e-9, help="relative tolerance")
    options = parser.parse_args()
    run_dir = RunDirectory(options.run_dir)
    config = load_config(run_dir.config)
    if not config.privacy.enabled:
        raise SystemExit(f"{options.run_dir} is a non-private run: nothing to check")
    if config.training.sampling != "without-replacement":
        raise SystemExit("only without-replacement local batches are covered by "
                         "`privfl account fedfdp` (seed 000 Theorem 2)")
    sizes = build_dataset(config).client_sizes
    base = [
        "--records", str(int(sizes.min())), "--batch-size", str(config.training.batch_size),
        "--local-steps", str(config.training.local_steps), "--sigma", repr(config.privacy.sigma),
        "--clients", str(config.data.clients), "--delta", repr(config.privacy.delta),
        "--client-rate", repr(config.federated.client_rate),
    ]
    print("command: privfl account fedfdp " + " ".join(base) + " --rounds R --json")
    metrics = run_dir.read_metrics()
    checked, worst, failures = 0, 0.0, []
    print(f"{'round':>5} " + " ".join(f"{k:>24}" for k in KEYS) + "  max rel diff")
    for row in metrics:
        r = row["round"]
        if r % options.every and r not in (1, metrics[-1]["round"]):
            continue
        results = cli_results([*base, "--rounds", str(r)])
        diffs = []
        for key, (method, scope, field) in KEYS.items():
            if key not in row:
                continue
            expected = float(results[(method, scope)][field])
            got = float(row[key])
            diffs.append(abs(got - expected) / max(abs(expected), 1e-300))
        diff = max(diffs)
        worst = max(worst, diff)
        checked += 1
        if not diff <= options.rtol:
            failures.append(r)
        print(f"{r:>5} " + " ".join(f"{float(row.get(k, math.nan)):>24.16g}" for k in KEYS)
              + f"  {diff:.2e}")
    print(f"checked {checked} rounds; largest relative difference {worst:.2e} "
          f"(tolerance {options.rtol:g}); " + ("all agree" if not failures
                                             else f"DISAGREE at rounds {failures}"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
