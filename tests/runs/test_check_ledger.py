"""Issue 44, item 5: check-privacy fails, naming the file, on every forgery a reader would see:
files deleted and reports forged, a forged headline prepended to report.md or shown beside the
real one hidden with display:none in report.html, the rows' epsilon and mu forged, forged
after_the_fact / rounds_to_target / final accuracy, an added file, run.json deleted, and an
edited or deleted ledger. Each passed check-privacy before the release ledger."""

from __future__ import annotations

import json
import shutil

import pytest
from _ledger_runs import demo

from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """Up to 20 rounds, stopped on 60 % accuracy after 3 (after_the_fact and rounds_to_target
    are written)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    config = demo(federated={"rounds": 20}, stop={"target_accuracy": 0.6})
    result = Experiment.create(config, out).run(progress=False)
    assert result.summary["rounds_to_target"] == 3 and "after_the_fact" in result.summary
    assert check_run_privacy(out).ok
    return out


def _edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2) + "\n")


def _forge_reports(run):
    (run / "summary.json").unlink()
    (run / "privacy.json").unlink()
    (run / "report.md").write_text("# run\n\nepsilon = 0.1 at delta = 1e-4\n")
    (run / "report.html").write_text("<p id=\"headline\">epsilon = 0.1</p>\n")


def _prepend_headline(run):
    text = (run / "report.md").read_text()
    (run / "report.md").write_text("**epsilon = 0.1 at delta = 0.0001 (PLD bound).**\n\n" + text)


def _hide_headline(run):
    text = (run / "report.html").read_text()
    real = '<p class="headline" id="headline">'
    assert text.count(real) == 1, "the report's headline element moved"
    (run / "report.html").write_text(text.replace(
        real, '<p class="headline">epsilon = 0.1 at delta = 0.0001</p><p class="headline" '
        'id="headline" style="display:none">'))


def _forge_rows(run):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        row["epsilon"] = row["mu"] = 0.001
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _forge_after_the_fact(run):
    _edit_json(run / "summary.json", lambda s: s["after_the_fact"].update(epsilon=0.5))


def _forge_rounds_to_target(run):
    _edit_json(run / "summary.json", lambda s: s.update(rounds_to_target=1))


def _forge_final_accuracy(run):
    _edit_json(run / "summary.json", lambda s: s["final"].update(global_accuracy=0.99))


def _add_file(run):
    (run / "results-epsilon-0.1.txt").write_text("epsilon = 0.1\n")


def _delete_run_json(run):
    (run / "run.json").unlink()


def _edit_ledger(run):
    path = run / "ledger.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    headline = next(i for i, line in enumerate(lines) if '"kind":"headline"' in line)
    lines[headline] = lines[headline].replace('"rounds_accounted":20', '"rounds_accounted":3')
    path.write_text("".join(lines))


def _delete_ledger(run):
    (run / "ledger.jsonl").unlink()


FORGERIES = {
    "reports forged, summary and privacy deleted": (_forge_reports, [
        "summary.json: missing (the run wrote it", "privacy.json: missing (the run wrote it",
        "report.md: changed since the run wrote it", "report.html: changed since the run"]),
    "headline prepended to report.md": (_prepend_headline, [
        "report.md: changed since the run wrote it"]),
    "headline hidden in report.html": (_hide_headline, [
        "report.html: changed since the run wrote it"]),
    "rows' epsilon and mu forged": (_forge_rows, [
        "metrics.jsonl: round 1 differs from the row ledger.jsonl recorded before it was "
        "shown (epsilon, mu; e.g. epsilon: written 0.001, released ",
        "metrics.jsonl: round 3 differs"]),
    "after_the_fact forged": (_forge_after_the_fact, ["summary.json: changed since the run"]),
    "rounds_to_target forged": (_forge_rounds_to_target, [
        "summary.json: rounds_to_target = 1, but the released rows reach the target at 3",
        "summary.json: changed since the run"]),
    "final accuracy forged": (_forge_final_accuracy, [
        "summary.json: final global_accuracy = 0.99, but the last released row (round 3) has ",
        "summary.json: changed since the run"]),
    "unlisted file added": (_add_file, [
        "results-epsilon-0.1.txt: not written by the run (ledger.jsonl does not record it"]),
    "run.json deleted": (_delete_run_json, ["run.json: missing (the run wrote it"]),
    "ledger edited": (_edit_ledger, ["ledger.jsonl: ", "does not match its hash (edited)"]),
    "ledger deleted": (_delete_ledger, ["ledger.jsonl: missing (every run records"]),
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_check_privacy_names_each_forgery(finished, tmp_path, name):
    forge, expected = FORGERIES[name]
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    forge(run)
    report = check_run_privacy(run)
    assert not report.ok and not report.ledger["ok"]
    problems = "\n".join(report.ledger["problems"])
    for text in expected:
        assert text in problems, problems
