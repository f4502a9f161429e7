"""Power of the record-level audit (issue 47; slow): canary records in the five record-level
algorithms (:mod:`privfl.runs.record_canaries`).

* noise multiplier 0.01: the lower bound comes near ``epsilon_lower_max``, the most its canaries
  can show;
* the configured noise: ``consistent``;
* a planted bug, the noise scale divided by 10 at the one place each algorithm draws its noise
  (monkeypatched here only), the accountant printing the old bound: ``VIOLATED`` at a proven
  replace-one bound <= 2 for all five (measured at audit seeds 0, 1, 2: SETTINGS and
  docs/audit.md).

Settings give the canaries power: antipodal OOD canary pairs on MNIST's blank border (the slot
holds a canary or its reflection, so a bit flips a gradient of up to twice one canary's norm,
the replace-one sensitivity; balanced signs: real records cannot move them); logistic
regression (no hidden layer mixing the canaries); every record in every step (Poisson rate 1,
the whole client per batch) and every client every round; few clients where the release is a
model averaged over clients (InsDP-FedAvg's global model averages each client's own noise;
PriFedSync's helper models); 30 rounds, 400 canaries (ceiling 3.69 at delta 1e-5); a large
learning rate for the weak-noise runs, a moderate one with the noise. Projected SGD: logistic
regression on MNIST (no convexity claims), 100 of 1,400 users per round drawn independently,
200 rounds, lr 0.2, 700 canaries (ceiling 4.24). Training floats differ in the last bits across
CPUs; the margins are far larger than that.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import privfl.fl.trainer as trainer
from privfl.algorithms.dp_dsgd import DpDsgd
from privfl.algorithms.projected_sgd import ProjectedSgd
from privfl.config import load_config
from privfl.runs.canary_audit import audit_config
from privfl.runs.record_canaries import RecordCanaries

pytestmark = pytest.mark.slow

FULL_BATCH = ["federated.rounds=30", "training.local_steps=1", "training.optimizer=sgd"]
LOGREG = ["model.name=logreg", "model.kwargs={}"]
PROJECTED = ["federated.schedule=independent", "federated.users_per_round=100",
             "federated.rounds=200", "federated.radius=100", "federated.lr=0.2",
             "data.dataset=mnist-5k", *LOGREG, "privacy.accountants=[contraction,rdp]"]
#: the audit's seed (its bits and slots); docs/audit.md gives seeds 0, 1, 2
SEED = 1
SETTINGS = {
    # name: (config, overrides, weak-noise overrides, configured noise multiplier, where the
    #        bug goes, canaries, design, measured bug lower bound at seeds 0 / 1 / 2)
    "insdp-fedsgd": ("configs/demo-insdp-fedsgd.yaml",
                     [*FULL_BATCH, "data.train_size=50", "training.batch_size=50",
                      "training.lr=5", "federated.clients_per_round=20"],
                     ["privacy.accountants=[rdp]", "training.lr=20"], 5.0, "trainer", 400,
                     "ood-pair", "3.69 / 2.92 / 3.34 (bound 1.95)"),
    "insdp-fedavg": ("configs/demo-insdp-fedavg.yaml",
                     [*FULL_BATCH, *LOGREG, "data.clients=2", "data.train_size=250",
                      "training.batch_size=250", "training.lr=1", "training.weight_decay=0"],
                     ["privacy.accountants=[rdp]", "training.lr=20"], 24.0, "trainer", 400,
                     "ood-pair", "2.92 / 2.77 / 3.10 (bound 1.80)"),
    "dp-dsgd": ("configs/demo-dp-dsgd.yaml",
                ["data.train_size=50", "data.clients=20", "federated.rounds=30",
                 "federated.client_rate=1.0", "federated.record_rate=1.0",
                 "federated.server_momentum=0", "federated.server_lr=5"],
                ["federated.composition=[rdp]", "federated.server_lr=20"], 24.0, "dp-dsgd", 400,
                "ood-pair", "3.07 / 3.29 / 2.75 (bound 1.68)"),
    "prifedsync": ("configs/demo.yaml",
                   [*FULL_BATCH, *LOGREG, "data.partition=iid", "data.test_size=20",
                    "data.clients=4", "data.train_size=125", "training.batch_size=125",
                    "training.lr=1", "federated.client_rate=1.0", "privacy.accountants=[rdp]"],
                   ["training.lr=20"], 24.0, "trainer", 400, "ood-pair",
                   "3.69 / 3.10 / 3.69 (bound 1.96)"),
    "projected-sgd": ("projected", PROJECTED, [], 10.0, "projected-sgd", 700, "ood-pair",
                      "2.15 / 2.26 / 1.99 (bound 1.79)"),
}


@pytest.fixture(scope="module")
def projected(tmp_path_factory):
    """Projected SGD's demo without its convexity claims (keys removed; the overrides put it
    on MNIST with logistic regression, whose blank border takes OOD canaries)."""
    raw = yaml.safe_load(Path("configs/demo-projected-sgd.yaml").read_text(encoding="utf-8"))
    for key in ("convex", "smoothness", "lipschitz", "input_bound"):
        raw["federated"].pop(key, None)
    path = tmp_path_factory.mktemp("projected") / "projected.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return str(path)


def _audit(name: str, z: float, projected: str, *extra: str) -> dict:
    config_path, overrides, _, _, _, canaries, design, _ = SETTINGS[name]
    path = projected if config_path == "projected" else config_path
    config = load_config(path, [*overrides, f"privacy.noise_multiplier={z}", *extra])
    source = RecordCanaries(config, design)
    return audit_config(config, {source.unit: lambda: source}, canaries=canaries, seed=SEED)


def _plant_bug(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Divide the noise scale by 10 where the algorithm draws its noise."""
    if where == "trainer":  # the local DP-SGD steps of PriFedSync and InsDP
        original = trainer.fill_noise

        def tenth(out, streams, std, *args, **kwargs):
            return original(out, streams, std / 10.0, *args, **kwargs)

        monkeypatch.setattr(trainer, "fill_noise", tenth)
        return
    cls = {"dp-dsgd": DpDsgd, "projected-sgd": ProjectedSgd}[where]
    noise = cls.noise
    monkeypatch.setattr(cls, "noise", lambda self, *a: noise(self, *a) / 10.0)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_weak_noise_comes_near_what_the_canaries_allow(name, projected):
    result = _audit(name, 0.01, projected, *SETTINGS[name][2])
    assert result["algorithm"] == name
    assert result["epsilon_lower"] >= 0.5 * result["epsilon_lower_max"]  # measured 0.60 - 0.90
    assert result["verdict"] == "consistent"  # the bound at z = 0.01 is huge


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_configured_noise_is_consistent_and_the_planted_bug_shows(name, monkeypatch,
                                                                   projected):
    z, where = SETTINGS[name][3], SETTINGS[name][4]
    honest = _audit(name, z, projected)
    assert honest["epsilon_bound"] <= 2.0  # the proven replace-one bound
    assert honest["verdict"] == "consistent"
    assert honest["epsilon_lower"] < 0.5  # measured 0.00 - 0.24 at seeds 0, 1, 2
    _plant_bug(where, monkeypatch)
    buggy = _audit(name, z, projected)
    assert buggy["epsilon_bound"] == honest["epsilon_bound"]  # the accountant does not see it
    assert buggy["epsilon_estimate"] > honest["epsilon_bound"] > honest["epsilon_estimate"]
    assert buggy["verdict"] == "VIOLATED"
    assert buggy["epsilon_lower"] > buggy["epsilon_bound"]
