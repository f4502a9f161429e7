"""``privfl reproduce P --scale quick`` for all five papers, as a user runs it (slow: about five
minutes in all on 2 cores; ``make test-slow``): every match row within its tolerance, every
difference explained, the verdict counts and pinned values (tests/reproduce/_reproduce_expected.
py), the counts by basis, the training rows, the three files of --out, and docs/reproductions.md
against this fresh table (tests/reproduce/_reproduce_document.py)."""

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

pytestmark = pytest.mark.slow
REQUIRE_DATA = os.environ.get("PRIVFL_REQUIRE_DATA", "") not in ("", "0")  # as tests/conftest.py


@pytest.mark.parametrize("paper", list(PAPERS))
def test_quick_reproduction(paper, tmp_path):
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
