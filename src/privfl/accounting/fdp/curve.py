"""The trade-off curve of a guarantee: how well any test can tell two neighbouring datasets apart.

Zheng et al. 2021 present privacy as a trade-off function f (Dong, Roth & Su 2019): no test of
"this record is in" against "it is not", at type I error alpha, has type II error below
f(alpha). ``privfl account ... --fdp-curve`` and a run's report draw it for every method:

* a **bound** (rdp, pld, ...): the accountant's epsilon at each delta of a grid is a rigorous
  (epsilon, delta) pair, and a mechanism meeting every pair has trade-off function at least
  ``max_i f_{eps_i, delta_i}`` (Dong, Roth & Su 2019, Prop. 2.5;
  :func:`~privfl.accounting.fdp.tabulated.from_epsilon_delta`): the curve is a lower bound of
  the true one, so it never overstates privacy (more deltas only raise it);
* an **estimate** with a Gaussian-DP mu (gdp-clt, the central limit theorem of Zheng et al.
  2021, Theorem 2): ``G_mu`` itself, labelled an estimate (it may lie above the truth).

Each curve is reported on a grid of alpha with its method, kind, scope and the pairs it rests
on; ``1 - alpha`` is perfect privacy, ``0`` none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from privfl._validation import check_int
from privfl.accounting.dispatch import evaluate
from privfl.accounting.fdp.gaussian import GaussianTradeOff
from privfl.accounting.fdp.tabulated import MAX_PAIR_EPSILON, from_epsilon_delta
from privfl.accounting.methods import AccountingOptions

__all__ = ["DELTAS", "tradeoff_curves"]

#: the deltas whose epsilons a bound's curve rests on (the requested delta is added): log-spaced
#: for the steep part of the curve (small alpha, large epsilon), even-spaced near epsilon = 0
DELTAS = tuple(sorted({*(float(d) for d in np.logspace(-12, -1.5, 22)),
                      *(round(float(d), 3) for d in np.linspace(0.04, 0.96, 24))}))


def _key(result: Any) -> tuple[str, str]:
    return result.method, str(result.extras.get("scope", ""))


def tradeoff_curves(event: object, delta: float, methods: str | Iterable[str] = "all", *,
                    options: AccountingOptions | None = None,
                    points: int = 101) -> list[dict[str, Any]]:
    """One trade-off curve per method (and scope) of ``event``'s results at ``delta``: ``alpha``
    (``points`` values in [0, 1]), ``beta``, ``method``, ``kind``, ``scope``, ``basis`` and, for
    a bound, the ``(epsilon, delta)`` pairs it rests on (see the module docstring)."""
    points = check_int("points", points, minimum=2, maximum=100_001)
    alphas = np.linspace(0.0, 1.0, points)
    at_delta = evaluate(event, delta, methods=methods, options=options)
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    grid = [at_delta, *(evaluate(event, d, methods=methods, options=options)
                        for d in DELTAS if d != delta)]  # the requested delta answered once
    for results in grid:
        for result in results:
            if result.kind == "bound" and np.isfinite(result.epsilon):
                pairs.setdefault(_key(result), []).append((result.epsilon, result.delta))
    curves = []
    for result in at_delta:
        curve: dict[str, Any] = {"method": result.method, "kind": result.kind,
                                 "scope": str(result.extras.get("scope", "")),
                                 "unit": result.unit, "neighbouring": result.neighbouring}
        mu = result.extras.get("mu")
        if result.kind == "bound":
            usable = [(e, d) for e, d in pairs.get(_key(result), []) if e <= MAX_PAIR_EPSILON]
            if not usable:
                continue
            tradeoff = from_epsilon_delta(usable)
            curve.update(basis="(epsilon, delta) pairs of the bound (Dong, Roth & Su 2019, "
                               "Prop. 2.5): a lower bound of the true trade-off",
                         pairs=[[e, d] for e, d in usable])
        elif mu is not None and np.isfinite(mu):
            tradeoff = GaussianTradeOff(float(mu))
            curve.update(basis=f"G_mu with mu = {float(mu):.6g} ({result.kind}: may lie above "
                               "the true trade-off)", mu=float(mu))
        else:
            continue
        curve.update(alpha=alphas.tolist(), beta=np.asarray(tradeoff(alphas), float).tolist())
        curves.append(curve)
    return curves


def plot_curves(curves: Sequence[dict[str, Any]], path: str, title: str) -> None:
    """The curves of :func:`tradeoff_curves` as a PNG (matplotlib), with perfect privacy
    ``1 - alpha`` for scale; estimates dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5.2, 5.0))
    axes.plot([0, 1], [1, 0], color="0.7", lw=1, label="perfect privacy (1 - alpha)")
    for curve in curves:
        label = curve["method"] + (f" ({curve['scope']})" if curve["scope"] else "")
        axes.plot(curve["alpha"], curve["beta"], lw=1.6,
                  ls="-" if curve["kind"] == "bound" else "--",
                  label=f"{label}: {curve['kind']}")
    axes.set(xlim=(0, 1), ylim=(0, 1), xlabel="type I error alpha",
             ylabel="smallest type II error beta", title=title)
    axes.set_aspect("equal")
    axes.legend(fontsize=8, loc="upper right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
