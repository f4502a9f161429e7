"""``privfl certify recompute DIR``: certify the replicas a certification saved, again, without
training, and only if everything stored agrees with what the stored configuration implies.

Nothing stored is taken on trust where it can be re-derived:

* the per-model privacy (epsilon, delta, unit, neighbouring relation, the accountant and the
  replace-one epsilon) is recomputed from the clean set's stored configuration through the
  algorithm's privacy plan and its accountants; any difference from the stored statement is
  refused;
* every stored configuration must match its digest, the clean set must be trained without an
  attack, and the set for k attackers with the attack of certify.json at exactly k attackers
  and otherwise the clean set's configuration and seeds;
* the data the configuration builds must match the stored data digest.

The SHA-256 digests of every array and of the metadata (:mod:`privfl.robustness.replica_cache`)
carry no secret key: they detect accidental damage (a truncated copy, a flipped byte, a file of
another run), not forgery. Someone who rewrites the probabilities and recomputes the digests is
not detected; a recomputed certificate is as trustworthy as the directory it was read from.
"""

from __future__ import annotations

import math
import numbers
import time
from pathlib import Path
from typing import Any

import numpy as np

from privfl.robustness.pipeline import CertificationRun, certify_replicas, check_private

__all__ = ["check_about", "recompute_certification"]

#: Privacy fields re-derived and compared (floats to a relative 1e-9).
_COMPARED = ("epsilon", "delta", "unit", "neighbouring", "method", "replace_epsilon", "models")


def check_about(about: Any, source: str = "certify.json") -> dict[str, Any]:
    """The ``name``, ``algorithm`` and ``attack`` entries of a certify.json, checked: ``attack``
    a mapping whose ``kind`` is null or a string and whose ``attackers`` is an integer >= 0
    (0 without a kind). One-line ValueError naming the entry otherwise."""
    if not isinstance(about, dict) or not {"name", "algorithm", "attack"} <= set(about):
        raise ValueError(f"{source} is not a certification (no name, algorithm and attack)")
    attack = about["attack"]
    if not isinstance(attack, dict):
        raise ValueError(f"{source}: attack = {attack!r} is not allowed: must be a mapping "
                         "with kind and attackers")
    kind, attackers = attack.get("kind"), attack.get("attackers", 0)
    if kind is not None and not isinstance(kind, str):
        raise ValueError(f"{source}: attack.kind = {kind!r} is not allowed: must be null or an "
                         "attack name")
    if (isinstance(attackers, bool) or not isinstance(attackers, numbers.Integral)
            or attackers < 0):
        raise ValueError(f"{source}: attack.attackers = {attackers!r} is out of range: must be "
                         "an integer >= 0")
    if kind is None and attackers:
        raise ValueError(f"{source}: attack.attackers = {attackers} is not allowed without "
                         "attack.kind")
    return about


def recompute_certification(replicas: str | Path, about: dict[str, Any], *,
                            method: str = "hoeffding", confidence: float = 0.99,
                            adversary: str = "replace", cross_entropy_bound: float = 5.0
                            ) -> CertificationRun:
    """The certification of the replicas saved by
    :func:`~privfl.robustness.pipeline.run_certification` (``replicas``: its directory;
    ``about``: its certify.json, see :func:`check_about`), with another ``method``,
    ``confidence``, ``adversary`` or ``cross_entropy_bound``, without training; refused (one
    line) when anything stored disagrees with the stored configuration (see the module
    docstring)."""
    from privfl.robustness.pipeline import check_method
    from privfl.robustness.replica_cache import load_replicas

    about = check_about(about)
    check_method(method, confidence)
    started = time.perf_counter()
    store = Path(replicas)
    if not (store / "clean").is_dir():
        raise ValueError(f"replicas = {str(store)!r} holds no clean/ replica set: give the "
                         "replicas/ directory of a privfl certify run (made since it saves them)")
    clean = load_replicas(store / "clean")
    config = _stored_config(clean, store / "clean")
    if config.attack.active:
        raise ValueError(f"{store / 'clean'} was trained with attack.kind = "
                         f"{config.attack.kind!r}: not the clean set")
    privacy = _rederive(clean, config, store / "clean")
    clean.privacy = privacy
    check_private(privacy, config)
    kind, attackers = about["attack"].get("kind"), int(about["attack"].get("attackers") or 0)
    attacked = {}
    for k in range(1, attackers + 1):
        where = store / f"attack-{k}"
        attacked[k] = load_replicas(where)
        _check_attacked(attacked[k], clean, _stored_config(attacked[k], where), kind, k, where)
    run = certify_replicas(clean, attacked, {**about, "command": "certify"}, method,
                           confidence, adversary, cross_entropy_bound)
    run.seconds = time.perf_counter() - started
    run.replicas = str(store)
    return run


def _stored_config(replicas: Any, where: Path) -> Any:
    """The configuration stored with a replica set, validated and matched to its digest."""
    from privfl.config import config_from_dict
    from privfl.robustness.replica_cache import config_digest

    raw = replicas.info.get("config")
    if not isinstance(raw, dict):
        raise ValueError(f"{where} stores no configuration: it cannot be checked")
    try:
        config = config_from_dict(raw)
    except ValueError as error:
        raise ValueError(f"{where} stores an invalid configuration: {error}") from None
    if config_digest(config) != replicas.config_digest:
        raise ValueError(f"{where}: the stored configuration does not match its digest "
                         f"{replicas.config_digest[:12]}...")
    return config


def _rederive(clean: Any, config: Any, where: Path) -> Any:
    """The privacy statement of ``config`` through its plan's accountants; refused when the
    stored one differs in any of :data:`_COMPARED` (or the data differ from the stored
    digest)."""
    from privfl.algorithms.builders import build_dataset, privacy_plan
    from privfl.robustness.replica_cache import data_digest
    from privfl.robustness.replica_privacy import replica_privacy

    data = build_dataset(config)
    if data_digest(data) != clean.data_digest:
        raise ValueError(f"{where}: the data its configuration builds differ from the stored "
                         f"data digest {clean.data_digest[:12]}...")
    derived = replica_privacy(privacy_plan(config, data), config.federated.rounds, clean.models)
    stored = clean.privacy
    for name in _COMPARED:
        mine, theirs = getattr(derived, name), getattr(stored, name)
        same = (mine == theirs if not (isinstance(mine, float) and isinstance(theirs, float))
                else math.isclose(mine, theirs, rel_tol=1e-9, abs_tol=0.0))
        if not same:
            raise ValueError(f"{where}: the stored privacy {name} = {theirs!r} differs from "
                             f"{mine!r}, what its configuration gives through the accountant: "
                             "refused")
    return derived


def _check_attacked(attacked: Any, clean: Any, config: Any, kind: str | None, k: int,
                    where: Path) -> None:
    """The set for k attackers: the clean set's configuration and seeds with the attack of
    certify.json at k attackers."""
    if not config.attack.active or config.attack.kind != kind or config.attack.attackers != k:
        raise ValueError(f"{where} was trained with attack.kind = {config.attack.kind!r}, "
                         f"attack.attackers = {config.attack.attackers}: certify.json says "
                         f"{kind!r} with {k}")
    if (attacked.models != clean.models or _trained(attacked) != _trained(clean)
            or not np.array_equal(attacked.seeds, clean.seeds)):
        raise ValueError(f"{where} was not trained with the clean set {where.parent / 'clean'}: "
                         "another configuration, number of models or seeds")


def _trained(replicas: Any) -> dict[str, Any]:
    """The configuration a replica set was trained with, but its attack and free text."""
    config = dict(replicas.info.get("config", {}))
    for key in ("attack", "run", "name", "description"):
        config.pop(key, None)
    return config
