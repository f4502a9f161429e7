"""``--backend``, ``--address`` and ``--workers``: where the engine's local training runs, for the
commands that train (``privfl run``, ``privfl certify``), and the backend they select.

``local`` trains in this process; ``ray`` cuts every engine call (a round's cohort, or the
gathered rows of the Monte Carlo replicas) into contiguous shards run by Ray workers, with the
same result (:mod:`privfl.backends`, ``docs/ray.md``).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:  # privfl.backends imports torch: only when a backend is made
    from privfl.backends import Backend

__all__ = ["AddressOpt", "BackendOpt", "WorkersOpt", "select_backend"]

BackendOpt = Annotated[
    str, typer.Option("--backend", help="Where the local training runs: local (this process) "
                      "or ray (every engine call - a round's cohort, the replicas' gathered "
                      "rows - sharded across Ray workers; same result; needs Ray: "
                      "pip install 'privfl\\[ray]'; docs/ray.md); privfl run also takes flower "
                      "(privfl's Flower apps on Flower's simulation, one node per client; same "
                      "result; pip install 'privfl\\[flower]'; docs/flower.md).")
]
AddressOpt = Annotated[
    str | None, typer.Option("--address", help="With --backend ray: the Ray cluster "
                             "(ray://HEAD:10001, HEAD:6379 or auto); default: a local Ray "
                             "instance on 127.0.0.1, stopped after the command.",
                             show_default=False)
]
WorkersOpt = Annotated[
    int | None, typer.Option("--workers", help="With --backend ray: workers sharing each "
                             "engine call (default: one per CPU of the cluster); with "
                             "--backend flower: the simulation's actors (default: one per "
                             "core).",
                             show_default=False)
]


def select_backend(stack: contextlib.ExitStack, name: str, address: str | None,
                   workers: int | None, console: Console) -> Backend:
    """The backend ``name`` (:func:`privfl.backends.make_backend`), active for the rest of
    ``stack`` (:func:`privfl.backends.use_backend`) and closed with it (a local Ray instance
    stops then); a distributed one is named on ``console``."""
    from privfl.backends import make_backend, use_backend

    engine = stack.enter_context(make_backend(name, address, workers))
    stack.enter_context(use_backend(engine))
    if name != "local":
        console.print(f"backend: {escape(engine.describe())}")
    return engine
