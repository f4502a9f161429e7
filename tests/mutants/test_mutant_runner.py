"""The mutant runner itself (``make mutants``): a planted bug is killed and a harmless edit
survives, in a preloaded forked process as in a fresh interpreter, and a process that never
reached a verdict is an error, never a kill."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (tests/mutants/run.py)

TEST = ("tests/accounting/test_gdp.py::"
        "test_one_clt_group_makes_the_whole_event_an_estimate_in_either_order")
FIND = "exact = exact and group_exact"


def _mutant(replace: str, test: str = TEST) -> run.Mutant:
    return run.Mutant("t", "src/privfl/accounting/gdp/accountant.py", FIND, replace, (test,),
                      "test")


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    return run._copy(tmp_path_factory.mktemp("mutant-copy"))


@pytest.mark.parametrize("preload", [True, False], ids=["preloaded", "fresh"])
def test_a_planted_bug_is_killed_and_a_harmless_edit_survives(copy, preload):
    context = run._forkserver() if preload else None
    killed, how, _ = run.run_one(_mutant("exact = group_exact"), copy, context)
    assert killed and how.startswith(f"failed {TEST}")
    assert run.run_one(_mutant("exact = (exact and group_exact)"), copy, context)[:2] == (
        False, "")
    assert FIND in (copy / "src/privfl/accounting/gdp/accountant.py").read_text()  # restored


def test_a_test_that_is_not_found_is_an_error_not_a_kill(copy):
    with pytest.raises(run.MutantError, match="pytest exit 4"):
        run.run_one(_mutant("exact = group_exact", "tests/accounting/test_gdp.py::nothing"), copy,
                    run._forkserver())


def _dies_before_pytest(*args) -> None:
    os._exit(1)


def test_a_process_that_dies_before_its_verdict_is_an_error_not_a_kill(copy, monkeypatch):
    monkeypatch.setattr(run, "_pytest_in_copy", _dies_before_pytest)
    with pytest.raises(run.MutantError, match="before pytest returned"):
        run.run_one(_mutant("exact = group_exact"), copy, run._forkserver())
