"""Every ``privfl init`` starter learns as written on its built-in data, and ``privfl run`` /
``--dry-run`` warn about settings that cannot learn or a risky delta
(:mod:`privfl.algorithms.sanity`)."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from typer.testing import CliRunner

from privfl.algorithms.registry import available
from privfl.algorithms.sanity import averaged_and_noise, setting_warnings
from privfl.cli.info import starter_config
from privfl.cli.main import app
from privfl.config import config_from_dict
from privfl.runs.experiment import Experiment, privacy_plan

runner = CliRunner()

#: the accuracy each starter reaches as written, at least (10 classes: chance is 0.1); the
#: measured values (seed 0) are in the comments
LEARNS = {
    "prifedsync": ("personalised_accuracy", 0.7),  # 0.835
    "dp-fedavg": ("global_accuracy", 0.8),  # 0.933
    "insdp-fedsgd": ("global_accuracy", 0.7),  # 0.797
    "insdp-fedavg": ("global_accuracy", 0.7),  # 0.81
    "dp-dsgd": ("global_accuracy", 0.7),  # 0.845
    # one pass, 5 noisy steps of a projected logistic regression (Asoodeh et al. 2021)
    "projected-sgd": ("global_accuracy", 0.35),  # 0.435
    "dp-ftrl": ("global_accuracy", 0.65),  # 0.739 (configs/demo-dp-ftrl.yaml)
    "bandmf-fedavg": ("global_accuracy", 0.7),  # 0.79 (configs/demo-bandmf.yaml)
}


def test_every_algorithm_has_a_learning_threshold():
    assert set(LEARNS) == set(available())


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", sorted(LEARNS))
def test_every_starter_learns_as_written(tmp_path, algorithm):
    config = config_from_dict(yaml.safe_load(starter_config(algorithm)))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = Experiment.create(config, tmp_path / "run").run()
    finally:
        torch.set_num_threads(before)
    key, at_least = LEARNS[algorithm]
    assert result.summary["rounds_completed"] == config.federated.rounds
    assert result.summary["final"][key] >= at_least, result.summary["final"]


def _dp_fedavg(**federated):
    raw = {"name": "x", "data": {"dataset": "digits", "partition": "iid", "clients": 20,
                                 "test_size": 3},
           "model": {"name": "logreg"},
           "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
           "federated": {"algorithm": "dp-fedavg", "rounds": 2, **federated}}
    return config_from_dict(raw)


def test_a_cohort_too_small_for_the_noise_is_warned_about():
    """The old dp-fedavg starter: E[m] = 0.1 * 20 = 2 clients for z = 1 cannot learn."""
    plan = privacy_plan(_dp_fedavg(client_rate=0.1))
    assert averaged_and_noise(plan) == (2.0, 1.0, "expected clients per round")
    warnings = setting_warnings(plan, clients=20, records=1437)
    assert len(warnings) == 1 and "cannot learn" in warnings[0]
    assert "m = 2 for noise multiplier z = 1" in warnings[0] and "m >= 4 z = 4" in warnings[0]
    assert setting_warnings(privacy_plan(_dp_fedavg(client_rate=0.2)), clients=20,
                            records=1437) == []  # E[m] = 4 = 4 z: at the limit, no warning


def test_a_delta_not_well_below_one_over_n_is_risky():
    plan = privacy_plan(_dp_fedavg(client_rate=0.5))
    assert setting_warnings(plan, clients=20, records=1437) == []
    plan.delta = 1e-3  # n = 20 clients (client level): 0.1 / n = 5e-3 > 1e-3
    assert setting_warnings(plan, clients=20, records=1437) == []
    plan.delta = 5e-3
    (warning,) = setting_warnings(plan, clients=20, records=1437)
    assert "privacy.delta = 0.005 is not well below 1/n = 0.05 (n = 20 clients" in warning
    assert "e.g. 0.001" in warning


def test_dry_run_prints_the_warnings(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_dp_fedavg(client_rate=0.1).model_dump(mode="json")))
    result = runner.invoke(app, ["run", str(path), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    (warning,) = json.loads(result.stdout)["warnings"]
    assert "cannot learn" in warning
    text = runner.invoke(app, ["run", str(path), "--dry-run"])
    assert "warning: this setting cannot learn" in " ".join(text.stdout.split())
