"""``privfl reproduce``: the list, input errors, the table, --json, the files of --out, the
Markdown section and the paper-scale dry run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from privfl.cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def _invoke(args):
    return CliRunner().invoke(app, args, env={"COLUMNS": "200"})


def test_list_names_every_paper_with_what_it_covers():
    result = _invoke(["reproduce", "--list"])
    assert result.exit_code == 0, result.output
    for name in ("zheng2021", "zhang2022", "xie2023", "hasircioglu2022", "asoodeh2021"):
        assert name in result.output
    assert result.output.count("covers:") == 5


def test_list_json_is_json():
    result = _invoke(["reproduce", "--list", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["command"] == "reproduce"
    assert [p["name"] for p in payload["papers"]] == ["zheng2021", "zhang2022", "xie2023",
                                                      "hasircioglu2022", "asoodeh2021"]
    assert all(p["title"] and p["covers"] for p in payload["papers"])


def test_list_does_not_import_torch():
    probe = ("import sys\nfrom privfl.cli.main import main\nsys.argv = ['privfl', 'reproduce', "
             "'--list', '--json']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
             "print('torch' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout + done.stderr


def test_bad_input_is_one_line_naming_what_is_allowed():
    cases = [
        (["reproduce", "zheng"], "must be one of zheng2021, zhang2022, xie2023, "
                                 "hasircioglu2022, asoodeh2021"),
        (["reproduce"], "PAPER is missing"),
        (["reproduce", "asoodeh2021", "--scale", "full"], "must be one of quick, paper"),
        (["reproduce", "asoodeh2021", "--dry-run"], "--scale paper"),
        (["reproduce", "asoodeh2021", "--seeds", "1"], "seeds = 1 is not allowed: must be an "
                                                      "integer >= 2"),
    ]
    for args, message in cases:
        result = _invoke(args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
        assert "Traceback" not in result.output


def test_table_json_and_files(tmp_path):
    out, md = tmp_path / "out", tmp_path / "asoodeh.md"
    result = _invoke(["reproduce", "asoodeh2021", "--no-training", "--json", "--out", str(out),
                      "--markdown", str(md)])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["command"] == "reproduce" and payload["paper"] == "asoodeh2021"
    assert payload["counts"]["match"] + payload["counts"]["differs"] == len(payload["rows"])
    assert all(list(row) == ["quantity", "source", "basis", "paper", "privfl", "rel_diff",
                             "tolerance", "verdict", "reason"] for row in payload["rows"])
    assert payload["counts_by_basis"]["check"] == {"match": 10, "differs": 0}
    assert payload["reproduced"] == 1  # Figure 2 prints no values; Corollary 3's claim holds
    assert json.loads((out / "rows.json").read_text())["rows"] == payload["rows"]
    html = (out / "report.html").read_text()
    assert 'id="rows-accounting"' in html and 'id="asoodeh2021-figure2"' in html
    assert "Plotly.newPlot" in html and "differs" in html
    assert "By basis: printed 1 (1 match), derived 1 (0 match), check 10 (10 match)" in html
    for text in ((out / "table.md").read_text(), md.read_text()):
        assert ("| quantity | source | basis | paper | privfl | rel. diff | tolerance | verdict | "
                "reason |") in text
    assert ("by basis: printed 1 (1 match), derived 1 (0 match), check 10 (10 match), "
            "extension 1 (1 match); reproduced (printed and matching): 1") in md.read_text()
    assert "`privfl reproduce asoodeh2021 --scale quick`" in md.read_text()
    plain = _invoke(["reproduce", "asoodeh2021", "--no-training"])
    assert plain.exit_code == 0 and "match   epsilon at delta" in plain.output
    assert "rows:" in plain.output and "basis check" in plain.output
    assert "by basis: printed 1 (1 match)" in plain.output
    assert "reproduced (printed and matching): 1" in plain.output


def test_an_out_folder_with_runs_is_refused_before_any_work(tmp_path):
    (tmp_path / "runs" / "old").mkdir(parents=True)
    result = _invoke(["reproduce", "zheng2021", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "already holds a reproduction's training runs" in result.output


def test_paper_scale_dry_run_plans_and_names_missing_data():
    result = _invoke(["reproduce", "xie2023", "--scale", "paper", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["scale"] == "paper"
    assert any(line.startswith("total: 41 runs") for line in payload["plan"])
    training = [r for r in payload["rows"] if r["quantity"].startswith("clean accuracy")]
    # Tables 4, 5, 7, 8 at every sigma; Table 6 on LEAF's Sent140 with the LSTM (6 sigmas) and
    # privfl's record-level counterpart (privfl.reproduce.natural_data)
    assert len(training) == 34 + 7
    sent140 = [r for r in training if "Sent140" in r["quantity"]]
    assert len(sent140) == 7 and all("sent140" in r["reason"].lower() or "dry run" in r["reason"]
                                     for r in sent140)
    for row in training:  # MNIST and CIFAR-10 are not shipped: the row says how to get them,
        # or it is a dry run; Sent140 is planned with its fallback
        assert row["privfl"] is None and row["verdict"] == "differs"
        assert row["reason"].startswith("not run: ")
        assert any(word in row["reason"] for word in ("MNIST", "CIFAR-10", "dry run",
                                                      "Sent140"))
    planned = [r for r in payload["rows"] if "at paper scale" in r["quantity"]]
    assert len(planned) == 6 and all("fallback: " in r["reason"] for r in planned)


def test_every_paper_scale_experiment_is_planned_with_its_data_and_fallback():
    from privfl.reproduce import hasircioglu2022, zheng2021
    from privfl.reproduce.training import paper_plan, paper_rows

    for module, count in ((zheng2021, 18), (hasircioglu2022, 6 + 9)):  # + 9 on EMNIST
        runs = module.paper_runs()
        plan = paper_plan(runs, 3)
        assert len(runs) == count and plan[-1].startswith(f"total: {count} runs x 3 seeds")
        assert all("per seed on 2 CPU cores" in line and "data: " in line
                   and "fallback: " in line for line in plan[:-1]), plan
        rows = paper_rows(runs, None, dry_run=True, seeds=3)
        assert len(rows) == count and all(r.verdict == "differs" and r.privfl is None
                                          and r.reason.startswith("not run: ") for r in rows)
    zheng = paper_plan(zheng2021.paper_runs())
    assert sum("-b8.yaml" in line for line in zheng) == 3  # Table 2's B = 8 runs
    assert sum("cifar10-" in line for line in zheng) == 6  # Table 3
    emnist = paper_plan(hasircioglu2022.paper_runs())[:-1]
    assert all("EMNIST-ByClass" in line or "EMNIST ByClass" in line for line in emnist)
    assert sum("emnist-6." in line for line in emnist) == 9  # privfl's emnist dataset
