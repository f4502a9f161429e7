"""Fixtures for every test."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """`privfl run` (the runner sets its main thread to one torch thread) and the benchmarks
    change torch's thread count: give every test the session's own back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
