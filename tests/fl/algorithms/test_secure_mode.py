"""Secure mode (``privacy.secure``): cohorts, local batches and noise from os.urandom.

Run twice from the same configuration, a secure round draws other cohorts, other batches and
other noise; a seeded round repeats bit for bit. The schemes the accountant assumes are kept
(exactly B distinct records per fixed-size batch, Poisson(p) cohorts), and a secure run's
checkpoint still resumes (it continues the run; nothing of it is reproducible).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import yaml

import privfl.fl.noise_fill as noise_module
import privfl.fl.trainer as trainer_module
from privfl.config import config_from_dict
from privfl.runs.experiment import Experiment, build_algorithm
from privfl.runs.rundir import RunDirectory


def _config(raw, secure, **sections):
    raw = copy.deepcopy(raw)
    raw["privacy"] = {**raw["privacy"], "secure": secure, "accountants": ["gdp-clt"]}
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw)


@pytest.fixture
def spy(monkeypatch):
    """Records every batch (index matrix) the engine samples and every noise block it draws."""
    seen = {"batches": [], "noise": []}
    sample, draw = trainer_module.sample_steps, noise_module._draw

    def spy_sample(*args):
        batches = sample(*args)
        for t in range(batches.counts.shape[1]):
            seen["batches"].append(batches.step(t)[0].clone())
        return batches

    def spy_draw(jobs, std, secure):
        draw(jobs, std, secure)
        seen["noise"].append(torch.cat([part.flatten() for part, _ in jobs]).clone())

    monkeypatch.setattr(trainer_module, "sample_steps", spy_sample)
    monkeypatch.setattr(noise_module, "_draw", spy_draw)
    return seen


def _equal_lists(a, b) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def _one_round(config, spy):
    """Cohorts of 12 draws, then one full-cohort round: its batches, noise and models."""
    algorithm = build_algorithm(config)
    cohorts = [algorithm.sample_cohort()[0].tolist() for _ in range(12)]
    algorithm.client_rate = 1.0  # same cohort (everyone) in both runs: compare batches alone
    spy["batches"].clear()
    spy["noise"].clear()
    algorithm.run_round()
    return cohorts, list(spy["batches"]), list(spy["noise"]), algorithm.local.clone()


@pytest.mark.parametrize("secure", [False, True])
def test_a_secure_round_twice_differs_a_seeded_round_repeats(tiny_config_dict, spy, secure):
    config = _config(tiny_config_dict, secure)
    first, second = _one_round(config, spy), _one_round(config, spy)
    (cohorts_a, batches_a, noise_a, models_a), (cohorts_b, batches_b, noise_b, models_b) = (
        first, second)
    steps = config.training.local_steps * config.data.clients
    assert len(batches_a) == len(batches_b) == steps  # looped layout: a client per call
    assert len(noise_a) == len(noise_b) == steps
    # 12 cohorts of 4 clients at p = 0.7 agree by chance with probability ~ 0.113^12
    assert (cohorts_a == cohorts_b) is not secure
    assert _equal_lists(batches_a, batches_b) is not secure
    assert _equal_lists(noise_a, noise_b) is not secure
    assert torch.equal(models_a, models_b) is not secure
    for index in batches_a:  # the scheme is unchanged: exactly B distinct records
        assert index.shape == (1, config.training.batch_size)
        assert torch.unique(index).numel() == config.training.batch_size


def test_secure_cohorts_are_poisson_p(tiny_config_dict):
    """Every client joins a secure cohort with probability p, independently of the others."""
    config = _config(tiny_config_dict, True, federated={"client_rate": 0.3,
                                                        "empty_cohort": "skip"})
    algorithm = build_algorithm(config)
    draws, m = 3000, config.data.clients
    joined = np.zeros((draws, m), dtype=bool)
    for t in range(draws):
        joined[t, algorithm.sample_cohort()[0]] = True
    freq = joined.mean(0)
    assert np.all(np.abs(freq - 0.3) < 5 * math.sqrt(0.3 * 0.7 / draws))
    both = (joined[:, 0] & joined[:, 1]).mean()  # independence of two clients
    assert abs(both - 0.09) < 5 * math.sqrt(0.09 * 0.91 / draws)


def test_a_secure_run_resumes(tmp_path, tiny_config_dict):
    """An interrupted secure run continues from its checkpoint to the planned rounds."""
    config = _config(tiny_config_dict, True, run={"max_rounds": 2})
    first = Experiment.create(config, tmp_path / "run").run()
    assert first.summary["rounds_completed"] == 2 and "os.urandom" in first.card["randomness"]
    saved = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["privacy"]["secure"] is True
    resumed = Experiment.resume(tmp_path / "run", ["run.max_rounds=null"])
    assert resumed.resumed_from == 2 and resumed.resume_notes == []
    assert resumed.algorithm.secure
    result = resumed.run()
    assert result.stop_reason == "rounds" and result.summary["rounds_completed"] == 3
    assert [m["round"] for m in RunDirectory(tmp_path / "run").read_metrics()] == [1, 2, 3]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| randomness | secure: the noise, the local batches and the cohorts" in report
    assert "| seed | 3 (partition, initialisation; cohorts, batches, noise and dropout from " \
           "os.urandom) |" in report


@pytest.mark.parametrize("secure", [False, True])
def test_rounds_run_again_after_a_lost_checkpoint_are_noted_in_secure_mode(
        tmp_path, tiny_config_dict, secure):
    config = _config(tiny_config_dict, secure, run={"checkpoint_every": 2, "keep_checkpoints": 2})
    Experiment.create(config, tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    assert [r for r, _ in directory.list_checkpoints()] == [2, 3]
    directory.checkpoint(3).unlink()  # the process died after round 3, before its checkpoint
    directory.checkpoint_record(3).unlink()
    resumed = Experiment.resume(tmp_path / "run")
    assert resumed.resumed_from == 2
    if secure:
        assert len(resumed.resume_notes) == 1
        assert resumed.resume_notes[0].startswith("rounds 3..3 were logged after the last "
                                                  "checkpoint")
        assert "released twice and is counted twice" in resumed.resume_notes[0]
    else:  # a seeded run recomputes the same round bit for bit: nothing is released twice
        assert resumed.resume_notes == []
    assert resumed.run().summary["rounds_completed"] == 3


def test_a_checkpoint_written_with_the_old_secure_noise_key_resumes(tmp_path, tiny_config_dict):
    """A config.yaml with the old key privacy.secure_noise (renamed privacy.secure) still
    resumes: checkpoints record the digest of the validated configuration, not of its text."""
    config = _config(tiny_config_dict, False, run={"max_rounds": 1})
    Experiment.create(config, tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    raw = yaml.safe_load(directory.config.read_text())
    raw["privacy"]["secure_noise"] = raw["privacy"].pop("secure")
    directory.config.write_text(yaml.safe_dump(raw, sort_keys=False))
    resumed = Experiment.resume(tmp_path / "run", ["run.max_rounds=null"])
    assert resumed.resumed_from == 1 and not resumed.algorithm.secure
    assert resumed.run().summary["rounds_completed"] == 3
