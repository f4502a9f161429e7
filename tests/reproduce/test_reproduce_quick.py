"""``privfl reproduce P --scale quick`` as a user runs it (slow: minutes on 2 cores; ``make
test-slow``), for Hasircioglu and Gunduz 2022, Zhang, Chen and Yang 2022 and Asoodeh et al. 2021
(Xie et al. 2023 and Zheng et al. 2021: test_reproduce_quick_certification.py, so that both
workers share the longest reproductions): every match row within its tolerance, every
difference explained, the verdict counts and pinned values (tests/reproduce/
_reproduce_expected.py), the counts by basis, the training rows, the three files of --out, and
docs/reproductions.md against this fresh table (tests/reproduce/_reproduce_document.py); the
check itself is tests/reproduce/_reproduce_quick.py."""

from __future__ import annotations

import pytest
from _reproduce_quick import SPLIT, check_quick_reproduction

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("paper", SPLIT["test_reproduce_quick.py"])
def test_quick_reproduction(paper, tmp_path):
    check_quick_reproduction(paper, tmp_path)
