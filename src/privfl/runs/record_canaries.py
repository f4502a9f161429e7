"""Record-level canaries for `privfl audit run` (issue 47): canary records planted in the
clients' training data, scored by loss on the released model.

Algorithms: the record-level ones (:data:`RECORD_LEVEL`): PriFedSync (Zheng et al. 2021),
InsDP-FedSGD/FedAvg (Xie et al. 2023), projected noisy SGD (Asoodeh et al. 2021) and DP-DSGD
(Hasircioglu and Gunduz 2022).

Canaries (:func:`plant_record_canaries`): ``m`` *slots*, records each held by exactly one
client, drawn uniformly without replacement. Each canary has a wrong label ``y' = (y + 1 +
U{0..K-2}) mod K`` (y the slot record's label) and an input of its design (below). Secret bit
``S_j`` ~ Bernoulli(1/2): with ``S_j = 1`` the client holds the canary ``(x_j, y'_j)`` in the
slot, with ``S_j = 0`` the slot's original record. A canary is an ordinary record of its
client's dataset (a copy appended to the pool, the client's index pointing at it, as
:func:`privfl.attacks.poisoning.poison` does): the algorithm's own batch sampling, clipping,
noise and aggregation treat it as any record, and every client keeps its ``n_j``, so the
sampling rates and divisors the accountant reads do not depend on the bits.

Neighbouring relation: flipping one bit swaps one record of one client, a *replace-one*
neighbour. :func:`replace_one_bound` therefore compares with the run's tightest proven bound
for replace-one neighbours: the headline where the guarantee is replace-one already (fixed-size
batches, projected SGD's replace-one user); the plan's replace-one re-reading of its events
where it has one (InsDP, PriFedSync with Poisson batches); otherwise group privacy over two
add/remove steps, ``(2 eps, (1 + e^eps) delta)`` (DP-DSGD, whose random-participation analysis
fixes the relation), and the one-run bound is then taken at that larger delta.

Score (:func:`canary_scores`, :func:`released_scores`), from the last released model only:
``l(w_0; x_j, y'_j) - l(w_T; x_j, y'_j)``, the drop of the canary's cross-entropy from the
initial model (public, data-independent) to the final released model: the helper model sent to
the canary's client where the algorithm has per-client models (PriFedSync, whose release is
those helper models; the global model averages a client's signal with the others' noise), else
the global model (for a last-iterate release the last iterate, which is what ``global_params``
returns). Either is a function of what the guarantee covers, so scoring on it is
post-processing. A present canary is trained on and its loss drops; an absent one is replaced
by its client's original record.

Canary designs (:data:`DESIGNS`): ``mislabelled`` (the slot's input, a random wrong label),
``ood`` (:func:`ood_inputs`: balanced signs on the input features constant over the data, which
real records cannot move), ``random`` (:func:`random_inputs`) and ``auto`` (``ood`` where the data
have :data:`MIN_CONSTANT_FEATURES` constant features, else ``mislabelled``).

Antipodal pairs (``ood-pair``, ``random-pair``): the slot holds one of two canaries, ``x_j``
(``S_j = 1``) or its reflection ``x'_j = 2 c - x_j`` through the centre ``c`` of its design (the
constant features' values for ``ood``, 0 for ``random``; :func:`antipodes`), both with label
``y'_j``; the slot's original record is held in neither world. Still one replaced record, but
the two gradients point (near) opposite ways, so the pair realises up to twice one canary's
sensitivity, the ``2C`` of the replace-one relation the verdict compares with, where a canary
against a real record realises ``C``. Score: the canary's loss drop minus its reflection's,
``[l(w_0; x_j) - l(w_T; x_j)] - [l(w_0; x'_j) - l(w_T; x'_j)]`` (label ``y'_j``), the same rule
for every canary whatever its bit.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import torch

from privfl._validation import check_choice
from privfl.data.datasets import Dataset, FederatedDataset
from privfl.runs.canary_source import CanaryScores

__all__ = [
    "DESIGNS",
    "RECORD_LEVEL",
    "CanaryRecords",
    "RecordCanaries",
    "canary_scores",
    "plant_record_canaries",
    "replace_one_bound",
    "train_released",
]

#: the algorithms audited with canary records (record-level guarantees)
RECORD_LEVEL = ("prifedsync", "insdp-fedsgd", "insdp-fedavg", "projected-sgd", "dp-dsgd")


#: canary designs: a held record relabelled, or an out-of-distribution input (module docstring)
DESIGNS = ("auto", "mislabelled", "ood", "random", "ood-pair", "random-pair")
#: constant input features the ``ood`` design needs ("auto" falls back to mislabelled below)
MIN_CONSTANT_FEATURES = 8


@dataclasses.dataclass(frozen=True)
class CanaryRecords:
    """Where the canaries sit and which are present (the auditor's secret).

    ``inputs`` and ``labels`` are the canary records, ``rows`` the slots' original rows of the
    training pool, ``clients`` the client holding each slot and ``inserted`` the bits ``S_j``.
    ``alternatives``: the inputs held where ``S_j = 0`` for the pair designs (the reflections,
    label ``labels``), None where the slot's original record is.
    """

    inputs: np.ndarray
    labels: np.ndarray
    rows: np.ndarray
    clients: np.ndarray
    inserted: np.ndarray
    design: str = "mislabelled"
    alternatives: np.ndarray | None = None

    @property
    def count(self) -> int:
        return int(self.rows.size)


def _single_holder_slots(data: FederatedDataset) -> tuple[np.ndarray, np.ndarray]:
    """(client, position in the client's index array) of every record held by one client."""
    owners = np.concatenate([np.full(idx.size, j) for j, idx in enumerate(data.train_indices)])
    positions = np.concatenate([np.arange(idx.size) for idx in data.train_indices])
    rows = np.concatenate(data.train_indices)
    counts = np.bincount(rows, minlength=len(data.train))
    single = counts[rows] == 1
    return owners[single], positions[single]


def constant_features(data: FederatedDataset) -> np.ndarray:
    """Flat positions of the input features that have one value in every held record."""
    rows = np.unique(np.concatenate(data.train_indices))
    flat = data.train.x[rows].reshape(rows.size, -1)
    return np.flatnonzero(flat.max(axis=0) == flat.min(axis=0))


def balanced_signs(count: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` rows of ``n`` signs, each row ``floor(n/2)`` times -1 and ``ceil(n/2)`` times
    +1 in a random order (for even n, orthogonal to the all-ones vector)."""
    base = np.where(np.arange(n) < n // 2, -1.0, 1.0)
    return np.stack([rng.permutation(base) for _ in range(count)]) if count else \
        np.zeros((0, n))


def _ood_centre(data: FederatedDataset) -> tuple[np.ndarray, np.ndarray, float]:
    """(flat feature positions used by ``ood``: the constant ones, an even number; the
    centre: their constants there, 0 elsewhere; the held records' mean input norm)."""
    where = constant_features(data)
    if where.size < MIN_CONSTANT_FEATURES:
        raise ValueError(f"canary_design = 'ood' needs >= {MIN_CONSTANT_FEATURES} input "
                         f"features constant over the training records: the data have "
                         f"{where.size}; use 'mislabelled' or 'random'")
    where = where[: where.size // 2 * 2]
    rows = np.unique(np.concatenate(data.train_indices))
    flat = data.train.x[rows].reshape(rows.size, -1)
    centre = np.zeros(flat.shape[1], dtype=np.float64)
    centre[where] = flat[0, where]
    return where, centre, float(np.linalg.norm(flat, axis=1).mean())


def antipodes(data: FederatedDataset, inputs: np.ndarray, design: str) -> np.ndarray:
    """The reflections ``2 c - x`` of the canary ``inputs`` through their design's centre
    ``c`` (module docstring): the constants of the ``ood`` features (0 elsewhere), or 0 for
    ``random``."""
    flat = inputs.reshape(inputs.shape[0], -1).astype(np.float64)
    centre = _ood_centre(data)[1] if design == "ood" else np.zeros(flat.shape[1])
    return (2.0 * centre - flat).reshape(inputs.shape).astype(np.float32)


def ood_inputs(data: FederatedDataset, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` out-of-distribution inputs: 0 on the features that vary over the held
    records; on the ``n`` features constant over them, that constant plus ``a / sqrt(n)``
    times balanced random signs (:func:`balanced_signs`; ``a`` the held records' mean input
    norm). A real record's gradient moves the first-layer weights of the constant features
    only along their constants, the same for every such feature, so with even ``n`` it does
    not move a canary's sign pattern at all: a canary's loss reads the canaries and the noise.
    Needs :data:`MIN_CONSTANT_FEATURES` constant features."""
    where, centre, norm = _ood_centre(data)
    inputs = np.zeros((count, centre.size), dtype=np.float64)
    inputs[:, where] = centre[where] + norm / np.sqrt(where.size) * balanced_signs(
        count, where.size, rng)
    return inputs.reshape((count, *data.train.x.shape[1:])).astype(np.float32)


def random_inputs(data: FederatedDataset, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` inputs of random signs on every feature, of the held records' mean norm."""
    rows = np.unique(np.concatenate(data.train_indices))
    flat = data.train.x[rows].reshape(rows.size, -1)
    scale = float(np.linalg.norm(flat, axis=1).mean()) / np.sqrt(flat.shape[1])
    inputs = scale * rng.choice([-1.0, 1.0], size=(count, flat.shape[1]))
    return inputs.reshape((count, *data.train.x.shape[1:])).astype(np.float32)


def resolved_design(data: FederatedDataset, design: str) -> str:
    """``design``, with "auto" resolved: "ood" when the data have enough constant features
    (:data:`MIN_CONSTANT_FEATURES`), else "mislabelled"."""
    if design != "auto":
        return design
    return "ood" if constant_features(data).size >= MIN_CONSTANT_FEATURES else "mislabelled"


def plant_record_canaries(data: FederatedDataset, inserted: np.ndarray,
                          rng: np.random.Generator, design: str = "auto"
                          ) -> tuple[FederatedDataset, CanaryRecords]:
    """The federated dataset with the present canaries in their slots, and the canaries.

    One slot per bit of ``inserted`` (boolean ``[m]``, m >= 2) among the records held by one
    client (module docstring); the slots, canary inputs and wrong labels are drawn from ``rng``
    (the auditor's randomness, independent of the run's). ``design``: one of :data:`DESIGNS`.
    Needs >= 2 classes.
    """
    if not isinstance(data, FederatedDataset):
        raise ValueError(f"data = {type(data).__name__} is not allowed: must be a "
                         "FederatedDataset")
    design = resolved_design(data, check_choice("canary_design", design, DESIGNS))
    base = design.removesuffix("-pair")
    inserted = np.asarray(inserted)
    if inserted.ndim != 1 or inserted.dtype != bool or inserted.size < 2:
        raise ValueError(f"inserted (shape {inserted.shape}, dtype {inserted.dtype}) must be a "
                         "1-D boolean array of >= 2 bits")
    owners, positions = _single_holder_slots(data)
    canaries = inserted.size
    if owners.size < canaries:
        raise ValueError(f"canaries = {canaries} is out of range: the data hold only "
                         f"{owners.size} records of one client each")
    classes = int(data.num_classes)
    if classes < 2:
        raise ValueError(f"data.num_classes = {classes} is out of range: canaries need >= 2 "
                         "classes")
    chosen = np.sort(rng.choice(owners.size, size=canaries, replace=False))
    clients, slots = owners[chosen], positions[chosen]
    rows = np.array([data.train_indices[j][s] for j, s in zip(clients, slots, strict=True)],
                    dtype=np.int64)
    shift = 1 + rng.integers(0, classes - 1, size=canaries)
    labels = ((data.train.y[rows] + shift) % classes).astype(np.int64)
    inputs = (data.train.x[rows] if base == "mislabelled" else
              ood_inputs(data, canaries, rng) if base == "ood" else
              random_inputs(data, canaries, rng))
    alternatives = antipodes(data, inputs, base) if base != design else None
    indices = [idx.copy() for idx in data.train_indices]
    start = len(data.train)
    present = np.flatnonzero(inserted) if alternatives is None else np.arange(canaries)
    held = inputs if alternatives is None else np.where(
        inserted.reshape((-1,) + (1,) * (inputs.ndim - 1)), inputs, alternatives)
    for offset, c in enumerate(present):
        indices[clients[c]][slots[c]] = start + offset
    train = data.train
    pool = Dataset(x=np.concatenate([train.x, held[present].astype(train.x.dtype)]),
                   y=np.concatenate([train.y, labels[present]]), name=train.name,
                   num_classes=train.num_classes, mean=train.mean, std=train.std,
                   normalized=train.normalized, classes=train.classes)
    planted = FederatedDataset(pool, data.test, indices, data.test_indices,
                               list(data.client_ids),
                               f"{data.name} + {present.size} canary records", dict(data.info))
    return planted, CanaryRecords(np.asarray(inputs, dtype=np.float32), labels, rows,
                                   clients.astype(np.int64), inserted, design, alternatives)


def train_released(algorithm: Any, rounds: int) -> None:
    """Run ``rounds`` rounds through the algorithm's own four stages (no evaluation, no
    per-round accounting: neither changes what is released)."""
    for r in range(1, rounds + 1):
        cohort = algorithm.select_cohort()
        updates = algorithm.local_work(cohort)
        algorithm.aggregate(cohort, updates)
        algorithm.round = r


def _inputs(x: np.ndarray, like: torch.Tensor, input_bound: float | None) -> torch.Tensor:
    """``x`` as a tensor like ``like``, each row scaled to L2 norm <= ``input_bound`` when
    given (as projected SGD trains on its inputs)."""
    from privfl.algorithms.projected_sgd import project_

    inputs = torch.as_tensor(x, dtype=like.dtype, device=like.device)
    if input_bound is None:
        return inputs
    return project_(inputs.reshape(inputs.shape[0], -1).clone(), input_bound).reshape(
        inputs.shape)


def canary_losses(model: torch.nn.Module, params: dict[str, torch.Tensor], x: np.ndarray,
                  y: np.ndarray, input_bound: float | None = None) -> np.ndarray:
    """Per-record cross-entropy of ``model`` with ``params`` on ``(x, y)``."""
    from torch.func import functional_call

    first = next(iter(params.values()))
    targets = torch.as_tensor(y, dtype=torch.int64, device=first.device)
    model = model.to(device=first.device, dtype=first.dtype).eval()
    with torch.no_grad():
        logits = functional_call(model, params, (_inputs(x, first, input_bound),))
        losses = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    return losses.double().cpu().numpy()


def canary_scores(model: torch.nn.Module, before: dict[str, torch.Tensor],
                  after: dict[str, torch.Tensor], canaries: CanaryRecords,
                  input_bound: float | None = None) -> np.ndarray:
    """Every canary's score ``l(w_0; x_j, y'_j) - l(w_T; x_j, y'_j)`` from the initial model
    ``before`` and the final released model ``after``, minus the same drop of its reflection
    for the pair designs (module docstring)."""
    def drop(x: np.ndarray) -> np.ndarray:
        y = canaries.labels
        return (canary_losses(model, before, x, y, input_bound)
                - canary_losses(model, after, x, y, input_bound))

    scores = drop(canaries.inputs)
    return scores if canaries.alternatives is None else scores - drop(canaries.alternatives)


def released_scores(algorithm: Any, model: torch.nn.Module, before: dict[str, torch.Tensor],
                    canaries: CanaryRecords) -> np.ndarray:
    """:func:`canary_scores` on what the trained ``algorithm`` releases last: each canary on
    the final model sent to its client where the algorithm has per-client models
    (``client_params``: PriFedSync's helper models, its release), else on ``global_params``."""
    bound = getattr(algorithm, "input_bound", None)
    per_client = getattr(algorithm, "client_params", None)
    if per_client is None:
        return canary_scores(model, before, algorithm.global_params(), canaries, bound)
    scores = np.empty(canaries.count)
    for client in np.unique(canaries.clients):
        mine = canaries.clients == client
        part = dataclasses.replace(canaries, inputs=canaries.inputs[mine],
                                   labels=canaries.labels[mine], rows=canaries.rows[mine],
                                   clients=canaries.clients[mine],
                                   inserted=canaries.inserted[mine],
                                   alternatives=None if canaries.alternatives is None else
                                   canaries.alternatives[mine])
        scores[mine] = canary_scores(model, before, per_client(int(client)), part, bound)
    return scores


def replace_one_bound(plan: Any, rounds: int) -> dict[str, Any]:
    """The run's tightest proven bound for replace-one neighbours (module docstring):
    ``{"epsilon", "delta", "method", "headline_epsilon", "headline_neighbouring"}``; epsilon
    is inf when no bound exists (then ``delta`` is the plan's)."""
    from privfl.algorithms.base import budget_results, tightest_bound
    from privfl.algorithms.replace_one import replace_one_reading

    delta = float(plan.delta)
    best = tightest_bound(budget_results(plan, plan.results(rounds)))
    if best is None:
        return {"epsilon": math.inf, "delta": delta, "method": None,
                "headline_epsilon": math.inf, "headline_neighbouring": None}
    headline = {"headline_epsilon": float(best.epsilon),
                "headline_neighbouring": str(getattr(best.neighbouring, "value",
                                                     best.neighbouring))}
    relation = headline["headline_neighbouring"]
    if relation == "replace-one":
        return {"epsilon": float(best.epsilon), "delta": delta,
                "method": f"{best.method} (the headline; replace-one)", **headline}
    replace_epsilon, replace_method, _ = (replace_one_reading(plan, max(rounds, 1))
                                          if relation == "add-remove" else (None, None, ""))
    if replace_epsilon is not None:
        return {"epsilon": float(replace_epsilon), "delta": delta,
                "method": f"{replace_method} (the plan's events re-read under "
                          "replace-one neighbours)", **headline}
    eps = float(best.epsilon)
    grouped = delta * (1.0 + math.exp(eps)) if eps < 700 else math.inf
    if grouped >= 1.0:
        return {"epsilon": math.inf, "delta": delta, "method": (
            f"group privacy over two add/remove steps of {best.method}: delta (1 + e^eps) "
            ">= 1, no bound"), **headline}
    return {"epsilon": 2.0 * eps, "delta": grouped, "method": (
        f"group privacy over two add/remove steps of {best.method}: (2 eps, (1 + e^eps) "
        "delta)"), **headline}


class RecordCanaries:
    """The record-level :class:`~privfl.runs.canary_source.CanarySource` (module docstring).

    Built from the run's configuration (the canaries go into the data, so the algorithm is
    rebuilt on the planted data: the same configuration, the same client sizes, hence the same
    privacy plan as the algorithm the audit was given). ``design``: one of :data:`DESIGNS`.
    ``unit`` is the plan's: "record", or "client" for projected SGD, whose users hold one
    record each (a canary record is then a canary user replacing one user).
    """

    unit: str = "record"

    def __init__(self, config: Any, design: str = "auto") -> None:
        from privfl.algorithms.builders import privacy_plan

        self.config = config
        self.design = check_choice("canary_design", design, DESIGNS)
        name = str(config.federated.algorithm)
        if name not in RECORD_LEVEL:
            raise ValueError(f"federated.algorithm = {name!r} has no record canaries: must be "
                             f"one of {', '.join(RECORD_LEVEL)}")
        self.unit = str(privacy_plan(config).unit).split()[0]

    def run(self, algorithm: Any, inserted: np.ndarray, rng: np.random.Generator,
            rounds: int) -> CanaryScores:
        """Plant the canaries whose bit is set, train ``rounds`` rounds on the planted data
        with the algorithm's own code, score every canary on the final released model."""
        from privfl.algorithms.builders import build_algorithm, build_dataset, build_model

        if getattr(algorithm, "protection", None) is not None:
            raise ValueError("client-side protection cannot be audited with record canaries yet")
        data, planted = plant_record_canaries(build_dataset(self.config), inserted, rng,
                                              self.design)
        trained = build_algorithm(self.config, data)
        before = trained.global_params()
        train_released(trained, rounds)
        scores = released_scores(trained, build_model(self.config, data), before, planted)
        return CanaryScores(scores, planted.inserted, rounds, {
            "canary": f"{planted.design} record in a slot of one client's data: "
                      + _DESIGN_TEXT[planted.design],
            "score": "cross-entropy of the canary on the initial model minus on the final "
                     "released model" + (", minus the same for its reflection"
                                         if planted.alternatives is not None else ""),
            "neighbouring": "replace-one record (a slot holds the canary or "
                            + ("its reflection" if planted.alternatives is not None else
                               "the client's original record")
                            + ", so every n_j is the same whatever the bits)",
            "sampling": "the algorithm's own batch and client sampling (a canary is an "
                        "ordinary record of its client)",
            "released": ("the final helper model sent to the canary's client (client_params)"
                         if hasattr(trained, "client_params") else
                         "the final released model only (global_params: the global model, "
                         "or the last iterate of a last-iterate release)"),
        })

    def proven_bound(self, plan: Any, rounds: int) -> tuple[float, float, str]:
        """``(epsilon, delta, method)`` for replace-one neighbours
        (:func:`replace_one_bound`): the bound the verdict compares with."""
        bound = replace_one_bound(plan, rounds)
        method = (f"{bound['method']}; the headline is {bound['headline_epsilon']:.6g} "
                  f"({bound['headline_neighbouring']})")
        return bound["epsilon"], bound["delta"], method


_DESIGN_TEXT = {
    "mislabelled": "the slot record's input with a random wrong label",
    "ood": "an out-of-distribution input on the features constant over the data, a random "
           "label",
    "random": "random signs on every feature (the data's mean norm), a random label",
    "ood-pair": "an out-of-distribution input on the features constant over the data (bit 1) "
                "or its reflection through those constants (bit 0), one random label; the "
                "slot's original record is held in neither world",
    "random-pair": "random signs on every feature (the data's mean norm) (bit 1) or their "
                   "negation (bit 0), one random label; the slot's original record is held "
                   "in neither world",
}
