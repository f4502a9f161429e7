"""Outputs of ``privfl tradeoff``: JSON of every point, a PNG frontier, a markdown report.

:func:`write_outputs` writes ``tradeoff.json`` (:func:`run_tradeoff`'s dict, infinities as the
strings "inf"), ``frontier.png`` (:func:`plot_frontier`) and ``report.md``
(:func:`report_markdown`) into a folder.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from privfl.distortion.orderings import largest_unresolved
from privfl.runs.rundir import json_safe

__all__ = ["MECHANISM_LABELS", "plot_frontier", "report_markdown", "write_outputs"]

#: Legend and table names of the mechanisms.
MECHANISM_LABELS = {
    "gaussian": "Gaussian distortion (Algorithm 3), grid of x",
    "gaussian-paper": "Gaussian, Lemma 6.8's noise for a TV target",
    "gaussian-isotropic": "Gaussian, exact isotropic calibration for a TV target",
    "gaussian-diagonal": "Gaussian, calibration under per-coordinate variances",
    "mask": "random mask (extension), grid of keep rates",
    "sampling": "record sampling (Algorithm 2), grid of rates",
}
_STYLE = {"gaussian": ("C0", "o"), "gaussian-paper": ("C3", "s"),
          "gaussian-isotropic": ("C5", "P"), "gaussian-diagonal": ("C2", "D"),
          "mask": ("C1", "^"), "sampling": ("C4", "v")}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.{digits}g}"
    return str(value)


def _series(points: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for point in points:
        out.setdefault(point["mechanism"], []).append(point)
    return out


#: The bounds drawn on the frontier (a ring marks a point where one failed by > 2 s.e.).
_FRONTIER_BOUNDS = ("Theorem 6.12", "Theorem 6.13 (no free lunch)")


def _violated(point: Mapping[str, Any]) -> bool:
    return any(point["bounds"][name]["clear_violations"] for name in _FRONTIER_BOUNDS
               if name in point["bounds"])


def _se(point: Mapping[str, Any], key: str) -> float:
    value = point.get(key)
    return float(value) if _finite(value) else 0.0


def plot_frontier(result: Mapping[str, Any], path: str | Path) -> Path:
    """Left: measured (eps_p, eps_u) per point with the per-point bounds on eps_u implied by
    the no-free-lunch lower bound (Theorem 6.13) and the paper's upper bound (Theorem 6.12,
    on the Appendix L proxy); points where one of these two was violated by > 2 standard errors
    are ringed in red; error bars are one standard error. Right: eps_p against TV with eq. (32)
    (Lemma 6.6), Lemma 6.5 as printed and privfl's triangle bound, drawn as curves with the
    unprotected C1 and the attacker's C2, and per point (short ticks) with the point's own C1,
    the one its checks use."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12.5, 5.0), dpi=110, layout="constrained")
    left, right = fig.subplots(1, 2)
    for mechanism, pts in _series(result["points"]).items():
        color, marker = _STYLE.get(mechanism, ("C7", "o"))
        xs = [p["eps_p"] for p in pts]
        left.errorbar(xs, [p["eps_u"] for p in pts], xerr=[_se(p, "eps_p_se") for p in pts],
                      yerr=[_se(p, "eps_u_se") for p in pts], marker=marker, color=color,
                      ls="-" if len(pts) > 2 and "-" not in mechanism else "none", capsize=2,
                      elinewidth=0.8, label=MECHANISM_LABELS.get(mechanism, mechanism))
        right.errorbar([max(p["tv"], 1e-6) for p in pts], xs,
                       yerr=[_se(p, "eps_p_se") for p in pts], marker=marker, color=color,
                       ls="none", capsize=2, elinewidth=0.8, label=mechanism)
        for p in pts:
            if _violated(p):
                left.plot([p["eps_p"]], [p["eps_u"]], marker="o", ms=13, mfc="none", mec="red")
            cd, c1, eps_p = p.get("cd"), p["c1"], p["eps_p"]
            if _finite(cd) and cd > 0:
                left.plot([eps_p], [(c1 - eps_p) / cd], marker="_", ms=12, color=color)
            if _finite(p.get("c2")) and _finite(p.get("c6")) and p["c2"] > 0:
                weight = p["c2"] / p["c6"]
                upper = (2 * c1 - eps_p) / weight - p["expected_variance"]
                left.plot([eps_p], [upper], marker="1", ms=10, color=color)
    left.plot([], [], marker="_", ls="none", color="k", ms=12,
              label="no-free-lunch lower bound on eps_u (Thm 6.13)")
    left.plot([], [], marker="1", ls="none", color="k", ms=10,
              label="paper's upper bound on the proxy (Thm 6.12)")
    left.plot([], [], marker="o", ms=11, mfc="none", mec="red", ls="none",
              label="Thm 6.12 or 6.13 violated (> 2 s.e.)")
    left.set_yscale("symlog", linthresh=1e-4)
    left.set_xlabel("privacy leakage eps_p (sqrt-JS, measured)")
    left.set_ylabel("utility loss eps_u = E||W~-W*||^2 - E||W-W*||^2")
    left.set_title("trade-off: measured points and the paper's bounds")
    left.legend(fontsize=7, loc="best")

    un = result["unprotected"]
    c1, xi = un["c1"], un["xi"]
    c2 = 0.5 * math.expm1(2 * xi) if _finite(xi) and xi < 350 else math.inf
    grid = [10 ** (k / 20) for k in range(-120, 1)]
    right.plot(grid, [c1 - t for t in grid], color="k", ls=":", label="eq. (32): C1 - TV (paper)")
    if _finite(c2) and c2 > 0:
        inside = [t for t in grid if c2 * t <= c1]
        right.plot(inside, [2 * c1 - c2 * t for t in inside], color="k", ls="--",
                   label="Lemma 6.5 as printed, where C2 TV <= C1")
        factor = 0.5 * (math.exp(1.5 * xi) - math.exp(-0.5 * xi))
        right.plot(grid, [min(c1 + factor * t, math.sqrt(math.log(2))) for t in grid],
                   color="k", ls="-", lw=0.8, label="triangle bound C1 + C2 e^(-xi/2) TV")
    if _finite(xi):
        factor = 0.5 * (math.exp(1.5 * xi) - math.exp(-0.5 * xi)) if xi < 470 else math.inf
        for p in result["points"]:  # the triangle bound with the point's own C1 (as checked)
            if _finite(p.get("c1")) and _finite(p.get("tv")):
                right.plot([max(p["tv"], 1e-6)], [min(p["c1"] + factor * p["tv"],
                                                       math.sqrt(math.log(2)))],
                           marker="_", ms=9, color="k")
    right.axhline(c1, color="grey", lw=0.6)
    right.set_xscale("log")
    right.set_ylim(0, math.sqrt(math.log(2)) * 1.02)
    right.set_xlabel("TV(P, P~)")
    right.set_ylabel("eps_p")
    right.set_title(f"leakage vs distortion (unprotected C1 = {c1:.3g}, xi = {xi:.3g})")
    right.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Zhang, Chen and Yang 2022 on {result['setting']['data']} "
                 f"({result['setting']['model']}, d = {result['setting']['dimension']})")
    path = Path(path)
    fig.savefig(path)
    return path


_KIND = {
    "Theorem 6.1 (Appendix L proxy)": "proven for zero-mean distortion (bounded W, Bias <= C5 TV)",
    "Theorem 6.1 (literal loss)": "not claimed by the proof",
    "Lemma 6.5 (paper)": "false under its printed hypothesis; proven if 2 C2 TV <= C1",
    "Lemma 6.5 (triangle, corrected)": "proven (privfl)",
    "Lemma B.1 (corrected)": "proven (privfl)",
    "Lemma 6.6, eq. (32)": "unproven, false in general",
    "Lemma 6.6 (budget tau = C1 - gap)": "unproven",
    "Theorem 6.12": "as Lemma 6.5",
    "Theorem 6.13 (no free lunch)": "cited, not checked; C_d assumed",
}


def _yes(flag: object) -> str:
    return "-" if flag is None else ("**yes**" if flag else "no")


def _orderings_section(result: Mapping[str, Any]) -> list[str]:
    """The leakage orderings that the draws do not resolve (within one standard error)."""
    rows = result.get("leakage_orderings", [])
    unresolved = [r for r in rows if r["within_one_se"]]
    tie = largest_unresolved(rows)
    c1 = result["unprotected"]["c1"]
    lines = ["", "### Leakage orderings within one standard error", "",
             f"{len(unresolved)} of {len(rows)} compared pairs (each point against its C1, and "
             "against the next point of its mechanism) differ by at most one standard error "
             "of their difference with "
             f"{result['setting']['replicas']} draws: their order may flip with another seed. "
             "The standard error of a difference is that of paired bootstrap replicates: the "
             "points share their draws and noise (common random numbers), so a difference is "
             "far less noisy than either leakage. "
             + (f"Every unresolved pair differs by less than {_fmt(tie, 2)} (|difference| + "
                f"one s.e.; {_fmt(100 * tie / c1, 2)} % of C1 = {_fmt(c1, 3)}): a tie at this "
                "precision. " if unresolved and c1 > 0 else "")
             + "More draws (tradeoff.replicas) resolve them; the last column is about how many "
             "(standard errors fall as 1 / sqrt(draws))."]
    if unresolved:
        lines += ["", "| first | second | difference | s.e. | draws to resolve |",
                  "|---|---|---|---|---|"]
        lines += [f"| {r['first']} | {r['second']} | {_fmt(r['difference'], 2)} | "
                  f"{_fmt(r['se'], 2)} | {_fmt(r['draws_to_resolve'], 3)} |" for r in unresolved]
    return lines


def report_markdown(result: Mapping[str, Any]) -> str:
    """The report section: setting, which bounds held, every point, Theorem 6.11's p."""
    s, un = result["setting"], result["unprotected"]
    lines = [
        "## Utility-privacy trade-off (Zhang, Chen and Yang 2022)",
        "",
        f"{result.get('description') or result['name']}. Base model: {s['model']} "
        f"(d = {s['dimension']}) trained by FedAvg for {s['base_rounds']} rounds on {s['data']} "
        f"({s['clients']} clients); test accuracy {_fmt(un['accuracy'], 4)}. Measured round: "
        f"Algorithm 2 from that model, record rate p0 = {_fmt(s['sampling_rate'])}, step "
        f"eta = {_fmt(s['lr'])}, {s['replicas']} Monte Carlo draws per client and point; "
        f"attacker: which of {s['candidates']} candidate records is a client's target record "
        f"(kernel {s['attacker']}, tempering t = {_fmt(s['tempering'])}).",
        "",
        f"Unprotected: C1 = {_fmt(un['c1'])} (s.e. {_fmt(un['c1_se'])}, bootstrap estimate of "
        f"its upward Monte Carlo bias {_fmt(un.get('c1_bias'))}), xi = {_fmt(un['xi'])} "
        f"({'exact for the tempered kernel' if un['xi_exact'] else 'largest over the draws'}),"
        f" sigma^2 = {_fmt(un['sigma2'])} per coordinate, E Var = "
        f"{_fmt(un['expected_variance'])}, G = sum ||g_i||^2 = {_fmt(un['gradient_sq_sum'])}, "
        f"E||W - W*||^2 = {_fmt(un['gap'])} (||grad|| at W* = "
        f"{_fmt(un['w_star_gradient_norm'])}).",
        "",
        "### Which bounds held on this model",
        "",
        "Cases are (grid point, client) pairs. *Held*: the measured value is on the bound's side "
        "(in all cases, whether or not the statement's hypothesis holds); *clear violations*: "
        "where the hypothesis holds, it misses by more than 2 standard errors (Monte Carlo). "
        "*Check*: a test, or a consistency check where a constant of the bound was fitted to "
        "(or assumed from) the same draws, so that it holding says little.",
        "",
        "| bound | status | check | cases | held | clear violations | hypothesis held | held "
        "where hypothesis held | clearly violated at |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in result["bounds"]:
        where = ", ".join(row["violated_points"][:4]) + (
            " ..." if len(row["violated_points"]) > 4 else "")
        lines.append(
            f"| {row['name']} | {_KIND.get(row['name'], '')} | "
            f"{row.get('kind', 'test').split(':')[0]} | {row['cases']} | {row['held']} | "
            f"{row['clear_violations']} | {row['hypothesis']} | "
            f"{row['held_under_hypothesis']} | {where or '-'} |")
    lines += [
        "",
        "### Points (means over clients)",
        "",
        "| mechanism | parameter | noise var | eps_p (s.e.; bias) | C1 | within 1 s.e. of C1 "
        "| TV [certified "
        "bracket] | TV isotropic model | TV 2-sample | eps_u (s.e.) | proxy | accuracy, 1 round "
        "| accuracy, trained | upload bytes | gradients | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in result["points"]:
        lines.append(
            f"| {p['mechanism']} | {p['parameter']} = {_fmt(p['value'], 6)} | "
            f"{_fmt(p['noise_variance'])} | {_fmt(p['eps_p'])} ({_fmt(p['eps_p_se'], 2)}; "
            f"{_fmt(p.get('eps_p_bias'), 2)}) | {_fmt(p['c1'])} | "
            f"{_yes(p.get('within_one_se_of_c1'))} | {_fmt(p['tv'])} "
            f"[{_fmt(p.get('tv_lower'))}, {_fmt(p.get('tv_upper'))}] | "
            f"{_fmt(p.get('tv_isotropic'))} | {_fmt(p['tv_two_sample'])} | "
            f"{_fmt(p['eps_u'])} ({_fmt(p['eps_u_se'], 2)}) | {_fmt(p['eps_u_proxy'])} | "
            f"{_fmt(p['accuracy'], 4)} | {_fmt(p.get('trained_accuracy'), 4)} | "
            f"{_fmt(p.get('efficiency', {}).get('upload_bytes'), 4)} | "
            f"{_fmt(p.get('efficiency', {}).get('gradients'), 3)} | "
            f"{_fmt(p.get('efficiency', {}).get('measure_seconds'), 2)} |")
    lines += _orderings_section(result)
    lines += ["", "### Theorem 6.11: sampling probability for each TV target", "",
              "C6 is the configured one or the median over the points; G at the base model, "
              "mean over clients.", "",
              "| gap | rule | C6 | r | feasible | p_min |", "|---|---|---|---|---|---|"]
    for rule in result["sampling_rules"]:
        lines.append(f"| {_fmt(rule['gap'])} | {rule['method']} | {_fmt(rule['c6'])} | "
                     f"{_fmt(rule['ratio'])} | {'yes' if rule['feasible'] else 'NO'} | "
                     f"{_fmt(rule['p_min'])} |")
    lines += [
        "",
        "What these numbers are: Monte Carlo estimates for one finite attacker (not privacy "
        "guarantees). TV is exact for the mask (1 - rho^d) and for record sampling (a binomial "
        "TV), and for Gaussian noise the TV of the diagonal Gaussian with the per-coordinate "
        "(delta-method) variances of the unprotected step (an estimate: the unprotected "
        "parameter takes finitely many values, and such a law has TV 1 to any continuous "
        "distortion), with a certified bracket for that model; the isotropic column is Lemma "
        "6.7's model (one variance for all coordinates), wrong for these parameters; the "
        "two-sample column is a Kolmogorov-Smirnov lower estimate. 'bias' is a bootstrap "
        "estimate of the upward Monte Carlo bias of the leakage. eps_u is the increase of "
        "E||W - W*||^2 (the "
        "Appendix L sign); the proxy evaluates the protected parameter at its mean, which is "
        "what Theorem 6.1 bounds. C6 is derived per point from held-out draws (fresh "
        "unprotected and protected draws that no check uses) unless configured; "
        "C_d = C2/C6 (Theorem 6.14's condition) unless nfl_delta is given. 'accuracy, 1 round' "
        "aggregates the protected client models of the measured round; 'accuracy, trained' "
        "trains from scratch with the protection applied every round through the client-side "
        "hook.",
        "",
    ]
    return "\n".join(lines)


def write_outputs(result: Mapping[str, Any], out: str | Path) -> dict[str, str]:
    """Write ``tradeoff.json`` (with ``outputs``: each file classified), ``frontier.png``,
    ``report.md`` and ``report.html`` (:mod:`privfl.runs.html_tradeoff`) into ``out``."""
    from privfl.runs.html import write_page
    from privfl.runs.html_tradeoff import tradeoff_html, tradeoff_outputs

    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    files = {"json": folder / "tradeoff.json", "plot": folder / "frontier.png",
             "report": folder / "report.md", "html": folder / "report.html"}
    saved = {**result, "outputs": [o.to_dict() for o in tradeoff_outputs()]}
    files["json"].write_text(json.dumps(json_safe(saved), indent=1) + "\n", encoding="utf-8")
    plot_frontier(result, files["plot"])
    files["report"].write_text(report_markdown(result), encoding="utf-8")
    write_page(files["html"], tradeoff_html(result))
    return {k: str(v) for k, v in files.items()}
