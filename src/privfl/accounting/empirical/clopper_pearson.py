"""Epsilon lower bound from a membership test's error rates (Jagielski, Ullman and Oprea 2020).

A test that says "inserted" when a canary's score exceeds a threshold has a false positive rate
FPR (on canaries that were left out) and a false negative rate FNR (on inserted ones). Any
(epsilon, delta)-DP mechanism satisfies, for every test (Kairouz, Oh and Viswanath 2015),

    FPR + e^eps FNR >= 1 - delta   and   FNR + e^eps FPR >= 1 - delta,

hence ``eps >= max(log((1 - delta - FPR) / FNR), log((1 - delta - FNR) / FPR))``. The rates are
replaced by one-sided Clopper-Pearson (1934) upper bounds at level ``1 - beta/2`` each, so both
hold together with probability at least ``1 - beta`` and the result is a lower bound at
confidence ``1 - beta``. This is the classic audit of Jagielski et al. 2020 and Nasr et al. 2021
(``log((TPR_lower - delta) / FPR_upper)`` is the first term with TPR = 1 - FNR).

The threshold must not be chosen on the counted canaries: :func:`split_threshold_epsilon` picks
it on one half and counts on the other.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from privfl._validation import check_int, check_range


def _upper(errors: np.ndarray, trials: int, beta: float) -> np.ndarray:
    safe = np.minimum(errors, trials - 1)  # keeps Beta's second shape positive where errors == n
    return np.where(errors < trials, stats.beta.ppf(1.0 - beta, safe + 1, trials - safe), 1.0)


def clopper_pearson_upper(errors: int, trials: int, beta: float) -> float:
    """One-sided Clopper-Pearson upper bound on a binomial rate at confidence ``1 - beta``.

    The ``1 - beta`` quantile of Beta(errors + 1, trials - errors) (1 when errors == trials).
    ``0 <= errors <= trials``, ``trials >= 1``, ``beta`` in (0, 1).
    """
    trials = check_int("trials", trials, minimum=1)
    errors = check_int("errors", errors, minimum=0, maximum=trials)
    beta = check_range("beta", beta, 0.0, 1.0, low_open=True, high_open=True)
    return float(_upper(np.array(errors), trials, beta))


def _log_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(np.maximum(numerator, 0.0) / denominator)
    return np.maximum(np.nan_to_num(ratio, nan=0.0, neginf=0.0), 0.0)


def _epsilons(
    false_positives: np.ndarray, negatives: int, false_negatives: np.ndarray, positives: int,
    delta: float, beta: float,
) -> np.ndarray:
    fpr = _upper(false_positives, negatives, beta / 2.0)
    fnr = _upper(false_negatives, positives, beta / 2.0)
    return np.maximum(_log_ratio(1.0 - delta - fpr, fnr), _log_ratio(1.0 - delta - fnr, fpr))


def clopper_pearson_epsilon(
    false_positives: int, negatives: int, false_negatives: int, positives: int,
    delta: float, beta: float = 0.05,
) -> float:
    """Epsilon lower bound at confidence ``1 - beta`` from error counts at one threshold.

    ``false_positives`` of ``negatives`` left-out canaries scored above the threshold,
    ``false_negatives`` of ``positives`` inserted canaries scored at or below it. Formula in the
    module docstring; 0 when neither term is positive. ``delta`` in [0, 1).
    """
    negatives = check_int("negatives", negatives, minimum=1)
    positives = check_int("positives", positives, minimum=1)
    false_positives = check_int("false_positives", false_positives, maximum=negatives)
    false_negatives = check_int("false_negatives", false_negatives, maximum=positives)
    delta = check_range("delta", delta, 0.0, 1.0, high_open=True)
    beta = check_range("beta", beta, 0.0, 1.0, low_open=True, high_open=True)
    return float(_epsilons(np.array(false_positives), negatives, np.array(false_negatives),
                           positives, delta, beta))


def _errors_at(
    scores: np.ndarray, bits: np.ndarray, thresholds: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray, int]:
    above = scores[None, :] > thresholds[:, None]
    false_positives = (above & ~bits).sum(axis=1)
    false_negatives = (~above & bits).sum(axis=1)
    return false_positives, int((~bits).sum()), false_negatives, int(bits.sum())


def split_threshold_epsilon(
    scores: np.ndarray, inserted: np.ndarray, delta: float, beta: float = 0.05,
    seed: int = 0,
) -> float:
    """Clopper-Pearson lower bound with the threshold chosen on a random half of the canaries.

    The canaries are split at random (generator ``seed``) into a selection half and a counting
    half; the threshold maximising :func:`clopper_pearson_epsilon` on the selection half is
    applied to the counting half, whose bound is returned (valid: the threshold does not depend on
    the counted canaries). Each half needs inserted and left-out canaries, else 0 is returned.
    """
    scores = np.asarray(scores, dtype=float)
    bits = np.asarray(inserted).astype(bool)
    if scores.ndim != 1 or scores.shape != bits.shape or scores.size < 4:
        raise ValueError(
            f"scores (shape {scores.shape}) and inserted (shape {bits.shape}) must be 1-D arrays "
            "of equal length >= 4"
        )
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores contains NaN or infinite values: must be finite")
    delta = check_range("delta", delta, 0.0, 1.0, high_open=True)
    beta = check_range("beta", beta, 0.0, 1.0, low_open=True, high_open=True)
    seed = check_int("seed", seed)
    order = np.random.default_rng(seed).permutation(scores.size)
    select, count = order[: scores.size // 2], order[scores.size // 2:]
    if not all(0 < bits[part].sum() < part.size for part in (select, count)):
        return 0.0
    candidates = np.unique(scores[select])
    chosen = _epsilons(*_errors_at(scores[select], bits[select], candidates), delta, beta)
    best = candidates[int(np.argmax(chosen))]
    counted = _errors_at(scores[count], bits[count], np.array([best]))
    return float(_epsilons(*counted, delta, beta)[0])
