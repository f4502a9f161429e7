"""`privfl audit run`: train once with canaries inside, compare an empirical lower bound on
epsilon with the run's proven bound (issue 47). Generic over the kind of canary: a
:class:`~privfl.runs.canary_source.CanarySource` (client level:
:class:`~privfl.runs.canary_clients.ClientCanaries`; record level: another module) inserts the
canaries whose secret bit is set, trains, and scores every canary from the released outputs.

The bits: each of the ``m`` canaries is inserted independently with probability 1/2 (the
auditor's generator, seeded by ``seed``). From the scores and the bits:

* ``epsilon_lower``: the one-run lower bound of Steinke, Nasr and Jagielski 2023 at confidence
  1 - beta (guess "in" for the k/2 highest, "out" for the k/2 lowest scores, k over
  :data:`GUESS_FRACTIONS` of m; the confidence is split over the k by Bonferroni);
* ``epsilon_lower_clopper_pearson``: Jagielski et al. 2020's bound, threshold chosen on half the
  canaries (a second lower bound at the same confidence; the verdict reads only the first);
* ``epsilon_estimate``: Andrew et al. 2024's Gaussian fit (an estimate, not a bound);
* ``epsilon_bound``: the run's headline (the tightest proven bound valid for what it releases,
  :func:`~privfl.algorithms.base.budget_results`), same delta.

Verdict: ``consistent`` when epsilon_lower <= epsilon_bound, ``VIOLATED`` otherwise: then, with
probability at least 1 - beta, the code that ran is not (epsilon_bound, delta)-DP for one unit.
The largest lower bound the canaries can give is ``epsilon_lower_max``: the bound of perfectly
separated scores with the realised bits (at most :func:`lower_bound_ceiling`, every guess right).

What the audit writes is a release (:func:`audit_outputs`): it is computed from the canary run's
released outputs and the auditor's own randomness.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from privfl._validation import check_int, check_range
from privfl.accounting.empirical import (
    gaussian_fit_epsilon,
    one_run_epsilon,
    one_run_guesses,
    split_threshold_epsilon,
)
from privfl.algorithms.outputs import Output
from privfl.runs.canary_source import CanaryScores, CanarySource

__all__ = ["AUDIT_FILES", "CONSISTENT", "GUESS_FRACTIONS", "VIOLATED", "audit_config",
           "audit_outputs", "audit_statistics", "guess_counts", "lower_bound_ceiling"]

#: numbers of guesses tried, as fractions of the canaries (Bonferroni over these)
GUESS_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
CONSISTENT, VIOLATED = "consistent", "VIOLATED"
#: the files ``privfl audit run --out DIR`` writes
AUDIT_FILES = ("audit.json", "report.html")


def guess_counts(m: int) -> list[int]:
    """The even numbers of guesses k tried for m canaries: ``GUESS_FRACTIONS`` of m, >= 2."""
    m = check_int("m", m, minimum=2)
    return sorted({max(2, round(f * m)) // 2 * 2 for f in GUESS_FRACTIONS if f * m >= 2})


def lower_bound_ceiling(m: int, delta: float, beta: float = 0.05) -> float:
    """An upper limit on ``epsilon_lower`` for m canaries at ``delta`` and confidence 1 - beta:
    every one of k guesses right, maximised over :func:`guess_counts` (each at
    ``beta / len(counts)``). audit.json's ``epsilon_lower_max`` is what perfectly separated
    scores give with the realised bits (k/2 "in" guesses are all right only while k/2 is at
    most the number inserted), at most this."""
    ks = guess_counts(m)
    return max(one_run_epsilon(m, k, k, delta, beta / len(ks)) for k in ks)


def _one_run(scores: np.ndarray, inserted: np.ndarray, delta: float,
             beta: float) -> tuple[float, int, int]:
    """The best one-run bound over :func:`guess_counts`, each at ``beta / len(counts)``."""
    m = scores.size
    ks = guess_counts(m)
    best, best_k = 0.0, 0
    for k in ks:
        r, v = one_run_guesses(scores, inserted, k // 2, k // 2)
        value = one_run_epsilon(m, r, v, delta, beta=beta / len(ks))
        if value > best:
            best, best_k = value, k
    return best, best_k, len(ks)


def audit_statistics(scores: CanaryScores, delta: float, epsilon_bound: float, *,
                     beta: float = 0.05, seed: int = 0) -> dict[str, Any]:
    """The numbers and the verdict from a source's scores (module docstring), at ``delta``
    against the proven ``epsilon_bound`` (inf when the run has none), confidence 1 - beta;
    ``seed`` picks the Clopper-Pearson bound's held-out half. Generic over sources."""
    beta = check_range("beta", beta, 0.0, 0.5, low_open=True, high_open=True)
    delta = check_range("delta", delta, 0.0, 1.0, low_open=True, high_open=True)
    if epsilon_bound != math.inf:  # inf: the run has no bound (documented above)
        epsilon_bound = check_range("epsilon_bound", epsilon_bound, 0.0)
    values, inserted = scores.scores, scores.inserted
    m = values.size
    lower, guesses, tries = _one_run(values, inserted, delta, beta)
    count_in = int(inserted.sum())
    fit = (gaussian_fit_epsilon(values[inserted], values[~inserted], delta)
           if 2 <= count_in <= m - 2 else None)
    return {
        "delta": delta,
        "confidence": 1.0 - beta,
        "epsilon_lower": lower,
        "epsilon_lower_method": (
            "BOUND from below: one-run audit (Steinke, Nasr and Jagielski 2023, Theorem 5.2 "
            f"with delta), lower bound at confidence {1 - beta:g}, {guesses} guesses (half in, "
            f"half out; Bonferroni over {tries} guess counts)"),
        "epsilon_lower_max": _one_run(inserted.astype(float), inserted, delta, beta)[0],
        "epsilon_lower_clopper_pearson": split_threshold_epsilon(
            values, inserted, delta, beta, seed=seed),
        "epsilon_estimate": None if fit is None else fit.epsilon,
        "epsilon_estimate_method": (
            "ESTIMATE, not a bound: Gaussian fit of the canary scores (Andrew et al. 2024), "
            "mu-GDP at delta" + ("" if fit is None else f", mu = {fit.mu:.6g}")),
        "epsilon_bound": epsilon_bound,
        "canaries": m,
        "canaries_inserted": count_in,
        "canaries_not_inserted": m - count_in,
        "verdict": CONSISTENT if lower <= epsilon_bound else VIOLATED,
        "scores": [float(v) for v in values],
        "inserted": [bool(b) for b in inserted],
    }


def audit_outputs(secure: bool) -> list[Output]:
    """What ``privfl audit run`` writes, classified as the run outputs are
    (:mod:`privfl.algorithms.outputs`). audit.json and its report.html are computed from the
    canary run's released outputs and the auditor's randomness (canaries, bits: independent of
    the clients' data), so the canary run's own guarantee (the printed bound: a canary is one
    more unit, not a change of any real one's sensitivity) covers them; but the canary run is
    a second run on the same data, so publishing them beside the user's run of that data
    releases both: compose the two (and in seeded mode the config's seed regenerates the
    noise, as for any seeded run)."""
    if secure:
        covered, reason = True, (
            "post-processing of the canary run's released outputs and of the auditor's "
            "canaries and bits: covered by the canary run's guarantee (epsilon_bound); a "
            "second release of the same data beside the user's own run (compose both)")
    else:
        covered, reason = False, (
            "seeded run: the config's seed regenerates the canary run's noise, so the "
            "guarantee holds only while it is secret (set privacy.secure: true); otherwise "
            "post-processing of the canary run's released outputs, a second release of the "
            "same data beside the user's own run (compose both)")
    return [Output(name, "file", covered, reason) for name in AUDIT_FILES]


def audit_config(config: Any, sources: Mapping[str, Callable[[], CanarySource]], *,
                 canaries: int = 1000, seed: int = 0, beta: float = 0.05) -> dict[str, Any]:
    """Audit a configuration (module docstring) with the canaries of ``sources[unit]``, unit
    the first word of the guarantee's unit (``"client"``, ``"record"``); return audit.json's
    content. The run's device is ``config.run.device`` (checked against this machine)."""
    from privfl.algorithms.base import budget_results, tightest_bound
    from privfl.algorithms.builders import build_algorithm, build_dataset
    from privfl.runs.experiment import check_device

    canaries = check_int("canaries", canaries, minimum=4)
    seed = check_int("seed", seed)
    beta = check_range("beta", beta, 0.0, 0.5, low_open=True, high_open=True)
    check_device(config.run.device)
    data = build_dataset(config)
    algorithm = build_algorithm(config, data)
    plan = algorithm.plan
    if not plan.private or plan.delta is None:
        raise ValueError("privacy.noise_multiplier = 0 (or accounting off): a non-private run "
                         "has no bound to audit")
    unit = str(plan.unit).split()[0]
    if unit not in sources:
        raise ValueError(f"federated.algorithm = {algorithm.name!r} has a {unit}-level "
                         "guarantee: no canary source audits it yet (audited units: "
                         f"{', '.join(sorted(sources))})")
    source = sources[unit]()
    if not isinstance(source, CanarySource) or source.unit != unit:
        raise ValueError(f"sources[{unit!r}] gave {source!r}: must be a CanarySource of unit "
                         f"{unit!r}")
    rounds = int(config.federated.rounds)
    rng = np.random.default_rng([seed, 47])
    inserted = rng.random(canaries) < 0.5
    result = source.run(algorithm, inserted, rng, rounds)
    bound = tightest_bound(budget_results(plan, algorithm.privacy(rounds)))
    epsilon, delta = math.inf if bound is None else float(bound.epsilon), float(plan.delta)
    method = None if bound is None else bound.method
    proven = getattr(source, "proven_bound", None)  # a source whose canaries realise another
    if proven is not None:                          # relation than the headline's
        epsilon, delta, method = proven(plan, rounds)
    stats = audit_statistics(result, delta, epsilon, beta=beta, seed=seed)
    return {
        "algorithm": algorithm.name,
        "rounds": result.rounds,
        "device": str(config.run.device),
        "seed": seed,
        **{key: value for key, value in stats.items() if key not in ("scores", "inserted")},
        "epsilon_bound_method": method,
        "unit": str(source.unit),
        **{key: str(value) for key, value in result.description.items()},
        "outputs": [o.to_dict() for o in audit_outputs(bool(plan.secure))],
        "scores": stats["scores"],
        "inserted": stats["inserted"],
    }
