"""Poisoning attacks of Xie et al. 2023 on a :class:`~privfl.data.FederatedDataset` (numpy only).

:func:`poison` returns a new federated dataset whose attackers' poisoned records are *copies*
appended to the pooled training set (the attackers' index arrays point at the copies; every
other client, the clean records and the test pool are untouched, and every client keeps its
``n_j``, so the privacy accounting sees the same sizes), and an :class:`AttackDescription`:
which clients and records, the trigger, the target, gamma, and the *attack test set* on which
success is measured. The description is also stored in ``data.info["attack"]``, where the
algorithms find it (:mod:`privfl.attacks.metrics`).

Attacks (``kind``; Xie et al. 2023 Section 5):

* ``backdoor`` (Bagdasaryan et al. 2020): a poisoned record gets the trigger
  (:mod:`privfl.attacks.triggers`) and the target label y*. Attack test set: every test
  image whose true label is not y*, with the trigger, labelled y*.
* ``label-flip`` (Fung et al. 2020): a poisoned record's label becomes y*; only records of the
  source class (``source_label``; default every class but y*) are poisoned. Attack test set:
  the source-class test images, unchanged, labelled y*.
* ``dba`` (distributed backdoor, Xie et al. 2020): as the backdoor, but attacker j (user level)
  or poisoned record j (instance level) stamps only piece ``j mod pieces`` of the trigger; the
  test uses the whole trigger.
* ``scaling`` (model replacement, Bagdasaryan et al. 2020): the backdoor's data, and each
  attacker sends ``gamma * update``; the server clips after scaling, so the DP guarantee holds
  (applied by the algorithm, :func:`privfl.attacks.metrics.scale_attacker_updates`).

Levels: ``user`` — k attacker clients, each poisoning ``floor(fraction * c_j)`` of its c_j
candidate records (all of them by default, as the paper; the paper's code poisons the first
``floor(fraction * B)`` records of every batch instead, the same thing at fraction 1).
``instance`` — k poisoned records in one client (the paper's worst case). The poisoned records
are ordinary records of the client's dataset: the engine samples them in batches like any other
record (probability B / n_j per step), never reusing one poisoned batch for every step as the
paper's released code does.

Randomness: the attackers (user level), the attacker client and its poisoned records come from
``SeedSequence(seed, spawn_key=(ATTACK_STREAM,))``, independent of the run's other streams. The
choice is nested in k: the attackers (or records) for k are the first k of one random order, so
a sweep over k adds attackers without replacing any.

Neighbouring: the poisoned dataset replaces k users' data (or k records) of the clean one; an
add/remove-one accountant counts that as 2k steps (see :mod:`privfl.robustness.certify`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfl._validation import check_int
from privfl.attacks.config import AttackConfig
from privfl.attacks.triggers import Trigger
from privfl.data.datasets import Dataset, FederatedDataset

__all__ = [
    "ATTACK_STREAM",
    "AttackDescription",
    "attack_card_rows",
    "attack_of",
    "attack_test_set",
    "poison",
    "poisonable_records",
]

#: Spawn key of the attack's random stream (``SeedSequence(seed, spawn_key=(ATTACK_STREAM,))``).
ATTACK_STREAM = 0xA77AC
_SUCCESS_TEXT = {
    "backdoor": "backdoor success: triggered test images of other classes classified as the "
                "target",
    "dba": "DBA success: test images of other classes with the whole trigger classified as the "
           "target",
    "scaling": "backdoor success (scaled updates): triggered test images of other classes "
               "classified as the target",
    "label-flip": "label flip success: source-class test images classified as the target",
}


@dataclass(eq=False)
class AttackDescription:
    """What :func:`poison` did, and the test set that measures it.

    Attributes
    ----------
    kind, level
        As ``attack.kind`` / ``attack.level``.
    k
        The number of attackers (user level) or poisoned records (instance level).
    target_label, source_label
        y*, and the flipped class of a label flip (None: every class but y*).
    gamma
        The update scale (1: none).
    clients
        Positions of the attacker clients (user level: k of them, in the drawn order; instance
        level: the one client).
    records
        ``client position -> positions within that client's index array`` of its poisoned
        records (sorted).
    trigger
        The whole trigger (None for a label flip); ``pieces`` the DBA pieces (else empty).
    test
        The attack test set (labels all y*); ``test_indices`` its rows in the clean test pool.
    """

    kind: str
    level: str
    k: int
    target_label: int
    source_label: int | None
    gamma: float
    clients: tuple[int, ...]
    client_ids: tuple[str, ...]
    records: dict[int, np.ndarray]
    trigger: Trigger | None
    pieces: tuple[Trigger, ...]
    test: Dataset
    test_indices: np.ndarray
    seed: int
    fraction: float = 1.0
    notes: list[str] = field(default_factory=list)

    @property
    def poisoned_records(self) -> int:
        """Records changed in total."""
        return int(sum(r.size for r in self.records.values()))

    @property
    def success_label(self) -> str:
        """What ``attack_success`` measures (for plots and reports)."""
        return _SUCCESS_TEXT[self.kind]

    def is_attacker(self, cohort: np.ndarray) -> np.ndarray:
        """Boolean mask: which clients of ``cohort`` (positions) are attackers (user level;
        all False at the instance level, whose attacker is an honest DP-SGD client)."""
        if self.level != "user":
            return np.zeros(len(cohort), dtype=bool)
        return np.isin(np.asarray(cohort), np.asarray(self.clients, dtype=np.int64))

    def text(self) -> str:
        """One line saying what was poisoned."""
        what = {"backdoor": "backdoor", "label-flip": "label flip", "dba": "distributed "
                "backdoor (DBA)", "scaling": "model replacement (backdoor, updates scaled)"}
        source = ("" if self.kind != "label-flip" else
                  f" from class {self.source_label}" if self.source_label is not None
                  else " from every other class")
        target = f"target label {self.target_label}{source}"
        if self.trigger is not None:
            target += (f", trigger of {len(self.trigger)} pixels = {self.trigger.value:g} "
                       f"({self.trigger.space})")
            if self.pieces:
                target += f" in {len(self.pieces)} pieces"
        if self.level == "user":
            who = (f"k = {self.k} attacker client(s) "
                   f"[{', '.join(self.client_ids) or 'none'}], {self.poisoned_records} records "
                   f"poisoned (fraction {self.fraction:g} of each attacker's candidates)")
        else:
            who = (f"k = {self.k} poisoned record(s) in client "
                   f"{self.client_ids[0] if self.client_ids else 'none'}")
        scale = f", updates x gamma = {self.gamma:g} before the server's clipping" \
            if self.gamma != 1.0 else ""
        return f"{what[self.kind]}, {self.level} level: {who}; {target}{scale}"

    def summary(self) -> dict[str, Any]:
        """JSON-ready facts (for reports)."""
        return {
            "kind": self.kind, "level": self.level, "k": self.k,
            "target_label": self.target_label, "source_label": self.source_label,
            "gamma": self.gamma, "fraction": self.fraction, "seed": self.seed,
            "clients": list(self.client_ids),
            "poisoned_records": self.poisoned_records,
            "trigger_pixels": None if self.trigger is None else self.trigger.pixels.tolist(),
            "pieces": [p.pixels.tolist() for p in self.pieces],
            "attack_test_size": len(self.test),
            "notes": list(self.notes),
        }


def attack_of(data: FederatedDataset) -> AttackDescription | None:
    """The attack a federated dataset carries (``data.info["attack"]``), or None."""
    found = data.info.get("attack") if isinstance(data.info, Mapping) else None
    if found is not None and not isinstance(found, AttackDescription):
        raise ValueError(f"data.info['attack'] = {type(found).__name__} is not allowed: must be "
                         "an AttackDescription (from privfl.attacks.poisoning.poison)")
    return found


# ---------------------------------------------------------------------------------- helpers
def _trigger(attack: AttackConfig) -> Trigger:
    t = attack.trigger
    return Trigger.from_pattern(t.pattern, t.pixels, value=t.value, space=t.space,
                                anchor=t.anchor)


def _candidates(y: np.ndarray, attack: AttackConfig) -> np.ndarray:
    """Positions of a client's records an attack can poison (every record; for a label flip,
    those of the source class, or of any class but the target)."""
    if attack.kind != "label-flip":
        return np.arange(y.size)
    if attack.source_label is not None:
        return np.flatnonzero(y == attack.source_label)
    return np.flatnonzero(y != attack.target_label)


def poisonable_records(data: FederatedDataset, attack: AttackConfig) -> int:
    """The most records an instance-level ``attack`` can poison in one client of ``data``
    (``attack.clients[0]``'s when given, else the best client's): every record, or for a label
    flip the source-class ones (what :func:`poison` will require)."""
    labels = [data.train.y[idx] for idx in data.train_indices]
    if attack.clients is not None and attack.clients and attack.clients[0] < len(labels):
        return int(_candidates(labels[attack.clients[0]], attack).size)
    return max((int(_candidates(y, attack).size) for y in labels), default=0)


def _check_labels(attack: AttackConfig, num_classes: int) -> None:
    for key in ("target_label", "source_label"):
        value = getattr(attack, key)
        if value is not None and value >= num_classes:
            raise ValueError(f"attack.{key} = {value} is out of range: the data have "
                             f"{num_classes} classes, labels 0..{num_classes - 1}")


def _check_images(attack: AttackConfig, input_shape: tuple[int, ...]) -> None:
    """A trigger is a pixel pattern: refuse an attack that writes one into non-image data."""
    if attack.uses_trigger and len(input_shape) != 3:
        raise ValueError(
            f"attack.kind = {attack.kind!r} writes a pixel trigger into images (C, H, W): the "
            f"data have inputs of shape {tuple(input_shape)}, not images; for N x D (tabular) "
            "data use attack.kind: label-flip")


def attack_test_set(test: Dataset, attack: AttackConfig,
                    trigger: Trigger | None = None) -> tuple[Dataset, np.ndarray]:
    """The attack test set of ``attack`` from a clean test pool, and its rows in the pool.

    Backdoor kinds: the images whose label is not the target, with the whole trigger, labelled
    the target. Label flip: the source-class images (every class but the target by default),
    unchanged, labelled the target. ValueError if no image qualifies.
    """
    _check_labels(attack, test.num_classes)
    _check_images(attack, test.input_shape)
    rows = _candidates(test.y, attack) if attack.kind == "label-flip" else np.flatnonzero(
        test.y != attack.target_label)
    if rows.size == 0:
        raise ValueError(f"attack.target_label = {attack.target_label}: the test set has no "
                         "image to measure the attack on (every test label is the target or "
                         "no image has attack.source_label)")
    x = test.x[rows]
    if attack.uses_trigger:
        trigger = trigger or _trigger(attack)
        x = trigger.stamp(x, test.mean, test.std, test.normalized)
    y = np.full(rows.size, attack.target_label, dtype=np.int64)
    base = test.name.split("/")[0]
    return _with(test, x, y, f"{base}/attack-test({attack.kind})"), rows


def _with(dataset: Dataset, x: np.ndarray, y: np.ndarray, name: str) -> Dataset:
    """``dataset``'s metadata (classes, normalisation) with other images and labels."""
    return Dataset(x=x, y=y, name=name, num_classes=dataset.num_classes, mean=dataset.mean,
                   std=dataset.std, normalized=dataset.normalized, classes=dataset.classes)


def _stamp(x: np.ndarray, pool: Dataset, trigger: Trigger, pieces: tuple[Trigger, ...],
           attacker: int | None) -> np.ndarray:
    """Images ``x`` with the trigger: the whole one, or (DBA) piece ``attacker mod pieces``
    on all of them (user level) or piece ``i mod pieces`` on the i-th (instance level)."""
    stats = (pool.mean, pool.std, pool.normalized)
    if not pieces:
        return trigger.stamp(x, *stats)
    if attacker is not None:
        return pieces[attacker % len(pieces)].stamp(x, *stats)
    out = np.array(x, dtype=np.float32, copy=True)
    which = np.arange(x.shape[0]) % len(pieces)
    for p, piece in enumerate(pieces):
        if np.any(which == p):
            out[which == p] = piece.stamp(x[which == p], *stats)
    return out


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ATTACK_STREAM,)))


def _choose(data: FederatedDataset, attack: AttackConfig, rng: np.random.Generator
            ) -> tuple[list[int], dict[int, np.ndarray]]:
    """The attacker clients and, per client, the positions of its poisoned records."""
    n = data.num_clients
    if attack.clients is not None and max(attack.clients, default=0) >= n:
        raise ValueError(f"attack.clients = {attack.clients!r} is out of range: positions must "
                         f"be < {n} (the data's clients)")
    labels = [data.train.y[idx] for idx in data.train_indices]
    order = rng.permutation(n)  # drawn even when clients are given: later draws stay the same
    if attack.level == "user":
        if attack.attackers > n:
            raise ValueError(f"attack.attackers = {attack.attackers} is out of range: must be "
                             f"<= {n}, the data's clients (user level)")
        clients = (list(attack.clients) if attack.clients is not None
                   else [int(j) for j in order[: attack.attackers]])
        records = {}
        for j in clients:
            cand = _candidates(labels[j], attack)
            count = int(np.floor(attack.fraction * cand.size + 1e-9))
            if cand.size and count == 0:
                raise ValueError(f"attack.fraction = {attack.fraction:g} poisons no record of "
                                 f"client {data.client_ids[j]} ({cand.size} candidates): must "
                                 f"be >= 1/{cand.size}")
            records[j] = np.sort(rng.permutation(cand)[:count])
        return clients, records
    k = attack.attackers
    if attack.clients is not None:
        client = attack.clients[0]
        cand = _candidates(labels[client], attack)
        if k > cand.size:
            raise ValueError(f"attack.attackers = {k} is out of range: must be <= the "
                             f"{cand.size} poisonable records of client "
                             f"{data.client_ids[client]} (instance level)")
    else:
        counts = np.array([_candidates(y, attack).size for y in labels])
        able = [int(j) for j in order if counts[j] >= k]
        if not able:
            raise ValueError(f"attack.attackers = {k} is out of range: must be <= "
                             f"{int(counts.max())}, the most poisonable records of one client "
                             "(instance level)")
        client = able[0]
        cand = _candidates(labels[client], attack)
    return [client], {client: np.sort(rng.permutation(cand)[:k])}


# ---------------------------------------------------------------------------------- poison
def poison(data: FederatedDataset, attack: AttackConfig | Mapping[str, Any],
           seed: int = 0) -> tuple[FederatedDataset, AttackDescription]:
    """The poisoned federated dataset and what was done (see the module docstring).

    Parameters
    ----------
    data
        The clean federated dataset (not already poisoned).
    attack
        An :class:`~privfl.attacks.config.AttackConfig` (or its mapping) with
        ``kind != "none"``.
    seed
        The run's seed; ``attack.seed`` overrides it. Draws the attackers and their records.
    """
    if not isinstance(data, FederatedDataset):
        raise ValueError(f"data = {type(data).__name__} is not allowed: must be a "
                         "FederatedDataset")
    if attack_of(data) is not None:
        raise ValueError("data is already poisoned (data.info['attack'] is set): poison the "
                         "clean dataset once")
    attack = attack if isinstance(attack, AttackConfig) else AttackConfig.model_validate(attack)
    if not attack.active:
        raise ValueError("attack.kind = 'none' is not allowed here: choose one of backdoor, "
                         "label-flip, dba, scaling")
    seed = check_int("seed", attack.seed if attack.seed is not None else seed)
    _check_labels(attack, data.num_classes)
    _check_images(attack, data.input_shape)
    trigger = _trigger(attack) if attack.uses_trigger else None
    if trigger is not None:
        trigger.placed(*data.input_shape[1:])  # refuse a trigger that does not fit, early
    test, test_rows = attack_test_set(data.test, attack, trigger)
    clients, records = _choose(data, attack, _rng(seed))
    pieces = tuple(trigger.pieces(attack.dba_pieces)) if attack.kind == "dba" else ()

    train = data.train
    indices = [idx.copy() for idx in data.train_indices]
    new_x, new_y, start = [], [], len(train)
    for rank, j in enumerate(clients):
        positions = records[j]
        if not positions.size:
            continue
        rows = data.train_indices[j][positions]
        x, y = train.x[rows], train.y[rows].copy()
        if trigger is not None:
            x = _stamp(x, train, trigger, pieces, rank if attack.level == "user" else None)
        y[:] = attack.target_label
        indices[j][positions] = np.arange(start, start + positions.size)
        start += positions.size
        new_x.append(x)
        new_y.append(y)
    pool = train if not new_x else _with(train, np.concatenate([train.x, *new_x]),
                                         np.concatenate([train.y, *new_y]), train.name)
    description = AttackDescription(
        kind=attack.kind, level=attack.level, k=attack.attackers,
        target_label=attack.target_label, source_label=attack.source_label, gamma=attack.gamma,
        clients=tuple(clients), client_ids=tuple(data.client_ids[j] for j in clients),
        records=records, trigger=trigger, pieces=pieces, test=test, test_indices=test_rows,
        seed=seed, fraction=attack.fraction if attack.level == "user" else 1.0)
    empty = [data.client_ids[j] for j in clients if not records[j].size]
    if empty:
        description.notes.append(f"attacker client(s) {', '.join(empty)} hold no record the "
                                 "attack can poison (no source-class record)")
    poisoned = FederatedDataset(
        pool, data.test, indices, data.test_indices, list(data.client_ids),
        f"{data.name} + {attack.kind} ({attack.level} level, k = {attack.attackers})",
        {**data.info, "attack": description})
    return poisoned, description


def attack_card_rows(attack: AttackConfig | AttackDescription | None) -> dict[str, str]:
    """The privacy card's row for a simulated attack (empty without one): the attack does not
    change the accounting, because DP holds for any data, poisoned data included."""
    if attack is None or (isinstance(attack, AttackConfig) and not attack.active):
        return {}
    if isinstance(attack, AttackDescription):
        what = attack.text()
    else:
        unit = "attacker client(s)" if attack.level == "user" else "poisoned record(s)"
        what = f"{attack.kind}, {attack.level} level, k = {attack.attackers} {unit}"
    return {"attack (simulated)": f"{what}. The accounting is unchanged: the guarantee holds "
                                  "for any data, poisoned included"}
