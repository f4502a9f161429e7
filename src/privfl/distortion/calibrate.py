"""Choosing the distortion for a required total variation (Zhang, Chen and Yang 2022).

Their recipe (Lemma 6.6, then Lemma 6.8 / Algorithm 1): a leakage budget ``tau`` asks for
``TV >= C1 - tau =: gap``, and Gaussian noise of variance::

    sigma_eps^2 = 100 sigma^2 gap / sqrt(d)                      (Lemma 6.8, 0 < gap < 0.01)

reaches it by the lower half of Lemma 6.7 (``TV >= min{1, x} / 100``). The 1/100 constant is
loose: the exact isotropic TV of that noise is 16.6 to 28.2 times the gap. privfl's exact
calibration (:func:`noise_variance_exact`) solves ``TV_exact(sigma^2, sigma^2 + sigma_eps^2, d)
= gap`` by root finding, 24 to 28 times less noise for the same TV. Both assume the unprotected
parameter is ``N(mu, sigma^2 I_d)``. Trained parameters are not isotropic: with one variance per
coordinate, :func:`noise_calibrations` adds the calibration of
:func:`privfl.distortion.diagonal.noise_variance_diagonal` and reports the TV every rule reaches
under those variances (the isotropic rules then carry an :class:`AnisotropyWarning`). Neither
rule makes ``eps_p <= tau`` a guarantee, because
Lemma 6.6 (``TV >= C1 - tau`` implies ``eps_p <= tau``) is not proven (see
:func:`privfl.distortion.bounds.min_tv_for_budget`). :func:`mask_keep_rate` gives the keep rate
of the random mask with ``TV = gap`` exactly.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize

from privfl._validation import check_int, check_positive, check_range
from privfl.distortion.bounds import gaussian_tv_sandwich
from privfl.distortion.diagonal import (
    check_variances,
    noise_variance_diagonal,
    tv_gaussian_diagonal,
)
from privfl.distortion.divergence import tv_gaussian_isotropic

__all__ = [
    "ANISOTROPY_TOLERANCE",
    "LEMMA_6_8_MAX_GAP",
    "AnisotropyWarning",
    "anisotropy_message",
    "NoiseCalibration",
    "mask_keep_rate",
    "noise_calibrations",
    "noise_variance_exact",
    "noise_variance_paper",
    "warn_if_anisotropic",
]

#: Lemma 6.8 holds only for 0 < C1 - tau < 0.01 (beyond, Lemma 6.7's lower bound caps at 0.01).
LEMMA_6_8_MAX_GAP = 0.01
#: Per-coordinate variances whose max / min exceeds 1 + this are anisotropic (warned about).
ANISOTROPY_TOLERANCE = 0.01


class AnisotropyWarning(UserWarning):
    """An isotropic formula (Lemmas 6.7, 6.8, the exact isotropic TV) applied to parameters
    whose per-coordinate variances differ."""


def anisotropy_message(variances: np.ndarray, what: str) -> str:
    """What is wrong with applying ``what`` (an isotropic rule) to ``variances``, or ``""``
    when ``max / min`` is within ``1 + ANISOTROPY_TOLERANCE``."""
    low, high = float(variances.min()), float(variances.max())
    if high <= (1.0 + ANISOTROPY_TOLERANCE) * low:
        return ""
    return (f"{what} assumes one variance for every coordinate, but the per-coordinate "
            f"variances span {low:.3g} to {high:.3g} (ratio {high / low:.3g}); its TV is "
            "given under the per-coordinate variances")


def warn_if_anisotropic(variances: np.ndarray, what: str) -> str:
    """:func:`anisotropy_message`, also raised as an :class:`AnisotropyWarning`."""
    message = anisotropy_message(variances, what)
    if message:
        warnings.warn(message, AnisotropyWarning, stacklevel=3)
    return message


def _gap(gap: float) -> float:
    return check_range("gap", gap, -1.0, 1.0)


def noise_variance_paper(variance: float, gap: float, dimension: int) -> float:
    """Lemma 6.8: ``sigma_eps^2 = 100 sigma^2 gap / sqrt(d)`` for ``0 < gap < 0.01``.

    ``gap = C1 - tau``; ``gap <= 0`` (budget not binding) gives 0. ValueError for
    ``gap >= 0.01``, outside the lemma's domain (no noise is certified there by Lemma 6.7).
    """
    s = check_positive("variance", variance)
    g = _gap(gap)
    d = check_int("dimension", dimension, 1)
    if g <= 0:
        return 0.0
    if g >= LEMMA_6_8_MAX_GAP:
        raise ValueError(f"gap = {g!r} is out of range for Lemma 6.8: must be in (0, 0.01) "
                         "(Lemma 6.7's lower bound never exceeds 0.01); use the exact "
                         "calibration")
    return 100.0 * s * g / math.sqrt(d)


def noise_variance_exact(variance: float, target_tv: float, dimension: int) -> float:
    """The ``sigma_eps^2`` with ``TV(N(mu, sigma^2 I_d), N(mu, (sigma^2 + sigma_eps^2) I_d))``
    equal to ``target_tv`` (Brent's method on ``log(sigma_eps^2 / sigma^2)``, tolerance 1e-13).
    ``target_tv <= 0`` gives 0; a target >= 1 is infeasible (ValueError): finite noise never
    reaches TV = 1.
    """
    s = check_positive("variance", variance)
    target = check_range("target_tv", target_tv, -1.0, 1.0)
    d = check_int("dimension", dimension, 1)
    if target <= 0:
        return 0.0
    if target >= 1.0:
        raise ValueError(f"target_tv = {target!r} is infeasible: TV < 1 for every finite noise "
                         "variance; ask for a target in (0, 1)")

    def excess(log_ratio: float) -> float:
        return tv_gaussian_isotropic(1.0, 1.0 + math.exp(log_ratio), d) - target

    low = math.log(target / math.sqrt(d)) - 2.0  # TV ~ 0.24..0.29 x for small x
    while excess(low) > 0:
        low -= 5.0
    high = low + 5.0
    while excess(high) < 0:
        high += 5.0
        if high > 690.0:
            raise ValueError(f"target_tv = {target!r} is infeasible in floating point: the TV "
                             "of any representable noise variance rounds below it")
    root = optimize.brentq(excess, low, high, xtol=1e-13, rtol=1e-14, maxiter=500)
    return s * math.exp(root)


@dataclass(frozen=True)
class NoiseCalibration:
    """One rule's noise for a TV target, with the TV it actually reaches.

    ``noise_variance`` is None when the rule refuses (``refused`` says why). ``tv`` is the TV
    reached if the unprotected parameter is ``N(mu, sigma^2 I_d)`` (exact), or, given one
    variance per coordinate, ``N(mu, diag(sigma_i^2))`` (``tv_method`` says how, ``tv_error``
    its numerical error); ``tv_lower``/``tv_upper`` a certified bracket at that noise (the
    Lemma 6.7 sandwich, or :func:`~privfl.distortion.diagonal.tv_diagonal_bracket`).
    ``warning``: the isotropic rule was applied to anisotropic variances.
    """

    method: str
    target_tv: float
    noise_variance: float | None
    tv: float | None
    tv_lower: float | None
    tv_upper: float | None
    refused: str
    note: str
    tv_method: str = "exact: chi-square form (isotropic)"
    tv_error: float = 0.0
    warning: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


_PRIVACY_NOTE = ("eps_p <= tau is NOT guaranteed: Lemma 6.6 (TV >= C1 - tau => eps_p <= tau) "
                 "is not proven")


def _calibration(method: str, variance: float, gap: float, dimension: int, noise: float,
                 note: str) -> NoiseCalibration:
    tv = tv_gaussian_isotropic(variance, variance + noise, dimension) if noise > 0 else 0.0
    lower, upper = gaussian_tv_sandwich(variance, noise, dimension)
    return NoiseCalibration(method, gap, noise, tv, lower.value, upper.value, "", note)


def _diagonal_row(method: str, variances: np.ndarray, gap: float, noise: float, note: str,
                  warning: str = "") -> NoiseCalibration:
    result = tv_gaussian_diagonal(variances, variances + noise)
    return NoiseCalibration(method, gap, noise, result.tv, result.tv_lower, result.tv_upper, "",
                            note, result.method, result.error, warning)


def noise_calibrations(variance: float | object, gap: float, dimension: int | None = None
                       ) -> list[NoiseCalibration]:
    """The paper's rule (Lemma 6.8) and the exact calibration side by side for ``TV >= gap``.

    ``variance``: one ``sigma^2`` (with ``dimension``: the isotropic model, exact), or one
    variance per coordinate (``dimension`` optional, must match): then the isotropic rules use
    the mean variance (with an :class:`AnisotropyWarning` if the variances differ), every TV is
    the one under the per-coordinate variances, and a third row, ``diagonal``, is the noise
    that reaches the target under them. A rule that cannot answer is returned with
    ``noise_variance=None`` and the reason in ``refused``; ValueError when none can (e.g.
    ``gap >= 1``).
    """
    g = _gap(gap)
    if np.ndim(variance) == 0:
        if dimension is None:
            raise ValueError("dimension is missing: give it with a scalar variance")
        return _isotropic_calibrations(check_positive("variance", variance), g,
                                       check_int("dimension", dimension, 1))
    variances = check_variances("variance", variance)
    if dimension is not None and check_int("dimension", dimension, 1) != variances.size:
        raise ValueError(f"dimension = {dimension!r} does not match the {variances.size} "
                         "per-coordinate variances given")
    mean = float(variances.mean())
    rows = []
    for row in _isotropic_calibrations(mean, g, variances.size, require=False):
        if row.noise_variance is None:
            rows.append(row)
            continue
        warning = warn_if_anisotropic(variances, f"the {row.method} rule (sigma^2 = mean "
                                      "variance)")
        rows.append(_diagonal_row(row.method, variances, g, row.noise_variance,
                                  row.note.replace("isotropic Gaussians", "N(mu, sigma^2 I)"),
                                  warning))
    try:
        noise = noise_variance_diagonal(variances, g)
        rows.append(_diagonal_row(
            "diagonal", variances, g, noise,
            "TV = gap for N(mu, diag(sigma_i^2)) (isotropic noise on every coordinate); "
            + _PRIVACY_NOTE))
    except ValueError as error:
        if all(r.noise_variance is None for r in rows):
            raise
        rows.append(NoiseCalibration("diagonal", g, None, None, None, None, str(error), ""))
    return rows


def _isotropic_calibrations(s: float, g: float, d: int, require: bool = True
                            ) -> list[NoiseCalibration]:
    rows = []
    try:
        noise = noise_variance_paper(s, g, d)
        rows.append(_calibration(
            "paper", s, g, d, noise,
            "TV >= gap by Lemma 6.7 (rigorous for isotropic Gaussians); " + _PRIVACY_NOTE))
    except ValueError as error:
        rows.append(NoiseCalibration("paper", g, None, None, None, None, str(error), ""))
    try:
        noise = noise_variance_exact(s, g, d)
        rows.append(_calibration(
            "exact", s, g, d, noise,
            "TV = gap exactly for isotropic Gaussians (chi-square form); " + _PRIVACY_NOTE))
    except ValueError as error:
        if rows[0].noise_variance is None and require:
            raise ValueError(f"{error} (and the paper's rule refuses: {rows[0].refused})"
                             ) from None
        rows.append(NoiseCalibration("exact", g, None, None, None, None, str(error), ""))
    return rows


def mask_keep_rate(gap: float, dimension: int) -> float:
    """The random mask's keep rate with ``TV = 1 - rho^d = gap``: ``rho = (1 - gap)^{1/d}``
    (an extension; 1 for ``gap <= 0``; 0, a mask that keeps nothing, for ``gap = 1``).
    ValueError when ``rho`` would round to 1 in double precision (a mask with TV 0, not gap)."""
    g = _gap(gap)
    d = check_int("dimension", dimension, 1)
    if g <= 0:
        return 1.0
    if g >= 1:
        return 0.0
    rate = -math.expm1(math.log1p(-g) / d)  # 1 - rho, accurate when it is tiny
    if 1.0 - rate == 1.0:
        raise ValueError(f"gap = {g!r} is out of range for dimension = {d}: the keep rate "
                         f"1 - {rate:.3g} rounds to 1 (a mask with TV 0) in double precision; "
                         f"must be >= {d * 2.0**-53:.3g}")
    return 1.0 - rate
