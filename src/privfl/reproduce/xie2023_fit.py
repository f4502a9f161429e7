"""Xie et al. 2023: the accounting parameters the paper does not print, fitted to its printed
epsilons, beside the printed setting and the accounting the paper states.

The paper prints no number of rounds T, and its Table 2 prints V = 25 local steps for
InsDP-FedAvg on MNIST. privfl reproduces Tables 4-8 with the inputs that fit: T = 3, 1, 3, 3, 1
rounds (Tables 4-8) and V = 26 (one epoch of ceil(1266 / 50) batches), Poisson subsampled-Gaussian
RDP over the orders 1.1-63 and the classic conversion eps = min_a [RDP(a) - ln(delta) / (a - 1)]
(Mironov 2017). The paper's text states sampling without replacement (the bound of Wang, Balle
and Kasiviswanathan 2019) and the conversion of Balle et al. 2020. This module

* fits the steps of each table: every candidate (T, or V x T) is scored by its residual, the
  largest ``|eps - printed| / h`` over the table's epsilons, h = half a unit of the printed last
  digit (a residual <= 1 reproduces every printed digit); the smallest residual wins;
* evaluates the printed setting (V = 25) beside the fitted one;
* evaluates what the paper states: Balle et al.'s conversion of the same Poisson RDP, and
  sampling without replacement (replace-one neighbours, the only relation privfl's bound for
  fixed-size batches covers) with that conversion.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from privfl.reproduce.rows import Reproduction, compare

__all__ = ["Fit", "STEP_CANDIDATES", "fit_steps", "fit_rows", "residual"]

#: table -> (candidate steps: label -> steps, the label of the printed setting or None)
STEP_CANDIDATES: dict[str, tuple[dict[str, int], str | None]] = {
    "Table 4": ({f"T = {t}": t for t in range(1, 7)}, None),
    "Table 5": ({f"T = {t}": t for t in range(1, 7)}, None),
    "Table 6": ({f"T = {t}": t for t in range(1, 7)}, None),
    "Table 7": ({f"V = {v}, T = {t}": v * t for v in (25, 26) for t in range(1, 5)}, None),
    "Table 8": ({f"V = 100, T = {t}": 100 * t for t in range(1, 4)}, None),
}
#: the printed settings privfl does not use: table -> (label, steps, what the paper prints)
PRINTED_SETTINGS = {"Table 7": ("V = 25, T = 3", 75, "Table 2 prints V = 25 local steps")}
STATED = ("the paper states sampling without replacement (the bound of Wang, Balle and "
          "Kasiviswanathan 2019) and the conversion of Balle et al. 2020")


def _half_unit(text: str) -> float:
    """Half a unit of the last digit printed in ``text`` (``"0.546"`` -> 0.0005)."""
    exponent = Decimal(text).as_tuple().exponent
    assert isinstance(exponent, int)
    return 0.5 * 10.0 ** exponent


def residual(printed: dict[float, str], computed: dict[float, float]) -> float:
    """The largest ``|computed - printed| / h`` over the sigmas of ``printed`` (h: half a unit
    of the last printed digit); <= 1 when every printed epsilon is reproduced to its digits."""
    missing = set(printed) - set(computed)
    if missing:
        raise ValueError(f"computed lacks sigma = {sorted(missing)}: must hold every printed "
                         "sigma")
    return max(abs(computed[z] - float(text)) / _half_unit(text) for z, text in printed.items())


@dataclass(frozen=True)
class Fit:
    """The fitted steps of one table: ``label`` (e.g. ``"T = 3"``), ``steps``, its
    ``residual`` and each candidate's residual (``residuals``: label -> residual)."""

    table: str
    label: str
    steps: int
    residual: float
    residuals: dict[str, float]

    def runner_up(self) -> tuple[str, float]:
        """The second-best candidate and its residual."""
        label = min((c for c in self.residuals if c != self.label), key=self.residuals.__getitem__)
        return label, self.residuals[label]


def fit_steps(table: str) -> Fit:
    """Fit the steps of ``table`` (a key of :data:`STEP_CANDIDATES`) to its printed epsilons,
    by the paper's accounting (Poisson RDP, orders 1.1-63, classic conversion)."""
    from privfl.reproduce.xie2023_tables import TABLES, _epsilon

    if table not in STEP_CANDIDATES:
        raise ValueError(f"table = {table!r} is not allowed: must be one of "
                         f"{', '.join(STEP_CANDIDATES)}")
    _, q, _, delta, grid = TABLES[table]
    candidates, _ = STEP_CANDIDATES[table]
    residuals = {label: residual(grid, {z: _epsilon("rdp", z, q, steps, delta, True)
                                        for z in grid})
                 for label, steps in candidates.items()}
    best = min(residuals, key=residuals.__getitem__)
    return Fit(table, best, candidates[best], residuals[best], residuals)


def _stated_epsilon(z: float, q: float, steps: int, delta: float, sampling: str) -> float:
    """epsilon by Balle et al. 2020's conversion of RDP over the legacy orders, for Poisson
    sampling (add/remove) or sampling without replacement (replace-one)."""
    from privfl.accounting.events import Neighbouring, NoisyStep, PrivacyEvent, Sampling
    from privfl.accounting.methods import AccountingOptions, build_accountant

    kind = Sampling.POISSON if sampling == "poisson" else Sampling.WITHOUT_REPLACEMENT
    relation = (Neighbouring.ADD_REMOVE if sampling == "poisson" else Neighbouring.REPLACE_ONE)
    event = PrivacyEvent(((NoisyStep(z, q, kind), steps),), neighbouring=relation)
    options = AccountingOptions(orders="legacy", conversion="improved")
    return build_accountant("rdp", options).epsilon(event, delta).epsilon


def fit_rows(rep: Reproduction) -> dict[str, Fit]:
    """Rows of the fits, the printed settings and the stated accounting (see the module
    docstring); returns the fits by table."""
    from privfl.reproduce.xie2023_tables import SOURCE, TABLES, _epsilon

    fits = {}
    for table, (what, q, steps, delta, grid) in TABLES.items():
        fit = fits[table] = fit_steps(table)
        if fit.steps != steps:
            raise AssertionError(f"{table}: the fit gives {fit.label} ({fit.steps} steps), "
                                 f"TABLES uses {steps}")
        other, other_residual = fit.runner_up()
        rep.add(compare(
            f"fit residual, {table} ({what}): largest |epsilon - printed| in half units of the "
            f"last printed digit, over the {len(grid)} printed epsilons, at the fitted {fit.label}",
            SOURCE.format(table=table), (0.0, 1.0), fit.residual, basis="derived",
            reason=f"privfl's fit to the printed epsilons: the paper prints no T"
                   f"{' (Table 2 prints V = 25)' if table in PRINTED_SETTINGS else ''}; "
                   f"{fit.label} ({fit.steps} step(s)) fits with residual {fit.residual:.3g} "
                   f"(<= 1: every printed digit reproduced), the next best {other} with "
                   f"{other_residual:.3g}; the fit's accounting is Poisson subsampled-Gaussian "
                   f"RDP, orders 1.1-63, classic conversion, while {STATED}"))
        if table in PRINTED_SETTINGS:
            label, printed_steps, says = PRINTED_SETTINGS[table]
            for z, text in grid.items():
                ours = _epsilon("rdp", z, q, printed_steps, delta, True)
                fitted = _epsilon("rdp", z, q, steps, delta, True)
                rep.add(compare(
                    f"epsilon at the printed {label} ({printed_steps} steps), {table}, "
                    f"sigma = {z:g}, delta = {delta:g}", f"{SOURCE.format(table=table)}; {says}",
                    text, ours,
                    reason=f"the printed setting ({label}) gives {ours:.4f}; the fitted "
                           f"{fit.label} ({steps} steps: one epoch of ceil(1266 / 50) = 26 "
                           f"batches) gives {fitted:.4f}, the printed {text}"))
        z, text = next(iter(grid.items()))
        for sampling, how in (("poisson", "Poisson sampling (add/remove)"),
                              ("without-replacement", "sampling without replacement "
                               "(replace-one; Wang, Balle and Kasiviswanathan 2019)")):
            stated = _stated_epsilon(z, q, steps, delta, sampling)
            rep.add(compare(
                f"epsilon by the stated accounting ({how}, Balle et al. 2020's conversion), "
                f"{table}, sigma = {z:g}, {fit.label}, delta = {delta:g}",
                f"{SOURCE.format(table=table)}; the text's accounting", text, stated,
                reason=f"{STATED}; with {how} that gives {stated:.4f}, not the printed {text}, "
                       f"which the fitted Poisson RDP with the classic conversion reproduces "
                       f"({'a smaller' if stated < float(text) else 'a larger'} epsilon by the "
                       "stated accounting)"))
    return fits
