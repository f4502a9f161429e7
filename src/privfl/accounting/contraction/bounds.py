"""The last-iterate bounds of a projected noisy SGD run, in log space (Asoodeh et al. 2021).

:class:`LastIterateBounds` computes log delta(eps) of a
:class:`~privfl.accounting.contraction.run.ProjectedNoisySGD` from its per-round entry
arguments r1_t, contraction arguments rc_t and re-entry arguments re_t (defined, with the
run's model, in :mod:`privfl.accounting.contraction.run`).

Results
-------
Theorem 2: ``delta(eps) = (1/T) sum_t theta_eps(r1_t) prod_{j>t} theta_eps(rc_j)`` and its
constant-parameter closed form; the sharpened chain rule (privfl's addition, stated in
docs/accountants/last-iterate.md, "Formulas"), which replaces each factor theta_eps(rc_j) applied
to a running value d by theta_{eps~}(rc_j) with ``eps~ = log(1 + (e^eps - 1)/d)``; Corollary 1
(eta_t = 1/(lambda t), product term corrected to ``theta_eps(2 rho lambda j sqrt(m) / sigma)``)
and its bound (11); Corollary 3 (random stopping) and its bound (12). Everything is computed in
log space; epsilon for a target delta by bracketed root finding, always returned on the safe side
(delta(epsilon) <= target).

A one-pass run may stop after ``rounds`` < n/m rounds (the users of the unused batches never
take part): ``delta = (m/n) sum_{t<=rounds} theta(r1_t) prod_{t<j<=rounds} theta(rc_j)``.

Multi-round extension (``schedule="independent"``; derived by privfl with the paper's tools, **not
in Asoodeh et al. 2021**; docs/accountants/last-iterate.md, "Formulas"): T rounds, each a fresh
uniformly random size-m subset of the n users (q = m/n, secret), only W_T released. With tau the
last round holding the differing user, a user who entered before re-enters with both inputs
different, for which the two-point bound gives ``theta(r1_t + rc_t)`` (convex) or ``theta(rc_t)``
(relaxed diameter, which already covers different gradients). Averaging over the user's inclusion
pattern (joint convexity)::

    delta_T(eps) = sum_t q (1-q)^(T-t) [(1-q)^(t-1) theta(r1_t) + (1 - (1-q)^(t-1)) theta(re_t)]
                   * prod_{j>t} theta(rc_j),                 re_t = r1_t + rc_t (convex) or rc_t

It is non-decreasing in T and, for constant parameters, saturates at
``delta_inf = q theta(re) / (1 - (1-q) theta(rc))``, while composition bounds grow like sqrt(T).
"""

from __future__ import annotations

import math

import numpy as np

from privfl.accounting.contraction.theta import log_theta, log_theta_scalar, sharpened_eps
from privfl.accounting.logspace import log1mexp, log_expm1, logsumexp

#: Terms of the constant-parameter multi-round sum computed exactly (plain / sharpened chain);
#: the rest is replaced by an upper bound.
_CONSTANT_TERMS = 2_000_000
_SHARPENED_TERMS = 100_000
#: Values of log delta(eps) a run remembers (a root finder asks for a few dozen).
_MEMO_SIZE = 1024


def _times_log(k: np.ndarray, log_c: float) -> np.ndarray:
    """k * log c with 0 * (-inf) = 0: log c^k for integer k >= 0."""
    k = np.asarray(k)
    if k.ndim and math.isfinite(log_c):  # the same values without the error-state switch
        out = k * log_c
        out[k == 0] = 0.0
        return out
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
        current += log_theta_scalar(eps_k, r)
        values.append(current)
    return values


def _sharpened_steps(log_em1: float, start: float, r: float, steps: int) -> list[float]:
    """The sharpened chain (module docstring) with constant contraction argument ``r``, in logs.

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
        current += log_theta_scalar(eps_k, r)
        values.append(current)
    return values


class LastIterateBounds:
    """log delta(eps) of the run: the per-round chains of Theorem 2 and Corollary 3 (one pass) and
    the multi-round extension (``schedule="independent"``), plain or sharpened.

    A base class of :class:`~privfl.accounting.contraction.run.ProjectedNoisySGD`, which provides
    what these methods read: ``rounds``, ``schedule``, ``sampling_rate``, ``partition_rounds``,
    ``entry_r``, ``contraction_r``, ``reentry_r``, ``is_constant`` and ``_log_delta_memo`` (a
    dict).
    """

    # ---- per-round chains --------------------------------------------------------------------

    def _chain(self, epsilon: float, sharpened: bool, release: str) -> np.ndarray:
        """log of the per-round delta_t: the guarantee of a user whose data entered round t.

        release "last": theta(r1_t) prod_{j>t} a_j; "random-stop": (1/T) sum_{tau>=t} of the
        chain stopped at tau.
        """
        r1, rc, T = self.entry_r, self.contraction_r, self.rounds
        # constant parameters: one theta per argument (log_theta gives every entry these bits)
        constant = self.is_constant
        start = np.full(T, log_theta(epsilon, float(r1[0]))) if constant else log_theta(
            epsilon, r1)
        if not sharpened:
            log_a = np.full(T, log_theta(epsilon, float(rc[-1]))) if constant else np.asarray(
                log_theta(epsilon, rc), float)
            log_a[0] = 0.0  # never used: nothing contracts before round 1
            if release == "last":
                # sum_{j>t} log a_j as a suffix sum (no cancellation; -inf propagates)
                suffix = np.zeros(T)
                suffix[:-1] = np.cumsum(log_a[:0:-1])[::-1]
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
        if constant:
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

        ``log_d[t]``: ``start[t]`` carried through rounds t+1..T with the sharpened chain rule;
        ``acc[t]`` (with ``accumulate``): log of the sum of the chain's values after rounds
        t..T (Corollary 3's stopped chains). O(T^2) work, vectorised over t.
        """
        rc, T = self.contraction_r, self.rounds
        log_em1 = log_expm1(epsilon)
        log_d = np.array(start, float)
        acc = log_d.copy()
        for j in range(1, T):
            current = log_d[:j]
            eps_tilde = sharpened_eps(log_em1, current)
            current = current + log_theta(eps_tilde, rc[j])
            log_d[:j] = current
            if accumulate:
                acc[:j] = np.logaddexp(acc[:j], current)
        return log_d, acc

    def _log_delta(
        self, epsilon: float, sharpened: bool, release: str, secret_assignment: bool
    ) -> float:
        """log delta(eps) of the run with the given options, remembered in the run's
        ``_log_delta_memo`` (at most ``_MEMO_SIZE`` values; then it starts afresh)."""
        key = (epsilon, sharpened, release, secret_assignment)
        memo = self._log_delta_memo
        value = memo.get(key)
        if value is None:
            if len(memo) >= _MEMO_SIZE:
                memo.clear()
            value = memo[key] = self._compute_log_delta(*key)
        return value

    def _compute_log_delta(
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

    # ---- the multi-round extension (not in the paper; see the module docstring) ------------------

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
        ``x_k = x_0 + k log a``; sharpened: the chain rule), ``delta_T = sum_{k<T} q c^k [c^(T-1-k)
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
