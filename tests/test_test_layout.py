"""The test tree's own layout: pytest imports every test file by its basename (rootdir-relative
"prepend" import mode, no ``__init__.py``), so two files with one basename fail collection with
"import file mismatch" whenever one process collects both (``make test`` under xdist did)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_no_two_test_modules_share_a_basename():
    found = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name != "conftest.py" and "__pycache__" not in path.parts:
            found[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}
