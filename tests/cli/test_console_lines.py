"""`privfl run`'s console (issue 45, items 3 and 9): a round line is one line whatever the
width, the last one shows the headline's number and accountant, and the bar leaves the rounds
alone on screen, once, after the last round and after Ctrl-C."""

from __future__ import annotations

import io
import re

import yaml
from rich.console import Console
from test_run import TINY  # tests/cli/test_run.py
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.cli.run import _Display
from privfl.runs.progress import ECHO_ROOM, progress_bar


def test_round_lines_do_not_wrap_and_the_last_shows_the_headline(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({**TINY, "name": "a-long-name-" * 4}))
    # not a terminal, 40 columns: rich would wrap a line at 40
    result = CliRunner(env={"COLUMNS": "40"}).invoke(
        app, ["run", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    rounds = [line for line in lines if line.startswith("round ")]
    assert [line.split(":")[0] for line in rounds] == ["round 1/2", "round 2/2"]
    for line in rounds:  # the whole status on its line: accuracies, epsilon, seconds
        assert re.search(r"  eps ~?[0-9.]+ \(.+\)  \([0-9.]+ s(, ETA [0-9]+ s)?\)$", line), line
        assert len(line) > 40
    # the headline paragraph may wrap at 40 columns: read it with its spaces normalised
    headline = re.search(r"(?:^| )epsilon = ([0-9.]+) at delta = \S+ \((\S+) bound",
                         " ".join(result.output.split()))
    assert headline is not None, result.output
    # the last round line: the headline's value (rounded up alike) and accountant
    assert f"  eps {headline.group(1)} ({headline.group(2)})  (" in rounds[-1]


def _bar_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=80, color_system=None), out


def _last_frame(text: str) -> str:
    """What stays on screen: the text after the last erase-line sequence."""
    return text.rsplit("\x1b[2K", 1)[-1]


def test_the_bar_leaves_room_for_the_echoed_ctrl_c_and_ends_on_the_rounds_alone():
    console, out = _bar_console()
    display = _Display(console, True)
    display.progress = progress_bar(console)
    display.task = display.progress.add_task(
        "round", total=30, completed=12,
        status="global 84.0%  personalised 90.1%  eps ~3.9 (gdp-clt estimate)")
    display.on_clients(3, 6)
    lines = console.render_lines(display.progress.get_renderable(), console.options, pad=False)
    widths = [sum(len(segment.text) for segment in line) for line in lines]
    # two lines (rounds, clients), each short of the width by the echo's room: a ^C typed
    # at the end of the last one does not wrap, so the final redraw lands where the bar is
    assert len(widths) == 2 and max(widths) <= 80 - ECHO_ROOM
    display.on_clients(0, 6)  # a round ended: the clients' bar is back at 0/6
    display.close()  # as after the last round, an error or Ctrl-C
    final = _last_frame(out.getvalue())
    assert final.startswith("round ") and "clients" not in final
    assert final.count("round ") == 1
    display.close()  # twice (KeyboardInterrupt after an error): nothing more printed
    assert _last_frame(out.getvalue()) == final
