"""The other four of the slow suite's longer random lives (issue 44's state machine,
test_ledger_state_machine.py): a file of their own so that pytest-xdist's --dist loadfile puts
them on another worker than the first four."""

from __future__ import annotations

import pytest
import test_ledger_state_machine as lives


@pytest.mark.slow  # about a minute each on 2 cores
@pytest.mark.parametrize("name", lives.LONG_LIVES[4:])
def test_long_lives(name):
    lives.long_life(name)
