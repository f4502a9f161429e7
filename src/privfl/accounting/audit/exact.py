"""The exact hockey-stick divergence of a pair of 1-D laws, by a robust crossing search.

``E_g(P || Q) = int (p(x) - g q(x))_+ dx`` with ``g = e^epsilon``.

Exact divergence (:func:`exact_divergence`, :func:`hockey_stick`)
-----------------------------------------------------------------
For a 1-D pair the real line is split at every crossing point of ``p - g q`` (the roots of
``h(x) = log p(x) - log q(x) - epsilon``); on the pieces where h > 0 the integral is the
difference of the two laws' masses of the piece, each a weighted sum of closed-form normal /
Laplace CDF differences. The masses are summed in log space and every CDF difference is formed
from whichever tail avoids cancellation (survival functions right of a component's centre, CDFs
left of it, ``erf`` when the piece straddles the centre), so the only cancellation left is the
final ``P(piece) - g Q(piece)``. A component mass at standardised endpoint u is accurate to
about ``eps_machine * (1 + u^2)`` relative, so the absolute error is below ~1e-14 and the
relative error about ``1e-16 (1 + u^2) P(piece) / delta``: ~1e-15 for ordinary deltas, up to
~1e-11 in far tails (delta << 1e-20). Values below ~1e-300 underflow to 0.

Crossings are located robustly: h is tabulated on a grid that is 1/16 of a component's scale
within 10 scales of every component's centre and coarser further out to ``K`` scales (K chosen so
that a component's mass beyond is below e^{-750 - epsilon}); each sign change of h between grid
points is refined with ``brentq``; and every local extremum of the tabulated h that points
towards 0 is maximised/minimised with a bounded scalar search, so that a pair of crossings inside
one grid cell is found too. Laplace kinks are grid points. The reported ``error`` adds the
rounding of every piece, the mass that could lie beyond the grid (by construction < 1e-300) and
the effect of root-location error. What it cannot cover is a pair of crossings so close together
that the tabulated h shows no extremum between them (features far finer than 1/16 of the smallest
component scale); mixtures of Gaussians and Laplaces with the scales used here have none.

``method="quad"`` integrates ``(p - g q)_+`` on the same pieces with ``scipy.integrate.quad``
instead of CDFs (a slower cross-check; ``error`` then assumes quad's 1e-11 relative).

Compositions (:class:`ProductLaw`) have an exact divergence here only when every factor pair is a
Gaussian shift ``N(m, s^2)`` vs ``N(m', s^2)`` (or identical laws): the product is then exactly
the Gaussian pair ``N(0, 1)`` vs ``N(mu, 1)`` with ``mu^2 = sum_i count_i ((m_i - m'_i)/s_i)^2``.
Other compositions (subsampled Gaussians over T steps, Laplace) are audited by Monte Carlo.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import integrate, optimize, special

from privfl._validation import check_choice, check_epsilon
from privfl.accounting.audit.laws import (
    GAUSSIAN,
    Law,
    MixtureLaw,
    UnsupportedAuditError,
    aligned_factors,
    check_law,
    gaussian,
)
from privfl.accounting.logspace import log1mexp

_SQRT2 = math.sqrt(2.0)
_MACHINE_EPS = float(np.finfo(float).eps)
_TAIL_NATS = 750.0  # a component's mass beyond the scanned window is below e^{-750 - epsilon}
_FINE_HALF_WIDTH = 10.0  # fine grid (1/16 scale) within 10 scales of every centre
_FINE_STEPS = 16


@dataclass(frozen=True)
class ExactDivergence:
    """``E_g(P || Q)`` with ``g = e^epsilon``, computed by piecewise integration.

    ``value`` is the divergence, ``error`` an estimated bound on its absolute numerical error,
    ``crossings`` the roots of ``p - g q`` that split the line, ``method`` how the pieces were
    integrated (or how a composition was reduced).
    """

    value: float
    error: float
    crossings: tuple[float, ...]
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "error": self.error,
            "crossings": list(self.crossings),
            "method": self.method,
        }


def _window(kind: int, epsilon: float) -> float:
    """Half-width (in scales) beyond which a component's mass is below e^{-750 - epsilon}."""
    nats = _TAIL_NATS + epsilon
    return math.sqrt(2.0 * nats) + 1.0 if kind == GAUSSIAN else nats + 1.0


def _grid(laws: Sequence[MixtureLaw], epsilon: float) -> np.ndarray:
    """Scan grid: fine near every centre, coarse in the tails, gaps between windows filled."""
    fine = np.linspace(
        -_FINE_HALF_WIDTH, _FINE_HALF_WIDTH, int(2 * _FINE_HALF_WIDTH * _FINE_STEPS) + 1
    )
    pieces = []
    windows = []
    for law in laws:
        for kind, loc, scale in zip(law.kinds, law.locs, law.scales, strict=True):
            k = _window(int(kind), epsilon)
            coarse_step = 0.25 if kind == GAUSSIAN else 1.0
            coarse = np.arange(_FINE_HALF_WIDTH, k + coarse_step, coarse_step)
            t = np.concatenate([-coarse[::-1], fine, coarse])
            pieces.append(loc + scale * t)
            windows.append((loc - scale * k, loc + scale * k))
    grid = np.unique(np.concatenate(pieces))
    # fill gaps between windows (both densities are negligible there; a few points suffice)
    windows.sort()
    fill = []
    reach = windows[0][1]
    for low, high in windows[1:]:
        if low > reach:
            fill.append(np.linspace(reach, low, 66)[1:-1])
        reach = max(reach, high)
    if fill:
        grid = np.unique(np.concatenate([grid, *fill]))
    return grid[np.isfinite(grid)]


def _log_tail_outside(law: MixtureLaw, epsilon: float) -> float:
    """log of the mass of ``law`` outside its components' scan windows (an upper bound)."""
    terms = []
    for kind, w in zip(law.kinds, law.log_weights, strict=True):
        k = _window(int(kind), epsilon)
        if kind == GAUSSIAN:
            terms.append(w + math.log(2.0) + float(special.log_ndtr(-k)))
        else:
            terms.append(w - k)
    return float(special.logsumexp(terms))


def _log_masses(law: MixtureLaw, a: float, b: float) -> np.ndarray:
    """log of each component's mass of [a, b] (a < b, possibly infinite), cancellation-free."""
    u = (a - law.locs) / law.scales
    v = (b - law.locs) / law.scales
    out = np.empty(law.size)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for index in range(law.size):
            ui, vi = float(u[index]), float(v[index])
            if law.kinds[index] == GAUSSIAN:
                if ui >= 0.0:  # right of the centre: survival functions
                    la, lb = special.log_ndtr(-ui), special.log_ndtr(-vi)
                    out[index] = la + log1mexp(lb - la)
                elif vi <= 0.0:  # left of the centre: CDFs
                    la, lb = special.log_ndtr(ui), special.log_ndtr(vi)
                    out[index] = lb + log1mexp(la - lb)
                else:  # straddles the centre: two positive erf terms
                    out[index] = math.log(
                        0.5 * (special.erf(vi / _SQRT2) + special.erf(-ui / _SQRT2))
                    )
            else:
                if ui >= 0.0:
                    out[index] = math.log(0.5) - ui + log1mexp(-(vi - ui))
                elif vi <= 0.0:
                    out[index] = math.log(0.5) + vi + log1mexp(ui - vi)
                else:
                    out[index] = math.log(-0.5 * math.expm1(ui) - 0.5 * math.expm1(-vi))
    return out


def _mass_condition(law: MixtureLaw, a: float, b: float) -> np.ndarray:
    """Relative rounding error of each component mass of [a, b] from :func:`_log_masses`.

    An endpoint x enters through u = (x - m)/s, rounded with absolute error ~eps (|x| + |m|)/s,
    and the log tail then moves by |d log sf/du| ~ |u| + 1 (Gaussian) or 1 (Laplace) per unit
    of u; the log tail itself (|log sf| ~ u^2/2 + |u| + 1) is accurate to a few ulps.
    """
    total = np.full(law.size, 8.0 * _MACHINE_EPS)
    gauss = law.kinds == GAUSSIAN
    for x in (a, b):
        if not math.isfinite(x):
            continue
        u = np.abs(x - law.locs) / law.scales
        arg = (abs(x) + np.abs(law.locs)) / law.scales
        slope = np.where(gauss, u + 1.0, 1.0)
        size = np.where(gauss, 0.5 * u * u + u + 1.0, u + 1.0)
        total += 4.0 * _MACHINE_EPS * (slope * arg + size)
    return total


class _LogRatio:
    """h(x) = log p(x) - log q(x) - epsilon, vectorised."""

    def __init__(self, P: MixtureLaw, Q: MixtureLaw, epsilon: float) -> None:
        self.P, self.Q, self.epsilon = P, Q, epsilon

    def __call__(self, x: np.ndarray | float) -> np.ndarray:
        return self.P.logpdf(x) - self.Q.logpdf(x) - self.epsilon

    def scalar(self, x: float) -> float:
        return float(self(np.array([x]))[0])


def _crossings(h: _LogRatio, grid: np.ndarray) -> list[float]:
    """All roots of h: sign changes on the grid, plus pairs hidden next to local extrema."""
    values = h(grid)
    positive = values > 0.0
    roots: list[float] = []
    xtol = 1e-14

    def refine(a: float, b: float) -> float:
        return float(
            optimize.brentq(h.scalar, a, b, xtol=xtol * max(1.0, abs(a)), rtol=1e-15, maxiter=200)
        )

    for i in np.flatnonzero(positive[1:] != positive[:-1]):
        roots.append(refine(float(grid[i]), float(grid[i + 1])))
    # local extrema pointing towards zero, with no crossing in the two adjacent cells
    diffs = np.diff(values)
    interior = np.arange(1, grid.size - 1)
    left, right = diffs[:-1], diffs[1:]
    is_max = (left > 0) & (right < 0)
    is_min = (left < 0) & (right > 0)
    mid = values[interior]
    towards_zero = (is_max & (mid <= 0.0)) | (is_min & (mid > 0.0))
    reach = 4.0 * np.maximum(np.abs(left), np.abs(right)) + 1e-12
    candidates = interior[towards_zero & (np.abs(mid) <= reach)]
    for i in candidates:
        a, b = float(grid[i - 1]), float(grid[i + 1])
        if positive[i - 1] != positive[i] or positive[i] != positive[i + 1]:
            continue  # a crossing is already bracketed there
        sign = 1.0 if values[i] <= 0.0 else -1.0  # maximise h below zero, minimise above
        res = optimize.minimize_scalar(
            lambda x, s=sign: -s * h.scalar(x),
            bounds=(a, b),
            method="bounded",
            options={"xatol": 1e-13 * max(1.0, abs(a))},
        )
        x_star = float(res.x)
        h_star = h.scalar(x_star)
        if (h_star > 0.0) != bool(positive[i]):
            roots.append(refine(a, x_star))
            roots.append(refine(x_star, b))
    return sorted(roots)


def _quad_piece(h: _LogRatio, P: MixtureLaw, a: float, b: float, grid: np.ndarray) -> float:
    """int_a^b (p - g q)_+ dx by scipy quad on sub-intervals of about one scale."""
    inner = grid[(grid > a) & (grid < b)]
    stride = max(1, _FINE_STEPS)
    cuts = np.concatenate([[a], inner[::stride], [b]])
    cuts = cuts[np.isfinite(cuts)]
    if not np.isfinite(a):
        cuts = np.concatenate([[-np.inf], cuts])
    if not np.isfinite(b):
        cuts = np.concatenate([cuts, [np.inf]])
    cuts = np.unique(cuts)

    def integrand(x: float) -> float:
        log_p = float(P.logpdf(np.array([x]))[0])
        gap = h.scalar(x)
        return math.exp(log_p) * -math.expm1(-gap) if gap > 0 else 0.0

    total = 0.0
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        value, _ = integrate.quad(integrand, lo, hi, epsabs=0.0, epsrel=1e-12, limit=200)
        total += value
    return total


def _exact_1d(P: MixtureLaw, Q: MixtureLaw, epsilon: float, method: str) -> ExactDivergence:
    if P.same_as(Q):
        return ExactDivergence(0.0, 0.0, (), "identical laws")
    h = _LogRatio(P, Q, epsilon)
    grid = _grid((P, Q), epsilon)
    roots = _crossings(h, grid)
    edges = [-math.inf, *roots, math.inf]
    total = 0.0
    error = 0.0
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if b <= a:
            continue
        if math.isinf(a) and math.isinf(b):
            probe = float(grid[grid.size // 2])
        elif math.isinf(a):
            probe = float(grid[0]) if grid[0] < b else b - 1.0
        elif math.isinf(b):
            probe = float(grid[-1]) if grid[-1] > a else a + 1.0
        else:
            probe = 0.5 * (a + b)
        if h.scalar(probe) <= 0.0:
            continue
        terms_p = P.log_weights + _log_masses(P, a, b)
        terms_q = epsilon + Q.log_weights + _log_masses(Q, a, b)
        log_a = float(special.logsumexp(terms_p))
        log_b = float(special.logsumexp(terms_q))
        if method == "quad":
            piece = _quad_piece(h, P, a, b, grid)
            error += 1e-11 * piece + 64 * _MACHINE_EPS * math.exp(log_a)
        else:
            piece = math.exp(log_a) * -math.expm1(log_b - log_a) if log_b < log_a else 0.0
            # rounding of each component mass (relative, see _mass_condition) and of the sums
            log_err = special.logsumexp(
                np.concatenate(
                    [
                        terms_p + np.log(_mass_condition(P, a, b)),
                        terms_q + np.log(_mass_condition(Q, a, b)),
                    ]
                )
            )
            n_terms = P.size + Q.size
            error += math.exp(log_err) + 4.0 * _MACHINE_EPS * n_terms * (
                math.exp(log_a) + math.exp(log_b)
            )
        total += max(piece, 0.0)
    # mass beyond the scanned windows, and root-location effects
    tail = math.exp(_log_tail_outside(P, epsilon)) + math.exp(
        epsilon + _log_tail_outside(Q, epsilon)
    )
    for r in roots:
        eta = 64 * _MACHINE_EPS * max(1.0, abs(float(h.P.logpdf(r))))
        step = 1e-6 * max(1.0, abs(r))
        slope = abs(h.scalar(r + step) - h.scalar(r - step)) / (2 * step)
        dx = 1e-14 * max(1.0, abs(r)) + (eta / slope if slope > 0 else step)
        error += math.exp(float(P.logpdf(r))) * eta * dx
    error += tail
    label = "piecewise CDF" if method == "cdf" else "piecewise quad"
    return ExactDivergence(min(total, 1.0), error, tuple(roots), label)


def _gaussian_shift_mu(factors: list[tuple[MixtureLaw, MixtureLaw, int]]) -> float | None:
    """mu if every factor pair is N(m, s^2) vs N(m', s^2) or identical laws, else None."""
    mu2 = 0.0
    for p, q, count in factors:
        if p.same_as(q):
            continue
        if (
            p.size == 1
            and q.size == 1
            and p.kinds[0] == GAUSSIAN
            and q.kinds[0] == GAUSSIAN
            and p.scales[0] == q.scales[0]
        ):
            mu2 += count * ((p.locs[0] - q.locs[0]) / p.scales[0]) ** 2
            continue
        return None
    return math.sqrt(mu2)


def exact_divergence(P: Law, Q: Law, epsilon: float, *, method: str = "cdf") -> ExactDivergence:
    """Exact ``E_g(P || Q)``, ``g = e^epsilon``, with an error bound and the crossing points.

    ``P`` and ``Q`` are 1-D laws, or products with the same number of steps whose factor pairs
    are all Gaussian shifts with equal scales (reduced exactly to one Gaussian pair). Other
    products raise :class:`UnsupportedAuditError` (use :func:`monte_carlo_hockey_stick`).
    ``method`` is ``"cdf"`` (closed-form CDFs, default) or ``"quad"`` (scipy quad, a cross-check).
    """
    P = check_law("P", P)
    Q = check_law("Q", Q)
    epsilon = check_epsilon("epsilon", epsilon)
    method = check_choice("method", method, ("cdf", "quad"))
    if isinstance(P, MixtureLaw) and isinstance(Q, MixtureLaw):
        return _exact_1d(P, Q, epsilon, method)
    factors = aligned_factors(P, Q)
    if len(factors) == 1 and factors[0][2] == 1:
        return _exact_1d(factors[0][0], factors[0][1], epsilon, method)
    mu = _gaussian_shift_mu(factors)
    if mu is None:
        raise UnsupportedAuditError(
            "P, Q = a composition whose steps are not all Gaussian shift pairs has no exact "
            "hockey-stick divergence here: audit it by Monte Carlo (monte_carlo_samples >= 2)"
        )
    if mu == 0.0:
        return ExactDivergence(0.0, 0.0, (), "identical laws")
    reduced = _exact_1d(gaussian(mu, 1.0), gaussian(0.0, 1.0), epsilon, method)
    return ExactDivergence(
        reduced.value,
        reduced.error,
        reduced.crossings,
        f"composition of Gaussian shifts = N(mu, 1) vs N(0, 1), mu = {mu:.12g} ({reduced.method})",
    )


def hockey_stick(P: Law, Q: Law, epsilon: float) -> float:
    """``E_g(P || Q) = int (p - e^epsilon q)_+``, exact (see :func:`exact_divergence`)."""
    return exact_divergence(P, Q, epsilon).value


def hockey_stick_both(P: Law, Q: Law, epsilon: float) -> tuple[float, float, float]:
    """``(E_g(P || Q), E_g(Q || P), max of the two)``: the pair's delta(epsilon)."""
    forward = exact_divergence(P, Q, epsilon).value
    backward = exact_divergence(Q, P, epsilon).value
    return forward, backward, max(forward, backward)
