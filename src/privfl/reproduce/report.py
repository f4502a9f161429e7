"""Running a reproduction and writing what it found: the table (Markdown), the rows (JSON) and
report.html (:mod:`privfl.reproduce.html`)."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

from privfl._validation import check_choice
from privfl.reproduce.papers import SCALES, paper
from privfl.reproduce.rows import HEADER, Reproduction, basis_summary, cells
from privfl.reproduce.seeds import DEFAULT_SEEDS, check_seeds
from privfl.reproduce.training import Progress

__all__ = ["machine", "markdown", "reproduce", "write"]

def reproduce(name: str, scale: str = "quick", out: str | Path | None = None, *,
              training: bool = True, dry_run: bool = False,
              progress: Progress | None = None, seeds: int = DEFAULT_SEEDS) -> Reproduction:
    """Reproduce paper ``name`` at ``scale`` (see :data:`~privfl.reproduce.papers.SCALES`);
    with ``out``, write table.md, rows.json and report.html there (and the training runs
    under ``out/runs``). ``training=False``: the accounting rows only; ``dry_run``: plan the
    paper-scale runs without training; ``seeds``: the training seeds of the quick scale (at
    least 2; :mod:`privfl.reproduce.seeds`)."""
    entry = paper(name)
    scale = check_choice("scale", scale, SCALES)
    check_seeds(seeds)
    out = None if out is None else Path(out)
    runs = None if out is None else out / "runs"
    if training and runs is not None and runs.is_dir() and any(runs.iterdir()):
        raise ValueError(f"out = {str(out)!r} already holds a reproduction's training runs "
                         f"({runs}): choose another --out or remove that folder")
    started = time.perf_counter()
    rep = entry.load().reproduce(scale, None if out is None else out / "runs",
                                 training=training, dry_run=dry_run, progress=progress,
                                 seeds=seeds)
    rep.wall_seconds = time.perf_counter() - started
    if out is not None:
        write(rep, out)
    return rep


def machine() -> str:
    """One line on this machine: CPU model and count, and whether torch sees a GPU."""
    import os

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{cores}-core {model}, {platform.system()} {platform.release()}"


def markdown(rep: Reproduction, *, heading: str = "##", command: str = "") -> str:
    """The reproduction as a Markdown section: what ran, the counts, the table, the notes."""
    counts = rep.counts()
    lines = [f"{heading} {rep.title}", ""]
    if command:
        lines += [f"`{command}`: {rep.scale} scale, {rep.wall_seconds:.0f} s wall, "
                  f"{counts['match']} match, {counts['differs']} differ; by basis: "
                  f"{basis_summary(rep.counts_by_basis())}.", ""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for row in rep.rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells(row)) + " |")
    if rep.notes:
        lines.append("")
        lines += [f"* {note}" for note in rep.notes]
    if rep.plan:
        lines += ["", "Paper-scale runs (`--scale paper`):", ""]
        lines += [f"* {line}" for line in rep.plan]
    return "\n".join(lines) + "\n"


def write(rep: Reproduction, out: str | Path) -> dict[str, Path]:
    """Write ``table.md``, ``rows.json`` and ``report.html`` into ``out``."""
    from privfl.reproduce.html import reproduction_html
    from privfl.runs.html import write_page

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"table": out / "table.md", "rows": out / "rows.json", "html": out / "report.html"}
    paths["table"].write_text(markdown(rep), encoding="utf-8")
    paths["rows"].write_text(json.dumps(rep.to_dict(), indent=1) + "\n", encoding="utf-8")
    write_page(paths["html"], reproduction_html(rep))
    return paths
