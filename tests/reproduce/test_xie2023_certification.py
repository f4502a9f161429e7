"""Xie et al. 2023's certified-robustness shapes (privfl.reproduce.xie2023_certification): the
summaries of a certificate against the spec's worked example (seed 2, Section 7.5), the shape
classifier (hypothesis), the bootstrap, the backend choice and the paper-scale plan. The quick
rows themselves run in the slow suite (tests/reproduce/test_reproduce_quick_certification.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.reproduce import xie2023_certification as xc
from privfl.reproduce.rows import Reproduction

#: the spec's worked example: mean scores, labels, epsilon 0.6298, delta 0.0029
MEAN = np.array([[0.97, 0.03], [0.80, 0.20], [0.40, 0.60], [0.55, 0.45], [0.10, 0.90]])
LABELS = np.array([0, 0, 0, 0, 1])
K = [2.679395, 1.090842, 0.319728, 0.158260, 1.721473]  # point 3 is mispredicted


def test_summaries_of_the_spec_s_worked_example():
    largest, area = xc.k_summary(MEAN, 1000, LABELS, 0.6298, 0.0029, "estimate")
    assert largest == pytest.approx(K[0], abs=1e-6)
    assert area == pytest.approx((K[0] + K[1] + K[3] + K[4]) / 5, abs=1e-6)
    # calibrated bounds at 99 % shrink both
    low_largest, low_area = xc.k_summary(MEAN, 1000, LABELS, 0.6298, 0.0029, "hoeffding")
    assert 0 < low_largest < largest and 0 < low_area < area


def test_nothing_certified_gives_zero():
    wrong = np.array([1, 1, 0, 1, 0])  # the predictions are 0, 0, 1, 0, 1: all wrong
    assert xc.k_summary(MEAN, 10, wrong, 0.6298, 0.0029, "estimate") == (0.0, 0.0)


def _sweep(probabilities, epsilons):
    return xc.Sweep(tuple(epsilons), tuple(f"p{i}" for i in range(len(epsilons))),
                    tuple(probabilities), LABELS, 0.0029, "user")


def test_bootstrap_of_identical_models_is_the_curve_itself():
    same = np.repeat(MEAN[None], 7, axis=0)  # 7 identical models
    sweep = _sweep([same, same], [0.6298, 1.0])
    curve = xc.curve(sweep, "estimate")
    assert curve[0] == pytest.approx(xc.k_summary(MEAN, 7, LABELS, 0.6298, 0.0029,
                                                  "estimate"))
    boot = xc.bootstrap(sweep, "estimate", resamples=5)
    assert boot.shape == (5, 2, 2) and np.allclose(boot, curve[None])


def test_bootstrap_is_reproducible_and_resamples():
    rng = np.random.default_rng(1)
    p = rng.dirichlet([1.0, 1.0], size=(20, 5))  # 20 models of 5 points
    sweep = _sweep([p, p, p], [0.3, 0.6, 1.0])
    first = xc.bootstrap(sweep, "estimate", resamples=8, seed=3)
    assert np.array_equal(first, xc.bootstrap(sweep, "estimate", resamples=8, seed=3))
    assert not np.allclose(first[0], first[1])  # resamples differ


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 20.0), min_size=3, max_size=10), st.randoms())
def test_shape_reads_where_the_maximum_is(values, rnd):
    eps = list(range(1, len(values) + 1))
    found = xc.shape(eps, values)
    interior = max(values) > values[0] and max(values) > values[-1]
    assert (found == xc.PEAK) == interior
    if not interior:
        assert found == (xc.AT_SMALLEST if values[0] >= values[-1] else xc.AT_LARGEST)
    order = list(range(len(values)))
    rnd.shuffle(order)  # the order of the points does not matter, only their epsilons
    assert xc.shape([eps[i] for i in order], [values[i] for i in order]) == found
    assert xc.peak_epsilon(eps, values) == min(e for e, v in zip(eps, values, strict=True)
                                               if v == max(values))


def test_shape_refuses_mismatched_or_short_inputs():
    with pytest.raises(ValueError, match="must be equal, with at least 3 points"):
        xc.shape([0.1, 0.2], [1.0, 2.0])
    with pytest.raises(ValueError, match="must be equal"):
        xc.shape([0.1, 0.2, 0.3], [1.0, 2.0])


def test_replicas_train_locally_without_ray(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert xc.replica_backend() is None


def test_the_quick_configs_are_the_paper_s_privacy_settings():
    from privfl.config import config_from_dict
    from privfl.config.algorithms import register_builtin_algorithms

    register_builtin_algorithms()
    user = config_from_dict(xc.user_config(1.8, "per-layer"))
    assert (user.federated.client_rate, user.federated.rounds, user.privacy.delta) == (
        0.1, 3, 0.0029)
    assert user.federated.clipping == "per-layer" and user.privacy.noise_multiplier == 1.8
    ins = config_from_dict(xc.instance_config(5.0))
    assert ins.training.local_steps * ins.federated.rounds == xc.INSTANCE_STEPS
    assert ins.training.batch_size / ins.data.train_size == xc.INSTANCE_RATE


def test_paper_scale_certification_is_planned_with_time_data_and_fallback():
    rep = Reproduction("xie2023", "t", "paper")
    xc.paper_plan_rows(rep)
    assert len(rep.rows) == len(rep.plan) == len(xc.PAPER_FIGURES)
    for row, line in zip(rep.rows, rep.plan, strict=True):
        assert row.verdict == "differs" and row.privfl is None and row.kind == "training"
        assert row.reason.startswith("not run: planned") and line in row.reason
        assert " h on 2 CPU cores" in line and "data: " in line and "fallback: " in line


def test_a_claimed_shape_matches_only_when_the_resamples_resolve_it():
    claim = "i.i.d. > Dir(1) > Dir(0.5)"
    other = "Dir(1) > i.i.d. > Dir(0.5)"
    resolved = [claim] * 95 + [other] * 5
    row = xc.compare_shape("ordering", "Figure 3", claim, claim, resolved, reason="quick scale")
    assert row.verdict == "match" and "95 % of 100 bootstrap resamples" in row.reason
    thin = [claim] * 27 + [other] * 73  # the models give the claim, their resamples rarely
    row = xc.compare_shape("ordering", "Figure 3", claim, claim, thin, reason="quick scale")
    assert row.verdict == "differs" and "not resolved" in row.reason and "27 %" in row.reason
    row = xc.compare_shape("ordering", "Figure 3", claim, other, resolved, reason="quick scale")
    assert row.verdict == "differs" and row.privfl == other
    assert xc.compare_shape("o", "s", claim, claim, [], reason="r").verdict == "differs"
