"""Batch samplers: fixed-size batches are exactly B distinct records, uniform; Poisson batches
have Binomial(n, q) sizes (mean, variance and a chi-square goodness-of-fit test) — from a seeded
generator and from os.urandom (SECURE_RANDOM, secure mode) alike."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

from privfl.mechanisms import (
    SECURE_RANDOM,
    fixed_size_sample,
    pad_batches,
    poisson_sample,
    sample_batch,
    secure_generator,
    secure_uniform,
)

ALPHA = 1e-6  # false-alarm probability of each statistical test


@pytest.fixture(params=["seeded", "secure"])
def source(request):
    """``source(seed)``: a seeded torch generator, or os.urandom (the seed is ignored)."""
    if request.param == "secure":
        return lambda seed: SECURE_RANDOM
    return lambda seed: torch.Generator().manual_seed(seed)


def test_fixed_size_is_exactly_b_distinct_and_uniform(source):
    gen = source(0)
    n, b, trials = 30, 7, 6000
    counts = np.zeros(n)
    for _ in range(trials):
        idx = fixed_size_sample(n, b, gen)
        assert idx.numel() == b and torch.unique(idx).numel() == b
        assert int(idx.min()) >= 0 and int(idx.max()) < n
        counts[idx.numpy()] += 1
    # every record is included with probability b/n: chi-square test of the inclusion counts
    # counts have covariance T p (1 - p) n / (n - 1) (I - 11'/n): scaled chi-square, n - 1 dof
    p = b / n
    chi2 = ((counts - trials * p) ** 2).sum() / (trials * p * (1 - p)) * (n - 1) / n
    assert chi2 < stats.chi2.ppf(1 - ALPHA, n - 1)


def test_fixed_size_pairs_are_uniform(source):
    """All C(5, 2) = 10 subsets are equally likely (not only the marginals)."""
    gen = source(1)
    trials = 5000
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(trials):
        key = tuple(fixed_size_sample(5, 2, gen).tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 10
    observed = np.array(list(counts.values()))
    assert stats.chisquare(observed).pvalue > ALPHA


def test_poisson_sizes_are_binomial(source):
    gen = source(2)
    n, q, trials = 200, 0.08, 4000
    sizes = np.array([poisson_sample(n, q, gen).numel() for _ in range(trials)])
    mean, var = n * q, n * q * (1 - q)
    # mean: normal approximation; variance: chi-square
    z = (sizes.mean() - mean) / np.sqrt(var / trials)
    assert abs(z) < stats.norm.ppf(1 - ALPHA / 2)
    chi2 = (trials - 1) * sizes.var(ddof=1) / var
    assert stats.chi2.ppf(ALPHA / 2, trials - 1) < chi2 < stats.chi2.ppf(1 - ALPHA / 2, trials - 1)
    # goodness of fit of the whole distribution on pooled bins
    edges = np.arange(6, 27)
    observed = np.array([(sizes < edges[0]).sum()]
                        + [(sizes == k).sum() for k in edges]
                        + [(sizes > edges[-1]).sum()])
    pmf = stats.binom(n, q)
    expected = np.array([pmf.cdf(edges[0] - 1)] + [pmf.pmf(k) for k in edges]
                        + [pmf.sf(edges[-1])]) * trials
    assert stats.chisquare(observed, expected).pvalue > ALPHA


def test_poisson_allows_empty_batches_and_distinct_indices(source):
    gen = source(3)
    sizes = []
    for _ in range(300):
        idx = poisson_sample(50, 0.02, gen)
        assert torch.unique(idx).numel() == idx.numel()
        sizes.append(idx.numel())
    assert 0 in sizes  # P(empty) = 0.98^50 ~ 0.36


def test_sample_batch_dispatches_and_validates():
    gen = torch.Generator().manual_seed(4)
    assert sample_batch(10, 4, "without-replacement", gen).numel() == 4
    assert sample_batch(10, 10, "poisson", gen).numel() == 10  # q = 1
    with pytest.raises(ValueError, match="sampling"):
        sample_batch(10, 4, "shuffle", gen)
    with pytest.raises(ValueError, match="batch_size = 11"):
        sample_batch(10, 11, "poisson", gen)
    with pytest.raises(ValueError, match="batch_size = 0"):
        fixed_size_sample(10, 0, gen)
    with pytest.raises(ValueError, match="rate = 1.5"):
        poisson_sample(10, 1.5, gen)
    with pytest.raises(ValueError, match="generator"):
        fixed_size_sample(10, 2, generator=np.random.default_rng(0))


def test_same_seed_same_batches_and_secure_generator():
    a = [fixed_size_sample(100, 5, torch.Generator().manual_seed(9)) for _ in range(2)]
    assert torch.equal(a[0], a[1])
    g1, g2 = secure_generator(), secure_generator()
    assert g1.initial_seed() != g2.initial_seed()


def test_pad_batches_masks():
    index, mask = pad_batches([torch.tensor([3, 1]), torch.tensor([], dtype=torch.int64),
                               torch.tensor([0, 2, 4])], fill=0)
    assert index.shape == (3, 3) and mask.shape == (3, 3)
    assert mask.sum(1).tolist() == [2, 0, 3]
    assert index[0, :2].tolist() == [3, 1] and index[1].tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="size = 2"):
        pad_batches([torch.tensor([0, 1, 2])], size=2)
    with pytest.raises(ValueError, match="batches"):
        pad_batches([])


def test_secure_uniforms_are_53_bit_and_fresh():
    u = secure_uniform(100_000)
    assert u.dtype == np.float64 and u.shape == (100_000,)
    assert (u >= 0).all() and (u < 1).all()
    assert np.array_equal(u * 2.0**53, np.floor(u * 2.0**53))  # k / 2^53, k an integer
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    assert not np.array_equal(secure_uniform(8), secure_uniform(8))
    assert secure_uniform(0).shape == (0,)
    assert SECURE_RANDOM.random(5).shape == (5,)
    keys = SECURE_RANDOM.rand(7)
    assert keys.dtype == torch.float64 and keys.shape == (7,)


def test_secure_batches_are_not_reproducible():
    a = [fixed_size_sample(1000, 10, SECURE_RANDOM) for _ in range(2)]
    assert not torch.equal(a[0], a[1])  # equal with probability 1 / C(1000, 10)
    assert sample_batch(10, 4, "without-replacement", SECURE_RANDOM).numel() == 4
