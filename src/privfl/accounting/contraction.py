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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import erf, erfc, log_ndtr

from privfl._validation import (
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
from privfl.accounting.methods import (
    AccountingOptions,
    account,
    build_accountant,
    resolve_methods,
)
from privfl.accounting.results import PrivacyResult

__all__ = [
    "RELEASES",
    "BASELINES",
    "ProjectedNoisySGD",
    "theta",
    "log_theta",
    "closed_form_delta",
    "corollary1",
    "all_iterates_event",
    "last_iterate_report",
]

RELEASES = ("last", "random-stop")
BASELINES = ("one-pass", "independent-rounds")

_RELEASE_LABEL = {
    "last": "last iterate only",
    "random-stop": "randomly stopped iterate only (W_tau, tau ~ Uniform{1..T}, secret)",
}
_ULP = 2.0**-52
_EPS_SEARCH_MAX = 1e12


# --------------------------------------------------------------------------------------------
# theta_eps(r): hockey-stick divergence E_{e^eps}(N(r, 1) || N(0, 1)), in log space
# --------------------------------------------------------------------------------------------


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - exp(x)) for x < 0, accurate at both ends."""
    with np.errstate(divide="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


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
            val = np.where(np.isfinite(lqa), lqa + _log1mexp(diff), -np.inf)
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
    if diff > -math.log(2.0):
        return lqa + math.log(-math.expm1(diff))
    return lqa + math.log1p(-math.exp(diff))


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


def _log_expm1(epsilon: float) -> float:
    """log(e^eps - 1) for eps >= 0 (-inf at 0)."""
    if epsilon == 0.0:
        return -math.inf
    if epsilon < 1.0:
        return math.log(math.expm1(epsilon))
    return epsilon + math.log1p(-math.exp(-epsilon))


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
    return _log1mexp(k * log_a) - float(_log1mexp(np.asarray(log_a)))


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


def _logsumexp(x: np.ndarray) -> float:
    top = float(np.max(x))
    if not np.isfinite(top):
        return top
    return top + math.log(float(np.sum(np.exp(x - top))))


def _solve_epsilon(log_delta: Any, delta: float) -> float:
    """Smallest epsilon (to ~1e-10) with delta(epsilon) <= ``delta``; delta(.) non-increasing.

    Brent's method on log delta(eps) - log delta over a doubling bracket; the answer is moved up
    until it is verified on the safe side. Returns inf if no eps <= 1e12 suffices.
    """
    target = math.log(delta)
    if math.exp(log_delta(0.0)) <= delta:
        return 0.0
    low, high = 0.0, 1.0
    while log_delta(high) > target:
        low, high = high, 2.0 * high
        if high > _EPS_SEARCH_MAX:
            return math.inf

    def gap(eps: float) -> float:
        value = log_delta(eps)
        return max(value, -1e300) - target

    root = brentq(gap, low, high, xtol=1e-12, rtol=1e-13, maxiter=500)
    step = max(1e-12, 1e-13 * root)
    # verified on the scale the caller sees: delta(root) as a float <= delta
    while root < high and math.exp(log_delta(root)) > delta:
        root = min(high, root + step)
        step *= 2.0
    return float(root)


# --------------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------------


def _check_schedule(name: str, value: Any, rounds: int) -> np.ndarray:
    """A positive number (constant) or a sequence of ``rounds`` positive numbers."""
    if isinstance(value, (str, bytes)):
        raise ValueError(f"{name} = {value!r} is not a number or a sequence of numbers")
    if np.ndim(value) == 0:
        return np.full(rounds, check_positive(name, value))
    items = list(value)
    if len(items) != rounds:
        raise ValueError(
            f"{name} has {len(items)} entries: must be one number or one per round "
            f"(T = users / batch_size = {rounds})"
        )
    return np.array([check_positive(f"{name}[{i}]", v) for i, v in enumerate(items)])


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
    """

    users: int
    batch_size: int
    lipschitz: float
    radius: float | None
    lr: float | Sequence[float]
    noise: float | Sequence[float]
    convex: bool = False
    smooth: float | None = None
    _lr: np.ndarray = field(init=False, repr=False, compare=False)
    _noise: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        users = check_int("users", self.users, minimum=1)
        batch_size = check_int("batch_size", self.batch_size, minimum=1)
        if batch_size > users:
            raise ValueError(
                f"batch_size = {batch_size!r} is out of range: must be in [1, users = {users}]"
            )
        if users % batch_size:
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
        rounds = users // batch_size
        lr = _check_schedule("lr", self.lr, rounds)
        noise = _check_schedule("noise", self.noise, rounds)
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
        for name, values in (("lr", lr), ("noise", noise)):
            scalar = np.ndim(getattr(self, name)) == 0
            object.__setattr__(self, name, float(values[0]) if scalar else tuple(values.tolist()))
        object.__setattr__(self, "_lr", lr)
        object.__setattr__(self, "_noise", noise)

    # ---- derived quantities ----------------------------------------------------------------

    @property
    def rounds(self) -> int:
        """T = n / m."""
        return self.users // self.batch_size

    @property
    def lr_schedule(self) -> np.ndarray:
        return self._lr.copy()

    @property
    def noise_schedule(self) -> np.ndarray:
        return self._noise.copy()

    @property
    def diameter(self) -> np.ndarray:
        """D_t: 2 rho (convex, smooth, lr <= 2/beta) or 2 (rho + eta_t L)."""
        if self.convex:
            return np.full(self.rounds, 2.0 * self.radius)
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
    def is_constant(self) -> bool:
        r1, rc = self.entry_r, self.contraction_r
        return bool(np.all(r1 == r1[0]) and np.all(rc[1:] == rc[-1]))

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
        log_em1 = _log_expm1(epsilon)
        if self.is_constant:
            # every chain follows the same recursion: x_{k+1} = x_k + log theta_{eps~(x_k)}(rc)
            values = [float(start[0])]
            r = float(rc[-1])
            current = values[0]
            for _ in range(1, T):
                if current == -math.inf:
                    break
                gap = log_em1 - current
                eps_k = gap + math.log1p(math.exp(-gap)) if gap > 0 else math.log1p(math.exp(gap))
                current += _log_theta_scalar(eps_k, r)
                values.append(current)
            x = np.full(T, -np.inf)
            x[: len(values)] = values
            steps_after = T - 1 - np.arange(T)  # factors applied to the chain of round t
            if release == "last":
                return x[steps_after]
            return np.logaddexp.accumulate(x)[steps_after] - math.log(T)
        log_d = np.array(start, float)
        acc = log_d.copy()
        for j in range(1, T):
            current = log_d[:j]
            eps_tilde = _sharpened_eps(log_em1, current)
            current = current + log_theta(eps_tilde, rc[j])
            log_d[:j] = current
            if release == "random-stop":
                acc[:j] = np.logaddexp(acc[:j], current)
        if release == "last":
            return log_d
        return acc - math.log(T)

    def _log_delta(
        self, epsilon: float, sharpened: bool, release: str, secret_assignment: bool
    ) -> float:
        per_round = self._chain(epsilon, sharpened, release)
        if not secret_assignment:
            return float(np.max(per_round))
        return _logsumexp(per_round) - math.log(self.rounds)

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
        run is their mean (secret assignment) or their maximum (public assignment).
        """
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
        """delta(eps): Theorem 2 (release "last") or Corollary 3 (release "random-stop").

        ``sharpened`` uses the chain rule of spec 9.1 (never larger). ``secret_assignment=False``
        reports the worst user position (max_t delta_t) for a public partition (spec 9.2).
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
        return _solve_epsilon(lambda e: self._log_delta(e, *options), delta)

    def uniform_bound_delta(self, epsilon: float, *, release: str = "last") -> float:
        """The paper's simplified bounds: (11) for release "last", (12) for "random-stop".

        Every entry factor is bounded by theta(max_t r1_t) and every contraction factor by
        theta(max_{j>=2} rc_j). For constant parameters and release "last" this is Theorem 2's
        closed form. (12) as printed uses eta* = min eta_t and sigma* = min sigma_t jointly; the
        maxima used here are never larger and coincide when sigma_t is constant.
        """
        epsilon = check_epsilon("epsilon", epsilon)
        release = check_choice("release", release, RELEASES)
        T = self.rounds
        log_entry = log_theta(epsilon, float(np.max(self.entry_r)))
        rc = self.contraction_r[1:]
        log_a = log_theta(epsilon, float(np.max(rc))) if rc.size else -math.inf
        if release == "last":
            value = log_entry - math.log(T) + float(_log_geometric(T, log_a))
        else:
            terms = _log_geometric(np.arange(1, T + 1), log_a)
            value = log_entry - 2.0 * math.log(T) + _logsumexp(np.atleast_1d(terms))
        return math.exp(value)

    def one_shot_delta(self, epsilon: float) -> float:
        """theta(max_t r1_t): releasing every iterate (each user enters one round)."""
        epsilon = check_epsilon("epsilon", epsilon)
        return float(np.exp(log_theta(epsilon, float(np.max(self.entry_r)))))

    def one_shot_epsilon(self, delta: float) -> float:
        """Exact eps of the one-shot Gaussian mechanism theta_eps(max r1) at ``delta``."""
        delta = check_delta("delta", delta)
        r = float(np.max(self.entry_r))
        return _solve_epsilon(lambda e: log_theta(e, r), delta)

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
        return {
            "rounds": self.rounds,
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


def _group(values: np.ndarray) -> list[tuple[float, int]]:
    groups: list[tuple[float, int]] = []
    for value in values.tolist():
        if groups and groups[-1][0] == value:
            groups[-1] = (value, groups[-1][1] + 1)
        else:
            groups.append((value, 1))
    return groups


def all_iterates_event(run: ProjectedNoisySGD, schedule: str = "one-pass") -> PrivacyEvent:
    """The same run with every iterate W_1..W_T released, for composition accountants.

    ``schedule="one-pass"`` (valid for Algorithm 1): each user's record enters exactly one round,
    so by parallel composition the whole transcript is one unsampled Gaussian step with noise
    multiplier z = min_t sigma_t sqrt(m) / L under replace-one neighbours (sensitivity 2L of the
    sum; (2/z)-GDP = theta(r1)), whatever the assignment. ``schedule="independent-rounds"``: T
    rounds, each a fresh uniform size-m subset without replacement (q = m/n), replace-one: what a
    practitioner running standard sampling would account. It is **not** the paper's one-pass
    partition, and composition accountants are not proven valid for the partition (spec seed4
    section 4.9).
    """
    if not isinstance(run, ProjectedNoisySGD):
        raise ValueError(f"run = {run!r} is not a ProjectedNoisySGD")
    schedule = check_choice("schedule", schedule, BASELINES)
    z = run.noise_multipliers
    if schedule == "one-pass":
        step = NoisyStep(float(np.min(z)), 1.0, Sampling.NONE)
        return PrivacyEvent(
            ((step, 1),),
            neighbouring=Neighbouring.REPLACE_ONE,
            unit=Unit.RECORD,
            release="all iterates",
            description=(
                f"one pass over a random partition of {run.users} users into {run.rounds} "
                f"rounds of {run.batch_size}: each record enters one Gaussian step "
                "(parallel composition)"
            ),
        )
    q = run.batch_size / run.users
    steps = tuple(
        (NoisyStep(value, q, Sampling.WITHOUT_REPLACEMENT), count) for value, count in _group(z)
    )
    return PrivacyEvent(
        steps,
        neighbouring=Neighbouring.REPLACE_ONE,
        unit=Unit.RECORD,
        release="all iterates",
        description=(
            f"{run.rounds} rounds, each a fresh uniform subset of {run.batch_size} of "
            f"{run.users} users (not Algorithm 1's one-pass partition)"
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
    baselines: Iterable[str] = ("one-pass",),
    options: AccountingOptions | None = None,
) -> list[PrivacyResult]:
    """Epsilon at ``delta`` of projected noisy SGD when only the last model is released.

    Returns, in order: ``contraction`` (Theorem 2, or Corollary 3 for
    ``release="random-stop"``), ``contraction-sharpened`` (spec 9.1 chain rule), then for each
    baseline in ``baselines`` the composition accountants ``methods`` on the same run with all
    iterates released (:func:`all_iterates_event`). The contraction results are bounds (the
    proofs of Theorem 2, Corollary 3 and the sharpened rule hold under the checked assumptions)
    labelled unit "record", neighbouring "replace-one", sampling "one-pass random partition".
    Baselines for ``"independent-rounds"`` are returned with kind "estimate": they assume a
    sampling scheme that differs from the run's. ``methods`` may be empty.
    """
    run = ProjectedNoisySGD(
        users, batch_size, lipschitz, radius, lr, noise, convex=convex, smooth=smooth
    )
    delta = check_delta("delta", delta)
    _, release, secret_assignment = ProjectedNoisySGD._options(False, release, secret_assignment)
    method_names = () if not methods else resolve_methods(methods)
    baseline_names = [check_choice("baselines", b, BASELINES) for b in baselines]
    T = run.rounds
    sampling = (
        f"one-pass random partition (m={run.batch_size} of n={run.users} per round, "
        f"T={T}, {'secret' if secret_assignment else 'public'} assignment)"
    )
    theorem = "Theorem 2" if release == "last" else "Corollary 3 (random stopping)"
    one_shot_eps = run.one_shot_epsilon(delta)
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
        rule = "sharpened chain rule (spec seed4 9.1) applied to " if sharpened else ""
        note = f"{rule}{theorem} of Asoodeh et al. (ISIT 2021); {_THREAT_MODEL}"
        if not secret_assignment:
            note += "; public assignment: worst user position (max_t delta_t)"
        if diag["contraction_coefficient"] > 0.999:
            note += (
                f"; contraction coefficient theta(rc) = {diag['contraction_coefficient']:.6g} > "
                "0.999: hidden-state accounting gives < 0.1% over the all-iterates bound "
                "(shrink the radius relative to lr*noise/sqrt(batch_size) for a gain)"
            )
        results.append(
            PrivacyResult(
                method=method,
                kind="bound",
                epsilon=eps,
                delta=delta,
                unit=Unit.RECORD.value,
                neighbouring=Neighbouring.REPLACE_ONE.value,
                sampling=sampling,
                release=_RELEASE_LABEL[release],
                steps=T,
                extras={
                    **diag,
                    "theorem": theorem,
                    "sharpened": sharpened,
                    "one_shot_epsilon": one_shot_eps,
                },
                note=note,
            )
        )
    if not method_names:
        return results
    for baseline in baseline_names:
        event = all_iterates_event(run, baseline)
        if baseline == "one-pass":
            report = account(event, delta=delta, methods=method_names, options=options)
            label = "one-pass random partition, each record in exactly one round"
            note = (
                "all iterates released; each record enters one round, so the transcript is one "
                "Gaussian step with sensitivity 2L/m (parallel composition, spec seed4 4.9)"
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
            report = account(event, delta=delta, methods=supported, options=options)
            label = event.sampling_label
            note = (
                "all iterates released, assuming independent per-round sampling without "
                "replacement; Algorithm 1 uses a one-pass partition, for which this composition "
                "is not a proven bound (spec seed4 4.9)"
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
