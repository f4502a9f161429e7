"""Regenerate the golden privacy numbers of tests/golden/ from the CURRENT code.

Run it only when a change of a privacy number is intended, and say why in the commit message::

    PYTHONPATH=src python tests/golden/regenerate.py            # everything
    PYTHONPATH=src python tests/golden/regenerate.py commands   # only the documented commands

Three files, each a JSON object:

* ``commands.json``: the ``--json`` output of every ``privfl account ...`` / ``privfl calibrate
  ...`` command shown in README.md and docs/ (keyed by the command line as written there).
* ``configs.json``: the planned privacy (setting card and labelled results) of every config under
  configs/ for two rounds (``privfl run CONFIG --dry-run --set federated.rounds=2``), offline.
* ``runs.json``: the ``results`` of privacy.json (and its round counts) after a real two-round
  run of every top-level demo config, on a shrunken population so that the run is short.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CONFIGS = ROOT / "configs"
ROUNDS = 2

#: demo runs: the overrides that shrink each one (the privacy results depend only on the planned
#: settings, so a smaller test set and fewer threads change nothing that is pinned)
RUN_OVERRIDES = [f"federated.rounds={ROUNDS}", "run.eval_batch_size=1000"]


def documented_commands() -> list[str]:
    """Every ``privfl account|calibrate`` command line in README.md and docs/**.md (backslash
    continuations joined, trailing ``# comments`` dropped; lines with a shell variable skipped)."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found: list[str] = []
    pattern = re.compile(r"^(?:\$ )?(?:\.venv/bin/)?privfl (account|calibrate) ")
    for path in files:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            text = lines[i].strip()
            if pattern.match(text):
                while text.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text = text[:-1].rstrip() + " " + lines[i].strip()
                text = text.split("  #")[0].strip()
                text = re.sub(r"^(?:\$ )?\.venv/bin/", "", text)
                if "$" not in text and text not in found:
                    found.append(text)
            i += 1
    return found


def command_args(command: str) -> list[str]:
    """The argv (after ``privfl``) of a documented command, with ``--json`` added."""
    args = shlex.split(command)[1:]
    return args if "--json" in args else [*args, "--json"]


def invoke(args: list[str]) -> dict:
    from typer.testing import CliRunner

    from privfl.cli.main import app

    result = CliRunner().invoke(app, args)
    if result.exit_code != 0:
        raise RuntimeError(f"privfl {' '.join(args)} exited {result.exit_code}: {result.output}")
    return json.loads(result.stdout)


def run_configs() -> list[Path]:
    """Every config under configs/ that ``privfl run`` takes (not the ``tradeoff`` ones)."""
    import yaml

    return sorted(p for p in CONFIGS.rglob("*.yaml")
                  if "tradeoff" not in (yaml.safe_load(p.read_text()) or {}))


def demo_configs() -> list[Path]:
    return [p for p in run_configs() if p.parent == CONFIGS]


def dry_run(path: Path) -> dict:
    """The planned privacy of ``path`` for ``ROUNDS`` rounds: setting card and results."""
    payload = invoke(["run", str(path), "--dry-run", "--json", "--set",
                      f"federated.rounds={ROUNDS}"])
    # the note (data not in the cache, so no plan) names a cache path: pin only that there is one
    return {"setting": payload.get("setting"), "privacy": payload.get("privacy"),
            "note": payload.get("note") is not None}


def real_run(path: Path, out: Path) -> dict:
    """privacy.json's pinned part after a real run of ``path`` (``ROUNDS`` rounds)."""
    args = ["run", str(path), "--out", str(out), "--no-progress", "--json"]
    for item in RUN_OVERRIDES:
        args += ["--set", item]
    invoke(args)
    privacy = json.loads((out / "privacy.json").read_text())
    return {key: privacy.get(key) for key in
            ("setting", "rounds", "rounds_released", "redrawn_rounds", "private", "results")}


def key(path: Path) -> str:
    return str(path.relative_to(CONFIGS))


def write(name: str, data: dict) -> None:
    (HERE / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def main(argv: list[str]) -> None:
    parts = set(argv) or {"commands", "configs", "runs"}
    if "commands" in parts:
        write("commands.json", {c: invoke(command_args(c)) for c in documented_commands()})
    if "configs" in parts:
        write("configs.json", {key(p): dry_run(p) for p in run_configs()})
    if "runs" in parts:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            write("runs.json", {key(p): real_run(p, Path(tmp) / key(p).replace("/", "-"))
                                for p in demo_configs()})


if __name__ == "__main__":
    main(sys.argv[1:])
