"""Projected noisy SGD as the contraction bounds see it: the run, validated (Asoodeh et al. 2021).

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from privfl._validation import (
    MAX_COUNT,
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_nonnegative,
    check_positive,
)
from privfl.accounting.contraction.bounds import LastIterateBounds
from privfl.accounting.contraction.theta import log_geometric, log_theta
from privfl.accounting.logspace import logsumexp
from privfl.accounting.safe_epsilon import smallest_safe_epsilon

RELEASES = ("last", "random-stop")
SCHEDULES = ("one-pass", "independent")


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


@lru_cache(maxsize=256)
def _one_shot_epsilon(r: float, delta: float) -> float:
    """eps of theta_eps(r) at ``delta`` (remembered: a training run asks every round, with the
    same r and delta)."""
    return smallest_safe_epsilon(lambda e: log_theta(e, r), delta)


@lru_cache(maxsize=256)
def _saturation_epsilon(saturated: ProjectedNoisySGD, delta: float, sharpened: bool) -> float:
    """``saturated.epsilon(delta)`` (remembered: a run of T independent rounds reports its
    saturation limit every round, and the limit does not depend on T)."""
    return saturated.epsilon(delta, sharpened=sharpened)


def _read_only(values: np.ndarray) -> np.ndarray:
    values.setflags(write=False)
    return values


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} = {value!r} is not a boolean: must be True or False")
    return bool(value)


@dataclass(frozen=True)
class ProjectedNoisySGD(LastIterateBounds):
    """One pass of projected noisy SGD over a secret random partition (Asoodeh et al. 2021).

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
        multi-round extension, not in the paper: docs/accountants/last-iterate.md, "Formulas").
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

    # The per-round arguments below are computed once per run (a root finder reads them at
    # every evaluation of delta) and returned read-only: the run is immutable.

    @cached_property
    def diameter(self) -> np.ndarray:
        """D_t: 2 rho (convex, smooth, lr <= 2/beta) or 2 (rho + eta_t L)."""
        if self.convex:
            return _read_only(np.full(self._lr.shape, 2.0 * self.radius))
        return _read_only(2.0 * (self.radius + self._lr * self.lipschitz))

    @cached_property
    def entry_r(self) -> np.ndarray:
        """r1_t = 2 L / (sqrt(m) sigma_t): sensitivity 2 eta_t L / m over noise std s_t."""
        return _read_only(2.0 * self.lipschitz / (math.sqrt(self.batch_size) * self._noise))

    @cached_property
    def contraction_r(self) -> np.ndarray:
        """rc_t = D_t sqrt(m) / (eta_t sigma_t): diameter over noise std s_t."""
        s = self._lr * self._noise / math.sqrt(self.batch_size)
        return _read_only(self.diameter / s)

    @property
    def noise_multipliers(self) -> np.ndarray:
        """privfl's z_t = sigma_t sqrt(m) / L (noise std / clip norm on the sum of gradients)."""
        return self._noise * math.sqrt(self.batch_size) / self.lipschitz

    @cached_property
    def reentry_r(self) -> np.ndarray:
        """Argument of a round whose user took part before (``schedule="independent"``).

        Both inputs differ there; the two-point bound gives ``r1_t + rc_t`` with the diameter
        2 rho (convex), and ``rc_t`` with the relaxed diameter 2 (rho + eta_t L), which already
        bounds ``‖Psi_t(w) - Psi'_t(w')‖`` for different gradients (the
        multi-round extension in docs/accountants/last-iterate.md, "Formulas").
        """
        if self.convex:
            return _read_only(self.entry_r + self.contraction_r)
        return self.contraction_r

    @cached_property
    def is_constant(self) -> bool:
        r1, rc = self.entry_r, self.contraction_r
        return bool(np.all(r1 == r1[0]) and np.all(rc[1:] == rc[-1]))

    @cached_property
    def _log_delta_memo(self) -> dict[tuple[float, bool, str, bool], float]:
        """log delta(eps) by (eps, sharpened, release, secret_assignment), filled by
        :meth:`_log_delta` (a pure function of the immutable run): the safe-side check of the
        root finder and :meth:`diagnostics` ask again for values the root finder computed."""
        return {}

    def _require_one_pass(self, what: str) -> None:
        if self.schedule != "one-pass":
            raise ValueError(
                f"schedule = {self.schedule!r} is not allowed for {what}: it is defined for the "
                "one-pass partition only (schedule = 'one-pass')"
            )

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
        """delta_t for a user whose data entered round t (t = 1..T): Theorem 2's t-th term.

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

        ``sharpened`` uses the sharpened chain rule (never larger). ``secret_assignment=False``
        reports the worst user position (max_t delta_t) for a public partition (see
        docs/accountants/last-iterate.md, "Formulas"), or
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
            value = log_entry - log_p + float(log_geometric(T, log_a))
        else:
            terms = log_geometric(np.arange(1, T + 1), log_a)
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
        return _one_shot_epsilon(float(np.max(self.entry_r)), delta)

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
        parameters, ``q theta(re) / (1 - (1-q) theta(rc))`` (not in the paper;
        docs/accountants/last-iterate.md, "Formulas")."""
        return self._saturated().delta(epsilon, sharpened=sharpened)

    def saturation_epsilon(self, delta: float, *, sharpened: bool = False) -> float:
        """The epsilon at ``delta`` that no number of independent rounds exceeds."""
        saturated = self._saturated()
        return _saturation_epsilon(
            saturated, check_delta("delta", delta), _check_bool("sharpened", sharpened))

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
        hidden-state accounting buys nothing (docs/accountants/last-iterate.md, "Formulas").
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
