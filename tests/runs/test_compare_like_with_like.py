"""Two runs of one configuration and seed that differ only in length show the same epsilon, from
the same accountant, at every round they share (issue: a 10-round run's last row carried the
sampled PLD, 3.04, beside a 40-round run's RDP, 3.51, at round 10).

The metrics rows' ``epsilon`` is one series (the accountants every row carries), and
``privfl compare`` reads every private run at a round from one accountant they all report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.config import load_config
from privfl.runs.compare import (
    comparison_markdown,
    comparison_rows,
    distinct_labels,
    epsilon_series,
    load_run,
)
from privfl.runs.experiment import Experiment
from privfl.runs.html_compare import _plotted

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, config: str, rounds: int, extra: list[str]) -> Path:
    out = tmp_path / f"r{rounds}"
    Experiment.create(load_config(ROOT / config, [f"federated.rounds={rounds}", *extra]),
                      out).run()
    return out


def _rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def dp_fedavg_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("like")
    extra = ["data.clients=40", "federated.client_rate=0.5"]
    return [_run(tmp, "configs/demo-dp-fedavg.yaml", r, extra) for r in (3, 6)]


def test_identical_runs_of_different_lengths_log_one_series(dp_fedavg_runs):
    short, long = (_rows(run) for run in dp_fedavg_runs)
    assert short[-1]["privacy_methods"] == "all"  # its last row composed the sampled PLD too
    assert long[2]["privacy_methods"] == "per-round"
    for a, b in zip(short, long, strict=False):
        assert (a["epsilon"], a["epsilon_method"]) == (b["epsilon"], b["epsilon_method"])
        assert a["epsilon_method"] == "rdp"
    pld = [e for e in short[-1]["privacy"] if e["method"] == "pld"
           and e["scope"] == short[-1]["scope"]]
    assert pld and pld[0]["epsilon"] < short[-1]["epsilon"]  # the tighter final bound is kept


def test_compare_puts_like_beside_like(dp_fedavg_runs):
    runs = distinct_labels([load_run(run) for run in dp_fedavg_runs])  # both named alike
    rows = comparison_rows(runs, [1, 2, 3])
    names = [run.name for run in runs]
    for row in rows[:-1]:
        first, second = (row[name] for name in names)
        assert first["epsilon"] == second["epsilon"]
        assert first["epsilon_method"] == second["epsilon_method"] == "rdp"
        assert first["epsilon_kind"] == "bound"
    # the short run's last round is its final point: its headline (issue 44, item 6)
    first, second = (rows[-1][name] for name in names)
    assert first["headline"] and first["epsilon_method"] == "pld"
    assert first["epsilon"] == runs[0].final["epsilon"] < second["epsilon"]
    assert second["epsilon_method"] == "rdp" and "headline" not in second
    text = comparison_markdown(runs, rows)
    assert "Not like for like" not in text and "(rdp)" in text and "(pld, headline)" in text


def test_compare_of_runs_without_a_per_round_bound_reads_their_shared_estimate(tmp_path):
    """PriFedSync's rows carry the CLT estimate; its PLD bound only on the last planned row: at a
    shared round, both runs are read from the estimate, marked as one (the issue: "—")."""
    extra = ["data.dataset=digits", "model.name=logreg", "model.kwargs={}", "data.clients=6",
             "data.partition=iid", "data.train_size=60", "data.test_size=20"]
    runs = [_run(tmp_path, "configs/demo.yaml", r, extra) for r in (2, 4)]
    result = CliRunner().invoke(app, ["compare", *map(str, runs), "--json"])
    assert result.exit_code == 0, result.output
    loaded = distinct_labels([load_run(run) for run in runs])
    rows = comparison_rows(loaded, [1, 2])
    for row in rows[:-1]:
        first, second = (row[run.name] for run in loaded)
        assert first["epsilon"] == second["epsilon"] > 0
        assert (first["epsilon_method"], first["epsilon_kind"]) == ("gdp-clt", "estimate")
    first = rows[-1][loaded[0].name]  # the 2-round run's final point: its headline bound
    assert first["headline"] and first["epsilon_kind"] == "bound"
    assert first["epsilon"] == loaded[0].final["epsilon"]
    text = comparison_markdown(loaded, rows)
    assert "(gdp-clt estimate)" in text
    # the plotted series: one accountant per run, the estimate where no row carries a bound
    label, series = epsilon_series(loaded[1])
    assert label == "gdp-clt estimate" and list(series) == [1, 2, 3, 4]
    assert series[2] == rows[1][loaded[1].name]["epsilon"]
    label, series = epsilon_series(load_run(dp_fedavg_runs_dir(tmp_path)))
    assert label == "rdp bound" and list(series) == [1, 2]
    # the 2-round run alone: its last row carries the sampled PLD bound, its first only the
    # estimate; its column holds one accountant and one kind (issue 45 item 3: estimates for
    # rounds 1-25 and a PLD bound at round 30 in one column), and the plot shows the same
    own = comparison_rows(loaded[:1], [1, 2])
    last = next(e for e in loaded[0].metrics[-1]["privacy"] if e["method"] == "pld")
    assert last["kind"] == "bound"
    name = loaded[0].name
    # ... except the run's final point, which is its headline (issue 44 item 6), marked so
    series_rows = [row for row in own if not row[name].get("headline")]
    assert [row["round"] for row in series_rows] == [1]
    assert own[-1][name]["headline"] is True
    assert own[-1][name]["epsilon"] == loaded[0].final["epsilon"]
    assert (own[-1][name]["epsilon_method"], own[-1][name]["epsilon_kind"]) == ("pld", "bound")
    assert {(row[name]["epsilon_method"], row[name]["epsilon_kind"])
            for row in series_rows} == {("gdp-clt", "estimate")}
    assert "(pld, headline)" in comparison_markdown(loaded[:1], own)
    label, plotted = _plotted(loaded[0], own)
    assert label == "gdp-clt estimate"
    assert [plotted[row["round"]] for row in series_rows] == [
        row[name]["epsilon"] for row in series_rows]


def dp_fedavg_runs_dir(tmp_path: Path) -> Path:
    return _run(tmp_path / "fedavg", "configs/demo-dp-fedavg.yaml", 2,
                ["data.clients=40", "federated.client_rate=0.5"])


def test_dp_dsgd_rows_keep_one_accountant_after_its_per_iteration_first_round():
    """DP-DSGD's round-1 row holds per-iteration numbers (``wcs`` 1.53 was the tightest) and
    composes from round 2 (``wcs-rdp``): the series is the composition, never a switch."""
    from privfl.algorithms.base import released_results, row_privacy_metrics, series_accountant
    from privfl.algorithms.builders import build_dataset, privacy_plan

    config = load_config(ROOT / "configs/demo-dp-dsgd.yaml")
    plan = privacy_plan(config, build_dataset(config))
    rows = {r: released_results(plan, r, full=False) for r in range(1, 7)}
    series = series_accountant(plan, rows[2], rows[3])
    assert series == ("wcs-rdp", "run")
    logged = {r: row_privacy_metrics(plan, rows[r], series) for r in rows}
    assert "epsilon" not in logged[1]
    assert {logged[r]["epsilon_method"] for r in range(2, 7)} == {"wcs-rdp"}
    assert [logged[r]["epsilon"] for r in range(2, 7)] == sorted(
        logged[r]["epsilon"] for r in range(2, 7))
