"""The files of a run directory and how they are written.

::

    DIR/config.yaml          resolved configuration (every default filled in)
    DIR/metrics.jsonl        one JSON object per round (accuracies, mu_max, epsilon, timing)
    DIR/privacy.json         final privacy report, the `results` format of `privfl account`
    DIR/summary.json         the final summary (what `privfl run --json` prints)
    DIR/accuracy.png         personalised and global accuracy per round
    DIR/privacy.png          epsilon (each accountant, bound/estimate) and mu_max per round
    DIR/health.png           health signals per round (training loss, clipped fraction, ...)
    DIR/report.md            a short human-readable report (the headline first)
    DIR/report.html          the same report with interactive plots, one self-contained file
    DIR/run.json             the run's identity: {"format", "run_id", "created"[, "pinned"]}
    DIR/ledger.jsonl         the release ledger: every release, recorded before it is shown
                             (:mod:`privfl.runs.ledger`)
    DIR/redrawn.jsonl        rows of rounds that were logged, lost with their checkpoint and run
                             again with fresh randomness (a resumed secure run): still released
    DIR/.lock                held (flock) by the process running the run
    DIR/model.pt             the final released model (``name -> tensor``)
    DIR/checkpoints/round-000012.pt     the last few checkpoints (model/optimizer/RNG states)
    DIR/checkpoints/round-000012.json   their digests (:mod:`privfl.runs.checkpoints`)

What the printed guarantee covers is listed in privacy.json's ``outputs``
(:mod:`privfl.algorithms.outputs`). The checkpoints are private state. With ``run.outputs:
guarantee-only`` they, and the metrics outside the guarantee (``metrics.jsonl`` rows of the
uncovered keys), live in the private directory ``DIR.private`` beside the run directory
(:attr:`RunDirectory.private`) instead.

A directory belongs to one run: ``run.json``'s random ``run_id`` is stamped into every
checkpoint and its digest record, and a resume uses only checkpoints that carry it. A new run
refuses a directory holding another run's files; two processes cannot run one directory at
once (:meth:`RunDirectory.acquire_lock`).

JSON has no infinity or NaN: such floats are written as the strings ``"inf"``/``"nan"``.
Writes of whole files go through a temporary file (``.NAME.tmp``, removed at the next start if
a kill left it) and an atomic rename. No write follows a symbolic link: files are opened with
``O_NOFOLLOW`` (temporary ones also with ``O_EXCL``), and a run directory whose own files are
links is refused (:meth:`RunDirectory.check_links`). A write that fails because the disk is
full removes its temporary file and raises :class:`DiskFullError` (one line naming the file and
the free space); the run resumes from its last checkpoint once space is freed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import math
import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import IO, Any, BinaryIO

__all__ = ["RUN_FORMAT", "DiskFullError", "RunDirectory", "json_safe", "write_atomically"]

_CHECKPOINT = re.compile(r"^round-(\d{6,})\.pt$")
_RECORD = re.compile(r"^round-(\d{6,})\.json$")
#: a temporary file of a write (``.NAME.tmp``; :meth:`RunDirectory.remove_temporary_files`)
_TEMPORARY = re.compile(r"^\..+\.tmp$")
RUN_FORMAT = "privfl-run/1"
#: files a run writes; a directory holding any of them (but no config.yaml) is another run's
_RUN_FILES = ("run.json", "metrics.jsonl", "privacy.json", "summary.json", "report.md",
              "report.html", "checkpoints", "redrawn.jsonl", "ledger.jsonl")
#: the running process's memory-mapped per-client state (privfl.fl.client_store), made while
#: the algorithm is built, before the run directory is created
CLIENT_STATE = "client-state"
#: every name a run writes in its directory (none may be a symbolic link)
_OWN_FILES = ("config.yaml", ".lock", "accuracy.png", "privacy.png", "health.png", "tensorboard",
              CLIENT_STATE, *_RUN_FILES)
#: a filesystem with less free space than this after a failed write is full
_FULL_BYTES = 1 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
#: the time of every file of a ``run.outputs: guarantee-only`` run directory (2000-01-01 UTC;
#: after 1980, which zip needs): the file times would give away the wall time the mode drops
FIXED_TIME = 946_684_800


def _empty_folder(path: Path) -> bool:
    """A directory (not a link) with nothing in it: nothing a run's files could mix with."""
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


class DiskFullError(OSError):
    """A write failed because its filesystem is full; its temporary file was removed."""


def _free_bytes(folder: Path) -> int | None:
    try:
        stat = os.statvfs(folder)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def _disk_full(error: BaseException, path: Path) -> DiskFullError | None:
    """The one-line error for a write of ``path`` that failed on a full disk (ENOSPC, EDQUOT,
    or any failure, such as torch's "unexpected pos", that left the filesystem full), else
    None. Call it before removing the partial file: that frees the space again."""
    free = _free_bytes(path.parent)
    if not (isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)) and (
            free is None or free >= _FULL_BYTES):
        return None
    where = f"{free} bytes free" if free is not None else "free space unknown"
    return DiskFullError(f"disk full: cannot write {path} (its filesystem has {where}; the "
                         "partial file was removed): free some space there")


def open_nofollow(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` that never follows a symbolic link at ``path`` (a ValueError naming it)."""
    try:
        return os.open(path, flags | _NOFOLLOW, mode)
    except OSError as error:
        if error.errno == errno.ELOOP or path.is_symlink():
            raise ValueError(f"{path} is a symbolic link: privfl does not write through links "
                             "in a run directory; remove it") from None
        raise


#: how :func:`json_safe` spells non-finite floats
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def logged_number(value: Any) -> Any:
    """The inverse of :func:`json_safe` for one value: ``"inf"``, ``"-inf"``, ``"nan"`` back to
    floats; anything else unchanged."""
    return NON_FINITE.get(value, value) if isinstance(value, str) else value


class RunExistsError(ValueError):
    """A new run's directory already holds a run: the message says how to go on in the Python
    API; ``path`` lets the command line say it with its options (``privfl run --resume``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"out = {str(path)!r} already holds a run (config.yaml): continue it "
                         f"with Experiment.resume({str(path)!r}) or choose another directory")


def logged_guarantees(row: Mapping[str, Any], kind: str) -> dict[str, float]:
    """method -> epsilon of a metrics row's ``privacy`` entries of ``kind`` (bound, estimate)
    in its primary ``scope`` (the scope its ``epsilon`` is read in); entries that are not
    well-formed are left out."""
    scope = row.get("scope")
    out = {}
    for entry in row.get("privacy") or ():
        if not isinstance(entry, Mapping) or entry.get("kind") != kind:
            continue
        if scope is not None and entry.get("scope") != scope:
            continue
        value = logged_number(entry.get("epsilon"))
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and isinstance(entry.get("method"), str):
            out[entry["method"]] = float(value)
    return out


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


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """``write(stream)`` into ``.NAME.tmp`` beside ``path``, fsync, then rename over ``path``
    (a reader sees the old file or the whole new one, never a torn one). A stale temporary
    file (or a link planted in its place) is removed first and the new one created with
    ``O_EXCL | O_NOFOLLOW``; on any failure it is removed (:class:`DiskFullError` on a full
    disk)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)  # removes a link itself, never its target
    descriptor = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, path)  # replaces a link at ``path`` itself, never its target
    except BaseException as error:
        full = _disk_full(error, path) if isinstance(error, Exception) else None
        tmp.unlink(missing_ok=True)
        if full is not None:
            raise full from None
        raise


def _atomic_write(path: Path, text: str) -> None:
    write_atomically(path, lambda stream: stream.write(text.encode("utf-8")))


class RunDirectory:
    """Paths and writers of one run directory."""

    def __init__(self, path: str | Path, private: str | Path | None = None) -> None:
        self.path = Path(path)
        #: where private state (checkpoints, uncovered metrics) is kept: the run directory
        #: itself, or a separate directory (``run.outputs: guarantee-only``)
        self.private = self.path if private is None else Path(private)

    @property
    def separate_private(self) -> bool:
        """The private state lives outside the run directory."""
        return self.private != self.path

    @property
    def private_metrics(self) -> Path:
        """The uncovered metrics of every round (only with a separate private directory)."""
        return self.private / "metrics.jsonl"

    @property
    def model(self) -> Path:
        return self.path / "model.pt"

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
    def redrawn(self) -> Path:
        return self.path / "redrawn.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def report(self) -> Path:
        return self.path / "report.md"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def health_plot(self) -> Path:
        return self.path / "health.png"

    @property
    def accuracy_plot(self) -> Path:
        return self.path / "accuracy.png"

    @property
    def privacy_plot(self) -> Path:
        return self.path / "privacy.png"

    @property
    def checkpoints(self) -> Path:
        return self.private / "checkpoints"

    @property
    def client_state(self) -> Path:
        """Memory-mapped per-client state of the running process (:mod:`privfl.fl.client_store`;
        removed when the process ends)."""
        return self.private / CLIENT_STATE

    @property
    def run_file(self) -> Path:
        return self.path / "run.json"

    def checkpoint(self, round_index: int) -> Path:
        return self.checkpoints / f"round-{round_index:06d}.pt"

    def checkpoint_record(self, round_index: int) -> Path:
        """The digest record of checkpoint ``round_index``."""
        return self.checkpoints / f"round-{round_index:06d}.json"

    # ------------------------------------------------------------------ set-up
    def check_links(self) -> None:
        """Refuse a run directory whose own files are symbolic links: a write there would land
        wherever the link points (the directory itself may be a link)."""
        for path in (self.path / name for name in _OWN_FILES):
            if path.is_symlink():
                raise ValueError(
                    f"{path} is a symbolic link (to {os.readlink(path)!r}): privfl does not "
                    "write through links in a run directory; remove it or choose another --out")

    def check_new(self) -> None:
        """Refuse a directory that already holds a run or another run's files, or a file, or
        one with links in place of its files (:meth:`check_links`), or any other file or
        non-empty folder (a folder of the user's: the run's files would be mixed with them;
        a killed write's temporary files and empty folders are allowed). Reads only the file
        system, so it runs before anything is loaded (``privfl run --out``)."""
        self.check_links()
        if self.config.exists():
            raise RunExistsError(self.path)
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"out = {str(self.path)!r} is a file, not a directory")
        if self.separate_private and self.private.exists() and any(
                p.name != CLIENT_STATE for p in self.private.iterdir()):
            raise ValueError(
                f"out = {str(self.path)!r}: its private directory {str(self.private)!r} already "
                "holds files (of another run?): remove it or choose another --out"
            )
        if self.path.is_dir():
            found = [name for name in _RUN_FILES if (self.path / name).exists()]
            if found:
                raise ValueError(
                    f"out = {str(self.path)!r} holds files of another run ({', '.join(found)}) "
                    "but no config.yaml: choose another --out (a run directory belongs to one "
                    "run)"
                )
            others = sorted(p.name for p in self.path.iterdir() if p.name != CLIENT_STATE
                            and not _TEMPORARY.match(p.name)  # a killed write's: removed
                            and not _empty_folder(p))
            if others:
                shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more"
                                                 if len(others) > 3 else "")
                raise ValueError(
                    f"out = {str(self.path)!r} is a folder that is not empty ({shown}): a run "
                    "directory holds one run's files only; choose a new or empty folder as --out"
                )

    def create(self, pinned: Mapping[str, Any] | None = None,
               plan: Mapping[str, Any] | None = None) -> str:
        """Make a fresh run directory (see :meth:`check_new`); returns its new run id.
        ``pinned``: what the privacy plan's accountant assumed at round 1 (``plan.pins()``),
        kept in run.json (:meth:`pinned`); ``plan``: the first plan (the rounds and the budget
        at creation, :mod:`privfl.runs.first_plan`), kept in run.json's ``plan``."""
        for name, value in (("pinned", pinned), ("plan", plan)):
            if value is not None and not isinstance(value, Mapping):
                raise ValueError(f"{name} = {value!r} is not allowed: must be a mapping of "
                                 "setting names to JSON values (or None)")
        self.check_new()
        self.path.mkdir(parents=True, exist_ok=True)
        self.checkpoints.mkdir(parents=True, exist_ok=True)
        self.remove_temporary_files()
        run_id = secrets.token_hex(8)
        try:
            # guarantee-only drops the wall time: no creation time (FIXED_TIME on every file)
            self.write_json(self.run_file, {
                "format": RUN_FORMAT, "run_id": run_id,
                **({} if self.separate_private
                   else {"created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}),
                **({"pinned": dict(pinned)} if pinned else {}),
                **({"plan": dict(plan)} if plan else {}),
            })
        except BaseException:  # e.g. a full disk: leave nothing a new run would refuse
            self.discard()
            raise
        return run_id

    def fix_times(self) -> None:
        """Set the access and modification time of the run directory and of everything in it
        to :data:`FIXED_TIME` (``run.outputs: guarantee-only``, which drops the wall time: the
        file times would give it away). Links are not followed; the private directory is not
        touched."""
        entries = sorted(self.path.rglob("*"), key=lambda p: len(p.parts), reverse=True)
        for entry in [*entries, self.path]:
            with contextlib.suppress(FileNotFoundError):
                os.utime(entry, (FIXED_TIME, FIXED_TIME), follow_symlinks=False)

    def require_existing(self) -> None:
        self.check_links()
        if not self.config.is_file():
            raise ValueError(
                f"resume = {str(self.path)!r} is not a run directory: it has no config.yaml"
            )

    def run_id(self) -> str:
        """The run id from run.json (a ValueError naming the file if it is missing or bad)."""
        try:
            data = json.loads(self.run_file.read_text(encoding="utf-8"))
            run_id = data["run_id"] if data.get("format") == RUN_FORMAT else None
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            run_id = None
        if not isinstance(run_id, str) or not re.fullmatch(r"[0-9a-f]{16}", run_id):
            raise ValueError(
                f"resume = {str(self.path)!r}: {self.run_file.name} is missing or unreadable, so "
                "its checkpoints cannot be matched to this run (a directory from an older privfl "
                f"or a damaged one): start a new run with privfl run {self.config} --out NEW_DIR"
            )
        return run_id

    def pinned(self) -> dict[str, Any] | None:
        """run.json's ``pinned`` settings (:meth:`create`); None when it has none (a plan
        without pins, or a run made before them)."""
        return self.run_record().get("pinned")

    def run_record(self) -> dict[str, Any]:
        """run.json as written at creation ({} when it is missing or unreadable)."""
        try:
            data = json.loads(self.run_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire_lock(self) -> IO[str]:
        """Lock ``DIR/.lock`` for this process (released when the returned file is closed or
        the process ends); a ValueError if another process holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        descriptor = open_nofollow(self.path / ".lock", os.O_RDWR | os.O_CREAT)
        stream = os.fdopen(descriptor, "r+", encoding="utf-8")
        try:
            fcntl.flock(stream.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            stream.close()
            raise ValueError(
                f"run directory {str(self.path)!r} is in use by another privfl process: wait "
                "for it to finish (or stop it), then resume"
            ) from None
        stream.seek(0)
        stream.truncate()
        stream.write(f"{os.getpid()}\n")
        stream.flush()
        return stream

    def discard(self) -> None:
        """Remove a run that never completed a round: the files it wrote (config.yaml,
        run.json, metrics.jsonl, the lock, its temporary files, an empty checkpoints folder),
        then the directory if nothing else is in it. Anything else is left alone."""
        self.remove_temporary_files()
        shutil.rmtree(self.client_state, ignore_errors=True)  # mapped files stay valid (POSIX)
        for path in (self.config, self.run_file, self.metrics, self.path / ".lock",
                     self.path / "ledger.jsonl",
                     *((self.private_metrics,) if self.separate_private else ())):
            path.unlink(missing_ok=True)
        for folder in (self.checkpoints, *((self.private,) if self.separate_private else ()),
                       self.path):
            with contextlib.suppress(OSError):  # not empty (a user's file): keep it
                folder.rmdir()

    def remove_temporary_files(self) -> list[str]:
        """Delete ``.*.tmp`` files a killed write left behind; returns their names."""
        removed = []
        for folder in dict.fromkeys((self.path, self.private, self.checkpoints)):
            if folder.is_dir():
                for entry in folder.glob(".*.tmp"):
                    if entry.is_symlink() or entry.is_file():
                        entry.unlink(missing_ok=True)
                        removed.append(entry.name)
        return removed

    # ------------------------------------------------------------------ writers
    def write_text(self, path: Path, text: str) -> None:
        _atomic_write(path, text)

    def write_json(self, path: Path, payload: Any) -> None:
        _atomic_write(path, json.dumps(json_safe(payload), indent=2) + "\n")

    def write_metrics(self, rows: Iterable[Mapping[str, Any]], path: Path | None = None,
                      ) -> None:
        """Rewrite metrics.jsonl (or ``path``, e.g. :attr:`redrawn`) with ``rows``."""
        _atomic_write(self.metrics if path is None else path,
                      "".join(json.dumps(json_safe(r)) + "\n" for r in rows))

    def append_metrics(self, row: Mapping[str, Any], path: Path | None = None) -> None:
        """Append one row to metrics.jsonl (or ``path``); on a failure (a full disk) the file
        is cut back to its rows."""
        path = self.metrics if path is None else path
        descriptor = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        with os.fdopen(descriptor, "ab") as stream:
            size = stream.tell()
            try:
                stream.write((json.dumps(json_safe(row)) + "\n").encode("utf-8"))
                stream.flush()
            except OSError as error:
                full = _disk_full(error, path)
                with contextlib.suppress(OSError):
                    os.ftruncate(stream.fileno(), size)
                raise (full or error) from None

    def read_metrics(self, path: Path | None = None) -> list[dict[str, Any]]:
        """The rows of metrics.jsonl (or ``path``, e.g. :attr:`redrawn`); a ValueError naming
        the file and line if one is not JSON (a damaged file)."""
        path = self.metrics if path is None else path
        if not path.is_file():
            return []
        rows = []
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError as error:
                    raise ValueError(f"{path}: line {number} is not valid JSON ({error}):"
                                     " the file is damaged") from None
        return rows

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

    def delete_private_state(self) -> int:
        """Delete every checkpoint, its digest record and the checkpoints folder (when a
        last-iterate run finishes: they hold intermediate models and the secret schedule);
        returns how many checkpoints were deleted."""
        found = self.list_checkpoints()
        for round_index, path in found:
            path.unlink(missing_ok=True)
            self.checkpoint_record(round_index).unlink(missing_ok=True)
        if self.checkpoints.is_dir():
            for entry in self.checkpoints.iterdir():  # stale records and temporary files
                if entry.is_file() and (entry.suffix == ".json" or entry.name.endswith(".tmp")):
                    entry.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.checkpoints.rmdir()
        return len(found)

    def prune_checkpoints(self, keep: int) -> None:
        """Delete all but the newest ``keep`` checkpoints (and their digest records), and any
        digest record whose checkpoint is gone (:meth:`remove_orphan_records`)."""
        for round_index, path in self.list_checkpoints()[:-keep]:
            path.unlink(missing_ok=True)
            self.checkpoint_record(round_index).unlink(missing_ok=True)
        self.remove_orphan_records()

    def remove_orphan_records(self) -> list[str]:
        """Delete digest records ``round-R.json`` without their checkpoint ``round-R.pt`` (a
        kill while pruning); returns their names."""
        if not self.checkpoints.is_dir():
            return []
        removed = []
        for entry in self.checkpoints.glob("round-*.json"):
            match = _RECORD.match(entry.name)
            if match and not self.checkpoint(int(match.group(1))).exists():
                entry.unlink(missing_ok=True)
                removed.append(entry.name)
        return removed
