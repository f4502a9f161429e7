"""Ray faults that need no Ray instance: an ``--address`` where nothing listens fails in one line
within a bounded time (before: Ray retried "Failed to connect to GCS" for minutes)."""

from __future__ import annotations

import socket
import time
import types

import pytest

from privfl.backends import cluster


@pytest.fixture
def fake_ray(monkeypatch):
    """A ray module whose init must not be reached."""
    def init(**kwargs):
        raise AssertionError("ray.init was called")

    module = types.SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setattr(cluster, "require_ray", lambda option: module)
    return module


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again: nothing listens there


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_address_where_nothing_listens_fails_fast_in_one_line(fake_ray, scheme):
    address = f"{scheme}127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(ValueError) as error:
        cluster.connect(address)
    assert time.monotonic() - started < cluster.CONNECT_TIMEOUT
    message = str(error.value)
    assert message.startswith(f"--address = {address!r}: cannot connect to a Ray cluster there "
                              f"within {cluster.CONNECT_TIMEOUT:g} s (")
    assert "\n" not in message


def test_an_unreachable_address_waits_at_most_the_timeout(monkeypatch):
    def never(address, timeout):
        time.sleep(timeout)
        raise TimeoutError("timed out")

    monkeypatch.setattr(socket, "create_connection", never)
    started = time.monotonic()
    with pytest.raises(ValueError, match=r"within 0.2 s \(timed out\)"):
        cluster._probe("10.255.255.1:6379", timeout=0.2)
    assert time.monotonic() - started < 2


def test_a_listening_address_is_passed_to_ray(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        cluster._probe(f"127.0.0.1:{server.getsockname()[1]}")  # no error
    cluster._probe("auto")  # left to Ray
