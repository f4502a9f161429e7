"""The leakage draws scored in the attacker's projection (privfl.distortion.draws) against the
draws built in d dimensions: the same numbers for record sampling, the same law for Gaussian
distortion, and the built draws for the mask."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from privfl.distortion.draws import diagonal_gaussian_loglik, protected_loglik
from privfl.distortion.mechanisms import (
    GaussianDistortion,
    PoissonRecordSampling,
    RandomMask,
    sampled_mean_steps,
)

D, M, J, R = 60, 12, 4, 400


def _client(seed=0):
    g = torch.Generator().manual_seed(seed)
    grads = torch.randn(M, D, generator=g, dtype=torch.float64)
    w_prev = torch.randn(D, generator=g, dtype=torch.float64)
    masks = PoissonRecordSampling(0.5).masks(R, M, g)
    samples = w_prev + sampled_mean_steps(grads, masks, 0.1)
    centres = w_prev - 0.1 * grads.mean(0) + 0.01 * torch.randn(J, D, generator=g,
                                                                 dtype=torch.float64)
    variances = 0.001 + torch.rand(D, generator=g, dtype=torch.float64) * 0.01
    client = SimpleNamespace(samples=samples, centres=centres, size=M, w_prev=w_prev,
                             grads=grads, lr=0.1)
    return client, SimpleNamespace(variances=variances, ignore_zeros=False)


def test_sampling_in_the_projection_equals_scoring_the_built_draws():
    client, kernel = _client()
    mechanism = PoissonRecordSampling(0.3)
    projected, head = protected_loglik(client, mechanism, kernel,
                                       torch.Generator().manual_seed(5), 10)
    masks = mechanism.masks(R, M, torch.Generator().manual_seed(5))
    built = client.w_prev + sampled_mean_steps(client.grads, masks, client.lr)
    direct = diagonal_gaussian_loglik(built, client.centres, kernel.variances)
    assert projected == pytest.approx(direct, rel=1e-9, abs=1e-6)
    assert torch.equal(head, built[:10])


def test_gaussian_head_is_built_and_the_tail_has_the_law_of_the_built_draws():
    client, kernel = _client()
    mechanism = GaussianDistortion(0.05)
    loglik, head = protected_loglik(client, mechanism, kernel, torch.Generator().manual_seed(1),
                                    50)
    assert loglik.shape == (R, J) and head.shape == (50, D)
    direct = diagonal_gaussian_loglik(head, client.centres, kernel.variances)
    assert loglik[:50] == pytest.approx(direct, rel=1e-12)
    # tail - score of the unprotected draw = sigma Z A^T ~ N(0, sigma^2 A A^T)
    big = SimpleNamespace(**{**vars(client), "samples": client.samples.repeat(50, 1)})
    loglik, _ = protected_loglik(big, mechanism, kernel, torch.Generator().manual_seed(2), 1)
    noise = loglik[1:] - diagonal_gaussian_loglik(big.samples[1:], client.centres,
                                                  kernel.variances)
    scaled = (client.centres / kernel.variances).numpy()
    expected = 0.05 * scaled @ scaled.T
    assert noise.mean(0) == pytest.approx(np.zeros(J), abs=4 * np.sqrt(np.diag(expected).max()
                                                                       / noise.shape[0]))
    assert np.cov(noise.T) == pytest.approx(expected, rel=0.05, abs=0.05 * np.abs(expected).max())


def test_mask_draws_are_built_and_scored_without_their_zeros():
    client, kernel = _client()
    kernel.ignore_zeros = True
    mechanism = RandomMask(0.9)
    loglik, head = protected_loglik(client, mechanism, kernel, torch.Generator().manual_seed(3),
                                    7)
    built = mechanism(client.samples, torch.Generator().manual_seed(3))
    assert torch.equal(head, built[:7])
    assert loglik == pytest.approx(diagonal_gaussian_loglik(built, client.centres,
                                                            kernel.variances, True), rel=1e-12)


def test_full_must_be_a_positive_count():
    client, kernel = _client()
    with pytest.raises(ValueError, match="full = 0"):
        protected_loglik(client, GaussianDistortion(0.1), kernel, torch.Generator(), 0)
