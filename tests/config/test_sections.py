"""The registry of ``federated`` section models that the configuration schema reads."""

from __future__ import annotations

import pytest

from privfl.algorithms.dp_fedavg import DpFedAvgConfig
from privfl.algorithms.registry import ALGORITHM_NAMES
from privfl.config import FederatedConfig, config_from_dict
from privfl.config.sections import (
    federated_model,
    register_federated_model,
    registered_algorithms,
    unregister_federated_model,
)


class ToySection(FederatedConfig):
    """A federated section with one extra key."""

    temperature: float = 1.5


def test_the_builtins_are_registered_by_importing_the_algorithms():
    assert set(ALGORITHM_NAMES) <= set(registered_algorithms())
    assert federated_model("dp-fedavg") is DpFedAvgConfig  # lazy loader, resolved once
    config = config_from_dict({"federated": {"algorithm": "dp-fedavg", "rounds": 2},
                               "privacy": {"noise_multiplier": 1.0}})
    assert isinstance(config.federated, DpFedAvgConfig)


def test_a_registered_model_validates_its_section_and_unregistering_forgets_it():
    register_federated_model("toy-section", ToySection)
    try:
        assert federated_model("toy-section") is ToySection
        loaded = ToySection.model_validate({"algorithm": "toy-section", "temperature": 2.0})
        assert loaded.temperature == 2.0
    finally:
        unregister_federated_model("toy-section")
    with pytest.raises(ValueError, match=r"^federated.algorithm = 'toy-section' is not allowed: "
                                         r"must be one of prifedsync, "):
        federated_model("toy-section")


@pytest.mark.parametrize(("name", "model", "fragment"), [
    ("", ToySection, "name = '' is not allowed"),
    (3, ToySection, "name = 3 is not allowed"),
    ("x", 5, "model = 5 is not allowed"),
])
def test_bad_registrations_are_refused(name, model, fragment):
    with pytest.raises(ValueError, match=fragment):
        register_federated_model(name, model)


def test_an_unknown_algorithm_is_a_config_error_naming_the_choices():
    with pytest.raises(ValueError, match="federated.algorithm = 'nope' is not allowed: must be "
                                         "one of prifedsync, dp-fedavg"):
        config_from_dict({"federated": {"algorithm": "nope"}})


def test_the_config_package_imports_no_algorithm():
    import subprocess
    import sys

    code = ("import sys, privfl.config; "
            "print(sorted(m for m in sys.modules if m.startswith('privfl.fl')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
