"""Bayesian inference privacy leakage for a finite attacker model (Zhang, Chen and Yang 2022).

The attacker holds a prior ``F^`` over client k's private information ``D`` (finitely many
candidates) and a posterior kernel ``f(d | w)``: what it believes after seeing the parameter
value ``w``. Its belief after seeing a parameter drawn from a law ``P`` is the mixture of
posteriors (the form used in the proof of their Lemma B.3)::

    F_P(d) = sum_w f(d | w) P(w)

and privfl follows the convention of the paper's Appendix G (the No-Free-Lunch convention of
Zhang et al. 2022a)::

    leakage        eps_p = sqrt(JS(F_P~ || F^))     protected parameter against the prior
    unprotected    C1    = sqrt(JS(F_P  || F^))     the same for the unprotected parameter
    xi             = max_{w in supp P u supp P~, d} |log f(d | w) / F^(d)|
    C2             = (e^{2 xi} - 1) / 2             (their eq. 13)

``P`` must be the law of the parameter given the TRUE private data: taking the prior-predictive
marginal makes ``F_P`` equal to the prior and ``C1 = 0``. The same kernel ``f(d | w)`` serves
``P`` and ``P~``. ``xi`` is infinite whenever a posterior vanishes on the support (e.g. a
Gaussian likelihood over an unbounded parameter space); :func:`log_posteriors` then still gives
finite values on sampled parameters, and the largest of them is an empirical ``xi`` over those
samples only. A *tempered* kernel ``(1 - t) f(d | w) + t F^(d)`` (:func:`tempered_log_posteriors`)
has a finite ``xi`` for every ``t > 0`` (:func:`tempered_xi`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from privfl._validation import check_range
from privfl.distortion.divergence import check_distribution, sqrt_js

__all__ = ["BayesianAttacker", "c2_from_xi", "log_posteriors", "max_log_ratio",
           "tempered_log_posteriors", "tempered_xi"]


def c2_from_xi(xi: float) -> float:
    """``C2 = (e^{2 xi} - 1) / 2`` (their eq. 13); ``inf`` for ``xi = inf``."""
    if isinstance(xi, bool) or not isinstance(xi, (int, float)) or math.isnan(xi) or xi < 0:
        raise ValueError(f"xi = {xi!r} is out of range: must be in [0, inf]")
    if math.isinf(xi) or 2.0 * xi > 709.0:
        return math.inf
    return 0.5 * math.expm1(2.0 * xi)


def log_posteriors(log_likelihood: object, prior: object) -> np.ndarray:
    """``log f(d | w)`` for rows ``w`` of a ``[n, D]`` log-likelihood table and a prior ``[D]``:
    ``log F^(d) + log L(w | d) - logsumexp_d(...)`` (stable for very unequal likelihoods)."""
    table = np.asarray(log_likelihood, dtype=float)
    p = check_distribution("prior", prior)
    if table.ndim != 2 or table.shape[1] != p.size:
        raise ValueError(f"log_likelihood has shape {table.shape}: must be [n, {p.size}] (one "
                         "column per candidate of the prior)")
    if np.isnan(table).any() or np.isposinf(table).any():
        raise ValueError("log_likelihood contains NaN or +inf: every entry must be < inf")
    with np.errstate(divide="ignore"):
        joint = np.log(p)[None, :] + table
    return joint - special.logsumexp(joint, axis=1, keepdims=True)


def tempered_log_posteriors(log_post: np.ndarray, prior: object, tempering: float
                            ) -> np.ndarray:
    """``log((1 - t) f(d | w) + t F^(d))``: a posterior mixed with the prior (``t`` in [0, 1))."""
    p = check_distribution("prior", prior)
    t = check_range("tempering", tempering, 0.0, 1.0, high_open=True)
    if t == 0.0:
        return np.asarray(log_post, dtype=float)
    with np.errstate(divide="ignore"):
        log_prior = np.log(p)
    return np.logaddexp(math.log1p(-t) + np.asarray(log_post, dtype=float),
                        math.log(t) + log_prior[None, :])


def tempered_xi(prior: object, tempering: float) -> float:
    """``sup_w max_d |log f_t(d | w) / F^(d)|`` of the tempered kernel when every candidate can
    dominate the untempered posterior (e.g. Gaussian centres in convex position) and any can
    vanish: ``max(log((1 - t) / min F^ + t), -log t)``; ``inf`` for ``t = 0``."""
    p = check_distribution("prior", prior)
    t = check_range("tempering", tempering, 0.0, 1.0, high_open=True)
    if t == 0.0:
        return math.inf
    smallest = float(p[p > 0].min())
    return max(math.log((1.0 - t) / smallest + t), -math.log(t))


def max_log_ratio(log_post: np.ndarray, prior: np.ndarray) -> float:
    """``max |log f(d | w) - log F^(d)|`` over the rows and the candidates with prior > 0."""
    keep = prior > 0
    if not log_post.size:
        return 0.0
    return float(np.abs(log_post[:, keep] - np.log(prior[keep])[None, :]).max())


@dataclass(frozen=True)
class BayesianAttacker:
    """A finite attacker model: ``prior[D]`` and a posterior kernel ``posterior[W, D]``.

    Build it from a likelihood ``L(w | d)`` (:meth:`from_likelihood`, a ``[D, W]`` table whose
    rows sum to 1) or give the posterior rows directly. Laws of the parameter are vectors over
    the ``W`` parameter values.
    """

    prior: np.ndarray
    posterior: np.ndarray

    def __post_init__(self) -> None:
        prior = check_distribution("prior", self.prior)
        post = np.asarray(self.posterior, dtype=float)
        if post.ndim != 2 or post.shape[1] != prior.size:
            raise ValueError(f"posterior has shape {post.shape}: must be [W, {prior.size}]")
        for w, row in enumerate(post):
            check_distribution(f"posterior[{w}]", row)
        object.__setattr__(self, "prior", prior)
        object.__setattr__(self, "posterior", post)

    @classmethod
    def from_likelihood(cls, prior: object, likelihood: object) -> BayesianAttacker:
        """Bayes' rule: ``f(d | w) = F^(d) L(w | d) / sum_d' F^(d') L(w | d')``.

        ``likelihood[d]`` is the law of the parameter given candidate ``d``. Parameter values no
        candidate can produce get the prior as their (never used) posterior.
        """
        p = check_distribution("prior", prior)
        table = np.asarray(likelihood, dtype=float)
        if table.ndim != 2 or table.shape[0] != p.size:
            raise ValueError(f"likelihood has shape {table.shape}: must be [{p.size}, W]")
        for d, row in enumerate(table):
            check_distribution(f"likelihood[{d}]", row)
        joint = p[:, None] * table  # [D, W]
        marginal = joint.sum(0)
        post = np.where(marginal > 0, joint / np.where(marginal > 0, marginal, 1.0), p[:, None])
        return cls(p, post.T)

    def _law(self, name: str, law: object) -> np.ndarray:
        w = check_distribution(name, law)
        if w.size != self.posterior.shape[0]:
            raise ValueError(f"{name} has {w.size} entries: the attacker model has "
                             f"{self.posterior.shape[0]} parameter values")
        return w

    def belief(self, law: object) -> np.ndarray:
        """``F_P(d) = sum_w f(d | w) P(w)``: the belief after a parameter drawn from ``law``."""
        w = self._law("law", law)
        return np.clip(w @ self.posterior, 0.0, 1.0)

    def xi(self, *laws: object) -> float:
        """``max |log f(d | w) / F^(d)|`` over ``w`` in the union of the laws' supports (all
        parameter values if none is given) and the candidates; ``inf`` if a posterior is 0."""
        support = np.ones(self.posterior.shape[0], dtype=bool)
        if laws:
            support = np.zeros_like(support)
            for j, law in enumerate(laws):
                support |= self._law(f"laws[{j}]", law) > 0
        keep = self.prior > 0
        post = self.posterior[support][:, keep]
        if not post.size:
            return 0.0
        with np.errstate(divide="ignore"):
            return float(np.abs(np.log(post) - np.log(self.prior[keep])[None, :]).max())

    def c2(self, *laws: object) -> float:
        """``C2 = (e^{2 xi} - 1) / 2`` with :meth:`xi` over the laws' supports."""
        return c2_from_xi(self.xi(*laws))

    def leakage(self, law: object, reference: object | None = None) -> float:
        """``sqrt(JS(F_law || reference))``; the reference defaults to the prior (eps_p)."""
        ref = self.prior if reference is None else check_distribution("reference", reference)
        return sqrt_js(self.belief(law), ref)

    def unprotected_leakage(self, law: object) -> float:
        """``C1 = sqrt(JS(F_P || F^))`` for the law ``P`` of the unprotected parameter."""
        return self.leakage(law)
