"""`privfl compare`: a run's final point is its headline (issue 44, item 6). The DP-FedAvg
demo planned for 20 rounds with stop.target_accuracy = 0.6 stops after round 3; its headline is
the 20-round PLD bound 4.2843 (dp_accounting: 4.2843), never the RDP of the 3 rounds that ran
(2.122), in the table, the JSON and the HTML trade-off plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from privfl.cli.main import main
from privfl.config.loader import load_config
from privfl.runs.compare import comparison_markdown, comparison_rows, load_run
from privfl.runs.experiment import Experiment

DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo-dp-fedavg.yaml"
PLANNED_20 = 4.2843  # PLD and dp_accounting, T = 20 (issue 44)
RAN_3_RDP = 2.122  # the RDP bound of the 3 rounds that ran


@pytest.fixture(scope="module")
def target_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("compare") / "target"
    config = load_config(DEMO, ["federated.rounds=20", "stop.target_accuracy=0.6"])
    result = Experiment.create(config, run).run(progress=False)
    assert result.stop_reason == "target"
    return run, result


def test_the_final_point_is_the_headline_in_table_and_rows(target_run):
    run, result = target_run
    headline = result.summary["headline"]["epsilon"]
    assert headline == pytest.approx(PLANNED_20, abs=1e-4)
    last = result.summary["rounds_completed"]
    ran = [p["epsilon"] for p in result.summary["after_the_fact"]["results"]
           if p["method"] == "rdp"]
    assert ran == [pytest.approx(RAN_3_RDP, abs=1e-3)]
    record = load_run(run)
    rows = comparison_rows([record], [1, last])
    final = rows[-1][record.name]
    assert final["epsilon"] == headline and final["headline"] is True
    assert final["epsilon_method"] == "pld" and final["epsilon_kind"] == "bound"
    assert "headline" not in rows[0][record.name]  # earlier rounds: the per-round series
    assert rows[0][record.name]["epsilon"] < RAN_3_RDP
    text = comparison_markdown([record], rows)
    assert f"| {last} |" in text and "4.28434 (pld, headline)" in text  # 4.284334 rounded up
    assert "2.12" not in text


def test_compare_json_and_html_place_the_run_at_its_headline(target_run, tmp_path, capsys):
    run, result = target_run
    page = tmp_path / "compare.html"
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["compare", str(run), "--every", "1", "--json", "--html", str(page)])
    out = json.loads(capsys.readouterr().out)
    assert exited.value.code == 0
    headline = result.summary["headline"]["epsilon"]
    assert out["runs"][0]["headline"]["epsilon"] == headline
    assert out["rows"][-1][out["runs"][0]["name"]]["epsilon"] == headline
    html = page.read_text()
    start = html.index('"plot-tradeoff": {"data"') + len('"plot-tradeoff": ')
    data = json.JSONDecoder().raw_decode(html, start)[0]["data"]
    (trace,) = data
    assert trace["x"][-1] == pytest.approx(headline, rel=1e-12)
    assert trace["y"][-1] == pytest.approx(result.summary["final"]["global_accuracy"])
    assert all(x < RAN_3_RDP for x in trace["x"][:-1])
