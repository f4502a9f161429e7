"""`make audit-mutants`: which of privfl's planted noise and clipping bugs (mutants.yaml) the
empirical audit (`privfl audit run`, issue 47) catches, with no test of their area involved.

Usage (from the repository root)::

    python tests/mutants/audit.py                  # every selected mutant
    python tests/mutants/audit.py --only a,b       # a subset (make audit-mutants MUTANTS=a,b)
    python tests/mutants/audit.py --list           # the selection and why each is in it

Selected: the mutants whose text or reason names noise or clipping (:data:`TOPIC`) in a file of
the client-level algorithms' code path (:data:`CLIENT_LEVEL_FILES`: DP-FedAvg, DP-FTRL and
BandMF-FedAvg's rounds, server aggregation, noise, tree and banded noise); record-level code is
the record-level canaries' (another source). For each, in a temporary copy of the sources (the
mutant runner's, tests/mutants/run.py; the working tree is never edited), one process runs the
slow power tests' audits at the configured noise (tests/runs/test_canary_audit_power.py
``SETTINGS``: digits, bound <= 2) for dp-fedavg, dp-ftrl and bandmf-fedavg. A mutant is
*caught* when any audit says VIOLATED (its epsilon_lower above the printed bound). First the
unmutated copy must be consistent on all three (else exit status 2).

A statistical audit cannot catch every such mutant: a secure-mode bug that draws the right noise
from the wrong generator (reproducible from the seed) leaves every distribution unchanged, and a
bug whose effect is small against the canaries' power (a divisor off by the realised cohort's
fluctuation) is below what 300-500 canaries can show. The output says which were missed.
Exit status 0 (a report, not a gate), 2 on a runner error.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as runner  # noqa: E402  (tests/mutants/run.py, the mutant runner)

#: a mutant is about noise or clipping when its find/replace text or its reason matches
TOPIC = re.compile(r"nois|clip|sigma|\bstd\b", re.IGNORECASE)
#: the code the client-level algorithms' training runs through
CLIENT_LEVEL_FILES = frozenset({
    "src/privfl/fl/aggregation.py", "src/privfl/mechanisms/noise.py",
    "src/privfl/mechanisms/tree.py", "src/privfl/mechanisms/banded_noise.py",
    "src/privfl/algorithms/dp_fedavg.py", "src/privfl/algorithms/server_fedavg.py",
    "src/privfl/algorithms/correlated_fedavg.py", "src/privfl/algorithms/dp_ftrl.py",
    "src/privfl/algorithms/bandmf_fedavg.py", "src/privfl/backends/base.py",
})
TIMEOUT = 600  # seconds for one mutant's three audits

#: run in the copy: the power tests' audits at the configured noise, one JSON line each
PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("power", "tests/runs/test_canary_audit_power.py")
power = importlib.util.module_from_spec(spec)
spec.loader.exec_module(power)
for name in power.SETTINGS:
    try:
        r = power._audit(name)
        row = {k: r[k] for k in ("verdict", "epsilon_lower", "epsilon_bound")}
    except Exception as error:  # a mutant may break the run: that is not a verdict
        row = {"verdict": "error", "error": f"{type(error).__name__}: {error}"[:200]}
    print(json.dumps({"algorithm": name, **row}), flush=True)
"""


def selected(mutants: list[runner.Mutant]) -> list[runner.Mutant]:
    """The noise and clipping mutants in the client-level code path (module docstring)."""
    return [m for m in mutants if m.file in CLIENT_LEVEL_FILES
            and TOPIC.search(" ".join((m.find, m.replace, m.why)))]


def audits(copy: Path) -> list[dict]:
    """The three audits' rows in ``copy`` (as mutated now)."""
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=copy, env=runner._env(copy),
                          capture_output=True, text=True, timeout=TIMEOUT)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or len(rows) != 3:
        raise runner.MutantError(f"the audits did not run (exit {done.returncode}): "
                                 f"{done.stderr[-2000:]}")
    return rows


def _line(rows: list[dict]) -> str:
    return "; ".join(
        f"{r['algorithm']} {r['verdict']}"
        + (f" ({r['epsilon_lower']:.2f} vs bound {r['epsilon_bound']:.2f})"
           if "epsilon_lower" in r else f" ({r.get('error', '')})")
        for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=os.environ.get("MUTANTS", ""),
                        help="comma-separated mutant ids (default: the selection)")
    parser.add_argument("--list", action="store_true", help="list the selection and exit")
    args = parser.parse_args(argv)
    try:
        mutants = selected(runner.load())
        if args.only.strip():
            known = {m.id: m for m in mutants}
            wanted = [m.strip() for m in args.only.split(",") if m.strip()]
            unknown = [m for m in wanted if m not in known]
            if unknown:
                raise runner.MutantError(f"MUTANTS = {','.join(unknown)}: not a selected "
                                         f"mutant (selected: {', '.join(known)})")
            mutants = [known[m] for m in wanted]
        if args.list:
            for m in mutants:
                print(f"{m.id}: {m.file}: {m.why}")
            return 0
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="privfl-audit-mutants-") as tmp:
            copy = runner._copy(Path(tmp) / "copy")
            runner._check_import(copy)
            baseline = audits(copy)
            if any(r["verdict"] != "consistent" for r in baseline):
                raise runner.MutantError(f"the unmutated audits are not all consistent: "
                                         f"{_line(baseline)}")
            print(f"baseline  {_line(baseline)}", flush=True)
            caught = 0
            for mutant in mutants:
                errors = runner._text_errors(mutant, copy)
                if errors:
                    raise runner.MutantError(errors[0])
                source = copy / mutant.file
                original = source.read_text(encoding="utf-8")
                source.write_text(original.replace(mutant.find, mutant.replace),
                                  encoding="utf-8")
                begun = time.perf_counter()
                try:
                    rows = audits(copy)
                except subprocess.TimeoutExpired:
                    rows = [{"algorithm": "all", "verdict": "error", "error": "timeout"}]
                finally:
                    source.write_text(original, encoding="utf-8")
                hit = any(r["verdict"] == "VIOLATED" for r in rows)
                caught += hit
                print(f"{'caught' if hit else 'missed':9} {mutant.id} "
                      f"({time.perf_counter() - begun:.0f} s): {_line(rows)}", flush=True)
        print(f"{caught} of {len(mutants)} noise/clipping mutants caught by the audit "
              f"({time.perf_counter() - started:.0f} s)")
        return 0
    except runner.MutantError as error:
        print(f"audit-mutants: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
