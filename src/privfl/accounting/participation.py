"""Random client participation (seed 003): Theorem 4.1, OLS, WCS, CS and a proven tighter bound.

Source: Hasircioglu & Gunduz, "Privacy Amplification via Random Participation in Federated
Learning" (arXiv 2205.01556), with the corrections of ``shared/specs/seed3-random-participation.md``
("the spec"). numpy/scipy/dp-accounting only; never imports torch. The user documentation, with
the proofs, is ``docs/accountants/random-participation.md``.

What ran (Algorithm 1)
----------------------
Every iteration each available client joins independently with probability ``p``
(``client_rate``); a participating client keeps each of its records independently with probability
``q`` (``record_rate``) and sends the sum of the kept records' gradients, each clipped to L2 norm
``C`` (``clip``). The trusted server adds one ``N(0, sigma^2 I)`` (``noise`` = sigma, the std on
the *sum*) and releases the noisy sum (rescaling by the *expected* batch is post-processing).
Neighbouring datasets differ by adding/removing one record x' held by a client that holds
``records`` = d other records (the largest d over clients is the worst case: every bound below
except Theorem 4.1 is non-decreasing in d). Only ``z = sigma / C`` matters.

Directions
----------
``forward`` is ``H_{e^eps}(M(D u {x'}) || M(D))`` (the only one the paper bounds), ``reverse`` is
``H_{e^eps}(M(D) || M(D u {x'}))``. Rigorous answers (``kind = "bound"``) take the maximum of
both, each computed in closed form (spec 8.7).

Kinds: ``bound`` (rigorous for random participation: ``per-s1-convexity``, ``wcs``, ``ols`` and
their compositions), ``estimate`` (``theorem-4.1``, the paper's formula, which can fall below the
truth) and ``reference`` (``cs``, ``cs-rdp``, ``cs-pld``: rigorous for a different mechanism,
centralised Poisson sampling at rate p q, and therefore a LOWER reference for random
participation; never a guarantee for Algorithm 1). :func:`scheme_kind` gives the kind of a scheme.

Schemes (per iteration)
-----------------------
With ``eps' = log(1 + (e^eps - 1)/(p q))``, ``alpha' = e^eps'``, ``beta = e^(eps - eps')``,
``c1 = (1-p)/(1-pq)``, ``c2 = p(1-q)/(1-pq)``, ``cb1 = (1-beta) c1``, ``cb2 = (1-beta) c2 + beta``,
``k = alpha' cb2 = 1 + (e^eps - 1)/q``, ``c = alpha' cb1``, ``kappa = 1 - (e^eps - 1)(1-q)/q``
and ``b_i`` the Binomial(d, q) pmf; ``phi_m`` is the N(m C, sigma^2) density:

* ``cs``  - Poisson sampling at rate ``p q``: ``delta = pq delta_G(eps')`` (forward).
  A bound for *that* scheme; for random participation it is the exact delta of the
  zero-gradient configuration, i.e. a LOWER bound (the ideal that random participation cannot
  beat).
* ``ols`` - Poisson at rate q: ``delta = q delta_G(log k)``. Upper bound for random
  participation (and exact for p = 1).
* ``wcs`` - participation revealed: ``delta = p * delta_ols`` in each direction. Upper bound
  for random participation (post-processing: drop the revealed bit); exact for the
  "untrusted-participants-only" server.
* ``per-s1-convexity`` (the spec's variant B) -
  ``delta = pq sum_i b_i int [phi_{i+1} - k phi_i - c phi_0]_+`` (forward) and
  ``pq sum_i b_i int [kappa phi_i - c phi_0 - e^eps phi_{i-1}]_+`` (reverse). PROVEN upper bound
  (advanced joint convexity, joint convexity over client 1's own sampling, and a Gaussian
  interpolation lemma showing that aligned, maximal gradients are the worst case of each term;
  anti-aligned for the reverse direction). CS <= it <= WCS <= OLS.
* ``theorem-4.1`` - the paper's Eq. (6): the *exact* forward delta of one configuration (all of
  client 1's gradients aligned with norm C). Always ``kind = "estimate"``: a lower bound on the
  true delta of that configuration, not a worst-case bound; it can fall below CS.

Numerics: every per-term integral ``int [P phi(t) - sum_j N_j phi(t + h_j)]_+ dt`` (all negative
means below the positive one) has exactly one crossing t* (Descartes' rule of signs for
exponential sums), found by Newton's method from a closed-form lower bracket (the log-ratio is
convex and decreasing, so Newton converges monotonically), then evaluated as
``P phi(t*) sum_j w_j (M(t*) - M(t* + h_j))`` with the Mills ratio ``M = SF/phi`` (no
cancellation of tail masses). Theorem 4.1 solves its z* (Eq. 7, a single sign change, proven the
same way) by a bracketed Brent root with a grid-scan fallback and evaluates Eq. (6) with the
same Mills form. Everything is in log space, so deltas far below 1e-300 are still ordered.

Composition over T iterations (rigorous, both directions): ``cs`` and ``ols`` are standard
Poisson-subsampled Gaussian events handed to privfl's RDP and PLD accountants; ``wcs`` uses the
exact closed-form RDP ``log(1 - p + p e^{(a-1) RDP_ols(a)})/(a-1)`` and the exact PLD mixture
``(1-p) * (loss 0) + p * PLD_ols`` (dp-accounting, pessimistic connect-the-dots). For
``theorem-4.1`` and ``per-s1-convexity`` only basic composition ``(T eps, T delta)`` of the
per-iteration numbers is offered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from scipy import optimize, special, stats

from privfl._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
    check_rate,
)
from privfl.accounting.calibrate_search import (
    RTOL_CLOSED_FORM,
    NoiseOutOfRangeError,
    smallest_noise_search,
)
from privfl.accounting.events import Neighbouring, NoisyStep, PrivacyEvent, Sampling, Unit
from privfl.accounting.logspace import log1mexp, logsubexp, logsumexp
from privfl.accounting.methods import AccountingOptions, account
from privfl.accounting.pld import composed_delta, composed_epsilon, poisson_gaussian_pld
from privfl.accounting.rdp import (
    delta_from_rdp,
    epsilon_from_rdp,
    rdp_poisson_gaussian,
    resolve_orders,
)
from privfl.accounting.results import Kind, PrivacyResult
from privfl.accounting.safe_epsilon import smallest_safe_epsilon

__all__ = [
    "ACCOUNTANTS",
    "COMPOSABLE_SCHEMES",
    "DIRECTIONS",
    "SCHEMES",
    "SERVERS",
    "amplify_epsilon",
    "calibrate_participation",
    "calibrate_participation_report",
    "NoiseCalibration",
    "deamplify_epsilon",
    "gaussian_delta",
    "participation_constants",
    "participation_delta",
    "participation_epsilon",
    "participation_event",
    "participation_noise",
    "participation_report",
    "scheme_kind",
    "theorem41_zstar",
    "wcs_pld",
    "wcs_rdp",
]

#: Per-iteration schemes, from the paper's (unsound) Theorem 4.1 to the loosest bound.
SCHEMES = ("theorem-4.1", "per-s1-convexity", "wcs", "ols", "cs")
#: Schemes whose per-iteration mechanism has a known dominating pair (rigorous composition).
COMPOSABLE_SCHEMES = ("cs", "ols", "wcs")
#: ``max`` = the larger of the two directions (what a guarantee needs).
DIRECTIONS = ("max", "forward", "reverse")
#: Release models (spec 2.5 / 4.4).
SERVERS = ("trusted", "untrusted", "untrusted-participants-only")
#: Accountants used for composition over iterations.
ACCOUNTANTS = ("rdp", "pld")


def scheme_kind(scheme: str) -> Kind:
    """What a scheme's number is for random participation (see the module docstring):
    ``"estimate"`` for Theorem 4.1, ``"reference"`` (a lower reference, rigorous only for
    centralised sampling at rate p q) for CS, ``"bound"`` for the others."""
    scheme = check_choice("scheme", scheme, SCHEMES)
    if scheme == "theorem-4.1":
        return "estimate"
    if scheme == "cs":
        return "reference"
    return "bound"

_RELEASE = {
    "trusted": "every aggregated noisy gradient (trusted server)",
    "untrusted": (
        "every client message (untrusted server: every available client sends each iteration, "
        "non-participants send pure noise N(0, sigma^2 I), participants their clipped sum plus "
        "their own N(0, sigma^2 I))"
    ),
    "untrusted-participants-only": (
        "every client message (untrusted server: only participants send their clipped sum plus "
        "their own N(0, sigma^2 I), so participation is revealed)"
    ),
}
#: Schemes that are meaningful for each release model.
_SERVER_SCHEMES = {
    "trusted": SCHEMES,
    "untrusted": SCHEMES,
    "untrusted-participants-only": ("wcs", "ols"),
}

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_HALF_PI = math.sqrt(0.5 * math.pi)
_SQRT2 = math.sqrt(2.0)
_MILLS_MIN = -30.0  # below this, tail masses are ~1 and the direct form is accurate
_NEWTON_STEPS = 200


# --------------------------------------------------------------------------------------------
# Setting and validation
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Setting:
    p: float  # client participation probability
    q: float  # local record sampling probability
    d: int  # other records of the client holding x'
    z: float  # noise multiplier sigma / C

    @property
    def pq(self) -> float:
        return self.p * self.q


def _setting(client_rate, record_rate, records, noise, clip) -> _Setting:
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    d = check_int("records", records, minimum=0)
    sigma = check_positive("noise", noise)
    c = check_positive("clip", clip)
    z = sigma / c
    if not math.isfinite(z) or z <= 0.0:
        raise ValueError(f"noise / clip = {z!r} is out of range: must be a finite number > 0")
    return _Setting(p, q, d, z)


def _check_scheme(scheme: object, server: str = "trusted") -> str:
    name = check_choice("scheme", scheme, SCHEMES)
    allowed = _SERVER_SCHEMES[server]
    if name not in allowed:
        raise ValueError(
            f"scheme = {name!r} is not allowed with server = {server!r}: must be one of "
            f"{', '.join(allowed)} (participation is revealed to the server)"
        )
    return name


def _check_direction(direction: object, scheme: str) -> str:
    direction = check_choice("direction", direction, DIRECTIONS)
    if scheme == "theorem-4.1" and direction == "reverse":
        raise ValueError(
            "direction = 'reverse' is not allowed for scheme 'theorem-4.1': the paper's theorem "
            "states only the forward direction (must be 'forward' or 'max')"
        )
    return direction


def _check_query(
    scheme: object,
    name: str,
    value: object,
    client_rate: object,
    record_rate: object,
    records: object,
    noise: object,
    clip: object,
    direction: object,
) -> tuple[str, float, _Setting, str]:
    """Checked ``(scheme, value, setting, direction)`` of a per-iteration query, in that order;
    ``name`` says whether ``value`` is an ``"epsilon"`` or a ``"delta"``."""
    scheme = _check_scheme(scheme)
    value = (check_epsilon if name == "epsilon" else check_delta)(name, value)
    s = _setting(client_rate, record_rate, records, noise, clip)
    return scheme, value, s, _check_direction(direction, scheme)


# --------------------------------------------------------------------------------------------
# Amplification maps and the paper's constants
# --------------------------------------------------------------------------------------------


def amplify_epsilon(epsilon: float, rate: float) -> float:
    """``log(1 + rate (e^epsilon - 1))``: the epsilon of a base-epsilon step sampled at ``rate``."""
    eps = check_epsilon("epsilon", epsilon)
    g = check_rate("rate", rate)
    return _amp(eps, g)


def deamplify_epsilon(epsilon: float, rate: float) -> float:
    """``log(1 + (e^epsilon - 1) / rate)``: the base epsilon behind a sampled epsilon (spec 2.1)."""
    eps = check_epsilon("epsilon", epsilon)
    g = check_rate("rate", rate)
    return _deamp(eps, g)


def _amp(eps: float, g: float) -> float:
    if eps == 0.0 or g == 1.0:
        return eps
    if eps < 1.0:
        return math.log1p(g * math.expm1(eps))
    return eps + math.log(g + (1.0 - g) * math.exp(-eps))


def _deamp(eps: float, g: float) -> float:
    if eps == 0.0 or g == 1.0:
        return eps
    if eps < 1.0:
        return math.log1p(math.expm1(eps) / g)
    return eps + math.log1p(-(1.0 - g) * math.exp(-eps)) - math.log(g)


@dataclass(frozen=True)
class _Constants:
    eps: float
    eps1: float  # eps' (base epsilon at rate pq)
    eps2: float  # eps'' = log(alpha' cb2) = deamp(eps, q) (WCS, Theorem 5.2)
    log_beta: float
    cbar1: float
    cbar2: float
    log_k: float  # log(alpha' cb2)
    log_c: float  # log(alpha' cb1)
    log_kappa: float  # log(1 - (e^eps - 1)(1 - q)/q), -inf if <= 0
    log_kappa_pq: float  # the same at rate pq (CS reverse, per-s1 reverse i = 0)


def _log_kappa(eps: float, g: float) -> float:
    if g == 1.0:
        return 0.0
    x = math.expm1(eps) * (1.0 - g) / g if eps < 700 else math.inf
    return math.log1p(-x) if x < 1.0 else -math.inf


def _constants(eps: float, p: float, q: float) -> _Constants:
    pq = p * q
    eps1 = _deamp(eps, pq)
    eps2 = _deamp(eps, q)
    log_beta = eps - eps1
    beta = math.exp(log_beta)
    if pq == 1.0:
        c1, c2 = 0.0, 1.0
        log_c1 = -math.inf
    else:
        c1 = (1.0 - p) / (1.0 - pq)
        c2 = p * (1.0 - q) / (1.0 - pq)
        log_c1 = math.log1p(-p) - math.log1p(-pq) if p < 1.0 else -math.inf
    one_minus_beta = -math.expm1(log_beta)
    cbar1 = one_minus_beta * c1
    cbar2 = one_minus_beta * c2 + beta
    # alpha' cb1 = c1 (alpha' - alpha) = c1 e^eps1 (1 - beta)
    log_c = log_c1 + eps1 + log1mexp(log_beta) if log_c1 > -math.inf else -math.inf
    return _Constants(
        eps=eps,
        eps1=eps1,
        eps2=eps2,
        log_beta=log_beta,
        cbar1=cbar1,
        cbar2=cbar2,
        log_k=eps2,
        log_c=log_c,
        log_kappa=_log_kappa(eps, q),
        log_kappa_pq=_log_kappa(eps, pq),
    )


def participation_constants(epsilon: float, client_rate: float, record_rate: float) -> dict:
    """The paper's derived quantities at ``epsilon`` (spec 4.1), as a dict.

    ``eps1`` = eps', ``alpha1`` = alpha' = e^eps', ``beta``, ``cbar1``, ``cbar2``, ``eps2`` =
    eps'' of Theorem 5.2 (= log(1 + (e^eps - 1)/q)), ``kappa`` = 1 - (e^eps - 1)(1 - q)/q (the
    reverse direction's weight; <= 0 means the reverse delta is 0).
    """
    eps = check_epsilon("epsilon", epsilon)
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    k = _constants(eps, p, q)
    return {
        "eps1": k.eps1,
        "alpha1": math.exp(k.eps1) if k.eps1 < 709 else math.inf,
        "beta": math.exp(k.log_beta),
        "cbar1": k.cbar1,
        "cbar2": k.cbar2,
        "eps2": k.eps2,
        "kappa": 1.0 - math.expm1(eps) * (1.0 - q) / q if eps < 700 else -math.inf,
    }


# --------------------------------------------------------------------------------------------
# One-crossing Gaussian integrals
# --------------------------------------------------------------------------------------------


def _mills(x: np.ndarray) -> np.ndarray:
    """Mills ratio ``SF(x) / phi(x)`` (finite for x >= -37)."""
    return _SQRT_HALF_PI * special.erfcx(x / _SQRT2)


def _log_positive_part(log_p: np.ndarray, log_n: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Row-wise ``log int [P phi(t) - sum_j N_j phi(t + h_j)]_+ dt`` with all ``h_j > 0``.

    ``log_p`` has shape (n,), ``log_n`` and ``h`` shape (n, J) (``-inf`` entries of ``log_n`` are
    absent terms). The ratio of the negative part to ``P phi(t)`` is
    ``exp(G(t))``, ``G(t) = log sum_j exp(a_j - h_j t)``, ``a_j = log(N_j/P) - h_j^2/2``: convex and
    strictly decreasing, so there is exactly one crossing t* and the positive region is
    ``t > t*``. ``t* >= max_j a_j / h_j`` (each term is <= 1 at the root); Newton's method from
    there increases monotonically to t*.
    """
    log_p = np.atleast_1d(np.asarray(log_p, dtype=float))
    log_n = np.atleast_2d(np.asarray(log_n, dtype=float))
    h = np.broadcast_to(np.asarray(h, dtype=float), log_n.shape)
    out = np.full(log_p.shape, -np.inf)
    present = np.isfinite(log_n)
    has_p = np.isfinite(log_p)
    no_neg = has_p & ~present.any(axis=1)
    out[no_neg] = log_p[no_neg]
    rows = np.flatnonzero(has_p & present.any(axis=1))
    if rows.size == 0:
        return out
    H = np.where(present[rows], h[rows], 1.0)
    A = np.where(present[rows], log_n[rows] - log_p[rows, None] - 0.5 * H * H, -np.inf)
    with np.errstate(invalid="ignore"):
        t = np.max(np.where(np.isfinite(A), A / H, -np.inf), axis=1)
    for _ in range(_NEWTON_STEPS):
        e = A - H * t[:, None]
        top = np.max(e, axis=1)
        w = np.exp(e - top[:, None])
        s = np.sum(w, axis=1)
        g = top + np.log(s)
        slope = np.sum(w * H, axis=1) / s  # -G'(t) > 0
        step = g / slope
        t = t + step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(t))):
            break
    e = A - H * t[:, None]
    top = np.max(e, axis=1)
    w = np.exp(e - top[:, None])
    w /= np.sum(w, axis=1)[:, None]
    result = np.full(rows.size, -np.inf)
    mills_rows = t >= _MILLS_MIN
    if np.any(mills_rows):
        tm = t[mills_rows]
        Hm = H[mills_rows]
        bracket = np.sum(w[mills_rows] * (_mills(tm)[:, None] - _mills(tm[:, None] + Hm)), axis=1)
        with np.errstate(divide="ignore"):
            result[mills_rows] = (
                log_p[rows][mills_rows] - 0.5 * tm * tm - _LOG_SQRT_2PI + np.log(bracket)
            )
    for r in np.flatnonzero(~mills_rows):
        # t* < -30: SF(t*) ~ 1, no tiny quantities; subtract in log space
        row = rows[r]
        lp = float(special.log_ndtr(-t[r]))
        mask = present[row]
        ln = logsumexp(log_n[row][mask] - log_p[row] + special.log_ndtr(-(t[r] + H[r][mask])))
        result[r] = log_p[row] + logsubexp(lp, ln) if lp > ln else -np.inf
    out[rows] = result
    return out


def _log_term(log_p: float, log_n: Sequence[float], h: Sequence[float]) -> float:
    return float(_log_positive_part(np.array([log_p]), np.array([log_n]), np.array([h]))[0])


def gaussian_delta(epsilon: float, noise: float, clip: float = 1.0) -> float:
    """Exact Gaussian-mechanism delta (Balle & Wang 2018, Thm 8; spec Theorem 2.4):
    ``Phi(C/(2 sigma) - eps sigma / C) - e^eps Phi(-C/(2 sigma) - eps sigma / C)``."""
    eps = check_epsilon("epsilon", epsilon)
    z = check_positive("noise", noise) / check_positive("clip", clip)
    return math.exp(_log_term(0.0, [eps], [1.0 / z]))


# --------------------------------------------------------------------------------------------
# Per-iteration log deltas, one scheme and direction at a time
# --------------------------------------------------------------------------------------------


def _log_psg_forward(eps: float, g: float, z: float) -> float:
    """log delta of the Poisson(g)-subsampled Gaussian, with||without: g delta_G(deamp(eps, g))."""
    return math.log(g) + _log_term(0.0, [_deamp(eps, g)], [1.0 / z])


def _log_psg_reverse(eps: float, g: float, z: float) -> float:
    """log H(N(0) || (1-g) N(0) + g N(C)) = g int [kappa_g phi_1 - e^eps phi_0]_+ (reflected)."""
    log_kappa = _log_kappa(eps, g)
    if log_kappa == -math.inf:
        return -math.inf
    return math.log(g) + _log_term(log_kappa, [eps], [1.0 / z])


def _binomial_window(d: int, q: float) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Indices i, log b_i on a window of Binomial(d, q), and log masses below / above it."""
    if d == 0:
        return np.array([0]), np.array([0.0]), -math.inf, -math.inf
    if q == 1.0:
        return np.array([d]), np.array([0.0]), -math.inf, -math.inf
    mean = d * q
    half = 20.0 * math.sqrt(d * q * (1.0 - q)) + 40.0
    lo = max(0, int(math.floor(mean - half)))
    hi = min(d, int(math.ceil(mean + half)))
    i = np.arange(lo, hi + 1)
    log_b = stats.binom.logpmf(i, d, q)
    keep = np.isfinite(log_b)
    log_low = float(stats.binom.logcdf(lo - 1, d, q)) if lo > 0 else -math.inf
    log_high = float(stats.binom.logsf(hi, d, q)) if hi < d else -math.inf
    return i[keep], log_b[keep], log_low, log_high


def _log_per_s1(eps: float, s: _Setting, direction: str) -> float:
    """Variant B (per-S1 convexity), one direction; tails of the binomial outside the window
    are bounded by the monotonicity of the terms (rigorous)."""
    k = _constants(eps, s.p, s.q)
    i, log_b, log_low, log_high = _binomial_window(s.d, s.q)
    h1 = 1.0 / s.z
    n = i.size
    if direction == "forward":
        # int [phi_{i+1} - k phi_i - c phi_0]_+ ; shifts 1/z and (i+1)/z
        log_p = np.zeros(n)
        log_n = np.column_stack([np.full(n, k.log_k), np.full(n, k.log_c)])
        h = np.column_stack([np.full(n, h1), (i + 1.0) * h1])
        sup = _log_term(0.0, [k.log_k], [h1])  # the WCS inner term: limit as i -> inf
    else:
        # int [kappa phi_i - c phi_0 - e^eps phi_{i-1}]_+ ; i = 0 merges kappa and c at mean 0
        if k.log_kappa == -math.inf:
            return -math.inf
        log_p = np.full(n, k.log_kappa)
        log_n = np.column_stack([np.full(n, eps), np.full(n, k.log_c)])
        h = np.column_stack([np.full(n, h1), np.where(i > 0, i * h1, 1.0)])
        zero = i == 0
        log_p[zero] = k.log_kappa_pq
        log_n[zero, 1] = -np.inf
        sup = _log_term(k.log_kappa, [eps], [h1])
    terms = _log_positive_part(log_p, log_n, h)
    parts = [log_b + terms]
    if log_low > -math.inf:
        parts.append(np.array([log_low + terms[0]]))  # T_i <= T_lo for i < lo
    if log_high > -math.inf:
        parts.append(np.array([log_high + sup]))  # T_i <= sup for all i
    value = logsumexp(np.concatenate(parts))
    value = min(value, sup)  # <= WCS inner (proven); guards rounding
    return math.log(s.pq) + value


# --- Theorem 4.1 -----------------------------------------------------------------------------


def _theorem41_coefficients(
    eps: float, s: _Setting
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Eq. (28) integrand grouped by mean j C: ``coef_j = b_{j-1} - k b_j`` (and ``- c`` at j=0).

    Returns ``(log|coef| of positive ones, their means, log|coef| of negative ones, means)``
    in units of C. The coefficients change sign exactly once (``b_{j-1}/b_j`` increases in j).
    """
    k = _constants(eps, s.p, s.q)
    i, log_b, _, _ = _binomial_window(s.d, s.q)
    j = np.arange(int(i[0]), int(i[-1]) + 2)
    lb = np.full(j.size, -np.inf)
    lb[i - j[0]] = log_b
    prev = np.concatenate([[-np.inf], lb[:-1]])  # log b_{j-1}
    neg = k.log_k + lb
    if j[0] == 0:
        neg[0] = np.logaddexp(neg[0], k.log_c)
    pos_log, pos_m, neg_log, neg_m = [], [], [], []
    for jj, a, b in zip(j, prev, neg, strict=True):
        if a > b:
            pos_log.append(logsubexp(a, b))
            pos_m.append(float(jj))
        elif b > a:
            neg_log.append(logsubexp(b, a))
            neg_m.append(float(jj))
    return np.array(pos_log), np.array(pos_m), np.array(neg_log), np.array(neg_m)


def _mixture_log_ratio(y, log_w, m, z):
    """log sum_a w_a N(y; m_a, z^2) / N(y; 0, z^2)."""
    return logsumexp(log_w + (y * m - 0.5 * m * m) / (z * z))


def _scan_root(func: Callable[[float], float], lo: float, hi: float, n: int = 4001) -> float | None:
    """Guarded fallback: the first sign change of ``func`` on a grid, refined by Brent."""
    grid = np.linspace(lo, hi, n)
    values = np.array([func(float(y)) for y in grid])
    ok = np.isfinite(values)
    for a in range(n - 1):
        if ok[a] and ok[a + 1] and values[a] <= 0.0 < values[a + 1]:
            return float(optimize.brentq(func, grid[a], grid[a + 1], xtol=1e-14, rtol=1e-15))
    return None


def _theorem41_root(pos_log, pos_m, neg_log, neg_m, z) -> float:
    """z* of Eq. (7), in units of C: the root of the increasing log-ratio (bracket by doubling
    from [-1, 1], Brent; grid-scan fallback, spec 8.5)."""

    def f(y: float) -> float:
        return _mixture_log_ratio(y, pos_log, pos_m, z) - _mixture_log_ratio(y, neg_log, neg_m, z)

    lo, hi = -1.0, 1.0
    for _ in range(200):
        if f(lo) < 0.0:
            break
        lo *= 2.0
    for _ in range(200):
        if f(hi) > 0.0:
            break
        hi *= 2.0
    flo, fhi = f(lo), f(hi)
    if flo < 0.0 < fhi:
        return float(optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-15, maxiter=500))
    span = max(abs(lo), abs(hi))
    root = _scan_root(f, -span, span)
    if root is None:
        raise ArithmeticError(
            "Theorem 4.1: no sign change of Eq. (7) found (numerical failure); please report"
        )
    return root


def _log_theorem41(eps: float, s: _Setting) -> tuple[float, float]:
    """(log delta of Eq. (6), z* / C)."""
    pos_log, pos_m, neg_log, neg_m = _theorem41_coefficients(eps, s)
    if pos_log.size == 0:
        return -math.inf, math.inf
    if neg_log.size == 0:
        return math.log(s.pq) + logsumexp(pos_log), -math.inf
    y = _theorem41_root(pos_log, pos_m, neg_log, neg_m, s.z)
    xp = (y - pos_m) / s.z
    xn = (y - neg_m) / s.z
    if min(float(np.min(xp)), float(np.min(xn))) >= _MILLS_MIN:
        # Mills form: sum_a P_a SF(x_a) - sum_b N_b SF(x_b)
        #   = S [sum_a u_a M(x_a) - sum_b v_b M(x_b)]
        # with S the common density at the root, u, v the normalised density weights; all
        # positive means lie above all negative ones, so x_a <= x_ref <= x_b and the bracket is
        # a sum of non-negative terms around M(x_ref).
        lu = pos_log - 0.5 * xp * xp
        lv = neg_log - 0.5 * xn * xn
        log_s = logsumexp(lu)
        u = np.exp(lu - log_s)
        v = np.exp(lv - logsumexp(lv))
        ref = _mills(np.array([np.max(xp)]))[0]
        bracket = float(np.sum(u * (_mills(xp) - ref)) + np.sum(v * (ref - _mills(xn))))
        log_value = log_s - _LOG_SQRT_2PI + math.log(bracket) if bracket > 0 else -math.inf
    else:
        lp = logsumexp(pos_log + special.log_ndtr(-xp))
        ln = logsumexp(neg_log + special.log_ndtr(-xn))
        log_value = logsubexp(lp, ln) if lp > ln else -math.inf
    return math.log(s.pq) + log_value, y


def _theorem41_phi_form(eps: float, s: _Setting) -> float:
    """The paper's Eq. (6) written literally with CDFs (for tests; cancels badly in tails)."""
    k = _constants(eps, s.p, s.q)
    _, zstar = _log_theorem41(eps, s)
    i, log_b, _, _ = _binomial_window(s.d, s.q)
    b = np.exp(log_b)
    a_c2 = math.exp(k.log_k)
    a_c1 = math.exp(k.log_c)
    z = s.z
    value = (
        1.0
        - a_c2
        + a_c1 * (special.ndtr(zstar / z) - 1.0)
        + float(
            np.sum(b * (a_c2 * special.ndtr((zstar - i) / z) - special.ndtr((zstar - i - 1.0) / z)))
        )
    )
    return s.pq * value


# --- dispatch --------------------------------------------------------------------------------


def _log_delta_direction(scheme: str, eps: float, s: _Setting, direction: str) -> float:
    if scheme == "theorem-4.1":
        return _log_theorem41(eps, s)[0]
    if scheme == "per-s1-convexity":
        return _log_per_s1(eps, s, direction)
    psg = _log_psg_forward if direction == "forward" else _log_psg_reverse
    if scheme == "cs":
        return psg(eps, s.pq, s.z)
    if scheme == "ols":
        return psg(eps, s.q, s.z)
    return math.log(s.p) + psg(eps, s.q, s.z)  # wcs


def _log_delta(scheme: str, eps: float, s: _Setting, direction: str = "max") -> float:
    if scheme == "theorem-4.1" or direction == "forward":
        return _log_delta_direction(scheme, eps, s, "forward")
    if direction == "reverse":
        return _log_delta_direction(scheme, eps, s, "reverse")
    return max(
        _log_delta_direction(scheme, eps, s, "forward"),
        _log_delta_direction(scheme, eps, s, "reverse"),
    )


def _both_directions(scheme: str, eps: float, s: _Setting) -> tuple[float, float]:
    forward = math.exp(_log_delta_direction(scheme, eps, s, "forward"))
    if scheme == "theorem-4.1":
        return forward, math.nan
    return forward, math.exp(_log_delta_direction(scheme, eps, s, "reverse"))


# --------------------------------------------------------------------------------------------
# Public per-iteration queries
# --------------------------------------------------------------------------------------------


def participation_delta(
    scheme: str,
    epsilon: float,
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip: float = 1.0,
    direction: str = "max",
) -> float:
    """Per-iteration delta of ``scheme`` at ``epsilon`` (see the module docstring).

    Parameters
    ----------
    scheme : one of :data:`SCHEMES`.
    epsilon : >= 0.
    client_rate : p in (0, 1]; record_rate : q in (0, 1].
    records : d >= 0, the other records of the client holding the protected record.
    noise : sigma > 0, std of the Gaussian noise on the sum (per client for an untrusted server).
    clip : C > 0, the per-record clipping norm.
    direction : ``"max"`` (default, both directions), ``"forward"`` (with x' || without x', the
        paper's) or ``"reverse"``. Theorem 4.1 is forward only (``"max"`` means forward there).
    """
    scheme, eps, s, direction = _check_query(
        scheme, "epsilon", epsilon, client_rate, record_rate, records, noise, clip, direction
    )
    return math.exp(_log_delta(scheme, eps, s, direction))


def theorem41_zstar(
    epsilon: float,
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip: float = 1.0,
) -> float:
    """The root z* of the paper's Eq. (7) (same units as ``clip``)."""
    eps = check_epsilon("epsilon", epsilon)
    s = _setting(client_rate, record_rate, records, noise, clip)
    return _log_theorem41(eps, s)[1] * float(clip)


def participation_epsilon(
    scheme: str,
    delta: float,
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip: float = 1.0,
    direction: str = "max",
) -> float:
    """Per-iteration epsilon of ``scheme`` at ``delta``: the smallest epsilon found (Brent on
    ``log delta(eps)``) whose delta is <= ``delta``; ``inf`` beyond
    :data:`~privfl.accounting.safe_epsilon.EPSILON_MAX` (the float range)."""
    scheme, delta, s, direction = _check_query(
        scheme, "delta", delta, client_rate, record_rate, records, noise, clip, direction
    )
    return smallest_safe_epsilon(lambda e: _log_delta(scheme, e, s, direction), delta)


_THEOREM41_GRID = np.geomspace(0.005, 100.0, 241)


def _noise_for(scheme: str, eps: float, delta: float, p: float, q: float, d: int) -> float | None:
    """Noise multiplier z = sigma / C for the per-iteration target, or None (never reached),
    by privfl's one noise search (:func:`~privfl.accounting.calibrate_search.smallest_noise_search`,
    to relative ``RTOL_CLOSED_FORM``); Theorem 4.1, not monotone in z, scans
    :data:`_THEOREM41_GRID`."""
    target = math.log(delta)

    def meets(z: float) -> bool:
        return _log_delta(scheme, eps, _Setting(p, q, d, z)) <= target

    scan = _THEOREM41_GRID if scheme == "theorem-4.1" else None
    try:
        return smallest_noise_search(meets, rtol=RTOL_CLOSED_FORM, scan=scan)
    except NoiseOutOfRangeError:
        return None


def participation_noise(
    scheme: str,
    epsilon: float,
    delta: float,
    client_rate: float,
    record_rate: float,
    records: int,
    *,
    clip: float = 1.0,
) -> float | None:
    """Smallest noise sigma (std on the sum) whose per-iteration ``scheme`` delta at ``epsilon``
    is <= ``delta`` from there on; ``None`` when the scheme's delta never reaches the target
    (it stays below ``delta`` for every sigma tried, so the formula gives no calibration: the
    paper's Theorem 4.1 in spec 6.2 - the formula would claim the target with any noise).

    Bounds (all schemes but Theorem 4.1) are non-increasing in sigma (proven), so the answer
    is bracketed on powers of two of sigma/C in [1e-6, 1e6] and bisected; Theorem 4.1 is not
    monotone, so a log grid of sigma/C in [0.005, 100] is scanned and the last crossing from
    above is bisected (privfl's one noise search, :mod:`privfl.accounting.calibrate_search`,
    to relative 1e-13; the returned sigma meets the target when re-evaluated).
    """
    scheme = _check_scheme(scheme)
    eps = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    s = _setting(client_rate, record_rate, records, 1.0, clip)
    z = _noise_for(scheme, eps, delta, s.p, s.q, s.d)
    return None if z is None else z * float(clip)


# --------------------------------------------------------------------------------------------
# Composition: events, WCS RDP and PLD
# --------------------------------------------------------------------------------------------


def _sampling_label(p: float, q: float) -> str:
    return f"random participation (clients p={p:.6g}, records q={q:.6g})"


def participation_event(
    scheme: str,
    client_rate: float,
    record_rate: float,
    noise: float,
    iterations: int,
    *,
    clip: float = 1.0,
    server: str = "trusted",
) -> PrivacyEvent:
    """The standard privfl event whose accountants compose ``scheme`` exactly.

    * ``cs``: ``iterations`` Poisson-subsampled Gaussian steps at rate p q, noise multiplier
      sigma / C, add/remove, unit record. (A lower reference for random participation.)
    * ``ols``: the same at rate q; its pair dominates random participation's step (and WCS's),
      so the composed bound holds for random participation.

    ``wcs`` has no standard event (use :func:`wcs_rdp`, :func:`wcs_pld`); ``theorem-4.1`` and
    ``per-s1-convexity`` have no dominating pair here.
    """
    scheme = check_choice("scheme", scheme, SCHEMES)
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    z = check_positive("noise", noise) / check_positive("clip", clip)
    steps = check_int("iterations", iterations, minimum=1)
    server = check_choice("server", server, SERVERS)
    if scheme not in ("cs", "ols"):
        raise ValueError(
            f"scheme = {scheme!r} is not allowed: must be 'cs' or 'ols' (only they are standard "
            "Poisson-subsampled Gaussian events; use wcs_rdp / wcs_pld for 'wcs')"
        )
    rate = p * q if scheme == "cs" else q
    return PrivacyEvent(
        ((NoisyStep(z, rate, Sampling.POISSON), steps),),
        neighbouring=Neighbouring.ADD_REMOVE,
        unit=Unit.RECORD,
        release=_RELEASE[server],
        description=f"random participation (Hasircioglu and Gunduz 2022) {scheme}: "
        f"{_sampling_label(p, q)}",
    )


def wcs_rdp(
    orders: Sequence[float] | np.ndarray,
    client_rate: float,
    record_rate: float,
    noise_multiplier: float,
) -> np.ndarray:
    """RDP of one Weak-Client-Sampling step (participation revealed), add/remove, both directions:
    ``log(1 - p + p exp((a - 1) RDP_psg(a; q, z))) / (a - 1)`` (spec 4.7), exact for the revealed
    pair and an upper bound for random participation (post-processing)."""
    p = check_rate("client_rate", client_rate)
    inner = rdp_poisson_gaussian(orders, record_rate, noise_multiplier)
    a = np.asarray(orders, dtype=float)
    x = (a - 1.0) * inner
    if p == 1.0:
        return inner
    with np.errstate(over="ignore", divide="ignore"):
        small = np.log1p(p * np.expm1(np.minimum(x, 1.0)))
        large = np.logaddexp(math.log1p(-p), math.log(p) + x)
    return np.where(x < 1.0, small, large) / (a - 1.0)


def wcs_pld(
    client_rate: float,
    record_rate: float,
    noise_multiplier: float,
    *,
    discretization: float = 1e-4,
) -> dp_pld.PrivacyLossDistribution:
    """Pessimistic PLD of one WCS step: ``(1 - p) * (loss 0) + p * PLD_psg(q, z)`` in both
    directions (privfl's pessimistic connect-the-dots Gaussian PLD, then an exact mixture
    with the identity; the revealed participation bit splits the output, and when client 1 does
    not participate both worlds have the same law, i.e. privacy loss 0)."""
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    interval = check_positive("discretization", discretization)
    inner = poisson_gaussian_pld(z, q, value_discretization_interval=interval)
    if p == 1.0:
        return inner
    return inner.compute_mixture(dp_pld.identity(interval, pessimistic_estimate=True), p)


_RELATION = {
    "theorem-4.1": (
        "estimate: exact delta of one configuration (all of the client's gradients aligned, "
        "norm C), hence a lower bound on the true delta, not a worst-case bound"
    ),
    "per-s1-convexity": "upper bound (proven, see docs/accountants/random-participation.md)",
    "wcs": "upper bound (participation revealed; exact for that release)",
    "ols": "upper bound (ignores client sampling; exact for p = 1)",
    "cs": (
        "reference (lower bound on the true delta): exact delta of the zero-gradient "
        "configuration; random participation cannot do better, so this is not a guarantee for "
        "Algorithm 1"
    ),
}

#: What a noise calibrated on each scheme means for random participation.
_CALIBRATION_NOTES = {
    "theorem-4.1": (
        "estimate: solved on Theorem 4.1's delta, which can be below the true delta; this noise "
        "may NOT meet the target"
    ),
    "per-s1-convexity": "bound: this noise provably meets the target",
    "wcs": "bound: this noise meets the target (participation revealed: conservative)",
    "ols": "bound: this noise meets the target (client sampling ignored: conservative)",
    "cs": (
        "reference: random participation needs at least this noise; it does NOT meet the target "
        "for Algorithm 1 (rigorous only for centralised sampling at rate p q)"
    ),
}

_NOTES = {
    "theorem-4.1": (
        "paper's Theorem 4.1 as stated (Eq. 6, forward direction only). Its proof fixes one "
        "aligned-gradient configuration (Eq. 27) instead of maximising over configurations, so "
        "it is that configuration's exact delta: a LOWER bound on the true delta, not an upper "
        "bound; it can fall below CS (Hasircioglu and Gunduz 2022, Theorem 4.1)"
    ),
    "per-s1-convexity": (
        "privfl's rigorous variant: advanced joint convexity, joint convexity over the client's "
        "own "
        "record sampling, aligned (forward) / anti-aligned (reverse) maximal gradients as the "
        "proven worst case of each term; max of both directions"
    ),
    "wcs": "Theorem 5.2 simplified: delta_WCS = p delta_OLS; max of both directions",
    "ols": "Theorem 5.1: Poisson-subsampled Gaussian at rate q; max of both directions",
    "cs": (
        "Corollary 5.3 with the typo fixed (rate p q): a rigorous bound for centralized "
        "shuffling only; for random participation it is a lower reference"
    ),
}


def _scheme_sampling(scheme: str, p: float, q: float) -> str:
    if scheme == "cs":
        return f"centralized shuffling: poisson (q=p*q={p * q:.6g}); random participation is worse"
    return _sampling_label(p, q)


def _composed_wcs(
    accountant: str,
    p: float,
    q: float,
    z: float,
    steps: int,
    epsilon: float | None,
    delta: float | None,
    options: AccountingOptions,
) -> tuple[float, float, dict]:
    if accountant == "rdp":
        orders = resolve_orders(options.orders)
        curve = steps * wcs_rdp(orders, p, q, z)
        if delta is not None:
            eps, order = epsilon_from_rdp(orders, curve, delta, options.conversion)
            result = (eps, delta)
        else:
            dlt, order = delta_from_rdp(orders, curve, epsilon, options.conversion)
            result = (epsilon, dlt)
        extras = {"order": order, "conversion": options.conversion}
        if math.isfinite(order) and order == float(np.max(orders)):
            extras["grid_note"] = "optimal order is the largest of the grid"
        return result[0], result[1], extras
    pld = wcs_pld(p, q, z, discretization=options.discretization)
    extras = {"discretization": options.discretization}
    if delta is not None:  # sound tilted composition (dp-accounting's self_compose is not)
        return composed_epsilon(pld, steps, delta), delta, extras
    return epsilon, min(max(composed_delta(pld, steps, epsilon), 0.0), 1.0), extras


def _setting_extras(scheme: str, s: _Setting, sigma: float, clip: float, server: str) -> dict:
    """The setting part of a result's ``extras`` (shared by per-iteration and composed)."""
    return {
        "client_rate": s.p,
        "record_rate": s.q,
        "records": s.d,
        "noise": sigma,
        "clip": clip,
        "noise_multiplier": s.z,
        "server": server,
        "random_participation": _RELATION[scheme],
    }


def _composed_results(
    scheme: str,
    accountants: Sequence[str],
    s: _Setting,
    sigma: float,
    clip: float,
    steps: int,
    epsilon: float | None,
    delta: float | None,
    options: AccountingOptions,
    server: str,
) -> list[PrivacyResult]:
    common = {
        "scheme": scheme,
        "iterations": steps,
        **_setting_extras(scheme, s, sigma, clip, server),
    }
    results = []
    if scheme in ("cs", "ols"):
        event = participation_event(scheme, s.p, s.q, sigma, steps, clip=clip, server=server)
        report = account(
            event, delta=delta, epsilon=epsilon, methods=tuple(accountants), options=options
        )
        for r in report.results:
            results.append(
                replace(
                    r,
                    method=f"{scheme}-{r.method}",
                    kind=scheme_kind(scheme) if r.kind == "bound" else r.kind,
                    sampling=_scheme_sampling(scheme, s.p, s.q),
                    extras={
                        **common,
                        "accountant": r.method,
                        "event": event.sampling_label,
                        **r.extras,
                    },
                    note=(
                        f"{_NOTES[scheme]}; composed over {steps} iterations by privfl's "
                        f"{r.method} accountant on the equivalent event ({event.sampling_label})"
                    ),
                )
            )
        return results
    for accountant in accountants:
        eps, dlt, extras = _composed_wcs(accountant, s.p, s.q, s.z, steps, epsilon, delta, options)
        how = (
            "closed-form WCS RDP"
            if accountant == "rdp"
            else "pessimistic PLD (1-p) * identity + p * PLD_psg(q), dp-accounting"
        )
        results.append(
            PrivacyResult(
                method=f"wcs-{accountant}",
                kind="bound",
                epsilon=eps,
                delta=dlt,
                unit=Unit.RECORD.value,
                neighbouring=Neighbouring.ADD_REMOVE.value,
                sampling=_sampling_label(s.p, s.q),
                release=_RELEASE[server],
                steps=steps,
                extras={**common, "accountant": accountant, **extras},
                note=f"{_NOTES['wcs']}; composed over {steps} iterations with the {how}",
            )
        )
    return results


# --------------------------------------------------------------------------------------------
# Report and calibration
# --------------------------------------------------------------------------------------------


def _resolve_schemes(methods: str | Iterable[str], server: str, name: str) -> tuple[str, ...]:
    names = [methods] if isinstance(methods, str) else list(methods)
    if not names:
        raise ValueError(f"{name} = {methods!r} is out of range: must name at least one scheme")
    allowed = _SERVER_SCHEMES[server]
    out: list[str] = []
    for item in names:
        if item == "all":
            out.extend(x for x in allowed if x not in out)
            continue
        scheme = check_choice(name, item, (*SCHEMES, "all"))
        if scheme not in allowed:
            raise ValueError(
                f"{name} = {scheme!r} is not allowed with server = {server!r}: must be one of "
                f"{', '.join(allowed)} (participation is revealed to the server)"
            )
        if scheme not in out:
            out.append(scheme)
    return tuple(out)


def _per_iteration_result(scheme: str, s: _Setting, *rest: object) -> PrivacyResult:
    """One iteration's result of ``scheme`` (``rest``: sigma, clip, epsilon, delta, server, as
    :func:`_per_iteration_cached` takes them): the same at every round of a run, so it is
    computed once per setting and handed out as a fresh copy (its ``extras`` dict is the
    caller's to change)."""
    result = _per_iteration_cached(scheme, s, *rest)
    return replace(result, extras=dict(result.extras))


@lru_cache(maxsize=256)
def _per_iteration_cached(
    scheme: str,
    s: _Setting,
    sigma: float,
    clip: float,
    epsilon: float | None,
    delta: float | None,
    server: str,
) -> PrivacyResult:
    extras: dict = {
        "scheme": scheme,
        **_setting_extras(scheme, s, sigma, clip, server),
        "direction": "forward only (as stated)" if scheme == "theorem-4.1" else "max of both",
    }
    if delta is not None:
        eps = smallest_safe_epsilon(lambda e: _log_delta(scheme, e, s), delta)
        dlt = delta
    else:
        eps = epsilon
        dlt = math.exp(_log_delta(scheme, eps, s))
    if math.isfinite(eps):
        forward, reverse = _both_directions(scheme, eps, s)
        extras["delta_forward"] = forward
        if scheme != "theorem-4.1":
            extras["delta_reverse"] = reverse
        if scheme == "theorem-4.1":
            extras["z_star"] = _log_theorem41(eps, s)[1] * clip
    if server == "untrusted":
        extras["aggregate_noise"] = "N_t sigma^2 per coordinate (every client adds its own)"
    return PrivacyResult(
        method=scheme,
        kind=scheme_kind(scheme),
        epsilon=eps,
        delta=dlt,
        unit=Unit.RECORD.value,
        neighbouring=Neighbouring.ADD_REMOVE.value,
        sampling=_scheme_sampling(scheme, s.p, s.q),
        release=_RELEASE[server],
        steps=1,
        extras=extras,
        note=f"per iteration; {_NOTES[scheme]}",
    )


def _basic_composition(
    scheme: str,
    s: _Setting,
    sigma: float,
    clip: float,
    steps: int,
    epsilon: float | None,
    delta: float | None,
    server: str,
) -> PrivacyResult:
    """(T eps, T delta): basic composition of the per-iteration numbers (Dwork et al.)."""
    if delta is not None:
        step_eps = smallest_safe_epsilon(lambda e: _log_delta(scheme, e, s), delta / steps)
        eps, dlt = steps * step_eps, delta
        per = {"per_iteration_epsilon": step_eps, "per_iteration_delta": delta / steps}
    else:
        step_dlt = math.exp(_log_delta(scheme, epsilon / steps, s))
        eps, dlt = epsilon, min(1.0, steps * step_dlt)
        per = {"per_iteration_epsilon": epsilon / steps, "per_iteration_delta": step_dlt}
    kind = scheme_kind(scheme)
    return PrivacyResult(
        method=f"{scheme}-basic",
        kind=kind,
        epsilon=eps,
        delta=dlt,
        unit=Unit.RECORD.value,
        neighbouring=Neighbouring.ADD_REMOVE.value,
        sampling=_sampling_label(s.p, s.q),
        release=_RELEASE[server],
        steps=steps,
        extras={
            "scheme": scheme,
            "iterations": steps,
            "composition": "basic (T eps, T delta)",
            "server": server,
            "random_participation": _RELATION[scheme],
            **per,
        },
        note=(
            f"basic composition of the per-iteration {scheme} numbers over {steps} iterations"
            + (
                "; inherits Theorem 4.1's unsoundness"
                if scheme == "theorem-4.1"
                else "; loose: no dominating pair is derived for this scheme, use "
                "wcs-rdp / wcs-pld for a tight composed bound"
            )
        ),
    )


def participation_report(
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip: float = 1.0,
    epsilon: float | None = None,
    delta: float | None = None,
    iterations: int = 1,
    methods: str | Iterable[str] = "all",
    accountants: Iterable[str] = ACCOUNTANTS,
    server: str = "trusted",
    options: AccountingOptions | None = None,
) -> list[PrivacyResult]:
    """Privacy of DP-DSGD with random participation: every requested scheme, labelled.

    Give exactly one of ``epsilon`` (each result gives delta) or ``delta`` (each gives epsilon).
    Returns, in the order of ``methods`` (default: :data:`SCHEMES` allowed for ``server``), the
    per-iteration result of each scheme (method = scheme name, ``steps = 1``). With
    ``iterations`` T > 1 it then adds the composed results over T iterations (at the same
    epsilon or delta, now for the whole run): ``ols-rdp``, ``ols-pld``, ``wcs-rdp``, ``wcs-pld``
    (rigorous bounds; ``accountants`` picks rdp / pld), ``cs-rdp``, ``cs-pld`` (kind
    ``"reference"``: rigorous for centralised sampling only, a lower reference here) and
    ``theorem-4.1-basic`` (estimate) / ``per-s1-convexity-basic`` (bound; basic composition).
    Every result carries ``extras["scheme"]`` and its ``steps`` (1 per iteration, else T).

    ``server``: ``"trusted"`` (Algorithm 1), ``"untrusted"`` (spec 4.4: every available client
    sends each iteration, non-participants pure noise, each adds its own N(0, sigma^2 I); the
    same numbers hold for the server's view, with ``noise`` the per-client std) or
    ``"untrusted-participants-only"`` (participation revealed: only ``wcs`` and ``ols``).
    """
    server = check_choice("server", server, SERVERS)
    s = _setting(client_rate, record_rate, records, noise, clip)
    sigma, clip = float(noise), float(clip)
    if (epsilon is None) == (delta is None):
        raise ValueError(
            f"epsilon = {epsilon!r}, delta = {delta!r}: give exactly one of epsilon and delta"
        )
    epsilon = None if epsilon is None else check_epsilon("epsilon", epsilon)
    delta = None if delta is None else check_delta("delta", delta)
    steps = check_int("iterations", iterations, minimum=1)
    schemes = _resolve_schemes(methods, server, "methods")
    accountant_names = [accountants] if isinstance(accountants, str) else list(accountants)
    accountant_names = list(
        dict.fromkeys(check_choice("accountants", a, ACCOUNTANTS) for a in accountant_names)
    )
    options = options or AccountingOptions()
    results = [
        _per_iteration_result(scheme, s, sigma, clip, epsilon, delta, server) for scheme in schemes
    ]
    if steps > 1:
        for scheme in schemes:
            if scheme in COMPOSABLE_SCHEMES:
                if accountant_names:
                    results.extend(
                        _composed_results(
                            scheme,
                            accountant_names,
                            s,
                            sigma,
                            clip,
                            steps,
                            epsilon,
                            delta,
                            options,
                            server,
                        )
                    )
            else:
                results.append(
                    _basic_composition(scheme, s, sigma, clip, steps, epsilon, delta, server)
                )
    return results


@dataclass(frozen=True)
class NoiseCalibration:
    """One scheme's noise for a per-iteration ``(epsilon, delta)`` target, labelled.

    ``noise`` is sigma (std on the sum, units of the clip norm's scale) or ``None`` when the
    scheme's delta never reaches the target ("unreachable"). ``kind`` says what the noise means
    for random participation: ``"bound"`` (provably meets the target), ``"estimate"`` (solved on
    a formula that can be below the truth: may not meet it) or ``"reference"`` (solved on a
    lower reference: random participation needs at least this noise).
    """

    method: str
    noise: float | None
    kind: Kind
    epsilon: float
    delta: float
    unit: str
    neighbouring: str
    sampling: str
    release: str
    random_participation: str
    note: str

    @property
    def reachable(self) -> bool:
        return self.noise is not None

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "kind": self.kind,
            "noise": self.noise,
            "reachable": self.reachable,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "steps": 1,
            "unit": self.unit,
            "neighbouring": self.neighbouring,
            "sampling": self.sampling,
            "release": self.release,
            "random_participation": self.random_participation,
            "note": self.note,
        }


def calibrate_participation_report(
    client_rate: float,
    record_rate: float,
    records: int,
    epsilon: float,
    delta: float,
    *,
    clip: float = 1.0,
    schemes: str | Iterable[str] = "all",
    server: str = "trusted",
) -> list[NoiseCalibration]:
    """:func:`calibrate_participation` with every row labelled (kind, unit, neighbouring
    relation, sampling, release, and what the noise means for random participation)."""
    noise = calibrate_participation(
        client_rate, record_rate, records, epsilon, delta, clip=clip, schemes=schemes,
        server=server,
    )
    p, q = float(client_rate), float(record_rate)
    return [
        NoiseCalibration(
            method=scheme,
            noise=value,
            kind=scheme_kind(scheme),
            epsilon=float(epsilon),
            delta=float(delta),
            unit=Unit.RECORD.value,
            neighbouring=Neighbouring.ADD_REMOVE.value,
            sampling=_scheme_sampling(scheme, p, q),
            release=_RELEASE[server],
            random_participation=_RELATION[scheme],
            note=_CALIBRATION_NOTES[scheme]
            + ("" if value is not None else "; unreachable: the scheme's delta never reaches "
               "the target, so it gives no calibration"),
        )
        for scheme, value in noise.items()
    ]


def calibrate_participation(
    client_rate: float,
    record_rate: float,
    records: int,
    epsilon: float,
    delta: float,
    *,
    clip: float = 1.0,
    schemes: str | Iterable[str] = "all",
    server: str = "trusted",
) -> dict[str, float | None]:
    """Noise sigma (std on the sum, units of ``clip``) per scheme for a per-iteration
    ``(epsilon, delta)`` target, or ``None`` where the scheme's delta never reaches the target
    (print "unreachable"; see :func:`participation_noise`)."""
    server = check_choice("server", server, SERVERS)
    s = _setting(client_rate, record_rate, records, 1.0, clip)
    eps = check_epsilon("epsilon", epsilon)
    dlt = check_delta("delta", delta)
    names = _resolve_schemes(schemes, server, "schemes")
    out: dict[str, float | None] = {}
    for scheme in names:
        z = _noise_for(scheme, eps, dlt, s.p, s.q, s.d)
        out[scheme] = None if z is None else z * float(clip)
    return out
