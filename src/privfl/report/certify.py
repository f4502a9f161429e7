"""The files of a certification (``privfl certify CONFIG``): certify.json, two plots and
report.md, written into one directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privfl.report.rundir import json_safe

__all__ = ["certification_markdown", "write_certification"]


def write_certification(result: Any, directory: str | Path) -> Path:
    """Write ``certify.json``, ``certified_accuracy.png``, ``attack_inefficacy.png`` and
    ``report.md`` for a :class:`~privfl.robustness.pipeline.CertificationRun`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    data = result.to_dict()
    (out / "certify.json").write_text(json.dumps(json_safe(data), indent=2) + "\n")
    acc = data["certified_accuracy"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.step(acc["k"], [100 * a for a in acc["certified_accuracy"]], where="post")
    ax.set_xlabel("k (adversaries)")
    ax.set_ylabel("certified accuracy (%)")
    ax.set_title(f"{data['name']}: M = {data['models']}, {data['method']}", fontsize=9)
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
    ax.set_xlabel("k (attackers)")
    ax.set_ylabel("attack success (%)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "attack_inefficacy.png", dpi=120)
    plt.close(fig)
    (out / "report.md").write_text(certification_markdown(data))
    return out


def certification_markdown(data: dict[str, Any]) -> str:
    """The report.md section of a certification."""
    lines = [f"# Certification: {data['name']}", "",
             f"{data['models']} independently noised {data['algorithm']} models (unit: "
             f"{data['unit']}), certificates of Xie et al. 2023 calibrated by {data['method']} "
             f"at confidence {data['confidence']:g} per test point.", "", "## Privacy", ""]
    lines += [f"* {line}" for line in data["privacy_lines"]]
    acc = data["certified_accuracy"]
    lines += ["", "## Certified accuracy", "",
              f"Clean accuracy (mean over the models): {100 * data['clean_accuracy']:.1f} %.", "",
              "| k | certified accuracy (%) | standard error |", "|---|---|---|"]
    lines += [f"| {k:g} | {100 * a:.1f} | {100 * se:.1f} |" for k, a, se in
              zip(acc["k"], acc["certified_accuracy"], acc["standard_error"], strict=True)]
    ineff = data["inefficacy"]
    attack = data["attack"]
    lines += ["", "## Attack inefficacy (Theorem 6)", "",
              f"Attack test set: {attack['attack_set']} ({attack['attack_points']} images), "
              f"target label {attack['target_label']}; clean models' success "
              f"{100 * data['clean_attack_success']:.1f} %. Cost = attack success in [0, 1].",
              "", "| k | lower bound (%) | upper bound (%) | measured (%) | inside |",
              "|---|---|---|---|---|"]
    measured = {row["k"]: row for row in data["measured"]}
    for k, low, high in zip(ineff["k"], ineff["lower"], ineff["upper"], strict=True):
        row = measured.get(int(k))
        seen = (f"{100 * row['success']:.1f} ({100 * row['success_low']:.1f}.."
                f"{100 * row['success_high']:.1f})" if row else "-")
        inside = ("yes" if row["inside"] else "NO") if row else "-"
        lines.append(f"| {k:g} | {100 * low:.1f} | {100 * high:.1f} | {seen} | {inside} |")
    lines += ["", f"{ineff['note']}", ""]
    return "\n".join(lines)
