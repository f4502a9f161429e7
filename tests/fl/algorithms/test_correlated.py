"""DP-FTRL and BandMF-FedAvg on the seam: the noise the server adds, the clipping, the cohorts,
and the numbers (the run, check-privacy and ``privfl account`` agree)."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from privfl.config import config_from_dict
from privfl.config.loader import load_config
from privfl.mechanisms.correlated_privacy import banded_release, tree_release
from privfl.mechanisms.factorization import toeplitz_lower
from privfl.mechanisms.sensitivity import Participation, sensitivity
from privfl.mechanisms.tree import restarted_tree_encoder, tree_decoder
from privfl.runs.experiment import build_algorithm, privacy_plan

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "golden"))
import _golden as golden  # noqa: E402  (tests/golden/_golden.py: cross-CPU float tolerance)

_BASE = {
    "name": "x", "seed": 0, "run": {"threads": 1},
    "data": {"dataset": "synthetic", "synthetic_examples": 400, "test_fraction": 0.25,
             "partition": "iid", "clients": 12, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 5, "optimizer": "sgd", "lr": 0.5},
    "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-5},
}


def _config(algorithm: str, *, seed: int = 0, privacy=None, **federated):
    raw = copy.deepcopy(_BASE)
    raw["seed"] = seed
    raw["privacy"].update(privacy or {})
    raw["federated"] = {"algorithm": algorithm, **federated}
    return config_from_dict(raw)


def _cli(args: list[str]) -> dict:
    from privfl.cli.main import app

    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _zero_updates(algorithm) -> None:
    """Clients send nothing: what moves the model is the server's noise alone."""
    d = algorithm.global_model.numel()
    algorithm.local_work = lambda cohort: {"total": torch.zeros(d, dtype=torch.float64),
                                           "stats": None, "norms": None, "clipped": None}


# ---------------------------------------------------------------- the noise's covariance
def _noise_rows(algorithm, rounds: int, cumulative: bool) -> np.ndarray:
    """``[rounds, d]``: E[m] / eta times the model's change (per round, or since w_0)."""
    start, rows = algorithm.global_model.double().clone(), []
    for _ in range(rounds):
        before = algorithm.global_model.double().clone()
        algorithm.run_round()
        ref = start if cumulative else before
        rows.append((algorithm.global_model.double() - ref).numpy())
    return np.asarray(rows) * algorithm.plan.expected_cohort / algorithm.server_lr


def _empirical_covariance(config, rounds, cumulative, seeds=120) -> np.ndarray:
    """The noise of ``seeds`` fresh runs (the algorithm's state reset, its generator seeded
    anew), every coordinate a sample: ``[rounds, rounds]``."""
    alg = build_algorithm(config)
    _zero_updates(alg)
    alg.evaluate = lambda cohort, updates: {}
    samples = []
    for seed in range(seeds):
        alg.round, alg.noise = 0, alg._new_noise(alg.global_model.numel())
        alg.global_model = alg.initial_model.clone()
        alg.velocity.zero_()
        alg.generator.manual_seed(seed)
        samples.append(_noise_rows(alg, rounds, cumulative).T)
    x = np.concatenate(samples)  # [coordinates x seeds, rounds]
    return x.T @ x / x.shape[0]


def test_bandmf_noise_has_covariance_sigma2_inverse_gram():
    """Row t of the noise BandMF adds is row t of C^-1 Z: over the rounds its covariance is
    sigma^2 (C^T C)^-1 (C the plan's banded Toeplitz encoder), not sigma^2 I."""
    rounds, z = 6, 0.5
    config = _config("bandmf-fedavg", rounds=rounds, band=3, server_momentum=0.0,
                     privacy={"noise_multiplier": z, "clip_norm": 2.0})
    c = toeplitz_lower(privacy_plan(config).coefficients(), rounds)
    expected = (z * 2.0) ** 2 * np.linalg.inv(c.T @ c)
    got = _empirical_covariance(config, rounds, cumulative=False)
    assert np.abs(got - expected).max() < 0.08 * np.abs(expected).max()
    assert np.abs(expected - np.diag(np.diag(expected))).max() > 0.2 * expected[0, 0]


@pytest.mark.parametrize("estimator", ["vanilla", "honaker"])
def test_dp_ftrl_noise_is_the_trees_prefix_noise(estimator):
    """The model's offset from w_0 after t rounds (momentum 0) is the tree's noisy prefix sum:
    covariance sigma^2 B B^T with B the tree's decoder (vanilla or Honaker)."""
    rounds = 7
    config = _config("dp-ftrl", rounds=rounds, estimator=estimator, server_momentum=0.0)
    b = tree_decoder(rounds, estimator)
    expected = b @ b.T
    got = _empirical_covariance(config, rounds, cumulative=True)
    assert np.abs(got - expected).max() < 0.08 * np.abs(expected).max()


# ---------------------------------------------------------------- clipping and cohorts
@pytest.mark.parametrize("algorithm", ["dp-ftrl", "bandmf-fedavg"])
def test_what_reaches_the_server_is_clipped(algorithm):
    """Every client's update is clipped to S before the sum the noise is added to: the sum's
    norm is at most |cohort| S, though the raw updates are far longer than S."""
    clip = 0.01
    extra = {"band": 3} if algorithm == "bandmf-fedavg" else {}
    alg = build_algorithm(_config(algorithm, rounds=3, min_separation=3,
                                  privacy={"clip_norm": clip}, **extra))
    seen = []
    step = alg._server_step
    alg._server_step = lambda total: seen.append(total.copy()) or step(total)
    metrics = [alg.run_round() for _ in range(3)]
    for row, total in zip(metrics, seen, strict=True):
        assert np.linalg.norm(total) <= row["cohort_size"] * clip * (1 + 1e-9)
        assert row["update_norm"] > 10 * clip and row["clipped_fraction"] == 1.0


def _participations(alg, rounds):
    cohorts, select = [], alg.select_cohort
    alg.select_cohort = lambda: cohorts.append(select()) or cohorts[-1]
    _zero_updates(alg)
    for _ in range(rounds):
        alg.run_round()
    joined: dict[int, list[int]] = {}
    for t, cohort in enumerate(cohorts):
        for j in cohort:
            joined.setdefault(int(j), []).append(t)
    return joined


@pytest.mark.parametrize(("algorithm", "federated"), [
    ("dp-ftrl", {"min_separation": 4}),
    ("dp-ftrl", {"min_separation": 9}),  # one participation
    ("bandmf-fedavg", {"band": 3, "min_separation": 4}),
    ("bandmf-fedavg", {"band": 3, "sampling_rate": 0.6}),
])
def test_the_cohorts_meet_the_participation_the_accountant_was_given(algorithm, federated):
    rounds = 9
    config = _config(algorithm, rounds=rounds, **federated)
    alg = build_algorithm(config)
    joined = _participations(alg, rounds)
    given = alg.plan.schedule.participation(rounds)
    b = config.federated.groups()
    assert given == (Participation.single(rounds) if b >= rounds
                     else Participation.cyclic(rounds, b))
    assert joined  # somebody trained
    for steps in joined.values():
        assert len(steps) <= given.max_participations
        assert all(later - earlier >= given.min_separation
                   for earlier, later in zip(steps, steps[1:], strict=False))
    # the event is built from that participation, independently rebuilt here
    event = alg.plan.event(rounds)
    if algorithm == "dp-ftrl":
        assert event == tree_release(given, 1.0)
        exact = sensitivity(restarted_tree_encoder(rounds), given)
        assert event.sensitivity == pytest.approx(exact.value, rel=1e-12)
    else:
        q = config.federated.sampling_rate
        assert event == banded_release(given, 3, 1.0, sampling_rate=q if q < 1 else None)
        c = toeplitz_lower(alg.plan.coefficients(), rounds)
        assert sensitivity(c, given).value <= event.sensitivity * (1 + 1e-12)


# ---------------------------------------------------------------- resume
@pytest.mark.parametrize("algorithm", ["dp-ftrl", "bandmf-fedavg"])
def test_a_resumed_run_continues_exactly(algorithm, tmp_path):
    extra = {"band": 2} if algorithm == "bandmf-fedavg" else {"restart_every": 4}
    config = _config(algorithm, rounds=5, min_separation=2, **extra)
    whole = build_algorithm(config)
    for _ in range(5):
        whole.run_round()
    first = build_algorithm(config)
    for _ in range(3):
        first.run_round()
    path = tmp_path / "state.pt"
    torch.save(first.state_dict(), path)
    second = build_algorithm(config)
    second.load_state_dict(torch.load(path, weights_only=True))
    for _ in range(2):
        second.run_round()
    assert torch.equal(second.global_model, whole.global_model)


# ---------------------------------------------------------------- one number everywhere
def test_dp_ftrl_demo_privacy_json_equals_account_dp_ftrl():
    """The demo's real two-round run (privacy.json pinned in tests/golden/runs.json, equal up to the
    golden tolerance of tests/golden/_golden.py), its plan
    rebuilt now (check-privacy's path) and ``privfl account dp-ftrl --json`` give the same
    results, bit for bit."""
    config = load_config(ROOT / "configs/demo-dp-ftrl.yaml")
    z = config.privacy.noise_multiplier
    args = ["account", "dp-ftrl", "--noise-multiplier", repr(z), "--delta", "1e-05"]
    run = golden.load("runs.json")["demo-dp-ftrl.yaml"]
    assert run["rounds"] == 2
    golden.assert_matches(run["results"], _cli([*args, "--rounds", "2"])["results"])
    plan = privacy_plan(config)
    full = _cli([*args, "--rounds", "40", "--participations", "1", "--min-separation", "40"])
    assert [r.to_dict() for r in plan.results(40)] == full["results"]
    # z was calibrated to 2 before gdp_epsilon's error allowance (1e-9 in delta): 2 + 1.2e-10
    assert full["results"][0]["epsilon"] == pytest.approx(2.0, rel=1e-9)
    assert full["setting"]["neighbouring"] == "replace-with-zero"


def test_bandmf_demo_privacy_json_equals_account_bandmf():
    config = load_config(ROOT / "configs/demo-bandmf.yaml")
    z = config.privacy.noise_multiplier
    args = ["account", "bandmf", "--band", "10", "--noise-multiplier", repr(z), "--delta",
            "1e-05"]
    run = golden.load("runs.json")["demo-bandmf.yaml"]
    golden.assert_matches(run["results"], _cli([*args, "--rounds", "2"])["results"])
    plan = privacy_plan(config)
    full = _cli([*args, "--rounds", "40", "--participations", "4", "--min-separation", "10",
                 "--schedule", "cyclic"])
    assert [r.to_dict() for r in plan.results(40)] == full["results"]
    assert full["setting"]["sensitivity"] == 2.0


def test_amplified_bandmf_plan_equals_account_bandmf_with_sampling_rate():
    config = _config("bandmf-fedavg", rounds=9, band=3, sampling_rate=0.5)
    cli = _cli(["account", "bandmf", "--rounds", "9", "--band", "3", "--noise-multiplier",
                "1.0", "--delta", "1e-05", "--sampling-rate", "0.5"])
    assert [r.to_dict() for r in privacy_plan(config).results(9)] == cli["results"]
    assert [r["method"] for r in cli["results"]] == ["pld (BandMF amplification)",
                                                     "rdp (BandMF amplification)"]


def test_every_result_is_labelled():
    plan = privacy_plan(_config("dp-ftrl", rounds=8, min_separation=4))
    results = plan.results(8)
    assert [r.method for r in results] == ["gdp (exact Gaussian)", "pld", "rdp"]
    for r in results:
        assert (r.unit, r.neighbouring, r.kind) == ("client", "replace-with-zero", "bound")
        assert r.sampling.startswith("none (participation bound: cyclic: every 4 rounds")
        assert r.release == "every noisy prefix sum (every model iterate)"
        assert r.delta == 1e-5 and r.steps == 8
    # two participations, 4 apart, in a tree over 8 rounds: s^2 = 4 + 4 + 2 (one shared node)
    assert results[0].extras["sensitivity"] == pytest.approx(np.sqrt(10.0), rel=1e-12)
    card = plan.card(8)
    assert card["neighbouring"].startswith("replace-with-zero")
    assert "participation bound" in card["sampling"]


def test_configuration_errors_name_the_key():
    with pytest.raises(ValueError, match="federated.min_separation = 2 is out of range"):
        _config("bandmf-fedavg", rounds=9, band=3, min_separation=2)
    with pytest.raises(ValueError, match="federated.sampling_rate"):
        _config("bandmf-fedavg", rounds=9, band=3, min_separation=4, sampling_rate=0.5)
    with pytest.raises(ValueError, match="federated.min_separation = 13"):
        _config("dp-ftrl", rounds=20, min_separation=13)


def test_a_sampled_cohort_size_is_outside_the_guarantee():
    """With cyclic Poisson sampling the realised cohort size is secret (the amplified bound
    assumes it); without sampling it is the public group size."""
    sampled = build_algorithm(_config("bandmf-fedavg", rounds=4, band=2, sampling_rate=0.5))
    plain = build_algorithm(_config("bandmf-fedavg", rounds=4, band=2))
    assert sampled.output_classes()["cohort_size"][0] is False
    assert plain.output_classes()["cohort_size"][0] is True


def test_restarted_tree_plan_equals_account_dp_ftrl_with_restarts():
    """Trees restarted every 4 rounds, a client every 4th round: one participation per tree,
    s = sqrt(2 trees x 3 levels) = sqrt(6); the plan and the command agree."""
    config = _config("dp-ftrl", rounds=8, min_separation=4, restart_every=4)
    cli = _cli(["account", "dp-ftrl", "--rounds", "8", "--noise-multiplier", "1.0", "--delta",
                "1e-05", "--participations", "2", "--min-separation", "4", "--schedule",
                "cyclic", "--restart-every", "4"])
    assert [r.to_dict() for r in privacy_plan(config).results(8)] == cli["results"]
    assert cli["setting"]["sensitivity"] == pytest.approx(np.sqrt(6.0), rel=1e-12)
