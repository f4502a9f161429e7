"""Gaussian noise (seeded and secure) has the right moments and scale; flat clipping."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privfl.mechanisms import (
    add_gaussian_noise,
    clip_and_sum,
    clip_factors,
    gaussian_noise,
    per_example_norms,
    secure_standard_normal,
    standard_normal_,
)

ALPHA = 1e-6


def assert_normal(sample: np.ndarray, std: float) -> None:
    """Mean 0 (z-test), variance std^2 (chi-square), and a KS test against N(0, std^2)."""
    n = sample.size
    z = sample.mean() / (std / math.sqrt(n))
    assert abs(z) < stats.norm.ppf(1 - ALPHA / 2), f"mean {sample.mean()}"
    chi2 = (sample**2).sum() / std**2  # known mean 0: chi-square with n dof
    assert stats.chi2.ppf(ALPHA / 2, n) < chi2 < stats.chi2.ppf(1 - ALPHA / 2, n), (
        f"std {sample.std()} vs {std}"
    )
    assert stats.kstest(sample / std, "norm").pvalue > ALPHA


def test_seeded_noise_moments_and_reproducibility():
    a = gaussian_noise((200_000,), 2.5, generator=torch.Generator().manual_seed(0))
    b = gaussian_noise((200_000,), 2.5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a, b)
    assert_normal(a.double().numpy(), 2.5)
    assert torch.count_nonzero(gaussian_noise((10,), 0.0)) == 0


def test_secure_noise_moments():
    sample = secure_standard_normal(200_001, dtype=torch.float64).numpy()
    assert sample.size == 200_001
    assert_normal(sample, 1.0)
    # fourth moment (kurtosis 3) and independence of consecutive draws (Box–Muller pairs)
    assert abs((sample**4).mean() - 3.0) < 0.1
    assert abs(np.corrcoef(sample[:-1], sample[1:])[0, 1]) < 0.015


def assert_independent_at_lag(sample: np.ndarray, lag: int) -> None:
    """``x[i]`` and ``x[i + lag]`` are independent N(0, 1): ``d = x[i] - x[i + lag]`` has
    variance 2 and the pair correlation 0. With ``m = n - lag`` pairs the sample variance of
    ``d`` (known mean 0) has standard error ``2 sqrt(2 / m)`` and the correlation ``1 / sqrt(m)``;
    both are allowed 6 standard errors (a false failure ~2e-9 per check). A source whose
    second half repeats its first gives variance 0 and correlation 1 at the aligned lag."""
    left, right = sample[:-lag], sample[lag:]
    m = left.size
    diff_var = float(((left - right) ** 2).mean())
    assert abs(diff_var - 2.0) < 6 * 2 * math.sqrt(2 / m), f"lag {lag}: var(d) {diff_var}"
    corr = float(np.corrcoef(left, right)[0, 1])
    assert abs(corr) < 6 / math.sqrt(m), f"lag {lag}: correlation {corr}"


@pytest.mark.parametrize("count", [200_000, 200_001])
@pytest.mark.parametrize("secure", [False, True], ids=["seeded", "secure"])
def test_noise_halves_are_independent_when_aligned(count, secure):
    """Box–Muller turns a pair of uniforms into two normals, written ``n/2`` positions apart
    (the secure source rounds an odd count up to ``2 ceil(n/2)``, so its pairs are
    ``ceil(n/2)`` apart): coordinate ``i + n/2`` must not carry the noise of coordinate ``i``.
    Both aligned lags, ``floor(n/2)`` and ``ceil(n/2)``, for odd and even counts."""
    out = torch.empty(count, dtype=torch.float64)
    standard_normal_(out, torch.Generator().manual_seed(7), secure=secure)
    sample = out.numpy()
    for lag in sorted({count // 2, (count + 1) // 2}):
        assert_independent_at_lag(sample, lag)


def test_secure_noise_is_not_reproducible_and_fills_in_place():
    a, b = secure_standard_normal(1000), secure_standard_normal(1000)
    assert not torch.equal(a, b) and a.dtype == torch.float32
    out = torch.zeros(3, 5)
    standard_normal_(out, secure=True)
    assert torch.count_nonzero(out) == 15
    with pytest.raises(ValueError, match="out"):
        standard_normal_(torch.zeros(3, dtype=torch.int64))


def test_add_gaussian_noise_divides_by_expected_batch_size():
    summed = torch.full((100_000,), 4.0, dtype=torch.float64)
    noisy = add_gaussian_noise(
        summed, clip_norm=0.5, noise_multiplier=3.0, expected_batch_size=8,
        generator=torch.Generator().manual_seed(3),
    )
    # (sum + N(0, (z C)^2)) / B  ->  noise part has std z C / B
    assert_normal((noisy * 8 - 4.0).numpy(), 1.5)
    out = add_gaussian_noise({"w": torch.zeros(3)}, clip_norm=1.0, noise_multiplier=1.0,
                             expected_batch_size=2)
    assert set(out) == {"w"}
    with pytest.raises(ValueError, match="expected_batch_size = 0"):
        add_gaussian_noise(summed, clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=0)
    with pytest.raises(ValueError, match="noise_multiplier = -1"):
        add_gaussian_noise(summed, clip_norm=1.0, noise_multiplier=-1, expected_batch_size=1)
    with pytest.raises(ValueError, match="clip_norm = 0"):
        add_gaussian_noise(summed, clip_norm=0, noise_multiplier=1.0, expected_batch_size=1)


def test_clipping_is_flat_over_all_parameters():
    torch.manual_seed(0)
    grads = {"w": torch.randn(6, 3, 4), "b": torch.randn(6, 3)}
    norms = per_example_norms(grads)
    flat = torch.cat([grads["w"].reshape(6, -1), grads["b"]], 1)
    torch.testing.assert_close(norms, flat.norm(dim=1))
    sums, norms2 = clip_and_sum(grads, 1.0)
    factors = torch.clamp(1.0 / norms, max=1.0)
    torch.testing.assert_close(sums["w"], (grads["w"] * factors[:, None, None]).sum(0))
    clipped = flat * factors[:, None]
    assert (clipped.norm(dim=1) <= 1.0 + 1e-6).all()
    # a mask drops examples; zero gradients get factor 1 (and contribute 0)
    mask = torch.tensor([1, 1, 0, 1, 0, 1], dtype=torch.bool)
    sums_m, _ = clip_and_sum(grads, 1.0, mask)
    torch.testing.assert_close(sums_m["b"], (grads["b"] * (factors * mask)[:, None]).sum(0))
    assert clip_factors(torch.zeros(2), 1.0).tolist() == [1.0, 1.0]
    assert clip_factors(torch.tensor([0.5, 4.0]), 2.0).tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match="clip_norm = -1"):
        clip_factors(norms, -1.0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_noise_is_never_drawn_in_a_reduced_precision(dtype):
    from privfl.mechanisms.noise import gaussian_noise, secure_standard_normal, standard_normal_

    for call in (lambda: gaussian_noise((3,), 1.0, dtype=dtype),
                 lambda: gaussian_noise((3,), 1.0, dtype=dtype, secure=True),
                 lambda: standard_normal_(torch.empty(3, dtype=dtype)),
                 lambda: secure_standard_normal(3, dtype=dtype)):
        with pytest.raises(ValueError, match=f"{dtype} is not allowed for Gaussian noise"):
            call()
