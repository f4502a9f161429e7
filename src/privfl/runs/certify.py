"""The files of a certification (``privfl certify CONFIG``): certify.json, two plots, report.md
and report.html (:mod:`privfl.runs.html_certify`), written into one directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privfl.runs.rundir import json_safe

__all__ = ["certification_lines", "certification_markdown", "write_certification"]


def write_certification(result: Any, directory: str | Path) -> Path:
    """Write ``certify.json`` (with ``outputs``: each file classified), ``certified_accuracy.png``,
    ``attack_inefficacy.png``, ``report.md`` and ``report.html`` for a
    :class:`~privfl.robustness.pipeline.CertificationRun`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    from privfl.runs.html import write_page
    from privfl.runs.html_certify import certification_html, certification_outputs

    data = result.to_dict()
    saved = {**data, "outputs": [o.to_dict() for o in certification_outputs(data)]}
    (out / "certify.json").write_text(json.dumps(json_safe(saved), indent=2) + "\n")
    acc = data["certified_accuracy"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.step(acc["k"], [100 * a for a in acc["certified_accuracy"]], where="post")
    ax.set_xlabel(f"k ({acc['adversary']} adversaries)")
    ax.set_ylabel("certified accuracy (%)")
    ax.set_title(f"{data['name']}: M = {data['models']}, {data['method']}"
                 f"{' (ESTIMATE)' if acc['kind'] == 'estimate' else ''}, adversary "
                 f"{acc['adversary']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "certified_accuracy.png", dpi=120)
    plt.close(fig)
    ineff = data["inefficacy"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.fill_between(ineff["k"], [100 * v for v in ineff["lower"]],
                    [100 * v for v in ineff["upper"]], alpha=0.3, label="certified bounds")
    if data["measured"]:
        ks = [row["k"] for row in data["measured"]]
        ax.errorbar(ks, [100 * r["success"] for r in data["measured"]],
                    yerr=[[100 * (r["success"] - r["success_low"]) for r in data["measured"]],
                          [100 * (r["success_high"] - r["success"]) for r in data["measured"]]],
                    fmt="o", label="measured success")
    ax.set_xlabel(f"k ({ineff['adversary']} attackers)")
    ax.set_ylabel("attack success (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "attack_inefficacy.png", dpi=120)
    plt.close(fig)
    (out / "report.md").write_text(certification_markdown(data))
    write_page(out / "report.html", certification_html(data))
    return out


def _what(certificate: dict[str, Any]) -> str:
    """``certified accuracy`` or, for --method estimate, ``ESTIMATED certified accuracy``."""
    return ("ESTIMATED certified accuracy (estimate, not a guarantee)"
            if certificate.get("kind") == "estimate" else "certified accuracy")


def _reading(certificate: dict[str, Any]) -> str:
    """The adversary, its steps and the epsilon's relation, e.g. ``adversary replace, 1
    replace-one step per adversary, epsilon = 0.367``."""
    privacy = certificate["privacy"]
    steps = certificate["steps_per_adversary"]
    return (f"adversary {certificate['adversary']}, {steps} {privacy['neighbouring']} "
            f"step{'s' if steps > 1 else ''} per adversary, epsilon = {privacy['epsilon']:.6g}")


def certification_lines(data: dict[str, Any]) -> list[str]:
    """The console lines of a certification (``CertificationRun.to_dict()``)."""
    acc, ineff = data["certified_accuracy"], data["inefficacy"]
    who = "clients" if data["unit"] == "user" else "records"
    lines = [f"clean accuracy (mean of the M single models): {100 * data['clean_accuracy']:.1f}%;"
             f" ensemble accuracy: {100 * acc['ensemble_accuracy']:.1f}%",
             f"{data['adversary']['note']}",
             f"certificate: {_reading(acc)}"]
    what = _what(acc)
    for k, value in zip(acc["k"], acc["certified_accuracy"], strict=True):
        lines.append(f"{what} at k = {k:g} {data['adversary']['adversary']} {who}: "
                     f"{100 * value:.1f}%")
    lines.append(f"attack inefficacy (Theorem 6, {ineff['kind']}): {_reading(ineff)}")
    for row in data["measured"]:
        lines.append(f"k = {row['k']}: measured attack success {100 * row['success']:.1f}% "
                     f"(bounds {100 * row['bound_lower']:.1f}..{100 * row['bound_upper']:.1f}%"
                     f"{', estimate' if ineff['kind'] == 'estimate' else ''}, "
                     f"{'inside' if row['inside'] else 'OUTSIDE'})")
    cross = data["inefficacy_cross_entropy"]
    lines.append(f"attack inefficacy, cross-entropy cost clipped to C_bar = "
                 f"{cross['cost_bound']:g} (Theorem 6, {cross['kind']}): clean models "
                 f"{cross['clean_estimate']:.4g}; {_reading(cross)}")
    for row in data["measured_cross_entropy"]:
        lines.append(f"k = {row['k']}: measured cross-entropy {row['cross_entropy']:.4g} "
                     f"(bounds {row['bound_lower']:.4g}..{row['bound_upper']:.4g}"
                     f"{', estimate' if cross['kind'] == 'estimate' else ''}, "
                     f"{'inside' if row['inside'] else 'OUTSIDE'})")
    return lines


def certification_markdown(data: dict[str, Any]) -> str:
    """The report.md section of a certification."""
    acc = data["certified_accuracy"]
    ineff = data["inefficacy"]
    estimate = acc["kind"] == "estimate"
    lines = [f"# Certification: {data['name']}", "",
             f"{data['models']} independently noised {data['algorithm']} models (unit: "
             f"{data['unit']}), certificates of Xie et al. 2023 "
             + (f"calibrated by {data['method']} at confidence {data['confidence']:g} per test "
                "point." if not estimate else
                "from the uncalibrated Monte Carlo means (--method estimate): ESTIMATES, not "
                "guarantees."), "", "## Privacy", ""]
    lines += [f"* {line}" for line in data["privacy_lines"]]
    note = data["adversary"]["note"]
    lines += ["", "## Adversary", "", note[:1].upper() + note[1:] + ".", "",
              "| relation of epsilon | epsilon | steps per adversary | used for |",
              "|---|---|---|---|"]
    for r in data["adversary"]["readings"]:
        used = [name for name, key in (("certified accuracy", "certificate_neighbouring"),
                                       ("Theorem 6", "inefficacy_neighbouring"))
                if data["adversary"][key] == r["neighbouring"]]
        lines.append(f"| {r['neighbouring']} ({r['method']}) | {r['epsilon']:.6g} | "
                     f"{r['steps_per_adversary']} | {', '.join(used) or '-'} |")
    head = "estimated certified accuracy (%), NOT a guarantee" if estimate else \
        "certified accuracy (%)"
    lines += ["", "## Certified accuracy", "",
              f"Clean accuracy (mean of the single models): {100 * data['clean_accuracy']:.1f} "
              f"%; ensemble accuracy: {100 * acc['ensemble_accuracy']:.1f} %. {_reading(acc)}; "
              f"k counts {acc['adversary']} adversaries.", "",
              f"| k ({acc['adversary']}) | {head} | standard error |", "|---|---|---|"]
    lines += [f"| {k:g} | {100 * a:.1f} | {100 * se:.1f} |" for k, a, se in
              zip(acc["k"], acc["certified_accuracy"], acc["standard_error"], strict=True)]
    attack = data["attack"]
    bound = "estimated bound" if ineff["kind"] == "estimate" else "bound"
    lines += ["", "## Attack inefficacy (Theorem 6)", "",
              f"Attack test set: {attack['attack_set']} ({attack['attack_points']} images), "
              f"target label {attack['target_label']}; clean models' success "
              f"{100 * data['clean_attack_success']:.1f} %. Cost = attack success in [0, 1]. "
              f"{_reading(ineff)}.", "",
              f"| k ({ineff['adversary']}) | lower {bound} (%) | upper {bound} (%) | "
              "measured (%) | inside |", "|---|---|---|---|---|"]
    measured = {row["k"]: row for row in data["measured"]}
    for k, low, high in zip(ineff["k"], ineff["lower"], ineff["upper"], strict=True):
        row = measured.get(int(k))
        seen = (f"{100 * row['success']:.1f} ({100 * row['success_low']:.1f}.."
                f"{100 * row['success_high']:.1f})" if row else "-")
        inside = ("yes" if row["inside"] else "NO") if row else "-"
        lines.append(f"| {k:g} | {100 * low:.1f} | {100 * high:.1f} | {seen} | {inside} |")
    lines += ["", f"{ineff['note']}", ""]
    cross = data["inefficacy_cross_entropy"]
    lines += ["## Attack inefficacy, cross-entropy cost (Theorem 6)", "",
              f"Cost: {cross['cost']}. Clean models: {cross['clean_estimate']:.4g} "
              f"(unclipped mean {cross['clean_unclipped_mean']:.4g}; "
              f"{100 * cross['clean_clipped_fraction']:.1f} % of the losses clipped). "
              f"{_reading(cross)}.", "",
              f"| k ({cross['adversary']}) | lower {bound} | upper {bound} | measured | "
              "inside |", "|---|---|---|---|---|"]
    rows = {row["k"]: row for row in data["measured_cross_entropy"]}
    for k, low, high in zip(cross["k"], cross["lower"], cross["upper"], strict=True):
        row = rows.get(int(k))
        seen = (f"{row['cross_entropy']:.4g} ({row['cross_entropy_low']:.4g}.."
                f"{row['cross_entropy_high']:.4g})" if row else "-")
        inside = ("yes" if row["inside"] else "NO") if row else "-"
        lines.append(f"| {k:g} | {low:.4g} | {high:.4g} | {seen} | {inside} |")
    lines += ["", f"{cross['note']}", ""]
    return "\n".join(lines)
