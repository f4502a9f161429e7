"""The attacker's log-likelihoods of many protected draws, mostly without building the draws.

``privfl tradeoff`` estimates the leakage of Zhang, Chen and Yang 2022 from ``R`` draws of the
protected parameter per client and grid point (:mod:`privfl.distortion.measure`). The
attacker's Gaussian kernel (:func:`~privfl.distortion.measure.diagonal_gaussian_loglik`) scores
a parameter ``w`` by a linear function of it::

    l_j(w) = w . a_j - c_j,    a_j = mu_j / v,    c_j = mu_j . a_j / 2

so the leakage needs only the ``J``-dimensional projections ``w A^T`` of the draws, never the
``d``-dimensional draws themselves:

* **Gaussian distortion** ``W~ = W + sigma_eps Z``: ``l(W~) = l(W) + sigma_eps Z A^T``, and
  ``Z A^T ~ N(0, A A^T)`` exactly; it is drawn as ``xi S^T`` with ``xi ~ N(0, I_J)`` and
  ``S S^T = A A^T`` (eigendecomposition), ``O(R J^2)`` instead of ``O(R d)`` normals;
* **record sampling** ``W = W_{t-1} - eta mean_{i in S} g_i``: ``l(W) = W_{t-1} A^T - eta
  mean_{i in S} (g_i A^T) - c``, the per-record gradients projected once (``O(m d J)``), each
  draw ``O(m J)``: the same numbers as projecting the built draws, in another order;
* **random mask**: its kernel skips each draw's zero coordinates, which is not linear in the
  draw, so the draws are built (``O(R d)`` uniforms).

The first ``full`` draws are built in ``d`` dimensions and scored directly (the utility, TV
two-sample and accuracy measurements use them); the rest are drawn in the projection. Both
parts are exact in distribution, so the leakage is the same estimator as scoring ``R`` built
draws, at a cost that hardly grows with ``R``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from privfl._validation import check_int
from privfl.distortion.mechanisms import (
    GaussianDistortion,
    PoissonRecordSampling,
    sampled_mean_steps,
)

__all__ = ["diagonal_gaussian_loglik", "protected_loglik"]


def diagonal_gaussian_loglik(w: torch.Tensor, centres: torch.Tensor, variances: torch.Tensor,
                             ignore_zeros: bool = False) -> np.ndarray:
    """``log N(w_r; mu_j, diag(v))`` up to a term constant in ``j``: ``[R, J]``
    (``sum_c w_c mu_jc / v_c - sum_c mu_jc^2 / (2 v_c)``; posteriors are unchanged). With
    ``ignore_zeros`` the sums skip each row's zero coordinates (a mask's erased entries)."""
    scaled = centres / variances  # [J, d]
    if not ignore_zeros:
        return (w @ scaled.T - 0.5 * (centres * scaled).sum(1)).numpy()
    keep = (w != 0).to(w.dtype)
    return (w @ scaled.T - 0.5 * keep @ (centres * scaled).T).numpy()


def _root(scaled: torch.Tensor) -> torch.Tensor:
    """``S`` with ``S S^T = scaled scaled^T`` (``[J, J]``, symmetric square root)."""
    values, vectors = torch.linalg.eigh(scaled @ scaled.T)
    return vectors * values.clamp_min(0.0).sqrt()


def protected_loglik(client: Any, mechanism: Any, kernel: Any, generator: torch.Generator,
                     full: int) -> tuple[np.ndarray, torch.Tensor]:
    """``(log-likelihoods [R, J] of R protected draws under kernel, the first min(full, R)
    protected draws [S, d])``; ``R`` is the number of ``client.samples`` (the unprotected
    draws, of which the distortions' protected draws are functions, draw by draw)."""
    full = check_int("full", full, 1)
    samples = client.samples
    r = samples.shape[0]
    s = min(full, r)
    centres, variances = client.centres, kernel.variances
    if isinstance(mechanism, PoissonRecordSampling):
        masks = mechanism.masks(r, client.size, generator)
        protected = client.w_prev.unsqueeze(0) + sampled_mean_steps(client.grads, masks[:s],
                                                                    client.lr)
        scaled = centres / variances
        steps = sampled_mean_steps(client.grads @ scaled.T, masks, client.lr)  # [R, J]
        base = client.w_prev @ scaled.T - 0.5 * (centres * scaled).sum(1)
        return (base.unsqueeze(0) + steps).numpy(), protected
    if isinstance(mechanism, GaussianDistortion):
        protected = mechanism(samples[:s], generator)
        head = diagonal_gaussian_loglik(protected, centres, variances)
        if r == s:
            return head, protected
        scaled = centres / variances
        xi = torch.randn((r - s, centres.shape[0]), generator=generator, dtype=samples.dtype)
        noise = mechanism.noise_variance ** 0.5 * (xi @ _root(scaled).T)
        tail = diagonal_gaussian_loglik(samples[s:], centres, variances) + noise.numpy()
        return np.concatenate([head, tail]), protected
    protected = mechanism(samples, generator)
    return (diagonal_gaussian_loglik(protected, centres, variances, kernel.ignore_zeros),
            protected[:s])
