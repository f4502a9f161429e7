"""Aggregation of client updates and the server-side DP wrapper (privfl.fl.aggregation)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.fl.aggregation import (
    AdaptiveClipping,
    MeanAggregation,
    ServerSideDp,
    UpdateClipping,
    effective_noise_multiplier,
    layer_norms,
    update_noise_multiplier,
)
from privfl.mechanisms.noise import gaussian_noise


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _rows(norms, d=4, seed=0):
    """Rows with the given L2 norms in random directions."""
    g = _gen(seed)
    x = torch.randn(len(norms), d, generator=g, dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True) * torch.as_tensor(norms, dtype=torch.float64)[:, None]


# ---------------------------------------------------------------- Andrew et al.'s noise formula
def test_effective_noise_golden_values():
    # z = (z_u^-2 + (2 sigma_b)^-2)^(-1/2)
    assert effective_noise_multiplier(1.0, 0.5) == pytest.approx(2**-0.5, rel=1e-15)
    assert effective_noise_multiplier(3.0, 2.0) == pytest.approx((1 / 9 + 1 / 16) ** -0.5)
    # the demo: z = 1, sigma_b = E[m]/20 = 30/20 = 1.5 -> z_u = (1 - 1/9)^(-1/2) = 1.0606602
    assert update_noise_multiplier(1.0, 1.5) == pytest.approx(1.0606601717798212, rel=1e-14)


@settings(max_examples=200, deadline=None)
@given(z=st.floats(0.01, 50.0), ratio=st.floats(0.51, 1e4))
def test_update_noise_inverts_effective_noise(z, ratio):
    sigma_b = ratio * z  # 2 sigma_b > z
    z_u = update_noise_multiplier(z, sigma_b)
    assert z_u > z  # the update noise is always larger than the effective one
    assert effective_noise_multiplier(z_u, sigma_b) == pytest.approx(z, rel=1e-9)


def test_the_pair_is_one_gaussian_with_the_effective_z():
    """Sensitivities (S, 1/2) of (update sum, centred count) under noise (z_u S, sigma_b):
    the Mahalanobis length of the shift is 1/z (Andrew et al. 2021 Theorem 1)."""
    z_u, sigma_b, s = 1.3, 0.9, 2.5
    shift = math.hypot(s / (z_u * s), 0.5 / sigma_b)
    assert 1.0 / shift == pytest.approx(effective_noise_multiplier(z_u, sigma_b), rel=1e-14)


@pytest.mark.parametrize("z,sigma_b", [(1.0, 0.5), (3.0, 1.4), (2.0, 0.1)])
def test_impossible_effective_noise_is_refused(z, sigma_b):
    with pytest.raises(ValueError, match="2 \\* count_noise"):
        update_noise_multiplier(z, sigma_b)


# ------------------------------------------------------------------------------- aggregation
def test_unweighted_and_capped_weighted_mean():
    updates = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    cohort = np.array([0, 2, 3])
    mean = MeanAggregation(4)
    assert torch.equal(mean.weighted_sum(updates, cohort), torch.tensor([4.0, 5.0]))
    assert torch.allclose(mean.mean(updates, cohort), torch.tensor([4 / 3, 5 / 3]))
    capped = MeanAggregation.capped([10, 50, 20, 200], cap=40)  # weights 0.25, 1, 0.5, 1
    assert capped.max_weight == 1.0 and capped.mean_weight == pytest.approx(2.75 / 4)
    # cohort weights 0.25, 0.5, 1: 0.25 [1, 0] + 0.5 [0, 2] + [3, 3]
    assert torch.allclose(capped.weighted_sum(updates, cohort), torch.tensor([3.25, 4.0]))
    assert torch.allclose(capped.mean(updates, cohort), torch.tensor([3.25, 4.0]) / 1.75)


def test_aggregation_validation():
    with pytest.raises(ValueError, match="weights contains 1.5"):
        MeanAggregation(2, [0.5, 1.5])
    with pytest.raises(ValueError, match="shape"):
        MeanAggregation(3, [0.5, 1.0])
    with pytest.raises(ValueError, match="cohort has 1 clients: updates has 2 rows"):
        MeanAggregation(3).weighted_sum(torch.zeros(2, 3), np.array([0]))
    with pytest.raises(ValueError, match="outside"):
        MeanAggregation(3).weighted_sum(torch.zeros(1, 3), np.array([3]))
    with pytest.raises(ValueError, match="empty"):
        MeanAggregation(3).mean(torch.zeros(0, 3), np.array([], dtype=np.int64))


# ---------------------------------------------------------------------------------- clipping
def test_flat_clipping():
    rows = _rows([0.5, 2.0, 4.0])
    out = UpdateClipping("flat").clip(rows, 1.0)
    assert out.clip_norm == 1.0
    assert torch.allclose(out.updates.norm(dim=1), torch.tensor([0.5, 1.0, 1.0],
                                                                dtype=torch.float64))
    assert torch.equal(out.updates[0], rows[0])  # unclipped rows unchanged
    assert out.unclipped.tolist() == [True, False, False]
    assert torch.allclose(out.norms, torch.tensor([0.5, 2.0, 4.0], dtype=torch.float64))


@pytest.mark.parametrize("sizes", [(3,), (2, 5), (1, 1, 7, 4)])
def test_per_layer_equal_split_sums_to_s_squared(sizes):
    s = 1.7
    clipping = UpdateClipping("per-layer", sizes)
    rows = torch.randn(6, sum(sizes), generator=_gen(1), dtype=torch.float64) * 3
    out = clipping.clip(rows, s)
    assert float((out.thresholds**2).sum()) == pytest.approx(s * s, rel=1e-12)
    assert torch.allclose(out.thresholds, torch.full((len(sizes),), s / math.sqrt(len(sizes)),
                                                     dtype=torch.float64))
    norms = layer_norms(out.updates, sizes)
    assert (norms <= out.thresholds * (1 + 1e-12)).all()
    assert out.clip_norm == pytest.approx(s, rel=1e-12)


def test_per_layer_median_thresholds():
    sizes = (2, 3)
    # layer norms per client: layer 0 -> 1, 2, 3 ; layer 1 -> 4, 8, 12 (medians 2 and 8)
    rows = torch.zeros(3, 5, dtype=torch.float64)
    rows[:, 0] = torch.tensor([1.0, 2.0, 3.0])
    rows[:, 2] = torch.tensor([4.0, 8.0, 12.0])
    big = UpdateClipping("per-layer-median", sizes).clip(rows, 100.0)
    assert big.thresholds.tolist() == [2.0, 8.0]  # below the cap: the medians themselves
    capped = UpdateClipping("per-layer-median", sizes).clip(rows, 1.0)
    assert float((capped.thresholds**2).sum()) == pytest.approx(1.0, rel=1e-12)
    assert capped.thresholds[1] / capped.thresholds[0] == pytest.approx(4.0)  # same split
    assert layer_norms(capped.updates, sizes).max() <= 8.0 / math.hypot(2, 8) + 1e-12


def test_flat_median_threshold_is_capped_median():
    rows = _rows([1.0, 2.0, 3.0, 10.0])
    assert UpdateClipping("flat-median").clip(rows, 100.0).clip_norm == pytest.approx(2.5)
    assert UpdateClipping("flat-median").clip(rows, 2.0).clip_norm == pytest.approx(2.0)
    # an empty cohort falls back to the cap (flat) and to the equal split (per layer)
    empty = torch.zeros(0, 5, dtype=torch.float64)
    assert UpdateClipping("flat-median").clip(empty, 3.0).clip_norm == 3.0
    out = UpdateClipping("per-layer-median", (2, 3)).clip(empty, 3.0)
    assert out.thresholds.tolist() == pytest.approx([3 / math.sqrt(2)] * 2)


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["flat", "per-layer", "flat-median", "per-layer-median"]),
       sizes=st.lists(st.integers(1, 6), min_size=1, max_size=4),
       rows=st.integers(1, 7), scale=st.floats(1e-3, 1e3), s=st.floats(1e-2, 10.0),
       seed=st.integers(0, 2**31))
def test_clipped_updates_never_exceed_the_sensitivity(kind, sizes, rows, scale, s, seed):
    clipping = UpdateClipping(kind, tuple(sizes))
    x = torch.randn(rows, sum(sizes), generator=_gen(seed), dtype=torch.float64) * scale
    out = clipping.clip(x, s)
    assert out.clip_norm <= s * (1 + 1e-12)
    assert (out.updates.norm(dim=1) <= out.clip_norm * (1 + 1e-9) + 1e-300).all()
    # what is reported unclipped is returned unchanged
    assert torch.equal(out.updates[out.unclipped], x[out.unclipped])


def test_clipping_validation():
    with pytest.raises(ValueError, match="clipping = 'max' is not allowed"):
        UpdateClipping("max")
    with pytest.raises(ValueError, match="layer_sizes"):
        UpdateClipping("per-layer")
    with pytest.raises(ValueError, match="layer sizes sum to 4"):
        UpdateClipping("per-layer", (2, 2)).clip(torch.zeros(1, 5), 1.0)


# ------------------------------------------------------------------------------ the DP wrapper
def _dp(num_clients=10, z=1.5, s=2.0, expected=7.5, **kwargs):
    return ServerSideDp(MeanAggregation(num_clients), UpdateClipping("flat"),
                        noise_multiplier=z, clip_norm=s, expected_cohort=expected, **kwargs)


def test_dp_step_is_clipped_sum_plus_noise_over_expected_size():
    """Exactly (sum_k clip(u_k) + N(0, (z S)^2 I)) / E[m], whatever the realised cohort."""
    dp = _dp()
    rows = _rows([1.0, 3.0, 8.0], d=50)
    cohort = np.array([1, 4, 6])
    gen = _gen(5)
    replay = _gen(5)
    out = dp(rows, cohort, gen)
    clipped = rows * torch.tensor([1.0, 2 / 3, 2 / 8], dtype=torch.float64)[:, None]
    noise = gaussian_noise((50,), 1.5 * 2.0, generator=replay, dtype=torch.float64)
    assert torch.allclose(out.step, (clipped.sum(0) + noise) / 7.5, rtol=0, atol=1e-12)
    assert out.expected_weight == 7.5 and out.noise_std == 3.0 and out.clip_norm == 2.0
    assert out.clipped_fraction == pytest.approx(2 / 3) and out.mean_norm == pytest.approx(4.0)
    assert out.unclipped_estimate is None and out.next_clip_norm == 2.0


@pytest.mark.parametrize("cohort_size", [0, 3, 12])
def test_dp_noise_std_and_denominator_statistically(cohort_size):
    """std of the step = z S / E[m] (d = 40,000 coordinates: the sample std is within 1.5 % with
    probability > 1 - 1e-9); the signal part is divided by E[m], not by the realised size."""
    d, z, s, expected = 40_000, 1.5, 2.0, 7.5
    dp = _dp(num_clients=20, z=z, s=s, expected=expected)
    direction = torch.zeros(d, dtype=torch.float64)
    direction[0] = 1.0
    rows = direction.repeat(cohort_size, 1) * 0.5  # unclipped, all on coordinate 0
    out = dp(rows, np.arange(cohort_size), _gen(cohort_size))
    noise = out.step[1:] * expected
    assert float(noise.std()) == pytest.approx(z * s, rel=0.015)
    assert abs(float(noise.mean())) < 5 * z * s / math.sqrt(d)
    signal = float(out.step[0]) * expected
    assert signal == pytest.approx(0.5 * cohort_size, abs=6 * z * s)
    # the same noise over the realised size would be a different step: never used
    assert out.expected_weight == expected


def test_weighted_aggregation_uses_expected_weight():
    agg = MeanAggregation(4, [0.5, 1.0, 0.25, 0.25])  # mean weight 0.5
    dp = ServerSideDp(agg, UpdateClipping("flat"), noise_multiplier=1e-12, clip_norm=10.0,
                      expected_cohort=2.0)
    rows = torch.tensor([[2.0, 0.0], [0.0, 4.0]], dtype=torch.float64)
    out = dp(rows, np.array([0, 1]), _gen())
    assert out.expected_weight == 1.0
    assert torch.allclose(out.step, torch.tensor([1.0, 4.0], dtype=torch.float64), atol=1e-9)


def test_secure_noise_is_not_the_generator():
    dp = _dp(secure=True)
    rows = torch.zeros(2, 30_000, dtype=torch.float64)
    a = dp(rows, np.array([0, 1]), _gen(1)).step
    b = dp(rows, np.array([0, 1]), _gen(1)).step
    assert not torch.equal(a, b)
    assert float(a.std()) * 7.5 == pytest.approx(3.0, rel=0.02)
    assert dp(rows, np.array([0, 1]), None).step.shape == (30_000,)  # no generator needed


def test_wrapper_validation():
    class Heavy:  # a linear aggregation whose weights exceed 1
        num_clients, max_weight, mean_weight = 3, 2.0, 1.0

        def weighted_sum(self, updates, cohort):
            return 2 * updates.sum(0)

        def client_weights(self, cohort, like):
            return torch.full((len(cohort),), 2.0, dtype=like.dtype)

        def mean(self, updates, cohort):
            return updates.mean(0)

    with pytest.raises(ValueError, match="max_weight = 2.0 is out of range"):
        ServerSideDp(Heavy(), UpdateClipping(), noise_multiplier=1.0, clip_norm=1.0,
                     expected_cohort=1.0)
    with pytest.raises(ValueError, match="both set the threshold"):
        ServerSideDp(
            MeanAggregation(3), UpdateClipping("flat-median"), noise_multiplier=1.0,
            clip_norm=1.0, expected_cohort=1.0, adaptive=AdaptiveClipping(count_noise=5.0))
    with pytest.raises(ValueError, match="expected_cohort = 11.0 is out of range"):
        _dp(expected=11.0)
    with pytest.raises(ValueError, match="noise_multiplier = 2.0 is out of range for "
                                         "count_noise = 0.5"):
        _dp(z=2.0, adaptive=AdaptiveClipping(count_noise=0.5))
    with pytest.raises(ValueError, match="generator"):
        _dp()(torch.zeros(1, 3), np.array([0]), None)


# ------------------------------------------------------------------------- adaptive clipping
def test_adaptive_geometric_update():
    a = AdaptiveClipping(target_quantile=0.5, learning_rate=0.2, count_noise=1.0)
    assert a.next_clip_norm(2.0, 0.9) == pytest.approx(2.0 * math.exp(-0.2 * 0.4))
    assert a.next_clip_norm(2.0, 0.5) == 2.0
    with pytest.raises(ValueError, match="target_quantile = 1.5"):
        AdaptiveClipping(target_quantile=1.5)


def test_adaptive_noise_split_and_count_noise():
    """With adaptive clipping the update noise is z_u S, and b~ carries N(0, sigma_b^2)/E[m]."""
    z, sigma_b, expected = 1.0, 1.5, 30.0
    dp = _dp(num_clients=100, z=z, s=1.0, expected=expected,
             adaptive=AdaptiveClipping(count_noise=sigma_b))
    assert dp.update_noise == pytest.approx(update_noise_multiplier(z, sigma_b))
    estimates = []
    gen = _gen(3)
    rows = _rows([0.5] * 10 + [2.0] * 20, d=3)  # 10 of 30 unclipped at S = 1
    for _ in range(400):
        dp.clip_norm = 1.0
        estimates.append(dp(rows, np.arange(30), gen).unclipped_estimate)
    estimates = np.array(estimates)
    # b~ = (10 - 15 + N(0, 1.5^2)) / 30 + 1/2 = 1/3 + N(0, 0.05^2)
    assert estimates.mean() == pytest.approx(1 / 3, abs=4 * 0.05 / 20)
    assert estimates.std() == pytest.approx(sigma_b / expected, rel=0.15)


@pytest.mark.parametrize("gamma", [0.2, 0.5, 0.8])
def test_adaptive_clip_norm_tracks_the_target_quantile(gamma):
    """Norms ~ lognormal(0, 0.5): S_t converges to the gamma-quantile exp(0.5 Phi^-1(gamma))."""
    from scipy.stats import norm

    rng = np.random.default_rng(7)
    cohort = 200
    dp = _dp(num_clients=400, z=0.5, s=20.0, expected=cohort,
             adaptive=AdaptiveClipping(target_quantile=gamma, learning_rate=0.2,
                                       count_noise=cohort / 20))
    gen = _gen(11)
    history = []
    for t in range(300):
        rows = _rows(np.exp(0.5 * rng.standard_normal(cohort)), d=2, seed=t)
        dp(rows, np.arange(cohort), gen)
        history.append(dp.clip_norm)
    target = math.exp(0.5 * norm.ppf(gamma))
    assert np.mean(history[-100:]) == pytest.approx(target, rel=0.06)
