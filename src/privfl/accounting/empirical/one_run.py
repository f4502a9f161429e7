"""One-run auditing: Steinke, Nasr and Jagielski 2023, "Privacy Auditing with One (1) Training Run".

Setting: m canaries, each included in the training input independently with probability 1/2
(secret bits S_1..S_m). After one run the auditor guesses r of the bits (abstaining on m - r) from
the released output; v guesses are correct. If the algorithm is (epsilon, delta)-DP with respect
to one canary (the neighbouring relation of the guarantee: add/remove one canary record or
client), then for every v (their Theorem 5.2 and Algorithm 2 of the appendix)

    P[W >= v] <= P[B >= v] + 2 m delta max_{i=1..v} P[v - i <= B < v] / i,  B ~ Binomial(r, q),

with ``q = e^eps / (1 + e^eps)``, the accuracy of eps-DP randomised response. With delta = 0 this
is the binomial tail (their Theorem 3.1). The p-value of (epsilon, delta) is the right side
(capped at 1); the lower bound at confidence ``1 - beta`` is the largest epsilon whose p-value is
below beta (found by bisection, as in their code). It is rigorous: with probability at least
``1 - beta`` over the canary bits and the run's noise, an (epsilon, delta)-DP algorithm gives a
lower bound of at most epsilon.

The guesses must be fixed by a rule chosen before the bits are seen: :func:`one_run_guesses`
guesses "in" for the k_+ highest scores and "out" for the k_- lowest (their Section 6).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from privfl._validation import check_int, check_range

#: bisection steps of :func:`one_run_epsilon` (relative resolution 2^-40 of the bracket)
BISECTION_STEPS = 40
#: the largest epsilon the bisection brackets (q = e^eps/(1+e^eps) is 1 in floats beyond ~37)
EPSILON_CAP = 64.0


def _check_counts(m: object, r: object, v: object) -> tuple[int, int, int]:
    m = check_int("m", m, minimum=1)
    r = check_int("r", r, minimum=0, maximum=m)
    v = check_int("v", v, minimum=0, maximum=r)
    return m, r, v


def _p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(v - 1, r, q))  # P[Binomial(r, q) >= v]
    if delta == 0.0 or v == 0:
        return min(tail, 1.0)
    below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[B = v-1], ..., P[B = 0]
    alpha = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2.0 * m * delta * alpha, 1.0)


def one_run_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """Largest probability that an (epsilon, delta)-DP run gives >= v correct of r guesses.

    Steinke, Nasr and Jagielski 2023, Theorem 5.2 (formula in the module docstring); ``m`` canaries
    each included with probability 1/2, ``0 <= v <= r <= m``, ``epsilon >= 0``, ``delta`` in
    [0, 1). Returns a value in [0, 1].
    """
    m, r, v = _check_counts(m, r, v)
    epsilon = check_range("epsilon", epsilon, 0.0, EPSILON_CAP)
    delta = check_range("delta", delta, 0.0, 1.0, high_open=True)
    return _p_value(m, r, v, epsilon, delta)


def one_run_epsilon(m: int, r: int, v: int, delta: float, beta: float = 0.05) -> float:
    """Lower bound on epsilon at confidence ``1 - beta`` (Steinke, Nasr and Jagielski 2023).

    The largest epsilon in [0, EPSILON_CAP] whose :func:`one_run_p_value` is below ``beta``, to
    within 2^-40 of the bracket, rounded down (the bisection keeps p(eps_low) < beta). 0 when even
    epsilon = 0 is not rejected. ``beta`` in (0, 1).
    """
    m, r, v = _check_counts(m, r, v)
    delta = check_range("delta", delta, 0.0, 1.0, high_open=True)
    beta = check_range("beta", beta, 0.0, 1.0, low_open=True, high_open=True)
    if _p_value(m, r, v, 0.0, delta) >= beta:
        return 0.0
    low, high = 0.0, 1.0
    while high < EPSILON_CAP and _p_value(m, r, v, high, delta) < beta:
        low, high = high, min(2.0 * high, EPSILON_CAP)
    if _p_value(m, r, v, high, delta) < beta:
        return high
    for _ in range(BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if _p_value(m, r, v, middle, delta) < beta:
            low = middle
        else:
            high = middle
    return low


def one_run_guesses(
    scores: np.ndarray, inserted: np.ndarray, k_in: int, k_out: int = 0
) -> tuple[int, int]:
    """(r, v): guess "in" for the ``k_in`` highest scores and "out" for the ``k_out`` lowest.

    ``scores`` and ``inserted`` (booleans, the secret bits) are 1-D of equal length m;
    ``k_in + k_out <= m``. Ties are broken by position (a stable sort), which does not look at
    the bits, so the rule is fixed before the bits are seen as the theorem requires.
    """
    scores = np.asarray(scores, dtype=float)
    inserted = np.asarray(inserted)
    if scores.ndim != 1 or scores.shape != inserted.shape or scores.size == 0:
        raise ValueError(
            f"scores (shape {scores.shape}) and inserted (shape {inserted.shape}) must be "
            "non-empty 1-D arrays of equal length"
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contains NaN or infinite values: must be finite")
    m = scores.size
    k_in = check_int("k_in", k_in, minimum=0, maximum=m)
    k_out = check_int("k_out", k_out, minimum=0, maximum=m - k_in)
    order = np.argsort(-scores, kind="stable")
    bits = inserted.astype(bool)[order]
    correct = int(bits[:k_in].sum()) + int((~bits[m - k_out:]).sum() if k_out else 0)
    return k_in + k_out, correct
