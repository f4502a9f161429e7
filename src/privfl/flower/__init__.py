"""privfl inside Flower (``pip install 'privfl[flower]'``; ``docs/flower.md``).

* :func:`~privfl.flower.apps.make_server_app` / :func:`~privfl.flower.apps.make_client_app`:
  privfl's ServerApp (algorithm, server-side DP, accounting, run directory) and ClientApp
  (privfl's engine on the node's own client), bit-identical to a local run;
* :func:`~privfl.flower.apps.simulate`: both on Flower's simulation runtime
  (``privfl run CONFIG --backend flower``);
* :class:`~privfl.flower.accountant.PrivflAccountant`: privfl's accountants behind Flower's
  ``PrivacyAccountant`` interface, for Flower's own DP wrappers;
* :func:`~privfl.flower.project.write_project`: a Flower app project (``privfl flower new``).

Importing this package does not import ``flwr``; its functions do.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__all__ = ["FlowerBackend", "PrivflAccountant", "make_client_app", "make_server_app",
           "simulate", "write_project"]

_WHERE = {"FlowerBackend": "backend", "PrivflAccountant": "accountant",
          "make_client_app": "apps", "make_server_app": "apps", "simulate": "apps",
          "write_project": "project"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'privfl.flower' has no attribute {name!r}")
    return getattr(import_module(f"privfl.flower.{_WHERE[name]}"), name)
