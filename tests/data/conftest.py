"""Fixtures for the privfl.data tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_network():
    """An opener that fails the test if anything tries to download."""

    def opener(url, timeout):  # pragma: no cover - must not be called
        raise AssertionError(f"unexpected network access: {url}")

    return opener


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Point the privfl cache at a temporary folder so tests never touch the real one."""
    monkeypatch.setenv("PRIVFL_DATA", str(tmp_path / "privfl-cache"))
