"""The runner knows only the algorithm protocol: a toy algorithm registered here gets `privfl run`,
budget and target stops, a kill and --resume, the privacy card, report.md, plots,
`privfl compare` (against PriFedSync) and `privfl check-privacy` with no code of its own."""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar, Literal

import numpy as np
import pytest
import yaml
from pydantic import Field
from typer.testing import CliRunner

from privfl.accounting.events import Sampling, Unit, dpsgd_event
from privfl.accounting.methods import account
from privfl.algorithms.base import FederatedAlgorithm, PrivacyPlan, RoundAlgorithm, zero_rounds
from privfl.algorithms.outputs import RELEASED_ACCURACY
from privfl.algorithms.registry import algorithm_class, available, register, unregister
from privfl.cli.main import app
from privfl.config import ConfigError, config_from_dict
from privfl.config.schema import FederatedConfig
from privfl.runs.experiment import Experiment, RunCallbacks


class ToyConfig(FederatedConfig):
    algorithm: Literal["toy"] = "toy"
    client_rate: float = Field(0.5, gt=0, le=1)
    step: float = Field(0.5, gt=0, le=1)
    UNSUPPORTED_STEP_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("gdp-clt",)
    DEFAULT_ACCOUNTANTS: ClassVar[tuple[str, ...]] = ("rdp", "pld")


class ToyPlan:
    """Client-level Poisson(q) sampling, Gaussian noise z on the sum: DP-FedAvg's event."""

    unit = "client"
    primary_scope = ""

    def __init__(self, config):
        p = config.privacy
        self.private = p.enabled
        self.secure = p.secure
        self.delta = p.delta if p.enabled else None
        self.z = p.noise_multiplier if p.enabled else 0.0
        self.q = config.federated.client_rate
        self.methods = tuple(p.accountants)

    def results(self, rounds):
        if not self.private:
            return []
        event = dpsgd_event(self.z, self.q, max(rounds, 1), sampling=Sampling.POISSON,
                            unit=Unit.CLIENT)
        results = account(event, delta=self.delta, methods=self.methods).results
        return zero_rounds(results) if rounds == 0 else results

    def card(self, rounds):
        return {"unit": "client", "sampling": f"Poisson, q = {self.q:g}", "steps": rounds}


class ToyAlgorithm(RoundAlgorithm):
    """Each sampled client sends its mean label (clipped to 1); the server adds N(0, z^2) to
    the sum and moves w toward sum / (q N); 'accuracy' is 1 / (1 + |w - 1|)."""

    name: ClassVar[str] = "toy"
    title: ClassVar[str] = "toy mean estimation"
    config_class = ToyConfig
    metric_labels: ClassVar[dict[str, str]] = {"global_accuracy": "toy accuracy"}
    # a function of the noised w only (a stop on it must read a covered output)
    METRIC_OUTPUTS: ClassVar[dict[str, tuple[bool, str]]] = {
        "global_accuracy": RELEASED_ACCURACY}

    def __init__(self, config, data):
        self.plan = ToyPlan(config)
        self.round = 0
        self.values = np.array([min(1.0, float(np.mean(data.train.y[idx])) / 5)
                                for idx in data.train_indices])
        self.step = config.federated.step
        self.rng = np.random.default_rng(config.seed)
        self.w = 0.0

    @classmethod
    def from_config(cls, config, data):
        return cls(config, data)

    @classmethod
    def privacy_plan(cls, config, data):
        return ToyPlan(config)

    def select_cohort(self):
        return np.flatnonzero(self.rng.random(self.values.size) < self.plan.q)

    def round_info(self, cohort):
        return {"cohort_size": int(cohort.size)}

    def local_work(self, cohort):
        return self.values[cohort]

    def aggregate(self, cohort, updates):
        noise = self.rng.normal(0.0, self.plan.z) if self.plan.private else 0.0
        mean = (updates.sum() + noise) / (self.plan.q * self.values.size)
        self.w = float(self.w + self.step * (mean - self.w))

    def evaluate(self, cohort, updates):
        return {"global_accuracy": 1.0 / (1.0 + abs(self.w - 1.0))}

    def setup(self):
        return {"toy": f"step {self.step:g}"}

    def state_dict(self) -> dict[str, Any]:
        return {"round": self.round, "w": self.w, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.round, self.w = state["round"], state["w"]
        self.rng.bit_generator.state = state["rng"]


@pytest.fixture
def toy():
    register(ToyAlgorithm)
    yield ToyAlgorithm
    unregister("toy")


def _config(**federated):
    return {
        "name": "toy", "seed": 3,
        "data": {"dataset": "synthetic", "synthetic_examples": 400, "clients": 8,
                 "partition": "iid", "test_size": 10},
        "privacy": {"noise_multiplier": 2.0, "delta": 1e-5},
        "federated": {"algorithm": "toy", "rounds": 6, **federated},
        "run": {"threads": 1},
    }


def _write(tmp_path, raw, name="toy.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def _rows(run_dir):
    return [{k: v for k, v in json.loads(line).items() if k != "seconds"}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_registry_and_protocol(toy):
    assert "toy" in available() and algorithm_class("toy") is toy
    assert {"prifedsync", "toy"} <= set(available())
    config = config_from_dict(_config())
    from privfl.algorithms.builders import build_dataset

    algorithm = toy.from_config(config, build_dataset(config))
    assert isinstance(algorithm, FederatedAlgorithm) and isinstance(algorithm.plan, PrivacyPlan)
    # the toy's own keys are validated by its own section model
    with pytest.raises(ConfigError, match=r"federated\.step = 2 is out of range"):
        config_from_dict(_config(step=2))
    with pytest.raises(ConfigError, match=r"federated\.helper is not a known key: allowed keys "
                                          r"in federated are algorithm, rounds, client_rate"):
        config_from_dict(_config(helper="identity"))
    with pytest.raises(ConfigError, match="privacy.accountants .* must be one of rdp, pld"):
        config_from_dict({**_config(), "privacy": {"noise_multiplier": 2.0,
                                                    "accountants": ["gdp-clt"]}})
    with pytest.raises(ConfigError, match="stop.target_metric = 'personalised' is not allowed"):
        config_from_dict({**_config(), "stop": {"target_metric": "personalised"}})
    with pytest.raises(ConfigError, match="privacy.sigma = 1.0 is not allowed for "
                                          "federated.algorithm = 'toy'"):
        config_from_dict({**_config(), "privacy": {"sigma": 1.0}})
    with pytest.raises(ConfigError, match="privacy.noise_multiplier is missing"):
        config_from_dict({**_config(), "privacy": {"delta": 1e-6}})
    assert config_from_dict({**_config(), "privacy": {"enabled": False}}).privacy.z == 0.0


def test_unknown_algorithm_names_the_choices():
    with pytest.raises(ConfigError, match="federated.algorithm = 'fedprox' is not allowed: must "
                                          "be one of prifedsync, dp-fedavg"):
        config_from_dict({"federated": {"algorithm": "fedprox"}})


@pytest.mark.slow  # long (5-15 s on 2 cores): `make test-slow`
def test_run_report_check_privacy_and_compare(toy, tmp_path):
    runner = CliRunner()
    out = tmp_path / "toy-run"
    result = runner.invoke(app, ["run", str(_write(tmp_path, _config())), "--out", str(out),
                                 "--json", "--no-progress"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["algorithm"] == "toy" and summary["rounds_completed"] == 6
    assert {r["unit"] for r in summary["privacy"]} == {"client"}
    assert {r["method"] for r in summary["privacy"]} == {"rdp", "pld"}
    rows = _rows(out)
    assert [r["round"] for r in rows] == list(range(1, 7))
    # generic privacy metrics: the tightest bound, labelled, and every result
    for r, row in enumerate(rows, start=1):
        expected = ToyPlan(config_from_dict(_config())).results(r)
        assert row["epsilon"] == min(x.epsilon for x in expected)
        assert row["epsilon_method"] == min(expected, key=lambda x: x.epsilon).method
        assert [e["method"] for e in row["privacy"]] == ["rdp", "pld"]
    assert summary["final"]["epsilon"] == rows[-1]["epsilon"]
    report = (out / "report.md").read_text()
    assert "toy: toy mean estimation" in report and "| toy accuracy, last round (6: " in report
    assert "| unit | client |" in report
    for png in ("accuracy.png", "privacy.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    result = runner.invoke(app, ["check-privacy", str(out), "--json"])
    assert result.exit_code == 0, result.output
    check = json.loads(result.stdout)
    assert check["ok"] and check["rounds_checked"] == 6 and check["algorithm"] == "toy"
    # a tampered round is caught (exit 1) and named
    lines = (out / "metrics.jsonl").read_text().splitlines()
    row = json.loads(lines[3])
    row["privacy"][1]["epsilon"] *= 1 + 1e-6
    lines[3] = json.dumps(row)
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["check-privacy", str(out)])
    assert result.exit_code == 1
    assert "round 4: MISMATCH" in result.stdout, result.stdout
    assert "pld/bound epsilon: logged" in result.stdout, result.stdout

    # compare a toy run with a PriFedSync run: no algorithm-specific code either
    pfs = tmp_path / "pfs"
    pfs_config = {"name": "pfs", "data": _config()["data"], "federated": {"rounds": 3},
                  "training": {"local_steps": 2, "batch_size": 8}, "run": {"threads": 1}}
    result = runner.invoke(app, ["run", str(_write(tmp_path, pfs_config, "pfs.yaml")), "--out",
                                 str(pfs), "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["compare", str(out), str(pfs), "--every", "1", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [r["algorithm"] for r in payload["runs"]] == ["toy", "prifedsync"]
    assert [r["unit"] for r in payload["runs"]] == ["client", "record"]
    assert [row["round"] for row in payload["rows"]] == [1, 2, 3]
    assert set(payload["rows"][0]["toy"]) == {"global_accuracy", "epsilon", "epsilon_method",
                                              "epsilon_kind", "mu", "mu_method"}
    # PriFedSync's default accountants (gdp-clt, pld): a per-round row carries the CLT
    # estimate only (no bound), the last planned row the PLD bound (privfl.algorithms.cadence);
    # the two runs share no accountant, so each shows its own tightest number, marked
    pfs_rows = [row["pfs"] for row in payload["rows"]]
    assert [(r["epsilon_method"], r["epsilon_kind"]) for r in pfs_rows] == [
        ("gdp-clt", "estimate"), ("gdp-clt", "estimate"), ("pld", "bound")]
    assert payload["rows"][0]["pfs"]["mu"] > 0  # Theorem 2's CLT mu (an estimate)


def test_budget_stop_is_generic(toy, tmp_path):
    config = config_from_dict(_config())
    budget = ToyPlan(config).results(3)
    tightest = min(r.epsilon for r in budget)
    raw = {**_config(), "stop": {"epsilon": tightest * (1 + 1e-9)}}
    result = Experiment.create(config_from_dict(raw), tmp_path / "b").run()
    assert result.stop_reason == "budget" and result.summary["rounds_completed"] == 3
    assert "round 4 would spend epsilon" in result.summary["stop_detail"]


def test_target_stop_uses_the_algorithms_metric(toy, tmp_path):
    raw = {**_config(), "stop": {"target_accuracy": 0.01}}
    result = Experiment.create(config_from_dict(raw), tmp_path / "t").run()
    assert result.stop_reason == "target" and result.summary["rounds_to_target"] == 1
    assert result.summary["target_metric"] == "global"


class _Kill(RunCallbacks):
    def __init__(self, at):
        self.at = at

    def on_round(self, experiment, metrics):
        if metrics["round"] == self.at:
            raise KeyboardInterrupt


def test_kill_and_resume_equals_an_uninterrupted_run(toy, tmp_path):
    whole = Experiment.create(config_from_dict(_config()), tmp_path / "whole")
    whole.run()
    broken = Experiment.create(config_from_dict(_config()), tmp_path / "broken")
    with pytest.raises(KeyboardInterrupt):
        broken.run(_Kill(4))
    resumed = Experiment.resume(tmp_path / "broken")
    assert resumed.resumed_from == 4
    result = resumed.run()
    assert result.summary["rounds_completed"] == 6
    assert _rows(tmp_path / "broken") == _rows(tmp_path / "whole")
    assert resumed.algorithm.w == whole.algorithm.w  # bit for bit
    assert math.isfinite(result.summary["final"]["global_accuracy"])


def test_an_algorithm_that_does_not_apply_protection_refuses_the_section(toy):
    """A registered algorithm whose local work ignores ``protection`` must not run with it
    silently (the report would claim a distortion that never happened)."""
    from privfl.algorithms.builders import build_algorithm

    config = config_from_dict({**_config(), "protection": {"noise_std": 0.1}})
    with pytest.raises(ConfigError, match="protection is not supported by federated.algorithm "
                                          "= 'toy'"):
        build_algorithm(config)
    assert build_algorithm(config_from_dict(_config())).protection is None
