"""report.html of ``privfl reproduce``: the table of rows and the regenerated figures beside the
paper's values, one self-contained page (rendered by :mod:`privfl.runs.html`)."""

from __future__ import annotations

from privfl.reproduce.rows import DIFFERS, HEADER, Reproduction, basis_summary, cells
from privfl.runs.html import Section, line_figure, render_page, table

__all__ = ["reproduction_html"]


def reproduction_html(rep: Reproduction) -> str:
    """The page's HTML text: a summary, the rows (differing rows highlighted), the figures
    (paper values dashed) and the notes, with the paper-scale plan."""
    counts = rep.counts()
    summary = (f"{rep.scale} scale: {len(rep.rows)} rows, {counts['match']} match, "
               f"{counts['differs']} differ (each with its reason); {rep.wall_seconds:.0f} s. "
               f"By basis: {basis_summary(rep.counts_by_basis())}.")
    accounting = [r for r in rep.rows if r.kind == "accounting"]
    training = [r for r in rep.rows if r.kind == "training"]
    sections = [Section("summary", "Summary", text=(summary,), notes=tuple(rep.notes))]
    for sid, title, rows in (("accounting", "Privacy accounting and formulas", accounting),
                             ("training", "Training", training)):
        if rows:
            sections.append(Section(sid, title, tables=(table(
                HEADER, [cells(r) for r in rows], id=f"rows-{sid}", numeric=(3, 4, 5, 6),
                row_classes=["outside" if r.verdict == DIFFERS else "" for r in rows]),)))
    figures = []
    for fid, curve in rep.curves.items():
        figure = line_figure(
            fid, curve["traces"], title=curve["title"], ytitle=curve["ytitle"],
            xtitle=curve["xtitle"], log=curve.get("log"),
            note=curve.get("note", "dashed: the paper's values (as printed, or its formula as "
                                   "printed)"))
        if curve.get("xlog"):
            figure.layout["xaxis"]["type"] = "log"
        figures.append(figure)
    if figures:
        sections.append(Section("figures", "Figures, regenerated", figures=tuple(figures)))
    if rep.plan:
        sections.append(Section("plan", "Paper-scale runs", text=tuple(rep.plan)))
    return render_page(f"privfl reproduce {rep.paper}: {rep.title}", sections,
                       description="Each row: the paper's value, privfl's, their relative "
                                   "difference, the tolerance, and the verdict (a row that "
                                   "differs says why; highlighted).")
