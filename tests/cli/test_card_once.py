"""``privfl run`` prints the privacy card's setting and its footnotes once: the spent card at the
end shows the results and only the rows that changed since the planned card."""

from __future__ import annotations

import yaml
from rich.console import Console
from typer.testing import CliRunner

from privfl.accounting.results import PrivacyResult
from privfl.cli.main import app
from privfl.runs.card import render_card

TINY = {
    "name": "tiny-card",
    "data": {"dataset": "digits", "partition": "iid", "clients": 3, "test_size": 10},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 10, "lr": 0.05},
    "privacy": {"sigma": 0.9, "delta": 1e-5},
    "federated": {"rounds": 2, "client_rate": 1.0},
    "run": {"threads": 1},
}


def _result(note: str) -> PrivacyResult:
    return PrivacyResult(method="pld", kind="bound", epsilon=1.5, delta=1e-5, unit="record",
                         neighbouring="add/remove", sampling="poisson", release="final model",
                         steps=2, note=note)


def test_a_second_card_leaves_out_unchanged_rows_and_printed_notes():
    console = Console(record=True, width=100)
    rows = {"unit": "record", "steps": "R = 2 rounds", "delta": 1e-5}
    first = render_card(console, "planned", rows, [_result("a note")], footnotes=["a footnote"])
    render_card(console, "spent", {**rows, "steps": "R = 1 rounds"}, [_result("a note")],
                footnotes=["a footnote"], previous=first)
    text = console.export_text()
    assert text.count("unit") == 1 and text.count("a note") == 1
    assert text.count("a footnote") == 1
    assert "R = 1 rounds" in text and "2 more rows as in the card above" in text
    assert text.count("pld") == 2  # the results table is printed both times


def test_run_prints_the_setting_once(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "run"),
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "privacy card: planned, 2 rounds" in out and "privacy card: spent, 2 rounds" in out
    assert out.count("neighbouring") == 1
    assert out.count("threat model") == 1
    assert "as in the card above" in out
