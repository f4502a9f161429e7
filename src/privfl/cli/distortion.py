"""``privfl distortion tv | noise | sampling | tradeoff``: the formulas of Zhang, Chen and Yang
2022 (with privfl's exact and corrected forms beside the paper's), for scripts and by hand."""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from privfl.cli.common import JsonOpt, user_errors

__all__ = ["distortion_app"]

distortion_app = typer.Typer(
    help="Formulas of Zhang, Chen and Yang 2022 (parameter distortion, data generation): "
    "exact TV, the paper's noise and sampling rules next to exact or corrected ones, and the "
    "trade-off bounds, each labelled with what is proven.")

VarianceOpt = Annotated[float, typer.Option(
    "--variance", help="sigma^2: per-coordinate variance of the unprotected parameter.")]
DimensionOpt = Annotated[int, typer.Option("--dimension", help="d: number of parameters.")]
C1Opt = Annotated[float, typer.Option(
    "--c1", help="C1: leakage of the unprotected parameter, sqrt-JS in [0, sqrt(ln 2)].")]
TauOpt = Annotated[float, typer.Option("--tau", help="tau: the leakage budget (sqrt-JS).")]


def _emit(as_json: bool, command: str, setting: Mapping[str, Any], payload: Mapping[str, Any],
          rows: Sequence[Mapping[str, Any]] = (), columns: Sequence[str] = (),
          notes: Sequence[str] = ()) -> None:
    """One JSON object (``command``, ``setting``, the payload) or a card, a table and notes."""
    if as_json:
        from privfl.cli.output import print_json

        print_json({"command": f"distortion {command}", "setting": dict(setting), **payload})
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from privfl.runs.card import format_number, render_card

    console = Console()
    render_card(console, f"privfl distortion {command}", setting, [])
    if rows:
        table = Table(show_lines=False)
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*(escape(format_number(row.get(c)) if row.get(c) is not None else "-")
                            for c in columns))
        console.print(table)
    for note in notes:
        console.print(f"[dim]• {escape(note)}[/dim]")


def _load_variances(option: str, path: Path) -> Any:
    """One variance per coordinate from a ``.npy`` file (a 1-D float array)."""
    import numpy as np

    try:
        values = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(f"{option} = {str(path)!r} is not a readable .npy array of variances "
                         f"({reason})") from None
    if values.ndim != 1 or values.dtype.kind not in "fiu":
        raise ValueError(f"{option} = {str(path)!r} holds a {values.dtype} array of shape "
                         f"{values.shape}: must be a 1-D numeric array (one variance per "
                         "coordinate)")
    return values.astype(float)


def _tv_diagonal(variances: Path, distorted: Path, dimension: int | None, draws: int | None,
                 as_json: bool) -> None:
    from privfl._validation import check_int
    from privfl.distortion.diagonal import tv_diagonal_monte_carlo, tv_gaussian_diagonal

    a = _load_variances("--variances", variances)
    b = _load_variances("--distorted-variances", distorted)
    if dimension is not None and check_int("dimension", dimension, 1) != a.size:
        raise ValueError(f"dimension = {dimension!r} does not match the {a.size} variances in "
                         f"{str(variances)!r}")
    try:
        result = tv_gaussian_diagonal(a, b)
    except ValueError as error:  # name the files, not the API's arguments
        message = str(error).replace("distorted_variances", "--distorted-variances")
        raise ValueError(message.replace("variances[", "--variances[", 1)
                         if message.startswith("variances") else message) from None
    setting = {"variances": str(variances), "distorted_variances": str(distorted),
               "dimension": result.dimension, "ratio_min": result.ratio_min,
               "ratio_max": result.ratio_max}
    payload: dict[str, Any] = {
        "tv": result.tv, "tv_error": result.error, "kind": result.method,
        "tv_lower": result.tv_lower, "tv_upper": result.tv_upper,
        "bracket": {"lower_source": result.lower_source, "upper_source": result.upper_source,
                    "certified": True},
        "model": "N(mu, diag(A)) against N(mu, diag(B)), same mean"}
    rows = [{"quantity": f"TV ({result.method.split(':')[0]})", "value": result.tv},
            {"quantity": "numerical error", "value": result.error},
            {"quantity": f"certified lower ({result.lower_source})", "value": result.tv_lower},
            {"quantity": f"certified upper ({result.upper_source})", "value": result.tv_upper}]
    if draws is not None:
        estimate, se = tv_diagonal_monte_carlo(a, b, draws)
        payload["monte_carlo"] = {"tv": estimate, "se": se, "draws": draws,
                                  "kind": "estimate: E_P[(1 - q/p)_+]"}
        rows.append({"quantity": f"Monte Carlo ({draws} draws)", "value": estimate})
        rows.append({"quantity": "Monte Carlo standard error", "value": se})
    _emit(as_json, "tv", setting, payload, rows, ("quantity", "value"),
          [f"{result.method}; the bracket holds whatever the numerics do",
           "a parameter that takes finitely many values (e.g. one per subset of records) has "
           "TV 1 to any continuous distortion: this TV is that of the Gaussian model"])


@distortion_app.command("tv")
@user_errors
def tv_command(
    variance: Annotated[float | None, typer.Option(
        "--variance", help="A: variance of N(0, A I_d) (with --distorted-variance and "
        "--dimension).", show_default=False)] = None,
    distorted_variance: Annotated[float | None, typer.Option(
        "--distorted-variance", help="B: variance of N(0, B I_d).", show_default=False)] = None,
    dimension: Annotated[int | None, typer.Option(
        "--dimension", help="d: number of parameters (optional with --variances).",
        show_default=False)] = None,
    variances: Annotated[Path | None, typer.Option(
        "--variances", help="A.npy: one variance per coordinate of N(mu, diag(A)).",
        show_default=False)] = None,
    distorted_variances: Annotated[Path | None, typer.Option(
        "--distorted-variances", help="B.npy: one variance per coordinate of N(mu, diag(B)).",
        show_default=False)] = None,
    draws: Annotated[int | None, typer.Option(
        "--draws", help="With --variances: also a Monte Carlo estimate from this many draws.",
        show_default=False)] = None,
    as_json: JsonOpt = False,
) -> None:
    """TV between N(0, A I_d) and N(0, B I_d) (exact, with the Lemma 6.7 sandwich), or between
    N(mu, diag(A)) and N(mu, diag(B)) from two .npy files of per-coordinate variances.

    The sandwich is Devroye et al. 2018, Theorem 1.1: min(1, x)/100 <= TV <= 1.5 min(1, x),
    x = |B - A| sqrt(d) / A. With --variances the TV is exact when all ratios B_i / A_i are
    equal, else numerical (Imhof's inversion) with its error, always with a certified
    bracket (tv_lower, tv_upper).
    """
    if variances is not None or distorted_variances is not None:
        if variances is None or distorted_variances is None:
            raise ValueError("variances and distorted_variances go together: give both "
                             "--variances A.npy and --distorted-variances B.npy")
        if variance is not None or distorted_variance is not None:
            raise ValueError("variance and variances both given: give --variance/"
                             "--distorted-variance or --variances/--distorted-variances")
        _tv_diagonal(variances, distorted_variances, dimension, draws, as_json)
        return
    if draws is not None:
        raise ValueError(f"draws = {draws!r} is only used with --variances")
    missing = [name for name, value in (("--variance", variance), ("--distorted-variance",
               distorted_variance), ("--dimension", dimension)) if value is None]
    if missing:
        raise ValueError(f"{missing[0].lstrip('-')} is missing: give --variance, "
                         "--distorted-variance and --dimension, or --variances and "
                         "--distorted-variances")
    from privfl.distortion.bounds import gaussian_tv_sandwich
    from privfl.distortion.divergence import tv_gaussian_isotropic

    tv = tv_gaussian_isotropic(variance, distorted_variance, dimension)
    spread = abs(distorted_variance - variance)
    low, high = gaussian_tv_sandwich(variance, spread, dimension)
    lower, upper = low.value, high.value
    x = spread * math.sqrt(dimension) / variance
    setting = {"variance": variance, "distorted_variance": distorted_variance,
               "dimension": dimension}
    sandwich = {"lower": lower, "upper": upper, "x": x,
                "source": "Lemma 6.7 (Devroye et al. 2018 Theorem 1.1): min(1, x)/100 <= TV <= "
                          "1.5 min(1, x), x = |B - A| sqrt(d) / A"}
    _emit(as_json, "tv", setting, {"tv": tv, "kind": "exact (chi-square form)",
                                   "sandwich": sandwich},
          [{"quantity": "TV (exact)", "value": tv}, {"quantity": "Lemma 6.7 lower", "value": lower},
           {"quantity": "Lemma 6.7 upper", "value": upper}], ("quantity", "value"),
          [sandwich["source"]])


@distortion_app.command("noise")
@user_errors
def noise_command(
    variance: VarianceOpt,
    dimension: DimensionOpt,
    gap: Annotated[float | None, typer.Option(
        "--gap", help="G = C1 - tau: the TV the budget asks for (Lemma 6.6).")] = None,
    c1: Annotated[float | None, typer.Option("--c1", help="C1 (with --tau, instead of --gap).")
                  ] = None,
    tau: Annotated[float | None, typer.Option("--tau", help="tau (with --c1).")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Noise variance for TV >= G: Lemma 6.8's rule and the exact calibration.

    The paper's rule is 100 sigma^2 G / sqrt(d), refused outside its domain 0 < G < 0.01; the
    exact calibration solves TV = G; each row gives the TV it reaches. Neither makes
    eps_p <= tau a guarantee: Lemma 6.6 (TV >= C1 - tau implies eps_p <= tau) is not proven
    and fails on counterexamples.
    """
    from privfl.distortion.calibrate import noise_calibrations
    from privfl.distortion.divergence import check_leakage

    if gap is None:
        if c1 is None or tau is None:
            raise ValueError("gap is missing: give --gap G, or --c1 and --tau (G = C1 - tau)")
        gap = check_leakage("c1", c1) - check_leakage("tau", tau)
    elif c1 is not None or tau is not None:
        raise ValueError(f"gap = {gap!r} and --c1/--tau both given: give one of them")
    rows = noise_calibrations(variance, gap, dimension)
    setting = {"variance": variance, "dimension": dimension, "gap": gap}
    if c1 is not None:
        setting.update(c1=c1, tau=tau)
    results = [r.to_dict() for r in rows]
    notes = [f"{r.method}: {r.refused or r.note}" for r in rows]
    _emit(as_json, "noise", setting, {"results": results}, results,
          ("method", "noise_variance", "tv", "tv_lower", "tv_upper"), notes)


@distortion_app.command("sampling")
@user_errors
def sampling_command(
    c6: Annotated[float, typer.Option("--c6", help="C6 of Theorem 6.1 (>= 0).")],
    c1: C1Opt,
    tau: TauOpt,
    gradient_sq_sum: Annotated[float, typer.Option(
        "--gradient-sq-sum", help="G = sum_i ||grad L(W, d_i)||^2 over the client's records.")],
    as_json: JsonOpt = False,
) -> None:
    """Theorem 6.11's sampling probability, as printed and corrected.

    The smallest p with p(1 - p) G >= factor C6 (C1 - tau): factor 1 as printed, 150 corrected
    (sufficient with Lemma 6.8's noise). An infeasible rule (r > 1/4) says so instead of
    giving a p; if both are infeasible the command fails.
    """
    from privfl.distortion.sampling import SAMPLING_RULES, sampling_probability

    rules = [sampling_probability(c6, c1, tau, gradient_sq_sum, m) for m in SAMPLING_RULES]
    if not any(r.feasible for r in rules):
        ratios = ", ".join(f"{r.method} r = {r.ratio:.6g}" for r in rules)
        raise ValueError(f"tau = {tau!r} is infeasible: p(1 - p) <= 1/4 < r for every rule "
                         f"({ratios}); raise tau or gradient_sq_sum, or lower c6")
    setting = {"c6": c6, "c1": c1, "tau": tau, "gradient_sq_sum": gradient_sq_sum}
    results = [r.to_dict() for r in rules]
    _emit(as_json, "sampling", setting, {"results": results}, results,
          ("method", "ratio", "feasible", "p_min", "p_max"),
          [f"{r.method}: {r.note}" for r in rules])


@distortion_app.command("tradeoff")
@user_errors
def tradeoff_bounds_command(
    c1: C1Opt,
    xi: Annotated[float, typer.Option("--xi", help="xi: the attacker's largest |log "
                                      "posterior / prior| (C2 = (e^(2 xi) - 1) / 2).")],
    c6: Annotated[float, typer.Option("--c6", help="C6 of Theorem 6.1 (> 0).")],
    expected_variance: Annotated[float, typer.Option(
        "--expected-variance", help="E Var[W~ | W_{t-1}] (e.g. p(1 - p) G, Theorem 6.10).")],
    tv: Annotated[float | None, typer.Option(
        "--tv", help="TV(P, P~): says whether Lemma 6.5 (and so Theorem 6.12) is proven.")
    ] = None,
    leakage: Annotated[float | None, typer.Option(
        "--leakage", help="eps_p: also give the utility loss range the bounds allow.")] = None,
    gamma: Annotated[float | None, typer.Option("--gamma", help="gamma of Theorem 6.13.")
                     ] = None,
    nfl_delta: Annotated[float | None, typer.Option(
        "--nfl-delta", help="Delta of Theorem 6.13 (with --gamma; default C_d = C2/C6, "
        "Theorem 6.14's condition).")] = None,
    gradient_sq_sum: Annotated[float | None, typer.Option(
        "--gradient-sq-sum", help="G: also give Theorem 6.14's sampling probability.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Theorems 6.12-6.14: the trade-off's upper and lower bounds and their optimum.

    The paper's upper bound on eps_p + (C2/C6) eps_u (Theorem 6.12), the no-free-lunch lower
    bound eps_p + C_d eps_u >= C1 (Theorem 6.13) and the optimum where they meet (6.14).
    """
    from privfl.distortion.bayesian import c2_from_xi
    from privfl.distortion.bounds import (
        c_d,
        nfl_lower_bound,
        optimal_tradeoff,
        tradeoff_upper_bound,
    )

    c2 = c2_from_xi(xi)
    if not math.isfinite(c2):
        raise ValueError(f"xi = {xi!r} is out of range: C2 = (e^(2 xi) - 1) / 2 is infinite in "
                         "double precision, and Theorems 6.12-6.14 need a finite C2; must be "
                         f"< {0.5 * (math.log(2.0) + math.log(sys.float_info.max)):.1f}")
    upper = tradeoff_upper_bound(c1, c2, c6, expected_variance, tv)
    lower = nfl_lower_bound(c1)
    if (gamma is None) != (nfl_delta is None):
        raise ValueError("gamma and nfl_delta go together: give both or neither")
    cd = c_d(gamma, nfl_delta, xi) if gamma is not None else c2 / c6
    constants = {"c2": c2, "weight": c2 / c6, "cd": cd,
                 "cd_source": "Theorem 6.13 from gamma, Delta" if gamma is not None
                 else "C2 / C6 (Theorem 6.14's condition)"}
    results = [{"statement": b.statement, "form": b.form, "quantity": b.quantity,
                "side": b.side, "value": b.value, "hypothesis": b.hypothesis,
                "proven": b.proven, "note": b.note} for b in (upper, lower)]
    payload: dict[str, Any] = {"constants": constants, "results": results}
    if leakage is not None:
        from privfl.distortion.divergence import check_leakage

        eps_p = check_leakage("leakage", leakage)
        payload["utility_loss_range"] = {
            "leakage": eps_p,
            "min_nfl": (c1 - eps_p) / cd if cd > 0 else -math.inf,
            "max_theorem_6_12": (c6 / c2) * (2 * c1 - eps_p) - expected_variance if c2 > 0
            else math.inf,
        }
    if c2 > 0 and math.isfinite(c2):
        opt = optimal_tradeoff(c1, c2, c6, gradient_sq_sum, gamma=gamma, delta=nfl_delta)
        payload["optimum"] = {"expected_variance": opt.expected_variance,
                              "sampling_probability": opt.sampling_probability,
                              "cd_matches": opt.cd_matches, "note": opt.note}
    setting = {"c1": c1, "xi": xi, "c6": c6, "expected_variance": expected_variance, "tv": tv,
               "leakage": leakage}
    notes = [f"{r['statement']}: {r['note']}" for r in results]
    if "utility_loss_range" in payload:
        u = payload["utility_loss_range"]
        notes.append(f"at eps_p = {u['leakage']:g}: eps_u >= {u['min_nfl']:.6g} (no free lunch)"
                     f", eps_u (proxy) <= {u['max_theorem_6_12']:.6g} (Theorem 6.12)")
    if "optimum" in payload:
        o = payload["optimum"]
        notes.append(f"Theorem 6.14: optimum at E Var = {o['expected_variance']:.6g}"
                     + (f", p = {o['sampling_probability']:.6g}"
                        if o["sampling_probability"] is not None else "")
                     + ("" if o["cd_matches"] is None else
                        f"; C_d = C2/C6 {'holds' if o['cd_matches'] else 'does NOT hold'}"))
    _emit(as_json, "tradeoff", {**setting, **constants}, payload, results,
          ("statement", "quantity", "side", "value", "hypothesis", "proven"), notes)
