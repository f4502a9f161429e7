"""Gaussian differential privacy (mu-GDP): conversion, composition, CLT mu and an accountant.

Definitions (Dong, Roth, Su 2019, "Gaussian Differential Privacy", [DRS19]):

* mu-GDP means the trade-off function is at least ``G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)``.
* mu-GDP holds iff (epsilon, delta(epsilon))-DP holds for every epsilon >= 0, with
  ``delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)``
  ([DRS19] Cor. 2.13).
  This conversion is exact, in both directions.
* mu_i-GDP mechanisms compose (adaptively) to sqrt(sum mu_i^2)-GDP ([DRS19] Cor. 3.3).

Numerics: :func:`gdp_log_delta` works in log space. For ``a = -epsilon/mu + mu/2 < 0`` it uses the
identity ``e^epsilon phi(b) = phi(a)`` (with ``b = a - mu``) to write
``delta = exp(-a^2/2) / 2 * (erfcx(-a/sqrt2) - erfcx(-b/sqrt2))``, so the two huge-exponent terms
never have to be subtracted; it is accurate to about 1e-12 relative for mu in [0.01, 50] and any
delta, including deltas far below the smallest double (checked against mpmath in the tests).

The two CLT formulas (:func:`poisson_clt_mu`, :func:`fdp_clt_mu`) are ESTIMATES: limits as the
number of steps grows with ``q sqrt(T)`` fixed, evaluated at finite values. They are neither upper
nor lower bounds on the true privacy loss. :class:`GdpCltAccountant` labels its results
accordingly; only unsampled Gaussian steps give an exact ("bound") answer.

This module needs numpy and scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import optimize, special

from privfl._validation import (
    as_scalar_or_array,
    check_delta,
    check_epsilon,
    check_int,
    check_nonnegative,
    check_positive,
    check_range_array,
    check_rate,
)
from privfl.accounting.base import Accountant
from privfl.accounting.events import (
    Neighbouring,
    Noise,
    NoisyStep,
    PrivacyEvent,
    Sampling,
)
from privfl.accounting.logspace import log_expm1
from privfl.accounting.results import PrivacyResult
from privfl.accounting.safe_epsilon import EPSILON_MAX, smallest_safe_epsilon

__all__ = [
    "GDP_RELATIVE_ERROR",
    "GdpCltAccountant",
    "fdp_clt_kappa",
    "fdp_clt_mu",
    "gdp_compose",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_log_delta",
    "gdp_mu_for",
    "poisson_clt_mu",
]

#: Relative error allowed for the computed mu-GDP profile: :func:`gdp_delta` is accurate to
#: about 1e-12 relative (checked against mpmath in tests/accounting/test_gdp.py), so
#: :func:`gdp_epsilon` solves at delta lowered by this margin and is never below the exact root
#: (without it, one float step below in 13 of 108 grid cases); the PLD closed form
#: (:mod:`privfl.accounting.gdp.closed_form`) reads the same margin.
GDP_RELATIVE_ERROR = 1e-9

_SQRT2 = math.sqrt(2.0)
_LOG_HALF = math.log(0.5)
_LOG_MAX = math.log(np.finfo(float).max)


# --------------------------------------------------------------------------- input helpers
def _map_scalar(function: Callable[..., float], *arrays: np.ndarray) -> np.ndarray:
    """Apply a scalar function elementwise over broadcast arrays."""
    broadcast = np.broadcast_arrays(*arrays)
    out = np.empty(broadcast[0].shape, dtype=float)
    for index in np.ndindex(out.shape):
        out[index] = function(*(float(a[index]) for a in broadcast))
    return out


# --------------------------------------------------------------------------- conversion
def _log_delta(epsilon: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """log delta(epsilon) of mu-GDP for validated, broadcastable arrays (eps >= 0, mu >= 0)."""
    epsilon, mu = np.broadcast_arrays(np.asarray(epsilon, float), np.asarray(mu, float))
    out = np.full(epsilon.shape, -np.inf)
    positive = mu > 0  # mu = 0 is perfect privacy: delta = 0 for every epsilon >= 0
    eps, m = epsilon[positive], mu[positive]
    a = -eps / m + m / 2.0
    b = a - m
    result = np.empty(eps.shape)
    tail = a < 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        # a < 0: delta = exp(-a^2/2)/2 * (erfcx(-a/sqrt2) - erfcx(-b/sqrt2)), no cancellation of
        # exponents (e^eps phi(b) = phi(a) exactly).
        at, bt = a[tail], b[tail]
        difference = special.erfcx(-at / _SQRT2) - special.erfcx(-bt / _SQRT2)
        result[tail] = -0.5 * at * at + _LOG_HALF + np.log(difference)
        # a >= 0: Phi(a) >= 1/2 and delta >= delta(mu^2/2) is not small; subtract directly,
        # again writing e^eps Phi(b) = exp(-a^2/2) erfcx(-b/sqrt2) / 2 (no huge exponents).
        ah, bh = a[~tail], b[~tail]
        direct = special.ndtr(ah) - 0.5 * np.exp(-0.5 * ah * ah) * special.erfcx(-bh / _SQRT2)
        result[~tail] = np.log(direct)
    out[positive] = result
    return out


def gdp_log_delta(epsilon: float | np.ndarray, mu: float | np.ndarray) -> float | np.ndarray:
    """Natural log of :func:`gdp_delta`; finite even where delta underflows a double.

    Vectorised over ``epsilon`` (>= 0) and ``mu`` (>= 0, finite). ``mu = 0`` gives ``-inf``.
    """
    eps, eps_scalar = check_range_array("epsilon", epsilon, 0.0, math.inf, high_open=True)
    mus, mu_scalar = check_range_array("mu", mu, 0.0, math.inf, high_open=True)
    return as_scalar_or_array(_log_delta(eps, mus), eps_scalar and mu_scalar)


def gdp_delta(epsilon: float | np.ndarray, mu: float | np.ndarray) -> float | np.ndarray:
    """Smallest delta with mu-GDP => (epsilon, delta)-DP ([DRS19] Cor. 2.13); exact, vectorised.

    ``delta(epsilon) = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2)``, computed in
    log space (relative accuracy ~1e-12 for mu in [0.01, 50]); values below ~1e-308 underflow to
    0 here, use :func:`gdp_log_delta` for those.
    """
    eps, eps_scalar = check_range_array("epsilon", epsilon, 0.0, math.inf, high_open=True)
    mus, mu_scalar = check_range_array("mu", mu, 0.0, math.inf, high_open=True)
    return as_scalar_or_array(np.exp(_log_delta(eps, mus)), eps_scalar and mu_scalar)


def _log_delta_scalar(epsilon: float, mu: float) -> float:
    return float(_log_delta(np.asarray(epsilon), np.asarray(mu)))


def _epsilon_scalar(delta: float, mu: float) -> float:
    if mu == 0.0:
        return 0.0
    # first guess eps ~ mu^2/2 + mu sqrt(2 log(1/delta)); delta(eps) > delta for every
    # eps <= mu^2/2 (there delta(eps) >= 1/2 - phi(0)/mu), so beyond the float range: inf
    if 0.5 * mu * mu >= EPSILON_MAX:
        return math.inf
    guess = 0.5 * mu * mu + mu * math.sqrt(-2.0 * math.log(delta)) + 1.0
    safe = delta / (1.0 + GDP_RELATIVE_ERROR)  # the profile's error allowance: never below
    return smallest_safe_epsilon(lambda eps: _log_delta_scalar(eps, mu), safe, start=guess)


def gdp_epsilon(delta: float | np.ndarray, mu: float | np.ndarray) -> float | np.ndarray:
    """Smallest epsilon >= 0 with mu-GDP => (epsilon, delta)-DP; exact inversion of the curve.

    Solves ``log delta(epsilon) = log(delta / (1 + GDP_RELATIVE_ERROR))`` with the shared
    safe-side solver (:func:`~privfl.accounting.safe_epsilon.smallest_safe_epsilon`): the margin
    covers the computed profile's relative error, so the answer is never below the exact root
    (at most about 1e-9 relative in delta above it). Returns 0 when
    ``delta(0) = 2 Phi(mu/2) - 1 <= delta`` and ``inf`` beyond
    :data:`~privfl.accounting.safe_epsilon.EPSILON_MAX` (the float range; mu = 50, delta = 1e-15
    gives epsilon ~ 1650). Vectorised by looping.
    """
    deltas, delta_scalar = check_range_array(
        "delta", delta, 0.0, 1.0, low_open=True, high_open=True
    )
    mus, mu_scalar = check_range_array("mu", mu, 0.0, math.inf, high_open=True)
    return as_scalar_or_array(_map_scalar(_epsilon_scalar, deltas, mus), delta_scalar and mu_scalar)


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The mu whose mu-GDP curve passes through (epsilon, delta): delta(epsilon; mu) = delta.

    delta(epsilon; mu) increases with mu, so this is the largest mu whose guarantee implies
    (epsilon, delta)-DP. E.g. (1, 1e-5) -> 0.268051, (2, 1e-5) -> 0.501552, (8, 1e-5) -> 1.666031.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    if epsilon == 0.0:  # delta(0) = 2 Phi(mu/2) - 1
        return float(-2.0 * special.ndtri((1.0 - delta) / 2.0))
    log_target = math.log(delta)

    def gap(mu: float) -> float:
        return _log_delta_scalar(epsilon, mu) - log_target

    high = 1.0
    while gap(high) < 0:
        high *= 2.0
    low = high / 2.0
    while gap(low) > 0:
        low /= 2.0
    return float(optimize.brentq(gap, low, high, xtol=1e-15, rtol=1e-15, maxiter=500))


def gdp_compose(*mus: float) -> float:
    """Composition of mu_i-GDP mechanisms: sqrt(mu_1^2 + ... + mu_k^2)-GDP ([DRS19] Cor. 3.3).

    Exact (adaptive composition). No arguments gives 0 (nothing released).
    """
    checked = [check_nonnegative(f"mus[{i}]", mu) for i, mu in enumerate(mus)]
    return float(math.hypot(*checked)) if checked else 0.0


# --------------------------------------------------------------------------- CLT estimates
def poisson_clt_mu(sampling_rate: float, noise_multiplier: float, steps: int) -> float:
    """ESTIMATE: CLT mu of T Poisson-subsampled Gaussian steps, add/remove neighbours.

    ``mu = q sqrt(T (e^{1/z^2} - 1))`` (Bu, Dong, Long, Su 2020, "Deep learning with Gaussian
    differential privacy", Thm 5). ``q`` is the Poisson rate, ``z`` the noise multiplier (noise std
    / clipping norm on the summed gradient), ``T`` the number of steps. This is the limit as
    ``T -> inf`` with ``q sqrt(T)`` fixed, evaluated at finite values: an approximation, NOT a
    bound (it can under- or over-state the privacy loss; use the PLD or RDP accountant for a
    guarantee). Computed in log space; returns ``inf`` if mu exceeds the float range.
    """
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    steps = check_int("steps", steps, minimum=0)
    if steps == 0:
        return 0.0
    x = (1.0 / z) * (1.0 / z)  # inf (not an error) below z ~ 1e-154
    # huge noise: x may underflow to 0, where log(e^x - 1) = log x = -2 log z to double precision
    log_em1 = -2.0 * math.log(z) if x < 1e-100 else log_expm1(x)
    log_mu = math.log(q) + 0.5 * (math.log(steps) + log_em1)
    return math.exp(log_mu) if log_mu < _LOG_MAX else math.inf


def _log_kappa(noise_multiplier: float) -> float:
    """log kappa(s), kappa^2 = e^{1/s^2} Phi(1.5/s) + 3 Phi(-0.5/s) - 2, stable for all s, at
    Zheng et al. 2021's ``s = sigma = z / 2`` (``noise_multiplier`` z)."""
    x = 1.0 / (noise_multiplier / 2.0)  # 1 / s
    x2 = x * x
    if x < 1e-100:  # huge s: kappa^2 = x^2/2 (1 + O(x)), and x^2 may underflow to 0
        return math.log(x) - 0.5 * math.log(2.0)
    if x2 < 1.0:
        # Large s: kappa^2 ~ x^2/2, so remove the O(1) cancellation analytically:
        # kappa^2 = expm1(x^2) Phi(1.5x) + [Phi(1.5x) - 1/2] - 3 [Phi(0.5x) - 1/2].
        u = x / _SQRT2
        if x < 0.1:  # the erf difference cancels at first order: use its Taylor series
            erf_part = sum(
                (-1) ** n
                * u ** (2 * n + 1)
                / (math.factorial(n) * (2 * n + 1))
                * (1.5 ** (2 * n + 1) - 3.0 * 0.5 ** (2 * n + 1))
                for n in range(1, 12)
            ) / math.sqrt(math.pi)
        else:
            erf_part = 0.5 * math.erf(1.5 * u) - 1.5 * math.erf(0.5 * u)
        kappa2 = math.expm1(x2) * special.ndtr(1.5 * x) + erf_part
        return 0.5 * math.log(kappa2)
    # Small s: factor out e^{x^2} Phi(1.5x) (e^{x^2} alone overflows for s < 0.0376).
    log_lead = x2 + float(special.log_ndtr(1.5 * x))
    rest = (3.0 * special.ndtr(-0.5 * x) - 2.0) * math.exp(-log_lead)  # in (-0.8, 0)
    return 0.5 * (log_lead + math.log1p(rest))


def fdp_clt_kappa(noise_multiplier: float) -> float:
    """kappa(sigma) = sqrt(e^{1/sigma^2} Phi(1.5/sigma) + 3 Phi(-0.5/sigma) - 2) of Zheng et al.
    2021, at their sigma = noise std / (2C) = z / 2 (``noise_multiplier`` z = 2 sigma).

    The factor of :func:`fdp_clt_mu`; computed stably (no overflow for small sigma, no cancellation
    for large sigma). Returns ``inf`` if kappa exceeds the float range (sigma below ~0.027, z
    below ~0.054).
    """
    noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
    log_kappa = _log_kappa(noise_multiplier)
    return math.exp(log_kappa) if log_kappa < _LOG_MAX else math.inf


def fdp_clt_mu(sampling_rate: float, steps: int, noise_multiplier: float) -> float:
    """ESTIMATE: CLT mu of T fixed-size-batch Gaussian steps, replace-one neighbours.

    ``mu = sqrt(2) q sqrt(T) kappa(sigma)`` with
    ``kappa(sigma) = sqrt(e^{1/sigma^2} Phi(1.5/sigma) + 3 Phi(-0.5/sigma) - 2)``: the limit of
    ``C_q(G_{1/sigma})^{(x) T}`` ([DRS19] Cor. 5.4; Zheng et al. 2021, Theorem 2 as in its
    Appendix D: the main text's sqrt(2 c) is a typo). ``q = B/n`` (batches of fixed size B drawn
    uniformly without replacement from n records), ``T`` steps, and ``sigma`` is the paper's
    sigma = noise std / (2C) on the summed gradient; the argument is ``noise_multiplier``
    z = 2 sigma. An asymptotic approximation, NOT a bound (use the PLD accountant for a
    guarantee). Computed in log space; returns ``inf`` if mu overflows a float.
    """
    q = check_rate("sampling_rate", sampling_rate)
    steps = check_int("steps", steps, minimum=0)
    z = check_positive("noise_multiplier", noise_multiplier)
    if steps == 0:
        return 0.0
    log_mu = 0.5 * math.log(2.0) + math.log(q) + 0.5 * math.log(steps) + _log_kappa(z)
    return math.exp(log_mu) if log_mu < _LOG_MAX else math.inf


# --------------------------------------------------------------------------- accountant
_EXACT_NOTE = (
    "exact: no step is subsampled, so the composition of Gaussian mechanisms is exactly mu-GDP "
    "(mu = sqrt(sum_T (sensitivity/z)^2)) and the mu-GDP to (epsilon, delta) conversion is exact"
)
_CLT_NOTE = (
    "CLT estimate (Poisson/add-remove: Bu-Dong-Long-Su 2020; fixed-size/replace-one: "
    "Dong-Roth-Su 2019 Cor. 5.4): an asymptotic approximation, not a certified bound; use the "
    "pld or rdp accountant for a guarantee"
)


class GdpCltAccountant(Accountant):
    """Gaussian-DP accounting: CLT mu for subsampled steps (estimate), exact mu otherwise.

    Per group of identical steps (``count`` repetitions of a :class:`NoisyStep`, Gaussian noise):

    * Poisson sampling, add/remove: :func:`poisson_clt_mu` (estimate);
    * fixed-size batches without replacement, replace-one: :func:`fdp_clt_mu` (Zheng et al.
      2021's ``sigma = z / 2``; estimate);
    * no sampling (q = 1): the exact ``mu = sqrt(count) s / z`` with sensitivity ``s = 1``
      (add/remove) or ``2`` (replace-one).

    Groups compose by :func:`gdp_compose` (for CLT parts this relies on mu^2 being additive in the
    number of steps, which holds for both formulas). The result is ``kind="estimate"`` as soon as
    one CLT part is involved, and an exact ``kind="bound"`` when every step is unsampled.
    Groups with ``count = 0`` release nothing and are ignored.
    """

    name = "gdp-clt"
    kind = "estimate"

    def unsupported_reason(self, event: PrivacyEvent) -> str | None:
        for step, count in event.steps:
            if count == 0:
                continue
            if step.noise is not Noise.GAUSSIAN:
                return (
                    f"{step.noise.value} noise has no Gaussian-DP description; GDP accounting "
                    "needs Gaussian noise"
                )
            sampling = step.effective_sampling
            if sampling is Sampling.POISSON and event.neighbouring is not Neighbouring.ADD_REMOVE:
                return (
                    "Poisson sampling with replace-one neighbours has no GDP CLT formula here "
                    "(the Bu-Dong-Long-Su CLT assumes add/remove neighbours)"
                )
            if (
                sampling is Sampling.WITHOUT_REPLACEMENT
                and event.neighbouring is not Neighbouring.REPLACE_ONE
            ):
                return (
                    "fixed-size sampling without replacement with add/remove neighbours has no "
                    "GDP CLT formula here (the Dong-Roth-Su C_q CLT assumes replace-one neighbours)"
                )
        return None

    @staticmethod
    def _group_mu(step: NoisyStep, count: int, neighbouring: Neighbouring) -> tuple[float, bool]:
        z = step.noise_multiplier
        sampling = step.effective_sampling
        if sampling is Sampling.NONE:
            sensitivity = 1.0 if neighbouring is Neighbouring.ADD_REMOVE else 2.0
            return math.sqrt(count) * sensitivity / z, True
        if sampling is Sampling.POISSON:
            return poisson_clt_mu(step.sampling_rate, z, count), False
        if z / 2.0 == 0.0:  # z is the smallest subnormal float: mu is beyond the float range
            return math.inf, False
        return fdp_clt_mu(step.sampling_rate, count, z), False

    def mu(self, event: PrivacyEvent) -> tuple[float, bool]:
        """``(mu, is_exact)``: the event's GDP parameter, and whether it is exact (no CLT used)."""
        self._require_supported(event)
        mus, exact = [], True
        for step, count in event.steps:
            if count == 0:
                continue
            mu, group_exact = self._group_mu(step, count, event.neighbouring)
            mus.append(mu)
            exact = exact and group_exact
        if any(math.isinf(mu) for mu in mus):
            return math.inf, exact
        return gdp_compose(*mus), exact

    def _labels(self, event: PrivacyEvent, mu: float, exact: bool) -> tuple[str, str]:
        if exact:
            return "bound", _EXACT_NOTE
        note = _CLT_NOTE
        sensitivity = 1.0 if event.neighbouring is Neighbouring.ADD_REMOVE else 2.0
        # r * r, not r ** 2: for tiny z the power raises OverflowError, the product is inf
        ratios = [(count, sensitivity / step.noise_multiplier) for step, count in event.steps]
        no_amplification = math.sqrt(sum(count * (r * r) for count, r in ratios))
        if mu > no_amplification:
            note += (
                f"; WARNING: this CLT mu exceeds mu = {no_amplification:.6g}, which is a rigorous "
                "bound ignoring subsampling, so the CLT is far from its regime here"
            )
        return "estimate", note

    def _epsilon(self, event: PrivacyEvent, delta: float) -> PrivacyResult:
        mu, exact = self.mu(event)
        epsilon = math.inf if math.isinf(mu) else _epsilon_scalar(delta, mu)
        kind, note = self._labels(event, mu, exact)
        if math.isinf(epsilon):
            what = "mu and epsilon exceed" if math.isinf(mu) else "epsilon exceeds"
            note += f"; {what} the float range (about 1.8e308): no finite value can be stated"
        return PrivacyResult.for_event(
            event, method=self.name, kind=kind, epsilon=epsilon, delta=delta, mu=mu, note=note
        )

    def _delta(self, event: PrivacyEvent, epsilon: float) -> PrivacyResult:
        mu, exact = self.mu(event)
        delta = 1.0 if math.isinf(mu) else math.exp(_log_delta_scalar(epsilon, mu))
        kind, note = self._labels(event, mu, exact)
        return PrivacyResult.for_event(
            event, method=self.name, kind=kind, epsilon=epsilon, delta=delta, mu=mu, note=note
        )
