"""Xie et al. 2023's certified attack inefficacy (Theorem 6, Corollary 7, Theorem 4; Figures 4,
7 and 10) at quick scale.

The cost C of a model is the mean over the attack test set (triggered images of the other class
labelled the target, or the source class for a label flip) of the target label's cross-entropy
``-ln p``, each sample's clipped to ``C_bar`` = :data:`~privfl.robustness.pipeline.
CROSS_ENTROPY_BOUND` (the cost of the paper's Figures 4-7; the attacker wants it small), and
``J(D) = E[C(M(D))]`` over the training randomness. Theorem 6 (Section 5.1) lower-bounds it
after k attackers at (epsilon, delta)-DP::

    J(D') >= max{e^{-k eps} J(D) - (1 - e^{-k eps}) / (e^eps - 1) delta C_bar, 0}

(:func:`privfl.robustness.inefficacy.attack_inefficacy_bounds`), and Corollary 7 needs at least::

    k_min(tau) = ln[((e^eps - 1) J tau + C_bar delta tau) / ((e^eps - 1) J + C_bar delta tau)] / eps

attackers to reach ``J(D') <= J(D) / tau`` (:func:`~privfl.robustness.inefficacy.min_attackers`);
Theorem 4 reads both at instance level (k poisoned records, InsDP's epsilon).

Quick scale (every row says so): UserDP-FedAvg of :func:`.xie2023_certification.user_config`
(logistic regression, MNIST 5k digits 0 and 1, 100 users of 8 records, Poisson q = 0.1, delta =
0.0029) at the paper's inferred (sigma, T) of Figure 4: backdoor (BKD) at (2.5, 5), epsilon 0.4344
(caption 0.43), with local poison fraction alpha = 100 % and 50 %, and label flip (LF, digit 1 to
0) at (2.5, 4), epsilon 0.4025 (caption 0.40); :data:`MODELS` replicas for the clean data and for
each k = 1..:data:`ATTACKERS` attackers (the paper: O = 100, k up to 10). Figure 7(a): BKD at
k = 4 for sigma 2, 2.5, 3 (T = 5); Figure 7(d) and 10: Corollary 7 from the clean replicas'
J(D), user level at those three epsilons and instance level (:func:`.xie2023_certification.
instance_config`, a backdoor attack set) at two of Table 7's sigmas.

In the paper's reading (its figures): epsilon by the paper's accounting of one model, one
attacker = one add/remove step, J(D) the Monte Carlo mean (an estimate). privfl's attackers
REPLACE a user's data, so the soundness row also certifies in privfl's sound reading
(:func:`privfl.robustness.pipeline.certify_replicas`: the tightest rigorous per-model epsilon,
replace adversaries, J(D) by a 99 % Hoeffding interval).

Monte Carlo confidence: every replica set shares the configuration's replica seeds (replica r
has the same seed with and without attackers), so the bootstrap resamples the model indices
once for all sets (:func:`paired_means`) and reports a 95 % percentile interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfl.reproduce.rows import Reproduction, compare
from privfl.reproduce.xie2023_certification import (
    INSTANCE_DELTA,
    INSTANCE_MODELS,
    INSTANCE_RATE,
    INSTANCE_STEPS,
    RESAMPLES,
    USER_DELTA,
    _epsilon,
    _interval,
    _share,
    instance_config,
    replica_backend,
    user_config,
)
from privfl.robustness.pipeline import CROSS_ENTROPY_BOUND

__all__ = ["ATTACKERS", "MODELS", "AttackSweep", "gap_change", "lower_bounds", "min_attackers_grid",
           "monotone", "paired_means", "quick_rows", "slope", "train_attack_sweep"]

#: replicas per set; the most attackers k (k = 0..K)
MODELS, ATTACKERS = 40, 4
#: Figure 4's settings: (name, kind, sigma, rounds T, alpha)
FIGURE4 = (("BKD, alpha = 100 %", "backdoor", 2.5, 5, 1.0),
           ("BKD, alpha = 50 %", "backdoor", 2.5, 5, 0.5),
           ("LF, alpha = 100 %", "label-flip", 2.5, 4, 1.0))
#: Figure 7(a): BKD at k = 4 for these sigmas (T = 5)
FIGURE7_SIGMAS, FIGURE7_K = (3.0, 2.5, 2.0), 4  # epsilon ascending
#: Figure 10: Table 7's sigmas at instance level
FIGURE10_SIGMAS = (3.0, 8.0)
#: Corollary 7's targets: J(D') <= J(D) / tau
TAUS = (1.0, 1.5, 2.0, 3.0, 5.0, 10.0)
SCALE = ("quick scale: logistic regression on the MNIST 5k subset's digits 0 and 1 (the paper: a "
         "CNN on all of MNIST's), {what}, {models} models per set (the paper: 100); cost: the "
         "target label's cross-entropy on the attack test set, each sample's clipped to C_bar = "
         f"{CROSS_ENTROPY_BOUND:g}; the paper's reading: epsilon by its accounting of one model, "
         "one attacker = one add/remove step, J(D) the Monte Carlo mean (an estimate)")
USERS = "100 users of 8 records, Poisson q = 0.1, delta = 0.0029"
FIGURE4_SOURCE = ("Figure 4 (a), (c) and Section 6.2.4 (MNIST BKD at epsilon 0.43, LF at 0.40; "
                  "alpha 100 % and 50 %)")


@dataclass
class AttackSweep:
    """The replicas of one attack setting: clean (k = 0) and ``attacked[k]``, with the paper's
    epsilon of one model and its costs ``(k = 0..K, M)``."""

    name: str
    kind: str
    epsilon: float
    delta: float
    clean: Any
    attacked: dict[int, Any] = field(default_factory=dict)

    @property
    def ks(self) -> np.ndarray:
        return np.array([0, *sorted(self.attacked)])

    def costs(self) -> np.ndarray:
        """``(1 + len(attacked), M)``: each model's clipped cross-entropy, k = 0 first."""
        from privfl.robustness.pipeline import attack_costs

        return np.stack([attack_costs(r, CROSS_ENTROPY_BOUND)["cross_entropy"]
                         for r in (self.clean, *(self.attacked[k] for k in sorted(self.attacked)))])


def attack_config(base: dict[str, Any], kind: str | None, attackers: int = 0,
                  fraction: float = 1.0, rounds: int | None = None) -> dict[str, Any]:
    """``base`` (a raw configuration) with ``rounds`` and an attack section of ``attackers``
    (none when ``kind`` is None); the target label is digit 0 (class 0), a label flip flips the
    other class (digit 1), as the paper."""
    raw = {**base, "federated": {**base["federated"]}}
    if rounds is not None:
        raw["federated"]["rounds"] = rounds
    if kind is not None:
        raw["attack"] = {"kind": kind, "attackers": attackers, "target_label": 0,
                         **({"fraction": fraction} if fraction != 1.0 else {})}
        raw["name"] = f"{base['name']}-{kind}-a{fraction:g}-k{attackers}"
    return raw


def train_attack_sweep(name: str, base: dict[str, Any], kind: str, ks: Sequence[int],
                       models: int, epsilon: float, delta: float, *, fraction: float = 1.0,
                       rounds: int | None = None, clean: Any = None, backend: Any = None,
                       progress: Callable[[str], None] | None = None) -> AttackSweep:
    """Train ``models`` replicas of ``base`` without attack (unless ``clean`` is given: the
    same clean replicas of another attack setting) and with each k of ``ks`` attackers, all
    evaluated on the attack test set of ``kind``."""
    from privfl.algorithms.builders import build_dataset
    from privfl.attacks.config import AttackConfig
    from privfl.attacks.poisoning import attack_test_set
    from privfl.config import config_from_dict
    from privfl.config.algorithms import register_builtin_algorithms
    from privfl.robustness.montecarlo import train_replicas

    register_builtin_algorithms()
    clean_raw = attack_config(base, None, rounds=rounds)
    data = build_dataset(config_from_dict(clean_raw))
    attack_set, _ = attack_test_set(data.test, AttackConfig(kind=kind, attackers=0,
                                                            target_label=0))

    def train(raw: dict[str, Any]) -> Any:
        if progress:
            progress(f"attack-inefficacy replicas: {raw['name']} ({models} models)")
        return train_replicas(config_from_dict(raw), models, eval_sets={"attack": attack_set},
                              layout="batched", backend=backend)

    sweep = AttackSweep(name, kind, epsilon, delta,
                        train(clean_raw) if clean is None else clean)
    for k in ks:
        sweep.attacked[k] = train(attack_config(base, kind, k, fraction, rounds))
    return sweep


def paired_means(costs: np.ndarray, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """``(resamples, S)``: the means of ``costs`` ``(S, M)`` over the same M model indices drawn
    with replacement for every set (the sets share their replicas' seeds; numpy's PCG64 at
    ``seed``)."""
    costs = np.asarray(costs, dtype=np.float64)
    if costs.ndim != 2 or costs.shape[1] == 0:
        raise ValueError(f"costs has shape {costs.shape}: must be (sets, models)")
    index = np.random.default_rng(seed).integers(0, costs.shape[1], (resamples, costs.shape[1]))
    return costs[:, index].mean(axis=2).T


def lower_bounds(clean: np.ndarray, epsilon: float, delta: float, ks: Sequence[int],
                 cost_bound: float = CROSS_ENTROPY_BOUND) -> np.ndarray:
    """Theorem 6's lower bound of J(D') at each k of ``ks`` for each J(D) of ``clean`` (shape
    ``clean.shape + (len(ks),)``)."""
    from privfl.robustness.inefficacy import attack_inefficacy_bounds

    values = np.asarray(clean, dtype=np.float64)
    flat = [attack_inefficacy_bounds(float(j), epsilon, delta, cost_bound,
                                     np.asarray(ks, dtype=float))[0] for j in values.ravel()]
    return np.asarray(flat).reshape(values.shape + (len(ks),))


def slope(ks: Sequence[float], values: np.ndarray) -> np.ndarray:
    """The least-squares slope of ``values`` (``(..., len(ks))``) against ``ks``."""
    x = np.asarray(ks, dtype=np.float64)
    x = x - x.mean()
    y = np.asarray(values, dtype=np.float64)
    return (y - y.mean(axis=-1, keepdims=True)) @ x / float(x @ x)


def gap_change(measured: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """The gap ``measured - lower`` at the largest k less the gap at k = 1 (the second column;
    the first is k = 0, where both are J(D)), along the last axis."""
    gap = np.asarray(measured, dtype=np.float64) - np.asarray(lower, dtype=np.float64)
    return gap[..., -1] - gap[..., 1]


def min_attackers_grid(cleans: Sequence[float], epsilons: Sequence[float], delta: float,
                       taus: Sequence[float] = TAUS,
                       cost_bound: float = CROSS_ENTROPY_BOUND) -> np.ndarray:
    """``(len(epsilons), len(taus))``: Corollary 7's k_min for each (J(D), epsilon) pair at each
    tau (a cost >= 0: the target J(D') <= J(D) / tau)."""
    from privfl.robustness.inefficacy import min_attackers

    return np.array([min_attackers(float(j), float(e), delta, cost_bound,
                                   np.asarray(taus, dtype=float))
                     for j, e in zip(cleans, epsilons, strict=True)])


def monotone(values: np.ndarray, axis: int, increasing: bool) -> bool:
    """Whether ``values`` strictly increase (decrease) along ``axis``."""
    steps = np.diff(np.asarray(values, dtype=np.float64), axis=axis)
    return bool(np.all(steps > 0) if increasing else np.all(steps < 0))


def _sign(low: float, high: float, positive: str, negative: str, neither: str) -> str:
    return positive if low > 0.0 else negative if high < 0.0 else neither


def _listed(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def _figure4_rows(rep: Reproduction, sweeps: list[AttackSweep], scale: str) -> None:
    """Figure 4's claims per setting (decrease with k, gap at large k against small k), the
    k = 0 identity, alpha's effect on tightness, and privfl's soundness check."""
    gaps = {}
    for sweep in sweeps:
        ks, costs = sweep.ks, sweep.costs()
        boot = paired_means(costs)
        measured, lower = costs.mean(axis=1), lower_bounds(costs[0].mean(), sweep.epsilon,
                                                           sweep.delta, ks)
        boot_lower = lower_bounds(boot[:, 0], sweep.epsilon, sweep.delta, ks)
        gaps[sweep.name] = (boot - boot_lower)[:, 1:].mean(axis=1), float(
            (measured - lower)[1:].mean())
        about = (f"{scale}; {sweep.name}, epsilon {sweep.epsilon:.4f}; by k = 0..{ks[-1]}: "
                 f"measured J(D') {_listed(measured)}, Theorem 6's lower bound {_listed(lower)}")
        low, high = _interval(slope(ks, boot))
        found = _sign(-high, -low, "both decrease", "the measured J(D') increases",
                      "the bound decreases; the measured J(D') has no clear trend")
        rep.add(compare(
            f"measured attack inefficacy J(D') and its lower bound against k, {sweep.name}, "
            "UserDP-FedAvg, MNIST", FIGURE4_SOURCE, "both decrease", found, kind="training",
            reason=f"{about}; the bound decreases by construction (e^(-k eps)); the measured "
                   f"J(D')'s least-squares slope over k: {slope(ks, measured):+.4f} per attacker, "
                   f"95 % bootstrap interval [{low:+.4f}, {high:+.4f}] ('both decrease' when it "
                   "lies below 0)"))
        change = gap_change(boot, boot_lower)
        low, high = _interval(change)
        found = _sign(low, high, "larger at large k", "smaller at large k",
                      "no clear change with k")
        rep.add(compare(
            f"gap between measured J(D') and Theorem 6's lower bound, k = {ks[-1]} against k = "
            f"1, {sweep.name}, UserDP-FedAvg, MNIST", FIGURE4_SOURCE + ": tight for small k, a "
            "gap at large k", "larger at large k", found, kind="training",
            reason=f"{about}; gap at k = {ks[-1]} less gap at k = 1: "
                   f"{float(gap_change(measured, lower)):+.4f}, 95 % bootstrap interval "
                   f"[{low:+.4f}, {high:+.4f}] ('larger at large k' when it lies above 0)"))
    first = sweeps[0]
    j0 = [float(s.costs()[0].mean()) for s in sweeps]
    at0 = [float(lower_bounds(j, s.epsilon, s.delta, [0])[0]) for j, s in zip(j0, sweeps,
                                                                              strict=True)]
    same = all(abs(a - j) <= 1e-12 for a, j in zip(at0, j0, strict=True))
    rep.add(compare(
        "Theorem 6's lower bound at k = 0 against the measured J(D) of the clean models, every "
        "Figure 4 setting", "Figure 4 and Section 6.2.4 (at k = 0 the empirical value equals the "
        "certified one)", "equal", "equal" if same else "not equal", kind="training",
        basis="check", reason=f"{scale}; a check of the formula (e^0 J(D) - 0): J(D) "
                              f"{_listed(j0)}, the bound at k = 0 {_listed(at0)}"))
    strong, weak = (s for s in sweeps if s.kind == "backdoor")
    low, high = _interval(gaps[weak.name][0] - gaps[strong.name][0])
    found = _sign(low, high, "tighter for larger alpha", "looser for larger alpha",
                  "no clear difference")
    rep.add(compare(
        "tightness of Theorem 6's lower bound against the local poison fraction alpha (100 % "
        "against 50 %), BKD, UserDP-FedAvg, MNIST", "Figure 4 row 1 and Section 6.2.4 (a "
        "stronger attack, larger alpha, is closer to the lower bound)",
        "tighter for larger alpha", found, kind="training",
        reason=f"{scale}; the gap measured J(D') - bound averaged over k = 1..{first.ks[-1]}: "
               f"{strong.name} {gaps[strong.name][1]:.4f}, {weak.name} {gaps[weak.name][1]:.4f};"
               f" the difference's 95 % bootstrap interval [{low:+.4f}, {high:+.4f}] (paired "
               "replicas; 'tighter for larger alpha' when it lies above 0)"))


def _soundness_row(rep: Reproduction, sweeps: list[AttackSweep], scale: str) -> None:
    """Every measured J(D') above Theorem 6's lower bound in privfl's sound reading (replace
    adversaries, rigorous per-model epsilon, 99 % Hoeffding) and in the paper's reading."""
    from privfl.robustness.pipeline import certify_replicas

    total, below, paper_below, lines = 0, 0, 0, []
    for sweep in sweeps:
        about = {"command": "reproduce", "name": sweep.name, "algorithm": "dp-fedavg",
                 "attack": {"kind": sweep.kind, "attackers": max(sweep.attacked)}}
        run = certify_replicas(sweep.clean, sweep.attacked, about, "hoeffding", 0.99, "replace")
        costs = sweep.costs()
        paper = lower_bounds(costs[0].mean(), sweep.epsilon, sweep.delta, sweep.ks)
        for row in run.measured_cross_entropy:
            total += 1
            below += row["cross_entropy"] < row["bound_lower"]
            paper_below += costs[list(sweep.ks).index(row["k"])].mean() < paper[
                list(sweep.ks).index(row["k"])]
        epsilon = run.privacy["epsilon"]
        lines.append(f"{sweep.name} (per-model add/remove epsilon {epsilon:.4g}): bounds "
                     + _listed([r["bound_lower"] for r in run.measured_cross_entropy]))
    found = "all above" if below == 0 else f"{below} of {total} below"
    rep.add(compare(
        "measured J(D') above Theorem 6's lower bound, every attacked replica set (Figures 4 "
        "and 7)", "Theorem 6 (Section 5.1); Figure 4 shows the empirical J(D') above the bound",
        "all above", found, kind="training", basis="check",
        reason=f"{scale}; a check of the theorem on {total} attacked sets in privfl's sound "
               "reading (certify_replicas: the attackers replace users' data, the tightest "
               "rigorous per-model epsilon, J(D) by a 99 % Hoeffding interval): "
               + "; ".join(lines) + f"; in the paper's reading {paper_below} of {total} below"))


def _figure7_rows(rep: Reproduction, sweeps: list[AttackSweep], scale: str) -> list[float]:
    """Figure 7(a) (J(D') and its bound at k = 4 against epsilon) and 7(d) (Corollary 7's k_min
    against tau for each epsilon); returns the clean J(D) per epsilon."""
    epsilons = [s.epsilon for s in sweeps]
    costs = np.concatenate([s.costs() for s in sweeps])  # clean, k = 4 per sigma
    boot = paired_means(costs)
    measured = costs.mean(axis=1)
    clean, attacked = measured[0::2], measured[1::2]
    lower = [float(lower_bounds(j, e, USER_DELTA, [FIGURE7_K])[0])
             for j, e in zip(clean, epsilons, strict=True)]
    boot_lower = np.stack([lower_bounds(boot[:, 2 * i], e, USER_DELTA, [FIGURE7_K])[:, 0]
                           for i, e in enumerate(epsilons)], axis=1)
    source = ("Figure 7(a) and the Introduction (attack inefficacy always improves with smaller "
              "epsilon), MNIST BKD at k = 4")
    about = (f"{scale}; BKD, alpha = 100 %, k = {FIGURE7_K}, sigma "
             + ", ".join(f"{z:g}" for z in FIGURE7_SIGMAS) + " at T = 5: epsilon "
             + ", ".join(f"{e:.4f}" for e in epsilons) + f"; J(D) {_listed(clean)}, measured "
             f"J(D') {_listed(attacked)}, lower bound {_listed(lower)}")
    for what, point, resampled in (("measured J(D')", attacked, boot[:, 1::2]),
                                   ("Theorem 6's lower bound of J(D')", lower, boot_lower)):
        ordered = monotone(np.asarray(point), 0, increasing=False)  # epsilon ascending
        low, high = _interval(resampled[:, 0] - resampled[:, -1])
        found = ("larger at smaller epsilon" if ordered and low > 0.0 else
                 "smaller at smaller epsilon" if high < 0.0 else "no clear ordering")
        shares = [monotone(r, 0, increasing=False) for r in resampled]
        rep.add(compare(
            f"{what} at k = {FIGURE7_K} against epsilon, BKD, UserDP-FedAvg, MNIST", source,
            "larger at smaller epsilon", found, kind="training",
            reason=f"{about}; smallest less largest epsilon's: "
                   f"{float(point[0] - point[-1]):+.4f}, 95 % bootstrap interval [{low:+.4f}, "
                   f"{high:+.4f}]; {_share(shares, True)} of {len(shares)} resamples strictly "
                   "ordered ('larger at smaller epsilon': ordered and the interval above 0; "
                   "'smaller' when it lies below 0); at quick scale the clean models' J(D) "
                   "grows with epsilon (less noise, a more confident logistic regression on the "
                   "triggered images) and the attack moves J little, so J(D') follows J(D)"))
    _corollary7_rows(rep, clean, epsilons, USER_DELTA, "UserDP-FedAvg, BKD, MNIST",
                     "Figure 7(d) and Corollary 7", f"{scale}; J(D) of the clean BKD models "
                     f"{_listed(clean)} at epsilon " + ", ".join(f"{e:.4f}" for e in epsilons),
                     "attackers (users)")
    return list(clean)


def _corollary7_rows(rep: Reproduction, cleans: Sequence[float], epsilons: Sequence[float],
                     delta: float, what: str, source: str, about: str, unit: str) -> None:
    """Corollary 7's k_min over :data:`TAUS` and ``epsilons``: increasing in tau, decreasing in
    epsilon (formula properties at the measured J(D): checks)."""
    grid = min_attackers_grid(cleans, epsilons, delta)
    table = "; ".join(f"epsilon {e:.4f}: " + ", ".join(f"{k:.2f}" for k in row)
                      for e, row in zip(epsilons, grid, strict=True))
    why = (f"{about}; k_min at tau = " + ", ".join(f"{t:g}" for t in TAUS) + f": {table} "
           f"(Corollary 7 at the Monte Carlo mean of J(D), C_bar = {CROSS_ENTROPY_BOUND:g}, "
           f"delta = {delta:g}; a check of the formula's properties)")
    order = np.argsort(epsilons)
    for quantity, claim, holds in (
            ("grows with tau", "larger tau needs more attackers", monotone(grid, 1, True)),
            ("falls with epsilon at every tau > 1", "larger epsilon needs fewer attackers",
             monotone(grid[order][:, 1:], 0, False))):
        rep.add(compare(
            f"Corollary 7's least number of {unit} k_min {quantity}, {what}",
            f"{source} ({claim})", "holds", "holds" if holds else "fails", kind="training",
            basis="check", reason=why))


def quick_rows(rep: Reproduction, progress: Callable[[str], None] | None = None) -> None:
    """Figures 4, 7(a), 7(d) and 10 at quick scale (see the module docstring)."""
    ks = list(range(1, ATTACKERS + 1))
    backend = replica_backend()
    try:
        figure4, clean = [], {}
        for name, kind, z, rounds, alpha in FIGURE4:
            eps = _epsilon(z, 0.1, rounds, USER_DELTA)
            figure4.append(train_attack_sweep(
                name, user_config(z), kind, ks, MODELS, eps, USER_DELTA, fraction=alpha,
                rounds=rounds, clean=clean.get((kind, z, rounds)), backend=backend,
                progress=progress))
            clean[(kind, z, rounds)] = figure4[-1].clean
        figure7 = []
        for z in FIGURE7_SIGMAS:
            eps = _epsilon(z, 0.1, 5, USER_DELTA)
            if ("backdoor", z, 5) in clean:
                full = figure4[0]
                sweep = AttackSweep(f"sigma = {z:g}", "backdoor", eps, USER_DELTA, full.clean,
                                    {FIGURE7_K: full.attacked[FIGURE7_K]})
            else:
                sweep = train_attack_sweep(f"sigma = {z:g}", user_config(z), "backdoor",
                                           [FIGURE7_K], MODELS, eps, USER_DELTA, rounds=5,
                                           backend=backend, progress=progress)
            figure7.append(sweep)
        figure10 = [train_attack_sweep(
            f"sigma = {z:g}", instance_config(z), "backdoor", [], INSTANCE_MODELS,
            _epsilon(z, INSTANCE_RATE, INSTANCE_STEPS, INSTANCE_DELTA), INSTANCE_DELTA,
            backend=backend, progress=progress) for z in FIGURE10_SIGMAS]
    finally:
        if backend is not None:
            backend.close()
    scale = SCALE.format(what=USERS, models=MODELS)
    _figure4_rows(rep, figure4, scale)
    _figure7_rows(rep, figure7, scale)
    _soundness_row(rep, figure4 + [s for s in figure7 if s.clean is not figure4[0].clean],
                   scale)
    ins = [float(s.costs()[0].mean()) for s in figure10]
    ins_eps = [s.epsilon for s in figure10]
    _corollary7_rows(
        rep, ins, ins_eps, INSTANCE_DELTA, "InsDP-FedAvg, BKD, MNIST",
        "Figure 10, Corollary 7 with Theorem 4",
        SCALE.format(what="10 users of 76 records, Table 7's V = 26, T = 3 with q = 3/76, "
                          "delta = 1e-5", models=INSTANCE_MODELS)
        + f"; J(D) of the clean models {_listed(ins)} at sigma "
        + ", ".join(f"{z:g}" for z in FIGURE10_SIGMAS) + ", epsilon "
        + ", ".join(f"{e:.4f}" for e in ins_eps), "attackers (poisoned records)")
    _figures(rep, figure4)


def _figures(rep: Reproduction, sweeps: list[AttackSweep]) -> None:
    traces = []
    for sweep in sweeps:
        costs = sweep.costs()
        ks = sweep.ks.tolist()
        traces.append({"name": f"{sweep.name}: measured J(D')", "x": ks,
                       "y": costs.mean(axis=1).tolist()})
        traces.append({"name": f"{sweep.name}: Theorem 6 lower bound", "x": ks, "dash": True,
                       "y": lower_bounds(costs[0].mean(), sweep.epsilon, sweep.delta,
                                         ks).tolist()})
    rep.curves["xie2023-inefficacy"] = {
        "title": "Figure 4 at quick scale: attack inefficacy (clipped cross-entropy) against k",
        "xtitle": "k (attackers)", "ytitle": "J(D') (target-label cross-entropy, C_bar = "
                                             f"{CROSS_ENTROPY_BOUND:g})", "log": False,
        "traces": traces,
        "note": f"{MODELS} models per k; BKD at epsilon 0.4344 (sigma 2.5, T 5), LF at 0.4025 "
                "(sigma 2.5, T 4); the paper's reading (add/remove, its accounting, the Monte "
                "Carlo mean of J(D))"}
