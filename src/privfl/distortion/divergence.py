"""Divergences between the distributions of unprotected and protected model parameters.

Zhang, Chen and Yang 2022 measure privacy leakage with the square root of the Jensen-Shannon
divergence (natural log) between the attacker's beliefs, and the distortion of a protection
mechanism with the total variation distance between the laws ``P`` of the unprotected and
``P~`` of the protected parameter (their eq. 23)::

    JS(p || q) = 1/2 KL(p || m) + 1/2 KL(q || m),  m = (p + q) / 2,   0 <= sqrt(JS) <= sqrt(ln 2)
    TV(p, q)   = 1/2 sum |p - q| = sup_A |P(A) - Q(A)|                in [0, 1]

Both are metrics (Endres and Schindelin 2003 for sqrt(JS)). For Gaussians privfl computes:

* the exact TV between ``N(mu, s1 I_d)`` and ``N(mu, s2 I_d)`` (:func:`tv_gaussian_isotropic`,
  a chi-square form: the densities cross on the sphere ``||x - mu||^2 = r*``);
* the bounds of Devroye, Mehrabian and Reddad 2018 (Theorem 1.1) for any two covariances with
  equal means (:func:`tv_gaussian_devroye`), which the paper's Lemma 6.7 specialises;
* the exact TV of the random-mask compression (:func:`tv_random_mask`, ``1 - rho^d``) and of
  Poisson record sampling at two rates (:func:`tv_record_sampling`).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, special

from privfl._validation import check_int, check_positive, check_range

__all__ = [
    "SQRT_LN2",
    "check_distribution",
    "check_leakage",
    "js_divergence",
    "sqrt_js",
    "sqrt_js_rows",
    "tv_discrete",
    "tv_gaussian_devroye",
    "tv_gaussian_isotropic",
    "tv_random_mask",
    "tv_record_sampling",
]

#: The largest square-root JS divergence (natural log): two distributions with disjoint supports.
SQRT_LN2 = math.sqrt(math.log(2.0))
#: Tolerance on ``sum(p) == 1`` for a probability vector.
_SUM_TOLERANCE = 1e-9
#: Gauss-Legendre nodes for the chi-square density over a short interval (see below).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(12)


def check_leakage(name: str, value: object) -> float:
    """A square-root JS leakage (``C1``, ``eps_p``, ``tau``): a real number in
    ``[0, sqrt(ln 2)]`` (= [0, 0.8326])."""
    x = check_range(name, value)
    if not 0.0 <= x <= SQRT_LN2:
        raise ValueError(f"{name} = {x!r} is out of range: a sqrt-JS leakage (natural log) must "
                         f"be in [0, sqrt(ln 2)] = [0, {SQRT_LN2:.6f}]")
    return x


def check_distribution(name: str, value: object) -> np.ndarray:
    """A probability vector: 1-D, finite, entries >= 0, summing to 1 (within 1e-9)."""
    try:
        p = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {value!r} is not a vector of probabilities") from None
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"{name} = {value!r} must be a non-empty 1-D vector of probabilities")
    bad = ~np.isfinite(p) | (p < 0) | (p > 1)
    if bad.any():
        raise ValueError(f"{name}[{int(np.flatnonzero(bad)[0])}] = "
                         f"{float(p[bad][0])!r} is out of range: must be in [0, 1]")
    total = float(p.sum())
    if abs(total - 1.0) > _SUM_TOLERANCE * max(1, p.size):
        raise ValueError(f"{name} sums to {total!r}: a probability vector must sum to 1")
    return p


def _pair(p: object, q: object) -> tuple[np.ndarray, np.ndarray]:
    p, q = check_distribution("p", p), check_distribution("q", q)
    if p.shape != q.shape:
        raise ValueError(f"p has {p.size} entries and q has {q.size}: they must be on the same "
                         "support")
    return p, q


def js_divergence(p: object, q: object) -> float:
    """``JS(p || q) = (KL(p || m) + KL(q || m)) / 2``, ``m = (p + q) / 2``, natural log
    (scipy's ``rel_entr``), in ``[0, ln 2]``."""
    p, q = _pair(p, q)
    return float(_js(p, q))


def _js(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """JS over the last axis (broadcast), clipped to ``[0, ln 2]``; inputs already checked."""
    # KL(p || m) = sum p log(2p / (p + q)) = rel_entr(2p, p + q) / 2: halving p + q would
    # flush a subnormal entry to 0 (and make the divergence infinite)
    s = p + q
    js = 0.25 * (special.rel_entr(2.0 * p, s).sum(-1) + special.rel_entr(2.0 * q, s).sum(-1))
    return np.clip(js, 0.0, math.log(2.0))


def sqrt_js(p: object, q: object) -> float:
    """``sqrt(JS(p || q))`` with the natural log: the paper's privacy-leakage unit (Definition 4).

    A metric on probability vectors, in ``[0, sqrt(ln 2)]``; equals scipy's ``jensenshannon``
    (which can return NaN for nearly equal inputs, where rounding makes JS slightly negative).
    """
    return math.sqrt(js_divergence(p, q))


def sqrt_js_rows(rows: object, q: object) -> np.ndarray:
    """:func:`sqrt_js` of each row of ``rows`` ``[B, J]`` against ``q`` ``[J]``, vectorised
    (``[B]``). Each row is normalised to sum 1 first (rows of averaged posteriors, as the
    bootstrap of :mod:`privfl.distortion.measure` gives them); rows must be finite, ``>= 0``
    and not all zero."""
    q = check_distribution("q", q)
    p = np.asarray(rows, dtype=float)
    if p.ndim != 2 or p.shape[1] != q.size:
        raise ValueError(f"rows has shape {p.shape}: must be [B, {q.size}] (one distribution "
                         "per row, on the support of q)")
    totals = p.sum(1, keepdims=True)
    if not (np.isfinite(p).all() and (p >= 0).all() and (totals > 0).all()):
        raise ValueError("rows must be finite, >= 0 and have a positive sum in every row")
    return np.sqrt(_js(p / totals, q[None, :]))


def tv_discrete(p: object, q: object) -> float:
    """``TV(p, q) = 1/2 sum_i |p_i - q_i|`` for probability vectors on one finite support."""
    p, q = _pair(p, q)
    return float(min(0.5 * np.abs(p - q).sum(), 1.0))


def _chi2_mass(d: int, a: float, width: float) -> float:
    """``P(a <= X <= a + width)`` for ``X ~ chi2_d``, ``a, width >= 0``, without cancellation.

    A short interval (relative to the spread ``sqrt(2 d)``) is integrated with 12-point
    Gauss-Legendre on the log-density (accurate to ~1e-15 relative); a long one is the
    difference of the regularised incomplete gamma functions on the side of the median it
    lies on.
    """
    if width <= 0.0:
        return 0.0
    half, b = 0.5 * d, a + width
    if width < 1e-3 * math.sqrt(2.0 * d):
        rad = 0.5 * width
        mid = a + rad
        x = mid + rad * _GL_NODES
        log_pdf = (half - 1.0) * np.log(x) - 0.5 * x - half * math.log(2.0) - special.gammaln(half)
        return float(rad * np.dot(_GL_WEIGHTS, np.exp(log_pdf)))
    if a >= d:  # both in the upper tail: difference of survival functions
        return float(special.gammaincc(half, 0.5 * a) - special.gammaincc(half, 0.5 * b))
    return float(special.gammainc(half, 0.5 * b) - special.gammainc(half, 0.5 * a))


def tv_gaussian_isotropic(variance: float, distorted_variance: float, dimension: int) -> float:
    """Exact ``TV(N(mu, s1 I_d), N(mu, s2 I_d))`` (same mean ``mu``).

    With ``s1 < s2`` and ``e = s2 / s1 - 1`` the densities cross on ``||x - mu||^2 = r*``,
    ``r* = d ln(s2 / s1) / (1/s1 - 1/s2)``, so::

        TV = F_d(r* / s1) - F_d(r* / s2),   r* / s2 = d ln(1 + e) / e,  r* / s1 = (1 + e) r* / s2

    with ``F_d`` the chi-square CDF with ``d`` degrees of freedom. Symmetric in the two
    variances; 0 when they are equal. This is the TV of the paper's Lemma 6.7 setting
    (``s1 = sigma^2``, ``s2 = sigma^2 + sigma_eps^2``).
    """
    s1 = check_positive("variance", variance)
    s2 = check_positive("distorted_variance", distorted_variance)
    d = check_int("dimension", dimension, 1)
    lo, hi = min(s1, s2), max(s1, s2)
    ratio_minus_one = (hi - lo) / lo
    if ratio_minus_one == 0.0:
        return 0.0
    if math.isinf(ratio_minus_one):
        return 1.0
    factor = math.log1p(ratio_minus_one) / ratio_minus_one
    a = d * factor
    return float(min(max(_chi2_mass(d, a, a * ratio_minus_one), 0.0), 1.0))


def tv_gaussian_devroye(covariance: object, distorted_covariance: object) -> tuple[float, float]:
    """Devroye, Mehrabian and Reddad 2018, Theorem 1.1: for ``N(mu, S1)`` and ``N(mu, S2)``,
    with ``lambda_i`` the eigenvalues of ``S1^-1 S2 - I``::

        min{1, ||lambda||_2} / 100  <=  TV  <=  3/2 min{1, ||lambda||_2}

    ``covariance`` and ``distorted_covariance``: both 1-D (diagonal variances) or both
    ``d x d`` symmetric positive-definite matrices. Returns ``(lower, upper)``; the upper value
    can exceed 1 (TV itself never does).
    """
    c1, c2 = np.asarray(covariance, dtype=float), np.asarray(distorted_covariance, dtype=float)
    if c1.shape != c2.shape or c1.ndim not in (1, 2) or c1.size == 0:
        raise ValueError(f"covariance has shape {c1.shape} and distorted_covariance "
                         f"{c2.shape}: both must be 1-D variances or d x d matrices, same shape")
    if c1.ndim == 1:
        for name, c in (("covariance", c1), ("distorted_covariance", c2)):
            bad = ~np.isfinite(c) | (c <= 0)
            if bad.any():
                raise ValueError(f"{name} contains {float(c[bad][0])!r}: every variance must "
                                 "be in (0, inf)")
        lam = c2 / c1 - 1.0
    else:
        try:
            lam = linalg.eigh(c2, c1, eigvals_only=True) - 1.0
        except (linalg.LinAlgError, ValueError) as error:
            raise ValueError(f"covariance is not symmetric positive definite ({error})") from None
    x = min(1.0, float(np.linalg.norm(lam)))
    return x / 100.0, 1.5 * x


def tv_random_mask(keep_rate: float, dimension: int) -> float:
    """``TV(P, P~) = 1 - rho^d`` for random-mask compression (an extension of the paper).

    Each of the ``d`` coordinates is kept with probability ``rho`` and zeroed otherwise. If
    ``P`` gives no mass to parameters with a zero coordinate (e.g. it has a density), then
    ``P~ = rho^d P + (1 - rho^d) Q`` with ``Q`` carried by the coordinate hyperplanes, a
    ``P``-null set, so the TV is exactly ``1 - rho^d``.
    """
    rho = check_range("keep_rate", keep_rate, 0.0, 1.0)
    d = check_int("dimension", dimension, 1)
    if rho == 0.0:
        return 1.0
    return float(-math.expm1(d * math.log(rho)))


def tv_record_sampling(records: int, rate: float, base_rate: float) -> float:
    """TV between the laws of one Algorithm 2 step under Poisson record sampling at ``rate``
    and at ``base_rate`` (an extension; the paper treats sampling as a variance source).

    The likelihood ratio of a sampled subset ``S`` depends on ``|S|`` alone, so the TV of the
    subsets is ``TV(Binomial(n, rate), Binomial(n, base_rate))``; it equals the TV of the
    parameters when distinct subsets give distinct parameters (generic), and bounds it above
    otherwise (data processing).
    """
    from scipy import stats

    n = check_int("records", records, 1)
    p = check_range("rate", rate, 0.0, 1.0)
    q = check_range("base_rate", base_rate, 0.0, 1.0)
    k = np.arange(n + 1)
    return float(min(0.5 * np.abs(stats.binom.pmf(k, n, p) - stats.binom.pmf(k, n, q)).sum(),
                     1.0))
