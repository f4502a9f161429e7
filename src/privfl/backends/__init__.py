"""Where a round's local work runs: in this process (default) or sharded across Ray workers.

* :class:`LocalBackend` — the in-process vectorised engine (``trainer.train``, with the
  trainer's client threads); the default.
* :class:`~privfl.backends.ray_backend.RayBackend` — every round's cohort cut into contiguous
  shards, one per Ray actor; each actor holds the clients' data and a trainer once per run and
  runs ``trainer.train_streams`` on its shard. Same config and seed, same models and privacy
  reports as the local backend (``docs/ray.md``).
* :func:`train_clients` — the hook the algorithms' local work calls; it goes to the backend
  selected with :func:`use_backend` (``privfl run --backend ray`` selects one for the run).

An algorithm whose local work does not go through the hook says so (its class attribute
``local_only``, the reason; the backends name no algorithm), and :func:`check_algorithm` refuses
it on a distributed backend rather than ignoring the request.
"""

from __future__ import annotations

from typing import Any

from privfl._validation import check_int
from privfl.backends.base import (
    Backend,
    CallRecord,
    InProcessShards,
    LocalBackend,
    ShardedBackend,
    active_backend,
    merge_stats,
    shard_bounds,
    train_clients,
    use_backend,
)
from privfl.backends.cluster import INSTALL_HINT, connect, require_ray

__all__ = [
    "BACKENDS",
    "INSTALL_HINT",
    "Backend",
    "CallRecord",
    "InProcessShards",
    "LocalBackend",
    "ShardedBackend",
    "active_backend",
    "check_algorithm",
    "check_options",
    "connect",
    "make_backend",
    "merge_stats",
    "require_ray",
    "shard_bounds",
    "train_clients",
    "use_backend",
]

#: the ``--backend`` choices
BACKENDS = ("local", "ray")
def check_options(name: str = "local", address: str | None = None,
                  workers: int | None = None) -> None:
    """ValueError unless the options make a backend (no connection is made): ``name`` one of
    :data:`BACKENDS`, ``address`` and ``workers`` only for ray, Ray installed for ray."""
    if name not in BACKENDS:
        raise ValueError(f"backend = {name!r} is not allowed: must be one of "
                         f"{', '.join(BACKENDS)}")
    if name == "local":
        for option, value in (("address", address), ("workers", workers)):
            if value is not None:
                raise ValueError(f"{option} = {value!r} is not allowed with backend 'local': "
                                 "it applies to --backend ray")
        return
    if workers is not None:
        check_int("workers", workers, 1)
    require_ray()


def make_backend(name: str = "local", address: str | None = None,
                 workers: int | None = None) -> Backend:
    """The backend ``name`` (``local`` or ``ray``); ``address`` and ``workers`` only for ray
    (see :class:`~privfl.backends.ray_backend.RayBackend`, which connects to Ray). Without Ray
    installed, ``ray`` raises a one-line ValueError that says how to install it."""
    check_options(name, address, workers)
    if name == "local":
        return LocalBackend()
    from privfl.backends.ray_backend import RayBackend

    return RayBackend(address, workers)


def check_algorithm(backend: Backend | str, algorithm: Any) -> None:
    """ValueError unless ``algorithm``'s local work can run on ``backend`` (a backend or its
    name). ``algorithm`` is an algorithm class or object: its ``name`` and its ``local_only``
    (``None`` when its local work goes through :func:`train_clients`, else why it runs in the
    driver's process). Every algorithm runs locally; a distributed backend needs
    ``local_only is None``."""
    name = backend if isinstance(backend, str) else backend.name
    distributed = name != "local" or isinstance(backend, ShardedBackend)
    why = getattr(algorithm, "local_only", None)
    if distributed and why is not None:
        raise ValueError(
            f"federated.algorithm = {algorithm.name!r} is not allowed with --backend {name}: "
            f"{why}; run it with --backend local, or several runs at once with privfl sweep "
            "--backend ray")
