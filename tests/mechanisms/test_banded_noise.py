"""Streaming correlated noise: equals C^{-1} Z to 1e-12, covariance sigma^2 (C^T C)^{-1}."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.mechanisms.banded_noise import BandedNoise, band_coefficients
from privfl.mechanisms.factorization import (
    optimise_factorization,
    sqrt_prefix_coefficients,
    toeplitz_lower,
    workload,
)


def _banded(steps: int, band: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(steps, steps))
    c[np.diag_indices(steps)] = 1.0 + rng.random(steps)
    i, j = np.indices(c.shape)
    return np.where((i >= j) & (i - j < band), c, 0.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(0, 10_000))
def test_streaming_equals_inverse_times_z(steps: int, band: int, seed: int) -> None:
    band = min(band, steps)
    c = _banded(steps, band, seed)
    z = np.random.default_rng(seed + 1).normal(size=(steps, 3))
    gen = BandedNoise(band_coefficients(c, band), 3, 1.0)
    streamed = np.array([gen.step(row) for row in z])
    expected = np.linalg.solve(c, z)
    assert np.abs(streamed - expected).max() < 1e-12 * max(1.0, np.abs(expected).max())


def test_toeplitz_coefficients_stream_forever() -> None:
    steps, band = 40, 5
    coeffs = sqrt_prefix_coefficients(band)
    z = np.random.default_rng(0).normal(size=(steps, 2))
    gen = BandedNoise(coeffs, 2, 1.0)
    streamed = np.array([gen.step(row) for row in z])
    assert gen.horizon is None
    np.testing.assert_allclose(
        streamed, np.linalg.solve(toeplitz_lower(coeffs, steps), z), atol=1e-12
    )


def test_covariance_is_inverse_gram() -> None:
    steps, band, reps, sigma = 8, 3, 100_000, 1.5
    c = optimise_factorization(workload(steps), band=band, iterations=30)
    gen = BandedNoise(band_coefficients(c, band), reps, sigma, rng=np.random.default_rng(7))
    w = np.array([gen.step() for _ in range(steps)])
    empirical = w @ w.T / reps
    expected = sigma**2 * np.linalg.inv(c.T @ c)
    assert np.abs(empirical - expected).max() < 0.03 * np.abs(expected).max()


def test_memory_is_the_band() -> None:
    gen = BandedNoise(np.ones(4), 5, 1.0, rng=np.random.default_rng(0))
    for _ in range(50):
        gen.step()
    assert gen._history.shape == (3, 5)


def test_validation() -> None:
    c = np.tril(np.ones((4, 4)))
    with pytest.raises(ValueError, match="outside the lower band"):
        band_coefficients(c, 2)
    with pytest.raises(ValueError, match="zero"):
        BandedNoise(np.array([0.0, 1.0]), 2, 1.0)
    gen = BandedNoise(band_coefficients(c, 4), 2, 1.0)
    with pytest.raises(ValueError, match="shape"):
        gen.step(np.zeros(3))
    for _ in range(4):
        gen.step()
    with pytest.raises(ValueError, match="cover only 4 steps"):
        gen.step()


def test_noisy_gradients_give_the_factorized_release() -> None:
    # adding w_t to round t's gradient sum releases A (x + W) = B (C x + Z), B = A C^{-1}
    steps, band = 10, 3
    c = _banded(steps, band, 5)
    a = workload(steps, momentum=0.5)
    rng = np.random.default_rng(9)
    x, z = rng.normal(size=(steps, 4)), rng.normal(size=(steps, 4))
    gen = BandedNoise(band_coefficients(c, band), 4, 1.0)
    noisy = np.array([x[t] + gen.step(z[t]) for t in range(steps)])
    b = a @ np.linalg.inv(c)
    assert np.abs(a @ noisy - b @ (c @ x + z)).max() < 1e-10
