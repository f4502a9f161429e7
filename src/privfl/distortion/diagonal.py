"""TV between two Gaussians with the same mean and diagonal (per-coordinate) covariances.

Zhang, Chen and Yang 2022 (Lemmas 6.7 and 6.8) model the protected parameter as
``N(mu, sigma^2 I_d)``; trained parameters are far from isotropic (their per-coordinate
variances span orders of magnitude), and the isotropic TV can then be wrong by a large factor.
For ``P = N(mu, diag(a))`` and ``Q = N(mu, diag(b))`` only the ratios ``r_i = b_i / a_i``
matter. In whitened coordinates ``z_i = (x_i - mu_i) / sqrt(a_i)``::

    log q/p = T - t*,   T = sum_i c_i z_i^2,   c_i = (1 - 1/r_i) / 2,   t* = sum_i ln(r_i) / 2

so ``TV = Q(T > t*) - P(T > t*)`` with ``T`` a weighted sum of chi-square(1) variables under
both laws (weights ``c_i`` under ``P``, ``c_i r_i = (r_i - 1) / 2`` under ``Q``).

* equal ratios: the closed form of :func:`~privfl.distortion.divergence.tv_gaussian_isotropic`
  (exact);
* otherwise the two tail probabilities by Imhof's (1961) inversion of the characteristic
  function, integrated to a cut-off whose tail is bounded in closed form
  (:func:`tv_gaussian_diagonal`, ``method = "numerical"``, with an error estimate);
* always a certified bracket (:func:`tv_diagonal_bracket`): Hellinger (Le Cam), Pinsker and
  Bretagnolle-Huber from the closed-form Bhattacharyya coefficient and KL, Devroye, Mehrabian and
  Reddad 2018 (Theorem 1.1, constants 1/100 and 3/2), and the exact TV of the coordinate with
  the largest ratio (data processing);
* a Monte Carlo estimate ``E_P[(1 - q/p)_+]`` with its standard error
  (:func:`tv_diagonal_monte_carlo`), an independent check.

:func:`noise_variance_diagonal` solves for the isotropic noise ``sigma_eps^2`` (added to every
coordinate) that reaches a TV target under per-coordinate variances.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from scipy import integrate, optimize

from privfl._validation import check_int, check_range
from privfl.distortion.divergence import tv_gaussian_isotropic
from privfl.distortion.imhof import PowerSums, terms_direct

__all__ = [
    "INTEGRANDS",
    "DiagonalTV",
    "check_variances",
    "noise_variance_diagonal",
    "tv_diagonal_bracket",
    "tv_diagonal_monte_carlo",
    "tv_gaussian_diagonal",
]

#: Ratios whose spread (max / min - 1) is below this are treated as equal (closed form).
_EQUAL_RATIOS = 1e-12
#: The neglected tail of Imhof's integral is certified below this (absolute, per probability).
_TAIL = 1e-13
#: Gauss-Legendre rules per piece of Imhof's integral (the pair estimates the error).
_GL_COARSE = np.polynomial.legendre.leggauss(8)
_GL_FINE = np.polynomial.legendre.leggauss(16)
#: How Imhof's integrand is evaluated: by power sums with a certified truncation bound (the
#: default, :class:`~privfl.distortion.imhof.PowerSums`), or directly (the reference).
INTEGRANDS = ("power sums", "direct")
#: Beyond this many standard-deviation widths, Imhof's integrand decays too slowly for pieces.
_MAX_PIECES = 2000


def check_variances(name: str, value: object) -> np.ndarray:
    """One variance per coordinate: a non-empty 1-D array of finite values > 0."""
    try:
        v = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {value!r} is not an array of variances") from None
    if v.ndim != 1 or v.size == 0:
        raise ValueError(f"{name} has shape {v.shape}: must be a non-empty 1-D array (one "
                         "variance per coordinate)")
    bad = ~np.isfinite(v) | (v <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name}[{i}] = {float(v[i])!r} is out of range: every variance must "
                         "be in (0, inf)")
    return v


def _ratios(variances: object, distorted_variances: object) -> np.ndarray:
    a = check_variances("variances", variances)
    b = check_variances("distorted_variances", distorted_variances)
    if a.shape != b.shape:
        raise ValueError(f"variances has {a.size} entries and distorted_variances {b.size}: "
                         "give one of each per coordinate")
    return b / a


def _x_minus_log1p(e: np.ndarray) -> np.ndarray:
    """``e - log(1 + e)`` for ``e > -1`` without cancellation (series for ``|e| < 0.01``)."""
    e = np.asarray(e, dtype=float)
    small = np.abs(e) < 1e-2
    out = np.where(small, 0.0, e - np.log1p(np.where(small, 0.0, e)))
    es = e[small]
    series = np.zeros_like(es)
    for k in range(12, 1, -1):  # sum_{k>=2} (-1)^k e^k / k
        series = es * (series + (-1.0) ** k / k)
    out[small] = es * series
    return out


# ----------------------------------------------------------------------- certified bracket
@dataclass(frozen=True)
class _Closed:
    """The closed-form divergences of the pair, from the ratios ``r``."""

    hellinger2: float  # 1 - Bhattacharyya coefficient
    kl_pq: float
    kl_qp: float
    lam_norm: float  # ||r - 1||_2 (Devroye et al.)


def _closed(r: np.ndarray) -> _Closed:
    e = r - 1.0
    # BC = prod (2 sqrt(r) / (1 + r))^(1/2); log term = -(1/2) log((1 + r) / (2 sqrt r))
    #    = -(1/4) log(1 + (r - 1)^2 / (4 r))
    log_bc = -0.25 * float(np.sum(np.log1p(e * e / (4.0 * r))))
    # KL(P||Q) = 1/2 sum (1/r - 1 + ln r); KL(Q||P) = 1/2 sum (r - 1 - ln r)
    kl_qp = 0.5 * float(np.sum(_x_minus_log1p(e)))
    f = 1.0 / r - 1.0
    kl_pq = 0.5 * float(np.sum(_x_minus_log1p(f)))
    return _Closed(-math.expm1(log_bc), kl_pq, kl_qp, float(np.linalg.norm(e)))


def _tv_one_coordinate(ratio: float) -> float:
    return tv_gaussian_isotropic(1.0, ratio, 1)


def tv_diagonal_bracket(variances: object, distorted_variances: object
                        ) -> tuple[float, str, float, str]:
    """A certified ``(lower, lower_source, upper, upper_source)`` for
    ``TV(N(mu, diag(a)), N(mu, diag(b)))``.

    Lower: the largest of ``H^2 = 1 - BC`` (Le Cam), ``min(1, ||r - 1||_2) / 100`` (Devroye,
    Mehrabian and Reddad 2018, Theorem 1.1; ``r_i = b_i / a_i``) and the exact TV of the one
    coordinate with the most extreme ratio (a marginal: data processing). Upper: the smallest of
    ``sqrt(1 - BC^2)`` (Le Cam), ``sqrt(KL / 2)`` (Pinsker), ``sqrt(1 - exp(-KL))``
    (Bretagnolle-Huber), both KL directions, and ``1.5 min(1, ||r - 1||_2)`` (Devroye et al.).
    Every term is in closed form (up to floating-point rounding).
    """
    r = _ratios(variances, distorted_variances)
    c = _closed(r)
    worst = float(r[np.argmax(np.abs(np.log(r)))])
    lowers = {"Hellinger: 1 - BC (Le Cam)": c.hellinger2,
              "Devroye et al. 2018: min(1, ||r - 1||) / 100": min(1.0, c.lam_norm) / 100.0,
              "one coordinate (data processing)": _tv_one_coordinate(worst)}
    bc = 1.0 - c.hellinger2
    kl = min(c.kl_pq, c.kl_qp)
    uppers = {"Hellinger: sqrt(1 - BC^2) (Le Cam)": math.sqrt(max(0.0, (1.0 - bc) * (1.0 + bc))),
              "Pinsker: sqrt(KL / 2)": math.sqrt(0.5 * kl),
              "Bretagnolle-Huber: sqrt(1 - exp(-KL))": math.sqrt(-math.expm1(-kl)),
              "Devroye et al. 2018: 1.5 min(1, ||r - 1||)": 1.5 * min(1.0, c.lam_norm),
              "TV <= 1": 1.0}
    low_source = max(lowers, key=lambda k: lowers[k])
    up_source = min(uppers, key=lambda k: uppers[k])
    return (min(lowers[low_source], 1.0), low_source, min(uppers[up_source], 1.0), up_source)


# ----------------------------------------------------------------------- Imhof inversion
def _tail_bound(lam: np.ndarray, u: float, k: np.ndarray) -> float:
    """A bound on ``int_u^inf du' / (u' rho(u'))``. ``log(1 + lam^2 e^{2s})`` is convex in
    ``s = log u``, so ``log rho(u') >= log rho(u) + m log(u'/u)`` with ``m = (1/2) sum lam^2
    u^2 / (1 + lam^2 u^2)``, and the tail is at most ``1 / (m rho(u))`` (``k``: how many
    coordinates share each ``lam``)."""
    x2 = (lam * u) ** 2
    m = 0.5 * float(k @ (x2 / (1.0 + x2)))
    if m <= 0.0:
        return math.inf
    return math.exp(-0.25 * float(k @ np.log1p(x2))) / m


def _integrands(lam_p: np.ndarray, lam_q: np.ndarray, k: np.ndarray, integrand: str
                ) -> tuple[Callable, Callable]:
    """The two laws' Imhof integrands ``u -> (values, truncation bound)``: by power sums
    (:class:`~privfl.distortion.imhof.PowerSums`, certified truncation) or ``direct``."""
    if integrand == "direct":
        return tuple((lambda shift, u, lam=lam: (terms_direct(lam, shift, u, k), 0.0))
                     for lam in (lam_p, lam_q))
    return tuple(PowerSums(lam, k).terms for lam in (lam_p, lam_q))


def _imhof_pass(terms: tuple[Callable, Callable], shift_p: float, shift_q: float, cut: float,
                width: float) -> tuple[float, float]:
    """One Gauss-Legendre pass over ``[0, cut]`` (pieces of ``width`` up to ``8 width``, then
    growing by 1.5): the 16-node value and its error (its difference from the 8-node one plus
    the integrand's truncation bound, integrated by the 16-node rule)."""
    edges = [0.0]
    step = width
    while edges[-1] < cut:
        edges.append(min(cut, edges[-1] + step))
        if edges[-1] >= 8.0 * width:
            step *= 1.5
    lo, hi = np.array(edges[:-1]), np.array(edges[1:])
    half, mid = 0.5 * (hi - lo), 0.5 * (hi + lo)
    estimates, truncation = [], 0.0
    for nodes, weights in (_GL_COARSE, _GL_FINE):
        u = (mid[:, None] + half[:, None] * nodes[None, :]).ravel()
        (fp, ep), (fq, eq) = terms[0](shift_p, u), terms[1](shift_q, u)
        estimates.append(float(np.sum(half * ((fq - fp).reshape(lo.size, -1) @ weights))))
        bound = np.broadcast_to(np.asarray(ep + eq, dtype=float), u.shape)
        truncation = float(np.sum(half * (bound.reshape(lo.size, -1) @ weights)))
    return estimates[1], abs(estimates[1] - estimates[0]) + truncation


def _imhof_difference(r: np.ndarray, k: np.ndarray, integrand: str = "power sums"
                      ) -> tuple[float, float]:
    """``Q(T > t*) - P(T > t*)`` by Imhof 1961 and its error: Gauss-Legendre on pieces of
    ``[0, cut]`` (the difference of two rules estimates the quadrature error; pieces are halved
    until it is below 1e-10) plus the certified bound on the tail beyond ``cut``. ``r``: the
    ratios, ``k``: how many coordinates have each; ``integrand``: how Imhof's integrand is
    evaluated, see :data:`INTEGRANDS`)."""
    e = r - 1.0
    lam_p = 0.5 * e / r
    lam_q = 0.5 * e
    # sum lam - t* under each law without cancellation: under P (1/2) sum (e / r - log r)
    # = -(1/2) sum (f - log1p(f)) with f = 1/r - 1; under Q (1/2) sum (e - log1p(e))
    shift_p = -0.5 * float(k @ _x_minus_log1p(1.0 / r - 1.0))
    shift_q = 0.5 * float(k @ _x_minus_log1p(e))
    scale = math.sqrt(float(k @ (lam_q * lam_q)) + float(k @ (lam_p * lam_p)))
    cut = 1.0 / scale
    while _tail_bound(lam_p, cut, k) + _tail_bound(lam_q, cut, k) > _TAIL * math.pi:
        cut *= 1.5
    width = 1.0 / scale
    terms = _integrands(lam_p, lam_q, k, integrand)
    if cut > _MAX_PIECES * width:  # slow decay (few coordinates): oscillatory quadrature
        return _imhof_fourier(lam_p, lam_q, 0.25 * float(k @ np.log(r)), 8.0 * width, k)
    for _ in range(5):
        value, error = _imhof_pass(terms, shift_p, shift_q, cut, width)
        if error <= 1e-10 * math.pi:
            break
        width /= 2.0
    return value / math.pi, error / math.pi + 2.0 * _TAIL


def _imhof_fourier(lam_p: np.ndarray, lam_q: np.ndarray, omega: float, split: float,
                   k: np.ndarray) -> tuple[float, float]:
    """Imhof's integral with ``theta = g(u) - omega u`` split into ``cos(omega u)`` and
    ``sin(omega u)`` parts: adaptive quadrature on ``[0, split]``, QUADPACK's QAWF (Fourier
    integrals) beyond; the error is QUADPACK's estimate."""
    def parts(u: float) -> tuple[float, float]:
        out = []
        for lam in (lam_q, lam_p):
            g = 0.5 * float(k @ np.arctan(lam * u))
            out.append((math.sin(g), math.cos(g), math.exp(-0.25 * float(
                k @ np.log1p((lam * u) ** 2)))))
        (sq, cq, iq), (sp, cp, ip) = out
        return (sq * iq - sp * ip) / u, -(cq * iq - cp * ip) / u

    def near(u: float) -> float:
        if u == 0.0:
            return 0.5 * float(k @ lam_q - k @ lam_p)
        a, b = parts(u)
        return a * math.cos(omega * u) + b * math.sin(omega * u)

    with warnings.catch_warnings():
        warnings.simplefilter("error", integrate.IntegrationWarning)
        try:
            total, error = integrate.quad(near, 0.0, split, epsabs=1e-13, epsrel=1e-11,
                                          limit=500)
            for index, weight in ((0, "cos"), (1, "sin")):
                value, err = integrate.quad(lambda u, i=index: parts(u)[i], split, np.inf,
                                            weight=weight, wvar=omega, epsabs=1e-13,
                                            limlst=200)
                total += value
                error += err
        except integrate.IntegrationWarning:
            return math.nan, math.inf  # QUADPACK gave up: the caller falls back on the bracket
    return total / math.pi, error / math.pi


@dataclass(frozen=True)
class DiagonalTV:
    """``TV(N(mu, diag(a)), N(mu, diag(b)))``: the value, its error, and a certified bracket.

    ``tv``: exact (equal ratios: chi-square form; ``error`` 0) or numerical (Imhof inversion;
    ``error`` is the quadrature's estimate plus a certified bound on the truncated tail).
    ``tv_lower``/``tv_upper``: closed-form bounds that hold whatever the numerics do, with the
    inequality that gave each.
    """

    tv: float
    error: float
    method: str
    tv_lower: float
    tv_upper: float
    lower_source: str
    upper_source: str
    dimension: int
    ratio_min: float
    ratio_max: float

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _integrand(integrand: object) -> str:
    if integrand not in INTEGRANDS:
        raise ValueError(f"integrand = {integrand!r} is not allowed: must be one of "
                         f"{', '.join(map(repr, INTEGRANDS))}")
    return str(integrand)


def tv_gaussian_diagonal(variances: object, distorted_variances: object, *,
                         integrand: str = "power sums") -> DiagonalTV:
    """``TV(N(mu, diag(a)), N(mu, diag(b)))`` (same mean ``mu``), one variance per coordinate.

    Exact by the chi-square form when all ratios ``b_i / a_i`` are equal, else by Imhof's
    inversion (see the module docstring; ``integrand``: one of :data:`INTEGRANDS`, the same
    value to the reported ``error``, which includes the power sums' truncation bound); always
    with the certified bracket of :func:`tv_diagonal_bracket`.
    """
    how = _integrand(integrand)
    r = _ratios(variances, distorted_variances)
    lower, low_source, upper, up_source = tv_diagonal_bracket(variances, distorted_variances)
    d = int(r.size)
    rmin, rmax = float(r.min()), float(r.max())
    common = {"tv_lower": lower, "tv_upper": upper, "lower_source": low_source,
              "upper_source": up_source, "dimension": d, "ratio_min": rmin, "ratio_max": rmax}
    if rmax / rmin - 1.0 <= _EQUAL_RATIOS:
        tv = tv_gaussian_isotropic(1.0, float(np.median(r)), d)
        return DiagonalTV(tv, 0.0, "exact: chi-square form (equal ratios)", **common)
    if upper <= 1e-12:
        return DiagonalTV(upper / 2, upper / 2, "bracket: TV below 1e-12", **common)
    if lower >= 1.0 - 1e-12:
        return DiagonalTV(1.0, 1.0 - lower, "bracket: TV above 1 - 1e-12", **common)
    tv, error = _imhof_difference(r, np.ones(r.size), how)
    if not math.isfinite(tv) or error >= 0.5 * (upper - lower):
        return DiagonalTV(0.5 * (lower + upper), 0.5 * (upper - lower),
                          "bracket: midpoint (the numerical inversion did not converge)",
                          **common)
    tv = min(max(tv, lower), upper)
    return DiagonalTV(tv, error, "numerical: Imhof (1961) inversion of the likelihood ratio",
                      **common)


def tv_diagonal_monte_carlo(variances: object, distorted_variances: object, draws: int = 20_000,
                            seed: int = 0) -> tuple[float, float]:
    """Monte Carlo ``TV = E_P[(1 - q/p)_+]`` over ``draws`` whitened draws from ``P``:
    ``(estimate, standard error)``, an estimate independent of the numerical inversion."""
    r = _ratios(variances, distorted_variances)
    n = check_int("draws", draws, 2, 10_000_000)
    rng = np.random.default_rng(check_int("seed", seed, 0))
    c = 0.5 * (1.0 - 1.0 / r)
    t_star = 0.5 * float(np.sum(np.log(r)))
    values = np.empty(n)
    chunk = max(1, 2_000_000 // r.size)
    for start in range(0, n, chunk):
        z = rng.standard_normal((min(chunk, n - start), r.size))
        log_ratio = (z * z) @ c - t_star
        values[start:start + z.shape[0]] = -np.expm1(np.minimum(log_ratio, 0.0))
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(n))


# ----------------------------------------------------------------------- calibration
def _compressed(variances: np.ndarray, bins: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """``(representative variances, counts)``: the variances grouped into ``bins`` bins of
    equal width in ``log`` (each represented by its mean): an approximation for root finding."""
    logs = np.log(variances)
    edges = np.linspace(logs.min(), logs.max(), bins + 1)
    index = np.clip(np.searchsorted(edges, logs, side="right") - 1, 0, bins - 1)
    counts = np.bincount(index, minlength=bins).astype(float)
    sums = np.bincount(index, weights=variances, minlength=bins)
    keep = counts > 0
    return sums[keep] / counts[keep], counts[keep]


def noise_variance_diagonal(variances: object, target_tv: float, *,
                            integrand: str = "power sums") -> float:
    """The isotropic noise ``sigma_eps^2`` with ``TV(N(mu, diag(a)), N(mu, diag(a +
    sigma_eps^2))) = target_tv`` (to 1e-9 relative in the TV, by :func:`tv_gaussian_diagonal`).

    Brent's method on ``log sigma_eps^2`` with the variances grouped into 512 log-spaced bins
    (Imhof's inversion with multiplicities: cheap), then secant steps on the exact TV.
    ``target_tv <= 0`` gives 0; ``>= 1`` is infeasible (ValueError). ``integrand``: as in
    :func:`tv_gaussian_diagonal`.
    """
    how = _integrand(integrand)
    a = check_variances("variances", variances)
    target = check_range("target_tv", target_tv, -1.0, 1.0)
    if target <= 0:
        return 0.0
    if target >= 1.0:
        raise ValueError(f"target_tv = {target!r} is infeasible: TV < 1 for every finite noise "
                         "variance; ask for a target in (0, 1)")
    grouped, counts = _compressed(a) if a.size > 2048 else (a, np.ones(a.size))

    def approximate(log_noise: float) -> float:
        r = 1.0 + math.exp(log_noise) / grouped
        if float(r.max()) / float(r.min()) - 1.0 <= _EQUAL_RATIOS:
            return tv_gaussian_isotropic(1.0, float(r[0]), a.size) - target
        tv = _imhof_difference(r, counts, how)[0]
        return (tv if math.isfinite(tv) else tv_gaussian_diagonal(
            a, a + math.exp(log_noise), integrand=how).tv) - target

    # for small x the TV is about x / (2 sqrt(pi)), x = sigma_eps^2 sqrt(d) / sigma^2
    low = math.log(target * float(a.min()) / math.sqrt(a.size))
    high = low + 2.0
    while approximate(low) > 0:
        low -= 2.0
    while approximate(high) < 0:
        high += 2.0
        if high > 700.0:
            raise ValueError(f"target_tv = {target!r} is infeasible in floating point")
    x = optimize.brentq(approximate, low, high, xtol=1e-12, rtol=1e-12, maxiter=200)

    def exact(log_noise: float) -> float:
        return math.log(tv_gaussian_diagonal(a, a + math.exp(log_noise), integrand=how).tv
                        / target)

    if grouped.size == a.size:
        return math.exp(x)
    x0, f0 = x, exact(x)
    x1 = x0 - f0  # d log TV / d log noise is about 1 for small TV
    for _ in range(20):
        f1 = exact(x1)
        if abs(f1) <= 1e-9:
            return math.exp(x1)
        step = f1 * (x1 - x0) / (f1 - f0) if f1 != f0 else f1
        x0, f0, x1 = x1, f1, x1 - step
    return math.exp(optimize.brentq(exact, x1 - 1.0, x1 + 1.0, xtol=1e-12))
