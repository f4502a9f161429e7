"""`make mutants`: plant each privacy bug of mutants.yaml in a copy of privfl and check that the
tests of its area catch it.

Usage (from the repository root)::

    python tests/mutants/run.py                   # every mutant
    python tests/mutants/run.py --only a,b        # a subset (make mutants MUTANTS=a,b)
    python tests/mutants/run.py --jobs 1 --list

The working tree is never edited: src/, tests/, configs/, docs/ and pyproject.toml are copied to
a temporary directory (one copy per worker), a mutant's text is replaced there, its tests run
against that copy (``PYTHONPATH`` = the copy's src/, ``pytest -x -q -p no:cacheprovider``), and
the file is restored. Each pytest runs in a process forked from a server that has already
imported the third-party packages the tests use (torch, numpy, scipy, pytest, ...; never privfl,
which each mutant's process imports from its copy): about 2.3 s of imports a mutant saved, a
third of the stage. ``--no-preload`` starts a fresh interpreter for each mutant instead.

One line per mutant (killed, by which test, or SURVIVED), then ``N killed, M survived``.
Exit status 1 if any mutant survives, 2 if a mutant's text is not found exactly once (or the
data file is malformed, or a mutant's test process fails to start); see docs/mutants.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("mutants.yaml")
#: what a copy holds (tests read configs/ and docs/; pytest reads pyproject.toml)
COPIED = ("src", "tests", "configs", "docs", "pyproject.toml")
KEYS = {"id", "file", "find", "replace", "tests", "why"}
TIMEOUT = 900  # seconds per mutant: a mutant that hangs its tests counts as killed
#: how pytest runs a mutant's tests, in a forked or a fresh process alike
PYTEST_ARGS = ("-x", "-q", "-p", "no:cacheprovider")
#: imported once by the fork server (third-party only: privfl must come from each mutant's copy)
PRELOAD = ("numpy", "scipy.special", "scipy.stats", "scipy.optimize", "scipy.integrate", "torch",
           "mpmath", "yaml", "pydantic", "typer", "typer.testing", "rich", "hypothesis", "pytest",
           "matplotlib", "matplotlib.pyplot")


class MutantError(Exception):
    """A malformed data file or a mutant whose text is not found exactly once."""


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    find: str
    replace: str
    tests: tuple[str, ...]
    why: str


def load(path: Path = DATA) -> list[Mutant]:
    """The mutants of ``path``, checked against the working tree's sources."""
    entries = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(entries, list) or not entries:
        raise MutantError(f"{path}: must be a non-empty list of mutants")
    mutants, seen, errors = [], set(), []
    for k, entry in enumerate(entries):
        where = f"{path.name} entry {k + 1}"
        if not isinstance(entry, dict) or set(entry) != KEYS:
            raise MutantError(f"{where}: must have exactly the keys {sorted(KEYS)}, has "
                              f"{sorted(entry) if isinstance(entry, dict) else entry!r}")
        if entry["id"] in seen:
            raise MutantError(f"{where}: id {entry['id']!r} is used twice")
        seen.add(entry["id"])
        if not isinstance(entry["tests"], list) or not entry["tests"]:
            raise MutantError(f"mutant {entry['id']}: tests must be a non-empty list")
        mutant = Mutant(str(entry["id"]), str(entry["file"]), str(entry["find"]),
                        str(entry["replace"]), tuple(str(t) for t in entry["tests"]),
                        str(entry["why"]))
        if mutant.find == mutant.replace:
            raise MutantError(f"mutant {mutant.id}: replace equals find")
        for test in mutant.tests:
            if not (ROOT / test.split("::")[0]).is_file():
                errors.append(f"mutant {mutant.id}: test file {test.split('::')[0]} not found")
        mutants.append(mutant)
    if errors:
        raise MutantError("\n".join(errors))
    return mutants


def _text_errors(mutant: Mutant, root: Path) -> list[str]:
    source = root / mutant.file
    if not source.is_file():
        return [f"mutant {mutant.id}: file {mutant.file} not found"]
    count = source.read_text(encoding="utf-8").count(mutant.find)
    if count != 1:
        return [f"mutant {mutant.id}: text found {count} times (must be exactly once) in "
                f"{mutant.file}: {mutant.find!r}"]
    return []


def _copy(target: Path) -> Path:
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, target / name, ignore=shutil.ignore_patterns(
                "__pycache__", "*.pyc", ".pytest_cache", "*.egg-info"))
        elif source.is_file():
            shutil.copy2(source, target / name)
    return target


def _env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(copy / "src")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _check_import(copy: Path) -> None:
    """The copy, not an installed privfl, must be the one the tests import."""
    found = subprocess.run([sys.executable, "-c", "import privfl; print(privfl.__file__)"],
                           cwd=copy, env=_env(copy), capture_output=True, text=True)
    path = Path(found.stdout.strip() or "?").resolve()
    if found.returncode or not path.is_relative_to((copy / "src").resolve()):
        raise MutantError(f"the copy's privfl is not imported first (got {path}): "
                          f"{found.stderr.strip()}")


_FAILED = re.compile(r"^(FAILED|ERROR) (\S+)", re.MULTILINE)


def _pytest_in_copy(copy: str, tests: list[str], log: str) -> None:
    """The body of a preloaded mutant process: what ``_run_fresh`` runs, in this process. Its
    output goes to ``log``, and pytest's exit code to ``log + '.code'`` (the proof that pytest
    ran: a process that failed before it exits non-zero too, and must not count as a kill)."""
    import sys as child_sys

    child_sys.dont_write_bytecode = True  # a stale .pyc of the mutated module must never be read
    os.environ.update(_env(Path(copy)))
    os.chdir(copy)
    child_sys.path.insert(0, str(Path(copy) / "src"))
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(out, 2)
    import pytest

    code = int(pytest.main([*PYTEST_ARGS, *tests]))
    child_sys.stdout.flush()
    child_sys.stderr.flush()
    privfl = child_sys.modules.get("privfl")  # tests/conftest.py imports it
    if privfl is None or not Path(privfl.__file__).resolve().is_relative_to(
            (Path(copy) / "src").resolve()):
        raise MutantError(f"privfl imported from {getattr(privfl, '__file__', None)}, not "
                          f"from the copy")
    Path(log + ".code").write_text(str(code))
    os._exit(code)


def _forkserver() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    return context


def _run_preloaded(context, mutant: Mutant, copy: Path) -> tuple[int | None, str]:
    """``(exit code or None on timeout, output)`` of the mutant's tests in a forked process."""
    log = copy.parent / f"{copy.name}.log"
    code_file = Path(f"{log}.code")
    code_file.unlink(missing_ok=True)
    process = context.Process(target=_pytest_in_copy, args=(str(copy), list(mutant.tests),
                                                            str(log)))
    process.start()
    process.join(TIMEOUT)
    if process.is_alive():
        process.kill()
        process.join()
        return None, ""
    output = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    if process.exitcode >= 0 and not code_file.exists():
        raise MutantError(f"mutant {mutant.id}: its test process ended (exit "
                          f"{process.exitcode}) before pytest returned:\n{output[-3000:]}")
    return process.exitcode, output


def _run_fresh(mutant: Mutant, copy: Path) -> tuple[int | None, str]:
    """``(exit code or None on timeout, output)`` of the mutant's tests in a new interpreter."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *PYTEST_ARGS, *mutant.tests], cwd=copy,
            env=_env(copy), capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, ""
    return done.returncode, done.stdout + done.stderr


def run_one(mutant: Mutant, copy: Path, context=None) -> tuple[bool, str, float]:
    """``(killed, how, seconds)`` of one mutant in ``copy`` (restored afterwards); its tests
    run in a process forked from ``context``'s preloaded server, or in a fresh interpreter when
    ``context`` is None."""
    errors = _text_errors(mutant, copy)
    if errors:
        raise MutantError(errors[0])
    source = copy / mutant.file
    original = source.read_text(encoding="utf-8")
    source.write_text(original.replace(mutant.find, mutant.replace), encoding="utf-8")
    started = time.perf_counter()
    try:
        code, output = (_run_fresh(mutant, copy) if context is None
                        else _run_preloaded(context, mutant, copy))
    finally:
        source.write_text(original, encoding="utf-8")
    seconds = time.perf_counter() - started
    if code is None:
        return True, f"timeout after {TIMEOUT} s", seconds
    if code == 0:
        return False, "", seconds
    if code < 0:  # stopped from outside: no verdict either way
        raise MutantError(f"mutant {mutant.id}: pytest was stopped by signal "
                          f"{-code} before a verdict; run it again")
    if code in (4, 5):  # usage error / nothing collected: the entry is wrong
        raise MutantError(f"mutant {mutant.id}: pytest exit {code} on "
                          f"{' '.join(mutant.tests)}:\n{output[-4000:]}")
    match = _FAILED.search(output)
    return True, (f"{match.group(1).lower()} {match.group(2)}" if match
                  else f"pytest exit {code}"), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=os.environ.get("MUTANTS", ""),
                        help="comma-separated mutant ids (default: all; env MUTANTS)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="mutants run in parallel (each in its own copy)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--no-preload", action="store_true",
                        help="a fresh interpreter for each mutant (no preloaded fork server)")
    args = parser.parse_args(argv)
    try:
        mutants = load()
        if args.only.strip():
            wanted = [m.strip() for m in args.only.split(",") if m.strip()]
            known = {m.id: m for m in mutants}
            unknown = [m for m in wanted if m not in known]
            if unknown:
                raise MutantError(f"MUTANTS = {','.join(unknown)}: no such mutant (known: "
                                  f"{', '.join(known)})")
            mutants = [known[m] for m in wanted]
        errors = [e for m in mutants for e in _text_errors(m, ROOT)]
        if errors:  # every selected mutant must still apply: none rots silently
            raise MutantError("\n".join(errors))
        if args.list:
            for m in mutants:
                print(f"{m.id}: {m.file}: {m.why}")
            return 0
        jobs = max(1, min(args.jobs, len(mutants)))
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="privfl-mutants-") as tmp:
            copies = [_copy(Path(tmp) / f"copy{k}") for k in range(jobs)]
            _check_import(copies[0])
            free = list(copies)
            context = None if args.no_preload else _forkserver()

            def work(mutant: Mutant):
                copy = free.pop()
                try:
                    return run_one(mutant, copy, context)
                finally:
                    free.append(copy)

            killed = survived = 0
            with ThreadPoolExecutor(jobs) as pool:
                for mutant, (dead, how, seconds) in zip(mutants, pool.map(work, mutants),
                                                        strict=True):
                    if dead:
                        killed += 1
                        print(f"killed    {mutant.id} ({seconds:.0f} s): {how}", flush=True)
                    else:
                        survived += 1
                        print(f"SURVIVED  {mutant.id} ({seconds:.0f} s): {mutant.file}: "
                              f"{mutant.why}; tests {' '.join(mutant.tests)}", flush=True)
        print(f"{killed} killed, {survived} survived "
              f"({time.perf_counter() - started:.0f} s, {jobs} jobs"
              f"{', fresh interpreters' if args.no_preload else ', preloaded fork server'})")
        return 1 if survived else 0
    except MutantError as error:
        print(f"mutants: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
