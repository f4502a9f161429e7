"""Empirical privacy from canaries: lower bounds and estimates of epsilon from a run's outputs.

A proven accountant gives an *upper* bound on epsilon for the algorithm on paper. Canaries placed
inside a real run give statistics about the code that ran (Jagielski et al. 2020; Nasr et al.
2021; Steinke, Nasr and Jagielski 2023; Andrew et al. 2024). Each canary is inserted or not
(independently, probability 1/2) and the auditor scores, from the released outputs only, how
strongly each canary shows. This package turns those scores into numbers about epsilon:

* :mod:`~privfl.accounting.empirical.one_run`: the one-run lower bound of Steinke, Nasr and
  Jagielski 2023 (rigorous at confidence ``1 - beta``, with delta).
* :mod:`~privfl.accounting.empirical.clopper_pearson`: the lower bound from Clopper-Pearson
  intervals on the false positive and false negative rates at a threshold (Jagielski et al.
  2020), the threshold chosen on a held-out half.
* :mod:`~privfl.accounting.empirical.gaussian_fit`: the Gaussian-fit *estimate* of Andrew et al.
  2024 (not a bound: it assumes the scores are Gaussian).

A lower bound above a proven upper bound shows the code does not do what the proof assumes; a
lower bound below it proves nothing about privacy (docs/audit.md). Numpy/scipy only, no torch.
"""

from __future__ import annotations

from privfl.accounting.empirical.clopper_pearson import (
    clopper_pearson_epsilon,
    clopper_pearson_upper,
    split_threshold_epsilon,
)
from privfl.accounting.empirical.gaussian_fit import GaussianFit, gaussian_fit_epsilon
from privfl.accounting.empirical.one_run import (
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)

__all__ = [
    "GaussianFit",
    "clopper_pearson_epsilon",
    "clopper_pearson_upper",
    "gaussian_fit_epsilon",
    "one_run_epsilon",
    "one_run_guesses",
    "one_run_p_value",
    "split_threshold_epsilon",
]
