"""`check_run_privacy` / `privfl check-privacy` on logs that must FAIL: entries deleted, emptied,
added or logged twice, a tampered last round under --every, rounds deleted or repeated, and a
number changed by 1e-6 under the default tolerance (library and CLI share it).

The run directory is written by hand from the algorithm's own privacy plan (no training), so
every log here is exactly what `privfl run` logs, then tampered with.
"""

from __future__ import annotations

import inspect
import json

import pytest
import yaml
from typer.testing import CliRunner

from privfl.algorithms.base import privacy_entries
from privfl.cli.check_privacy import check_privacy_command
from privfl.cli.main import app
from privfl.config import config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import privacy_plan
from privfl.runs.ledger import Ledger, creation_payload, file_digests

RAW = {
    "name": "check",
    "seed": 5,
    "data": {"dataset": "synthetic", "synthetic_examples": 480, "test_fraction": 0.25,
             "partition": "iid", "clients": 12, "test_size": 10},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 6, "optimizer": "sgd", "lr": 0.1},
    "privacy": {"noise_multiplier": 0.8, "clip_norm": 0.5, "delta": 1e-3,
                "accountants": ["rdp", "gdp-clt"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 5, "client_rate": 0.5},
    "run": {"threads": 1},
}
ROUNDS = 5


@pytest.fixture(scope="module")
def logged():
    """Every round's privacy entries as `privfl run` logs them."""
    plan = privacy_plan(config_from_dict(RAW))
    return [{"round": r, "privacy": privacy_entries(plan.results(r))}
            for r in range(1, ROUNDS + 1)]


def _write(path, rows):
    path.mkdir(exist_ok=True)
    (path / "config.yaml").write_text(yaml.safe_dump(RAW, sort_keys=False))
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (path / "ledger.jsonl").unlink(missing_ok=True)  # the release ledger privfl run keeps
    ledger = Ledger(path)
    ledger.append("creation", creation_payload(config_from_dict(RAW), "0" * 16, None))
    for row in rows:
        ledger.append("row", {"round": row.get("round"), "attempt": 0, "row": row})
    ledger.append("files", {"files": file_digests(path)})
    return path


def _rows(logged):
    return json.loads(json.dumps(logged))  # a deep copy to tamper with


def _problems(report):
    return {row["round"]: row["problems"] for row in report.rows if not row["ok"]}


def test_the_untouched_log_agrees(tmp_path, logged):
    assert {e["method"] for e in logged[0]["privacy"]} == {"rdp", "gdp-clt"}
    report = check_run_privacy(_write(tmp_path / "run", logged))
    assert report.ok and [row["round"] for row in report.rows] == [1, 2, 3, 4, 5]


def test_a_deleted_entry_fails_naming_it(tmp_path, logged):
    rows = _rows(logged)
    rows[2]["privacy"] = [e for e in rows[2]["privacy"] if e["method"] != "rdp"]
    report = check_run_privacy(_write(tmp_path / "run", rows))
    assert not report.ok
    assert _problems(report) == {3: ["rdp/bound: not logged"]}


def test_an_emptied_privacy_list_fails_naming_every_entry(tmp_path, logged):
    for emptied in ([], None):
        rows = _rows(logged)
        if emptied is None:
            del rows[1]["privacy"]
        else:
            rows[1]["privacy"] = emptied
        report = check_run_privacy(_write(tmp_path / "run", rows))
        assert not report.ok
        assert _problems(report) == {2: ["gdp-clt/estimate: not logged",
                                         "rdp/bound: not logged"]}


def test_an_extra_entry_fails_naming_it(tmp_path, logged):
    rows = _rows(logged)
    rows[4]["privacy"].append({"method": "pld", "kind": "bound", "scope": "",
                               "epsilon": 0.1, "delta": 1e-3})
    report = check_run_privacy(_write(tmp_path / "run", rows))
    assert _problems(report) == {5: ["pld/bound: logged but not derived from the config"]}


@pytest.mark.parametrize("tampered_first", [True, False])
def test_an_entry_logged_twice_fails(tmp_path, logged, tampered_first):
    """A second copy of an entry (a smaller epsilon before or after the right one) cannot hide
    behind the right one."""
    rows = _rows(logged)
    entries = rows[3]["privacy"]
    (right,) = [e for e in entries if e["method"] == "rdp"]
    wrong = {**right, "epsilon": right["epsilon"] / 2}
    entries.insert(0, wrong) if tampered_first else entries.append(wrong)
    report = check_run_privacy(_write(tmp_path / "run", rows))
    problems = _problems(report)
    assert list(problems) == [4] and problems[4][0] == "rdp/bound: logged 2 times"


@pytest.mark.parametrize(("every", "checked"), [(2, [1, 2, 4, 5]), (3, [1, 3, 5]),
                                                (10, [1, 5])])
def test_every_k_checks_the_last_round(tmp_path, logged, every, checked):
    run = _write(tmp_path / "run", logged)
    assert [row["round"] for row in check_run_privacy(run, every=every).rows] == checked
    rows = _rows(logged)
    rows[-1]["privacy"][0]["epsilon"] *= 0.5  # the last round understates epsilon
    run = _write(tmp_path / "run", rows)
    report = check_run_privacy(run, every=every)
    assert [row["round"] for row in report.rows] == checked
    assert list(_problems(report)) == [5]
    result = CliRunner().invoke(app, ["check-privacy", str(run), "--every", str(every),
                                      "--json"])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert [row["round"] for row in payload["rows"]] == checked and not payload["ok"]


def test_deleted_and_repeated_rounds_fail(tmp_path, logged):
    rows = _rows(logged)
    del rows[2]  # round 3 deleted
    report = check_run_privacy(_write(tmp_path / "run", rows))
    assert _problems(report) == {3: ["round 3 is missing from metrics.jsonl (rounds run up "
                                     "to 5)"]}
    rows = _rows(logged)
    rows.insert(2, rows[1])  # round 2 logged twice
    report = check_run_privacy(_write(tmp_path / "run", rows))
    assert _problems(report) == {2: ["round 2 is logged more than once"]}
    rows = _rows(logged)[1:] + _rows(logged)[:1]  # out of order: round 1 last
    report = check_run_privacy(_write(tmp_path / "run", rows), every=10)
    assert report.ok and sorted(row["round"] for row in report.rows) == [1, 5]


def test_default_tolerance_catches_one_part_in_a_million(tmp_path, logged):
    """Library and CLI defaults agree, and a number scaled by 1 + 1e-6 fails under them."""
    library = inspect.signature(check_run_privacy).parameters["rtol"].default
    cli = inspect.signature(check_privacy_command).parameters["rtol"].default
    assert library == cli == 1e-9
    rows = _rows(logged)
    entry = rows[1]["privacy"][0]
    entry["epsilon"] *= 1 + 1e-6
    run = _write(tmp_path / "run", rows)
    report = check_run_privacy(run)
    assert report.rtol == 1e-9 and list(_problems(report)) == [2]
    (problem,) = _problems(report)[2]
    assert problem.startswith(f"{entry['method']}/{entry['kind']} epsilon: logged ")
    assert check_run_privacy(run, rtol=1e-5).ok  # a looser tolerance lets it pass
    result = CliRunner().invoke(app, ["check-privacy", str(run)])
    assert result.exit_code == 1 and "rtol 1e-09" in result.stdout


@pytest.mark.parametrize("name_field", ["epsilon", "delta", "mu"])
def test_a_field_deleted_inside_one_entry_fails_naming_it(tmp_path, logged, name_field):
    """One round's number deleted inside an entry (the entry itself kept) is a named failure,
    never skipped."""
    rows = _rows(logged)
    (entry,) = [e for e in rows[2]["privacy"] if e["method"] == "gdp-clt"]
    fresh = entry.pop(name_field)
    assert isinstance(fresh, float) and fresh > 0
    report = check_run_privacy(_write(tmp_path / "run", rows))
    assert not report.ok
    assert _problems(report) == {3: [f"gdp-clt/estimate {name_field}: missing from the "
                                      f"logged entry (fresh {fresh!r})"]}


def test_a_field_the_config_does_not_derive_fails_naming_it(tmp_path, logged):
    """An RDP bound carries no mu: one logged inside its entry is a failure too."""
    rows = _rows(logged)
    (entry,) = [e for e in rows[0]["privacy"] if e["method"] == "rdp"]
    assert "mu" not in entry
    entry["mu"] = 0.5
    report = check_run_privacy(_write(tmp_path / "run", rows))
    assert _problems(report) == {1: ["rdp/bound mu: logged 0.5 but not derived from the "
                                     "config"]}


def test_compare_entries_validates_its_inputs(logged):
    from privfl.runs.check_entries import compare_entries

    fresh = logged[0]["privacy"]
    assert compare_entries(_rows(logged)[0]["privacy"], fresh, 1e-9) == {
        "ok": True, "max_rel_diff": 0.0, "problems": []}
    with pytest.raises(ValueError, match="fresh = NoneType is not allowed"):
        compare_entries(fresh, None, 1e-9)
    with pytest.raises(ValueError, match="rtol = 2 is out of range"):
        compare_entries(fresh, fresh, 2)
    assert compare_entries("junk", fresh, 1e-9)["problems"] == [
        "the logged privacy entries are missing or malformed"]
