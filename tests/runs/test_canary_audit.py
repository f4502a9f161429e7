"""`privfl audit run` (issue 47), the fast part: audit.json's fields, the generic statistics and
verdict on synthetic canary scores, the CLI's files and exit statuses, refusals, the device
check and the classification of what the audit writes. The power tests (weak noise, configured
noise, planted bug) for every client-level algorithm are slow: test_canary_audit_power.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from privfl.accounting.empirical import one_run_epsilon
from privfl.cli.app import app
from privfl.cli.audit_run import sources
from privfl.config import load_config
from privfl.runs.canary_audit import (
    audit_config,
    audit_outputs,
    audit_statistics,
    guess_counts,
    lower_bound_ceiling,
)
from privfl.runs.canary_clients import cosine_scores, unit_directions
from privfl.runs.canary_source import CanaryScores

DEMO = "configs/demo-dp-fedavg.yaml"
DESCRIPTION = {"canary": "c", "score": "s", "neighbouring": "n", "sampling": "p",
               "released": "r"}


def _scores(gap: float, m: int = 200, seed: int = 1) -> CanaryScores:
    """Synthetic scores: N(gap, 1) for inserted canaries, N(0, 1) for the others."""
    rng = np.random.default_rng(seed)
    inserted = rng.random(m) < 0.5
    return CanaryScores(rng.standard_normal(m) + gap * inserted, inserted, 1, DESCRIPTION)


def test_statistics_on_separated_scores_reach_the_ceiling_and_violate_a_small_bound():
    result = audit_statistics(_scores(100.0), 1e-5, 1.0)
    # every guess right: the largest k's bound, which is the ceiling
    assert result["epsilon_lower"] == pytest.approx(result["epsilon_lower_max"], rel=1e-9)
    assert result["epsilon_lower_max"] <= lower_bound_ceiling(200, 1e-5)
    # with as many inserted as not, perfect scores get every guess right: the ceiling itself
    balanced = np.arange(200) % 2 == 0
    even = audit_statistics(CanaryScores(balanced * 10.0, balanced, 1, DESCRIPTION), 1e-5, 1.0)
    assert even["epsilon_lower"] == even["epsilon_lower_max"] == lower_bound_ceiling(200, 1e-5)
    assert result["verdict"] == "VIOLATED"
    assert result["epsilon_estimate"] > 50  # mu = 100: far beyond any bound
    assert result["canaries"] == 200
    assert result["canaries_inserted"] + result["canaries_not_inserted"] == 200
    assert sum(result["inserted"]) == result["canaries_inserted"]


def test_statistics_on_null_scores_are_consistent():
    result = audit_statistics(_scores(0.0), 1e-5, 1.0)
    assert result["epsilon_lower"] < 0.5
    assert result["verdict"] == "consistent"
    assert "ESTIMATE" in result["epsilon_estimate_method"]
    assert "BOUND from below" in result["epsilon_lower_method"]


def test_ceiling_is_the_one_run_bound_with_every_guess_right():
    ks = guess_counts(200)
    assert ks == [4, 10, 20, 40, 100, 200]
    expected = max(one_run_epsilon(200, k, k, 1e-4, 0.05 / len(ks)) for k in ks)
    assert lower_bound_ceiling(200, 1e-4) == expected
    # measured: 3.56 for 200 canaries at delta = 1e-4; about log m while 2 m delta is small
    # (5.27 for 1000 at delta = 1e-5), capped by the delta term beyond (4.07 for 1000 at 1e-4,
    # 3.91 for 5000: more canaries do not help once m delta is not small)
    assert expected == pytest.approx(3.563, abs=0.001)
    assert lower_bound_ceiling(1000, 1e-5) == pytest.approx(5.269, abs=0.001)
    assert lower_bound_ceiling(5000, 1e-4) < lower_bound_ceiling(1000, 1e-4)


def test_scores_are_validated():
    with pytest.raises(ValueError, match="finite"):
        CanaryScores(np.array([0.0, np.nan]), np.array([True, False]), 1, DESCRIPTION)
    with pytest.raises(ValueError, match="inserted boolean"):
        CanaryScores(np.zeros(2), np.array([1, 0]), 1, DESCRIPTION)
    with pytest.raises(ValueError, match="description lacks released"):
        CanaryScores(np.zeros(2), np.array([True, False]), 1,
                     {k: v for k, v in DESCRIPTION.items() if k != "released"})
    with pytest.raises(ValueError, match="epsilon_bound"):
        audit_statistics(_scores(0.0), 1e-5, -1.0)


def test_cosine_scores_and_directions():
    directions = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    assert cosine_scores(directions, np.array([3.0, 4.0])) == pytest.approx([0.6, 0.8, 1.0])
    assert cosine_scores(directions, np.zeros(2)).tolist() == [0.0, 0.0, 0.0]
    u = unit_directions(np.random.default_rng(0), 50, 7)
    assert u.shape == (50, 7)
    assert np.linalg.norm(u, axis=1) == pytest.approx(np.ones(50))


def test_cli_writes_audit_json_and_report_and_refuses_to_overwrite(tmp_path):
    args = ["audit", "run", DEMO, "--canaries", "50", "--set", "federated.rounds=3",
            "--set", "privacy.accountants=[rdp]", "--out", str(tmp_path), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "audit.json").read_text())
    assert written == json.loads(result.stdout.strip().splitlines()[-1])
    assert written["verdict"] == "consistent"
    assert written["canaries"] == 50
    assert 0 <= written["epsilon_lower"] <= written["epsilon_lower_max"]
    assert written["epsilon_lower"] <= written["epsilon_bound"]
    assert written["epsilon_bound_method"] == "rdp"
    assert written["unit"] == "client"
    assert len(written["scores"]) == len(written["inserted"]) == 50
    for key in ("epsilon_lower_method", "epsilon_estimate", "epsilon_estimate_method",
                "released", "confidence", "delta", "canaries_inserted",
                "canaries_not_inserted", "neighbouring", "sampling", "canary", "score"):
        assert key in written
    assert {o["name"] for o in written["outputs"]} == {"audit.json", "report.html"}
    page = (tmp_path / "report.html").read_text()
    for element in ('id="audit"', "plot-audit-scores", "plot-audit-roc", "consistent"):
        assert element in page
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 2
    assert "audit.json" in again.output


@pytest.mark.parametrize("config, extra", [
    ("configs/demo-dp-ftrl.yaml", []),
    ("configs/demo-bandmf.yaml", ["federated.sampling_rate=0.5"]),
])
def test_correlated_algorithms_audit_with_their_schedule(config, extra):
    small = ["data.dataset=digits", "data.clients=40", "data.train_size=null",
             "data.test_size=3", "data.test_fraction=0.2", "federated.rounds=4", *extra]
    if "dp-ftrl" in config:
        small.append("federated.min_separation=4")
    result = audit_config(load_config(config, small), sources(), canaries=20)
    assert result["algorithm"] in ("dp-ftrl", "bandmf-fedavg")
    assert result["verdict"] == "consistent"
    assert "cyclic" in result["sampling"]
    assert "replace-with-zero" in result["neighbouring"]
    # a canary may only join its group's rounds: with b groups and 4 rounds, canaries of the
    # groups that never ran score exactly 0
    groups = 4 if "dp-ftrl" in config else 10
    scores = np.asarray(result["scores"])
    never = np.arange(20) % groups >= 4
    assert never.any() == (groups > 4)
    assert np.all(scores[never] == 0.0)
    assert np.all(scores[~never] != 0.0)


def test_refuses_what_it_cannot_audit():
    config = load_config(DEMO, ["federated.client_sampling=fixed-size",
                                "federated.client_rate=null", "federated.cohort_size=30",
                                "federated.rounds=1"])
    with pytest.raises(ValueError, match="client_sampling = 'fixed-size'"):
        audit_config(config, sources(), canaries=10)
    with pytest.raises(ValueError, match="canaries = 2"):
        audit_config(config, sources(), canaries=2)
    record = load_config("configs/demo-insdp-fedsgd.yaml", ["federated.rounds=1"])
    with pytest.raises(ValueError, match="record-level guarantee: no canary source"):
        audit_config(record, sources(), canaries=10)


def test_device_without_cuda_fails_with_one_line(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the refusal cannot be shown")
    result = CliRunner().invoke(app, ["audit", "run", DEMO, "--device", "cuda", "--out",
                                      str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "run.device = 'cuda' is not available on this machine" in lines[0]
    assert not (tmp_path / "audit.json").exists()


def test_outputs_are_classified():
    seeded, secure = audit_outputs(False), audit_outputs(True)
    assert [o.name for o in seeded] == [o.name for o in secure] == ["audit.json", "report.html"]
    assert all(not o.covered and "seed" in o.reason for o in seeded)
    assert all(o.covered and "second release" in o.reason for o in secure)


def test_cli_exit_status_1_when_violated(tmp_path, monkeypatch):
    import privfl.runs.canary_audit as canary_audit

    stats = audit_statistics(_scores(100.0, m=40), 1e-4, 1.0)
    fixed = {"algorithm": "dp-fedavg", "rounds": 1, "device": "cpu", "seed": 0, **stats,
             "epsilon_estimate": float("inf"), "epsilon_bound_method": "rdp",
             "unit": "client", **DESCRIPTION, "outputs": []}
    monkeypatch.setattr(canary_audit, "audit_config", lambda config, sources, **kwargs: fixed)
    result = CliRunner().invoke(app, ["audit", "run", DEMO, "--out", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "verdict: VIOLATED" in result.output
    written = json.loads((tmp_path / "audit.json").read_text())
    assert written["epsilon_estimate"] == "inf"  # JSON has no infinity
    assert written["epsilon_lower"] == stats["epsilon_lower"] > 1.0
    assert "VIOLATED" in (tmp_path / "report.html").read_text()


def test_canary_clients_join_by_the_plans_poisson_sampling():
    """DP-FedAvg's canary clients may join every round and join iff their uniform is below q,
    as a Poisson-sampled client does (not every round: outside the guarantee's threat model)."""
    from privfl.algorithms.builders import build_algorithm

    algorithm = build_algorithm(load_config(DEMO, ["federated.rounds=1"]))
    uniforms = np.random.default_rng(0).random(2000)
    may, joins = algorithm.canary_cohort(2000, uniforms)
    q = algorithm.plan.sampling_rate
    assert may.all() and np.array_equal(joins, uniforms < q)
    assert abs(joins.mean() - q) < 4 * np.sqrt(q * (1 - q) / 2000)
