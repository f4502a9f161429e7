"""Connecting to Ray: an existing cluster, or a local instance bound to the loopback address.

Ray is an optional dependency (``pip install 'privfl[ray]'``): :func:`require_ray` imports it or
raises a ``ValueError`` that says how to install it. :func:`connect` either joins the cluster at
``address`` (``ray://HEAD:10001`` through Ray Client, or ``HEAD:6379`` / ``auto`` from a machine
of the cluster) or starts a local instance on 127.0.0.1 (no dashboard, a 1 GiB object store, no
usage statistics sent), which :meth:`RayConnection.close` shuts down again. Connecting to a
cluster never shuts it down.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType

from privfl._validation import check_int

__all__ = ["INSTALL_HINT", "RayConnection", "connect", "require_ray"]

INSTALL_HINT = "pip install 'privfl[ray]' (or pip install ray)"
#: seconds to wait for a TCP connection to ``--address`` before giving up (Ray itself retries
#: "Failed to connect to GCS" for minutes)
CONNECT_TIMEOUT = 10.0

#: object store of a local instance (shared memory, used only as far as needed): the training
#: data plus one round's traffic without spilling to disk (a round of 16 PriFedSync clients of
#: the MNIST CNN moves 220 MiB each way; with 256 MiB it spilled and took 10x longer)
LOCAL_OBJECT_STORE_BYTES = 1024 * 1024 * 1024


def require_ray(option: str = "--backend ray") -> ModuleType:
    """The ``ray`` module, or a one-line ValueError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ValueError(f"{option} needs Ray, which is not installed: {INSTALL_HINT}") from None
    return ray


def _probe(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """A one-line ValueError naming ``--address`` unless something accepts a TCP connection at
    its ``HOST:PORT`` within ``timeout`` seconds (``auto`` and addresses without a port are left
    to Ray)."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or not host or not port.isdigit():
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except (OSError, ValueError, OverflowError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else (
            str(error) or type(error).__name__)
        raise ValueError(
            f"--address = {address!r}: cannot connect to a Ray cluster there within "
            f"{timeout:g} s ({reason}): check that the head node runs (ray start --head) and "
            "that the address and port are right") from None


def _loopback_environment() -> None:
    """Keep a local instance on 127.0.0.1 and quiet: Ray resolves 127.0.0.1 to the machine's
    network address unless clustering is off, and would otherwise report usage statistics."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:  # the constant is read when ray is imported: set it too if ray already is
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False
    except (ImportError, AttributeError):  # pragma: no cover - another Ray layout
        pass


@dataclass
class RayConnection:
    """A connection made by :func:`connect`.

    ``started``: this process started the (local) instance; ``owned``: :func:`connect` made the
    connection (False when the process was already connected), so :meth:`close` ends it.
    """

    ray: ModuleType
    address: str | None
    started: bool
    owned: bool = True

    @property
    def cpus(self) -> int:
        """CPUs the cluster has (all nodes)."""
        return int(self.ray.cluster_resources().get("CPU", 0))

    def describe(self) -> str:
        if self.address is None:
            return "local Ray instance on 127.0.0.1"
        return f"Ray cluster at {self.address}"

    def local_raylet_died(self) -> bool:
        """Whether the raylet of the local instance this process started has exited (False for a
        cluster elsewhere, whose node deaths Ray reports through its calls). Polled while privfl
        waits on its workers: Ray's driver exits the process with status 1 a few seconds after
        its raylet dies (it first tries to rebuild lost objects), before any call returns."""
        if not self.started or self.address is not None:
            return False
        node = getattr(getattr(self.ray, "_private", None), "worker", None)
        node = getattr(getattr(node, "global_worker", None), "node", None)
        raylets = getattr(node, "all_processes", {}).get("raylet", []) if node else []
        return any(info.process.poll() is not None for info in raylets)

    def close(self) -> None:
        """Disconnect (a local instance this process started stops with it); a connection
        that existed before :func:`connect` is left open."""
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()


def connect(address: str | None = None, *, cpus: int | None = None,
            object_store_bytes: int = LOCAL_OBJECT_STORE_BYTES,
            log_to_driver: bool = False) -> RayConnection:
    """Join the Ray cluster at ``address``, or start a local instance with ``cpus`` CPUs.

    ``log_to_driver``: show the workers' output here (``privfl sweep`` prints progress from its
    tasks that way). A process already connected to Ray (``ray.init`` called before) keeps that
    connection: :meth:`RayConnection.close` then leaves it open.
    """
    if address is not None and (not isinstance(address, str) or not address.strip()):
        raise ValueError(f"address = {address!r} is not allowed: must be a Ray address such as "
                         "ray://HEAD:10001, HEAD:6379 or auto")
    if address is None:
        _loopback_environment()
    if log_to_driver:  # every progress line, without Ray's deduplication or colours
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    ray = require_ray("--backend ray" if address is None else "--address")
    if ray.is_initialized():
        return RayConnection(ray, address, started=False, owned=False)
    if address is not None:
        _probe(address.strip())
    import logging

    if address is None:
        cpus = check_int("cpus", cpus, 1) if cpus is not None else None
        ray.init(address="local", num_cpus=cpus, include_dashboard=False,
                 object_store_memory=check_int("object_store_bytes", object_store_bytes,
                                               80 * 1024 * 1024),
                 _node_ip_address="127.0.0.1", log_to_driver=log_to_driver,
                 logging_level=logging.ERROR)
        return RayConnection(ray, None, started=True)
    try:
        ray.init(address=address.strip(), log_to_driver=log_to_driver,
                 logging_level=logging.ERROR)
    except (ConnectionError, ValueError, RuntimeError, TimeoutError) as error:
        message = " ".join(str(error).split())[:300]
        raise ValueError(f"address = {address!r}: cannot connect to a Ray cluster there "
                         f"({message})") from None
    return RayConnection(ray, address, started=False)
