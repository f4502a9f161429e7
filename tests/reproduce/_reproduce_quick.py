"""The check of one ``privfl reproduce P --scale quick`` (shared by the two slow files
tests/reproduce/test_reproduce_quick.py and test_reproduce_quick_certification.py, which split
the papers between them: :data:`SPLIT`)."""

from __future__ import annotations

import json
import os

import pytest
from _reproduce_document import NUMBER, PAGE, differing_cells, table_rows
from _reproduce_expected import (
    ACCOUNTING,
    ACCOUNTING_BASIS,
    TRAINING,
    TRAINING_BASIS,
    TRAINING_FLIPS,
    TRAINING_PINNED,
    centre,
    check_rows,
    rows_starting,
)
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.reproduce.papers import PAPERS

REQUIRE_DATA = os.environ.get("PRIVFL_REQUIRE_DATA", "") not in ("", "0")  # as tests/conftest.py


#: the papers of each slow test file: two files, so that pytest-xdist (--dist loadfile) can give
#: the three longest reproductions (Hasircioglu, Xie, Zheng: 1-3 minutes each) to both workers
SPLIT = {"test_reproduce_quick.py": ("hasircioglu2022", "zhang2022", "asoodeh2021"),
         "test_reproduce_quick_certification.py": ("xie2023", "zheng2021")}


def check_quick_reproduction(paper, tmp_path):
    """`privfl reproduce PAPER --scale quick --json --out DIR` as a user runs it, checked (the
    module docstring of tests/reproduce/test_reproduce_quick.py)."""
    out = tmp_path / paper
    result = CliRunner().invoke(app, ["reproduce", paper, "--scale", "quick", "--json",
                                      "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    skipped = [note for note in payload["notes"] if "training skipped" in note]
    if skipped and not REQUIRE_DATA:  # Fashion-MNIST (Debian) is not installed here
        pytest.skip(skipped[0])
    assert not skipped, skipped
    expected = tuple(a + t for a, t in zip(ACCOUNTING[paper], TRAINING[paper], strict=True))
    basis = {b: tuple(a + t for a, t in zip(n, TRAINING_BASIS[paper].get(b, (0, 0)),
                                             strict=True))
             for b, n in ACCOUNTING_BASIS[paper].items()}
    check_rows(payload, expected, paper, basis, slack=TRAINING_FLIPS[paper])
    for start, (value, tolerance) in TRAINING_PINNED.get(paper, {}).items():
        for row in rows_starting(payload["rows"], start):
            assert abs(centre(row["privfl"]) - value) <= tolerance, (start, row["privfl"])
    assert {p.name for p in out.iterdir()} >= {"table.md", "rows.json", "report.html"}
    assert json.loads((out / "rows.json").read_text())["rows"] == payload["rows"]
    html = (out / "report.html").read_text()
    assert html.count('class="plot"') >= 2 and 'id="rows-accounting"' in html
    if TRAINING[paper][0]:
        assert 'id="rows-training"' in html
    _check_page(paper, (out / "table.md").read_text(encoding="utf-8"))


#: a quick training row's value on another CPU: within the spread TRAINING_PINNED allows
TRAINING_SPREAD = 3.0


def _check_page(paper, table):
    """docs/reproductions.md's section of ``paper`` against this run's table.md: the accounting
    rows cell for cell (numbers to their printed precision), the training rows by quantity,
    source, basis and paper value, privfl's value within TRAINING_SPREAD (training floats differ
    in the last bits across CPUs; the verdict of a 2 % row may flip with them)."""
    heading = f"## {PAPERS[paper].title}"
    committed, fresh = table_rows(PAGE.read_text(encoding="utf-8"), heading), table_rows(
        table, heading)
    assert len(committed) == len(fresh), "regenerate docs/reproductions.md"
    accounting = ACCOUNTING[paper][0]
    pairs = list(zip(committed, fresh, strict=True))
    stale = {new[0]: differing_cells(old, new) for old, new in pairs[:accounting]}
    for old, new in pairs[accounting:]:
        numeric = NUMBER.fullmatch(old[4]) is not None  # an ordering may differ on another CPU
        stale[new[0]] = differing_cells(
            old, new, columns=("quantity", "source", "basis", "paper") + ("privfl",) * numeric,
            absolute=TRAINING_SPREAD)
    assert {k: v for k, v in stale.items() if v} == {}, "regenerate docs/reproductions.md"
