"""Xie et al. 2023's Figures 3, 4, 7 and 10 at quick scale (privfl.reproduce.xie2023_heterogeneity
and xie2023_inefficacy): the pure judgements on synthetic arrays (orderings with ties, the paired
bootstrap, the slope and the gap change, Theorem 6's bound at k = 0, Corollary 7's monotonicity)
and the configurations. The quick rows themselves run in the slow suite
(tests/reproduce/test_reproduce_quick_certification.py)."""

from __future__ import annotations

import numpy as np
import pytest

from privfl.config import config_from_dict
from privfl.reproduce import xie2023_heterogeneity as xh
from privfl.reproduce import xie2023_inefficacy as xi


def test_ordering_names_the_largest_first_and_marks_ties():
    assert xh.ordering(["a", "b", "c"], [1.0, 3.0, 2.0]) == "b > c > a"
    assert xh.ordering(["a", "b", "c"], [2.0, 2.0, 1.0]) == "a = b > c"
    with pytest.raises(ValueError, match="lengths"):
        xh.ordering(["a"], [1.0, 2.0])


def test_paired_means_resample_the_same_models_in_every_set():
    costs = np.vstack([np.arange(6.0), np.arange(6.0) + 10.0])  # set 2 = set 1 + 10, paired
    boot = xi.paired_means(costs, resamples=40, seed=3)
    assert boot.shape == (40, 2)
    np.testing.assert_allclose(boot[:, 1] - boot[:, 0], 10.0)  # the pairing is kept
    assert np.ptp(boot[:, 0]) > 0  # and the models are resampled
    np.testing.assert_array_equal(boot, xi.paired_means(costs, resamples=40, seed=3))
    with pytest.raises(ValueError, match="sets, models"):
        xi.paired_means(np.arange(3.0))


def test_slope_and_gap_change_on_synthetic_curves():
    ks = [0, 1, 2, 3, 4]
    falling = np.array([4.0, 3.5, 3.0, 2.5, 2.0])
    assert xi.slope(ks, falling) == pytest.approx(-0.5)
    assert xi.slope(ks, np.vstack([falling, falling[::-1]])) == pytest.approx([-0.5, 0.5])
    lower = np.array([4.0, 3.4, 2.0, 1.0, 0.5])  # tight at k = 1 (gap 0.1), loose at 4 (1.5)
    assert xi.gap_change(falling, lower) == pytest.approx(1.5 - 0.1)


def test_theorem6_lower_bound_is_j_at_k0_and_falls_with_k():
    bounds = xi.lower_bounds(np.array([4.0, 2.0]), 0.4344, 0.0029, [0, 1, 4])
    assert bounds.shape == (2, 3)
    np.testing.assert_allclose(bounds[:, 0], [4.0, 2.0])
    assert np.all(np.diff(bounds, axis=1) < 0)
    assert bounds[0, 1] == pytest.approx(np.exp(-0.4344) * 4.0 - (1 - np.exp(-0.4344))
                                         / np.expm1(0.4344) * 0.0029 * 5.0)


def test_corollary7_grows_with_tau_and_falls_with_epsilon():
    grid = xi.min_attackers_grid([4.2, 4.3, 4.4], [0.3375, 0.4344, 0.6078], 0.0029)
    assert grid.shape == (3, len(xi.TAUS))
    np.testing.assert_allclose(grid[:, 0], 0.0)  # tau = 1: nothing to reach
    assert xi.monotone(grid, 1, increasing=True)
    assert xi.monotone(grid[:, 1:], 0, increasing=False)
    # pure DP limit: ln(tau) / epsilon
    pure = xi.min_attackers_grid([4.0], [0.5], 0.0, taus=[2.0])
    assert pure[0, 0] == pytest.approx(np.log(2.0) / 0.5)
    assert not xi.monotone(np.array([1.0, 1.0, 2.0]), 0, increasing=True)


def test_the_attack_and_dirichlet_configs_validate():
    from privfl.reproduce.xie2023_certification import user_config

    raw = xi.attack_config(user_config(2.5), "backdoor", 3, fraction=0.5, rounds=5)
    config = config_from_dict(raw)
    assert (config.attack.kind, config.attack.attackers, config.attack.fraction,
            config.federated.rounds) == ("backdoor", 3, 0.5, 5)
    clean = config_from_dict(xi.attack_config(user_config(2.5), None, rounds=4))
    assert not clean.attack.active and clean.federated.rounds == 4
    split = config_from_dict(xh.split_config(1.8, 0.5))
    data = split.data
    assert (data.partition, data.beta, data.clients, data.train_size) == (
        "dirichlet-classes", 0.5, 100, None)
    iid = config_from_dict(xh.split_config(1.8, None))
    assert (iid.data.partition, iid.data.train_size) == ("iid", 8)
    for config in (split, iid):  # every split trained alike
        assert (config.training.batch_size, config.training.local_steps) == (xh.BATCH, xh.STEPS)
