"""Help texts never break mid-sentence: every paragraph of every command's help is one line,
which rich wraps to the terminal (a docstring's source line breaks used to show up as breaks
in the middle of ``privfl --help``'s descriptions)."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from privfl.cli.help_text import unwrap
from privfl.cli.main import app


def _commands(command, path=("privfl",)):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(typer.main.get_command(app)))


def test_unwrap_joins_lines_of_a_paragraph_and_keeps_paragraphs_and_bullets():
    text = "One sentence that\n    goes on.\n\n    Second\n    paragraph:\n    * a\n    * b"
    assert unwrap(text) == "One sentence that goes on.\n\nSecond paragraph:\n* a\n* b"
    assert unwrap(None) is None


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in COMMANDS])
def test_no_help_has_a_line_break_inside_a_paragraph(path):
    command = dict((" ".join(p), c) for p, c in COMMANDS)[path]
    for text in (command.help or "", command.short_help or ""):
        for paragraph in text.split("\n\n"):
            lines = paragraph.split("\n")
            assert all(line.startswith(("* ", "- ", "• ")) for line in lines[1:]), (
                f"{path}: help breaks inside a paragraph: {paragraph!r}")


def test_the_command_list_shows_each_description_as_continuous_text():
    result = CliRunner().invoke(app, ["--help"], terminal_width=100, env={"COLUMNS": "100"})
    assert result.exit_code == 0
    text = re.sub(r"[│╭╰─╮╯]", " ", result.output)
    flat = " ".join(text.split())
    assert ("the tightest epsilon bound (with its accountant and unit) and any Gaussian-DP mu "
            "estimate." in flat)
    # a line of the list ending a description mid-sentence would leave a short line behind
    lines = [line.rstrip() for line in text.splitlines()]
    assert not any(re.fullmatch(r"\s+and any Gaussian-DP mu estimate\.", line)
                   for line in lines)


@pytest.mark.parametrize("args", [["run", "--help"], ["calibrate", "fedfdp", "--help"],
                                  ["list", "--help"]])
def test_flags_show_no_value_type(args):
    """``--json`` and ``--dry-run`` take no value: their help shows no ``<bool>`` (typer 0.29
    printed one), while options with a value keep their type."""
    result = CliRunner().invoke(app, args, terminal_width=120, env={"COLUMNS": "120"})
    assert result.exit_code == 0
    assert "<bool>" not in result.output
    assert re.search(r"--json\s+(?:│\s*)?Print", result.output)
    if args[0] == "calibrate":
        assert "<float>" in result.output
