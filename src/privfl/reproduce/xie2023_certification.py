"""Xie et al. 2023's certified-robustness results (Figures 1, 2, 5(a), 8) as the shapes the paper
claims, at quick scale, with their Monte Carlo confidence.

What the paper claims (MNIST 0 vs 1): the largest certified number of adversaries k peaks at a
moderate epsilon, about 4 users at epsilon = 0.6298 (Figure 1, user level; Figure 8: the same
trend at 99 % confidence, with smaller k), at 0.3593 at instance level (Figure 5(a), Section
6.3); at epsilon = 0.63 flat clipping certifies the largest k, flat and per-layer clipping
differ, flat-median and per-layer-median clipping are nearly identical (Figure 2).

Quick scale (every row says so): M independently noised models per point
(:func:`privfl.robustness.montecarlo.train_replicas`), logistic regression on the MNIST 5k
subset's digits 0 and 1 (100 users of 8 records; the paper: a CNN, 200 users of 63 records,
M = 1,000); user level at Table 4's privacy setting (Poisson q = 0.1, T = 3, delta = 0.0029)
over its sigma grid, instance level at Table 7's (InsDP-FedAvg, Poisson batches q = 3/76,
V = 26, T = 3, delta = 1e-5). Certificates (Eq. 6, Theorem 3 / 4) in the paper's reading:
epsilon by the paper's accounting (Poisson RDP, orders 1.1-63, classic conversion) of one
model's training, one adversary = one added or removed user (record); ``estimate`` (Eq. 6 at
the Monte Carlo means, as the paper's main figures: not a guarantee) and ``hoeffding`` (a bound
per test point at 99 %, simultaneous over classes; Figure 8). A certification from M models
releases M models: by basic composition it costs M x epsilon.

Monte Carlo confidence of a shape: the fraction of B bootstrap resamples of the M models
(with replacement) that give the same shape, and a 95 % percentile interval of a difference. A
shape or ordering the paper claims matches only when the models give it and at least
:data:`RESOLVED` of the resamples do too (:func:`compare_shape`; the Monte Carlo analogue of an
ordering that holds in every seed): a shape the models do not resolve is no reproduction.
The models' randomness is each replica's own seed, so the rows are deterministic; with Ray
installed the replicas train on Ray workers (:func:`replica_backend`), with the same models.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from privfl.reproduce.rows import DIFFERS, MATCH, Reproduction, Row, compare

__all__ = ["CLIPPINGS", "RESOLVED", "Sweep", "bootstrap", "compare_shape", "k_summary",
           "quick_rows", "replica_backend", "shape", "paper_plan_rows"]

#: replicas per point (user level) and per instance-level point; bootstrap resamples
MODELS, INSTANCE_MODELS, RESAMPLES = 100, 30, 100
#: the share of bootstrap resamples that must give a claimed shape for its row to match
RESOLVED = 0.95
#: Table 4's sigma grid (the paper's epsilons), privfl's extension of it, and Table 7's sigmas
#: run at instance level
USER_SIGMAS = (0.5, 0.6, 0.8, 1.0, 1.5, 1.8, 2.3, 3.0)
EXTENDED_SIGMAS = (5.0, 8.0)
INSTANCE_SIGMAS = (1.0, 3.0, 5.0, 8.0, 15.0)
#: Figure 2's clipping methods (Section 6.2.2), at Table 4's sigma = 1.8 (epsilon 0.6298)
CLIPPINGS = ("flat", "per-layer", "flat-median", "per-layer-median")
FIGURE2_SIGMA = 1.8
USER_DELTA, INSTANCE_DELTA = 0.0029, 1e-5
INSTANCE_RATE, INSTANCE_STEPS = 3 / 76, 78
SCALE = ("quick scale: logistic regression on the MNIST 5k subset's digits 0 and 1 (the paper: a "
         "CNN on all of MNIST's), {models} models per point (the paper: 1,000); epsilon: the "
         "paper's accounting of one model (RDP over the orders 1.1-63, classic conversion, "
         "Poisson sampling, add/remove one unit, every round's model released); a "
         "certification releases its {models} models: {models} x epsilon by basic composition")
PEAK, AT_SMALLEST, AT_LARGEST = ("peaks at an interior epsilon", "largest at the smallest "
                                 "epsilon", "largest at the largest epsilon")


def user_config(z: float, clipping: str = "flat") -> dict[str, Any]:
    """UserDP-FedAvg at Table 4's privacy setting (Poisson q = 0.1, T = 3, delta = 0.0029) on
    the MNIST 5k subset's digits 0 and 1, 100 users of 8 records, logistic regression."""
    return {
        "name": f"xie2023-quick-certify-user-z{z:g}-{clipping}", "seed": 0,
        "data": {"dataset": "mnist-5k", "classes": [0, 1], "partition": "iid", "clients": 100,
                 "train_size": 8, "test_size": 1},
        "model": {"name": "logreg"},
        "training": {"local_steps": 5, "batch_size": 8, "sampling": "without-replacement",
                     "optimizer": "sgd", "lr": 0.5},
        "privacy": {"enabled": True, "noise_multiplier": z, "clip_norm": 1.0,
                    "delta": USER_DELTA, "accountants": ["rdp", "pld"]},
        "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_sampling": "poisson",
                      "client_rate": 0.1, "server_lr": 1.0, "clipping": clipping},
        "run": {"threads": 1},
    }


def instance_config(z: float) -> dict[str, Any]:
    """InsDP-FedAvg at Table 7's privacy setting (Poisson batches q = 3/76, V = 26, T = 3,
    delta = 1e-5) on the MNIST 5k subset's digits 0 and 1, 10 users of 76 records, logistic
    regression."""
    return {
        "name": f"xie2023-quick-certify-instance-z{z:g}", "seed": 0,
        "data": {"dataset": "mnist-5k", "classes": [0, 1], "test_fraction": 0.21,
                 "partition": "iid", "clients": 10, "train_size": 76, "test_size": None},
        "model": {"name": "logreg"},
        "training": {"local_steps": 26, "batch_size": 3, "lr": 0.02, "sampling": "poisson",
                     "optimizer": "momentum", "momentum": 0.9, "weight_decay": 0.0005},
        "privacy": {"enabled": True, "noise_multiplier": z, "clip_norm": 0.7,
                    "delta": INSTANCE_DELTA, "accountants": ["rdp", "pld"]},
        "federated": {"algorithm": "insdp-fedavg", "rounds": 3, "server_lr": 1.0},
        "run": {"threads": 1},
    }


def replica_backend() -> Any:
    """Ray's backend when Ray is installed (the replicas' engine calls sharded over its
    workers; the same models bit for bit), else None (the local backend)."""
    if importlib.util.find_spec("ray") is None:
        return None
    from privfl.backends import make_backend

    return make_backend("ray")


@dataclass(frozen=True)
class Sweep:
    """The replicas of one curve: per point its epsilon, label and (M, n, C) probabilities."""

    epsilons: tuple[float, ...]
    labels: tuple[str, ...]
    probabilities: tuple[np.ndarray, ...]
    truth: np.ndarray
    delta: float
    unit: str

    def accuracies(self, point: int) -> np.ndarray:
        """``[M]``: each replica's own accuracy on the test points at ``point`` (one model's,
        not the ensemble's)."""
        predicted = np.argmax(self.probabilities[point], axis=2)  # ties: the lowest class
        return (predicted == self.truth[None, :]).mean(axis=1)


def train_sweep(configs: Sequence[dict[str, Any]], epsilons: Sequence[float],
                labels: Sequence[str], models: int, delta: float, unit: str,
                backend: Any = None, progress: Callable[[str], None] | None = None) -> Sweep:
    """Train ``models`` replicas of each configuration and keep their test probabilities."""
    from privfl.config import config_from_dict
    from privfl.config.algorithms import register_builtin_algorithms
    from privfl.robustness.montecarlo import train_replicas

    register_builtin_algorithms()
    probabilities, truth = [], None
    for raw in configs:
        if progress:
            progress(f"certification replicas: {raw['name']} ({models} models)")
        result = train_replicas(config_from_dict(raw), models, layout="batched", backend=backend)
        probabilities.append(np.asarray(result.probabilities["test"], dtype=np.float64))
        truth = result.labels["test"]
    return Sweep(tuple(epsilons), tuple(labels), tuple(probabilities), np.asarray(truth), delta,
                 unit)


#: the two summaries of a certified-accuracy curve (:func:`k_summary`)
LARGEST, AREA = 0, 1


def k_summary(mean: np.ndarray, models: int, truth: np.ndarray, epsilon: float, delta: float,
              method: str, unit: str = "user") -> tuple[float, float]:
    """From the M models' mean probabilities ``mean`` (n, C): the largest certified K (Eq. 6,
    in added/removed adversaries) over the correctly predicted test points (0 when none), and
    the area under the certified-accuracy curve, ``int_0^inf CertAcc(k) dk = mean_i 1{c_i =
    y_i} max(K_i, 0)`` (the average certified k)."""
    from privfl.robustness.certified_accuracy import (
        EnsembleScores,
        certified_accuracy,
        certify_ensemble,
    )

    scores = EnsembleScores.from_mean(np.minimum(np.maximum(mean, 0.0), 1.0), models)
    certificate = certify_ensemble(scores, epsilon, delta, method=method, confidence=0.99,
                                   unit=unit)
    found = certified_accuracy(certificate, truth, k=[0.0]).largest_certified_k
    correct = certificate.predictions == truth
    area = float(np.mean(np.where(correct, np.maximum(certificate.certified_k, 0.0), 0.0)))
    return (0.0 if found is None else max(found, 0.0)), area


def curve(sweep: Sweep, method: str, weights: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """``(points, 2)``: :func:`k_summary` at each point of ``sweep`` (``weights``: per point,
    the bootstrap multiplicity of each model; default each model once)."""
    ks = []
    for i, probabilities in enumerate(sweep.probabilities):
        models = probabilities.shape[0]
        w = np.ones(models) if weights is None else weights[i]
        mean = np.tensordot(w, probabilities, axes=1) / models
        ks.append(k_summary(mean, models, sweep.truth, sweep.epsilons[i], sweep.delta, method,
                            sweep.unit))
    return np.array(ks)


def bootstrap(sweep: Sweep, method: str, resamples: int = RESAMPLES,
              seed: int = 0) -> np.ndarray:
    """``(resamples, points, 2)`` :func:`curve` s, each from the M models of every point
    resampled with replacement (numpy's PCG64 at ``seed``)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(resamples):
        weights = [rng.multinomial(p.shape[0], np.full(p.shape[0], 1.0 / p.shape[0]))
                   for p in sweep.probabilities]
        rows.append(curve(sweep, method, weights))
    return np.array(rows)


def shape(epsilons: Sequence[float], ks: Sequence[float]) -> str:
    """Where the largest certified k peaks along epsilon: :data:`PEAK` (strictly above the
    values at both the smallest and the largest epsilon), else :data:`AT_SMALLEST` or
    :data:`AT_LARGEST` (the end with the larger value; the smallest epsilon on a tie)."""
    eps = np.asarray(epsilons, dtype=float)
    values = np.asarray(ks, dtype=float)
    if eps.shape != values.shape or eps.size < 3:
        raise ValueError(f"epsilons and ks have shapes {eps.shape}, {values.shape}: must be "
                         "equal, with at least 3 points")
    order = np.argsort(eps)
    values = values[order]
    top = values.max()
    if top > values[0] and top > values[-1]:
        return PEAK
    return AT_SMALLEST if values[0] >= values[-1] else AT_LARGEST


def peak_epsilon(epsilons: Sequence[float], ks: Sequence[float]) -> float:
    """The epsilon of the largest certified k (the smallest such epsilon on a tie)."""
    eps = np.asarray(epsilons, dtype=float)
    values = np.asarray(ks, dtype=float)
    return float(eps[values == values.max()].min())


def _share(values: Sequence[Any], target: Any) -> str:
    return f"{100 * np.mean([v == target for v in values]):.0f} %"


def compare_shape(quantity: str, source: str, claim: str, found: str,
                  resampled: Sequence[str], *, reason: str, basis: str = "printed") -> Row:
    """The row of a shape or ordering ``claim`` that the M models give as ``found`` and their
    bootstrap resamples as ``resampled``: ``match`` only when ``found`` is the claim and at
    least :data:`RESOLVED` of the resamples give it; else ``differs`` (a claim the models give
    in fewer resamples is not resolved at this scale, and the reason says so)."""
    share = float(np.mean([r == claim for r in resampled])) if len(resampled) else 0.0
    reason = (f"{reason}; {100 * share:.0f} % of {len(resampled)} bootstrap resamples give the "
              f"claimed {claim!r}")
    row = compare(quantity, source, claim, found, kind="training", basis=basis, reason=reason)
    if row.verdict == MATCH and share < RESOLVED:
        return replace(row, verdict=DIFFERS, reason=f"{reason}: not resolved by these models "
                       f"(a match needs {100 * RESOLVED:.0f} %)")
    return row


def _interval(values: np.ndarray) -> tuple[float, float]:
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def _epsilon(z: float, q: float, steps: int, delta: float) -> float:
    from privfl.reproduce.xie2023_tables import _epsilon as paper_epsilon

    return paper_epsilon("rdp", z, q, steps, delta, True)


SUMMARIES = {LARGEST: "the largest certified k", AREA: "the average certified k (area under "
                                                        "the certified-accuracy curve)"}
HOW = {"estimate": "Eq. 6 at the Monte Carlo means (an estimate, as the paper's main figures)",
       "hoeffding": "Hoeffding bounds at 99 % per test point (simultaneous over classes; a "
                    "bound per point), as Figure 8"}


def _peak_row(rep: Reproduction, sweep: Sweep, ks: np.ndarray, boot: np.ndarray,
              summary: int, points: int, *, quantity: str, source: str, scale: str,
              method: str, basis: str = "printed", printed_peak: str | None = None) -> None:
    """The shape row (and with ``printed_peak`` the peak-epsilon row) of one summary over the
    first ``points`` points of ``sweep``."""
    eps = sweep.epsilons[:points]
    values, resampled = ks[:points, summary], boot[:, :points, summary]
    found, peak = shape(eps, values), peak_epsilon(eps, values)
    shapes = [shape(eps, row) for row in resampled]
    peaks = [peak_epsilon(eps, row) for row in resampled]
    listed = ", ".join(f"{e:.4g}: {k:.2f}" for e, k in zip(eps, values, strict=True))
    confidence = (f"{_share(shapes, found)} of {len(resampled)} bootstrap resamples of the "
                  f"models give the same shape, {_share(peaks, peak)} the same peak epsilon")
    reason = (f"{scale}; {HOW[method]}; {SUMMARIES[summary]} by epsilon (the paper's "
              f"accounting) {listed}; {confidence}")
    rep.add(compare_shape(f"where {SUMMARIES[summary]} peaks along epsilon, {quantity}", source,
                          PEAK, found, shapes, basis=basis, reason=reason))
    if printed_peak is not None:
        rep.add(compare(
            f"epsilon at which {SUMMARIES[summary]} peaks, {quantity}", source, printed_peak,
            peak, tolerance=None, kind="training",
            reason=f"{scale}: not the paper's models, so not its peak epsilon; {reason}"))


def _clipping_rows(rep: Reproduction, sweep: Sweep, scale: str) -> np.ndarray:
    """Figure 2's claims from the four clipping methods' replicas, ordered by the average
    certified k (the largest k of most methods sits at the cap K_max)."""
    ks = curve(sweep, "estimate")
    boot = bootstrap(sweep, "estimate")
    names = sweep.labels
    area = ks[:, AREA]
    best = names[int(np.argmax(area))]
    listed = ", ".join(f"{n}: {a:.3f} (largest {k:.2f})"
                       for n, a, k in zip(names, area, ks[:, LARGEST], strict=True))
    source = "Figure 2 and Section 6.2.2 (MNIST, epsilon = 0.63)"
    why = (f"{scale}; sigma = {FIGURE2_SIGMA:g}, the paper's epsilon 0.6298 for every method, "
           "as the paper charges it (the median methods' threshold is accounted by no one, so "
           "their certificates are estimates); Eq. 6 at the Monte Carlo means; the average "
           "certified k (area under the certified-accuracy curve) and the largest, which the "
           f"cap K_max = 4.537 limits: {listed}")
    winners = [names[int(np.argmax(r[:, AREA]))] for r in boot]
    rep.add(compare_shape(
        "clipping method that certifies the most (average certified k), UserDP-FedAvg, MNIST",
        source, "flat", best, winners,
        reason=f"{why}; {_share(winners, best)} of {len(boot)} bootstrap resamples give the "
               "same method"))
    for (a, b), claim in ((("flat", "per-layer"), "differ"),
                          (("flat-median", "per-layer-median"), "nearly identical")):
        i, j = names.index(a), names.index(b)
        low, high = _interval(boot[:, i, AREA] - boot[:, j, AREA])
        found = "nearly identical" if low <= 0.0 <= high else "differ"
        rep.add(compare(
            f"{a} against {b} clipping (same S), average certified k, UserDP-FedAvg, MNIST",
            source, claim, found, kind="training",
            reason=f"{why}; difference {area[i] - area[j]:+.3f}, 95 % bootstrap interval "
                   f"[{low:+.3f}, {high:+.3f}] ('differ' when it excludes 0, else 'nearly "
                   "identical')"))
    return ks


def quick_rows(rep: Reproduction,
               progress: Callable[[str], None] | None = None) -> tuple[Sweep, Sweep]:
    """Figures 1, 2, 5(a) and 8 at quick scale (see the module docstring); returns the user-
    and instance-level sweeps (their replicas' accuracies give Tables 4 and 7 a spread)."""
    from privfl.reproduce.xie2023_tables import TABLES

    sigmas = USER_SIGMAS + EXTENDED_SIGMAS
    user_eps = [float(TABLES["Table 4"][4][z]) if z in USER_SIGMAS  # printed = fitted
                else _epsilon(z, 0.1, 3, USER_DELTA) for z in sigmas]
    ins_eps = [_epsilon(z, INSTANCE_RATE, INSTANCE_STEPS, INSTANCE_DELTA) for z in INSTANCE_SIGMAS]
    backend = replica_backend()
    try:
        user = train_sweep([user_config(z) for z in sigmas], user_eps,
                           [f"sigma = {z:g}" for z in sigmas], MODELS, USER_DELTA, "user",
                           backend, progress)
        others = train_sweep([user_config(FIGURE2_SIGMA, c) for c in CLIPPINGS[1:]],
                             [user_eps[sigmas.index(FIGURE2_SIGMA)]] * (len(CLIPPINGS) - 1),
                             CLIPPINGS[1:], MODELS, USER_DELTA, "user", backend, progress)
        ins = train_sweep([instance_config(z) for z in INSTANCE_SIGMAS], ins_eps,
                          [f"sigma = {z:g}" for z in INSTANCE_SIGMAS], INSTANCE_MODELS,
                          INSTANCE_DELTA, "instance", backend, progress)
    finally:
        if backend is not None:
            backend.close()
    at = sigmas.index(FIGURE2_SIGMA)
    clippings = Sweep((user_eps[at],) * len(CLIPPINGS), CLIPPINGS,
                 (user.probabilities[at], *others.probabilities), user.truth, USER_DELTA, "user")
    scale = (f"{SCALE.format(models=MODELS)}; 100 users of 8 records, Table 4's q = 0.1, T = 3, "
             "delta = 0.0029")
    grid = len(USER_SIGMAS)
    what = "UserDP-FedAvg, MNIST, Table 4's sigma grid (k: added/removed users)"
    figure1 = "Figure 1 and Section 6.2.1 (MNIST: the largest k, about 4, at epsilon 0.6298)"
    curves = {}
    for method in ("estimate", "hoeffding"):
        ks = curves[method] = curve(user, method)
        boot = bootstrap(user, method)
        if method == "estimate":
            _peak_row(rep, user, ks, boot, LARGEST, grid, quantity=what, source=figure1,
                      scale=scale, method=method, printed_peak="0.6298")
            _peak_row(rep, user, ks, boot, AREA, grid, quantity=what, source=figure1,
                      scale=scale, method=method)
            _peak_row(rep, user, ks, boot, LARGEST, len(sigmas), scale=scale, method=method,
                      quantity="UserDP-FedAvg, MNIST, Table 4's sigma grid and privfl's sigma "
                               "= 5 and 8 (k: added/removed users)", basis="extension",
                      source=f"{figure1}; the grid extended by privfl past the paper's")
        else:
            _peak_row(rep, user, ks, boot, LARGEST, grid, quantity=f"{what}, 99 % Hoeffding",
                      source="Figure 8 (99 % confidence: the same trends)", scale=scale,
                      method=method)
    rep.add(compare(
        "largest certified k at epsilon = 0.6298, UserDP-FedAvg, MNIST",
        "Figure 1 and Section 6.2.1 (maximal certified k about 4)", "4",
        float(curves["estimate"][at, LARGEST]), tolerance=None, kind="training",
        reason=f"{scale}: not the paper's models, so not its k ({HOW['estimate']}; the cap "
               "K_max = 4.537 at this epsilon and delta)"))
    smaller = bool(np.all(curves["hoeffding"][:grid, LARGEST]
                          <= curves["estimate"][:grid, LARGEST]))
    rep.add(compare(
        "largest certified k at 99 % confidence against the estimate, every epsilon of Table 4",
        "Figure 8 (the same trends, with smaller maximal k)", "smaller",
        "smaller" if smaller else "not smaller", kind="training",
        reason=f"{scale}; {HOW['hoeffding']}: by epsilon "
               + ", ".join(f"{k:.2f}" for k in curves["hoeffding"][:grid, LARGEST])
               + "; the estimate: " + ", ".join(f"{k:.2f}" for k in
                                               curves["estimate"][:grid, LARGEST])))
    clip_ks = _clipping_rows(rep, clippings, scale)
    ins_ks = curve(ins, "estimate")
    _peak_row(rep, ins, ins_ks, bootstrap(ins, "estimate"), LARGEST, len(INSTANCE_SIGMAS),
              quantity="InsDP-FedAvg, MNIST, 5 of Table 7's sigmas (k: added/removed records)",
              source="Figure 5(a) and Section 6.3.3 (MNIST instance level: the largest k at "
                     "epsilon 0.3593)", printed_peak="0.3593", method="estimate",
              scale=f"{SCALE.format(models=INSTANCE_MODELS)}; 10 users of 76 records, Table "
                    "7's V = 26, T = 3 with q = 3/76 (the paper: 50/1266), delta = 1e-5")
    _figures(rep, user, curves, ins, ins_ks, clip_ks)
    return user, ins


def _figures(rep: Reproduction, user: Sweep, curves: dict[str, np.ndarray], ins: Sweep,
             ins_ks: np.ndarray, clip_ks: np.ndarray) -> None:
    rep.curves["xie2023-certified-k"] = {
        "title": "Figures 1, 5(a), 8 at quick scale: the largest certified k against epsilon",
        "xtitle": "epsilon (the paper's accounting)", "ytitle": "largest certified k",
        "log": False, "traces": [
            {"name": "user level, estimate", "x": list(user.epsilons),
             "y": curves["estimate"][:, LARGEST].tolist()},
            {"name": "user level, 99 % Hoeffding", "x": list(user.epsilons),
             "y": curves["hoeffding"][:, LARGEST].tolist()},
            {"name": "user level, average certified k", "x": list(user.epsilons),
             "y": curves["estimate"][:, AREA].tolist()},
            {"name": "instance level, estimate", "x": list(ins.epsilons),
             "y": ins_ks[:, LARGEST].tolist()},
            {"name": "paper: k about 4 at 0.6298 (user)", "x": [0.6298], "y": [4.0],
             "dash": True}],
        "note": f"{MODELS} (user) and {INSTANCE_MODELS} (instance) models per point; k in "
                "added/removed users (records); the paper: 1,000 CNNs on MNIST 0 vs 1"}
    rep.curves["xie2023-clipping"] = {
        "title": "Figure 2 at quick scale: average certified k by clipping method (epsilon "
                 "0.6298)", "xtitle": "method (0 flat, 1 per-layer, 2 flat-median, "
                 "3 per-layer-median)", "ytitle": "average certified k", "log": False,
        "traces": [{"name": "estimate", "x": list(range(len(CLIPPINGS))),
                    "y": clip_ks[:, AREA].tolist()}]}


#: the paper-scale certification runs: (figure, the paper's claim, what runs, data, fallback,
#: hours on 2 CPU cores: an estimate from docs/experiments/xie2023-certification.md's timings)
PAPER_FIGURES = (
    ("Figures 1 and 8", "the largest certified k peaks at epsilon 0.6298 (about 4 users)",
     "UserDP-FedAvg certified accuracy against k, Table 4's 8 sigmas x 1,000 CNNs",
     "MNIST digits 0 and 1 (download)", "Fashion-MNIST 0 vs 1 "
     "(configs/xie2023/fmnist01-user-table4-*.yaml, here)", 40.0),
    ("Figure 2", "flat clipping certifies the largest k on MNIST, median clipping on CIFAR-10 "
     "and Sent140", "the four clipping methods at epsilon 0.63 / 0.53 / 0.40, 1,000 models each",
     "MNIST, CIFAR-10, Sent140 (download)", "Fashion-MNIST 0 vs 1 for MNIST; none for "
     "CIFAR-10 and Sent140", 20.0),
    ("Figure 3", "more heterogeneous data certify a smaller k", "i.i.d. against Dir(1) and "
     "Dir(0.5) splits (the paper's per-class Dir(alpha) recipe), Table 4's sigmas, 1,000 "
     "models each (quick scale: the same recipe, 50 logistic regressions, "
     "xie2023_heterogeneity)", "MNIST, CIFAR-10 (download)",
     "Fashion-MNIST 0 vs 1 (data.partition: dirichlet-classes)", 80.0),
    ("Figures 4 and 7", "the attack-inefficacy bound is tight for small k and strong attacks",
     "backdoor (alpha, gamma), DBA and label flip, 100 models per k = 0..10, and k = 4 against "
     "epsilon (quick scale: BKD and LF, k = 0..4, 40 logistic regressions, "
     "xie2023_inefficacy)", "MNIST, CIFAR-10, Sent140 (download)",
     "Fashion-MNIST 0 vs 1 (privfl certify --attack)", 60.0),
    ("Figures 5 and 10", "instance level: the largest certified k at epsilon 0.3593",
     "InsDP-FedAvg certified accuracy, inefficacy (BKD, LF at epsilon 0.23; k = 10 against "
     "epsilon) and Corollary 7's k against tau, Table 7's sigmas, 1,000 models (quick scale: "
     "Figure 10's k against tau at two sigmas)",
     "MNIST (download)", "the MNIST 5k subset (configs/xie2023/mnist5k01-ins-table7-*.yaml)",
     30.0),
    ("Figure 6", "instance level on CIFAR-10: the largest certified k at epsilon 0.6546",
     "InsDP-FedAvg on CIFAR-10 airplane vs bird, Table 8's sigmas", "CIFAR-10 (download) and "
     "a CIFAR-100-pretrained CNN", "none (GPU advised)", 100.0),
)


def paper_plan_rows(rep: Reproduction) -> None:
    """The paper-scale certification runs as planned rows and plan lines (not run here: the
    paper's data and M = 1,000 models; estimated hours on 2 CPU cores, GPU advised)."""
    for figure, claim, what, data, fallback, hours in PAPER_FIGURES:
        line = (f"privfl certify ({figure}): {what}; about {hours:.0f} h on 2 CPU cores "
                f"(estimate; GPU advised); data: {data}; fallback: {fallback}")
        rep.plan.append(line)
        rep.add(compare(f"{figure} at paper scale: {claim}", figure, claim, None,
                        tolerance=None, kind="training", reason=f"not run: planned ({line})"))
