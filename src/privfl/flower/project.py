"""``privfl flower new CONFIG --out DIR``: a Flower app project that runs a privfl configuration
with ``flwr run DIR`` (local simulation or a deployed federation; ``docs/flower.md``).

The project::

    DIR/pyproject.toml            [project] + [tool.flwr.app] (components, run config)
    DIR/privfl_app/__init__.py
    DIR/privfl_app/settings.py    the resolved configuration (dump_config), as a string
    DIR/privfl_app/server_app.py  app = privfl.flower.make_server_app(...)
    DIR/privfl_app/client_app.py  app = privfl.flower.make_client_app(CONFIG)

The configuration travels inside the app (a Python module, so that Flower's app bundle carries
it); every node checks that it was built from the same configuration as the server (digest).
The run directory is the run config's ``out`` (absolute; ``--run-config 'out="..."'`` changes
it); a ServerApp started again on an existing run directory resumes it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

__all__ = ["write_project"]

_PYPROJECT = '''[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{package}"
version = "1.0.0"
description = "privfl configuration {name!r} as a Flower app"
license = "Apache-2.0"
# Install privfl[flower] beside flwr where the SuperLink and the SuperNodes run: Flower 1.42
# installs the dependencies listed here from the package index into a fresh environment (uv)
# for every run; an empty list runs the app in the environment that has privfl and flwr.
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["privfl_app"]

[tool.flwr.app]
publisher = "privfl"

[tool.flwr.app.components]
serverapp = "privfl_app.server_app:app"
clientapp = "privfl_app.client_app:app"

[tool.flwr.app.config]
# the privfl run directory the ServerApp writes (metrics, privacy card, report, checkpoints)
out = "{out}"
'''

_SERVER = '''"""privfl's ServerApp for {name!r}: privfl's algorithm, server-side DP,
accounting and run directory (privfl.flower.apps.make_server_app)."""

from privfl.flower.apps import make_server_app, start_run

from privfl_app.settings import CONFIG

app = make_server_app(lambda context: start_run(CONFIG, str(context.run_config["out"])))
'''

_CLIENT = '''"""privfl's ClientApp for {name!r}: privfl's engine on the node's own client
(node_config partition-id; privfl.flower.apps.make_client_app)."""

from privfl.flower.apps import make_client_app

from privfl_app.settings import CONFIG

app = make_client_app(CONFIG)
'''


def write_project(config: Any, out: str | Path, run_dir: str | Path | None = None) -> Path:
    """Write the Flower app project of ``config`` (an ``ExperimentConfig``) into ``out`` (must
    not exist or be empty); ``run_dir``: the run directory (default ``out/runs/NAME``).
    Returns ``out``. ValueError if the configuration cannot run on Flower."""
    from privfl.config import dump_config
    from privfl.flower.apps import check_config

    check_config(config)
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"out = {str(out)!r} is not allowed: it exists and is not empty")
    text = dump_config(config)
    run_dir = Path(run_dir) if run_dir is not None else out / "runs" / config.name
    package = re.sub(r"[^a-z0-9]+", "-", config.name.lower()).strip("-") or "privfl-app"
    (out / "privfl_app").mkdir(parents=True, exist_ok=True)
    (out / "pyproject.toml").write_text(_PYPROJECT.format(
        package=package, name=config.name,
        out=str(run_dir.resolve()).replace("\\", "/").replace('"', '\\"')))
    (out / "privfl_app" / "__init__.py").write_text(
        f'"""privfl configuration {config.name!r} as a Flower app."""\n')
    (out / "privfl_app" / "settings.py").write_text(
        '"""The resolved privfl configuration (privfl flower new); server and nodes check '
        'its digest."""\n\nCONFIG = ' + repr(text) + "\n")
    (out / "privfl_app" / "server_app.py").write_text(_SERVER.format(name=config.name))
    (out / "privfl_app" / "client_app.py").write_text(_CLIENT.format(name=config.name))
    return out
