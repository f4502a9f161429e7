"""The files of a run directory and how they are written.

::

    DIR/config.yaml          resolved configuration (every default filled in)
    DIR/metrics.jsonl        one JSON object per round (accuracies, mu_max, epsilon, timing)
    DIR/privacy.json         final privacy report, the `results` format of `privfl account`
    DIR/summary.json         the final summary (what `privfl run --json` prints)
    DIR/accuracy.png         personalised and global accuracy per round
    DIR/privacy.png          epsilon (each accountant, bound/estimate) and mu_max per round
    DIR/report.md            a short human-readable report
    DIR/checkpoints/round-000012.pt   the last few checkpoints (model/optimizer/RNG states)

JSON has no infinity or NaN: such floats are written as the strings ``"inf"``/``"nan"``.
Writes of whole files go through a temporary file and an atomic rename.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["RunDirectory", "json_safe"]

_CHECKPOINT = re.compile(r"^round-(\d{6,})\.pt$")


#: how :func:`json_safe` spells non-finite floats
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def logged_number(value: Any) -> Any:
    """The inverse of :func:`json_safe` for one value: ``"inf"``, ``"-inf"``, ``"nan"`` back to
    floats; anything else unchanged."""
    return NON_FINITE.get(value, value) if isinstance(value, str) else value


def json_safe(value: Any) -> Any:
    """Replace non-finite floats by strings, tuples by lists (JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        try:
            return json_safe(value.item())
        except (TypeError, ValueError):
            return str(value)
    return value


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as stream:
        stream.write(text)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(tmp, path)


class RunDirectory:
    """Paths and writers of one run directory."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # ------------------------------------------------------------------ paths
    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def privacy(self) -> Path:
        return self.path / "privacy.json"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def report(self) -> Path:
        return self.path / "report.md"

    @property
    def accuracy_plot(self) -> Path:
        return self.path / "accuracy.png"

    @property
    def privacy_plot(self) -> Path:
        return self.path / "privacy.png"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    def checkpoint(self, round_index: int) -> Path:
        return self.checkpoints / f"round-{round_index:06d}.pt"

    # ------------------------------------------------------------------ set-up
    def check_new(self) -> None:
        """Refuse a directory that already holds a run, or a file."""
        if self.config.exists():
            raise ValueError(
                f"out = {str(self.path)!r} already holds a run (config.yaml): continue it with "
                f"--resume {self.path} or choose another --out"
            )
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"out = {str(self.path)!r} is a file, not a directory")

    def create(self) -> None:
        """Make a fresh run directory (see :meth:`check_new`)."""
        self.check_new()
        self.path.mkdir(parents=True, exist_ok=True)
        self.checkpoints.mkdir(exist_ok=True)

    def require_existing(self) -> None:
        if not self.config.is_file():
            raise ValueError(
                f"resume = {str(self.path)!r} is not a run directory: it has no config.yaml"
            )
        self.checkpoints.mkdir(exist_ok=True)

    # ------------------------------------------------------------------ writers
    def write_text(self, path: Path, text: str) -> None:
        _atomic_write(path, text)

    def write_json(self, path: Path, payload: Any) -> None:
        _atomic_write(path, json.dumps(json_safe(payload), indent=2) + "\n")

    def write_metrics(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Rewrite metrics.jsonl with ``rows`` (used when resuming from a checkpoint)."""
        _atomic_write(self.metrics, "".join(json.dumps(json_safe(r)) + "\n" for r in rows))

    def append_metrics(self, row: Mapping[str, Any]) -> None:
        with open(self.metrics, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(json_safe(row)) + "\n")
            stream.flush()

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics.is_file():
            return []
        return [json.loads(line) for line in self.metrics.read_text().splitlines() if line]

    # ------------------------------------------------------------------ checkpoints
    def list_checkpoints(self) -> list[tuple[int, Path]]:
        """``(round, path)`` of every checkpoint file, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        found = []
        for entry in self.checkpoints.iterdir():
            match = _CHECKPOINT.match(entry.name)
            if match and entry.is_file():
                found.append((int(match.group(1)), entry))
        return sorted(found)

    def prune_checkpoints(self, keep: int) -> None:
        """Delete all but the newest ``keep`` checkpoints."""
        for _, path in self.list_checkpoints()[:-keep]:
            path.unlink(missing_ok=True)
