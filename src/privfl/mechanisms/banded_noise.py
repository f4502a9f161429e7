"""Streaming correlated noise ``W = C^{-1} Z`` for a banded lower-triangular encoder ``C``.

In DP-FTRL / BandMF training the server adds ``w_t`` to step t's (summed, clipped) gradient,
where ``W = C^{-1} Z`` and ``Z`` has i.i.d. N(0, sigma^2) rows: then every prefix of the noisy
gradients, mapped by the workload A, equals ``B (C x + Z)`` (Denisov et al. 2022;
Choquette-Choo et al. 2023, BandMF). Forward substitution on a C with ``band`` b diagonals::

    w_t = (z_t - sum_{j=1}^{b-1} C[t, t-j] w_{t-j}) / C[t, t]

needs only the last ``b - 1`` noise vectors and the band's coefficients (``T x b`` numbers,
or ``b`` for a Toeplitz C): memory ``O(b d)``, never a T x T matrix. ``Cov(w) = sigma^2
(C^T C)^{-1}`` per coordinate, since ``C w = z``.
"""

from __future__ import annotations

import numpy as np

from privfl._validation import check_int, check_nonnegative


def band_coefficients(encoder: object, band: int) -> np.ndarray:
    """``(T, band)`` array, row t = ``C[t, t], C[t, t-1], ..., C[t, t-band+1]`` (0 off the
    matrix); checks that C is lower triangular with no entries outside the band."""
    c = np.asarray(encoder, dtype=float)
    if c.ndim != 2 or c.shape[0] != c.shape[1] or c.size == 0:
        raise ValueError(f"encoder must be a square non-empty matrix, got shape {c.shape}")
    steps = c.shape[0]
    band = check_int("band", band, minimum=1, maximum=steps)
    i, j = np.indices(c.shape)
    outside = (i < j) | (i - j >= band)
    if np.any(c[outside] != 0.0):
        raise ValueError(f"encoder has non-zero entries outside the lower band of width {band}")
    coefficients = np.zeros((steps, band))
    for d in range(band):
        coefficients[d:, d] = np.diagonal(c, offset=-d)
    return coefficients


class BandedNoise:
    """Draws ``w_0, w_1, ...`` of ``C^{-1} Z`` one step at a time.

    Parameters
    ----------
    coefficients : ``(T, b)`` from :func:`band_coefficients`, or 1-D ``(b,)`` for a Toeplitz C
        (then any number of steps).
    shape : shape of one step's noise vector.
    noise_std : sigma of the i.i.d. Gaussian ``z_t``.
    rng : numpy Generator (ignored when :meth:`step` is given ``z``).
    """

    def __init__(
        self,
        coefficients: object,
        shape: tuple[int, ...] | int,
        noise_std: float,
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        coeffs = np.asarray(coefficients, dtype=float)
        if coeffs.ndim not in (1, 2) or coeffs.size == 0 or not np.all(np.isfinite(coeffs)):
            raise ValueError(
                f"coefficients must be a finite 1-D (Toeplitz) or 2-D (T, band) array, got "
                f"shape {coeffs.shape}"
            )
        diagonal = coeffs[..., 0]
        if np.any(np.abs(diagonal) <= 1e-300):
            raise ValueError("coefficients: a diagonal entry C[t, t] is zero (C is singular)")
        self._coeffs = coeffs
        self.toeplitz = coeffs.ndim == 1
        self.band = coeffs.shape[-1]
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        for n in self.shape:
            check_int("shape entry", n, minimum=1)
        self.noise_std = check_nonnegative("noise_std", noise_std)
        self._rng = rng if rng is not None else np.random.default_rng()
        # ring buffer of the last band - 1 noise vectors: w_{t-j} sits in row (t - j) % (band - 1)
        self._history = np.zeros((max(self.band - 1, 1), int(np.prod(self.shape))))
        self.steps = 0

    @property
    def horizon(self) -> int | None:
        """The number of steps the coefficients cover (None for Toeplitz: unbounded)."""
        return None if self.toeplitz else int(self._coeffs.shape[0])

    def step(self, z: object = None) -> np.ndarray:
        """The next ``w_t``; ``z`` (shape :attr:`shape`) replaces the Gaussian draw (tests,
        or a secure source)."""
        t = self.steps
        if self.horizon is not None and t >= self.horizon:
            raise ValueError(f"step {t}: the coefficients cover only {self.horizon} steps")
        if z is None:
            fresh = self._rng.normal(0.0, self.noise_std, self.shape)
        else:
            fresh = np.asarray(z, dtype=float)
            if fresh.shape != self.shape:
                raise ValueError(f"z must have shape {self.shape}, got {fresh.shape}")
        row = self._coeffs if self.toeplitz else self._coeffs[t]
        total = fresh.reshape(-1).copy()
        lags = min(t, self.band - 1)
        if lags:
            j = np.arange(1, lags + 1)
            weights = np.zeros(self._history.shape[0])
            weights[(t - j) % self._history.shape[0]] = row[j]
            total -= weights @ self._history  # sum_j C[t, t-j] w_{t-j}, one matrix-vector product
        w = total / row[0]
        if self.band > 1:
            self._history[t % self._history.shape[0]] = w
        w = w.reshape(self.shape)
        self.steps += 1
        return w

    def state_dict(self) -> dict[str, object]:
        """The step count and the last ``band - 1`` noise vectors (for an exact resume)."""
        return {"steps": self.steps, "history": self._history.copy()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict` output (same band and shape)."""
        history = np.asarray(state["history"], dtype=float)
        if history.shape != self._history.shape:
            raise ValueError(f"state['history'] has shape {history.shape}: must be "
                             f"{self._history.shape} (band {self.band}, shape {self.shape})")
        self.steps = check_int("state['steps']", state["steps"], minimum=0)
        self._history = history.copy()
