"""The accounting rows of every paper's reproduction (``privfl reproduce P --no-training``, a few
seconds each): every match within its tolerance, every difference explained, the counts and the
pinned values of tests/reproduce/_reproduce_expected.py; deterministic."""

from __future__ import annotations

import pytest
from _reproduce_expected import ACCOUNTING, check_rows

from privfl.reproduce.papers import PAPERS
from privfl.reproduce.report import reproduce


@pytest.mark.parametrize("paper", list(PAPERS))
def test_accounting_rows(paper):
    rep = reproduce(paper, "quick", training=False)
    assert rep.paper == paper and rep.title == PAPERS[paper].title
    assert all(row.kind == "accounting" for row in rep.rows)
    check_rows(rep.to_dict(), ACCOUNTING[paper], paper)
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
