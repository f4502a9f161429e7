"""Small modules with one job: no file in src/ exceeds MAX_LINES unless its docstring says why.

A longer module states its reason in its module docstring, on a line that starts with
``Long module:`` (for example "Long module: one theorem's proof, step by step; splitting it
would scatter the argument"). ``TO_SPLIT`` lists today's long modules that have no such reason
yet: each is to be split (an entry that is no longer long, or that gained a reason, fails the
test, so the list only shrinks).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 800
MARKER = "Long module:"

#: long modules without a reason, to be split (path relative to src/)
TO_SPLIT: set[str] = set()


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _has_reason(path: Path) -> bool:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return any(line.strip().startswith(MARKER) and line.strip() != MARKER
               for line in doc.splitlines())


def _long_without_reason() -> set[str]:
    return {
        path.relative_to(SRC).as_posix()
        for path in SRC.rglob("*.py")
        if _line_count(path) > MAX_LINES and not _has_reason(path)
    }


def test_no_module_is_long_without_a_reason():
    unexplained = sorted(_long_without_reason() - TO_SPLIT)
    assert not unexplained, (
        f"modules over {MAX_LINES} lines without a '{MARKER} <reason>' line in their docstring "
        f"(split them, or state why not): {unexplained}"
    )


def test_the_list_of_modules_to_split_only_shrinks():
    stale = sorted(TO_SPLIT - _long_without_reason())
    assert not stale, f"no longer long (or now explained): remove from TO_SPLIT: {stale}"


def test_the_marker_is_read_from_the_docstring(tmp_path):
    explained = tmp_path / "explained.py"
    explained.write_text('"""Title.\n\nLong module: one proof.\n"""\n' + "x = 1\n" * 900)
    bare = tmp_path / "bare.py"
    bare.write_text('"""Title.\n\nLong module:\n"""\n# Long module: not in the docstring\n')
    assert _has_reason(explained) and _line_count(explained) > MAX_LINES
    assert not _has_reason(bare)
