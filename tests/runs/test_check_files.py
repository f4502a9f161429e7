"""`privfl check-privacy` checks every number a finished run wrote, not only the metrics rows:
summary.json's headline, final epsilon, results, card, outputs table and config digest,
privacy.json's outputs table and results (a field deleted inside one entry), report.md and
report.html. Each forgery below passed the check before; each problem names the file and field.
`privfl compare` warns on a run whose files disagree.

One real run (3 rounds of DP-FedAvg on synthetic data, a few seconds) is copied and tampered with.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from markupsafe import escape
from test_check import RAW as CHECK_RAW  # tests/runs/test_check.py
from typer.testing import CliRunner

from privfl.algorithms.outputs import GENERIC_METRICS
from privfl.cli.main import app
from privfl.config import config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.check_files import check_run_files
from privfl.runs.experiment import Experiment
from privfl.runs.ledger import GENESIS, entry_hash, file_digests
from privfl.runs.provenance import config_digest
from privfl.runs.reading import FALSE_POSITIVE_RATES, plain_reading
from privfl.runs.rounding import format_bound
from privfl.runs.rundir import RunDirectory

#: test_check.py's DP-FedAvg run, 3 rounds
RAW = {**CHECK_RAW, "name": "check-files", "federated": {**CHECK_RAW["federated"], "rounds": 3}}
#: a 2-round PriFedSync run (about 2 s): its headline has scope advice (report the weak scope;
#: the strong scope's epsilon beside it) and a plain-words reading of its bound
ADVISED_RAW = {**RAW, "name": "check-files-advice",
               "privacy": {"sigma": 1.0, "clip_norm": 0.5, "delta": 1e-3, "accountants": ["rdp"]},
               "federated": {"algorithm": "prifedsync", "rounds": 2, "client_rate": 0.5}}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 3-round run directory (never modified: tests tamper with copies)."""
    run_dir = tmp_path_factory.mktemp("check-files") / "run"
    Experiment.create(config_from_dict(RAW), run_dir).run()
    return run_dir


@pytest.fixture
def run(finished, tmp_path):
    return shutil.copytree(finished, tmp_path / "run")


def _load(path):
    return json.loads(path.read_text())


def _dump(path, value):
    path.write_text(json.dumps(value, indent=2))


def _file_problems(run_dir):
    report = check_run_privacy(run_dir)
    assert all(row["ok"] for row in report.rows) and report.released["ok"]
    assert report.ok is report.files["ok"]
    return report.files["problems"]


def _true_epsilon(run_dir):
    (rdp,) = [r for r in _load(run_dir / "privacy.json")["results"] if r["method"] == "rdp"]
    return rdp["epsilon"]


def test_an_untouched_run_agrees_in_every_file(run):
    summary = _load(run / "summary.json")
    epsilon = _true_epsilon(run)
    assert 6.0 < epsilon < 7.0 and summary["headline"]["epsilon"] == epsilon
    assert summary["final"]["epsilon"] == epsilon
    report = check_run_privacy(run)
    assert report.ok and report.files == {"ok": True, "problems": []}
    assert report.to_dict()["files"] == {"ok": True, "problems": []}


def test_a_forged_headline_and_final_epsilon_in_summary_fail(run):
    path = run / "summary.json"
    summary = _load(path)
    summary["headline"]["epsilon"] = 0.1
    summary["final"]["epsilon"] = 0.1
    _dump(path, summary)
    epsilon = _true_epsilon(run)
    assert _file_problems(run) == [
        f"summary.json headline.epsilon: written 0.1, fresh {epsilon!r} (relative difference "
        f"{abs(epsilon - 0.1) / epsilon:.3g})",
        f"summary.json final.epsilon: written 0.1, fresh {epsilon!r} (relative difference "
        f"{abs(epsilon - 0.1) / epsilon:.3g})"]
    result = CliRunner().invoke(app, ["check-privacy", str(run)])
    assert result.exit_code == 1 and "summary.json headline.epsilon: written 0.1" in result.stdout
    assert "the files written at the stop (summary.json, privacy.json, report.md, report.html): " \
        "MISMATCH" in result.stdout


def _rechain_ledger(run_dir):
    """ledger.jsonl re-signed for the files as they are now: what a forger who rewrites the
    chain consistently (it has no key), or a run whose own code wrote a wrong number, leaves;
    only the fresh computation of the files can then see the difference."""
    path = run_dir / "ledger.jsonl"
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    prev = GENESIS
    for entry in entries:
        if entry["kind"] == "files":
            entry["payload"]["files"] = file_digests(run_dir, entry["payload"]["files"])
        entry["prev"], entry["hash"] = prev, entry_hash(entry["index"], entry["kind"],
                                                        entry["payload"], prev)
        prev = entry["hash"]
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


def test_a_forged_number_the_ledger_agrees_with_still_fails_the_verdict(run):
    """The verdict reads the files' fresh computation, not only the ledger: a summary.json
    whose final epsilon is forged, with a ledger re-signed to match it, exits 1."""
    path = run / "summary.json"
    summary = _load(path)
    summary["final"]["epsilon"] = 0.1
    _dump(path, summary)
    _rechain_ledger(run)
    report = check_run_privacy(run)
    assert report.ledger["ok"], report.ledger
    assert not report.files["ok"] and not report.ok
    assert any(p.startswith("summary.json final.epsilon: written 0.1")
               for p in report.files["problems"])
    result = CliRunner().invoke(app, ["check-privacy", str(run)])
    assert result.exit_code == 1, result.stdout


def test_a_headline_field_deleted_or_a_sentence_edited_in_summary_fails(run):
    path = run / "summary.json"
    summary = _load(path)
    sentence = summary["headline"]["sentence"]
    assert sentence == "epsilon = 6.441 at delta = 0.001 (RDP bound, client level)."
    summary["headline"]["sentence"] = sentence.replace("6.441", "0.1")
    del summary["headline"]["method"]
    del summary["privacy"][0]["epsilon"]
    _dump(path, summary)
    assert _file_problems(run) == [
        "summary.json headline.sentence: written 'epsilon = 0.1 at delta = 0.001 (RDP bound, "
        f"client level).', fresh {sentence!r}",
        "summary.json headline.method: missing (fresh 'rdp')",
        f"summary.json privacy: rdp/bound epsilon: missing from the logged entry (fresh "
        f"{_true_epsilon(run)!r})"]


def test_an_edited_report_md_fails(run):
    path = run / "report.md"
    text = path.read_text()
    assert "**epsilon = 6.441 at delta = 0.001 (RDP bound, client level).**" in text
    path.write_text(text.replace("**epsilon = 6.441 ", "**epsilon = 0.1 "))
    assert _file_problems(run) == [
        "report.md headline: differs from a fresh computation (line '**epsilon = 6.441 at delta "
        "= 0.001 (RDP bound, client level).**' is missing or altered)"]
    # a number of the results table (the card) and a row of the outputs table
    row = "| `train_loss` | metric | **no** | computed on the round's training data without noise |"
    assert row in text
    epsilon = format_bound(_true_epsilon(run))  # rounded up, as every printed bound
    assert epsilon == "6.44026"  # 6.44025x rounded up (privfl.runs.rounding)
    line = next(line for line in text.splitlines() if line.startswith("| rdp | **bound** |"))
    assert f"| {epsilon} |" in line
    path.write_text(text.replace(line, line.replace(f"| {epsilon} |", "| 0.1 |"))
                    .replace(row, row.replace("**no**", "yes")))
    assert _file_problems(run) == [
        "report.md privacy card and results: differs from a fresh computation (line "
        f"{line!r} is missing or altered)",
        f"report.md outputs table: differs from a fresh computation (line {row!r} is missing "
        "or altered)"]


def test_an_edited_report_html_fails(run):
    path = run / "report.html"
    text = path.read_text()
    expected = 'id="headline">epsilon = 6.441 at delta = 0.001 (RDP bound, client level).</p>'
    assert expected in text
    path.write_text(text.replace(expected, expected.replace("6.441", "0.1")))
    assert _file_problems(run) == [
        f"report.html headline: differs from a fresh computation (line {expected!r} is "
        "missing or altered)"]


@pytest.fixture(scope="module")
def advised(tmp_path_factory):
    """A finished PriFedSync run whose headline has advice and a reading (never modified)."""
    run_dir = tmp_path_factory.mktemp("check-files-advice") / "run"
    Experiment.create(config_from_dict(ADVISED_RAW), run_dir).run()
    return run_dir


def _forge_a_number(key: str, paragraph: str) -> str:
    """``paragraph`` with one of its numbers made smaller: the advice's last epsilon (the
    strong scope's) becomes 1.0; the reading's first percentage other than the false-positive
    rate it is given at (what a test catches, how sure an attacker ends) becomes 1%."""
    if key == "advice":
        last = list(re.finditer(r"epsilon = ([0-9.]+)", paragraph))[-1]
        return paragraph[:last.start(1)] + "1.0" + paragraph[last.end(1):]
    rates = {f"{100 * rate:g}%" for rate in FALSE_POSITIVE_RATES}
    bound = next(p for p in re.findall(r"\d+(?:\.\d+)?%", paragraph) if p not in rates)
    return paragraph.replace(bound, "1%", 1)


@pytest.mark.parametrize("key", ["advice", "reading"])
def test_a_forged_advice_or_reading_in_report_html_fails(advised, tmp_path, key):
    """report.html's scope advice and plain-words reading are recomputed by the code that
    wrote them: a bound made smaller there ("catches at most 40%" -> "1%") fails check-privacy
    with a problem naming the part."""
    run = shutil.copytree(advised, tmp_path / "run")
    headline = _load(run / "summary.json")["headline"]
    assert headline["reading"] == plain_reading(headline["epsilon"], headline["delta"],
                                                headline["unit"], headline["neighbouring"])
    assert headline["advice"].startswith("Report the weak scope")
    assert "(RDP bound, record level, strong scope)" in headline["advice"]
    path = run / "report.html"
    text = path.read_text()
    line = f'id="{key}">{escape(headline[key])}</p>'
    assert line in text and check_run_privacy(run).ok
    forged = _forge_a_number(key, headline[key])
    assert forged != headline[key]
    path.write_text(text.replace(line, f'id="{key}">{escape(forged)}</p>'))
    assert _file_problems(run) == [
        f"report.html {key}: differs from a fresh computation (line {line!r} is missing or "
        "altered)"]
    result = CliRunner().invoke(app, ["check-privacy", str(run)])
    assert result.exit_code == 1 and f"report.html {key}: differs" in result.stdout


@pytest.mark.parametrize("name", ["train_loss", "update_norm", "seconds"])
def test_an_uncovered_metric_flipped_to_covered_in_privacy_json_fails(run, name):
    path = run / "privacy.json"
    saved = _load(path)
    (entry,) = [o for o in saved["outputs"] if o["name"] == name]
    assert entry["covered"] is False
    entry["covered"] = True
    _dump(path, saved)
    assert _file_problems(run) == [
        f"privacy.json outputs[{name}].covered: written True, fresh False"]


def test_seconds_is_outside_the_guarantee_in_every_table(run):
    """Directly: the round's wall time is never covered (it grows with realised counts)."""
    covered, reason = GENERIC_METRICS["seconds"]
    assert covered is False and "wall-clock time of the round" in reason
    for name in ("privacy.json", "summary.json"):
        outputs = {o["name"]: o for o in _load(run / name)["outputs"]}
        assert outputs["seconds"] == {"name": "seconds", "kind": "metric", "covered": False,
                                      "reason": reason}
        assert outputs["metrics.jsonl"]["covered"] is False
        assert "seconds)" in outputs["metrics.jsonl"]["reason"]
    assert "| `seconds` | metric | **no** |" in (run / "report.md").read_text()


def test_an_output_row_deleted_from_summary_fails(run):
    path = run / "summary.json"
    summary = _load(path)
    summary["outputs"] = [o for o in summary["outputs"] if o["name"] != "checkpoints/"]
    _dump(path, summary)  # the checkpoints are still on disk
    (problem,) = _file_problems(run)
    assert problem.startswith("summary.json outputs[checkpoints/]: missing (fresh {'name': "
                              "'checkpoints/', 'kind': 'file', 'covered': False")


def test_secure_flipped_in_config_yaml_fails(run):
    path = run / "config.yaml"
    config = yaml.safe_load(path.read_text())
    assert config["privacy"]["secure"] is False
    written = _load(run / "summary.json")["provenance"]["config_sha256"]
    config["privacy"]["secure"] = True
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    fresh = config_digest(config_from_dict(config).model_dump(mode="json"))
    assert fresh != written
    problems = _file_problems(run)
    assert (f"summary.json provenance.config_sha256: written {written!r}, fresh {fresh!r}"
            in problems)
    assert "privacy.json outputs[config.yaml].covered: written False, fresh True" in problems
    assert any(p.startswith("summary.json setting.randomness: written 'seeded") for p in problems)


def test_a_field_deleted_inside_a_privacy_json_result_fails(run):
    path = run / "privacy.json"
    saved = _load(path)
    (gdp,) = [r for r in saved["results"] if r["method"] == "gdp-clt"]
    mu = gdp.pop("mu")
    _dump(path, saved)
    report = check_run_privacy(run)
    assert not report.ok and report.files["ok"]
    assert report.released["problems"] == [
        f"gdp-clt/estimate mu: missing from the logged entry (fresh {mu!r})"]


def test_a_field_added_inside_a_privacy_json_result_fails(run):
    path = run / "privacy.json"
    saved = _load(path)
    (rdp,) = [r for r in saved["results"] if r["method"] == "rdp"]
    rdp["mu"] = 0.01
    _dump(path, saved)
    assert check_run_privacy(run).released["problems"] == [
        "rdp/bound mu: logged 0.01 but not derived from the config"]


def test_check_run_files_validates_its_inputs(run):
    from privfl.algorithms.builders import build_dataset
    from privfl.config.loader import load_config

    config = load_config(run / "config.yaml")
    data = build_dataset(config)
    with pytest.raises(ValueError, match="rtol = -1 is out of range"):
        check_run_files(RunDirectory(run), config, data, rtol=-1)
    with pytest.raises(ValueError, match="directory = PosixPath is not allowed"):
        check_run_files(run, config, data, rtol=1e-9)
    with pytest.raises(ValueError, match="config = dict is not allowed"):
        check_run_files(RunDirectory(run), RAW, data, rtol=1e-9)
    with pytest.raises(ValueError, match="data = NoneType is not allowed"):
        check_run_files(RunDirectory(run), config, None, rtol=1e-9)
    assert check_run_files(RunDirectory(run), config, data, rtol=1e-9) == {"ok": True,
                                                                           "problems": []}


def test_compare_warns_on_a_run_whose_files_disagree(run, finished):
    result = CliRunner().invoke(app, ["compare", str(finished), str(run)])
    assert result.exit_code == 0 and "disagree" not in result.stderr
    path = run / "summary.json"
    summary = _load(path)
    summary["headline"]["epsilon"] = 0.1
    _dump(path, summary)
    result = CliRunner().invoke(app, ["compare", str(finished), str(run), "--json"])
    assert result.exit_code == 0
    warnings = json.loads(result.stdout)["warnings"]
    assert len(warnings) == 1 and warnings[0].startswith(
        f"{run}: its files disagree with a fresh computation from its config.yaml (privfl "
        "check-privacy): summary.json headline.epsilon: written 0.1, fresh ")
    assert f"privfl: warning: {run}: its files disagree" in result.stderr
