"""`privfl audit run` for record-level algorithms: train once with canary records planted
(:mod:`privfl.runs.record_canaries`), then the one-run lower bound of Steinke, Nasr and
Jagielski 2023 beside the proven replace-one bound (issue 47).

The statistics and the verdict are those of the client-level audit
(:mod:`privfl.runs.canary_audit`): ``epsilon_lower`` is the best one-run bound over the guess
grid at confidence ``1 - beta`` (Bonferroni), ``epsilon_lower_clopper_pearson`` a second lower
bound, ``epsilon_estimate`` Andrew et al. 2024's Gaussian fit (an estimate, never the verdict);
``consistent`` when ``epsilon_lower <= epsilon_bound``, else ``VIOLATED``.

What it writes (audit.json) is a function of the released model of the audited run and of the
auditor's randomness (slots, wrong labels, bits): post-processing, covered by the run's
guarantee for the real records. The canary run's models are not written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privfl._validation import check_int, check_range
from privfl.accounting.empirical import gaussian_fit_epsilon, split_threshold_epsilon
from privfl.runs.canary_audit import CONSISTENT, VIOLATED, _one_run
from privfl.runs.record_canaries import (
    RECORD_LEVEL,
    canary_scores,
    plant_record_canaries,
    replace_one_bound,
    train_released,
)

__all__ = ["audit_records"]

#: spawn key of the auditor's stream (slots, labels, bits), apart from the run's streams
CANARY_STREAM = 4747


def _check_auditable(algorithm: Any) -> None:
    name = getattr(algorithm, "name", "?")
    if name not in RECORD_LEVEL:
        raise ValueError(f"federated.algorithm = {name!r} has no record-level audit: must be "
                         f"one of {', '.join(RECORD_LEVEL)}")
    if not algorithm.plan.private:
        raise ValueError("privacy.noise_multiplier = 0: a non-private run has no bound to audit")
    if getattr(algorithm, "protection", None) is not None:
        raise ValueError("client-side protection cannot be audited yet")


def audit_records(config: Any, *, canaries: int = 500, seed: int = 0, beta: float = 0.05,
                  design: str = "mislabelled") -> dict[str, Any]:
    """Audit a record-level configuration (module docstring); return audit.json's content."""
    from privfl.algorithms.builders import build_algorithm, build_dataset, build_model

    canaries = check_int("canaries", canaries, minimum=4)
    seed = check_int("seed", seed)
    beta = check_range("beta", beta, 0.0, 0.5, low_open=True, high_open=True)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(CANARY_STREAM,)))
    clean = build_dataset(config)
    data, planted = plant_record_canaries(clean, canaries, rng, design)
    algorithm = build_algorithm(config, data)
    _check_auditable(algorithm)
    rounds = int(config.federated.rounds)
    model = build_model(config, data)
    before = algorithm.global_params()
    train_released(algorithm, rounds)
    scores = canary_scores(model, before, algorithm.global_params(), planted,
                           getattr(algorithm, "input_bound", None))
    inserted = planted.inserted
    bound = replace_one_bound(algorithm.plan, rounds)
    delta = bound["delta"]
    lower, guesses, tries = _one_run(scores, inserted, delta, beta)
    fit = (gaussian_fit_epsilon(scores[inserted], scores[~inserted], delta)
           if 2 <= inserted.sum() <= canaries - 2 else None)
    return {
        "algorithm": algorithm.name,
        "rounds": rounds,
        "delta": delta,
        "confidence": 1.0 - beta,
        "epsilon_lower": lower,
        "epsilon_lower_method": (
            "one-run audit (Steinke, Nasr and Jagielski 2023, Theorem 5.2 with delta): "
            f"lower bound at confidence {1 - beta:g}, {guesses} guesses (half in, half out; "
            f"Bonferroni over {tries} guess counts)"),
        "epsilon_lower_clopper_pearson": split_threshold_epsilon(
            scores, inserted, delta, beta, seed=seed),
        "epsilon_estimate": None if fit is None else fit.epsilon,
        "epsilon_estimate_method": (
            "ESTIMATE, not a bound: Gaussian fit of the canary scores (Andrew et al. 2024), "
            "mu-GDP at delta" + ("" if fit is None else f", mu = {fit.mu:.6g}")),
        "epsilon_bound": bound["epsilon"],
        "epsilon_bound_method": bound["method"],
        "epsilon_headline": bound["headline_epsilon"],
        "epsilon_headline_neighbouring": bound["headline_neighbouring"],
        "unit": "record", "neighbouring": "replace-one record (canary slot: canary or the "
                                          "original record)",
        "sampling": "the algorithm's own batch and client sampling",
        "canaries": canaries,
        "canaries_inserted": int(inserted.sum()),
        "canary_update": (f"{design} record: " + (
            "a held record's input with a random wrong label" if design == "mislabelled" else
            "random signs on the features constant over the data, a random label")),
        "score": "loss of the canary on the initial model minus on the final released model",
        "verdict": CONSISTENT if lower <= bound["epsilon"] else VIOLATED,
        "release": ("covered: post-processing of the audited run's final released model and of "
                    "the auditor's slots, labels and bits (independent of the data)"),
    }
