"""report.html of ``privfl certify CONFIG`` (:mod:`privfl.runs.certify`): one self-contained
page (:mod:`privfl.runs.html`) with the privacy statement first, the certified accuracy
against k, the attack-inefficacy bounds with the measured attack success, and the outputs of
the directory, each classified (:func:`certification_outputs`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privfl.algorithms.outputs import COVERED_ACCOUNTING, Output
from privfl.runs.html import Section, line_figure, outputs_table, render_page, table

__all__ = ["certification_html", "certification_outputs", "outputs_section"]

_ATTACKED = (False, "includes the measured success of the attacked replicas: models trained on "
             "poisoned copies of the training data, which the certification's composition over "
             "the M clean models does not count")


def certification_outputs(data: Mapping[str, Any]) -> list[Output]:
    """The files of a certification directory, each covered by the certification's guarantee
    (epsilon_cert = M epsilon over the M clean models, post-processing on held-out data) or
    outside it with the reason."""
    models = data["models"]
    clean = (True, f"the M = {models} clean models' outputs on held-out test data and the "
             "certificates computed from them (post-processing; covered by the certification's "
             f"epsilon = M epsilon)")
    report = _ATTACKED if data.get("measured") else clean
    return [
        Output("certify.json", "file", *report),
        Output("report.md", "file", *report),
        Output("report.html", "file", *report),
        Output("certified_accuracy.png", "file", *clean),
        Output("attack_inefficacy.png", "file",
               *(_ATTACKED if data.get("measured") else COVERED_ACCOUNTING)),
        Output("replicas/", "file", False, "the trained replicas (models, generator states, "
               "scores), attacked ones included: the certification's private state"),
    ]


def outputs_section(outputs: list[Output]) -> Section:
    """The section listing a directory's classified outputs."""
    return Section("outputs", "What the guarantee covers", text=(
        "Every file written here is a release. Outputs marked no are outside the guarantee "
        "stated on this page: do not publish them with it.",),
        tables=(outputs_table([o.to_dict() for o in outputs]),))


def certification_html(data: Mapping[str, Any]) -> str:
    """The HTML text of a certification (``CertificationRun.to_dict()``)."""
    acc, ineff = data["certified_accuracy"], data["inefficacy"]
    estimate = acc["kind"] == "estimate"
    what = "estimated certified accuracy (NOT a guarantee)" if estimate else "certified accuracy"
    privacy = Section("privacy", "Privacy", text=tuple(data["privacy_lines"]),
                      notes=(data["adversary"]["note"],))
    accuracy = Section("certified", "Certified accuracy", text=(
        f"Clean accuracy (mean of the M = {data['models']} single models): "
        f"{100 * data['clean_accuracy']:.1f} %; ensemble accuracy: "
        f"{100 * acc['ensemble_accuracy']:.1f} %. k counts {acc['adversary']} adversaries.",),
        figures=(line_figure("plot-certified", [
            {"name": what, "x": list(acc["k"]), "y": list(acc["certified_accuracy"])}],
            title=what, ytitle="fraction of test points", xtitle=f"k ({acc['adversary']})",
            log=False, yrange=(0, 1)),),
        tables=(table((f"k ({acc['adversary']})", f"{what} (%)", "standard error (%)"),
                      [(f"{k:g}", f"{100 * a:.1f}", f"{100 * se:.1f}") for k, a, se in
                       zip(acc["k"], acc["certified_accuracy"], acc["standard_error"],
                           strict=True)], id="certified", numeric=(1, 2)),))
    traces = [{"name": "lower bound (Theorem 6)", "x": list(ineff["k"]), "y": list(ineff["lower"])},
              {"name": "upper bound (Theorem 6)", "x": list(ineff["k"]),
               "y": list(ineff["upper"])}]
    if data["measured"]:
        traces.append({"name": "measured attack success", "x": [r["k"] for r in data["measured"]],
                       "y": [r["success"] for r in data["measured"]]})
    attack = Section("inefficacy", "Attack inefficacy (Theorem 6)", figures=(line_figure(
        "plot-inefficacy", traces, title=f"attack success: {ineff['kind']} bounds"
        + (" and measured" if data["measured"] else ""), ytitle="attack success",
        xtitle=f"k ({ineff['adversary']} attackers)", log=False, yrange=(0, 1)),),
        tables=(table(("k", "measured success (%)", "bounds (%)", "inside"),
                      [(r["k"], f"{100 * r['success']:.1f}",
                        f"{100 * r['bound_lower']:.1f}..{100 * r['bound_upper']:.1f}",
                        "yes" if r["inside"] else "NO") for r in data["measured"]],
                      id="measured", numeric=(1,)),) if data["measured"] else ())
    sections = [privacy, accuracy, attack, outputs_section(certification_outputs(data))]
    return render_page(f"privfl certify: {data['name']}", sections,
                       description=f"{data['models']} {data['algorithm']} models, unit "
                       f"{data['unit']}")
