"""``privfl reproduce P --scale quick`` for all five papers, as a user runs it (slow: about five
minutes in all on 2 cores; ``make test-slow``): every match row within its tolerance, every
difference explained, the verdict counts and pinned values (tests/reproduce/_reproduce_expected.
py), the training rows, and the three files of --out."""

from __future__ import annotations

import json
import os

import pytest
from _reproduce_expected import ACCOUNTING, TRAINING, TRAINING_PINNED, check_rows, rows_starting
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
    check_rows(payload, expected, paper)
    for start, (value, tolerance) in TRAINING_PINNED.get(paper, {}).items():
        for row in rows_starting(payload["rows"], start):
            assert abs(row["privfl"] - value) <= tolerance, (start, row["privfl"])
    assert {p.name for p in out.iterdir()} >= {"table.md", "rows.json", "report.html"}
    assert json.loads((out / "rows.json").read_text())["rows"] == payload["rows"]
    html = (out / "report.html").read_text()
    assert html.count('class="plot"') >= 2 and 'id="rows-accounting"' in html
    if TRAINING[paper][0]:
        assert 'id="rows-training"' in html
