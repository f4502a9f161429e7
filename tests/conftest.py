"""Fixtures for every test, and how tests treat optional data sources.

Optional data (the Debian package ``dataset-fashion-mnist``, which ``make install`` installs
where it can, and anything a download would fetch): a test that needs an absent source is
skipped with the loader's own message as its reason (:class:`privfl.data.errors.
DatasetNotFoundError`), unless ``PRIVFL_REQUIRE_DATA=1`` (CI, ``.ci/run``), where it fails.
``PRIVFL_TEST_HIDE_DATA=1`` hides every installed source (the Debian folder and the privfl cache
point at an empty folder): ``tests/data/test_without_data.py`` runs the data-dependent tests so.
``PRIVFL_TEST_DATA_READERS=FILE`` (``make test``) appends to FILE the id of every test that looks
for optional data in this process (:func:`privfl.data.download.data_home`, through which every
optional source is found): the tests that hiding the data can change.
"""

from __future__ import annotations

import os
import tempfile

import mpmath
import pytest
import torch

REQUIRE_DATA = os.environ.get("PRIVFL_REQUIRE_DATA", "") not in ("", "0")
HIDE_DATA = os.environ.get("PRIVFL_TEST_HIDE_DATA", "") not in ("", "0")
DATA_READERS = os.environ.get("PRIVFL_TEST_DATA_READERS", "")


def _record_data_readers(path: str) -> None:
    """Wrap :func:`privfl.data.download.data_home` (and every privfl module's imported name of
    it) so that each call appends the running test's id to ``path`` (one line per call; appends
    of a line are atomic, so pytest-xdist's workers can share the file)."""
    import sys

    from privfl.data import download

    original = download.data_home

    def data_home(root=None):
        test = os.environ.get("PYTEST_CURRENT_TEST", "")
        if test:
            with open(path, "a", encoding="utf-8") as log:
                log.write(test.rsplit(" (", 1)[0] + "\n")
        return original(root)

    for name, module in list(sys.modules.items()):
        if name.startswith("privfl") and getattr(module, "data_home", None) is original:
            module.data_home = data_home


def pytest_configure(config):
    if HIDE_DATA:  # before any test module imports the constants
        from pathlib import Path

        from privfl.data import sources

        empty = Path(tempfile.mkdtemp(prefix="privfl-no-data-"))
        os.environ["PRIVFL_DATA"] = str(empty)
        sources.FASHION_MNIST_SYSTEM_DIR = empty / "fashion-mnist"
    if DATA_READERS:
        import privfl.data  # noqa: F401  (its modules' names of data_home, wrapped below)

        _record_data_readers(DATA_READERS)
    # as the application layer does: register the built-in algorithms' config models (torch-free)
    from privfl.config.algorithms import register_builtin_algorithms

    register_builtin_algorithms()


def _skip_if_data_absent(error: BaseException) -> None:
    from privfl.data.errors import DatasetNotFoundError

    if isinstance(error, DatasetNotFoundError) and not REQUIRE_DATA:
        reason = " ".join(str(error).split())
        pytest.skip(f"optional data source absent (PRIVFL_REQUIRE_DATA=1 fails instead): "
                    f"{reason[:300]}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    try:
        return (yield)
    except Exception as error:
        _skip_if_data_absent(error)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except Exception as error:
        _skip_if_data_absent(error)
        raise


@pytest.fixture(autouse=True)
def _restore_torch_threads():
    """`privfl run` (the runner sets its main thread to one torch thread) and the benchmarks
    change torch's thread count: give every test the session's own back."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _restore_mpmath_precision():
    """Tests that set mpmath's (global) precision must not leak it into the next test: under
    pytest-xdist the next test is a different one in each run (a 15-digit reference once failed
    an 8-ulp check of a 50-digit test)."""
    before = mpmath.mp.prec
    yield
    mpmath.mp.prec = before
