"""The Flower tests (marker ``flower``, ``make test-flower``): they need ``flwr`` (its own
virtual environment, ``.venv-flower``) and reuse the backend tests' short configurations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backends"))


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().parent == here:
            item.add_marker(pytest.mark.flower)
