"""Matrix-factorization mechanisms ``A = B C``: workloads, errors and an optimiser.

The mechanism releases ``B (C x + Z) = A x + B Z`` (Denisov et al. 2022, "Improved
Differential Privacy for SGD via Optimal Private Linear Operators on Adaptive Streams";
Choquette-Choo et al. 2023, "Multi-Epoch Matrix Factorization Mechanisms for Private Machine
Learning" and "(Amplified) Banded Matrix Factorization: A unified approach to private
training"). ``x`` (T x d) holds each step's sum of clipped updates, ``Z`` is i.i.d. N(0, sigma^2)
with ``sigma = z * clip``, and the privacy is that of the Gaussian mechanism on ``C x`` with the
sensitivity of ``C`` (:mod:`privfl.mechanisms.sensitivity`): GDP ``mu = s / z``. In training
the server adds ``C^{-1} Z`` to the gradients (:mod:`privfl.mechanisms.banded_noise`).

Workloads (:func:`workload`): ``A[t, s]`` is the weight of step s's gradient in the model
change released at step t (0-based, ``s <= t``): prefix sums (``A = 1``), momentum ``beta``
(``sum_{u=s..t} beta^{u-s}``) and learning rates ``eta_u`` (``sum_{u=s..t} eta_u beta^{u-s}``),
the workloads of Denisov et al. 2022, Sec. 5.

Error (:func:`factorization_error`): per coordinate, ``E||(B Z)_t||^2 = sigma^2 ||B[t]||^2``.
Reported per unit noise std (``total = ||B||_F^2``, ``max_step = max_t ||B[t]||^2``) and at equal
privacy, ``s^2`` times these ("at unit mu": noise calibrated to 1-GDP, clip 1), which is what
compares mechanisms. Lower bound (Li et al. 2015, "The matrix mechanism"; Denisov et al.
2022, Thm 2.1): ``s^2 ||B||_F^2 >= ||A||_*^2 / T`` for every factorization with sensitivity s >=
its largest column norm (:func:`error_lower_bound`).

Optimiser (:func:`optimise_factorization`): lower-triangular ``C`` with ``band`` non-zero
diagonals, columns normalised to unit norm, minimising ``||A C^{-1}||_F^2`` with L-BFGS on the
analytic gradient ``d/dC ||A C^{-1}||_F^2 = -2 B^T B C^{-T}`` (``B = A C^{-1}``), started from
the band-truncated square root of the prefix-sum matrix (Fichtenberger et al. 2023). With unit
columns and ``band <= min separation`` (or a single participation) the squared sensitivity is
the largest participation count, so this is the BandMF objective of Choquette-Choo et al.
2023; otherwise the result is reported with its true (or bounded) sensitivity. It returns a
local optimum (the objective is not convex in C); the tests check it never loses to its start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize

from privfl._validation import check_int, check_range
from privfl.mechanisms.sensitivity import Participation, Sensitivity, sensitivity


def workload(steps: int, *, momentum: float = 0.0, learning_rates: object = None) -> np.ndarray:
    """``A`` (T x T, lower triangular): ``A[t, s] = sum_{u=s..t} eta_u beta^{u-s}``.

    ``momentum`` beta in [0, 1); ``learning_rates`` eta (length T, > 0; default all 1). Beta = 0
    and eta = 1 give the prefix-sum matrix.
    """
    steps = check_int("steps", steps, minimum=1)
    beta = check_range("momentum", momentum, 0.0, 1.0, high_open=True)
    if learning_rates is None:
        eta = np.ones(steps)
    else:
        eta = np.asarray(learning_rates, dtype=float)
        if eta.shape != (steps,) or not np.all(np.isfinite(eta)) or np.any(eta <= 0):
            raise ValueError(
                f"learning_rates must hold steps = {steps} finite values > 0, got shape {eta.shape}"
            )
    a = np.zeros((steps, steps))
    for s in range(steps):
        # column s: running sum over u >= s of eta_u beta^(u - s)
        a[s:, s] = np.cumsum(eta[s:] * beta ** np.arange(steps - s))
    return a


def sqrt_prefix_coefficients(steps: int) -> np.ndarray:
    """Coefficients ``r_k = binom(2k, k) / 4^k`` of ``(1 - x)^(-1/2)``: the Toeplitz square
    root of the prefix-sum matrix (``R R = A``; Fichtenberger, Henzinger, Upadhyay 2023)."""
    steps = check_int("steps", steps, minimum=1)
    r = np.ones(steps)
    for k in range(1, steps):
        r[k] = r[k - 1] * (2 * k - 1) / (2 * k)
    return r


def toeplitz_lower(coefficients: object, steps: int) -> np.ndarray:
    """Lower-triangular Toeplitz matrix with first column ``coefficients`` (zero-padded)."""
    c = np.asarray(coefficients, dtype=float).ravel()
    steps = check_int("steps", steps, minimum=1)
    column = np.zeros(steps)
    column[: min(steps, c.size)] = c[:steps]
    return linalg.toeplitz(column, np.zeros(steps))


@dataclass(frozen=True)
class FactorizationError:
    """Expected squared error of a factorization's released prefix sums (per coordinate)."""

    total: float  # ||B||_F^2: sum over steps, per unit noise std
    max_step: float  # max_t ||B[t]||^2
    sensitivity: Sensitivity

    @property
    def total_at_unit_mu(self) -> float:
        """``s^2 ||B||_F^2``: total error with the noise calibrated to 1-GDP (clip 1)."""
        return self.sensitivity.value**2 * self.total

    @property
    def max_step_at_unit_mu(self) -> float:
        """``s^2 max_t ||B[t]||^2``."""
        return self.sensitivity.value**2 * self.max_step

    def to_dict(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "total_per_unit_noise": self.total,
            "max_step_per_unit_noise": self.max_step,
            "total_at_unit_mu": self.total_at_unit_mu,
            "max_step_at_unit_mu": self.max_step_at_unit_mu,
            **self.sensitivity.to_dict(),
        }


def decoder(workload_matrix: object, encoder: object) -> np.ndarray:
    """``B = A C^{-1}`` for square invertible C, else the least-squares ``A C^+``."""
    a = np.asarray(workload_matrix, dtype=float)
    c = np.asarray(encoder, dtype=float)
    if a.ndim != 2 or c.ndim != 2 or a.shape[1] != c.shape[1]:
        raise ValueError(
            f"workload (shape {a.shape}) and encoder (shape {c.shape}) must be 2-D with the "
            "same number of columns (steps)"
        )
    if c.shape[0] == c.shape[1] and np.allclose(c, np.tril(c)):
        diag = np.abs(np.diag(c))
        if diag.min() <= 1e-12 * max(1.0, float(diag.max())):
            raise ValueError("encoder is lower triangular with a zero diagonal entry: singular")
        return linalg.solve_triangular(c, a.T, lower=True, trans="T").T
    return a @ np.linalg.pinv(c)


def factorization_error(
    workload_matrix: object,
    encoder: object,
    participation: Participation,
    *,
    decoder_matrix: object = None,
) -> FactorizationError:
    """Error of ``A = B C`` (B from :func:`decoder` unless given; it must satisfy B C = A)."""
    a = np.asarray(workload_matrix, dtype=float)
    b = decoder(a, encoder) if decoder_matrix is None else np.asarray(decoder_matrix, float)
    if not np.allclose(b @ np.asarray(encoder, dtype=float), a, atol=1e-8 * max(1.0, abs(a).max())):
        raise ValueError("decoder_matrix times encoder does not reproduce the workload")
    rows = np.einsum("ij,ij->i", b, b)
    return FactorizationError(
        float(rows.sum()), float(rows.max()), sensitivity(encoder, participation)
    )


def error_lower_bound(workload_matrix: object) -> float:
    """``||A||_*^2 / T``: no factorization has ``s^2 ||B||_F^2`` below it (module docstring)."""
    a = np.asarray(workload_matrix, dtype=float)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"workload must be a non-empty 2-D matrix, got shape {a.shape}")
    return float(np.linalg.svd(a, compute_uv=False).sum() ** 2 / a.shape[1])


def _band_mask(steps: int, band: int) -> np.ndarray:
    i, j = np.indices((steps, steps))
    return (i >= j) & (i - j < band)


def _normalised(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    norms = np.linalg.norm(v, axis=0)
    return v / norms, norms


def optimise_factorization(
    workload_matrix: object,
    *,
    band: int | None = None,
    iterations: int = 200,
    initial: object = None,
) -> np.ndarray:
    """A banded lower-triangular ``C`` with unit columns that minimises ``||A C^{-1}||_F^2``.

    ``band`` b (default T) keeps the diagonals ``0 .. b-1``; ``initial`` (T x T) replaces the
    default start (the band-truncated prefix-sum square root). L-BFGS for ``iterations``
    iterations; the answer is never worse than the start (the start is returned if so).
    """
    a = np.asarray(workload_matrix, dtype=float)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.size == 0:
        raise ValueError(f"workload must be a square non-empty matrix, got shape {a.shape}")
    steps = a.shape[0]
    band = steps if band is None else check_int("band", band, minimum=1, maximum=steps)
    iterations = check_int("iterations", iterations, minimum=0)
    mask = _band_mask(steps, band)
    if initial is None:
        start = toeplitz_lower(sqrt_prefix_coefficients(band), steps)
    else:
        start = np.asarray(initial, dtype=float)
        if start.shape != (steps, steps):
            raise ValueError(f"initial must have shape {(steps, steps)}, got {start.shape}")
    start = np.where(mask, start, 0.0)
    gram_a = a.T @ a

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        v = np.zeros((steps, steps))
        v[mask] = theta
        c, norms = _normalised(v)
        if np.any(np.abs(np.diag(c)) < 1e-10):
            return math.inf, np.zeros_like(theta)
        inv = linalg.solve_triangular(c, np.eye(steps), lower=True)
        value = float(np.einsum("ij,ij->", inv.T @ gram_a, inv.T))  # tr(C^-T A^T A C^-1)
        g_c = -2.0 * (inv.T @ gram_a @ inv) @ inv.T  # -2 B^T B C^{-T}
        g_v = (g_c - c * np.einsum("ij,ij->j", c, g_c)) / norms
        return value, g_v[mask]

    theta0 = start[mask]
    value0, _ = objective(theta0)
    if iterations == 0 or not math.isfinite(value0):
        return _normalised(start)[0]
    result = optimize.minimize(
        objective, theta0, jac=True, method="L-BFGS-B", options={"maxiter": iterations}
    )
    best = result.x if result.fun < value0 else theta0
    v = np.zeros((steps, steps))
    v[mask] = best
    return _normalised(v)[0]
