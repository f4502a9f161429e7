"""README times say where they were measured (issue 45, item 10): "about 6 s" was 13-53 s on a
busy 2-core machine. Every paragraph of README.md that states a duration names the machine
(its cores) and the load (idle cores, a load average, busy processes) it was measured at."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"

#: a duration: "6 s", "0.3 s", "4.5 min", "19 minutes", "1.3-1.6 s"
DURATION = re.compile(r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:s|ms|min|minutes|seconds)\b")
MACHINE = re.compile(r"\b2-core\b|\b2 (?:idle )?cores\b|\bcores\b")
LOAD = re.compile(r"\bidle\b|\bload average\b|\bbusy\b")


def _paragraphs(text: str) -> list[str]:
    """Paragraphs of prose and code blocks' comment lines (where ``make test``'s time is)."""
    return [block for block in re.split(r"\n\s*\n", text) if block.strip()]


def test_every_readme_time_names_the_machine_and_the_load():
    timed = [p for p in _paragraphs(README.read_text()) if DURATION.search(p)]
    assert len(timed) >= 4  # make test, CI, the main job, the text commands
    bare = [p[:120] for p in timed if not (MACHINE.search(p) and LOAD.search(p))]
    assert bare == []


def test_the_check_catches_a_bare_time():
    assert DURATION.search("the main job takes about 6 s")
    paragraph = "The main job takes about 6 s on 2 cores."
    assert MACHINE.search(paragraph) and not LOAD.search(paragraph)
