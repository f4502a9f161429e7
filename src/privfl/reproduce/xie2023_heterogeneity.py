"""Xie et al. 2023's Figure 3 (certified accuracy under heterogeneous data, Section 6.2.3) at quick
scale: more non-i.i.d. data certify a smaller maximal k; the printed optimal epsilons on MNIST
are about 0.62 (i.i.d.), 0.28 (Dir(1)) and 0.41 (Dir(0.5)).

Quick scale, as :mod:`.xie2023_certification`: UserDP-FedAvg at Table 4's privacy setting,
logistic regression on the MNIST 5k subset's digits 0 and 1, 100 users, :data:`MODELS` replicas
per point at a subset of Table 4's sigma grid (:data:`SIGMAS`), every split trained alike (local
batches of :data:`BATCH` records, :data:`STEPS` steps: the smallest non-i.i.d. user holds 4
records). The i.i.d. split gives each user 8 records; the non-i.i.d. splits are the paper's
recipe, ``data.partition: dirichlet-classes``: each class's records spread over the users by
``pi_c ~ Dir(alpha 1_N)`` with at least 2 per class each
(:func:`privfl.data.partition.dirichlet_class_partition`), so the users hold the ~800 training
records in unequal numbers; every split's 100 test points are drawn IID from the same test pool.

Per split, over epsilon: the largest certified k and the average certified k (the area under the
certified-accuracy curve, :func:`.xie2023_certification.k_summary`), each maximised over epsilon
(the split's best). The largest k mostly sits at the cap ``K_max(eps, delta)`` of Eq. 6 (as
Figure 2's rows explain), so the average certified k carries the ordering. Monte Carlo
confidence: the share of bootstrap resamples of the models giving the same ordering.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from privfl.reproduce.rows import Reproduction, compare
from privfl.reproduce.xie2023_certification import (
    AREA,
    HOW,
    LARGEST,
    SCALE,
    USER_DELTA,
    _share,
    bootstrap,
    compare_shape,
    curve,
    peak_epsilon,
    replica_backend,
    train_sweep,
    user_config,
)

__all__ = ["BATCH", "BETAS", "MODELS", "SIGMAS", "STEPS", "ordering", "quick_rows",
           "split_config"]

#: replicas per point; Table 4's sigmas run (epsilon 0.8694, 0.6298, 0.4187, 0.2808: the three
#: printed optima among them); the Dirichlet concentrations of Figure 3
MODELS, SIGMAS, BETAS = 50, (1.5, 1.8, 2.3, 3.0), (1.0, 0.5)
#: every split's local batch and steps: the smallest non-i.i.d. user holds 4 records (2 per class)
BATCH, STEPS = 4, 10
#: Figure 3's printed optimal epsilon on MNIST per split
OPTIMAL = {"i.i.d.": "0.62", "Dir(1)": "0.28", "Dir(0.5)": "0.41"}
SOURCE = "Figure 3 and Section 6.2.3 (MNIST, i.i.d. against Dir(1) and Dir(0.5))"


def split_config(z: float, beta: float | None) -> dict[str, Any]:
    """:func:`.xie2023_certification.user_config` with local batches of :data:`BATCH` records
    (:data:`STEPS` steps: the 40 records a round of the i.i.d. sweep's 5 x 8) on the i.i.d. split
    (``beta`` None, 8 records per user) or on Xie et al.'s non-i.i.d. split with concentration
    ``beta`` (``data.partition: dirichlet-classes``: unequal users of at least 4 records)."""
    raw = user_config(z)
    name = "iid" if beta is None else f"dirichlet{beta:g}"
    raw["name"] = f"xie2023-quick-certify-user-z{z:g}-{name}"
    raw["training"] = {**raw["training"], "batch_size": BATCH, "local_steps": STEPS}
    if beta is not None:
        data = {k: v for k, v in raw["data"].items() if k != "train_size"}
        raw["data"] = {**data, "partition": "dirichlet-classes", "beta": beta}
    return raw


def ordering(names: Sequence[str], values: Sequence[float]) -> str:
    """``names`` from the largest value down, ``>`` between strictly ordered neighbours and
    ``=`` between equal ones (within 1e-9; ties keep the given order): ``"a > b = c"``."""
    if len(names) != len(values) or not names:
        raise ValueError(f"names and values have lengths {len(names)}, {len(values)}: must be "
                         "equal and non-zero")
    order = sorted(range(len(names)), key=lambda i: -float(values[i]))
    text = names[order[0]]
    for prev, i in zip(order, order[1:], strict=False):
        text += (" = " if abs(float(values[prev]) - float(values[i])) <= 1e-9 else " > ")
        text += names[i]
    return text


def quick_rows(rep: Reproduction, progress: Callable[[str], None] | None = None) -> None:
    """Figure 3's rows at quick scale (see the module docstring): the i.i.d., Dir(1) and Dir(0.5)
    sweeps at :data:`SIGMAS`, trained alike (:func:`split_config`)."""
    from privfl.reproduce.xie2023_tables import TABLES

    epsilons = [float(TABLES["Table 4"][4][z]) for z in SIGMAS]  # printed = fitted
    labels = [f"sigma = {z:g}" for z in SIGMAS]
    backend = replica_backend()
    try:
        sweeps = {("i.i.d." if beta is None else f"Dir({beta:g})"): train_sweep(
            [split_config(z, beta) for z in SIGMAS], epsilons, labels, MODELS, USER_DELTA,
            "user", backend, progress) for beta in (None, *BETAS)}
    finally:
        if backend is not None:
            backend.close()
    base = sweeps["i.i.d."]
    names = list(sweeps)
    ks = {n: curve(s, "estimate") for n, s in sweeps.items()}
    boot = {n: bootstrap(s, "estimate") for n, s in sweeps.items()}  # (B, points, 2)
    scale = (f"{SCALE.format(models=MODELS)}; 100 users (i.i.d.: 8 records each), local "
             f"batches of {BATCH} records, {STEPS} steps, Table 4's "
             "q = 0.1, T = 3, delta = 0.0029; non-i.i.d.: the paper's recipe, each class spread "
             "over the users by Dir(alpha) with at least 2 records per class each (data.partition: "
             "dirichlet-classes; unequal users); every split's test points IID from one pool; "
             "sigma " + ", ".join(f"{z:g}" for z in SIGMAS))
    listed = "; ".join(
        f"{n}: " + ", ".join(f"{e:.4g}: {a:.3f} ({k:.2f})" for e, a, k in
                             zip(base.epsilons, ks[n][:, AREA], ks[n][:, LARGEST], strict=True))
        for n in names)
    why = (f"{scale}; {HOW['estimate']}; by epsilon, the average certified k (the largest): "
           f"{listed}")
    expected = " > ".join(names)
    for summary, what in ((AREA, "the average certified k (area under the certified-accuracy "
                                 "curve)"),
                          (LARGEST, "the largest certified k (mostly at the cap K_max of each "
                                    "epsilon)")):
        best = [float(ks[n][:, summary].max()) for n in names]
        found = ordering(names, best)
        resampled = [ordering(names, [float(boot[n][b, :, summary].max()) for n in names])
                     for b in range(len(boot[names[0]]))]
        rep.add(compare_shape(
            f"heterogeneity against {what}, best over epsilon, UserDP-FedAvg, MNIST", SOURCE,
            expected, found, resampled,
            reason=f"{why}; best over epsilon: "
                   + ", ".join(f"{n} {v:.3f}" for n, v in zip(names, best, strict=True))
                   + f"; {_share(resampled, found)} of {len(resampled)} bootstrap resamples of "
                     "the models give the same ordering"))
    for n in names:
        peak = peak_epsilon(base.epsilons, ks[n][:, LARGEST])
        rep.add(compare(
            f"epsilon at which the largest certified k peaks, {n}, UserDP-FedAvg, MNIST", SOURCE,
            OPTIMAL[n], peak, tolerance=None, kind="training",
            reason=f"{scale}: not the paper's models, so not its optimal epsilon; {why}"))
    rep.curves["xie2023-heterogeneity"] = {
        "title": "Figure 3 at quick scale: the average certified k against epsilon by split",
        "xtitle": "epsilon (the paper's accounting)", "ytitle": "average certified k",
        "log": False, "traces": [{"name": n, "x": list(base.epsilons),
                                  "y": ks[n][:, AREA].tolist()} for n in names],
        "note": f"{MODELS} models per point; Dir(alpha): each class spread over the users "
                "(Xie et al.'s split); the paper: 1,000 CNNs on MNIST 0 vs 1"}
