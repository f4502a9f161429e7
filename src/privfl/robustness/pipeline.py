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
   bounds; so is their mean target-label cross-entropy (clipped per sample to C_bar), against
   Theorem 6 for that cost (the cost of Xie et al. 2023's Figures 4-7).

The per-model (epsilon, delta) is the tightest rigorous bound of the algorithm's own privacy plan
(:mod:`~privfl.robustness.replica_privacy`); the certification itself costs M x epsilon.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privfl._validation import check_choice, check_int, check_positive, check_range
from privfl.robustness.certify import ADVERSARIES

__all__ = ["CertificationRun", "certify_replicas", "check_private", "run_certification"]

ATTACKS = ("backdoor", "label-flip", "dba", "scaling")
UNITS = {"client": "user", "record": "instance"}
#: Default C_bar of the cross-entropy cost: per-sample losses above 5 nats (p < 0.0067) clipped.
CROSS_ENTROPY_BOUND = 5.0


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


def _check_attackers(config: Any, attackers: Any, data: Any = None) -> int:
    """``attackers`` K in [1, the most the configuration's attack level allows]: clients at user
    level, one client's records at instance level (``AttackConfig.max_attackers``); with
    ``data``, one client's poisonable records (a label flip poisons source-class records only,
    :func:`~privfl.attacks.poisoning.poisonable_records`)."""
    from privfl.attacks.config import AttackConfig
    from privfl.attacks.poisoning import poisonable_records

    level = config.attack.level
    limit = config.attack.max_attackers(config.data)
    what = None if limit is None else (
        f"k malicious clients of data.clients = {limit}" if level == "user" else
        f"k poisoned records in one client, which has {limit} records")
    if data is not None and level == "instance":
        spec = AttackConfig(**{**config.attack.model_dump(exclude_unset=True), "attackers": 0})
        limit = poisonable_records(data, spec)
        what = (f"k poisoned records in one client, which has at most {limit} records the "
                f"{spec.kind} attack can poison"
                + (" (source-class records)" if spec.kind == "label-flip" else ""))
    try:
        return check_int("attackers", attackers, 1, limit)
    except ValueError as error:
        if limit is None:
            raise
        raise ValueError(f"{error} (attack.level = {level!r}: {what})") from None


def check_private(privacy: Any, config: Any) -> None:
    """ValueError (one line, saying why) when the models of ``config`` have no rigorous
    per-model (epsilon, delta) bound (:class:`~privfl.robustness.replica_privacy.ReplicaPrivacy`
    ``privacy``), so no certificate can be made."""
    if privacy.private:
        return
    if not config.privacy.enabled:
        raise ValueError("privacy.enabled = false: a certificate needs a private training (a "
                         "rigorous (epsilon, delta) bound per model)")
    clipping = getattr(config.federated, "clipping", None)
    if clipping in ("flat-median", "per-layer-median"):
        raise ValueError(f"federated.clipping = {clipping!r} is not allowed for a certificate: "
                         "its threshold is the cohort's median update norm, which no accountant "
                         "charges, so one model has no rigorous (epsilon, delta) bound; use "
                         "'flat' or 'per-layer'")
    raise ValueError(f"privacy.accountants = {list(config.privacy.accountants)}: none gives a "
                     "rigorous (epsilon, delta) bound of one model (estimates only), which a "
                     "certificate needs; add rdp or pld")


def _check_finite(result: Any, what: str) -> None:
    """ValueError when some models' predicted probabilities are NaN or infinite (diverged)."""
    diverged = sorted({int(r) for probabilities in result.probabilities.values()
                       for r in np.nonzero(~np.isfinite(probabilities).all(axis=(1, 2)))[0]})
    if diverged:
        raise ValueError(
            f"training diverged: {len(diverged)} of the {what} predict NaN or infinite "
            f"probabilities (replicas {diverged[:5]}{' ...' if len(diverged) > 5 else ''}); "
            "lower training.lr and run again")


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
    adversary: str = "replace",
    cross_entropy_bound: float = CROSS_ENTROPY_BOUND,
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
    :func:`~privfl.robustness.recompute.recompute_certification` certifies again without
    training. ``adversary``: what k counts (``replace``, privfl's attacks, or ``add-remove``,
    Xie et al. 2023's reading; :mod:`~privfl.robustness.adversary`). Every error that the
    configuration, the data or the privacy plan reveal is raised before any training.
    """
    from privfl.algorithms.builders import build_dataset, privacy_plan
    from privfl.attacks.config import AttackConfig
    from privfl.attacks.poisoning import attack_test_set
    from privfl.robustness.adversary import readings
    from privfl.robustness.montecarlo import train_replicas
    from privfl.robustness.replica_privacy import replica_privacy

    models = check_int("models", models, 1)
    check_method(method, confidence)
    adversary = check_choice("adversary", adversary, ADVERSARIES)
    check_positive("cross_entropy_bound", cross_entropy_bound)
    if attack is not None:
        attack = check_choice("attack", attack, ATTACKS)
        config = _with_attack(config, attack, 0)  # the attack's own settings checked below
        attackers = _check_attackers(config, attackers)
    elif attackers:
        raise ValueError(f"attackers = {attackers} is not allowed without --attack")
    started = time.perf_counter()
    store = None if replicas is None else Path(replicas)
    clean_config = _with_attack(config, None, 0)
    data = build_dataset(clean_config)
    if attack is not None:
        _check_attackers(config, attackers, data)
    plan = privacy_plan(clean_config, data)
    privacy = replica_privacy(plan, clean_config.federated.rounds, models)
    check_private(privacy, clean_config)
    readings(privacy, adversary)  # refuses an adversary the guarantee does not cover
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
    attacked = {k: train(_with_attack(config, attack, k), f"{k} attacker(s)", f"attack-{k}")
                for k in range(1, attackers + 1)}
    about = {"command": "certify", "name": config.name,
             "algorithm": config.federated.algorithm,
             "attack": {"kind": attack, "attackers": attackers,
                        "target_label": spec.target_label, "attack_set": attack_set.name,
                        "attack_points": len(attack_set)},
             "backend": clean.info["backend"]}
    run = certify_replicas(clean, attacked, about, method, confidence, adversary,
                           cross_entropy_bound)
    run.seconds = time.perf_counter() - started
    if store is not None:
        run.replicas = str(store)
    return run


def certify_replicas(clean: Any, attacked: dict[int, Any], about: dict[str, Any],
                     method: str, confidence: float, adversary: str = "replace",
                     cross_entropy_bound: float = CROSS_ENTROPY_BOUND) -> CertificationRun:
    """Certified accuracy and Theorem 6 bounds from the clean replicas (a
    :class:`~privfl.robustness.replica_cache.ReplicaResult`), set against the attacked ones
    (``attacked[k]``: the replicas trained with k attackers). Theorem 6 is applied to two costs:
    the attack success rate (C_bar = 1) and, as in Xie et al. 2023's Figures 4-7, the target
    label's cross-entropy on the attack set, each sample's clipped to ``cross_entropy_bound``
    (so that |C| <= C_bar holds for every model). ``adversary``: ``replace`` (privfl's attacks;
    the tighter sound reading, :mod:`~privfl.robustness.adversary`) or ``add-remove`` (Xie et
    al. 2023's reading)."""
    from privfl.robustness.adversary import readings
    from privfl.robustness.certified_accuracy import EnsembleScores, certify_ensemble

    cross_entropy_bound = check_positive("cross_entropy_bound", cross_entropy_bound)
    privacy = clean.privacy
    unit = UNITS.get(privacy.unit, privacy.unit)
    if method == "clopper-pearson":
        scores = EnsembleScores.from_predictions(clean.predictions["test"],
                                                 clean.probabilities["test"].shape[2])
    else:
        scores = EnsembleScores.from_probabilities(clean.probabilities["test"])
    sound = readings(privacy, adversary)
    certificates = [certify_ensemble(
        scores, r.epsilon, r.delta, method=method, confidence=confidence, unit=unit,
        adversary=r.adversary, neighbouring=r.neighbouring) for r in sound]
    accuracy, areas = _tightest_accuracy(certificates, clean.labels["test"])
    ks = np.arange(1, max(len(attacked), 5) + 1)
    theorem6 = {}
    for cost, bound in (("success", 1.0), ("cross_entropy", cross_entropy_bound)):
        costs = {k: attack_costs(result, cross_entropy_bound)[cost]
                 for k, result in sorted(attacked.items())}
        clean_costs = attack_costs(clean, cross_entropy_bound)[cost]
        theorem6[cost] = _tightest_inefficacy(clean_costs, bound, sound, ks, method,
                                              confidence, unit)
        theorem6[cost] += (_measured(costs, theorem6[cost][0], bound, confidence, cost),)
    inefficacy, widths, measured = theorem6["success"]
    cross, _, cross_measured = theorem6["cross_entropy"]
    clean_ce = attack_costs(clean, cross_entropy_bound)
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
        certificate=accuracy.certificate,
        adversary={"adversary": adversary, "readings": [
            {**r.to_dict(), "certified_accuracy_sum": area, "inefficacy_width": width}
            for r, area, width in zip(sound, areas, widths, strict=True)],
            "certificate_neighbouring": accuracy.certificate["privacy"]["neighbouring"],
            "inefficacy_neighbouring": inefficacy.privacy.neighbouring,
            "note": _ADVERSARY_NOTE[adversary]},
        attack=about["attack"],
        clean_attack_success=float(clean.accuracy("attack").mean()),
        inefficacy=inefficacy.to_dict(),
        measured=measured,
        inefficacy_cross_entropy={
            **cross.to_dict(),
            "cost": f"mean over the attack set of the target label's cross-entropy -ln p, each "
                    f"sample's clipped to [0, {cross_entropy_bound:g}] (C_bar; the attacker "
                    "wants it small, so the lower bound is the certificate)",
            "clean_clipped_fraction": clean_ce["clipped_fraction"],
            "clean_unclipped_mean": clean_ce["unclipped_mean"]},
        measured_cross_entropy=cross_measured,
        backend=about.get("backend"),
        seconds=0.0,
    )


def attack_costs(result: Any, cross_entropy_bound: float) -> dict[str, Any]:
    """Each model's costs on the attack set of ``result`` (a ReplicaResult): ``success`` (its
    attack success rate) and ``cross_entropy`` (mean over the set of min(-ln p_target, C_bar)),
    with the fraction of clipped losses and the unclipped mean."""
    probabilities = result.probabilities["attack"].astype(np.float64)
    target = result.labels["attack"]
    p = probabilities[:, np.arange(target.size), target]
    with np.errstate(divide="ignore"):
        loss = -np.log(p)
    return {"success": result.accuracy("attack"),
            "cross_entropy": np.minimum(loss, cross_entropy_bound).mean(axis=1),
            "clipped_fraction": float(np.mean(loss > cross_entropy_bound)),
            "unclipped_mean": float(np.mean(loss))}


def _tightest_accuracy(certificates: list[Any], labels: np.ndarray) -> tuple[Any, list[float]]:
    """The certified accuracy of the certificate with the largest sum over k >= 1 (ties: the
    first), and every certificate's sum."""
    from privfl.robustness.certified_accuracy import certified_accuracy

    areas = [_area(c, labels) for c in certificates]
    chosen = certificates[int(np.argmax(areas))]
    accuracy = certified_accuracy(chosen, labels)
    if accuracy.k.size < 2:  # always show k = 1, the first adversary
        accuracy = certified_accuracy(chosen, labels, k=[0.0, 1.0])
    return accuracy, areas


def _tightest_inefficacy(costs: np.ndarray, bound: float, sound: list[Any], ks: np.ndarray,
                         method: str, confidence: float, unit: str) -> tuple[Any, list[float]]:
    """Theorem 6 from the clean models' ``costs`` in [0, ``bound``] under every sound reading;
    the one with the narrowest bounds summed over k (ties: the first), and every width."""
    from privfl.robustness.inefficacy import certify_attack_inefficacy

    bounds = [certify_attack_inefficacy(
        costs, bound, r.epsilon, r.delta, ks,
        method="estimate" if method == "estimate" else "hoeffding", confidence=confidence,
        unit=unit, adversary=r.adversary, neighbouring=r.neighbouring) for r in sound]
    widths = [float(np.sum(b.upper - b.lower)) for b in bounds]
    return bounds[int(np.argmin(widths))], widths


def _measured(costs: dict[int, np.ndarray], certificate: Any, bound: float,
              confidence: float, name: str) -> list[dict[str, Any]]:
    """Per k: the attacked models' mean cost (``name``), its two-sided Hoeffding interval
    (``name_low``, ``name_high``; width ``bound``) and whether the mean lies inside the
    certificate's bounds at k."""
    from privfl.robustness.calibration import hoeffding_radius

    rows = []
    for k, values in sorted(costs.items()):
        mean = float(values.mean())
        radius = hoeffding_radius(values.size, (1.0 - confidence) / 2.0, width=bound)
        low, high = float(certificate.lower[k - 1]), float(certificate.upper[k - 1])
        rows.append({"k": k, name: mean, f"{name}_low": max(0.0, mean - radius),
                     f"{name}_high": min(bound, mean + radius), "bound_lower": low,
                     "bound_upper": high, "inside": bool(low <= mean <= high)})
    return rows


_ADVERSARY_NOTE = {
    "replace": "the attackers replace k clients' (or k records') data, as privfl's attacks do: "
               "each certificate uses the tighter of its sound readings (2k add/remove steps, "
               "or k replace-one steps with the replace-one epsilon of the same training)",
    "add-remove": "Xie et al. 2023's reading: k adversaries are k add/remove steps, sound for "
                  "adversaries who add or remove clients (records); NOT a certificate for "
                  "privfl's simulated attacks, which replace data (measured rows are shown "
                  "against this reading for comparison with the paper only)",
}


def _area(certificate: Any, labels: np.ndarray) -> float:
    """Sum of the certified accuracy over k = 1, 2, ...: the mean over correctly predicted
    points of the number of whole k >= 1 certified (an infinite K counted as 1e18)."""
    kk = certificate.certified_k
    whole = np.where(np.isfinite(kk), np.floor(np.maximum(kk, 0.0)), 1e18)
    return float(np.mean(np.where(certificate.predictions == labels, whole, 0.0)))


def check_method(method: str, confidence: float) -> None:
    check_range("confidence", confidence, 0.0, 1.0, low_open=True, high_open=True)
    check_choice("method", method, ("hoeffding", "clopper-pearson", "estimate"))
