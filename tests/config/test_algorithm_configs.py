"""The built-in algorithms' ``federated`` models live in torch-free modules
(:mod:`privfl.config.algorithms`), registered by one call; each algorithm uses that model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from privfl.algorithms.registry import ALGORITHM_NAMES, algorithm_class
from privfl.config import sections
from privfl.config.algorithms import BUILTIN_ALGORITHMS, builtin_config, register_builtin_algorithms

ROOT = Path(__file__).resolve().parents[2]


def test_every_algorithm_takes_its_config_class_from_the_torch_free_module():
    assert tuple(BUILTIN_ALGORITHMS) == ALGORITHM_NAMES
    for name in ALGORITHM_NAMES:
        model = builtin_config(name)
        assert algorithm_class(name).config_class is model
        assert model.__module__.startswith("privfl.config.algorithms.")
        assert sections.federated_model(name) is model
        assert model().algorithm == name


def test_registering_again_keeps_an_algorithm_added_at_run_time():
    class Mine:  # a stand-in model: registration only stores it
        pass

    before = dict(sections._MODELS)
    try:
        sections.unregister_federated_model("dp-fedavg")
        assert register_builtin_algorithms() == ("dp-fedavg",)
        assert sections.federated_model("dp-fedavg") is builtin_config("dp-fedavg")
        sections.register_federated_model("dp-fedavg", Mine)
        assert register_builtin_algorithms() == ()
        assert sections.federated_model("dp-fedavg") is Mine
    finally:
        sections._MODELS.clear()
        sections._MODELS.update(before)


def test_the_config_modules_and_a_full_validation_import_no_torch():
    code = (
        "import sys\n"
        "from privfl.config.algorithms import BUILTIN_ALGORITHMS, register_builtin_algorithms\n"
        "from privfl.config import load_config\n"
        "register_builtin_algorithms()\n"
        "for path in ('configs/demo.yaml', 'configs/demo-dp-fedavg.yaml'):\n"
        "    load_config(path)\n"
        "from privfl.config.algorithms import builtin_config\n"
        "for name in BUILTIN_ALGORITHMS:\n"
        "    builtin_config(name)\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('privfl.fl')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
