"""Banded Toeplitz factorizations for long horizons: ``O(T log T)`` per objective evaluation.

For a lower-triangular Toeplitz workload ``A`` (first column ``a``: prefix sums ``a_d = 1``, or
momentum ``beta`` at a constant learning rate, ``a_d = (1 - beta^{d+1}) / (1 - beta)``) and a
banded Toeplitz encoder ``C`` with first column ``c = (c_0, ..., c_{b-1})``, everything is a
power series truncated at degree T: ``C^{-1}`` is Toeplitz with ``u = 1 / c`` (by the recursion
``u_n = -(sum_{j=1}^{min(n, b-1)} c_j u_{n-j}) / c_0``), ``B = A C^{-1}`` is Toeplitz with
``v = a * u``, and ``||B||_F^2 = sum_d (T - d) v_d^2``. The largest column norm of C is
``||c||`` (the first column holds the whole band when b <= T), so the error at unit mu under k
participations at least b apart is ``k ||c||^2 ||B||_F^2`` — the scale-invariant objective
minimised here with L-BFGS on the analytic gradient:

    dL/dv_d = 2 (T - d) v_d,   dL/du_n = sum_d dL/dv_d a_{d-n},
    dL/dc_j = -sum_n dL/du_n (u * u)_{n-j}         (du = -u * dc * u)

(Choquette-Choo et al. 2023, BandMF, optimise banded Toeplitz C in the same way; the start is
the band-truncated square root of Fichtenberger et al. 2023.) The result streams with
:class:`~privfl.mechanisms.banded_noise.BandedNoise` given the 1-D coefficients.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, signal

from privfl._validation import check_int, check_range
from privfl.mechanisms.factorization import sqrt_prefix_coefficients


def toeplitz_workload(steps: int, momentum: float = 0.0) -> np.ndarray:
    """First column of the Toeplitz workload: ``a_d = sum_{u<=d} beta^u`` (prefix sums at 0)."""
    steps = check_int("steps", steps, minimum=1)
    beta = check_range("momentum", momentum, 0.0, 1.0, high_open=True)
    return np.cumsum(beta ** np.arange(steps))


def inverse_series(coefficients: object, steps: int) -> np.ndarray:
    """The first ``steps`` coefficients of ``1 / c(x)`` (the first column of ``C^{-1}``)."""
    c = np.asarray(coefficients, dtype=float).ravel()
    steps = check_int("steps", steps, minimum=1)
    if c.size == 0 or not np.all(np.isfinite(c)) or c[0] == 0.0:
        raise ValueError("coefficients must be finite with c_0 != 0 (C invertible)")
    band = c.size
    u = np.zeros(steps)
    u[0] = 1.0 / c[0]
    tail = c[1:][::-1]  # c_{b-1}, ..., c_1
    for n in range(1, steps):
        lo = max(0, n - band + 1)
        u[n] = -float(tail[band - 1 - (n - lo) :] @ u[lo:n]) / c[0]
    return u


def _correlate(g: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``out[n] = sum_{d >= n} g[d] h[d - n]`` for n < len(g) (FFT convolution of reversed g)."""
    steps = g.size
    return signal.fftconvolve(g[::-1], h)[:steps][::-1]


def _objective(c: np.ndarray, a: np.ndarray) -> tuple[float, np.ndarray, float]:
    """``(||B||_F^2, gradient in c, ||c||^2)`` for Toeplitz A (column a) and C (column c)."""
    steps = a.size
    u = inverse_series(c, steps)
    v = signal.fftconvolve(a, u)[:steps]
    weights = steps - np.arange(steps)
    value = float(weights @ (v * v))
    g_v = 2.0 * weights * v
    g_u = _correlate(g_v, a)  # g_u[n] = sum_d g_v[d] a[d - n]
    uu = signal.fftconvolve(u, u)[:steps]
    full = _correlate(g_u, uu)  # sum_n g_u[n] uu[n - j]
    band = c.size
    return value, -full[:band], float(c @ c)


def toeplitz_error(coefficients: object, workload_column: object) -> float:
    """``||c||^2 ||A C^{-1}||_F^2``: the total error at unit mu for one participation."""
    c = np.asarray(coefficients, dtype=float).ravel()
    a = np.asarray(workload_column, dtype=float).ravel()
    if a.size == 0 or c.size > a.size:
        raise ValueError(
            f"workload_column (length {a.size}) must be non-empty and at least as long as the "
            f"band ({c.size})"
        )
    value, _, norm2 = _objective(c, a)
    return value * norm2


def optimise_toeplitz(
    steps: int, band: int, *, momentum: float = 0.0, iterations: int = 300
) -> np.ndarray:
    """Banded Toeplitz ``c`` (length ``band``, unit norm) minimising ``||c||^2 ||A C^{-1}||_F^2``.

    Never worse than the start (the band-truncated square root, normalised).
    """
    steps = check_int("steps", steps, minimum=1)
    band = check_int("band", band, minimum=1, maximum=steps)
    iterations = check_int("iterations", iterations, minimum=0)
    a = toeplitz_workload(steps, momentum)
    start = sqrt_prefix_coefficients(band)

    def fun(c: np.ndarray) -> tuple[float, np.ndarray]:
        if abs(c[0]) < 1e-8 * max(1.0, float(np.abs(c).max())):
            return math.inf, np.zeros_like(c)
        value, grad, norm2 = _objective(c, a)
        return value * norm2, grad * norm2 + 2.0 * value * c

    value0, _ = fun(start)
    best = start
    if iterations:
        result = optimize.minimize(
            fun, start, jac=True, method="L-BFGS-B", options={"maxiter": iterations}
        )
        if result.fun < value0:
            best = result.x
    return within_unit_norm(best)


#: the column-norm bound m of a C built by :func:`optimise_toeplitz` (its norm is below 1)
UNIT_COLUMN_NORM = 1.0


def within_unit_norm(c: object) -> np.ndarray:
    """``c`` scaled so that its exact L2 norm is below 1: the column-norm bound ``m = 1`` that
    BandMF's sensitivity ``m sqrt(k)`` uses is then a bound on every CPU.

    ``c / ||c||`` has a norm of ``1 +- a few ulps`` that depends on how the CPU's SIMD kernels sum
    the squares. Here the squared norm is ``math.fsum`` of the squares (correctly rounded, so the
    same bits on every IEEE machine for the same ``c``), and ``c`` shrinks by one ulp at a time
    until it is at most ``1 - 2^-51``; since each rounded square and the rounded sum are within
    ``2^-53`` (relative) of exact, the exact squared norm is then below 1."""
    c = np.asarray(c, dtype=float)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or not np.any(c):
        raise ValueError(f"c = {c!r}: must be a non-empty finite 1-D array, not all zero")
    c = c / float(np.abs(c).max())  # largest entry +-1: no square under- or overflows
    c = c / math.sqrt(math.fsum(float(v) * float(v) for v in c))
    for _ in range(64):  # each step lowers every normal entry by 1-2 ulps: a few suffice
        if math.fsum(float(v) * float(v) for v in c) <= 1.0 - 2.0**-51:
            return c
        c = c * (1.0 - 2.0**-52)
    raise ArithmeticError(f"within_unit_norm: could not bring the norm of c below 1 (c = {c!r})")
