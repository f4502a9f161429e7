"""The helpers behind issue 46's new rows: Asoodeh's Corollary 3 and Eq. (12), Zheng's quick
training summaries, Hasircioglu's ordering text (fast; the rows themselves are pinned in
tests/reproduce/_reproduce_expected.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.reproduce.asoodeh2021 import corollary3_sum, equation12
from privfl.reproduce.hasircioglu2022 import _ordering_text
from privfl.reproduce.training import QuickRun
from privfl.reproduce.zheng2021 import _mean_accuracy, _rounds_to, quick_config


@settings(max_examples=25, deadline=None)
@given(st.floats(0.1, 3.0), st.integers(1, 20), st.floats(0.05, 2.0), st.floats(0.5, 5.0),
       st.integers(1, 12))
def test_eq12_is_corollary3s_sum_at_constant_parameters(eps, m, eta, sigma, rounds):
    exact = corollary3_sum(eps, m, [eta] * rounds, [sigma] * rounds)
    assert equation12(eps, m, eta, sigma, rounds) == pytest.approx(exact, rel=1e-9, abs=1e-300)


@settings(max_examples=25, deadline=None)
@given(st.floats(0.1, 3.0), st.integers(1, 20), st.lists(st.floats(0.05, 2.0), min_size=1,
                                                         max_size=10), st.floats(0.5, 5.0))
def test_eq12_bounds_the_sum_with_the_smallest_step(eps, m, etas, sigma):
    """theta is increasing in r, and r = 2 rho sqrt(m) / (eta sigma) is largest at the smallest
    eta: every factor of Eq. (12) is at least the sum's."""
    exact = corollary3_sum(eps, m, etas, [sigma] * len(etas))
    assert equation12(eps, m, min(etas), sigma, len(etas)) >= exact * (1 - 1e-9)


def _run(accuracies):
    metrics = [{"round": i + 1, "personalised_accuracy": a} for i, a in enumerate(accuracies)]
    return QuickRun("r", {"final": {}}, metrics, 0.0)


def test_rounds_to_target_and_mean_accuracy():
    run = _run([0.4, 0.7, 0.76, 0.8])
    assert _rounds_to(run, 0.76) == 3.0 and _rounds_to(run, 0.75) == 3.0
    assert _rounds_to(run, 0.81) is None
    assert _mean_accuracy(run) == pytest.approx(100 * (0.4 + 0.7 + 0.76 + 0.8) / 4)


def test_quick_settings_follow_the_papers_table_2():
    b16, b8 = quick_config("p0.5-B16"), quick_config("p0.5-B8")
    assert b16["privacy"]["sigma"] == b8["privacy"]["sigma"] == 0.75
    assert b16["federated"]["client_rate"] == b8["federated"]["client_rate"] == 0.5
    assert (b8["training"]["batch_size"] * b8["training"]["local_steps"]
            == b16["training"]["batch_size"] * b16["training"]["local_steps"])  # B K as Table 2
    with pytest.raises(ValueError, match="setting = 'p1-B16' is not known"):
        quick_config("p1-B16")


def test_ordering_text_names_the_first_break():
    assert _ordering_text(["A", "B"], [[1.0, 2.0], [1.0, 3.0]]) == "A <= B"
    assert _ordering_text(["A", "B", "C"], [[1.0, 2.0], [1.5, 1.0], [2.0, 2.0]]) == \
        "A > B at 1 of 2 points"
    assert _ordering_text(["A", "B", "C"], [[1.0], [2.0], [1.5]]) == "B > C at 1 of 1 points"


def test_the_slow_files_split_every_paper_once():
    from pathlib import Path

    from _reproduce_quick import SPLIT

    from privfl.reproduce.papers import PAPERS

    papers = [p for group in SPLIT.values() for p in group]
    assert sorted(papers) == sorted(PAPERS)  # each paper in exactly one file
    here = Path(__file__).parent
    assert all((here / name).is_file() for name in SPLIT)
