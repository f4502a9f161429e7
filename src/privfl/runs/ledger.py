"""The release ledger: an append-only, hash-chained record of everything a run released.

``DIR/ledger.jsonl`` holds one JSON object per line::

    {"index": i, "kind": K, "payload": {...}, "prev": H(i-1), "hash": H(i)}

``H(i) = sha256(canonical JSON of {"index", "kind", "payload", "prev"})`` (keys sorted, no
spaces, non-finite floats spelled as strings, :func:`~privfl.runs.rundir.json_safe`) and
``H(-1) = "0" * 64``: editing, removing or reordering an entry breaks the chain at that entry
(a hash chain in the manner of Haber and Stornetta 1991; it has no secret key, so it detects
edits of the files it records, not a forger who rewrites the whole chain consistently; the
numbers check-privacy recomputes from the configuration cover that case).

Each entry is written with one ``write`` and ``fsync`` *before* its release is shown or written
elsewhere, and no entry is ever rewritten or removed. The kinds:

* ``creation``: what was fixed when the run was created (:func:`creation_payload`): the whole
  resolved configuration (the plan: rounds, sampling, noise, delta, accountants; the stop
  rules; the privacy section, so a ``privacy.epsilon_budget`` is recorded here), the run id
  and the plan's pins. A run made before the ledger gets one at its first resume, marked
  ``reconstructed`` (what config.yaml said then);
* ``row``: a metrics row as ``metrics.jsonl`` shows it, before it is appended there
  (``{"round", "attempt", "row"}``; ``attempt``: how many resumes came before it);
* ``resume``: a resume (``{"overrides", "resumed_from", "rounds"}``; ``rounds``: the
  ``federated.rounds`` planned from then on, which the rows logged after it were written under);
* ``redrawn``: rows logged after the checkpoint a resume loaded, released and composed again
  (``{"rounds", "indices"}``: their round numbers and ledger indices);
* ``headline``: the headline, before it is written or printed (``{"epsilon", "delta",
  "method", "rounds", "rounds_accounted", "stop_reason", "sentence"}``);
* ``files``: the sha256 of every file of the run directory the run wrote (but metrics.jsonl,
  which the ``row`` entries record, and this file), after writing them (creation, resume,
  stop; ``{"files": {name: sha256}}``);
* ``torn``: a torn last line found at a resume (a kill in the middle of an append): its bytes
  are cut off and their length and digest recorded here. Its release was not shown, since an
  entry is complete on disk before its release is written; a complete last line without its
  newline is kept (:meth:`Ledger.repair`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfl.runs.rundir import json_safe, open_nofollow

__all__ = ["GENESIS", "KINDS", "LEDGER", "Entry", "Ledger", "LedgerError", "creation_record",
           "entry_hash", "file_digests", "open_ledger", "released_rounds"]

#: the ledger's file name in a run directory
LEDGER = "ledger.jsonl"
#: the ``prev`` of the first entry
GENESIS = "0" * 64
#: the entry kinds (see the module docstring)
KINDS = ("creation", "row", "resume", "redrawn", "headline", "files", "torn")


class LedgerError(ValueError):
    """A ledger whose chain is broken (an entry edited, removed, reordered or not JSON)."""


def _canonical(value: Any) -> bytes:
    return json.dumps(json_safe(value), sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")


def entry_hash(index: int, kind: str, payload: Mapping[str, Any], prev: str) -> str:
    """``H(i)`` of an entry (see the module docstring)."""
    return hashlib.sha256(_canonical({"index": index, "kind": kind, "payload": payload,
                                      "prev": prev})).hexdigest()


@dataclass(frozen=True)
class Entry:
    """One ledger entry."""

    index: int
    kind: str
    payload: dict[str, Any]
    prev: str
    hash: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "payload": self.payload,
                "prev": self.prev, "hash": self.hash}


def _entry(line: bytes, index: int, prev: str) -> Entry | str:
    """The entry on ``line`` if it continues a chain at ``index`` after ``prev``, else why not."""
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "is not JSON"
    if not isinstance(data, dict) or set(data) != {"index", "kind", "payload", "prev", "hash"}:
        return "is not a ledger entry (index, kind, payload, prev, hash)"
    if data["index"] != index:
        return f"has index {data['index']!r}, expected {index} (an entry removed or reordered)"
    if data["kind"] not in KINDS or not isinstance(data["payload"], dict):
        return f"has kind {data['kind']!r} or a payload that is not an object"
    if data["prev"] != prev:
        return "does not continue the chain (prev is not the hash of the entry before it)"
    if data["hash"] != entry_hash(index, data["kind"], data["payload"], prev):
        return "does not match its hash (edited)"
    return Entry(index, data["kind"], data["payload"], prev, data["hash"])


def read_entries(path: Path) -> tuple[list[Entry], bytes]:
    """``(entries, torn)``: the verified entries of the ledger at ``path`` ([] if absent) and
    the bytes of a torn last line (b"" if none). A line other than the last that does not
    continue the chain is a :class:`LedgerError` naming it; so is a torn last line followed
    by a newline (a complete line that was edited)."""
    if not path.is_file():
        return [], b""
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    entries: list[Entry] = []
    prev = GENESIS
    for number, line in enumerate(lines, 1):
        found = _entry(line, len(entries), prev)
        if isinstance(found, str):
            raise LedgerError(f"{path}: line {number} {found}: the ledger was altered")
        entries.append(found)
        prev = found.hash
    if not tail:
        return entries, b""
    found = _entry(tail, len(entries), prev)
    if isinstance(found, str):
        return entries, tail  # killed in the middle of an append
    entries.append(found)  # complete, only its newline missing: kept
    return entries, b""


class Ledger:
    """The ledger of one run directory (``DIR/ledger.jsonl``)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LEDGER
        self._entries: list[Entry] | None = None
        self._torn = b""

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    def entries(self) -> list[Entry]:
        """Every verified entry (a :class:`LedgerError` if the chain is broken; a torn last
        line is left out, see :meth:`repair`)."""
        if self._entries is None:
            self._entries, self._torn = read_entries(self.path)
        return list(self._entries)

    def append(self, kind: str, payload: Mapping[str, Any]) -> Entry:
        """Append one entry and ``fsync`` it (before its release is shown or written)."""
        if kind not in KINDS:
            raise ValueError(f"kind = {kind!r} is not allowed: must be one of {KINDS}")
        if not isinstance(payload, Mapping):
            raise ValueError(f"payload = {type(payload).__name__} is not allowed: must be a "
                             "mapping")
        entries = self.entries()
        if self._torn:
            raise LedgerError(f"{self.path} ends in a torn line: Ledger.repair() it first")
        index, prev = len(entries), entries[-1].hash if entries else GENESIS
        payload = json.loads(_canonical(payload))
        entry = Entry(index, kind, payload, prev, entry_hash(index, kind, payload, prev))
        line = json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":")) + "\n"
        descriptor = open_nofollow(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        with os.fdopen(descriptor, "ab") as stream:
            if stream.tell() and not self._ends_with_newline():
                stream.write(b"\n")  # a complete last entry whose newline a kill cut off
            stream.write(line.encode("utf-8"))
            stream.flush()
            os.fsync(stream.fileno())
        assert self._entries is not None
        self._entries.append(entry)
        return entry

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as stream:
            stream.seek(-1, os.SEEK_END)
            return stream.read(1) == b"\n"

    def repair(self) -> str | None:
        """Cut off a torn last line (a kill in the middle of an append) and record it in a
        ``torn`` entry; returns a note saying so (None when there was none)."""
        entries, torn = read_entries(self.path)
        if not torn:
            return None
        size = self.path.stat().st_size
        with open(self.path, "r+b") as stream:
            stream.truncate(size - len(torn))
            stream.flush()
            os.fsync(stream.fileno())
        self._entries, self._torn = entries, b""
        digest = hashlib.sha256(torn).hexdigest()
        self.append("torn", {"bytes": len(torn), "sha256": digest})
        return (f"ledger.jsonl ended in a torn line ({len(torn)} bytes, a kill in the middle of "
                "an append): cut off and recorded; its release was never shown (an entry is "
                "complete on disk before its release is written)")

    # ------------------------------------------------------------------ what it records
    def of_kind(self, kind: str) -> list[Entry]:
        return [e for e in self.entries() if e.kind == kind]

    def creation(self) -> dict[str, Any] | None:
        """The creation entry's payload (None without one)."""
        found = self.of_kind("creation")
        return found[0].payload if found else None

    def attempt(self) -> int:
        """How many resumes the ledger records (the ``attempt`` of the next row)."""
        return len(self.of_kind("resume"))

    def released_round(self) -> int:
        """The last round a released row carries (0 without one), leaving out rows a
        ``redrawn`` entry moved (composed as re-drawn rounds)."""
        return max(self.latest_rows(), default=0)

    def latest_rows(self) -> dict[int, Entry]:
        """``round -> its latest row entry``, leaving out rows a ``redrawn`` entry moved."""
        moved = {i for e in self.of_kind("redrawn") for i in e.payload.get("indices", ())}
        latest: dict[int, Entry] = {}
        for entry in self.of_kind("row"):
            if entry.index not in moved:
                latest[int(entry.payload["round"])] = entry
        return latest

    def headlines(self) -> list[dict[str, Any]]:
        """Every headline the run printed or wrote, oldest first."""
        return [e.payload for e in self.of_kind("headline")]

    def files(self) -> dict[str, str] | None:
        """``name -> sha256`` of the latest ``files`` entry (None without one)."""
        found = self.of_kind("files")
        return dict(found[-1].payload["files"]) if found else None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: names in a run directory that a ``files`` entry does not record: the ledger itself,
#: metrics.jsonl (its ``row`` entries do), the lock, and private state folders
UNRECORDED = (LEDGER, "metrics.jsonl", ".lock", "checkpoints", "client-state", "tensorboard")


def recorded_names(run_dir: str | Path) -> list[str]:
    """The files of ``run_dir`` a ``files`` entry records (every file there but
    :data:`UNRECORDED` and temporary ``.*.tmp`` files; folders by their files)."""
    root = Path(run_dir)
    names = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in UNRECORDED or path.name.endswith(".tmp"):
            continue
        if path.is_file() or path.is_symlink():
            names.append(relative.as_posix())
    return names


def file_digests(run_dir: str | Path, names: Iterable[str] | None = None) -> dict[str, str]:
    """``name -> sha256`` of the files ``names`` of ``run_dir`` (default
    :func:`recorded_names`); a missing one is left out."""
    root = Path(run_dir)
    out = {}
    for name in recorded_names(root) if names is None else names:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            out[name] = sha256_file(root / name)
    return out


def creation_payload(config: Any, run_id: str, pins: Mapping[str, Any] | None, *,
                     reconstructed: bool = False) -> dict[str, Any]:
    """The ``creation`` entry of a run: ``config`` (the whole resolved configuration),
    ``rounds``, ``stop``, ``privacy`` (its sections, for readers), ``run_id``, ``pins``."""
    dump = config.model_dump(mode="json")
    return {"run_id": run_id, "rounds": dump["federated"]["rounds"], "stop": dump["stop"],
            "privacy": dump["privacy"], "pins": dict(pins or {}), "config": dump,
            **({"reconstructed": True} if reconstructed else {})}


def creation_record(run_dir: str | Path) -> dict[str, Any]:
    """What was fixed when the run in ``run_dir`` was created (the ``creation`` entry's
    payload: ``config``, ``rounds``, ``stop``, ``privacy``, ``run_id``, ``pins``); a
    ValueError naming the directory if its ledger has none."""
    found = Ledger(run_dir).creation()
    if found is None:
        raise ValueError(f"run_dir = {str(run_dir)!r} has no creation record ({LEDGER} is "
                         "missing or empty)")
    return found


def released_rounds(run_dir: str | Path) -> list[int]:
    """The rounds of ``run_dir`` whose rows were released (each once, sorted), from its
    ledger: those the run went on from, and those logged before a kill and lost from
    metrics.jsonl or the checkpoint."""
    return sorted({int(e.payload["round"]) for e in Ledger(run_dir).of_kind("row")})


def open_ledger(run: Any, saved: Any, run_id: str) -> list[str]:
    """At a resume of ``run`` (an :class:`~privfl.runs.experiment.Experiment`; ``saved``: its
    configuration before the resume): cut off a torn last line (:meth:`Ledger.repair`), and
    give a run made before the ledger one, its creation record reconstructed from ``saved``
    and its logged rows as released. Returns the notes the resume shows."""
    ledger: Ledger = run.ledger
    notes = [note] if (note := ledger.repair()) else []
    if ledger.creation() is None:
        ledger.append("creation", creation_payload(saved, run_id, run.dir.pinned(),
                                                   reconstructed=True))
        for row in run.checkpoints.logged_rows():
            ledger.append("row", {"round": row["round"], "attempt": 0, "row": row})
        notes.append("this run was made before the release ledger: ledger.jsonl starts here, "
                     "from config.yaml and metrics.jsonl as they were before this resume")
    return notes
