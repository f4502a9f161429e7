"""Audit a claimed (epsilon, delta) on a concrete pair of neighbouring output laws in 1-D.

An accountant *claims* that a mechanism is (epsilon, delta)-DP. For one concrete pair of
neighbouring inputs D, D' the mechanism's outputs have laws P = M(D) and Q = M(D'), and the claim
implies (Balle et al. 2018; spec seed3 section 2.1)

    E_g(P || Q) <= delta  and  E_g(Q || P) <= delta,   g = e^epsilon,

with the hockey-stick divergence ``E_g(P || Q) = int (p(x) - g q(x))_+ dx``. This module computes
both sides of that inequality for one-dimensional output laws: Gaussians, Laplaces and finite
mixtures of them (the Poisson-subsampled Gaussian, random participation), and T-fold products of
such pairs (composition). A computed ``E_g > delta`` on one pair *disproves* the claim; passing on
some pairs proves nothing about the others (use a proven accountant for that).

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

Monte Carlo (:func:`monte_carlo_hockey_stick`)
----------------------------------------------
With X ~ P and the privacy loss ``L = log p(X) - log q(X)`` (a sum over factors for products),
``E_g(P || Q) = E[(1 - e^{epsilon - L})_+]``, the mean of a variable in [0, 1]. The estimator is
the sample mean over ``samples`` i.i.d. draws from a seeded ``numpy.random.Generator``, drawn in
chunks (memory stays bounded). Intervals at level ``confidence``:

* ``"bernstein"`` (default, rigorous for every n >= 2): the empirical-Bernstein bound of Maurer
  and Pontil (2009, Theorem 4) applied to Y and 1 - Y, each side at ``(1 - confidence) / 2``:
  ``mean +- ( sqrt(2 V ln(4 / (1 - c)) / n) + 7 ln(4 / (1 - c)) / (3 (n - 1)) )`` with V the
  unbiased sample variance. Each one-sided bound holds with probability >= 1 - (1 - c)/2.
* ``"clt"``: ``mean +- z_{(1+c)/2} sd / sqrt(n)``, the usual normal approximation (not a
  guarantee; poor when few draws have L > epsilon).

Audit (:func:`audit`)
---------------------
:func:`audit` reports both directions, the larger one, and ``violated``:

* with an exact divergence: ``max_direction E_g - delta > tolerance``, ``tolerance`` = the
  numerical error bound plus ``rtol * delta`` (default rtol = 1e-9, so a claim that equals the
  truth up to the rounding of the claimant's own numerics is not flagged);
* Monte Carlo only: the lower end of the interval exceeds delta in some direction (a violation at
  confidence >= 1 - (1 - c)/2 for the Bernstein interval).

The pair builders (:func:`gaussian_pair`, :func:`laplace_pair`, :func:`subsampled_gaussian_pair`,
:func:`participation_pair`, :func:`pair_for_event`) return an :class:`AdversarialPair` that labels
what each direction means (e.g. "remove the record" vs "add the record").

This module needs numpy and scipy only (never torch).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import integrate, optimize, special, stats

from privfl._validation import (
    check_choice,
    check_epsilon,
    check_int,
    check_positive,
    check_probability,
    check_range,
    check_rate,
    check_real,
)
from privfl.accounting.events import (
    Neighbouring,
    Noise,
    PrivacyEvent,
    Sampling,
    UnsupportedEventError,
)
from privfl.accounting.logspace import log1mexp

__all__ = [
    "AdversarialPair",
    "AuditReport",
    "ExactDivergence",
    "Law",
    "MixtureLaw",
    "MonteCarloEstimate",
    "ProductLaw",
    "UnsupportedAuditError",
    "audit",
    "audit_accountants",
    "compose",
    "exact_divergence",
    "gaussian",
    "gaussian_pair",
    "hockey_stick",
    "hockey_stick_both",
    "laplace",
    "laplace_pair",
    "mixture",
    "monte_carlo_hockey_stick",
    "pair_for_event",
    "participation_pair",
    "product",
    "subsampled_gaussian_pair",
]

_GAUSSIAN = 0
_LAPLACE = 1
_KIND_NAMES = {_GAUSSIAN: "gaussian", _LAPLACE: "laplace"}
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)
_MACHINE_EPS = float(np.finfo(float).eps)
_TAIL_NATS = 750.0  # a component's mass beyond the scanned window is below e^{-750 - epsilon}
_FINE_HALF_WIDTH = 10.0  # fine grid (1/16 scale) within 10 scales of every centre
_FINE_STEPS = 16
_CHUNK = 1 << 15  # points per chunk when evaluating mixture densities
_BINOMIAL_CUTOFF = 80.0  # participation: drop binomial terms e^-80 below the largest
INTERVALS = ("bernstein", "clt")


class UnsupportedAuditError(ValueError):
    """The auditor cannot compute what was asked (e.g. an exact divergence of a composition)."""


# =============================================================================================
# Laws
# =============================================================================================
class Law:
    """A probability law on the real line (or a product of such laws); see the subclasses."""

    def logpdf(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class MixtureLaw(Law):
    """A finite mixture of Gaussian and Laplace components on the real line.

    Build it with :func:`gaussian`, :func:`laplace` and :func:`mixture`. Components are stored as
    arrays: ``kinds`` (0 Gaussian, 1 Laplace), ``locs`` (mean / location), ``scales`` (standard
    deviation / Laplace scale b) and ``log_weights`` (natural logs of the mixture weights, which
    sum to 1). Identical components are merged.
    """

    kinds: np.ndarray
    locs: np.ndarray
    scales: np.ndarray
    log_weights: np.ndarray

    @property
    def size(self) -> int:
        """Number of components."""
        return int(self.locs.size)

    @property
    def weights(self) -> np.ndarray:
        return np.exp(self.log_weights)

    def logpdf(self, x: np.ndarray | float) -> np.ndarray:
        """Log density at ``x`` (any shape), computed in log space (finite far into the tails)."""
        x = np.asarray(x, dtype=float)
        gauss = self.kinds == _GAUSSIAN
        log_norm = np.where(gauss, -np.log(self.scales) - _LOG_SQRT_2PI, -np.log(2.0 * self.scales))
        offset = self.log_weights + log_norm
        if self.size == 1:
            t = (x - self.locs[0]) / self.scales[0]
            return (-0.5 * t * t if gauss[0] else -np.abs(t)) + offset[0]
        flat = x.reshape(-1)
        out = np.empty(flat.shape)
        all_gauss = bool(np.all(gauss))
        for start in range(0, flat.size, _CHUNK):
            t = (flat[start : start + _CHUNK, None] - self.locs) / self.scales
            if all_gauss:
                terms = -0.5 * t * t + offset
            else:
                terms = np.where(gauss, -0.5 * t * t, -np.abs(t)) + offset
            top = terms.max(axis=1)
            out[start : start + _CHUNK] = top + np.log(np.exp(terms - top[:, None]).sum(axis=1))
        return out.reshape(x.shape)

    def pdf(self, x: np.ndarray | float) -> np.ndarray:
        return np.exp(self.logpdf(x))

    def cdf(self, x: np.ndarray | float) -> np.ndarray:
        """Distribution function (for checks; the divergence uses tail-accurate forms)."""
        x = np.asarray(x, dtype=float)
        t = (x[..., None] - self.locs) / self.scales
        gauss = special.ndtr(t)
        lap = np.where(t < 0, 0.5 * np.exp(np.minimum(t, 0.0)), 1.0 - 0.5 * np.exp(-np.abs(t)))
        values = np.where(self.kinds == _GAUSSIAN, gauss, lap)
        return np.sum(self.weights * values, axis=-1)

    def sample(self, size: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        """``size`` i.i.d. draws using ``rng`` (vectorised)."""
        shape = (size,) if isinstance(size, numbers.Integral) else tuple(size)
        count = int(np.prod(shape))
        if self.size == 1:
            index = np.zeros(count, dtype=int)
        else:
            cumulative = np.cumsum(self.weights)
            cumulative /= cumulative[-1]
            index = np.minimum(
                np.searchsorted(cumulative, rng.random(count), side="right"), self.size - 1
            )
        noise = np.empty(count)
        gauss = self.kinds[index] == _GAUSSIAN
        n_gauss = int(np.count_nonzero(gauss))
        noise[gauss] = rng.standard_normal(n_gauss)
        noise[~gauss] = rng.laplace(0.0, 1.0, count - n_gauss)
        return (self.locs[index] + self.scales[index] * noise).reshape(shape)

    def _key(self) -> tuple:
        return (
            self.kinds.tobytes(),
            self.locs.tobytes(),
            self.scales.tobytes(),
            self.log_weights.tobytes(),
        )

    def same_as(self, other: Law) -> bool:
        """Whether ``other`` is the same mixture (identical components and weights)."""
        return isinstance(other, MixtureLaw) and self._key() == other._key()

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "mixture" if self.size > 1 else _KIND_NAMES[int(self.kinds[0])],
            "components": [
                {
                    "kind": _KIND_NAMES[int(k)],
                    "loc": float(m),
                    "scale": float(s),
                    "weight": float(math.exp(w)),
                }
                for k, m, s, w in zip(
                    self.kinds, self.locs, self.scales, self.log_weights, strict=True
                )
            ],
        }

    def __repr__(self) -> str:
        if self.size == 1:
            name = "N" if self.kinds[0] == _GAUSSIAN else "Laplace"
            return f"{name}({self.locs[0]:.6g}, {self.scales[0]:.6g})"
        return f"MixtureLaw({self.size} components)"


def _make_mixture(
    kinds: np.ndarray, locs: np.ndarray, scales: np.ndarray, log_weights: np.ndarray
) -> MixtureLaw:
    """Merge identical components, drop zero weights, normalise in log space."""
    keep = np.isfinite(log_weights)
    kinds, locs, scales, log_weights = kinds[keep], locs[keep], scales[keep], log_weights[keep]
    if kinds.size == 0:
        raise ValueError("weights = all zero is out of range: must put mass on some component")
    order = np.lexsort((scales, locs, kinds))
    kinds, locs, scales, log_weights = kinds[order], locs[order], scales[order], log_weights[order]
    new = np.ones(kinds.size, dtype=bool)
    new[1:] = (kinds[1:] != kinds[:-1]) | (locs[1:] != locs[:-1]) | (scales[1:] != scales[:-1])
    group = np.cumsum(new) - 1
    merged = np.full(int(group[-1]) + 1, -np.inf)
    np.logaddexp.at(merged, group, log_weights)
    merged -= special.logsumexp(merged)
    return MixtureLaw(
        kinds=kinds[new].astype(np.int8),
        locs=locs[new].astype(float),
        scales=scales[new].astype(float),
        log_weights=merged,
    )


def gaussian(mean: float = 0.0, std: float = 1.0) -> MixtureLaw:
    """The normal law N(mean, std^2)."""
    mean = check_real("mean", mean)
    std = check_positive("std", std)
    return _make_mixture(np.array([_GAUSSIAN]), np.array([mean]), np.array([std]), np.array([0.0]))


def laplace(loc: float = 0.0, scale: float = 1.0) -> MixtureLaw:
    """The Laplace law with density exp(-|x - loc| / scale) / (2 scale)."""
    loc = check_real("loc", loc)
    scale = check_positive("scale", scale)
    return _make_mixture(np.array([_LAPLACE]), np.array([loc]), np.array([scale]), np.array([0.0]))


def mixture(components: Sequence[MixtureLaw], weights: Sequence[float]) -> MixtureLaw:
    """The mixture ``sum_i weights[i] components[i]`` (nested mixtures are flattened).

    ``weights`` must be non-negative and sum to 1 (within 1e-9; they are then normalised).
    """
    if not isinstance(components, Sequence) or isinstance(components, (str, bytes)):
        raise ValueError(f"components = {components!r} is not a list of laws")
    if len(components) == 0:
        raise ValueError("components = [] is out of range: must hold at least one law")
    for i, law in enumerate(components):
        if not isinstance(law, MixtureLaw):
            raise ValueError(
                f"components[{i}] = {law!r} is not a 1-D law (build it with gaussian(), "
                "laplace() or mixture())"
            )
    try:
        w = [check_probability(f"weights[{i}]", x) for i, x in enumerate(weights)]
    except TypeError as error:
        raise ValueError(f"weights = {weights!r} is not a list of numbers") from error
    if len(w) != len(components):
        raise ValueError(
            f"weights = {list(weights)!r} has {len(w)} entries: must have one per component "
            f"({len(components)})"
        )
    total = math.fsum(w)
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"weights = {list(weights)!r} sum to {total!r}: must sum to 1")
    with np.errstate(divide="ignore"):
        log_w = [np.log(x) + law.log_weights for x, law in zip(w, components, strict=True)]
    return _make_mixture(
        np.concatenate([law.kinds for law in components]),
        np.concatenate([law.locs for law in components]),
        np.concatenate([law.scales for law in components]),
        np.concatenate(log_w),
    )


@dataclass(frozen=True, eq=False)
class ProductLaw(Law):
    """The law of independent draws: ``count`` i.i.d. copies of each factor, jointly.

    Use :func:`compose` / :func:`product`. The privacy loss of a product pair is the sum of the
    factors' losses, so the pair ``(prod P_i, prod Q_i)`` describes the (adaptive) composition of
    the steps ``(P_i, Q_i)`` when every step has the worst-case pair.
    """

    factors: tuple[tuple[MixtureLaw, int], ...]

    @property
    def steps(self) -> int:
        return sum(count for _, count in self.factors)

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """Joint log density of an array of shape ``(..., steps)`` (factors in order)."""
        x = np.asarray(x, dtype=float)
        if x.shape[-1] != self.steps:
            raise ValueError(
                f"x has last dimension {x.shape[-1]}: must equal the number of steps {self.steps}"
            )
        total = np.zeros(x.shape[:-1])
        position = 0
        for law, count in self.factors:
            total += law.logpdf(x[..., position : position + count]).sum(axis=-1)
            position += count
        return total

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "product",
            "factors": [{"law": law.to_dict(), "count": count} for law, count in self.factors],
        }

    def __repr__(self) -> str:
        return "ProductLaw(" + ", ".join(f"{law!r}^{c}" for law, c in self.factors) + ")"


def product(*factors: tuple[MixtureLaw, int] | MixtureLaw) -> ProductLaw:
    """Product of 1-D laws; each argument is a law (count 1) or a ``(law, count)`` pair."""
    if not factors:
        raise ValueError("factors = () is out of range: must hold at least one law")
    checked: list[tuple[MixtureLaw, int]] = []
    for i, factor in enumerate(factors):
        law, count = factor if isinstance(factor, tuple) else (factor, 1)
        if not isinstance(law, MixtureLaw):
            raise ValueError(f"factors[{i}] = {law!r} is not a 1-D law")
        checked.append((law, check_int("count", count, minimum=1)))
    return ProductLaw(tuple(checked))


def compose(law: MixtureLaw | ProductLaw, times: int) -> ProductLaw:
    """``times`` independent copies of ``law`` (a 1-D law or a product, repeated)."""
    times = check_int("times", times, minimum=1)
    if isinstance(law, ProductLaw):
        return ProductLaw(tuple((f, c * times) for f, c in law.factors))
    if not isinstance(law, MixtureLaw):
        raise ValueError(f"law = {law!r} is not a law")
    return ProductLaw(((law, times),))


def _check_law(name: str, law: object) -> Law:
    if not isinstance(law, (MixtureLaw, ProductLaw)):
        raise ValueError(
            f"{name} = {law!r} is not a law: build it with gaussian(), laplace(), mixture(), "
            "compose() or product()"
        )
    return law


def _aligned_factors(P: Law, Q: Law) -> list[tuple[MixtureLaw, MixtureLaw, int]]:
    """Factor pairs of two laws of the same shape (a 1-D law is a product of one factor)."""
    fp = P.factors if isinstance(P, ProductLaw) else ((P, 1),)
    fq = Q.factors if isinstance(Q, ProductLaw) else ((Q, 1),)
    # expand to per-step sequences of (law, count) with common boundaries
    pairs: list[tuple[MixtureLaw, MixtureLaw, int]] = []
    i = j = 0
    left_p = fp[0][1]
    left_q = fq[0][1]
    while True:
        take = min(left_p, left_q)
        pairs.append((fp[i][0], fq[j][0], take))
        left_p -= take
        left_q -= take
        if left_p == 0:
            i += 1
            if i < len(fp):
                left_p = fp[i][1]
        if left_q == 0:
            j += 1
            if j < len(fq):
                left_q = fq[j][1]
        if i == len(fp) or j == len(fq):
            break
    if i != len(fp) or j != len(fq):
        raise ValueError(
            f"Q = {Q!r} has {sum(c for _, c in fq)} steps: must have as many steps as P "
            f"({sum(c for _, c in fp)}) (a composed pair has one factor pair per step)"
        )
    return pairs


# =============================================================================================
# Exact hockey-stick divergence of a 1-D pair
# =============================================================================================
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
    return math.sqrt(2.0 * nats) + 1.0 if kind == _GAUSSIAN else nats + 1.0


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
            coarse_step = 0.25 if kind == _GAUSSIAN else 1.0
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
        if kind == _GAUSSIAN:
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
            if law.kinds[index] == _GAUSSIAN:
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
    gauss = law.kinds == _GAUSSIAN
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
            and p.kinds[0] == _GAUSSIAN
            and q.kinds[0] == _GAUSSIAN
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
    P = _check_law("P", P)
    Q = _check_law("Q", Q)
    epsilon = check_epsilon("epsilon", epsilon)
    method = check_choice("method", method, ("cdf", "quad"))
    if isinstance(P, MixtureLaw) and isinstance(Q, MixtureLaw):
        return _exact_1d(P, Q, epsilon, method)
    factors = _aligned_factors(P, Q)
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


# =============================================================================================
# Monte Carlo
# =============================================================================================
@dataclass(frozen=True)
class MonteCarloEstimate:
    """Monte Carlo estimate of ``E_g(P || Q)`` with an interval at level ``confidence``.

    ``interval`` names the interval: ``"bernstein"`` (empirical Bernstein, rigorous for every
    n; each one-sided end holds with probability >= 1 - (1 - confidence)/2) or ``"clt"`` (normal
    approximation). ``std_error`` is the sample standard deviation over sqrt(samples).
    """

    estimate: float
    lower: float
    upper: float
    std_error: float
    samples: int
    confidence: float
    interval: str
    seed: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "lower": self.lower,
            "upper": self.upper,
            "std_error": self.std_error,
            "samples": self.samples,
            "confidence": self.confidence,
            "interval": self.interval,
            "seed": self.seed,
        }


def _loss_sampler(P: Law, Q: Law) -> list[tuple[MixtureLaw, MixtureLaw, int]]:
    if isinstance(P, MixtureLaw) and isinstance(Q, MixtureLaw):
        return [(P, Q, 1)]
    return _aligned_factors(P, Q)


def _interval(
    mean: float, variance: float, n: int, confidence: float, kind: str
) -> tuple[float, float]:
    if kind == "clt":
        z = float(special.ndtri(0.5 + 0.5 * confidence))
        half = z * math.sqrt(variance / n)
    else:  # Maurer & Pontil (2009), Thm 4, on Y and 1 - Y, each side at (1 - c)/2
        log_term = math.log(4.0 / (1.0 - confidence))
        half = math.sqrt(2.0 * variance * log_term / n) + 7.0 * log_term / (3.0 * (n - 1))
    return max(0.0, mean - half), min(1.0, mean + half)


def _monte_carlo(
    P: Law,
    Q: Law,
    epsilon: float,
    samples: int,
    rng: np.random.Generator,
    confidence: float,
    interval: str,
    seed: int | None,
) -> MonteCarloEstimate:
    factors = _loss_sampler(P, Q)
    steps = sum(c for _, _, c in factors)
    chunk = max(1, min(samples, (1 << 22) // max(1, steps)))
    count = 0
    mean = 0.0
    m2 = 0.0
    done = 0
    while done < samples:
        n = min(chunk, samples - done)
        loss = np.zeros(n)
        for p, q, c in factors:
            x = p.sample((n, c), rng)
            loss += (p.logpdf(x) - q.logpdf(x)).sum(axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            y = np.where(loss > epsilon, -np.expm1(epsilon - loss), 0.0)
        y = np.where(np.isposinf(loss), 1.0, y)
        # Chan et al. parallel update of mean and sum of squared deviations
        batch_mean = float(np.mean(y))
        batch_m2 = float(np.sum((y - batch_mean) ** 2))
        total = count + n
        delta_mean = batch_mean - mean
        mean += delta_mean * n / total
        m2 += batch_m2 + delta_mean * delta_mean * count * n / total
        count = total
        done += n
    variance = m2 / (count - 1)
    lower, upper = _interval(mean, variance, count, confidence, interval)
    return MonteCarloEstimate(
        estimate=mean,
        lower=lower,
        upper=upper,
        std_error=math.sqrt(variance / count),
        samples=count,
        confidence=confidence,
        interval=interval,
        seed=seed,
    )


def _rng(seed: object) -> tuple[np.random.Generator, int | None]:
    if isinstance(seed, np.random.Generator):
        return seed, None
    if seed is None:
        return np.random.default_rng(), None
    value = check_int("seed", seed, minimum=0)
    return np.random.default_rng(value), value


def monte_carlo_hockey_stick(
    P: Law,
    Q: Law,
    epsilon: float,
    samples: int,
    *,
    seed: int | np.random.Generator | None = 0,
    confidence: float = 0.99,
    interval: str = "bernstein",
) -> MonteCarloEstimate:
    """Monte Carlo ``E_g(P || Q) = E_{X~P}[(1 - e^{epsilon - L(X)})_+]``, L = log p/q.

    ``samples`` (>= 2) i.i.d. draws from ``P`` (for a product, one draw per step, losses summed),
    using ``numpy.random.default_rng(seed)`` (or the given Generator). ``interval`` is
    ``"bernstein"`` (rigorous empirical-Bernstein interval) or ``"clt"`` (normal approximation),
    at two-sided level ``confidence`` in (0, 1).
    """
    P = _check_law("P", P)
    Q = _check_law("Q", Q)
    epsilon = check_epsilon("epsilon", epsilon)
    samples = check_int("samples", samples, minimum=2)
    confidence = check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)
    interval = check_choice("interval", interval, INTERVALS)
    rng, seed_value = _rng(seed)
    return _monte_carlo(P, Q, epsilon, samples, rng, confidence, interval, seed_value)


# =============================================================================================
# Audit
# =============================================================================================
@dataclass(frozen=True)
class AuditReport:
    """Result of checking a claimed (epsilon, delta) on one pair of output laws.

    ``delta_forward`` = E_g(P || Q), ``delta_backward`` = E_g(Q || P) (``None`` when no exact
    value is available), ``delta`` their max, the pair's true delta(epsilon); ``error`` bounds
    the numerical error of the exact values; ``monte_carlo`` maps direction labels to estimates.
    ``violated`` is decided on the exact values when present (``basis = "exact"``), else on the
    lower ends of the Monte Carlo intervals (``basis = "monte-carlo"``).
    """

    epsilon: float
    claimed_delta: float
    violated: bool
    basis: str
    delta: float | None
    delta_forward: float | None
    delta_backward: float | None
    error: float | None
    tolerance: float
    worst_direction: str
    directions: tuple[str, str]
    monte_carlo: dict[str, MonteCarloEstimate] = field(default_factory=dict)
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=dict)
    method: str = ""
    worst_case: bool | None = None
    note: str = ""

    @property
    def margin(self) -> float | None:
        """delta(epsilon) - claimed delta (positive = violated, up to tolerance)."""
        if self.delta is not None:
            return self.delta - self.claimed_delta
        if self.monte_carlo:
            return max(m.lower for m in self.monte_carlo.values()) - self.claimed_delta
        return None

    @property
    def monte_carlo_consistent(self) -> bool | None:
        """Whether every exact value lies inside its Monte Carlo interval (None if not both)."""
        if self.delta is None or not self.monte_carlo:
            return None
        exact = dict(zip(self.directions, (self.delta_forward, self.delta_backward), strict=True))
        return all(
            m.lower - self.tolerance <= exact[d] <= m.upper + self.tolerance
            for d, m in self.monte_carlo.items()
        )

    @property
    def conclusive(self) -> bool:
        """False when only Monte Carlo is available and an interval straddles the claim."""
        if self.basis == "exact" or self.violated:
            return True
        return all(m.upper <= self.claimed_delta for m in self.monte_carlo.values())

    @property
    def summary(self) -> str:
        what = self.description or "this pair"
        claim = f"(epsilon = {self.epsilon:.6g}, delta = {self.claimed_delta:.6g})"
        if self.basis == "exact":
            assert self.delta is not None and self.error is not None
            other = [
                f"{d}: {v:.6g}"
                for d, v in zip(
                    self.directions, (self.delta_forward, self.delta_backward), strict=True
                )
            ]
            found = f"exact delta(epsilon) = {self.delta:.6g} [{'; '.join(other)}]"
            numerics = f"numerical error <= {self.error:.2g}"
        else:
            found = f"Monte Carlo delta(epsilon) {self._monte_carlo_text()}"
            numerics = "no exact value for this pair"
        if self.violated:
            verdict = (
                f"VIOLATED: the claim {claim} fails on {what}: {found} exceeds the claimed delta "
                f"by {self.margin:.3g} ({numerics}). One violating instance disproves the "
                "claimed bound."
            )
        elif not self.conclusive:
            verdict = (
                f"INCONCLUSIVE: the claim {claim} is not disproved on {what}, but {found} "
                f"contains the claimed delta; more samples would be needed to decide."
            )
        elif self.worst_case and self.basis == "exact":
            verdict = (
                f"holds: the claim {claim} is consistent with {what}: {found} ({numerics}). "
                "This pair is a known dominating pair of the mechanism, so this is the "
                "mechanism's own delta(epsilon)."
            )
        else:
            verdict = (
                f"holds on this instance: the claim {claim} is consistent with {what}: {found} "
                f"({numerics}). Passing on one instance does not prove the bound."
            )
        if self.note:
            verdict += f" Note: {self.note}."
        if self.basis == "exact" and self.monte_carlo:
            verdict += f" Monte Carlo check: {self._monte_carlo_text()}."
        if self.monte_carlo_consistent is False:
            verdict += " WARNING: the exact value lies outside a Monte Carlo interval."
        return verdict

    def _monte_carlo_text(self) -> str:
        parts = [
            f"{d}: {m.estimate:.4g} in [{m.lower:.4g}, {m.upper:.4g}]"
            for d, m in self.monte_carlo.items()
        ]
        first = next(iter(self.monte_carlo.values()))
        return (
            f"[{'; '.join(parts)}] ({first.interval} interval, confidence {first.confidence:g}, "
            f"{first.samples} samples per direction)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "claimed_delta": self.claimed_delta,
            "violated": self.violated,
            "conclusive": self.conclusive,
            "basis": self.basis,
            "delta": self.delta,
            "delta_forward": self.delta_forward,
            "delta_backward": self.delta_backward,
            "directions": list(self.directions),
            "worst_direction": self.worst_direction,
            "error": self.error,
            "tolerance": self.tolerance,
            "margin": self.margin,
            "method": self.method,
            "monte_carlo": {d: m.to_dict() for d, m in self.monte_carlo.items()},
            "monte_carlo_consistent": self.monte_carlo_consistent,
            "description": self.description,
            "parameters": dict(self.parameters),
            "worst_case": self.worst_case,
            "note": self.note,
            "summary": self.summary,
        }


def audit(
    P: Law,
    Q: Law,
    epsilon: float,
    delta: float,
    *,
    monte_carlo_samples: int | None = None,
    seed: int | None = 0,
    confidence: float = 0.99,
    interval: str = "bernstein",
    rtol: float = 1e-9,
    directions: tuple[str, str] = ("P||Q", "Q||P"),
    description: str = "",
    parameters: dict[str, Any] | None = None,
) -> AuditReport:
    """Check the claim "(epsilon, delta)-DP" on the neighbouring output laws P and Q.

    Computes ``E_g(P || Q)`` and ``E_g(Q || P)`` exactly where possible (1-D laws, compositions of
    Gaussian shifts) and, if ``monte_carlo_samples`` is given, Monte Carlo estimates of both with
    intervals (see :func:`monte_carlo_hockey_stick`; the two directions use independent streams
    spawned from ``seed``). The claim is ``violated`` when the exact delta(epsilon) exceeds
    ``delta`` by more than the numerical error bound plus ``rtol * delta`` or, without an exact
    value, when a Monte Carlo interval lies entirely above ``delta``. A composition without an
    exact value needs ``monte_carlo_samples``.
    """
    P = _check_law("P", P)
    Q = _check_law("Q", Q)
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_range("delta", delta, 0.0, 1.0, high_open=True)
    rtol = check_range("rtol", rtol, 0.0, 1.0)
    confidence = check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)
    interval = check_choice("interval", interval, INTERVALS)
    if monte_carlo_samples is not None:
        monte_carlo_samples = check_int("monte_carlo_samples", monte_carlo_samples, minimum=2)
    if (
        not isinstance(directions, tuple)
        or len(directions) != 2
        or not all(isinstance(d, str) for d in directions)
        or directions[0] == directions[1]
    ):
        raise ValueError(f"directions = {directions!r} is not allowed: must be two distinct labels")
    if isinstance(P, ProductLaw) or isinstance(Q, ProductLaw):
        _aligned_factors(P, Q)  # raises on mismatched shapes
    try:
        forward = exact_divergence(P, Q, epsilon)
        backward = exact_divergence(Q, P, epsilon)
    except UnsupportedAuditError:
        if monte_carlo_samples is None:
            raise UnsupportedAuditError(
                "monte_carlo_samples = None is out of range: this composition has no exact "
                "hockey-stick divergence here, so it must be audited by Monte Carlo (give an "
                "integer >= 2)"
            ) from None
        forward = backward = None

    mc: dict[str, MonteCarloEstimate] = {}
    if monte_carlo_samples is not None:
        seed_value: int | None = None
        if seed is not None:
            seed_value = check_int("seed", seed, minimum=0)
        streams = np.random.SeedSequence(seed_value).spawn(2)
        for label, (a, b), stream in zip(directions, ((P, Q), (Q, P)), streams, strict=True):
            mc[label] = _monte_carlo(
                a,
                b,
                epsilon,
                monte_carlo_samples,
                np.random.default_rng(stream),
                confidence,
                interval,
                seed_value,
            )

    if forward is not None and backward is not None:
        worst = max(forward.value, backward.value)
        error = max(forward.error, backward.error)
        tolerance = error + rtol * delta
        violated = worst - delta > tolerance
        worst_direction = directions[0] if forward.value >= backward.value else directions[1]
        return AuditReport(
            epsilon=epsilon,
            claimed_delta=delta,
            violated=violated,
            basis="exact",
            delta=worst,
            delta_forward=forward.value,
            delta_backward=backward.value,
            error=error,
            tolerance=tolerance,
            worst_direction=worst_direction,
            directions=directions,
            monte_carlo=mc,
            description=description,
            parameters=dict(parameters or {}),
            method=forward.method,
        )
    tolerance = rtol * delta
    worst_direction = max(mc, key=lambda d: mc[d].lower)
    violated = mc[worst_direction].lower - delta > tolerance
    return AuditReport(
        epsilon=epsilon,
        claimed_delta=delta,
        violated=violated,
        basis="monte-carlo",
        delta=None,
        delta_forward=None,
        delta_backward=None,
        error=None,
        tolerance=tolerance,
        worst_direction=worst_direction,
        directions=directions,
        monte_carlo=mc,
        description=description,
        parameters=dict(parameters or {}),
        method=f"Monte Carlo ({interval} interval)",
    )


# =============================================================================================
# Adversarial pairs
# =============================================================================================
@dataclass(frozen=True, eq=False)
class AdversarialPair:
    """Output laws ``P = M(D)`` and ``Q = M(D')`` of one concrete neighbouring pair.

    ``directions`` labels ``E(P || Q)`` and ``E(Q || P)``; ``worst_case`` says whether the pair is
    known to dominate the mechanism (then its delta(epsilon) *is* the mechanism's, and a passing
    audit is tight evidence), or is only one instance (a lower bound on the mechanism's delta).
    ``truncation`` is a bound on the total-variation change made when building the laws (e.g.
    dropped binomial terms); :meth:`audit` adds ``(1 + e^epsilon) truncation`` to the tolerance.
    """

    P: Law
    Q: Law
    name: str
    parameters: dict[str, Any]
    directions: tuple[str, str] = ("P||Q", "Q||P")
    worst_case: bool = False
    note: str = ""
    truncation: float = 0.0

    @property
    def description(self) -> str:
        params = ", ".join(
            f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
            for k, v in self.parameters.items()
        )
        return f"{self.name} ({params})"

    def compose(self, times: int) -> AdversarialPair:
        """The same pair over ``times`` independent steps (product laws)."""
        times = check_int("times", times, minimum=1)
        params = dict(self.parameters)
        params["steps"] = params.get("steps", 1) * times
        return AdversarialPair(
            compose(self.P, times),
            compose(self.Q, times),
            self.name,
            params,
            self.directions,
            self.worst_case,
            self.note,
            self.truncation * times,
        )

    def audit(self, epsilon: float, delta: float, **options: Any) -> AuditReport:
        """:func:`audit` of this pair (labels and parameters filled in)."""
        report = audit(
            self.P,
            self.Q,
            epsilon,
            delta,
            directions=self.directions,
            description=self.description,
            parameters=self.parameters,
            **options,
        )
        report = replace(report, worst_case=self.worst_case, note=self.note)
        if self.truncation > 0.0 and report.basis == "exact":
            extra = (1.0 + math.exp(min(report.epsilon, 700.0))) * self.truncation
            tolerance = report.tolerance + extra
            violated = report.delta - report.claimed_delta > tolerance  # type: ignore[operator]
            report = replace(
                report, tolerance=tolerance, violated=violated, error=report.error + extra
            )  # type: ignore[operator]
        return report


def gaussian_pair(sensitivity: float = 1.0, std: float = 1.0) -> AdversarialPair:
    """Gaussian mechanism: ``N(sensitivity, std^2)`` vs ``N(0, std^2)`` (worst case, mu = s/std).

    Every pair of inputs whose outputs' means differ by at most ``sensitivity`` (L2) is dominated
    by this pair, so its delta(epsilon) is the mechanism's (Balle & Wang 2018).
    """
    return _shift_pair(gaussian, "gaussian mechanism", sensitivity, "std", std)


def laplace_pair(sensitivity: float = 1.0, scale: float = 1.0) -> AdversarialPair:
    """Laplace mechanism in 1-D: ``Laplace(sensitivity, scale)`` vs ``Laplace(0, scale)``."""
    return _shift_pair(laplace, "laplace mechanism", sensitivity, "scale", scale)


def _shift_pair(
    law: Callable[[float, float], MixtureLaw],
    name: str,
    sensitivity: object,
    width_name: str,
    width: object,
) -> AdversarialPair:
    """Worst-case pair ``law(sensitivity, width)`` vs ``law(0, width)`` of a 1-D mechanism."""
    sensitivity = check_positive("sensitivity", sensitivity)
    width = check_positive(width_name, width)
    return AdversarialPair(
        law(sensitivity, width),
        law(0.0, width),
        name,
        {"sensitivity": sensitivity, width_name: width},
        ("P||Q", "Q||P"),
        worst_case=True,
    )


def subsampled_gaussian_pair(
    sampling_rate: float,
    noise_multiplier: float,
    *,
    neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
) -> AdversarialPair:
    """Worst-case pair of one Poisson-subsampled Gaussian step (units of the clip norm C).

    Add/remove: ``P = (1 - q) N(0, z^2) + q N(1, z^2)`` (with the record) vs ``Q = N(0, z^2)``
    (without); ``E(P || Q)`` is the "remove" direction and ``E(Q || P)`` the "add" direction of
    dp-accounting. Replace-one: ``(1 - q) N(0, z^2) + q N(1, z^2)`` vs
    ``(1 - q) N(0, z^2) + q N(-1, z^2)`` (the antipodal pair, see privfl.accounting.pld).
    Both are dominating pairs of the step (others' contributions are post-processing).
    """
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    value = neighbouring.value if isinstance(neighbouring, Neighbouring) else neighbouring
    relation = Neighbouring(check_choice("neighbouring", value, [n.value for n in Neighbouring]))
    base = gaussian(0.0, z)
    with_record = mixture([base, gaussian(1.0, z)], [1.0 - q, q]) if q < 1.0 else gaussian(1.0, z)
    params = {"sampling_rate": q, "noise_multiplier": z, "neighbouring": relation.value}
    if relation is Neighbouring.ADD_REMOVE:
        return AdversarialPair(
            with_record,
            base,
            "poisson-subsampled gaussian",
            params,
            ("remove the record: P||Q", "add the record: Q||P"),
            worst_case=True,
        )
    other = mixture([base, gaussian(-1.0, z)], [1.0 - q, q]) if q < 1.0 else gaussian(-1.0, z)
    return AdversarialPair(
        with_record,
        other,
        "poisson-subsampled gaussian",
        params,
        ("replace v by -v: P||Q", "replace -v by v: Q||P"),
        worst_case=True,
    )


def participation_pair(
    participation_rate: float,
    sampling_rate: float,
    local_size: int,
    std: float,
    *,
    clip_norm: float = 1.0,
    scale: float = 1.0,
) -> AdversarialPair:
    """Random participation (spec seed3 sections 4.2 and 4.6): the aligned-gradient instance.

    Client 1 holds ``local_size`` = d records besides x'; it participates with probability
    ``participation_rate`` p, then keeps each record with probability ``sampling_rate`` q; the
    server adds N(0, std^2) to the sum of clipped gradients. In this instance x' has gradient
    ``clip_norm * e`` and client 1's other records ``scale * clip_norm * e`` (aligned), all other
    clients' gradients are 0. With ``b_i`` the Binomial(d, q) pmf and ``a = scale``:

        xi  = (1 - p) N(0, s^2) + p sum_i b_i [(1 - q) N(i a C, s^2) + q N((i a + 1) C, s^2)]
        xi' = (1 - p) N(0, s^2) + p sum_i b_i N(i a C, s^2)

    ``P = xi`` (with x'), ``Q = xi'``; ``E(P || Q)`` is "add x'". At ``scale = 1`` the exact
    E(xi || xi') equals the paper's Theorem 4.1 delta; at ``scale = 0`` it is centralized
    sampling at rate p q. It is one instance, so its delta(epsilon) is a *lower* bound on the
    scheme's. Binomial terms more than e^-80 below the largest are dropped (their mass is
    recorded in ``truncation``).
    """
    p = check_rate("participation_rate", participation_rate)
    q = check_rate("sampling_rate", sampling_rate)
    d = check_int("local_size", local_size, minimum=0)
    sigma = check_positive("std", std)
    c = check_positive("clip_norm", clip_norm)
    a = check_range("scale", scale, 0.0, 1.0)
    i = np.arange(d + 1)
    log_b = stats.binom.logpmf(i, d, q) if q < 1.0 else np.where(i == d, 0.0, -np.inf)
    keep = log_b >= np.max(log_b) - _BINOMIAL_CUTOFF
    dropped = float(np.exp(special.logsumexp(log_b[~keep]))) if np.any(~keep) else 0.0
    i, log_b = i[keep], log_b[keep] - special.logsumexp(log_b[keep])
    with np.errstate(divide="ignore"):
        log_p, log_1mp = math.log(p), math.log1p(-p) if p < 1.0 else -math.inf
        log_q, log_1mq = math.log(q), math.log1p(-q) if q < 1.0 else -math.inf
    means = i * a * c
    n = means.size
    kinds = np.zeros(2 * n + 1, dtype=np.int8)
    scales = np.full(2 * n + 1, sigma)
    with_x = _make_mixture(
        kinds,
        np.concatenate([[0.0], means, means + c]),
        scales,
        np.concatenate([[log_1mp], log_p + log_1mq + log_b, log_p + log_q + log_b]),
    )
    without_x = _make_mixture(
        kinds[: n + 1],
        np.concatenate([[0.0], means]),
        scales[: n + 1],
        np.concatenate([[log_1mp], log_p + log_b]),
    )
    params = {
        "participation_rate": p,
        "sampling_rate": q,
        "local_size": d,
        "std": sigma,
        "clip_norm": c,
        "scale": a,
    }
    return AdversarialPair(
        with_x,
        without_x,
        "random participation, aligned gradients",
        params,
        ("add x': xi||xi'", "remove x': xi'||xi"),
        worst_case=False,
        note="one configuration: a lower bound on the scheme's delta(epsilon)",
        truncation=p * dropped,
    )


def _step_laws(
    step_noise: Noise, z: float, q: float, sampling: Sampling, relation: Neighbouring
) -> tuple[MixtureLaw, MixtureLaw, bool]:
    make = gaussian if step_noise is Noise.GAUSSIAN else laplace
    base = make(0.0, z)
    if sampling is Sampling.NONE:
        shift = 2.0 if relation is Neighbouring.REPLACE_ONE else 1.0
        return make(shift, z), base, True
    up = mixture([base, make(1.0, z)], [1.0 - q, q])
    if relation is Neighbouring.ADD_REMOVE:
        if sampling is Sampling.WITHOUT_REPLACEMENT:
            raise UnsupportedAuditError(
                "sampling = 'without-replacement' with add/remove neighbours has no adversarial "
                "pair here (the batch composition changes with the dataset size)"
            )
        return up, base, step_noise is Noise.GAUSSIAN
    down = mixture([base, make(-1.0, z)], [1.0 - q, q])
    # Poisson replace-one: the antipodal pair dominates (Gaussian; privfl.accounting.pld). For
    # fixed-size batches it is the instance "others contribute 0", not necessarily the worst.
    worst = step_noise is Noise.GAUSSIAN and sampling is Sampling.POISSON
    return up, down, worst


def pair_for_event(event: PrivacyEvent) -> AdversarialPair:
    """The adversarial pair of a :class:`PrivacyEvent` in units of the clip norm (one record).

    Each group of steps contributes its 1-D pair (see :func:`subsampled_gaussian_pair`; Laplace
    steps use the same shapes with Laplace noise of scale z; unsampled steps the shift 1 or 2),
    repeated ``count`` times; the event's pair is their product. ``worst_case`` is True when
    every step's pair is a known dominating pair (Gaussian, no sampling or Poisson).
    """
    if not isinstance(event, PrivacyEvent):
        raise ValueError(f"event = {event!r} is not a PrivacyEvent")
    p_factors: list[tuple[MixtureLaw, int]] = []
    q_factors: list[tuple[MixtureLaw, int]] = []
    worst = True
    for step, count in event.steps:
        if count == 0:
            continue
        up, down, step_worst = _step_laws(
            step.noise,
            step.noise_multiplier,
            step.sampling_rate,
            step.effective_sampling,
            event.neighbouring,
        )
        worst = worst and step_worst
        p_factors.append((up, count))
        q_factors.append((down, count))
    if not p_factors:
        raise UnsupportedEventError("event = an event with no steps releases nothing to audit")
    if len(p_factors) == 1 and p_factors[0][1] == 1:
        P: Law = p_factors[0][0]
        Q: Law = q_factors[0][0]
    else:
        P, Q = ProductLaw(tuple(p_factors)), ProductLaw(tuple(q_factors))
    directions = (
        ("remove the record: P||Q", "add the record: Q||P")
        if event.neighbouring is Neighbouring.ADD_REMOVE
        else ("replace: P||Q", "replace back: Q||P")
    )
    params = {
        "steps": event.total_steps,
        "neighbouring": event.neighbouring.value,
        "sampling": event.sampling_label,
    }
    return AdversarialPair(P, Q, "privacy event", params, directions, worst_case=worst)


def audit_accountants(
    event: PrivacyEvent,
    delta: float,
    *,
    methods: str | Sequence[str] = ("rdp", "pld"),
    monte_carlo_samples: int | None = None,
    seed: int | None = 0,
    confidence: float = 0.99,
    interval: str = "bernstein",
) -> dict[str, AuditReport]:
    """Ask each accountant for epsilon at ``delta`` and audit that claim on the event's pair.

    Returns ``{method: AuditReport}``. Compositions that have no exact divergence need
    ``monte_carlo_samples``. A violation of a method labelled ``bound`` is a bug in it.
    """
    from privfl.accounting.methods import account

    delta = check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    pair = pair_for_event(event)
    report = account(event, delta=delta, methods=methods)
    audits: dict[str, AuditReport] = {}
    for result in report.results:
        audits[result.method] = pair.audit(
            result.epsilon,
            delta,
            monte_carlo_samples=monte_carlo_samples,
            seed=seed,
            confidence=confidence,
            interval=interval,
        )
    return audits
