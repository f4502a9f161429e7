"""Every command privfl prints is runnable as printed (issue 45, item 5): ``make install`` puts
nothing on PATH, so a hint saying bare ``privfl`` did not run. Hints spell the program as it
was invoked (:func:`privfl.cli.common.command_name`): ``privfl`` only when that name on PATH is
the running program."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from privfl.cli.common import command_name, runnable

ROOT = Path(__file__).resolve().parents[2]
#: the console script `make install` writes beside the venv's python
SCRIPT = Path(sys.executable).with_name("privfl")


def _program(folder: Path, name: str = "privfl") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_a_program_not_on_path_is_named_as_invoked(tmp_path, monkeypatch):
    here = _program(tmp_path / "my venv" / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    monkeypatch.setattr(sys, "argv", [str(here), "run"])
    assert command_name() == shlex.quote(str(here)) == f"'{here}'"
    assert runnable("continue with: privfl run --resume runs/demo") == (
        f"continue with: '{here}' run --resume runs/demo")


def test_privfl_on_path_is_bare_only_when_it_is_this_program(tmp_path, monkeypatch):
    on_path = _program(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(sys, "argv", ["privfl"])
    assert command_name() == "privfl"
    monkeypatch.setattr(sys, "argv", [str(on_path)])
    assert command_name() == "privfl"
    other = _program(tmp_path / "other")  # a second install: the hint must name this one
    monkeypatch.setattr(sys, "argv", [str(other)])
    assert command_name() == str(other)


def test_a_module_run_and_a_python_caller(monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(ROOT / "src" / "privfl" / "cli" / "main.py")])
    assert command_name() == f"{shlex.quote(sys.executable)} -m privfl.cli.main"
    monkeypatch.setattr(sys, "argv", ["pytest"])
    assert command_name() == "privfl"


@pytest.mark.parametrize("text", [
    "privfl: error: out = 'x' is a file",  # the program's name before a colon
    "the privfl run directory the ServerApp writes",  # prose, not a command
    "replicas/ directory of a privfl certify run)",
])
def test_prose_is_left_alone(text, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(_program(tmp_path))])
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    assert runnable(text) == text


@pytest.mark.skipif(not SCRIPT.is_file(), reason=f"no console script at {SCRIPT} "
                    "(`make install` writes it)")
def test_init_hint_runs_as_printed_after_make_install(tmp_path):
    """The console script, not on PATH (as after `make install`), invoked by a relative path:
    `init`'s hint names that path, and the printed command runs from the same folder."""
    (tmp_path / "bin").symlink_to(SCRIPT.parent)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["bin/privfl", "init", "--out", "my.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "wrote my.yaml: edit it, then bin/privfl run my.yaml --dry-run"
    printed = done.stdout.split("then ", 1)[1].strip()
    dry = subprocess.run(shlex.split(printed), cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr
    assert "dry run: nothing was trained or written" in dry.stdout
    # on PATH, the same program is named plainly
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    done = subprocess.run(["privfl", "init", "--out", "again.yaml"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "wrote again.yaml: edit it, then privfl run again.yaml --dry-run"
