"""One-dimensional output laws for the auditor: Gaussian and Laplace mixtures, and products.

A :class:`MixtureLaw` is a finite mixture of Gaussian and Laplace components on the real line
(the Gaussian and Laplace mechanisms, the Poisson-subsampled Gaussian, random participation); a
:class:`ProductLaw` holds ``count`` i.i.d. copies of each factor, jointly, so that the pair
``(prod P_i, prod Q_i)`` describes the composition of the steps ``(P_i, Q_i)`` (its privacy loss
is the sum of the factors' losses). Build laws with :func:`gaussian`, :func:`laplace`,
:func:`mixture`, :func:`product` and :func:`compose`. Densities are evaluated in log space, so
they stay finite far into the tails.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from privfl._validation import check_int, check_positive, check_probability, check_real

GAUSSIAN = 0
_LAPLACE = 1
_KIND_NAMES = {GAUSSIAN: "gaussian", _LAPLACE: "laplace"}
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_CHUNK = 1 << 15  # points per chunk when evaluating mixture densities


class UnsupportedAuditError(ValueError):
    """The auditor cannot compute what was asked (e.g. an exact divergence of a composition)."""


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
        gauss = self.kinds == GAUSSIAN
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
        values = np.where(self.kinds == GAUSSIAN, gauss, lap)
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
        gauss = self.kinds[index] == GAUSSIAN
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
            name = "N" if self.kinds[0] == GAUSSIAN else "Laplace"
            return f"{name}({self.locs[0]:.6g}, {self.scales[0]:.6g})"
        return f"MixtureLaw({self.size} components)"


def make_mixture(
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
    return make_mixture(np.array([GAUSSIAN]), np.array([mean]), np.array([std]), np.array([0.0]))


def laplace(loc: float = 0.0, scale: float = 1.0) -> MixtureLaw:
    """The Laplace law with density exp(-|x - loc| / scale) / (2 scale)."""
    loc = check_real("loc", loc)
    scale = check_positive("scale", scale)
    return make_mixture(np.array([_LAPLACE]), np.array([loc]), np.array([scale]), np.array([0.0]))


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
    return make_mixture(
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


def check_law(name: str, law: object) -> Law:
    if not isinstance(law, (MixtureLaw, ProductLaw)):
        raise ValueError(
            f"{name} = {law!r} is not a law: build it with gaussian(), laplace(), mixture(), "
            "compose() or product()"
        )
    return law


def aligned_factors(P: Law, Q: Law) -> list[tuple[MixtureLaw, MixtureLaw, int]]:
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
