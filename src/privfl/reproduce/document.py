"""Write docs/reproductions.md: the five quick reproductions, generated (not typed).

``python -m privfl.reproduce.document docs/reproductions.md`` runs ``privfl reproduce PAPER
--scale quick`` for every paper (a few minutes on 2 cores) and writes each table with its
command, date, machine and wall time; ``--paper-plan`` appends the paper-scale plans (a dry run:
which runs, how long, which data are missing).
"""

from __future__ import annotations

import argparse
import datetime
import time
from pathlib import Path

from privfl.reproduce.papers import PAPERS
from privfl.reproduce.report import machine, reproduce

__all__ = ["INTRO", "write_document"]

INTRO = """\
# Reproductions of the five papers

`privfl reproduce PAPER` recomputes a paper's numbers with privfl's own accountants, distortion
measures and training runner, and compares each with the number the paper prints. This page is
written by `python -m privfl.reproduce.document docs/reproductions.md` (it runs the five quick
reproductions below); do not edit the tables by hand.

Each row: the **quantity**; its **source** in the paper (table, figure, equation or section: our
copies of the papers are text conversions without page breaks, so rows cite those numbers rather
than pages); its **basis** (below); the **paper**'s value as printed (or, for a theory paper,
its printed formula evaluated on the stated inputs); **privfl**'s value; the **relative
difference** (privfl - paper) / |paper|; the **tolerance**; and the **verdict**. A row *matches*
when the relative difference is within the tolerance (an interval: privfl's value lies in it; a
text: the same). Accounting numbers are held to the paper's printed precision (half a unit of
its last digit) or, where both columns evaluate one formula, to 1e-6; Monte Carlo checks to 1 %
(more than four standard errors). A training row runs at several seeds (`--seeds`, 3 by
default) and gives their mean, spread and 95 % prediction interval (Student t: where one more
run falls); it matches only when the paper's number lies in that interval at the paper's own
scale, or, for an ordering the paper claims, when the ordering holds in every seed at the
settings the paper states for it; a number measured on another dataset or at another scale
never matches. A row that *differs* says why:
the paper's error (shown in docs/), a different dataset or scale, a bound privfl proves tighter,
or an estimate the paper presents as a bound. Where privfl's reading departs from the paper's
(the factor 2 in Zheng et al. 2021's sigma, an unsound theorem), the reason says which reading
each column uses.

The **basis** says what the paper column is: `printed` (a number, claim or formula the paper
prints, with its table, figure or equation), `derived` (privfl's conversion of a printed number,
the reason says from which: the paper column holds privfl's value, marked "(privfl's)"), `check`
(an identity or formula evaluated twice: a match tests privfl's code, not the paper) or
`extension` (privfl's own result, not in the paper). **Only `printed` rows that match count as
reproduced**; the summary below gives the counts by basis. A row that differs says which way:
for an epsilon or a noise, whether the paper's number is the more conservative.

`--scale quick` (below) computes the accounting in full and trains at a reduced scale on
built-in or Debian data, at seeds 0, 1, 2, so it is deterministic on one machine. `--scale
paper` adds the paper's own training runs from `configs/` (hours; a GPU is advised where the
paper used one); `--scale paper --dry-run` lists every training experiment of the paper with
its time, data and offline fallback, a row for each planned run. `--out DIR`
writes table.md, rows.json (the rows as `{quantity, source, basis, paper, privfl, rel_diff,
tolerance, verdict, reason}`, with `counts_by_basis` and `reproduced`) and report.html (the
table and the regenerated figures, the paper's values dashed). `tests/reproduce/` runs all five
quick reproductions (`make test-slow`) and fails when a matching row leaves its tolerance, a
pinned value drifts or a count by basis changes; it also fails when this page's tables differ
from a fresh generation (the accounting rows in the default suite, the training rows in the slow
one; numbers compared to their printed precision, training numbers within the quick runs'
spread, wall times and dates ignored).
"""


def _quick(name: str) -> tuple[dict, str, float]:
    """``privfl reproduce NAME --scale quick`` in a fresh interpreter, as a user runs it:
    its JSON, its Markdown section and its wall time (start-up included)."""
    import json
    import subprocess
    import sys
    import tempfile

    with tempfile.TemporaryDirectory(prefix="privfl-doc-") as scratch:
        section = Path(scratch) / f"{name}.md"
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "privfl.cli.main", "reproduce", name, "--scale", "quick",
             "--json", "--markdown", str(section)], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"privfl reproduce {name} failed: {done.stderr.strip()[-2000:]}")
        return json.loads(done.stdout), section.read_text(encoding="utf-8"), wall


def write_document(path: str | Path, *, paper_plan: bool = False) -> str:
    """Run the five quick reproductions and write the page to ``path``; returns its text."""
    import os

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    today = datetime.date.today().isoformat()
    sections, walls = [], []
    summary = ["| paper | command | rows | match | differ | printed (match) | derived (match) "
               "| check (match) | extension (match) | reproduced | wall time |",
               "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name in PAPERS:
        payload, section, wall = _quick(name)
        counts = payload["counts"]
        walls.append(wall)
        by_basis = " | ".join(f"{sum(c.values())} ({c['match']})"
                              for c in payload["counts_by_basis"].values())
        summary.append(f"| {PAPERS[name].cite} | `privfl reproduce {name} --scale "
                       f"quick` | {len(payload['rows'])} | {counts['match']} | "
                       f"{counts['differs']} | {by_basis} | {payload['reproduced']} | "
                       f"{wall:.0f} s |")
        sections.append(section)
    lines = [INTRO, f"## Quick scale ({today})", "",
             f"Machine: {machine()}, CPU only, shared with other jobs (load average {load:.1f} "
             "at the start). Each command ran in its own process, one after the other; the wall "
             f"time includes its start-up (about 2 s); {sum(walls):.0f} s in all. Each section's "
             "own time below excludes the start-up.", "", *summary, ""]
    lines += sections
    if paper_plan:
        lines += paper_scale_section()
    text = "\n".join(lines).rstrip() + "\n"
    Path(path).write_text(text, encoding="utf-8")
    return text


def paper_scale_section() -> list[str]:
    """The page's "Paper scale" section: each paper's ``--scale paper --dry-run`` plan and the
    data it lacks here (fast: nothing is trained)."""
    lines = ["## Paper scale", "", "Not run on this machine yet (hours of CPU per paper, and "
             "MNIST, CIFAR-10, EMNIST and Sent140 are not available offline). `privfl reproduce "
             "PAPER --scale paper --dry-run` lists each run:", ""]
    for name in PAPERS:
        rep = reproduce(name, "paper", dry_run=True)
        if rep.plan:
            lines += [f"### {rep.title}", ""] + [f"* {line}" for line in rep.plan] + [""]
            missing = sorted({r.reason.split("; fallback: ")[0] for r in rep.rows
                              if r.reason.startswith("not run: the data are not on this machine")})
            lines += [f"* {reason}" for reason in missing] + ([""] if missing else [])
        else:
            lines += [f"### {rep.title}", "", "* nothing to train: the paper has no "
                      "training experiment", ""]
    return lines


def replace_paper_scale_section(path: str | Path) -> str:
    """Rewrite only the "Paper scale" section of the page at ``path`` (the quick sections are
    kept as they are: regenerating them trains every quick reproduction)."""
    page = Path(path).read_text(encoding="utf-8")
    head = page.split("\n## Paper scale\n", 1)[0].rstrip() + "\n\n"
    text = head + "\n".join(paper_scale_section()).rstrip() + "\n"
    Path(path).write_text(text, encoding="utf-8")
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="the page to write (docs/reproductions.md)")
    parser.add_argument("--paper-plan", action="store_true",
                        help="also write the paper-scale plans (a dry run)")
    parser.add_argument("--only-paper-plan", action="store_true",
                        help="rewrite only the page's paper-scale section (no training)")
    args = parser.parse_args(argv)
    if args.only_paper_plan:
        replace_paper_scale_section(args.path)
    else:
        write_document(args.path, paper_plan=args.paper_plan)


if __name__ == "__main__":  # pragma: no cover
    main()
