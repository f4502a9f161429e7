"""Random participation, one iteration: the log delta of any scheme in any direction (the
maximum of both for a guarantee), and the public per-iteration queries (delta at epsilon,
epsilon at delta through privfl's one safe-epsilon solver, Theorem 4.1's z*)."""

from __future__ import annotations

import math

from privfl._validation import check_epsilon
from privfl.accounting.participation.deltas import log_per_s1, log_psg_forward, log_psg_reverse
from privfl.accounting.participation.setting import Setting, _setting, check_query
from privfl.accounting.participation.theorem41 import log_theorem41
from privfl.accounting.safe_epsilon import smallest_safe_epsilon


def _log_delta_direction(scheme: str, eps: float, s: Setting, direction: str) -> float:
    if scheme == "theorem-4.1":
        return log_theorem41(eps, s)[0]
    if scheme == "per-s1-convexity":
        return log_per_s1(eps, s, direction)
    psg = log_psg_forward if direction == "forward" else log_psg_reverse
    if scheme == "cs":
        return psg(eps, s.pq, s.z)
    if scheme == "ols":
        return psg(eps, s.q, s.z)
    return math.log(s.p) + psg(eps, s.q, s.z)  # wcs


def log_delta(scheme: str, eps: float, s: Setting, direction: str = "max") -> float:
    if scheme == "theorem-4.1" or direction == "forward":
        return _log_delta_direction(scheme, eps, s, "forward")
    if direction == "reverse":
        return _log_delta_direction(scheme, eps, s, "reverse")
    return max(
        _log_delta_direction(scheme, eps, s, "forward"),
        _log_delta_direction(scheme, eps, s, "reverse"),
    )


def both_directions(scheme: str, eps: float, s: Setting) -> tuple[float, float]:
    forward = math.exp(_log_delta_direction(scheme, eps, s, "forward"))
    if scheme == "theorem-4.1":
        return forward, math.nan
    return forward, math.exp(_log_delta_direction(scheme, eps, s, "reverse"))


def participation_delta(
    scheme: str,
    epsilon: float,
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip_norm: float = 1.0,
    direction: str = "max",
) -> float:
    """Per-iteration delta of ``scheme`` at ``epsilon`` (see
    :mod:`privfl.accounting.participation`).

    Parameters
    ----------
    scheme : one of :data:`SCHEMES`.
    epsilon : >= 0.
    client_rate : p in (0, 1]; record_rate : q in (0, 1].
    records : d >= 0, the other records of the client holding the protected record.
    noise : sigma > 0, std of the Gaussian noise on the sum (per client for an untrusted server).
    clip_norm : C > 0, the per-record clipping norm.
    direction : ``"max"`` (default, both directions), ``"forward"`` (with x' || without x', the
        paper's) or ``"reverse"``. Theorem 4.1 is forward only (``"max"`` means forward there).
    """
    scheme, eps, s, direction = check_query(
        scheme, "epsilon", epsilon, client_rate, record_rate, records, noise, clip_norm, direction
    )
    return math.exp(log_delta(scheme, eps, s, direction))


def theorem41_zstar(
    epsilon: float,
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip_norm: float = 1.0,
) -> float:
    """The root z* of the paper's Eq. (7) (same units as ``clip_norm``)."""
    eps = check_epsilon("epsilon", epsilon)
    s = _setting(client_rate, record_rate, records, noise, clip_norm)
    return log_theorem41(eps, s)[1] * float(clip_norm)


def participation_epsilon(
    scheme: str,
    delta: float,
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip_norm: float = 1.0,
    direction: str = "max",
) -> float:
    """Per-iteration epsilon of ``scheme`` at ``delta``: the smallest epsilon found (Brent on
    ``log delta(eps)``) whose delta is <= ``delta``; ``inf`` beyond
    :data:`~privfl.accounting.safe_epsilon.EPSILON_MAX` (the float range)."""
    scheme, delta, s, direction = check_query(
        scheme, "delta", delta, client_rate, record_rate, records, noise, clip_norm, direction
    )
    return smallest_safe_epsilon(lambda e: log_delta(scheme, e, s, direction), delta)
