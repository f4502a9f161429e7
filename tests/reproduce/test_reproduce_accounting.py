"""The accounting rows of every paper's reproduction (``privfl reproduce P --no-training``, a few
seconds each): every match within its tolerance, every difference explained, the counts (also by
basis) and the pinned values of tests/reproduce/_reproduce_expected.py; deterministic; and
docs/reproductions.md holds these rows as computed now (tests/reproduce/_reproduce_document.py)."""

from __future__ import annotations

from functools import cache

import pytest
from _reproduce_document import PAGE, differing_cells, summary_row, table_rows
from _reproduce_expected import ACCOUNTING, ACCOUNTING_BASIS, TRAINING, check_rows

from privfl.reproduce.papers import PAPERS
from privfl.reproduce.report import reproduce
from privfl.reproduce.rows import BASES, cells


@cache
def _accounting(paper):
    return reproduce(paper, "quick", training=False)


@pytest.mark.parametrize("paper", list(PAPERS))
def test_accounting_rows(paper):
    rep = _accounting(paper)
    assert rep.paper == paper and rep.title == PAPERS[paper].title
    assert all(row.kind == "accounting" for row in rep.rows)
    check_rows(rep.to_dict(), ACCOUNTING[paper], paper, ACCOUNTING_BASIS[paper])
    assert rep.curves, "no figure regenerated"
    for curve in rep.curves.values():
        assert curve["traces"] and all(len(t["x"]) == len(t["y"]) for t in curve["traces"])


@pytest.mark.parametrize("paper", ["asoodeh2021", "zhang2022"])
def test_a_reproduction_is_deterministic(paper):
    first = reproduce(paper, "quick", training=False).to_dict()
    second = reproduce(paper, "quick", training=False).to_dict()
    assert first["rows"] == second["rows"]


def test_every_paper_is_registered_with_a_module():
    assert list(PAPERS) == ["zheng2021", "zhang2022", "xie2023", "hasircioglu2022",
                            "asoodeh2021"]
    for entry in PAPERS.values():
        assert callable(entry.load().reproduce) and entry.covers


def test_unknown_paper_and_scale_are_refused():
    with pytest.raises(ValueError, match="must be one of zheng2021, zhang2022"):
        reproduce("zheng", "quick")
    with pytest.raises(ValueError, match="scale"):
        reproduce("asoodeh2021", "full")


@pytest.mark.parametrize("paper", list(PAPERS))
def test_the_committed_page_holds_the_accounting_rows_computed_now(paper):
    """docs/reproductions.md is regenerated, not typed: its accounting rows are the ones privfl
    computes now (every cell, numbers to their printed precision), its quick training rows are
    all there, and its summary line counts the rows it shows, by verdict and by basis.
    Regenerate with ``python -m privfl.reproduce.document docs/reproductions.md --paper-plan``
    (``--only-paper-plan`` rewrites only the paper-scale plans, without training)."""
    text = PAGE.read_text(encoding="utf-8")
    committed = table_rows(text, f"## {PAPERS[paper].title}")
    fresh = [tuple(c.replace("|", "/") for c in cells(row)) for row in _accounting(paper).rows]
    assert len(committed) == len(fresh) + TRAINING[paper][0], "regenerate docs/reproductions.md"
    stale = {row[0]: differing_cells(old, row) for old, row in zip(committed, fresh, strict=False)
             if differing_cells(old, row)}
    assert stale == {}, "docs/reproductions.md is stale: regenerate it"
    summary = summary_row(text, paper)
    verdicts = [row[7] for row in committed]
    assert (summary["rows"], summary["match"], summary["differ"]) == (
        str(len(committed)), str(verdicts.count("match")), str(verdicts.count("differs")))
    for basis in BASES:
        rows = [row for row in committed if row[2] == basis]
        assert summary[f"{basis} (match)"] == \
            f"{len(rows)} ({sum(row[7] == 'match' for row in rows)})", basis
    printed_matches = sum(row[2] == "printed" and row[7] == "match" for row in committed)
    assert summary["reproduced"] == str(printed_matches)
