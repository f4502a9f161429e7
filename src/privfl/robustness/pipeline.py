"""``privfl certify CONFIG``: a Monte Carlo certification of one configuration, end to end.

1. M independently noised DP models of the configuration WITHOUT attack are trained together
   (:func:`~privfl.robustness.montecarlo.train_replicas`) and evaluated on the clean test split
   and on the attack test set (e.g. triggered images of the other classes, labelled the target);
2. **certified accuracy** vs k (Xie et al. 2023, Theorem 3 / 4 and Section 6.1.5): Eq. 6 per test
   point from calibrated bounds of the expected class probabilities
   (:func:`~privfl.robustness.certified_accuracy.certify_ensemble`), with its confidence;
3. **certified attack inefficacy** (Theorem 6): the attack's cost is its success rate on the
   attack test set, a cost in [0, 1]; from the clean models' costs, the bounds of the expected
   success with k attackers (:func:`~privfl.robustness.inefficacy.certify_attack_inefficacy`);
4. with an attack, M models are trained for each k = 1..K attackers and their measured mean
   success (with a two-sided Hoeffding interval at the same confidence) is set against the
   bounds.

The per-model (epsilon, delta) is the tightest rigorous bound of the algorithm's own privacy plan
(:mod:`~privfl.robustness.replica_privacy`); the certification itself costs M x epsilon.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privfl._validation import check_choice, check_int, check_range

__all__ = ["CertificationRun", "certify_replicas", "recompute_certification",
           "run_certification"]

ATTACKS = ("backdoor", "label-flip", "dba", "scaling")
UNITS = {"client": "user", "record": "instance"}


class CertificationRun:
    """What :func:`run_certification` measured (``to_dict`` is the JSON written)."""

    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}


def _with_attack(config: Any, kind: str | None, attackers: int) -> Any:
    from privfl.config import config_from_dict

    raw = config.model_dump(mode="json")
    raw["attack"] = ({} if kind is None else
                     {**config.attack.model_dump(mode="json", exclude_unset=True),
                      "kind": kind, "attackers": attackers})
    return config_from_dict(raw)


def _check_attackers(config: Any, attackers: Any) -> int:
    """``attackers`` K in [1, the most the configuration's attack level allows]: clients at user
    level, one client's records at instance level (``AttackConfig.max_attackers``)."""
    level = config.attack.level
    limit = config.attack.max_attackers(config.data)
    try:
        return check_int("attackers", attackers, 1, limit)
    except ValueError as error:
        if limit is None:
            raise
        what = (f"k malicious clients of data.clients = {limit}" if level == "user" else
                f"k poisoned records in one client, which has {limit} records")
        raise ValueError(f"{error} (attack.level = {level!r}: {what})") from None


def _check_finite(result: Any, what: str) -> None:
    """ValueError when some models' predicted probabilities are NaN or infinite (diverged)."""
    diverged = sorted({int(r) for probabilities in result.probabilities.values()
                       for r in np.nonzero(~np.isfinite(probabilities).all(axis=(1, 2)))[0]})
    if diverged:
        raise ValueError(
            f"training diverged: {len(diverged)} of the {what} predict NaN or infinite "
            f"probabilities (replicas {diverged[:5]}{' ...' if len(diverged) > 5 else ''}); "
            "lower training.lr and run again")


def _hoeffding(values: np.ndarray, confidence: float) -> tuple[float, float, float]:
    """Mean of values in [0, 1] and its two-sided Hoeffding interval at ``confidence``."""
    from privfl.robustness.calibration import hoeffding_radius

    mean = float(values.mean())
    radius = hoeffding_radius(values.size, (1.0 - confidence) / 2.0)
    return mean, max(0.0, mean - radius), min(1.0, mean + radius)


def run_certification(
    config: Any,
    models: int,
    *,
    attack: str | None = None,
    attackers: int = 0,
    method: str = "hoeffding",
    confidence: float = 0.99,
    progress: Callable[[str, int, int], None] | None = None,
    backend: Any = None,
    replicas: str | Path | None = None,
) -> CertificationRun:
    """Certify ``config`` from ``models`` replicas (see the module docstring).

    ``attack``: one of backdoor, label-flip, dba, scaling (its settings from ``config.attack``,
    e.g. the target label and trigger); ``attackers`` K >= 1 with an attack: M models are also
    trained for every k = 1..K. ``method``: "hoeffding" (calibrated), "clopper-pearson" (hard
    votes) or "estimate" (labelled, not a guarantee). ``confidence`` in (0, 1). ``backend``:
    where the replicas' gathered engine calls run (default: the active backend, see
    :func:`~privfl.robustness.montecarlo.train_replicas`); the result does not depend on it.
    ``replicas``: a directory to save every trained set's predictions in
    (``clean/replicas.npz``, ``attack-k/replicas.npz``), from which
    :func:`recompute_certification` certifies again without training.
    """
    from privfl.fl.algorithms.builders import build_dataset
    from privfl.robustness.attack_config import AttackConfig
    from privfl.robustness.attacks import attack_test_set
    from privfl.robustness.montecarlo import train_replicas

    models = check_int("models", models, 1)
    _check_method(method, confidence)
    if attack is not None:
        attack = check_choice("attack", attack, ATTACKS)
        attackers = _check_attackers(config, attackers)
    elif attackers:
        raise ValueError(f"attackers = {attackers} is not allowed without --attack")
    started = time.perf_counter()
    store = None if replicas is None else Path(replicas)
    clean_config = _with_attack(config, None, 0)
    data = build_dataset(clean_config)
    spec = AttackConfig(**{**config.attack.model_dump(exclude_unset=True),
                           "kind": attack or "backdoor", "attackers": 0})
    attack_set, _ = attack_test_set(data.test, spec)
    sets = {"attack": attack_set}

    def tick(stage: str):
        return None if progress is None else (lambda done, total: progress(stage, done, total))

    def train(cfg: Any, stage: str, name: str) -> Any:
        # batched layout: faster for the small models certification uses (docs/montecarlo.md)
        result = train_replicas(cfg, models, eval_sets=sets, layout="batched",
                                progress=tick(stage), backend=backend,
                                out=None if store is None else store / name)
        _check_finite(result, stage)
        return result

    clean = train(clean_config, "clean models", "clean")
    _check_private(clean)
    successes = {k: train(_with_attack(config, attack, k), f"{k} attacker(s)",
                          f"attack-{k}").accuracy("attack")
                 for k in range(1, attackers + 1)}
    about = {"command": "certify", "name": config.name,
             "algorithm": config.federated.algorithm,
             "attack": {"kind": attack, "attackers": attackers,
                        "target_label": spec.target_label, "attack_set": attack_set.name,
                        "attack_points": len(attack_set)},
             "backend": clean.info["backend"]}
    run = certify_replicas(clean, successes, about, method, confidence)
    run.seconds = time.perf_counter() - started
    if store is not None:
        run.replicas = str(store)
    return run


def recompute_certification(replicas: str | Path, about: dict[str, Any], *,
                            method: str = "hoeffding", confidence: float = 0.99
                            ) -> CertificationRun:
    """The certification of the replicas saved by :func:`run_certification` (``replicas``:
    its directory; ``about``: the ``name``, ``algorithm`` and ``attack`` entries of its
    certify.json), with another ``method`` or ``confidence``, without training. Every
    file's digests are checked (:func:`~privfl.robustness.replica_cache.load_replicas`), and
    the attacked sets must be the clean set's configuration with the attack added."""
    from privfl.robustness.replica_cache import load_replicas

    _check_method(method, confidence)
    started = time.perf_counter()
    store = Path(replicas)
    if not (store / "clean").is_dir():
        raise ValueError(f"replicas = {str(store)!r} holds no clean/ replica set: give the "
                         "replicas/ directory of a privfl certify run (made since it saves them)")
    clean = load_replicas(store / "clean")
    _check_private(clean)
    attackers = int(about.get("attack", {}).get("attackers") or 0)
    successes = {}
    for k in range(1, attackers + 1):
        attacked = load_replicas(store / f"attack-{k}")
        if attacked.models != clean.models or _trained(attacked) != _trained(clean):
            raise ValueError(f"{store / f'attack-{k}'} was not trained with the clean set "
                             f"{store / 'clean'}: another configuration or number of models")
        successes[k] = attacked.accuracy("attack")
    run = certify_replicas(clean, successes, {**about, "command": "certify"}, method,
                           confidence)
    run.seconds = time.perf_counter() - started
    run.replicas = str(store)
    return run


def certify_replicas(clean: Any, successes: dict[int, np.ndarray], about: dict[str, Any],
                     method: str, confidence: float) -> CertificationRun:
    """Certified accuracy and attack-inefficacy bounds from the clean replicas, set against
    the measured success ``successes[k]`` (each model's, in [0, 1]) of the attacked ones."""
    from privfl.robustness.certified_accuracy import (
        EnsembleScores,
        certified_accuracy,
        certify_ensemble,
    )
    from privfl.robustness.inefficacy import certify_attack_inefficacy

    privacy = clean.privacy
    unit = UNITS.get(privacy.unit, privacy.unit)
    if method == "clopper-pearson":
        scores = EnsembleScores.from_predictions(clean.predictions["test"],
                                                 clean.probabilities["test"].shape[2])
    else:
        scores = EnsembleScores.from_probabilities(clean.probabilities["test"])
    certificate = certify_ensemble(scores, privacy.epsilon, privacy.delta, method=method,
                                   confidence=confidence, unit=unit)
    accuracy = certified_accuracy(certificate, clean.labels["test"])
    ks = np.arange(1, max(len(successes), 5) + 1)
    clean_success = clean.accuracy("attack")
    inefficacy = certify_attack_inefficacy(
        clean_success, 1.0, privacy.epsilon, privacy.delta, ks,
        method="estimate" if method == "estimate" else "hoeffding", confidence=confidence,
        unit=unit)
    measured = []
    for k, success in sorted(successes.items()):
        mean, low, high = _hoeffding(success, confidence)
        index = k - 1
        measured.append({
            "k": k, "success": mean, "success_low": low, "success_high": high,
            "bound_lower": float(inefficacy.lower[index]),
            "bound_upper": float(inefficacy.upper[index]),
            "inside": bool(inefficacy.lower[index] <= mean <= inefficacy.upper[index]),
        })
    return CertificationRun(
        command=about["command"],
        name=about["name"],
        algorithm=about["algorithm"],
        models=clean.models,
        unit=unit,
        method=method,
        confidence=confidence,
        privacy=privacy.to_dict(),
        privacy_lines=privacy.lines(),
        clean_accuracy=float(clean.accuracy("test").mean()),
        certified_accuracy=accuracy.to_dict(),
        certificate=certificate.summary(),
        attack=about["attack"],
        clean_attack_success=float(clean_success.mean()),
        inefficacy=inefficacy.to_dict(),
        measured=measured,
        backend=about.get("backend"),
        seconds=0.0,
    )


def _check_method(method: str, confidence: float) -> None:
    check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)
    check_choice("method", method, ("hoeffding", "clopper-pearson", "estimate"))


def _trained(replicas: Any) -> dict[str, Any]:
    """The configuration a replica set was trained with, but its attack and free text."""
    config = dict(replicas.info.get("config", {}))
    for key in ("attack", "run", "name", "description"):
        config.pop(key, None)
    return config


def _check_private(clean: Any) -> None:
    if not clean.privacy.private:
        raise ValueError("privacy.enabled = false: a certificate needs a private training (a "
                         "rigorous (epsilon, delta) bound per model)")
