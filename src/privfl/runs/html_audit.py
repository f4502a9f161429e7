"""The audit's section of report.html (``privfl audit run``, :mod:`privfl.runs.canary_audit`):
the verdict with epsilon_lower, epsilon_estimate and epsilon_bound, a histogram of the canary
scores (inserted against not inserted) and the ROC curve of the score as a membership test.

Generic over canary sources: it reads audit.json's fields only (``scores``, ``inserted``, the
numbers and the descriptions), whatever kind of canary produced them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privfl.algorithms.outputs import Output
from privfl.runs.html import Figure, Section, line_figure, render_page, table
from privfl.runs.html_certify import outputs_section

__all__ = ["HISTOGRAM_BINS", "audit_html", "audit_section", "roc_curve"]

#: bins of the score histogram
HISTOGRAM_BINS = 30


def roc_curve(scores: Sequence[float], inserted: Sequence[bool]) -> tuple[np.ndarray, np.ndarray,
                                                                            float]:
    """``(fpr, tpr, auroc)`` of the test "inserted iff score >= threshold" over every threshold
    (from (0, 0) to (1, 1); tied scores move together, so the curve does not depend on the
    order of ties); AUROC by the trapezoid rule (ties count one half)."""
    values = np.asarray(scores, dtype=float)
    bits = np.asarray(inserted, dtype=bool)
    if values.ndim != 1 or values.shape != bits.shape or not bits.any() or bits.all():
        raise ValueError(f"scores (shape {values.shape}) and inserted (shape {bits.shape}) "
                         "must be 1-D of equal length, with both inserted and not inserted "
                         "canaries")
    order = np.argsort(-values, kind="stable")
    values, bits = values[order], bits[order]
    last = np.r_[np.flatnonzero(np.diff(values) != 0.0), values.size - 1]  # end of each tie
    tpr = np.r_[0.0, np.cumsum(bits)[last] / bits.sum()]
    fpr = np.r_[0.0, np.cumsum(~bits)[last] / (~bits).sum()]
    return fpr, tpr, float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1])) / 2.0)


def _histogram(scores: np.ndarray, bits: np.ndarray) -> Figure:
    edges = np.histogram_bin_edges(scores, bins=HISTOGRAM_BINS)
    centres = 0.5 * (edges[:-1] + edges[1:])
    data = [{"type": "bar", "name": name, "x": centres.tolist(),
             "y": np.histogram(scores[mask], bins=edges)[0].tolist(), "opacity": 0.6,
             "visible": True, "marker": {"color": color}}
            for name, mask, color in (("inserted", bits, "#d62728"),
                                      ("not inserted", ~bits, "#1f77b4"))]
    layout = {"title": {"text": "canary scores", "font": {"size": 14}}, "barmode": "overlay",
              "bargap": 0.02, "xaxis": {"title": {"text": "score"}},
              "yaxis": {"title": {"text": "canaries"}}, "height": 420,
              "legend": {"orientation": "v"}, "margin": {"t": 60, "r": 20}}
    return Figure("plot-audit-scores", data, layout,
                  "Scores of the canaries that were inserted and of those that were not: the "
                  "further apart, the more the released outputs reveal about one unit.")


def audit_section(audit: Mapping[str, Any]) -> Section:
    """The report.html section of an audit (audit.json's content)."""
    scores = np.asarray(audit["scores"], dtype=float)
    bits = np.asarray(audit["inserted"], dtype=bool)
    figures: list[Figure] = [_histogram(scores, bits)]
    auroc = None
    if bits.any() and not bits.all():
        fpr, tpr, auroc = roc_curve(scores, bits)
        figures.append(line_figure("plot-audit-roc", [
            {"name": "canary score", "x": fpr.tolist(), "y": tpr.tolist()},
            {"name": "chance", "x": [0.0, 1.0], "y": [0.0, 1.0], "dash": True}],
            title=f"ROC of the canary score (AUROC {auroc:.3f})", ytitle="true positive rate",
            xtitle="false positive rate", log=False, yrange=(0, 1),
            note="Each point: a threshold on the score; guessing 'inserted' above it."))

    def number(key: str) -> str:
        value = audit.get(key)
        return "n/a" if value is None else (str(value) if isinstance(value, str)
                                            else f"{float(value):.4g}")

    rows = [
        ("verdict", str(audit["verdict"])),
        ("epsilon_lower", f"{number('epsilon_lower')} ({audit['epsilon_lower_method']})"),
        ("epsilon_lower_max", f"{number('epsilon_lower_max')} (the most these "
         f"{audit['canaries']} canaries can show: perfectly separated scores)"),
        ("epsilon_lower_clopper_pearson", number("epsilon_lower_clopper_pearson")),
        ("epsilon_estimate", f"{number('epsilon_estimate')} ({audit['epsilon_estimate_method']})"),
        ("epsilon_bound", f"{number('epsilon_bound')} ({audit['epsilon_bound_method']})"),
        ("delta", number("delta")),
        ("canaries", f"{audit['canaries']} ({audit['canaries_inserted']} inserted, "
         f"{audit['canaries_not_inserted']} not)"),
        *((key, str(audit[key])) for key in ("unit", "canary", "score", "neighbouring",
                                             "sampling", "released") if key in audit),
        *((("AUROC", f"{auroc:.4f}"),) if auroc is not None else ()),
    ]
    return Section("audit", "Empirical privacy audit", text=(
        f"Verdict: {audit['verdict']}. The canary run of {audit['algorithm']} "
        f"({audit['rounds']} rounds) gives a lower bound epsilon_lower = "
        f"{number('epsilon_lower')} at confidence {float(audit['confidence']):g} against the "
        f"proven bound epsilon_bound = {number('epsilon_bound')} (delta = "
        f"{float(audit['delta']):g}). VIOLATED proves (at that confidence) that the code is "
        "less private than its proof says; consistent proves nothing about privacy: this "
        "attack found no leak larger than the proof allows.",),
        figures=tuple(figures), tables=(table(("", ""), rows, id="audit-numbers"),))


def audit_html(audit: Mapping[str, Any], outputs: Sequence[Output]) -> str:
    """The HTML text of ``privfl audit run``'s report.html: the audit section and the outputs
    of its directory, each classified."""
    return render_page(f"privfl audit run: {audit['algorithm']}",
                       [audit_section(audit), outputs_section(list(outputs))],
                       description=f"empirical privacy audit, verdict {audit['verdict']}")
