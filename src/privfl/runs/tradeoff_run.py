"""The empirical utility-privacy trade-off of Zhang, Chen and Yang 2022 on a real federated model.

``privfl tradeoff`` (:func:`run_tradeoff`):

1. trains the base model with FedAvg (``dp-fedavg`` on the seam; ``W_{t-1}``, the global model
   after the configured rounds) and computes the federated optimum ``W*`` of the size-weighted
   objective (their section 3; L-BFGS on the pooled training records, with the configured
   weight decay, which makes it unique);
2. for every client, takes the per-record gradients ``g_i`` at ``W_{t-1}`` (the engine's
   per-example gradients plus the weight decay) and draws ``R`` unprotected parameters
   ``W = W_{t-1} - eta mean_{i in S} g_i`` with ``S`` Poisson at rate ``p0`` (Algorithm 2);
3. applies each mechanism of the grid (Gaussian distortion at Lemma 6.7's ``x``, the noise of
   Lemma 6.8, of the exact isotropic calibration and of the calibration for per-coordinate
   variances for each TV target, the random mask, record sampling at rate ``p``) and measures,
   per client (:mod:`privfl.distortion.measure`): the leakage
   ``eps_p`` of a Bayesian attacker, the TV distance, the utility loss (literal and the
   Appendix L proxy) and the variance; averages over clients (their eqs. 4 and 6);
4. compares the measurements with the paper's bounds (which held, on how many clients), the
   accuracy of the aggregated protected model (Algorithm 1 weights), and, with
   ``protected_rounds``, the accuracy of training from scratch with the protection applied every
   round through the client-side hook (:mod:`privfl.algorithms.protection`).

Every point draws its protection from the same seed (common random numbers): within a
mechanism the points share their noise, mask and sampling draws, so the standard error of a
difference of two leakages, from paired bootstrap replicates, is far smaller than either's
(:mod:`privfl.distortion.orderings`).

Nothing here is a privacy guarantee: the leakage is the paper's Bayesian measure for one finite
attacker, estimated by Monte Carlo (see :mod:`privfl.distortion.measure` for the attacker and
what each number is).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.func import functional_call

from privfl.config import ExperimentConfig
from privfl.distortion.calibrate import (
    anisotropy_message,
    noise_variance_exact,
    noise_variance_paper,
)
from privfl.distortion.diagonal import noise_variance_diagonal
from privfl.distortion.efficiency import efficiency
from privfl.distortion.measure import (
    SIDE_DRAWS,
    ClientModel,
    Measurement,
    measure_point,
    prepare_client,
)
from privfl.distortion.mechanisms import (
    ClientProtection,
    GaussianDistortion,
    PoissonRecordSampling,
    RandomMask,
    aggregate,
)
from privfl.distortion.orderings import leakage_orderings, paired_se
from privfl.distortion.sampling import sampling_probability
from privfl.runs.tradeoff_config import TradeoffSettings

__all__ = ["GridPoint", "grid_points", "run_tradeoff"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class GridPoint:
    """One mechanism at one parameter value (``warning``: an isotropic rule applied to
    anisotropic parameters)."""

    mechanism: str  # gaussian | gaussian-paper | gaussian-isotropic | gaussian-diagonal | ...
    parameter: str  # x | gap | keep_rate | rate
    value: float
    protection: ClientProtection
    noise_variance: float | None = None
    warning: str = ""

    @property
    def label(self) -> str:
        return f"{self.mechanism} {self.parameter}={self.value:g}"


def grid_points(settings: TradeoffSettings, variances: list[np.ndarray]) -> list[GridPoint]:
    """The grid, from each client's per-coordinate variances: Gaussian at each ``x``
    (``sigma_eps^2 = x sigma^2 / sqrt(d)``, ``sigma^2`` the mean variance); for each TV target,
    Lemma 6.8's noise (refused for targets >= 0.01: no point) and the exact isotropic
    calibration (both with ``sigma^2`` the mean variance, warned when the variances differ), and
    the smallest noise with ``TV >= gap`` on every client under its per-coordinate variances;
    the mask at each keep rate; record sampling at each rate."""
    pooled = np.concatenate(variances)
    sigma2, dimension = float(pooled.mean()), int(variances[0].size)
    points = []
    for x in settings.gaussian:
        noise = x * sigma2 / math.sqrt(dimension)
        points.append(GridPoint("gaussian", "x", x, ClientProtection(
            distortions=(GaussianDistortion(noise),)), noise))
    for gap in settings.gaps:
        rules = [("gaussian-isotropic", noise_variance_exact(sigma2, gap, dimension))]
        if gap < 0.01:
            rules.insert(0, ("gaussian-paper", noise_variance_paper(sigma2, gap, dimension)))
        for name, noise in rules:
            warning = anisotropy_message(pooled, f"{name} (sigma^2 = mean variance)")
            points.append(GridPoint(name, "gap", gap, ClientProtection(
                distortions=(GaussianDistortion(noise),)), noise, warning))
        noise = max(noise_variance_diagonal(v, gap) for v in variances)
        points.append(GridPoint("gaussian-diagonal", "gap", gap, ClientProtection(
            distortions=(GaussianDistortion(noise),)), noise))
    for rho in settings.mask:
        points.append(GridPoint("mask", "keep_rate", rho, ClientProtection(
            distortions=(RandomMask(rho),))))
    for p in settings.sampling:
        points.append(GridPoint("sampling", "rate", p, ClientProtection(
            sampling=PoissonRecordSampling(p))))
    return points


# --------------------------------------------------------------------------------- base model
def _train(config: ExperimentConfig, data: Any, protection: ClientProtection | None = None,
           rounds: int | None = None) -> tuple[Any, dict[str, Any]]:
    """DP-FedAvg from the configuration (FedAvg with privacy off), with the client-side
    ``protection`` hook, trained ``rounds`` rounds (default the configured ones); returns the
    algorithm and the last round's metrics."""
    from privfl.algorithms.dp_fedavg import DpFedAvg

    algorithm = DpFedAvg.from_config(config, data)
    algorithm.protection = protection
    metrics: dict[str, Any] = {}
    for _ in range(config.federated.rounds if rounds is None else rounds):
        metrics = algorithm.run_round()
    return algorithm, metrics


def _optimum(model: torch.nn.Module, trainer: Any, start: torch.Tensor, x: torch.Tensor,
             y: torch.Tensor, weight_decay: float) -> tuple[torch.Tensor, float]:
    """``W* = argmin (1/n) sum_i CE(W; x_i, y_i) + (lambda / 2) ||W||^2`` by L-BFGS in float64
    (the federated objective of their section 3: the pooled mean is the size-weighted one).
    Returns ``(W*, ||gradient|| at W*)``."""
    net = copy.deepcopy(model).double()
    xd = x.double()
    w = start.detach().double().clone().requires_grad_(True)

    def objective() -> torch.Tensor:
        params = {n: v[0] for n, v in trainer.unflatten(w.unsqueeze(0)).items()}
        loss = torch.nn.functional.cross_entropy(functional_call(net, params, (xd,)), y)
        return loss + 0.5 * weight_decay * (w * w).sum()

    optimizer = torch.optim.LBFGS([w], lr=1.0, max_iter=2000, tolerance_grad=1e-12,
                                  tolerance_change=1e-15, history_size=50,
                                  line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = objective()
        loss.backward()
        return loss

    for _ in range(3):
        optimizer.step(closure)
    optimizer.zero_grad()
    objective().backward()
    return w.detach(), float(w.grad.norm())


@dataclass
class _Base:
    """The trained base model and everything measured from it."""

    data: Any
    algorithm: Any
    metrics: dict[str, Any]
    w_prev: torch.Tensor
    w_star: torch.Tensor
    gradient_norm: float


def _base_model(config: ExperimentConfig, say: Progress) -> _Base:
    from privfl.algorithms.builders import build_dataset, build_model

    if not config.training.weight_decay > 0:
        raise ValueError(f"training.weight_decay = {config.training.weight_decay!r} is out of "
                         "range for privfl tradeoff: must be > 0 (it makes the optimum W* "
                         "unique)")
    data = build_dataset(config)
    say(f"training the base model: {config.federated.rounds} FedAvg rounds on {data.name}")
    algorithm, metrics = _train(config, data)
    w_prev = algorithm.global_model.detach().double().clone()
    tensors = algorithm.tensors
    say("computing the federated optimum W* (L-BFGS)")
    w_star, norm = _optimum(build_model(config, data), algorithm.trainer, w_prev,
                            torch.cat([x for x, _ in tensors.train]),
                            torch.cat([y for _, y in tensors.train]),
                            config.training.weight_decay)
    return _Base(data, algorithm, metrics, w_prev, w_star, norm)


def _aggregate_accuracy(base: _Base, rows: list[torch.Tensor], sizes: np.ndarray,
                        weights: str) -> float:
    """Mean test accuracy of the aggregated models, one per replica, over the first
    :data:`~privfl.distortion.measure.SIDE_DRAWS` replicas (``rows``: [R, d] per client)."""
    tensors, trainer = base.algorithm.tensors, base.algorithm.trainer
    if tensors.test_x is None:
        return math.nan
    stacked = torch.stack(rows)[:, :SIDE_DRAWS]  # [K, R', d]
    agg = torch.stack([aggregate(stacked[:, r], sizes, weights)
                       for r in range(stacked.shape[1])])
    return float(trainer.evaluate(agg.to(trainer.dtype), tensors.test_x,
                                  tensors.test_y).accuracy.mean())


# --------------------------------------------------------------------------------- the run
def run_tradeoff(config: ExperimentConfig, settings: TradeoffSettings,
                 progress: Progress | None = None) -> dict[str, Any]:
    """Train, measure every grid point, compare with the bounds; a JSON-ready dict."""
    say = progress or (lambda _message: None)
    started = time.perf_counter()
    if config.run.threads:
        torch.set_num_threads(config.run.threads)
    base = _base_model(config, say)
    trained_at = time.perf_counter()
    eta = settings.lr or config.training.lr
    seeds = np.random.SeedSequence(config.seed).spawn(3)
    rng = np.random.default_rng(seeds[0])
    clients = [prepare_client(
        k, base.algorithm.trainer, base.algorithm.tensors, base.w_prev,
        config.training.weight_decay, eta, settings, rng,
        torch.Generator().manual_seed(int(seeds[1].generate_state(1)[0]) + k), base.w_star)
        for k in range(base.data.num_clients)]
    sizes = np.array([c.size for c in clients])
    c1 = float(np.mean([c.c1 for c in clients]))
    say("calibrating the noise for the TV targets under per-coordinate variances")
    points = grid_points(settings, [c.variances for c in clients])
    for point in points:
        if point.warning:
            say(f"  warning: {point.warning}")
    say(f"measuring {len(points)} grid points x {len(clients)} clients x {settings.replicas} "
        "replicas")
    results = []
    bytes_per_value = torch.finfo(base.algorithm.trainer.dtype).bits // 8
    common = int(seeds[2].generate_state(1)[0])
    for point in points:
        # common random numbers: every point starts from the same seed, so within a mechanism
        # the points share their noise (mask, sampling) uniforms draw by draw, and their
        # leakage differences are far less noisy than each leakage (paired standard errors)
        generator = torch.Generator().manual_seed(common)
        point_started = time.perf_counter()
        pairs = [measure_point(client, point, base.w_star, settings, generator)
                 for client in clients]
        entry = _summarise(point, [m for m, _ in pairs], c1)
        costs = [efficiency(_mechanism(point), int(base.w_prev.numel()), c.size,
                            settings.sampling_rate, bytes_per_value) for c in clients]
        entry["efficiency"] = {key: float(np.mean([c[key] for c in costs])) for key in costs[0]}
        entry["efficiency"]["measure_seconds"] = time.perf_counter() - point_started
        entry["accuracy"] = _aggregate_accuracy(base, [rows for _, rows in pairs], sizes,
                                                settings.aggregation)
        if settings.protected_rounds:
            _, metrics = _train(config, base.data, point.protection, settings.protected_rounds)
            entry["trained_accuracy"] = float(metrics["global_accuracy"])
        results.append(entry)
        say(f"  {point.label}: eps_p {entry['eps_p']:.4g} (s.e. {entry['eps_p_se']:.2g})"
            f"{' [within 1 s.e. of C1]' if entry['within_one_se_of_c1'] else ''}, eps_u "
            f"{entry['eps_u']:.4g}, TV {entry['tv']:.4g}, accuracy {entry['accuracy']:.3f}")
    return {
        "name": config.name,
        "description": config.description,
        "setting": _setting(config, settings, base, sizes, eta),
        "unprotected": {
            "c1": c1, "c1_se": _mean_se([c.c1_se for c in clients]),
            "c1_bias": float(np.mean([c.c1_bias for c in clients])),
            "xi": float(np.mean([c.xi for c in clients])),
            "xi_exact": all(c.xi_exact for c in clients),
            "sigma2": float(np.mean([c.sigma2 for c in clients])),
            "expected_variance": float(np.mean([c.variance for c in clients])),
            "gradient_sq_sum": float(np.mean([c.gradient_sq_sum for c in clients])),
            "accuracy": _aggregate_accuracy(base, [c.samples for c in clients], sizes,
                                            settings.aggregation),
            "train_accuracy": float(base.metrics.get("global_accuracy", math.nan)),
            "w_star_gradient_norm": base.gradient_norm,
            "gap": float(np.mean([c.gap for c in clients])),
        },
        "sampling_rules": _sampling_rules(settings, results, c1, clients),
        "points": results,
        "leakage_orderings": _orderings(results, settings.replicas),
        "bounds": bound_summary(results),
        "seconds": {"training": trained_at - started, "total": time.perf_counter() - started},
    }


def _mean_se(errors: list[float]) -> float:
    """Standard error of a mean over clients of independent estimates:
    ``sqrt(sum se_k^2) / K`` (the clients' draws are independent)."""
    return float(math.sqrt(sum(e * e for e in errors)) / len(errors))


def _orderings(results: list[dict[str, Any]], draws: int) -> list[dict[str, Any]]:
    """:func:`leakage_orderings` with paired standard errors; the points' bootstrap
    replicates are removed afterwards (they are not written)."""
    rows = leakage_orderings(results, draws)
    for entry in results:
        entry.pop("eps_p_replicates", None)
        entry.pop("c1_replicates", None)
    return rows


def _mechanism(point: GridPoint) -> Any:
    protection = point.protection
    return protection.sampling or protection.distortions[0]


def _setting(config: ExperimentConfig, settings: TradeoffSettings, base: _Base,
             sizes: np.ndarray, eta: float) -> dict[str, Any]:
    return {
        "data": base.data.name, "clients": base.data.num_clients, "records": sizes.tolist(),
        "model": config.model.name, "dimension": int(base.w_prev.numel()),
        "base_rounds": config.federated.rounds, "replicas": settings.replicas,
        "sampling_rate": settings.sampling_rate, "lr": eta,
        "weight_decay": config.training.weight_decay, "candidates": settings.candidates,
        "tempering": settings.tempering, "attacker": settings.attacker,
        "aggregation": settings.aggregation, "gamma": settings.gamma,
        "nfl_delta": settings.nfl_delta, "c6": settings.c6, "gaps": list(settings.gaps),
        "protected_rounds": settings.protected_rounds, "seed": config.seed,
    }


def _sampling_rules(settings: TradeoffSettings, results: list[dict[str, Any]], c1: float,
                    clients: list[ClientModel]) -> list[dict[str, Any]]:
    """Theorem 6.11's p for each TV target (C6: configured, else the median over the points;
    G: the mean over clients); empty when no finite C6 is known."""
    finite = [p["c6"] for p in results if math.isfinite(p["c6"])]
    c6 = settings.c6 or (float(np.median(finite)) if finite else None)
    if c6 is None:
        return []
    g = float(np.mean([c.gradient_sq_sum for c in clients]))
    return [{"gap": gap, "c6": c6,
             **sampling_probability(c6, c1, max(c1 - gap, 0.0), g, method).to_dict()}
            for gap in settings.gaps for method in ("paper", "corrected")]


def _summarise(point: GridPoint, measured: list[Measurement], c1: float) -> dict[str, Any]:
    """Means over clients (their eqs. 4 and 6) and, per bound, on how many clients it held."""
    def mean(key: str) -> float:
        values = [getattr(m, key) for m in measured]
        return float(np.mean(values)) if all(math.isfinite(v) for v in values) else (
            math.inf if any(v == math.inf for v in values) else math.nan)

    entry: dict[str, Any] = {
        "mechanism": point.mechanism, "parameter": point.parameter, "value": point.value,
        "noise_variance": point.noise_variance, "protection": repr(point.protection),
        "tv_method": measured[0].tv_method, "warning": point.warning,
    }
    for key in ("eps_p", "eps_p_se", "eps_p_bias", "c1", "c1_se", "c1_bias", "shift", "tv",
                "tv_lower", "tv_upper",
                "tv_isotropic", "tv_two_sample", "eps_u",
                "eps_u_se", "eps_u_proxy", "expected_variance", "xi", "c2", "c6", "cd"):
        entry[key] = mean(key)
    # the mean over clients of bootstrap replicates paired across points: the standard errors
    # of the client means (not the mean of the clients' errors, which overstates them)
    for key in ("eps_p", "c1"):
        entry[f"{key}_replicates"] = np.mean([getattr(m, f"{key}_replicates") for m in measured],
                                             axis=0)
        entry[f"{key}_se"] = float(np.std(entry[f"{key}_replicates"]))
    entry["tau"] = c1 - point.value if point.parameter == "gap" else None
    entry["within_one_se_of_c1"] = all(math.isfinite(entry[k]) for k in (
        "eps_p", "eps_p_se", "c1", "c1_se")) and abs(entry["eps_p"] - entry["c1"]) <= paired_se(
        entry["eps_p_replicates"], entry["c1_replicates"])
    bounds: dict[str, dict[str, Any]] = {}
    for m in measured:
        for check in m.checks:
            row = bounds.setdefault(check["name"], {
                "kind": check["kind"], "statement": check["statement"],
                "quantity": check["quantity"],
                "side": check["side"], "held": 0, "clients": 0, "hypothesis": 0, "proven": 0,
                "held_under_hypothesis": 0, "clear_violations": 0, "bound": [],
                "measured": []})
            row["held"] += int(check["held"])
            row["clear_violations"] += int(check["clear_violation"])
            row["held_under_hypothesis"] += int(check["held"] and check["hypothesis"])
            row["clients"] += 1
            row["hypothesis"] += int(check["hypothesis"])
            row["proven"] += int(check["proven"])
            row["bound"].append(check["bound"])
            row["measured"].append(check["measured"])
    for row in bounds.values():
        row["bound"] = float(np.mean(row["bound"]))
        row["measured"] = float(np.mean(row["measured"]))
    entry["bounds"] = bounds
    return entry


def bound_summary(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per bound, over all (point, client) cases: how often it held, its hypothesis held, both
    held, a correct proof covered it, and it was violated by more than 2 standard errors (the
    points where that happened)."""
    table: dict[str, dict[str, Any]] = {}
    for point in points:
        for name, row in point["bounds"].items():
            out = table.setdefault(name, {"name": name, "kind": row["kind"],
                                          "statement": row["statement"],
                                          "quantity": row["quantity"], "side": row["side"],
                                          "cases": 0, "held": 0, "hypothesis": 0,
                                          "held_under_hypothesis": 0, "proven": 0,
                                          "clear_violations": 0, "violated_points": []})
            for key in ("held", "hypothesis", "held_under_hypothesis", "proven",
                        "clear_violations"):
                out[key] += row[key]
            out["cases"] += row["clients"]
            if row["clear_violations"]:
                out["violated_points"].append(f"{point['mechanism']} {point['parameter']}="
                                              f"{point['value']:g}")
    return list(table.values())
