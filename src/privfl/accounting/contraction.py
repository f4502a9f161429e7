"""Last-iterate ("hidden state") accounting of projected noisy SGD by contraction (seed 004).

Asoodeh, Chen, Calmon, Özgür, "Differentially Private Federated Learning: An Information-Theoretic
Perspective" (ISIT 2021), with the corrections of ``shared/specs/seed4-contraction.md``.

What ran (the paper's Algorithm 1)
----------------------------------
``n`` users (``users``), one record each; rounds of ``m`` users (``batch_size``, m | n) that form
a **uniformly random partition of [n], kept secret** by a trusted aggregator, so there are
``T = n/m`` rounds and every user takes part exactly once. In round t each selected user sends
``eta_t * (g_j + sigma_t * Z_j)`` with ``‖g_j‖ <= L`` (``lipschitz``: the loss is L-Lipschitz or the
gradient is clipped at L) and ``Z_j ~ N(0, I)``; the aggregator sets
``W_t = proj_rho(W_{t-1} - (1/m) * sum_j ...)`` (projection onto the L2 ball of radius ``radius``
*after* the noise) and **only W_T is released** (or W_tau for a secret tau ~ Uniform{1..T},
Corollary 3). Neighbouring datasets differ by replacing one user's record (n is public).

* ``noise`` is the paper's sigma_t: the aggregated per-coordinate noise std is
  ``s_t = eta_t * sigma_t / sqrt(m)``; the replace-one sensitivity of the aggregate is
  ``2 * eta_t * L / m``. In privfl's event convention (noise std / clip norm on the *sum* of
  clipped contributions) the same step has noise multiplier ``z_t = sigma_t * sqrt(m) / L``.
* Entry argument ``r1_t = 2 L / (sqrt(m) sigma_t)``; contraction argument
  ``rc_t = D_t sqrt(m) / (eta_t sigma_t)`` with the diameter ``D_t`` of Psi_t(ball(rho)):
  ``2 rho`` when the per-user losses are asserted convex and beta-smooth with eta_t <= 2/beta
  (and L-Lipschitz, so clipping never binds), otherwise the relaxed ``2 (rho + eta_t L)``.

Results
-------
Theorem 2: ``delta(eps) = (1/T) sum_t theta_eps(r1_t) prod_{j>t} theta_eps(rc_j)`` and its
constant-parameter closed form; the sharpened chain rule (spec section 9.1), which replaces each
factor theta_eps(rc_j) applied to a running value d by theta_{eps~}(rc_j) with
``eps~ = log(1 + (e^eps - 1)/d)``; Corollary 1 (eta_t = 1/(lambda t), product term corrected to
``theta_eps(2 rho lambda j sqrt(m) / sigma)``) and its bound (11); Corollary 3 (random stopping)
and its bound (12). Everything is computed in log space; epsilon for a target delta by bracketed
root finding, always returned on the safe side (delta(epsilon) <= target).

A one-pass run may stop after ``rounds`` < n/m rounds (the users of the unused batches never
take part): ``delta = (m/n) sum_{t<=rounds} theta(r1_t) prod_{t<j<=rounds} theta(rc_j)``.

Multi-round extension (``schedule="independent"``; spec seed4 section 9.3, derived there with
the paper's tools, **not in Asoodeh et al. 2021**): T rounds, each a fresh uniformly random
size-m subset of the n users (q = m/n, secret), only W_T released. With tau the last round
holding the differing user, a user who entered before re-enters with both inputs different,
for which the two-point bound gives ``theta(r1_t + rc_t)`` (convex) or ``theta(rc_t)`` (relaxed
diameter, which already covers different gradients). Averaging over the user's inclusion
pattern (joint convexity)::

    delta_T(eps) = sum_t q (1-q)^(T-t) [(1-q)^(t-1) theta(r1_t) + (1 - (1-q)^(t-1)) theta(re_t)]
                   * prod_{j>t} theta(rc_j),                 re_t = r1_t + rc_t (convex) or rc_t

It is non-decreasing in T and, for constant parameters, saturates at
``delta_inf = q theta(re) / (1 - (1-q) theta(rc))``, while composition bounds grow like sqrt(T).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.special import erf, erfc, log_ndtr

from privfl._validation import (
    MAX_COUNT,
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_nonnegative,
    check_positive,
    check_range,
)
from privfl.accounting.events import (
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    Unit,
)
from privfl.accounting.logspace import log1mexp, log_expm1, logsumexp
from privfl.accounting.methods import (
    AccountingOptions,
    account,
    build_accountant,
    resolve_methods,
)
from privfl.accounting.results import PrivacyResult, sampling_label
from privfl.accounting.safe_epsilon import smallest_safe_epsilon

__all__ = [
    "RELEASES",
    "BASELINES",
    "SCHEDULES",
    "ProjectedNoisySGD",
    "theta",
    "log_theta",
    "closed_form_delta",
    "corollary1",
    "corollary1_utility_bound",
    "all_iterates_event",
    "last_iterate_report",
    "run_report",
]

RELEASES = ("last", "random-stop")
BASELINES = ("one-pass", "independent-rounds")
SCHEDULES = ("one-pass", "independent")

_RELEASE_LABEL = {
    "last": "last iterate only",
    "random-stop": "randomly stopped iterate only (W_tau, tau ~ Uniform{1..T}, secret)",
}
_ULP = 2.0**-52
#: Terms of the constant-parameter multi-round sum computed exactly (plain / sharpened chain);
#: the rest is replaced by an upper bound.
_CONSTANT_TERMS = 2_000_000
_SHARPENED_TERMS = 100_000


# --------------------------------------------------------------------------------------------
# theta_eps(r): hockey-stick divergence E_{e^eps}(N(r, 1) || N(0, 1)), in log space
# --------------------------------------------------------------------------------------------


def log_theta(epsilon: Any, r: Any) -> Any:
    """log theta_eps(r), vectorised over numpy-broadcastable ``epsilon`` and ``r``.

    ``theta_eps(r) = Q(eps/r - r/2) - e^eps Q(eps/r + r/2)`` (paper eq. 6) is the hockey-stick
    divergence E_{e^eps}(N(m1, s^2 I) || N(m2, s^2 I)) with ``r = ‖m1 - m2‖ / s``. Computed as
    ``log Q(A) + log(1 - exp(eps + log Q(B) - log Q(A)))`` with ``log_ndtr``; at eps = 0 through
    ``erf(r / (2 sqrt 2))`` exactly. Edge cases: r = 0 gives -inf (theta = 0), r = inf gives 0
    (theta = 1), eps = inf gives -inf. Where the last digits cancel the result is rounded *up*
    (the error of the two log-tail values is added), so the value never understates theta by
    more than rounding. Arguments are not validated (internal building block; see :func:`theta`).
    """
    eps_arr, r_arr = np.broadcast_arrays(np.asarray(epsilon, float), np.asarray(r, float))
    out = np.full(eps_arr.shape, -np.inf)
    finite = (r_arr > 0) & np.isfinite(r_arr) & np.isfinite(eps_arr)
    if np.any(finite):
        e = eps_arr[finite]
        rr = r_arr[finite]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            a = e / rr - rr / 2.0
            b = e / rr + rr / 2.0
            lqa = log_ndtr(-a)
            lqb = e + log_ndtr(-b)
            err = 8.0 * _ULP * (np.abs(lqa) + np.abs(lqb) + np.abs(e))
            diff = np.minimum(lqb - lqa - err, -np.finfo(float).tiny)
            val = np.where(np.isfinite(lqa), lqa + log1mexp(diff), -np.inf)
            zero = e == 0
            if np.any(zero):
                x = rr[zero] / (2.0 * math.sqrt(2.0))
                val[zero] = np.where(x < 1.0, np.log(erf(x)), np.log1p(-erfc(x)))
        out[finite] = val
    out[np.isposinf(r_arr) & np.isfinite(eps_arr)] = 0.0
    if out.ndim == 0:
        return float(out)
    return out


def _log_theta_scalar(epsilon: float, r: float) -> float:
    """Scalar twin of :func:`log_theta` for finite eps >= 0 and finite r > 0 (hot loops)."""
    if epsilon == 0.0:
        x = r / (2.0 * math.sqrt(2.0))
        return math.log(math.erf(x)) if x < 1.0 else math.log1p(-math.erfc(x))
    if math.isinf(epsilon):
        return -math.inf
    a = epsilon / r - r / 2.0
    lqa = float(log_ndtr(-a))
    if lqa == -math.inf:
        return -math.inf
    lqb = epsilon + float(log_ndtr(-(a + r)))
    err = 8.0 * _ULP * (abs(lqa) + abs(lqb) + epsilon)
    diff = min(lqb - lqa - err, -np.finfo(float).tiny)
    return lqa + log1mexp(diff)


def theta(epsilon: Any, r: Any) -> Any:
    """theta_eps(r) (paper eq. 6), validated: ``epsilon >= 0`` and ``r >= 0`` (inf allowed).

    Vectorised like :func:`log_theta`; returns a float for scalar input.
    """
    eps_arr = np.asarray(epsilon, float)
    r_arr = np.asarray(r, float)
    if np.any(np.isnan(eps_arr)) or np.any(eps_arr < 0):
        bad = eps_arr[np.isnan(eps_arr) | (eps_arr < 0)].ravel()[0]
        raise ValueError(f"epsilon = {float(bad)!r} is out of range: must be in [0, inf]")
    if np.any(np.isnan(r_arr)) or np.any(r_arr < 0):
        bad = r_arr[np.isnan(r_arr) | (r_arr < 0)].ravel()[0]
        raise ValueError(f"r = {float(bad)!r} is out of range: must be in [0, inf]")
    with np.errstate(under="ignore"):
        return np.exp(log_theta(eps_arr, r_arr))


def _sharpened_eps(log_em1: float, log_d: np.ndarray) -> np.ndarray:
    """eps~ = log(1 + (e^eps - 1)/d) (spec 9.1), overflow-safe; inf where d = 0."""
    with np.errstate(invalid="ignore"):
        x = log_em1 - log_d
    x = np.where(np.isneginf(log_d), np.inf, x)
    x = np.where(np.isneginf(log_em1), -np.inf, x)  # eps = 0: eps~ = 0
    return np.logaddexp(0.0, x)


def _log_geometric(k: Any, log_a: float) -> Any:
    """log((1 - a^k)/(1 - a)) = log(1 + a + ... + a^{k-1}) for real k > 0 (k when a = 1)."""
    k = np.asarray(k, float)
    if log_a == 0.0:
        return np.log(k)
    if np.isneginf(log_a):
        return np.zeros_like(k)
    return log1mexp(k * log_a) - log1mexp(float(log_a))


def closed_form_delta(epsilon: float, entry_r: float, contraction_r: float, rounds: float) -> float:
    """Theorem 2 for constant parameters: ``(1/T) theta(r1) (1 - a^T)/(1 - a)``, a = theta(rc).

    ``rounds`` (T) may be any real >= 1: a non-integer T reproduces the paper's Figure 2 for
    q = 0.3 (T = 10/3, spec seed4 section 8 item 8, option a) and is **not** a guarantee for any
    algorithm; :class:`ProjectedNoisySGD` refuses batch sizes that do not divide n.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    entry_r = check_positive("entry_r", entry_r)
    contraction_r = check_positive("contraction_r", contraction_r)
    rounds = check_range("rounds", rounds, 1.0, math.inf, high_open=True)
    log_a = log_theta(epsilon, contraction_r)
    value = log_theta(epsilon, entry_r) - math.log(rounds) + _log_geometric(rounds, log_a)
    return math.exp(float(value))


# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------


def _check_schedule(name: str, value: Any, length: int, rounds: int | float) -> np.ndarray:
    """A positive number (constant, repeated ``length`` times) or one positive number per round.

    ``length`` is ``rounds``, or 1 for the compact constant schedules of ``schedule =
    "independent"`` (any T, including inf, without an array of T entries).
    """
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} = {value!r} is not a number or a sequence of numbers")
    if np.ndim(value) == 0:
        return np.full(length, check_positive(name, value))
    if math.isinf(rounds):
        raise ValueError(
            f"{name} is a sequence of {len(list(value))} entries: rounds = inf needs one constant "
            "number"
        )
    items = list(value)
    if len(items) != rounds:
        raise ValueError(
            f"{name} has {len(items)} entries: must be one number or one per round "
            f"(T = {rounds} rounds)"
        )
    return np.array([check_positive(f"{name}[{i}]", v) for i, v in enumerate(items)])


def _check_rounds(value: Any, schedule: str, partition: int) -> int | float:
    """T: at most n/m for one pass (default n/m); any integer >= 1 or inf for independent."""
    if schedule == "one-pass":
        if value is None:
            return partition
        return check_int("rounds", value, minimum=1, maximum=partition)
    if value is None:
        raise ValueError(
            "rounds = None is out of range: schedule = 'independent' needs the number of rounds "
            "T (an integer >= 1, or inf for the saturation limit)"
        )
    if isinstance(value, float) and math.isinf(value) and value > 0:
        return math.inf
    return check_int("rounds", value, minimum=1, maximum=MAX_COUNT)


def _times_log(k: np.ndarray, log_c: float) -> np.ndarray:
    """k * log c with 0 * (-inf) = 0: log c^k for integer k >= 0."""
    with np.errstate(invalid="ignore"):
        return np.where(k == 0, 0.0, k * log_c)


def _adaptive_sharpened(
    log_em1: float, start: float, r: float, q: float, log_c: float, cap: int
) -> list[float]:
    """Sharpened chain values x_0..x_K for the sum ``sum_k q c^k e^{x_k}`` (logs).

    Stops at the first K where the remaining terms, at most ``c^K e^{x_K}`` (the chain does not
    increase), are below 1e-14 of the sum so far, at K = ``cap``, or once x_K = -inf.
    """
    values = [start]
    current = start
    log_sum = -math.inf
    log_q = math.log(q)
    for k in range(cap):
        if current == -math.inf:
            break
        if k > 0 and k * log_c + current < log_sum - 32.3:  # log(1e-14) = -32.2
            break
        log_sum = float(np.logaddexp(log_sum, log_q + (k * log_c if k else 0.0) + current))
        gap = log_em1 - current
        eps_k = gap + math.log1p(math.exp(-gap)) if gap > 0 else math.log1p(math.exp(gap))
        current += _log_theta_scalar(eps_k, r)
        values.append(current)
    return values


def _sharpened_steps(log_em1: float, start: float, r: float, steps: int) -> list[float]:
    """The sharpened chain (spec 9.1) with constant contraction argument ``r``, in logs.

    ``x_0 = start``, ``x_{k+1} = x_k + log theta_{eps~(x_k)}(r)`` with
    ``eps~ = log(1 + (e^eps - 1)/e^{x_k})`` (``log_em1 = log(e^eps - 1)``); returns
    ``x_0..x_steps``, stopping early (shorter list) once a value is -inf.
    """
    values = [start]
    current = start
    for _ in range(steps):
        if current == -math.inf:
            break
        gap = log_em1 - current
        eps_k = gap + math.log1p(math.exp(-gap)) if gap > 0 else math.log1p(math.exp(gap))
        current += _log_theta_scalar(eps_k, r)
        values.append(current)
    return values


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} = {value!r} is not a boolean: must be True or False")
    return bool(value)


@dataclass(frozen=True)
class ProjectedNoisySGD:
    """One pass of projected noisy SGD over a secret random partition (seed 004, Algorithm 1).

    Parameters
    ----------
    users
        n, the number of users (one record each; public).
    batch_size
        m, users per round; must divide ``users`` (T = n/m rounds, each user exactly once).
    lipschitz
        L: every per-user gradient has norm <= L (Lipschitz loss or clipping at L).
    radius
        rho: radius of the L2 ball the noisy aggregate is projected onto (finite; required).
    lr
        eta_t: one number or T numbers.
    noise
        sigma_t (the paper's noise multiplier; aggregated noise std eta_t sigma_t / sqrt(m)):
        one number or T numbers.
    convex
        True asserts that every per-user loss is convex, ``smooth``-smooth and L-Lipschitz (so
        clipping never changes a gradient) and enables the diameter 2 rho; then every eta_t must
        be <= 2/beta. False (default) uses the relaxed diameter 2 (rho + eta_t L), which holds for
        any loss whose gradients are clipped at L.
    smooth
        beta >= 0, the smoothness constant of the per-user losses; required with ``convex=True``
        and refused without it.
    rounds
        T. One pass (``schedule="one-pass"``): at most n/m (default n/m); fewer rounds leave the
        users of the unused batches out. ``schedule="independent"``: required, any integer >= 1
        or ``math.inf`` (the saturation limit; constant ``lr`` and ``noise`` only).
    schedule
        ``"one-pass"`` (the paper's Algorithm 1: a secret random partition, each user once) or
        ``"independent"`` (every round a fresh uniform size-m subset, kept secret: the
        multi-round extension of spec seed4 section 9.3, not in the paper).
    """

    users: int
    batch_size: int
    lipschitz: float
    radius: float | None
    lr: float | Sequence[float]
    noise: float | Sequence[float]
    convex: bool = False
    smooth: float | None = None
    rounds: int | float | None = None
    schedule: str = "one-pass"
    _lr: np.ndarray = field(init=False, repr=False, compare=False)
    _noise: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        users = check_int("users", self.users, minimum=1)
        batch_size = check_int("batch_size", self.batch_size, minimum=1)
        if batch_size > users:
            raise ValueError(
                f"batch_size = {batch_size!r} is out of range: must be in [1, users = {users}]"
            )
        schedule = check_choice("schedule", self.schedule, SCHEDULES)
        if schedule == "one-pass" and users % batch_size:
            raise ValueError(
                f"batch_size = {batch_size!r} does not divide users = {users}: Algorithm 1 is one "
                "pass over a random partition into T = users / batch_size equal batches; drop "
                f"{users % batch_size} users or choose a divisor"
            )
        lipschitz = check_positive("lipschitz", self.lipschitz)
        if self.radius is None:
            raise ValueError(
                "radius = None is out of range: the projection radius rho is required (without a "
                "projection onto a bounded set there is no contraction; use the all-iterates "
                "accountants instead)"
            )
        radius = check_positive("radius", self.radius)
        rounds = _check_rounds(self.rounds, schedule, users // batch_size)
        compact = schedule == "independent" and np.ndim(self.lr) == np.ndim(self.noise) == 0
        length = 1 if compact else rounds
        if math.isinf(length):  # a sequence with rounds = inf: refused by _check_schedule
            length = 1
        lr = _check_schedule("lr", self.lr, length, rounds)
        noise = _check_schedule("noise", self.noise, length, rounds)
        convex = _check_bool("convex", self.convex)
        smooth = self.smooth
        if convex:
            if smooth is None:
                raise ValueError(
                    "smooth = None is out of range: convex=True needs the smoothness constant "
                    "beta >= 0 of the per-user losses (Theorem 2 requires lr <= 2/beta)"
                )
            smooth = check_nonnegative("smooth", smooth)
            if smooth > 0:
                limit = 2.0 / smooth
                too_big = np.flatnonzero(lr > limit)
                if too_big.size:
                    i = int(too_big[0])
                    name = "lr" if np.ndim(self.lr) == 0 else f"lr[{i}]"
                    raise ValueError(
                        f"{name} = {float(lr[i])!r} is out of range: must be in (0, 2/smooth = "
                        f"{limit:g}] when convex=True (the gradient step is non-expansive only "
                        "then); use convex=False for the relaxed diameter 2 (rho + lr L)"
                    )
        elif smooth is not None:
            raise ValueError(
                f"smooth = {smooth!r} is only used with convex=True: smoothness alone does not "
                "make the gradient step non-expansive"
            )
        object.__setattr__(self, "users", users)
        object.__setattr__(self, "batch_size", batch_size)
        object.__setattr__(self, "lipschitz", lipschitz)
        object.__setattr__(self, "radius", radius)
        object.__setattr__(self, "convex", convex)
        object.__setattr__(self, "smooth", smooth)
        object.__setattr__(self, "rounds", rounds)
        object.__setattr__(self, "schedule", schedule)
        for name, values in (("lr", lr), ("noise", noise)):
            scalar = np.ndim(getattr(self, name)) == 0
            object.__setattr__(self, name, float(values[0]) if scalar else tuple(values.tolist()))
        object.__setattr__(self, "_lr", lr)
        object.__setattr__(self, "_noise", noise)

    # ---- derived quantities ----------------------------------------------------------------

    @property
    def partition_rounds(self) -> int:
        """n / m (rounded down): the number of batches of the one-pass partition."""
        return self.users // self.batch_size

    @property
    def sampling_rate(self) -> float:
        """q = m / n: the probability that a given user takes part in a given round."""
        return self.batch_size / self.users

    @property
    def lr_schedule(self) -> np.ndarray:
        """eta_t per round (one entry for a constant schedule of ``schedule="independent"``)."""
        return self._lr.copy()

    @property
    def noise_schedule(self) -> np.ndarray:
        """sigma_t per round (one entry for a constant schedule of ``"independent"``)."""
        return self._noise.copy()

    @property
    def diameter(self) -> np.ndarray:
        """D_t: 2 rho (convex, smooth, lr <= 2/beta) or 2 (rho + eta_t L)."""
        if self.convex:
            return np.full(self._lr.shape, 2.0 * self.radius)
        return 2.0 * (self.radius + self._lr * self.lipschitz)

    @property
    def entry_r(self) -> np.ndarray:
        """r1_t = 2 L / (sqrt(m) sigma_t): sensitivity 2 eta_t L / m over noise std s_t."""
        return 2.0 * self.lipschitz / (math.sqrt(self.batch_size) * self._noise)

    @property
    def contraction_r(self) -> np.ndarray:
        """rc_t = D_t sqrt(m) / (eta_t sigma_t): diameter over noise std s_t."""
        s = self._lr * self._noise / math.sqrt(self.batch_size)
        return self.diameter / s

    @property
    def noise_multipliers(self) -> np.ndarray:
        """privfl's z_t = sigma_t sqrt(m) / L (noise std / clip norm on the sum of gradients)."""
        return self._noise * math.sqrt(self.batch_size) / self.lipschitz

    @property
    def reentry_r(self) -> np.ndarray:
        """Argument of a round whose user took part before (``schedule="independent"``).

        Both inputs differ there; the two-point bound gives ``r1_t + rc_t`` with the diameter
        2 rho (convex), and ``rc_t`` with the relaxed diameter 2 (rho + eta_t L), which already
        bounds ``‖Psi_t(w) - Psi'_t(w')‖`` for different gradients (spec seed4 section 9.3).
        """
        if self.convex:
            return self.entry_r + self.contraction_r
        return self.contraction_r

    @property
    def is_constant(self) -> bool:
        r1, rc = self.entry_r, self.contraction_r
        return bool(np.all(r1 == r1[0]) and np.all(rc[1:] == rc[-1]))

    def _require_one_pass(self, what: str) -> None:
        if self.schedule != "one-pass":
            raise ValueError(
                f"schedule = {self.schedule!r} is not allowed for {what}: it is defined for the "
                "one-pass partition only (schedule = 'one-pass')"
            )

    # ---- per-round chains --------------------------------------------------------------------

    def _chain(self, epsilon: float, sharpened: bool, release: str) -> np.ndarray:
        """log of the per-round delta_t: the guarantee of a user whose data entered round t.

        release "last": theta(r1_t) prod_{j>t} a_j; "random-stop": (1/T) sum_{tau>=t} of the
        chain stopped at tau.
        """
        r1, rc, T = self.entry_r, self.contraction_r, self.rounds
        start = log_theta(epsilon, r1)
        if not sharpened:
            log_a = np.asarray(log_theta(epsilon, rc), float)
            log_a[0] = 0.0  # never used: nothing contracts before round 1
            if release == "last":
                # sum_{j>t} log a_j as a suffix sum (no cancellation; -inf propagates)
                suffix = np.append(np.cumsum(log_a[:0:-1])[::-1], 0.0)
                return start + suffix
            cum = np.cumsum(log_a)  # C_tau = sum_{j<=tau} log a_j
            if np.all(np.isfinite(cum)) and -cum[-1] < 1e8:
                tail = np.logaddexp.accumulate(cum[::-1])[::-1]  # log sum_{tau>=t} e^{C_tau}
                return start + tail - cum - math.log(T)
            # V_t = sum_{tau>=t} prod_{t<j<=tau} a_j = 1 + a_{t+1} V_{t+1}, in [1, T]
            a = np.exp(log_a)
            v = np.empty(T)
            v[-1] = 1.0
            for t in range(T - 2, -1, -1):
                v[t] = 1.0 + a[t + 1] * v[t + 1]
            return start + np.log(v) - math.log(T)
        log_em1 = log_expm1(epsilon)
        if self.is_constant:
            # every chain follows the same recursion: x_{k+1} = x_k + log theta_{eps~(x_k)}(rc)
            values = _sharpened_steps(log_em1, float(start[0]), float(rc[-1]), T - 1)
            x = np.full(T, -np.inf)
            x[: len(values)] = values
            steps_after = T - 1 - np.arange(T)  # factors applied to the chain of round t
            if release == "last":
                return x[steps_after]
            return np.logaddexp.accumulate(x)[steps_after] - math.log(T)
        log_d, acc = self._sharpened_chains(epsilon, start, release == "random-stop")
        if release == "last":
            return log_d
        return acc - math.log(T)

    def _sharpened_chains(
        self, epsilon: float, start: np.ndarray, accumulate: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Sharpened chains of every entry round t (any schedule of parameters), in logs.

        ``log_d[t]``: ``start[t]`` carried through rounds t+1..T with the chain rule of spec 9.1;
        ``acc[t]`` (with ``accumulate``): log of the sum of the chain's values after rounds
        t..T (Corollary 3's stopped chains). O(T^2) work, vectorised over t.
        """
        rc, T = self.contraction_r, self.rounds
        log_em1 = log_expm1(epsilon)
        log_d = np.array(start, float)
        acc = log_d.copy()
        for j in range(1, T):
            current = log_d[:j]
            eps_tilde = _sharpened_eps(log_em1, current)
            current = current + log_theta(eps_tilde, rc[j])
            log_d[:j] = current
            if accumulate:
                acc[:j] = np.logaddexp(acc[:j], current)
        return log_d, acc

    def _log_delta(
        self, epsilon: float, sharpened: bool, release: str, secret_assignment: bool
    ) -> float:
        if self.schedule == "independent":
            if release != "last":
                raise ValueError(
                    f"release = {release!r} is not allowed with schedule = 'independent': "
                    "random stopping (Corollary 3) is defined for the one-pass partition only"
                )
            if self.is_constant:
                return self._log_delta_constant(epsilon, sharpened, secret_assignment)
            return self._log_delta_independent(epsilon, sharpened, secret_assignment)
        per_round = self._chain(epsilon, sharpened, release)
        if not secret_assignment:
            return float(np.max(per_round))
        return logsumexp(per_round) - math.log(self.partition_rounds)

    # ---- the multi-round extension (spec seed4 section 9.3) -----------------------------------

    def _log_delta_independent(self, epsilon: float, sharpened: bool, secret: bool) -> float:
        """log delta_T of ``schedule="independent"`` for per-round parameters, O(T) (O(T^2)
        sharpened): the formula of the module docstring term by term."""
        T = int(self.rounds)
        q = self.sampling_rate
        log_c = math.log1p(-q) if q < 1.0 else -math.inf
        first = log_theta(epsilon, self.entry_r)
        again = log_theta(epsilon, self.reentry_r)
        if sharpened:
            first, _ = self._sharpened_chains(epsilon, first)
            again, _ = self._sharpened_chains(epsilon, again)
        else:
            log_a = np.asarray(log_theta(epsilon, self.contraction_r), float)
            log_a[0] = 0.0
            suffix = np.append(np.cumsum(log_a[:0:-1])[::-1], 0.0)  # sum_{j>t} log a_j
            first, again = first + suffix, again + suffix
        t = np.arange(1, T + 1)
        if not secret:  # the worst inclusion pattern: last in round t (re-entering if t > 1)
            return float(np.max(np.where(t > 1, np.maximum(first, again), first)))
        before = _times_log(t - 1, log_c)  # log (1-q)^(t-1): never included before round t
        mix = np.logaddexp(before + first, log1mexp(before) + again)
        return logsumexp(math.log(q) + _times_log(T - t, log_c) + mix)

    def _log_delta_constant(self, epsilon: float, sharpened: bool, secret: bool) -> float:
        """log delta_T of ``schedule="independent"`` with constant parameters, any T <= inf.

        With k = T - t rounds after the user's last one, c = 1 - q and the chain x_k (plain:
        ``x_k = x_0 + k log a``; sharpened: spec 9.1), ``delta_T = sum_{k<T} q c^k [c^(T-1-k)
        e^{x_k(first)} + (1 - c^(T-1-k)) e^{x_k(again)}]``. The sum is truncated once its
        remaining terms are below 1e-14 of it (or after 2e6 terms), and the tail bound
        ``c^K e^{x_K(again)}`` is added, so the result stays an upper bound. The plain chain at
        T = inf is the closed form ``q theta(re) / (1 - c a)``.
        """
        T = self.rounds
        q = self.sampling_rate
        log_c = math.log1p(-q) if q < 1.0 else -math.inf
        l1 = float(log_theta(epsilon, float(self.entry_r[0])))
        lre = float(log_theta(epsilon, float(self.reentry_r[-1])))
        rc = float(self.contraction_r[-1])
        la = float(log_theta(epsilon, rc))
        if not secret:
            return l1 if T == 1 else max(l1, lre)
        if T == 1:
            return math.log(q) + l1
        if not sharpened and math.isinf(T):
            return math.log(q) + lre - log1mexp(float(log_c + la))
        # the first-entry chain only matters while (1-q)^(T-1) is not negligible
        need_first = math.isfinite(T) and (T - 1) * log_c + math.log(T) > -60.0
        cap = int(min(T, _SHARPENED_TERMS if sharpened else _CONSTANT_TERMS))
        if sharpened:
            log_em1 = log_expm1(epsilon)
            again = np.array(_adaptive_sharpened(log_em1, lre, rc, q, log_c, cap), float)
            first = (np.array(_sharpened_steps(log_em1, l1, rc, len(again) - 1), float)
                     if need_first else again)
            if len(first) < len(again):
                first = np.append(first, np.full(len(again) - len(first), -np.inf))
        else:
            rate = -(log_c + la)  # terms decay like e^{-rate k}
            size = cap if rate <= 0 else int(min(cap, math.ceil(80.0 / rate) + 1))
            k = np.arange(size + 1)
            again = lre + _times_log(k, la)
            first = l1 + _times_log(k, la) if need_first else again
        K = len(again) - 1  # terms k < K summed exactly; again[K] bounds the tail
        if math.isfinite(T) and K >= T:
            K = int(T)
        k = np.arange(K)
        if math.isfinite(T):
            after = _times_log(T - 1 - k, log_c)  # log c^(T-1-k)
            mix = np.logaddexp(after + first[:K], log1mexp(after) + again[:K])
        else:
            mix = again[:K]
        total = logsumexp(math.log(q) + _times_log(k, log_c) + mix)
        if K < T:
            tail = again[K] + (K * log_c if K else 0.0)
            total = np.logaddexp(total, tail)  # tail bound
        if sharpened:  # a truncated sharpened sum may be looser than the plain one: keep the min
            return min(float(total), self._log_delta_constant(epsilon, False, secret))
        return float(total)

    @staticmethod
    def _options(sharpened: Any, release: Any, secret_assignment: Any) -> tuple[bool, str, bool]:
        return (
            _check_bool("sharpened", sharpened),
            check_choice("release", release, RELEASES),
            _check_bool("secret_assignment", secret_assignment),
        )

    # ---- public queries ----------------------------------------------------------------------

    def per_round_delta(
        self, epsilon: float, *, sharpened: bool = False, release: str = "last"
    ) -> np.ndarray:
        """delta_t for a user whose data entered round t (t = 1..T), a diagnostic (spec 4.2).

        Late users get about theta(r1); early users geometrically less. The guarantee of the
        run is their mean (secret assignment) or their maximum (public assignment). One-pass
        schedule only.
        """
        self._require_one_pass("per_round_delta")
        epsilon = check_epsilon("epsilon", epsilon)
        sharpened, release, _ = self._options(sharpened, release, True)
        with np.errstate(under="ignore"):
            return np.exp(self._chain(epsilon, sharpened, release))

    def delta(
        self,
        epsilon: float,
        *,
        sharpened: bool = False,
        release: str = "last",
        secret_assignment: bool = True,
    ) -> float:
        """delta(eps): Theorem 2 (release "last") or Corollary 3 (release "random-stop"); with
        ``schedule="independent"`` the multi-round extension (release "last" only).

        ``sharpened`` uses the chain rule of spec 9.1 (never larger). ``secret_assignment=False``
        reports the worst user position (max_t delta_t) for a public partition (spec 9.2), or
        the worst inclusion pattern (the user in the last round) for public independent batches.
        """
        epsilon = check_epsilon("epsilon", epsilon)
        options = self._options(sharpened, release, secret_assignment)
        return math.exp(self._log_delta(epsilon, *options))

    def epsilon(
        self,
        delta: float,
        *,
        sharpened: bool = False,
        release: str = "last",
        secret_assignment: bool = True,
    ) -> float:
        """Smallest eps (to ~1e-10, on the safe side) with delta(eps) <= ``delta``."""
        delta = check_delta("delta", delta)
        options = self._options(sharpened, release, secret_assignment)
        return smallest_safe_epsilon(lambda e: self._log_delta(e, *options), delta)

    def uniform_bound_delta(self, epsilon: float, *, release: str = "last") -> float:
        """The paper's simplified bounds: (11) for release "last", (12) for "random-stop".

        Every entry factor is bounded by theta(max_t r1_t) and every contraction factor by
        theta(max_{j>=2} rc_j). For constant parameters and release "last" this is Theorem 2's
        closed form. (12) as printed uses eta* = min eta_t and sigma* = min sigma_t jointly; the
        maxima used here are never larger and coincide when sigma_t is constant. One-pass
        schedule only (a partial pass of T < n/m rounds averages over the n/m batches).
        """
        self._require_one_pass("uniform_bound_delta")
        epsilon = check_epsilon("epsilon", epsilon)
        release = check_choice("release", release, RELEASES)
        T = self.rounds
        log_p = math.log(self.partition_rounds)
        log_entry = log_theta(epsilon, float(np.max(self.entry_r)))
        rc = self.contraction_r[1:]
        log_a = log_theta(epsilon, float(np.max(rc))) if rc.size else -math.inf
        if release == "last":
            value = log_entry - log_p + float(_log_geometric(T, log_a))
        else:
            terms = _log_geometric(np.arange(1, T + 1), log_a)
            value = log_entry - log_p - math.log(T) + logsumexp(np.atleast_1d(terms))
        return math.exp(value)

    def one_shot_delta(self, epsilon: float) -> float:
        """theta(max_t r1_t): releasing every iterate (each user enters one round; one pass)."""
        self._require_one_pass("one_shot_delta")
        epsilon = check_epsilon("epsilon", epsilon)
        return float(np.exp(log_theta(epsilon, float(np.max(self.entry_r)))))

    def one_shot_epsilon(self, delta: float) -> float:
        """Exact eps of the one-shot Gaussian mechanism theta_eps(max r1) at ``delta``."""
        self._require_one_pass("one_shot_epsilon")
        delta = check_delta("delta", delta)
        r = float(np.max(self.entry_r))
        return smallest_safe_epsilon(lambda e: log_theta(e, r), delta)

    def _saturated(self) -> ProjectedNoisySGD:
        if not self.is_constant:
            raise ValueError(
                "lr and noise vary by round: the saturation limit (T = inf) needs constant "
                "per-round parameters"
            )
        return replace(
            self, schedule="independent", rounds=math.inf, lr=float(self._lr[-1]),
            noise=float(self._noise[-1]),
        )

    def saturation_delta(self, epsilon: float, *, sharpened: bool = False) -> float:
        """delta_inf: the independent schedule's bound as T -> inf with this run's (constant)
        parameters, ``q theta(re) / (1 - (1-q) theta(rc))`` (spec seed4 section 9.3)."""
        return self._saturated().delta(epsilon, sharpened=sharpened)

    def saturation_epsilon(self, delta: float, *, sharpened: bool = False) -> float:
        """The epsilon at ``delta`` that no number of independent rounds exceeds."""
        return self._saturated().epsilon(delta, sharpened=sharpened)

    def diagnostics(
        self,
        epsilon: float,
        *,
        sharpened: bool = False,
        release: str = "last",
        secret_assignment: bool = True,
    ) -> dict[str, Any]:
        """r1, rc, diameter, the contraction coefficient a = theta(rc) and the gain kappa.

        Scalars summarise the worst round (max r1, max rc). ``kappa`` is the last-iterate delta
        (with the given options) over the all-iterates delta theta(r1); kappa close to 1 means
        hidden-state accounting buys nothing (spec seed4 section 4.4).
        """
        epsilon = check_epsilon("epsilon", epsilon)
        r1 = float(np.max(self.entry_r))
        rc_all = self.contraction_r[1:]
        rc = float(np.max(rc_all)) if rc_all.size else float(self.contraction_r[0])
        entry = float(np.exp(log_theta(epsilon, r1)))
        last = self.delta(
            epsilon, sharpened=sharpened, release=release, secret_assignment=secret_assignment
        )
        extra = {}
        if self.schedule == "independent":
            extra = {"sampling_rate": self.sampling_rate,
                     "reentry_r": float(np.max(self.reentry_r[1:] if self.reentry_r.size > 1
                                               else self.reentry_r))}
        return {
            "rounds": self.rounds,
            "schedule": self.schedule,
            **extra,
            "entry_r": r1,
            "contraction_r": rc,
            "diameter": float(np.max(self.diameter)),
            "diameter_rule": "2*rho (convex, smooth)" if self.convex else "2*(rho + lr*L)",
            "noise_multiplier": float(np.min(self.noise_multipliers)),
            "theta_entry": entry,
            "contraction_coefficient": float(np.exp(log_theta(epsilon, rc))),
            "kappa": last / entry if entry > 0 else 0.0,
        }


# --------------------------------------------------------------------------------------------
# Corollary 1 and the all-iterates comparison event
# --------------------------------------------------------------------------------------------


def corollary1(
    users: int,
    batch_size: int,
    lipschitz: float,
    radius: float,
    strong_convexity: float,
    noise: float,
    *,
    convex: bool = False,
    smooth: float | None = None,
) -> ProjectedNoisySGD:
    """Corollary 1's run: eta_t = 1/(lambda t), constant sigma, T = n/m.

    Its ``delta`` is the corrected exact sum
    ``(1/T) sum_t theta(2L/(sqrt(m) sigma)) prod_{j>t} theta(2 rho lambda j sqrt(m)/sigma)``
    (the paper prints sqrt(lambda m j); spec seed4 section 8 item 3) and its
    ``uniform_bound_delta`` is bound (11). With ``convex=True`` the step-size condition
    eta_1 = 1/lambda <= 2/beta must hold (beta <= 2 lambda); otherwise it is refused, and
    ``convex=False`` gives the relaxed diameter 2 (rho + eta_j L).
    """
    lam = check_positive("strong_convexity", strong_convexity)
    if convex and smooth is not None and check_nonnegative("smooth", smooth) < lam:
        raise ValueError(
            f"strong_convexity = {lam!r} is out of range: must be <= smooth = {smooth!r} (a "
            "lambda-strongly convex, beta-smooth function has lambda <= beta)"
        )
    n = check_int("users", users, minimum=1)
    m = check_int("batch_size", batch_size, minimum=1)
    rounds = max(n // m, 1)
    lr = [1.0 / (lam * t) for t in range(1, rounds + 1)]
    return ProjectedNoisySGD(n, m, lipschitz, radius, lr, noise, convex=convex, smooth=smooth)


def corollary1_utility_bound(
    smooth: float,
    strong_convexity: float,
    rounds: int,
    batch_size: int,
    grad_bound: float,
    grad_variance: float,
    noise: float,
    dim: int = 1,
) -> float:
    """Corollary 1's utility bound: ``E[F(W_T)] - min F <= 2 beta (D^2 + (G^2 + d sigma^2)/m)
    / (lambda^2 T)``.

    Rakhlin, Shamir and Sridharan (2012, Theorem 1) applied by Asoodeh et al. (2021) to
    Algorithm 1 with ``eta_t = 1/(lambda t)``: users i.i.d. from the distribution of F, so every
    round's averaged noisy gradient is unbiased with second moment ``<= D^2 + (G^2 + d
    sigma^2)/m``. ``smooth`` (beta) and ``strong_convexity`` (lambda) are those of F, which must
    be beta-smooth with respect to its minimiser over the ball (true when the minimiser is
    inside the ball); ``grad_bound`` D >= sup ‖grad F‖ and ``grad_variance`` G^2 >= the
    variance of one user's gradient, both over ball(rho); ``noise`` is the paper's per-user
    sigma. The paper prints sigma^2 where isotropic noise in R^d has second moment d sigma^2
    (spec seed4 section 8 item 7): ``dim=1`` gives the printed bound, ``dim=d`` the correct one.
    """
    beta = check_positive("smooth", smooth)
    lam = check_positive("strong_convexity", strong_convexity)
    rounds = check_int("rounds", rounds, minimum=1)
    m = check_int("batch_size", batch_size, minimum=1)
    d_sq = check_nonnegative("grad_bound", grad_bound) ** 2
    g_sq = check_nonnegative("grad_variance", grad_variance)
    sigma = check_nonnegative("noise", noise)
    dim = check_int("dim", dim, minimum=1)
    return 2.0 * beta * (d_sq + (g_sq + dim * sigma**2) / m) / (lam**2 * rounds)


def _group(values: np.ndarray) -> list[tuple[float, int]]:
    groups: list[tuple[float, int]] = []
    for value in values.tolist():
        if groups and groups[-1][0] == value:
            groups[-1] = (value, groups[-1][1] + 1)
        else:
            groups.append((value, 1))
    return groups


def all_iterates_event(
    run: ProjectedNoisySGD, schedule: str = "one-pass", *, unit: Unit | str = Unit.RECORD
) -> PrivacyEvent:
    """The same run with every iterate W_1..W_T released, for composition accountants.

    ``schedule="one-pass"`` (valid for Algorithm 1): each user's record enters exactly one round,
    so by parallel composition the whole transcript is one unsampled Gaussian step with noise
    multiplier z = min_t sigma_t sqrt(m) / L under replace-one neighbours (sensitivity 2L of the
    sum; (2/z)-GDP = theta(r1)), whatever the assignment. ``schedule="independent-rounds"``: T
    rounds, each a fresh uniform size-m subset without replacement (q = m/n), replace-one: what a
    practitioner running standard sampling would account. It is **not** the paper's one-pass
    partition, and composition accountants are not proven valid for the partition (spec seed4
    section 4.9); for a run with ``run.schedule == "independent"`` it is exactly what ran (then
    the only baseline allowed). ``unit`` labels the event (``"client"`` when a user holds a
    whole local dataset, as in :mod:`privfl.fl.algorithms.projected_sgd`).
    """
    if not isinstance(run, ProjectedNoisySGD):
        raise ValueError(f"run = {run!r} is not a ProjectedNoisySGD")
    schedule = check_choice("schedule", schedule, BASELINES)
    unit = Unit(unit)
    z = run.noise_multipliers
    if run.schedule == "independent" and schedule == "one-pass":
        raise ValueError(
            "schedule = 'one-pass' is not allowed for a run with schedule = 'independent': its "
            "users take part in several rounds; use 'independent-rounds'"
        )
    if math.isinf(run.rounds):
        raise ValueError(
            "rounds = inf: releasing infinitely many iterates has no finite composition bound"
        )
    if schedule == "one-pass":
        step = NoisyStep(float(np.min(z)), 1.0, Sampling.NONE)
        return PrivacyEvent(
            ((step, 1),),
            neighbouring=Neighbouring.REPLACE_ONE,
            unit=unit,
            release="all iterates",
            description=(
                f"one pass over a random partition of {run.users} users into {run.rounds} "
                f"rounds of {run.batch_size}: each record enters one Gaussian step "
                "(parallel composition)"
            ),
        )
    q = run.sampling_rate
    groups = _group(z) if z.size > 1 else [(float(z[0]), int(run.rounds))]
    steps = tuple(
        (NoisyStep(value, q, Sampling.WITHOUT_REPLACEMENT), count) for value, count in groups
    )
    which = ("the run's own schedule" if run.schedule == "independent"
             else "not Algorithm 1's one-pass partition")
    return PrivacyEvent(
        steps,
        neighbouring=Neighbouring.REPLACE_ONE,
        unit=unit,
        release="all iterates",
        description=(
            f"{run.rounds} rounds, each a fresh uniform subset of {run.batch_size} of "
            f"{run.users} users ({which})"
        ),
    )


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------

_THREAT_MODEL = (
    "valid against an observer of the released model only (clients that receive intermediate "
    "models are not covered); needs a uniformly random user-to-round partition kept secret, "
    "honest isotropic Gaussian noise added before the projection onto ball(rho), and every "
    "update's gradient norm <= L"
)


def last_iterate_report(
    users: int,
    batch_size: int,
    lipschitz: float,
    radius: float | None,
    lr: float | Sequence[float],
    noise: float | Sequence[float],
    delta: float,
    *,
    convex: bool = False,
    smooth: float | None = None,
    release: str = "last",
    secret_assignment: bool = True,
    methods: str | Iterable[str] = ("rdp", "pld"),
    baselines: Iterable[str] | None = None,
    options: AccountingOptions | None = None,
    schedule: str = "one-pass",
    rounds: int | float | None = None,
) -> list[PrivacyResult]:
    """Epsilon at ``delta`` of projected noisy SGD when only the last model is released.

    Builds the :class:`ProjectedNoisySGD` run from the arguments and returns
    :func:`run_report` of it (``baselines`` default: ``("one-pass",)`` for the one-pass
    schedule, ``("independent-rounds",)`` for ``schedule="independent"``).
    """
    run = ProjectedNoisySGD(
        users, batch_size, lipschitz, radius, lr, noise, convex=convex, smooth=smooth,
        rounds=rounds, schedule=schedule,
    )
    return run_report(
        run, delta, release=release, secret_assignment=secret_assignment, methods=methods,
        baselines=baselines, options=options,
    )


@lru_cache(maxsize=64)
def _account(
    event: PrivacyEvent, delta: float, methods: tuple[str, ...], options: AccountingOptions | None
) -> Any:
    """:func:`account` of an all-iterates event, cached: a one-pass run's event is the same
    single Gaussian step whatever the number of rounds, and a training run asks every round."""
    return account(event, delta=delta, methods=methods, options=options)


def _sampling_text(run: ProjectedNoisySGD, secret: bool) -> str:
    who = "secret" if secret else "public"
    if run.schedule == "one-pass":
        part = "" if run.rounds == run.partition_rounds else (
            f" of {run.partition_rounds} batches (the users of the rest never take part)")
        return (f"one-pass random partition (m={run.batch_size} of n={run.users} per round, "
                f"T={run.rounds}{part}, {who} assignment)")
    return (f"independent uniform subsets without replacement (m={run.batch_size} of "
            f"n={run.users} per round, q={run.sampling_rate:.6g}, T={run.rounds}, {who} batches)")


def run_report(
    run: ProjectedNoisySGD,
    delta: float,
    *,
    release: str = "last",
    secret_assignment: bool = True,
    methods: str | Iterable[str] = ("rdp", "pld"),
    baselines: Iterable[str] | None = None,
    options: AccountingOptions | None = None,
    unit: Unit | str = Unit.RECORD,
) -> list[PrivacyResult]:
    """The labelled last-iterate guarantees of ``run``, then the all-iterates comparison.

    Returns, in order: ``contraction`` (Theorem 2, Corollary 3 for ``release="random-stop"``, or
    the multi-round extension for ``run.schedule == "independent"``), ``contraction-sharpened``
    (spec 9.1 chain rule), then for each baseline in ``baselines`` the composition accountants
    ``methods`` on the same run with all iterates released (:func:`all_iterates_event`). The
    contraction results are bounds (the proofs of Theorem 2, Corollary 3, the sharpened rule and
    the extension of spec 9.3 hold under the checked assumptions) labelled with ``unit``,
    neighbouring "replace-one" and the run's sampling. Baselines for ``"independent-rounds"`` of a
    one-pass run are returned with kind "estimate": they assume a sampling scheme that differs
    from the run's; for an independent run they are what ran (kind as the accountant says). A
    run with ``rounds = inf`` has no all-iterates baseline. ``methods`` may be empty.
    """
    if not isinstance(run, ProjectedNoisySGD):
        raise ValueError(f"run = {run!r} is not a ProjectedNoisySGD")
    delta = check_delta("delta", delta)
    unit = Unit(unit)
    _, release, secret_assignment = ProjectedNoisySGD._options(False, release, secret_assignment)
    independent = run.schedule == "independent"
    if independent and release != "last":
        raise ValueError(
            f"release = {release!r} is not allowed with schedule = 'independent': random "
            "stopping (Corollary 3) is defined for the one-pass partition only"
        )
    method_names = () if not methods else resolve_methods(methods)
    if baselines is None:
        baselines = ("independent-rounds",) if independent else ("one-pass",)
    baseline_names = [check_choice("baselines", b, BASELINES) for b in baselines]
    if independent and "one-pass" in baseline_names:
        raise ValueError(
            "baselines = 'one-pass' is not allowed with schedule = 'independent': users take "
            "part in several rounds; use 'independent-rounds'"
        )
    T = run.rounds
    sampling = _sampling_text(run, secret_assignment)
    if independent:
        theorem = ("multi-round extension of Theorem 2 (independent rounds; derived by privfl, "
                   "docs/accountants/last-iterate.md; not in Asoodeh et al. 2021)")
    else:
        theorem = "Theorem 2" if release == "last" else "Corollary 3 (random stopping)"
    reference: dict[str, Any] = {}
    if not independent:
        reference["one_shot_epsilon"] = run.one_shot_epsilon(delta)
    elif run.is_constant:
        reference["saturation_epsilon"] = run.saturation_epsilon(delta)
    threat = _THREAT_MODEL if not independent else _THREAT_MODEL.replace(
        "user-to-round partition", "choice of every round's users")
    results: list[PrivacyResult] = []
    for method, sharpened in (("contraction", False), ("contraction-sharpened", True)):
        eps = run.epsilon(
            delta, sharpened=sharpened, release=release, secret_assignment=secret_assignment
        )
        diag = run.diagnostics(
            eps if math.isfinite(eps) else 0.0,
            sharpened=sharpened,
            release=release,
            secret_assignment=secret_assignment,
        )
        rule = "sharpened chain rule (docs/accountants/last-iterate.md) applied to " if (
            sharpened) else ""
        source = "" if independent else " of Asoodeh et al. (ISIT 2021)"
        note = f"{rule}{theorem}{source}; {threat}"
        if not secret_assignment:
            note += ("; public assignment: worst user position (max_t delta_t)" if not independent
                     else "; public batches: worst inclusion pattern (user in the last round)")
        if diag["contraction_coefficient"] > 0.999:
            note += (
                f"; contraction coefficient theta(rc) = {diag['contraction_coefficient']:.6g} > "
                "0.999: hidden-state accounting gives < 0.1% over the all-iterates bound "
                "(shrink the radius relative to lr*noise/sqrt(batch_size) for a gain)"
            )
        extras = {**diag, "theorem": theorem, "sharpened": sharpened, **reference}
        if sharpened and "saturation_epsilon" in reference:
            extras["saturation_epsilon"] = run.saturation_epsilon(delta, sharpened=True)
        results.append(
            PrivacyResult(
                method=method,
                kind="bound",
                epsilon=eps,
                delta=delta,
                unit=unit.value,
                neighbouring=Neighbouring.REPLACE_ONE.value,
                sampling=sampling,
                release=_RELEASE_LABEL[release],
                steps=T,
                extras=extras,
                note=note,
            )
        )
    if not method_names or math.isinf(T):
        return results
    for baseline in baseline_names:
        event = all_iterates_event(run, baseline, unit=unit)
        if baseline == "one-pass":
            report = _account(event, delta, method_names, options)
            label = "one-pass random partition, each user in exactly one round"
            note = (
                "all iterates released; each record enters one round, so the transcript is one "
                "Gaussian step with sensitivity 2L/m (parallel composition)"
            )
            kind = None
        else:
            # methods that cannot account sampling without replacement are left out
            supported = tuple(
                name
                for name in method_names
                if build_accountant(name, options).unsupported_reason(event) is None
            )
            if not supported:
                continue
            report = _account(event, delta, supported, options)
            label = sampling_label(event)
            if independent:
                note = ("all iterates released; the run's own independent rounds (fixed-size "
                        "sampling without replacement, replace-one)")
                kind = None
            else:
                note = (
                    "all iterates released, assuming independent per-round sampling without "
                    "replacement; Algorithm 1 uses a one-pass partition, for which this "
                    "composition is not a proven bound (shuffled batches can be less private)"
                )
                kind = "estimate"
        for result in report.results:
            if result.method not in method_names:
                continue
            results.append(
                replace(
                    result,
                    kind=kind or result.kind,
                    sampling=label,
                    extras={**result.extras, "baseline": baseline, "rounds": T},
                    note="; ".join(part for part in (result.note, note) if part),
                )
            )
    return results
