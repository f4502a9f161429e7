"""Log-space terms shared by the subsampled RDP bounds.

``log|expm1(c)|`` (:func:`log_abs_expm1`) and ``log|C(alpha, i)|`` (:func:`log_binom`, the
generalised binomial coefficient, whose sign the callers track) appear in every term of the
Poisson (Mironov, Talwar & Zhang 2019) and fixed-size (Wang, Balle & Kasiviswanathan 2019)
sums.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from privfl.accounting.logspace import log1mexp, log_expm1


def log_abs_expm1(c: np.ndarray) -> np.ndarray:
    """``log|expm1(c)|`` for an array (-inf at 0): :func:`~privfl.accounting.logspace.log_expm1`
    for ``c > 0`` and :func:`~privfl.accounting.logspace.log1mexp` for ``c < 0``."""
    c = np.asarray(c, dtype=float)
    return np.where(c > 0, log_expm1(c), log1mexp(c))


def log_binom(alpha: np.ndarray | float, i: np.ndarray) -> np.ndarray:
    """``log|C(alpha, i)|`` (gammaln returns log|Gamma| at negative non-integers)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_top = special.gammaln(alpha + 1.0)
        return log_top - special.gammaln(i + 1.0) - special.gammaln(alpha - i + 1.0)
