"""`privfl audit run` shows power (issue 47), for every client-level algorithm (slow):

* with noise multiplier 0.01 the lower bound reaches ``epsilon_lower_max``, the most its canaries
  can show (perfectly separated scores);
* with the configured noise the verdict is ``consistent``;
* with a planted bug, the noise scale divided by 10 at the one place each algorithm draws its
  noise (monkeypatched here, in the test only), the accountant still prints the old bound
  (<= 2) and the audit says ``VIOLATED``.

Settings: digits, logistic regression (d = 650), 100 clients, one local step at lr 1e-4 so that
the real clients barely move (the audit tests the server's clipping and noise, docs/audit.md),
no server momentum (it spreads a canary over later rounds, which the score does not read).
DP-FedAvg: fixed clipping, q = 0.3, z = 5, 40 rounds, 300 canaries (RDP bound 1.45 at delta
1e-4). DP-FTRL and BandMF-FedAvg: their demos' noise (calibrated to epsilon = 2 at delta 1e-5
for 40 rounds), 500 canaries. Canaries send 10 S_t along their direction (the server clips them).
Measured on this machine (epsilon_lower / epsilon_lower_max; configured; planted bug):
DP-FedAvg 3.60 / 3.60, 0.00, 2.69 (bound 1.45); DP-FTRL 3.91 / 3.91, 0.00, 2.38 (bound 2.00);
BandMF 3.91 / 3.91, 0.24, 3.56 (bound 2.00); about 25 s for all nine audits. Training floats
differ in the last bits across CPUs; the margins are far larger than that.
"""

from __future__ import annotations

import pytest

import privfl.algorithms.correlated_fedavg as correlated_fedavg
import privfl.fl.aggregation as aggregation
from privfl.cli.audit_run import sources
from privfl.config import load_config
from privfl.runs.canary_audit import audit_config

pytestmark = pytest.mark.slow

SMALL = ["training.lr=1e-4", "training.local_steps=1", "federated.server_momentum=0"]
DIGITS = ["data.dataset=digits", "data.clients=100", "data.train_size=null",
          "data.test_size=3", "data.test_fraction=0.2"]
#: algorithm -> (config, overrides, canaries); `make audit-mutants` (tests/mutants/audit.py)
#: reads these. DP-FedAvg's canaries may all join every round: at most d/2 = 325 for the
#: least-squares score; a cyclic group holds 1/b of them, and DP-FTRL sees each canary once
SETTINGS = {
    "dp-fedavg": ("configs/demo-dp-fedavg.yaml",
                  [*SMALL, "federated.adaptive_clipping=false", "privacy.accountants=[rdp]",
                   "privacy.noise_multiplier=5"], 300),
    "dp-ftrl": ("configs/demo-dp-ftrl.yaml", [*SMALL, *DIGITS], 500),
    "bandmf-fedavg": ("configs/demo-bandmf.yaml", [*SMALL, *DIGITS], 500),
}
#: the module whose gaussian_noise draws each algorithm's noise (the one place it is drawn)
NOISE_MODULES = {"dp-fedavg": aggregation, "dp-ftrl": correlated_fedavg,
                 "bandmf-fedavg": correlated_fedavg}


def _audit(name: str, *extra: str) -> dict:
    config, overrides, canaries = SETTINGS[name]
    return audit_config(load_config(config, [*overrides, *extra]), sources(),
                        canaries=canaries)


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_weak_noise_reaches_what_the_canaries_allow(name):
    result = _audit(name, "privacy.noise_multiplier=0.01")
    assert result["algorithm"] == name
    assert result["epsilon_lower"] == pytest.approx(result["epsilon_lower_max"], rel=1e-6)
    assert result["epsilon_lower_max"] > 3.5
    assert result["verdict"] == "consistent"  # the bound at z = 0.01 is huge


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_configured_noise_is_consistent_and_planted_bug_is_violated(name, monkeypatch):
    honest = _audit(name)
    assert honest["epsilon_bound"] < 2.0 + 1e-6  # calibrated to 2 (rounded up)
    assert honest["verdict"] == "consistent"
    assert honest["epsilon_lower"] < 1.0  # measured at most 0.24
    module = NOISE_MODULES[name]
    original = module.gaussian_noise

    def tenth(shape, std, **kwargs):  # the planted bug: the noise scale / 10
        return original(shape, std / 10.0, **kwargs)

    monkeypatch.setattr(module, "gaussian_noise", tenth)
    buggy = _audit(name)
    assert buggy["epsilon_bound"] == honest["epsilon_bound"]  # the accountant does not see it
    assert buggy["verdict"] == "VIOLATED"
    assert buggy["epsilon_lower"] > buggy["epsilon_bound"]
