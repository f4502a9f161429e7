"""`privfl compare` and privfl.runs.compare on hand-written run directories."""

from __future__ import annotations

import json
import math

import pytest
import yaml
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.runs.compare import common_rounds, comparison_rows, load_run


def _write_run(path, name, private, rounds, acc_offset=0.0):
    path.mkdir()
    config = {"name": name, "privacy": {"enabled": private, "delta": 1e-5}}
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    with open(path / "metrics.jsonl", "w") as stream:
        for r in rounds:
            row = {"round": r, "personalised_accuracy": 0.5 + acc_offset + r / 1000,
                   "global_accuracy": 0.3 + acc_offset + r / 2000}
            if private:
                row.update(epsilon=0.1 * r, epsilon_method="pld", mu=0.02 * r)
            stream.write(json.dumps(row) + "\n")
    return path


@pytest.fixture
def two_runs(tmp_path):
    private = _write_run(tmp_path / "p", "private", True, range(1, 13))
    baseline = _write_run(tmp_path / "np", "nonprivate", False, range(1, 11), acc_offset=0.2)
    return private, baseline


def test_common_rounds_are_shared_every_kth_with_first_and_last(two_runs):
    runs = [load_run(p) for p in two_runs]
    assert common_rounds(runs, 4) == [1, 4, 8, 10]
    assert common_rounds(runs, 1) == list(range(1, 11))
    with pytest.raises(ValueError, match="every"):
        common_rounds(runs, 0)


def test_rows_hold_each_runs_values_at_the_same_round(two_runs):
    runs = [load_run(p) for p in two_runs]
    rows = comparison_rows(runs, [4, 10])
    assert rows[1]["round"] == 10
    assert rows[1]["private"]["personalised_accuracy"] == pytest.approx(0.51)
    assert rows[1]["nonprivate"]["global_accuracy"] == pytest.approx(0.505)
    assert rows[0]["private"]["epsilon"] == pytest.approx(0.4)
    assert rows[0]["private"]["epsilon_method"] == "pld"
    assert "epsilon" not in rows[0]["nonprivate"]
    with pytest.raises(ValueError, match=r"round = 11 is not a completed round of run "
                                         r"'nonprivate': must be one of its rounds 1\.\.10"):
        comparison_rows(runs, [11])


def test_cli_prints_table_writes_markdown_plot_and_json(two_runs, tmp_path):
    out, plot = tmp_path / "cmp.md", tmp_path / "cmp.png"
    result = CliRunner().invoke(app, ["compare", *map(str, two_runs), "--every", "5",
                                      "--out", str(out), "--plot", str(plot)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("| 10 |")]
    assert lines == ["| 10 | 51.00 | 30.50 | 1 (pld) | 0.2 | 71.00 | 50.50 |"]
    assert out.read_text() == result.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = CliRunner().invoke(app, ["compare", *map(str, two_runs), "--json"])
    payload = json.loads(result.stdout)
    assert [row["round"] for row in payload["rows"]] == [1, 5, 10]
    assert payload["runs"][1] == {
        "name": "nonprivate", "path": str(two_runs[1]), "algorithm": "prifedsync",
        "dataset": "mnist-5k", "private": False, "delta": None, "unit": "-", "sampling": "-",
        "metrics": {"personalised_accuracy": "personalised (mean over clients)",
                    "global_accuracy": "global model (mean over clients)",
                    "personalised_accuracy_cohort": "personalised, this round's cohort"},
        "headline": None}
    assert math.isclose(payload["rows"][2]["private"]["mu"], 0.2)


def test_cli_errors_name_the_problem(two_runs, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["compare", str(two_runs[0]), str(empty)])
    assert result.exit_code == 2
    assert "no config.yaml" in result.output
    damaged = _write_run(tmp_path / "damaged", "damaged", False, range(1, 3))
    with open(damaged / "metrics.jsonl", "a") as stream:
        stream.write('{"round": 3, "global_acc\n')
    result = CliRunner().invoke(app, ["compare", str(two_runs[0]), str(damaged)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "metrics.jsonl: line 3 is not valid JSON" in result.stderr
    disjoint = _write_run(tmp_path / "late", "late", False, range(20, 22))
    result = CliRunner().invoke(app, ["compare", str(two_runs[0]), str(disjoint)])
    assert result.exit_code == 2
    assert "share no completed round" in result.output


def test_runs_with_the_same_config_name_are_labelled_by_directory(two_runs, tmp_path):
    twin = _write_run(tmp_path / "twin", "private", True, range(1, 11))
    result = CliRunner().invoke(app, ["compare", str(two_runs[0]), str(twin), "--json"])
    assert result.exit_code == 0, result.output
    names = [run["name"] for run in json.loads(result.stdout)["runs"]]
    assert names == [f"private ({two_runs[0].name})", "private (twin)"]


def test_an_infinite_logged_epsilon_compares_as_infinity(tmp_path):
    run = _write_run(tmp_path / "inf", "inf", True, range(1, 3))
    lines = (run / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    rows[1]["epsilon"] = "inf"  # how metrics.jsonl spells a float beyond range
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = comparison_rows([load_run(run)], [2])
    assert table[0]["inf"]["epsilon"] == math.inf


def _write_dp_fedavg_run(path, dataset, evaluate_every=1):
    """A DP-FedAvg-like run: no mu logged, accuracy only every ``evaluate_every`` rounds."""
    path.mkdir()
    config = {"name": path.name, "data": {"dataset": dataset},
              "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
              "federated": {"algorithm": "dp-fedavg", "rounds": 4}}
    (path / "config.yaml").write_text(yaml.safe_dump(config))
    with open(path / "metrics.jsonl", "w") as stream:
        for r in range(1, 5):
            row = {"round": r, "epsilon": 0.5 * r, "epsilon_method": "rdp"}
            if r % evaluate_every == 0:
                row["global_accuracy"] = 0.5 + r / 100
            stream.write(json.dumps(row) + "\n")
    return path


def test_missing_cells_show_a_dash_with_its_reason_and_no_empty_mu_column(tmp_path):
    every = _write_dp_fedavg_run(tmp_path / "every", "digits")
    sparse = _write_dp_fedavg_run(tmp_path / "sparse", "digits", evaluate_every=2)
    result = CliRunner().invoke(app, ["compare", str(every), str(sparse), "--every", "1"])
    assert result.exit_code == 0, result.output
    assert "| nan" not in result.stdout and "nan |" not in result.stdout
    assert "mu (estimate)" not in result.stdout  # DP-FedAvg logs no mu: no column of dashes
    table = [line for line in result.stdout.splitlines() if line.startswith("| 1 |")]
    assert table == ["| 1 | 51.00 | 0.5 (rdp) | — | 0.5 (rdp) |"]
    assert "—: not measured at that round" in result.stdout
    assert "warning" not in result.stderr


def test_runs_on_different_datasets_are_flagged(tmp_path):
    digits = _write_dp_fedavg_run(tmp_path / "digits-run", "digits")
    mnist = _write_dp_fedavg_run(tmp_path / "mnist-run", "mnist-5k")
    result = CliRunner().invoke(app, ["compare", str(digits), str(mnist), "--json"])
    assert result.exit_code == 0, result.output
    expected = ("the runs use different datasets (digits-run: digits, mnist-run: mnist-5k): "
                "their accuracies are not comparable")
    assert f"privfl: warning: {expected}" in result.stderr
    assert json.loads(result.stdout)["warnings"] == [expected]
    text = CliRunner().invoke(app, ["compare", str(digits), str(mnist)]).stdout
    assert text.startswith(f"**Warning:** {expected}.")
