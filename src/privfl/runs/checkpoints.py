"""Checkpoints that cannot silently corrupt a run: digests written with them, checked on resume.

``torch.load`` does not check the zip archive's CRCs, so a checkpoint whose tensors were
overwritten loads without complaint. Every checkpoint ``round-R.pt`` therefore gets a digest
record ``round-R.json``::

    {"format": "privfl-checkpoint-record/1", "run_id": ..., "round": R,
     "sha256": <of the .pt file>, "config_sha256": <of the run's fixed configuration>,
     "metrics_sha256": <of the metrics of rounds 1..R>}

written after the checkpoint (each file through a temporary file and an atomic rename, with
``fsync``), so a kill leaves at worst a checkpoint without a record, which is not trusted.

:meth:`CheckpointStore.candidates` yields the checkpoints newest first with either their payload
(the record exists, belongs to this run, and every digest matches) or the reason they cannot be
used; the caller falls back to the next one and says so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from privfl.runs.rundir import RunDirectory, json_safe, write_atomically

__all__ = ["CHECKPOINT_FORMAT", "Candidate", "CheckpointStore", "digest_json"]

CHECKPOINT_FORMAT = "privfl-run-checkpoint/2"
RECORD_FORMAT = "privfl-checkpoint-record/1"
_CHUNK = 1 << 20


def digest_json(value: Any) -> str:
    """SHA-256 of the canonical JSON of ``value`` (sorted keys, no spaces, json_safe floats)."""
    text = json.dumps(json_safe(value), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Candidate:
    """One checkpoint: its payload if it can be trusted, else ``problem`` says why not, and
    ``damaged`` whether the file itself is at fault (corrupted, unverifiable: the run may start
    again from round 0) rather than the run it is resumed into (another configuration or
    dataset: resuming would change what the logged rounds were)."""

    round: int
    path: Path
    payload: dict[str, Any] | None = None
    problem: str | None = None
    damaged: bool = False


class CheckpointStore:
    """Write and verify the checkpoints of the run in ``directory`` (run id ``run_id``)."""

    def __init__(self, directory: RunDirectory, run_id: str) -> None:
        self.dir, self.run_id = directory, run_id

    def write(self, round_index: int, payload: dict[str, Any], *, config_digest: str,
              metrics: list[dict[str, Any]]) -> Path:
        """Save ``payload`` (stamped with format, run id and round) and its digest record."""
        path = self.dir.checkpoint(round_index)
        payload = {**payload, "format": CHECKPOINT_FORMAT, "run_id": self.run_id,
                   "round": round_index}
        write_atomically(path, lambda stream: torch.save(payload, stream))
        record = {
            "format": RECORD_FORMAT, "run_id": self.run_id, "round": round_index,
            "sha256": _file_sha256(path), "config_sha256": config_digest,
            "metrics_sha256": digest_json(metrics),
        }
        text = json.dumps(record, indent=2) + "\n"
        write_atomically(self.dir.checkpoint_record(round_index),
                      lambda stream: stream.write(text.encode("utf-8")))
        return path

    def candidates(self, config_digest: str | tuple[str, ...]) -> Iterator[Candidate]:
        """The checkpoints, newest first, each verified (see the module docstring);
        ``config_digest``: the configuration digest a record must carry, or a tuple of those
        accepted."""
        digests = (config_digest,) if isinstance(config_digest, str) else tuple(config_digest)
        if not digests or not all(isinstance(d, str) for d in digests):
            raise ValueError(f"config_digest = {config_digest!r} is not allowed: must be a "
                             "digest string or a tuple of them")
        for round_index, path in reversed(self.dir.list_checkpoints()):
            candidate = Candidate(round_index, path)
            try:
                candidate.payload = self._verified(round_index, path, digests)
            except _UntrustedError as reason:
                candidate.problem, candidate.damaged = str(reason), reason.damaged
            yield candidate

    def _verified(self, round_index: int, path: Path, digests: tuple[str, ...]
                  ) -> dict[str, Any]:
        record_path = self.dir.checkpoint_record(round_index)
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
            if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
                raise ValueError("unknown format")
        except FileNotFoundError:
            raise _UntrustedError("no digest record (its write was interrupted)") from None
        except (OSError, ValueError) as error:
            raise _UntrustedError(f"unreadable digest record ({error})") from None
        if record.get("run_id") != self.run_id:
            raise _UntrustedError("it belongs to another run (run id differs)")
        if record.get("round") != round_index:
            raise _UntrustedError(f"its digest record is for round {record.get('round')!r}")
        if _file_sha256(path) != record.get("sha256"):
            raise _UntrustedError("SHA-256 digest mismatch: the file was modified or corrupted")
        if record.get("config_sha256") not in digests:
            raise _UntrustedError("written under a different configuration than config.yaml",
                                  damaged=False)
        try:
            payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except Exception as error:  # noqa: BLE001 - any failure to load means: do not use it
            reason = " ".join(str(error).split())[:200]
            raise _UntrustedError(f"cannot be loaded ({reason})") from None
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise _UntrustedError("not a privfl checkpoint of this version")
        if payload.get("run_id") != self.run_id or payload.get("round") != round_index:
            raise _UntrustedError("its run id or round does not match its digest record")
        metrics = payload.get("metrics")
        if not isinstance(metrics, list) or digest_json(metrics) != record.get("metrics_sha256"):
            raise _UntrustedError("its metrics do not match the digest record")
        return payload


class _UntrustedError(Exception):
    """Why a checkpoint cannot be used; ``damaged`` (default): the file is at fault."""

    def __init__(self, reason: str, *, damaged: bool = True) -> None:
        super().__init__(reason)
        self.damaged = damaged
