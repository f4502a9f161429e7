"""``privfl reproduce P --scale quick`` for Xie et al. 2023 and Zheng et al. 2021 (their Monte
Carlo certification and training rows), checked as tests/reproduce/test_reproduce_quick.py checks
the other three: a file of their own so that the slow suite's two workers share the longest
reproductions."""

from __future__ import annotations

import pytest
from _reproduce_quick import SPLIT, check_quick_reproduction

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("paper", SPLIT["test_reproduce_quick_certification.py"])
def test_quick_reproduction(paper, tmp_path):
    check_quick_reproduction(paper, tmp_path)
