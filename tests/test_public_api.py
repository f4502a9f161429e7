"""The top-level names (``from privfl import Experiment``): lazy, so ``import privfl`` stays cheap.

``import privfl`` runs in a fresh interpreter (pytest itself has imported torch) and must load
neither torch nor any other privfl module (nor does ``privfl --version`` load torch); each lazy
name resolves to the object its module defines; privfl's own modules never import a lazy name
from the facade.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import privfl

ROOT = Path(__file__).resolve().parents[1]


def _fresh(code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_privfl_alone_loads_neither_torch_nor_the_rest_of_privfl():
    loaded = _fresh("import json, sys, privfl; print(json.dumps(sorted(m for m in sys.modules "
                    "if m.split('.')[0] in ('torch', 'privfl'))))")
    assert loaded == ["privfl"]


def test_privfl_version_does_not_import_torch():
    found = _fresh("import json, sys\nfrom privfl.cli.main import main\nsys.argv = ['privfl', "
                   "'--version']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
                   "print(json.dumps('torch' in sys.modules))")
    assert found is False


def test_experiment_resolves_at_the_top_level():
    found = _fresh("import json, sys, privfl; e = privfl.Experiment; print(json.dumps("
                   "[e.__module__, e.__name__, 'torch' in sys.modules]))")
    assert found == ["privfl.runs.experiment", "Experiment", True]


@pytest.mark.parametrize("name", sorted(privfl._LAZY))
def test_every_lazy_name_is_the_object_its_module_defines(name):
    module = importlib.import_module(privfl._LAZY[name])
    assert getattr(privfl, name) is getattr(module, name)
    assert name in dir(privfl) and name in privfl.__all__


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="module 'privfl' has no attribute 'Experimnt'"):
        privfl.Experimnt  # noqa: B018


def test_privfl_modules_never_import_a_lazy_name_from_the_facade():
    """``from privfl import Experiment`` inside privfl would load the runner from any layer."""
    offenders = []
    for path in sorted((ROOT / "src" / "privfl").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "privfl" and not node.level:
                offenders += [f"{path.name}: {a.name}" for a in node.names
                              if a.name in privfl._LAZY]
    assert offenders == []
