"""Certified prediction from M independently trained DP models, and certified accuracy.

Xie et al. 2023 (Sections 6.1.5 and 6.3.3) estimate ``F_c(D, x) = E[f_c(M(D), x)]`` by the mean
of M models' scores, take A = argmax and B = the runner-up of the mean (ties to the lowest class
index), and evaluate Eq. 6 (:func:`privfl.robustness.certify.certified_k`). Here every
certificate comes in one of three forms:

* ``"hoeffding"``: Eq. 6 at a Hoeffding lower bound of F_A and upper bound of F_B (any scores in
  the simplex, soft or hard);
* ``"clopper-pearson"``: the same with exact binomial bounds (hard votes only);
* ``"estimate"``: Eq. 6 at the sample means, as in the paper's main figures. Not a guarantee.

The upper bound of F_B is ``min(1 - lower(F_A), max_{c != A} upper(F_c))`` (scores sum to 1).
Confidence levels and their adjustment for choosing A and B on the same samples:
:mod:`privfl.robustness.calibration`.

Certified accuracy at k (Xie et al. 2023, Section 6.1.5): the fraction of test points whose
ensemble prediction is correct and whose K >= k. With a calibrated method each point's
certificate holds with probability >= the guaranteed confidence over the training randomness,
per point (not simultaneously over points), so the expected fraction of points counted wrongly
is at most one minus it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfl._validation import check_choice, check_int, check_range_array
from privfl.robustness.calibration import (
    ADJUSTMENTS,
    check_confidence,
    check_counts,
    clopper_pearson_lower,
    clopper_pearson_upper,
    guaranteed_confidence,
    hoeffding_radius,
    side_level,
)
from privfl.robustness.certify import (
    UNITS,
    CertificationPrivacy,
    adversary_text,
    certification_privacy,
    certified_k_from_bounds,
    k_max,
    steps_per_adversary,
    theorem,
)

__all__ = [
    "METHODS",
    "CertifiedAccuracy",
    "EnsembleCertificate",
    "EnsembleScores",
    "certified_accuracy",
    "certify_ensemble",
]

#: How F_A and F_B are obtained from the M models (see the module docstring).
METHODS = ("hoeffding", "clopper-pearson", "estimate")
#: Tolerance on a score row's sum (float32 softmax outputs sum to 1 within ~1e-6).
SUM_TOLERANCE = 1e-3


def _scores_array(name: str, value: object, ndim: int) -> np.ndarray:
    array, _ = check_range_array(name, value, 0.0, 1.0)
    if array.ndim != ndim or array.shape[-1] < 2 or array.size == 0:
        raise ValueError(
            f"{name} has shape {array.shape}: must have {ndim} dimensions and >= 2 classes "
            "in the last"
        )
    sums = array.sum(axis=-1)
    bad = np.abs(sums - 1.0) > SUM_TOLERANCE
    if np.any(bad):
        raise ValueError(
            f"{name} has a score row summing to {float(sums[bad].flat[0]):.6g}: each row must sum "
            "to 1 (softmax probabilities or one-hot votes)"
        )
    return array


@dataclass(frozen=True)
class EnsembleScores:
    """What M models say on n test points: the mean scores ``mean`` (n, C) and, for hard votes,
    the vote counts ``votes`` (n, C), each row summing to M."""

    mean: np.ndarray
    models: int
    votes: np.ndarray | None = None

    @property
    def hard(self) -> bool:
        return self.votes is not None

    @property
    def classes(self) -> int:
        return int(self.mean.shape[1])

    @classmethod
    def from_probabilities(cls, probabilities: object) -> EnsembleScores:
        """Soft scores: ``probabilities`` (M, n, C), each row in the simplex (softmax)."""
        array = _scores_array("probabilities", probabilities, 3)
        return cls(array.mean(axis=0), int(array.shape[0]))

    @classmethod
    def from_mean(cls, mean: object, models: int) -> EnsembleScores:
        """Soft scores already averaged over ``models`` models: ``mean`` (n, C)."""
        return cls(_scores_array("mean", mean, 2), check_int("models", models, 1))

    @classmethod
    def from_predictions(cls, predictions: object, classes: int) -> EnsembleScores:
        """Hard votes: ``predictions`` (M, n), each model's predicted class in [0, classes)."""
        classes = check_int("classes", classes, 2)
        labels = _labels("predictions", predictions, classes, ndim=2)
        models, points = labels.shape
        votes = np.zeros((points, classes), dtype=np.int64)
        np.add.at(votes, (np.broadcast_to(np.arange(points), labels.shape), labels), 1)
        return cls(votes / models, models, votes)

    @classmethod
    def from_votes(cls, votes: object, models: int) -> EnsembleScores:
        """Hard votes as counts: ``votes`` (n, C), each row summing to ``models``."""
        counts, models = check_counts(votes, models, ("votes", "models"))
        if counts.ndim != 2 or counts.shape[1] < 2 or counts.size == 0:
            raise ValueError(f"votes has shape {counts.shape}: must be (points, classes >= 2)")
        sums = counts.sum(axis=1)
        if np.any(sums != models):
            bad = sums[sums != models][0]
            raise ValueError(f"votes has a row summing to {bad:g}: must sum to models = {models}")
        return cls(counts / models, models, counts.astype(np.int64))


def _labels(name: str, value: object, classes: int, ndim: int) -> np.ndarray:
    array = np.asarray(value)
    if array.ndim != ndim or array.size == 0:
        raise ValueError(f"{name} has shape {array.shape}: must have {ndim} dimension(s)")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} has dtype {array.dtype}: must hold integer class indices")
    bad = (array < 0) | (array >= classes)
    if np.any(bad):
        raise ValueError(
            f"{name} = {int(array[bad].flat[0])} is out of range: must be a class in "
            f"[0, {classes - 1}]"
        )
    return array.astype(np.int64)


@dataclass(frozen=True)
class EnsembleCertificate:
    """Eq. 6 for each of n test points from M models (arrays of length n) and what it is."""

    predictions: np.ndarray
    runner_up: np.ndarray
    classes: int
    top_estimate: np.ndarray
    runner_up_estimate: np.ndarray
    top_bound: np.ndarray
    runner_up_bound: np.ndarray
    certified_k: np.ndarray
    k_max: float
    method: str
    kind: str
    confidence: float | None
    guaranteed_confidence: float | None
    adjustment: str | None
    privacy: CertificationPrivacy
    theorem: str
    note: str = field(default="")
    adversary: str = "add-remove"
    steps_per_adversary: int = 1

    def certified(self, k: float) -> np.ndarray:
        """Which points are certified for k adversaries (K >= k, Xie et al. 2023's convention)."""
        return self.certified_k >= k

    def summary(self) -> dict[str, Any]:
        """Everything but the per-point arrays."""
        return {
            "method": self.method,
            "kind": self.kind,
            "confidence": self.confidence,
            "guaranteed_confidence": self.guaranteed_confidence,
            "adjustment": self.adjustment,
            "points": int(self.predictions.size),
            "classes": self.classes,
            "k_max": self.k_max,
            "adversary": self.adversary,
            "steps_per_adversary": self.steps_per_adversary,
            "adversary_note": adversary_text(self.adversary, self.privacy.neighbouring,
                                             self.privacy.unit),
            "privacy": self.privacy.to_dict(),
            "theorem": self.theorem,
            "note": self.note,
        }


def _bounds(
    scores: EnsembleScores, method: str, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of every class's expected score, each side at ``level``."""
    if method == "hoeffding":
        r = hoeffding_radius(scores.models, level)
        return np.clip(scores.mean - r, 0.0, 1.0), np.clip(scores.mean + r, 0.0, 1.0)
    return (
        clopper_pearson_lower(scores.votes, scores.models, level),
        clopper_pearson_upper(scores.votes, scores.models, level),
    )


def _note(method: str, adjustment: str | None, guaranteed: float | None) -> str:
    if method == "estimate":
        return (
            "estimate: Eq. 6 at the Monte Carlo means (as in Xie et al. 2023's main figures), "
            "not a guarantee; use a calibrated method for a certificate"
        )
    how = (
        "bounds simultaneous over classes, so A and B may be chosen on the same samples"
        if adjustment == "simultaneous"
        else "Xie et al. 2023's per-bound levels without adjustment for choosing A and B on "
        "the same samples; proven at the guaranteed confidence"
    )
    return (
        f"each point's certificate holds with probability >= {guaranteed:g} over the training "
        f"of the M models ({how}); per point, not simultaneously over points"
    )


def certify_ensemble(
    scores: EnsembleScores,
    epsilon: float,
    delta: float,
    *,
    method: str = "hoeffding",
    confidence: float = 0.99,
    adjustment: str = "simultaneous",
    unit: str = "user",
    adversary: str = "add-remove",
    neighbouring: str = "add-remove",
) -> EnsembleCertificate:
    """Certified number of adversaries K (Eq. 6) of each test point from M models' scores.

    ``epsilon``, ``delta``: the DP guarantee of the whole training of ONE model at ``unit``
    ("user": Xie et al. 2023, Theorem 3; "instance": Theorem 4) for ``neighbouring``
    neighbours; ``adversary``: what one adversary does (``add-remove``, Xie et al. 2023's
    reading, or ``replace``); K counts adversaries, Eq. 6's steps divided by
    :func:`~privfl.robustness.certify.steps_per_adversary`. ``method``: "hoeffding",
    "clopper-pearson" (``scores`` must be hard votes) or "estimate" (uncalibrated, labelled an
    estimate). ``confidence`` in (0, 1) and ``adjustment`` ("simultaneous" or Xie et al. 2023's
    "none"): see :mod:`privfl.robustness.calibration`. K can be negative under calibration: the
    bounds do not even separate A from B, so the point is not certified at any k >= 0.
    """
    if not isinstance(scores, EnsembleScores):
        raise ValueError(
            f"scores = {type(scores).__name__} is not allowed: must be an EnsembleScores"
        )
    method = check_choice("method", method, METHODS)
    unit = check_choice("unit", unit, UNITS)
    confidence = check_confidence(confidence)
    adjustment = check_choice("adjustment", adjustment, ADJUSTMENTS)
    privacy = certification_privacy(epsilon, delta, scores.models, unit, neighbouring)
    steps = steps_per_adversary(adversary, privacy.neighbouring)
    if method == "clopper-pearson" and not scores.hard:
        raise ValueError(
            "method = 'clopper-pearson' is not allowed for soft scores: it needs hard votes "
            "(EnsembleScores.from_predictions or from_votes); use 'hoeffding'"
        )
    points = np.arange(scores.mean.shape[0])
    top = np.argmax(scores.mean, axis=1)  # ties: lowest index
    others = scores.mean.copy()
    others[points, top] = -np.inf
    runner = np.argmax(others, axis=1)
    top_est, run_est = scores.mean[points, top], scores.mean[points, runner]
    if method == "estimate":
        lower, upper = top_est, run_est
        shown_conf = guaranteed = shown_adj = None
    else:
        level = side_level(confidence, scores.classes, adjustment)
        low_all, up_all = _bounds(scores, method, level)
        lower = low_all[points, top]
        up_all[points, top] = -np.inf
        upper = np.minimum(1.0 - lower, up_all.max(axis=1))
        shown_conf, shown_adj = confidence, adjustment
        guaranteed = guaranteed_confidence(confidence, scores.classes, adjustment)
    k = certified_k_from_bounds(lower, upper, privacy.epsilon, privacy.delta) / steps
    return EnsembleCertificate(
        predictions=top,
        runner_up=runner,
        classes=scores.classes,
        top_estimate=top_est,
        runner_up_estimate=run_est,
        top_bound=lower,
        runner_up_bound=upper,
        certified_k=k,
        k_max=k_max(privacy.epsilon, privacy.delta) / steps,
        method=method,
        kind="estimate" if method == "estimate" else "bound",
        confidence=shown_conf,
        guaranteed_confidence=guaranteed,
        adjustment=shown_adj,
        privacy=privacy,
        theorem=theorem(unit),
        note=_note(method, shown_adj, guaranteed),
        adversary=adversary,
        steps_per_adversary=steps,
    )


@dataclass(frozen=True)
class CertifiedAccuracy:
    """Certified accuracy as a function of k over n test points, and what it is.
    ``ensemble_accuracy``: the accuracy of the ensemble prediction (the class of largest mean
    score), not the mean accuracy of the single models."""

    k: np.ndarray
    accuracy: np.ndarray
    standard_error: np.ndarray
    ensemble_accuracy: float
    largest_certified_k: float | None
    points: int
    plain_at_zero: bool
    certificate: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "k": self.k.tolist(),
            "certified_accuracy": self.accuracy.tolist(),
            "standard_error": self.standard_error.tolist(),
            "ensemble_accuracy": self.ensemble_accuracy,
            "largest_certified_k": self.largest_certified_k,
            "points": self.points,
            "plain_at_zero": self.plain_at_zero,
            "standard_error_note": (
                "binomial standard error sqrt(a (1 - a) / n) of the test-set average as an "
                "estimate of the population value (test sampling only)"
            ),
            **self.certificate,
        }


def certified_accuracy(
    certificate: EnsembleCertificate,
    labels: object,
    k: object | None = None,
    *,
    plain_at_zero: bool = False,
) -> CertifiedAccuracy:
    """``CertAcc(k) = (1/n) sum_i 1{c_i = y_i and K_i >= k}`` (Xie et al. 2023, Section 6.1.5).

    ``labels``: the n true classes. ``k``: values >= 0 (default the integers 0..floor of the
    largest K of a correctly predicted point). ``plain_at_zero``: count k = 0 as the ensemble's
    plain accuracy (a calibrated K can be negative: the literal formula leaves such points out
    even at k = 0, the default).
    """
    if not isinstance(certificate, EnsembleCertificate):
        raise ValueError(
            f"certificate = {type(certificate).__name__} is not allowed: must be an "
            "EnsembleCertificate (from certify_ensemble)"
        )
    y = _labels("labels", labels, certificate.classes, ndim=1)
    if y.shape != certificate.predictions.shape:
        raise ValueError(
            f"labels has shape {y.shape}: must match the {certificate.predictions.size} "
            "certified points"
        )
    correct = certificate.predictions == y
    kk = certificate.certified_k
    finite = kk[correct & np.isfinite(kk) & (kk >= 0)]
    largest = None if not np.any(correct & (kk >= 0)) else float(kk[correct & (kk >= 0)].max())
    if k is None:
        top = float(finite.max()) if finite.size else 0.0
        grid = np.arange(0.0, math.floor(top) + 1.0)
    else:
        grid, _ = check_range_array("k", k, 0.0, math.inf, high_open=True)
        grid = np.atleast_1d(grid)
    hits = correct[None, :] & (kk[None, :] >= grid[:, None])
    if plain_at_zero:
        hits[grid == 0.0] = correct
    accuracy = hits.mean(axis=1)
    n = y.size
    return CertifiedAccuracy(
        k=grid,
        accuracy=accuracy,
        standard_error=np.sqrt(accuracy * (1.0 - accuracy) / n),
        ensemble_accuracy=float(correct.mean()),
        largest_certified_k=largest,
        points=n,
        plain_at_zero=plain_at_zero,
        certificate=certificate.summary(),
    )
