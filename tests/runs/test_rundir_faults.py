"""Faults of the run directory's files: planted symbolic links and a full disk.

Before: a ``.lock`` or ``.run.json.tmp`` link in ``--out`` had its target overwritten (with a PID,
with run.json); a full disk ended in "internal error (RuntimeError: [enforce fail at
inline_container.cc:672] ...)", left the partial checkpoint filling the disk, and the run could
not be resumed (no checkpoint, rounds logged).
"""

from __future__ import annotations

import errno
import json
import os

import pytest
import yaml

import privfl.runs.checkpoints as checkpoints_module
from privfl.cli.main import main
from privfl.runs.rundir import DiskFullError, RunDirectory, write_atomically

TINY = {
    "name": "faults", "seed": 3,
    "data": {"dataset": "synthetic", "synthetic_examples": 120, "test_fraction": 0.25,
             "partition": "iid", "clients": 3, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 1, "batch_size": 5},
    "privacy": {"noise_multiplier": 1.0, "accountants": ["gdp-clt"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_rate": 1.0},
    "run": {"threads": 1},
}


def _cli(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main([str(a) for a in args])
    return exited.value.code or 0, capsys.readouterr().err


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    return path


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("privfl: error: "), err
    return lines[0]


@pytest.mark.parametrize("name", [".lock", "metrics.jsonl", "accuracy.png", "checkpoints"])
def test_a_planted_link_in_a_new_run_directory_is_refused(tmp_path, capsys, config, name):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "lk"
    out.mkdir()
    (out / name).symlink_to(victim)
    code, err = _cli(capsys, "run", config, "--out", out, "--no-progress")
    assert code == 2
    assert f"{out / name} is a symbolic link" in _error_line(err)
    assert victim.read_text() == "precious\n"


def test_a_link_planted_before_a_resume_is_refused(tmp_path, capsys, config):
    out = tmp_path / "run"
    assert _cli(capsys, "run", config, "--out", out, "--no-progress", "--set",
                "run.max_rounds=1")[0] == 0
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (out / ".lock").unlink()
    (out / ".lock").symlink_to(victim)
    code, err = _cli(capsys, "run", "--resume", out, "--no-progress")
    assert code == 2 and ".lock is a symbolic link" in _error_line(err)
    assert victim.read_text() == "precious\n"


def test_a_stale_temporary_link_is_removed_not_followed(tmp_path, capsys, config):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "lk"
    out.mkdir()
    (out / ".run.json.tmp").symlink_to(victim)
    (out / ".metrics.jsonl.tmp").symlink_to(tmp_path)  # a link to a folder too
    (out / ".old.tmp").write_text("left by a kill")
    assert _cli(capsys, "run", config, "--out", out, "--no-progress")[0] == 0
    assert victim.read_text() == "precious\n"
    assert json.loads((out / "run.json").read_text())["format"] == "privfl-run/1"
    assert not list(out.glob(".*.tmp")) and not list((out / "checkpoints").glob(".*.tmp"))


def test_write_atomically_never_writes_through_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    target = tmp_path / "file.json"
    target.symlink_to(victim)  # the file itself: replaced by a regular file
    write_atomically(target, lambda stream: stream.write(b"new"))
    assert victim.read_text() == "precious\n" and not target.is_symlink()
    assert target.read_text() == "new"


def _fill_disk_during_checkpoints(monkeypatch, failure):
    """torch.save writes part of the checkpoint, then the disk is full."""
    def save(payload, stream):
        stream.write(b"x" * 1000)
        raise failure

    monkeypatch.setattr(checkpoints_module.torch, "save", save)


@pytest.mark.parametrize("kind", ["enospc", "torch"])
def test_a_full_disk_is_one_line_removes_the_partial_file_and_resumes(
        tmp_path, capsys, config, monkeypatch, kind):
    import privfl.runs.rundir as rundir

    save = checkpoints_module.torch.save
    if kind == "enospc":
        failure = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    else:  # what torch raises on a full tmpfs; the filesystem is then full
        failure = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos "
                               "3968 vs 3862")
        monkeypatch.setattr(rundir, "_free_bytes", lambda folder: 0)
    _fill_disk_during_checkpoints(monkeypatch, failure)
    out = tmp_path / "full"
    code, err = _cli(capsys, "run", config, "--out", out, "--no-progress")
    line = _error_line(err)
    assert code == 2
    assert line.startswith(f"privfl: error: disk full: cannot write "
                           f"{out / 'checkpoints' / 'round-000001.pt'} (its filesystem has ")
    assert line.endswith(f"continue with: privfl run --resume {out}")
    assert "internal error" not in line
    assert not list((out / "checkpoints").iterdir())  # the partial checkpoint is gone
    assert [row["round"] for row in RunDirectory(out).read_metrics()] == [1]

    monkeypatch.setattr(checkpoints_module.torch, "save", save)  # space freed
    monkeypatch.undo()
    assert _cli(capsys, "run", "--resume", out, "--no-progress")[0] == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rounds_completed"] == 2 and summary["warnings"] == []


def test_a_full_disk_while_logging_a_row_cuts_the_torn_row(tmp_path, monkeypatch):
    directory = RunDirectory(tmp_path)
    directory.append_metrics({"round": 1})

    class Full:
        def __init__(self, stream):
            self.stream = stream

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.stream.close()

        def tell(self):
            return self.stream.tell()

        def fileno(self):
            return self.stream.fileno()

        def write(self, data):
            self.stream.write(data[:5])
            self.stream.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    real = os.fdopen
    monkeypatch.setattr(os, "fdopen", lambda fd, mode: Full(real(fd, mode)))
    with pytest.raises(DiskFullError, match="disk full: cannot write .*metrics.jsonl"):
        directory.append_metrics({"round": 2})
    monkeypatch.undo()
    assert directory.read_metrics() == [{"round": 1}]


def test_a_full_disk_before_the_first_round_leaves_nothing_behind(tmp_path, capsys, config,
                                                                  monkeypatch):
    import privfl.runs.rundir as rundir

    real = rundir.RunDirectory.write_text

    def full(self, path, text):
        if path.name == "config.yaml":
            raise DiskFullError(f"disk full: cannot write {path}")
        return real(self, path, text)

    monkeypatch.setattr(rundir.RunDirectory, "write_text", full)
    out = tmp_path / "early"
    code, err = _cli(capsys, "run", config, "--out", out, "--no-progress")
    assert code == 2 and "disk full: cannot write" in _error_line(err)
    assert not out.exists()  # a new run with the same --out is not refused
    monkeypatch.undo()
    assert _cli(capsys, "run", config, "--out", out, "--no-progress")[0] == 0
