"""Provenance of a run: which software on which machine produced it (summary.json, reports).

``run_provenance(config_dict)`` returns::

    {"privfl": "0.1.0", "torch": "2.13.0", "python": "3.11.2", "platform": "Linux-...-x86_64",
     "threads": 2, "config_sha256": "..."}

``threads`` is torch's intra-op thread count (``torch.get_num_threads()``) when torch is loaded,
else the CPUs this process may use. ``config_sha256`` is the SHA-256 of the canonical JSON of
the resolved configuration (:func:`privfl.runs.checkpoints.digest_json`), the same for every
run of one configuration. None of these is computed from data: they are public, except that the
digest identifies a seeded run's configuration (and so its seed) as config.yaml itself does,
which is why summary.json is outside the guarantee in seeded mode
(:func:`privfl.algorithms.outputs.file_outputs`). The wall time is ``wall_seconds`` beside it.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping
from importlib import metadata
from typing import Any

__all__ = ["PROVENANCE_KEYS", "config_digest", "run_provenance"]

#: the keys of :func:`run_provenance`, in order
PROVENANCE_KEYS = ("privfl", "torch", "python", "platform", "threads", "config_sha256")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _threads() -> int:
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.get_num_threads())
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def config_digest(config: Mapping[str, Any]) -> str:
    """``config_sha256``: the SHA-256 of the canonical JSON of ``config`` (the resolved
    configuration as a JSON-ready mapping); ``privfl check-privacy`` recomputes it from
    config.yaml."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config = {type(config).__name__} is not allowed: must be the "
                         "resolved configuration as a mapping")
    from privfl.runs.checkpoints import digest_json  # (imports torch: only when called)

    return digest_json(dict(config))


def run_provenance(config: Mapping[str, Any]) -> dict[str, Any]:
    """Versions, platform, threads and the digest of ``config`` (the resolved configuration as
    a JSON-ready mapping, e.g. ``config.model_dump(mode="json")``)."""
    digest = config_digest(config)
    import privfl

    return {
        "privfl": getattr(privfl, "__version__", None) or _version("privfl"),
        "torch": _version("torch"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "threads": _threads(),
        "config_sha256": digest,
    }
