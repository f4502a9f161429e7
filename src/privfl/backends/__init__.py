"""Where a round's local work runs: in this process (default) or sharded across Ray workers.

* :class:`LocalBackend` — the in-process vectorised engine (``trainer.train``, with the
  trainer's client threads); the default.
* :class:`~privfl.backends.ray_backend.RayBackend` — every round's cohort cut into contiguous
  shards, one per Ray actor; each actor holds the clients' data and a trainer once per run and
  runs ``trainer.train_streams`` on its shard. Same config and seed, same models and privacy
  reports as the local backend (``docs/ray.md``).
* :func:`train_clients` — the hook the algorithms' local work calls; it goes to the backend
  selected with :func:`use_backend` (``privfl run --backend ray`` selects one for the run).

Algorithms whose local work goes through the hook: :data:`SHARDED_ALGORITHMS`; the others run
in the driver's process (:data:`NOT_SHARDED` says why), and :func:`check_algorithm` refuses
them on a distributed backend rather than ignoring the request.
"""

from __future__ import annotations

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
    "NOT_SHARDED",
    "SHARDED_ALGORITHMS",
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
#: algorithms (``federated.algorithm``) whose local work runs through :func:`train_clients`
SHARDED_ALGORITHMS = ("prifedsync", "dp-fedavg", "insdp-fedsgd", "insdp-fedavg")
#: why the other algorithms run in the driver's process only (measured on the demo
#: configurations: a round's gradient takes 1-5 ms here, a sharded call's overhead 70-130 ms)
NOT_SHARDED = {
    "dp-dsgd": "a round is one clipped gradient of the sampled records at the server's model "
               "(no local steps), summed in fixed chunks of records; a shard must be whole "
               "chunks to keep the result identical, and a round of the shipped configurations "
               "samples fewer records than one chunk (Ray would add about 0.1 s a call to 1-5 ms "
               "of work)",
    "projected-sgd": "a round is one clipped gradient per user at the server's model (no local "
                     "steps), summed in fixed chunks of users; a shard must be whole "
                     "chunks to keep the result identical, and a round of the shipped "
                     "configurations has fewer users than one chunk (Ray would add about 0.1 s "
                     "a call to 1-5 ms of work)",
}


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


def check_algorithm(backend: Backend | str, algorithm: str) -> None:
    """ValueError unless ``algorithm``'s local work can run on ``backend`` (a backend or its
    name): every algorithm runs locally; a distributed backend needs one of
    :data:`SHARDED_ALGORITHMS`."""
    name = backend if isinstance(backend, str) else backend.name
    distributed = name != "local" or isinstance(backend, ShardedBackend)
    if distributed and algorithm not in SHARDED_ALGORITHMS:
        why = NOT_SHARDED.get(algorithm, "its local work does not go through the backend hook")
        raise ValueError(
            f"federated.algorithm = {algorithm!r} is not allowed with --backend {name}: {why}; "
            "run it with --backend local, or several runs at once with privfl sweep --backend "
            f"ray (distributed rounds: {', '.join(SHARDED_ALGORITHMS)})")
