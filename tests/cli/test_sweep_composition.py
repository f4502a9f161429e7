"""`privfl sweep` prices picking the best run (issue 44, item 8): K runs on one dataset compose,
so next to each run's own bound it prints, and sweep.json records, the bound for releasing the
chosen run, with what it covers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_sweep import TINY  # tests/cli/test_sweep.py: PriFedSync, composed by the basic theorem

from privfl.cli.main import main

DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo-dp-fedavg.yaml"


def _sweep(capsys, *args):
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["sweep", *map(str, args)])
    captured = capsys.readouterr()
    assert exited.value.code == 0, captured.err
    return captured.out + captured.err


def _dp_accounting_pld(rounds: int) -> float:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(dp_event.PoissonSampledDpEvent(0.3, dp_event.GaussianDpEvent(1.5)),
                       rounds)
    return accountant.get_epsilon(1e-4)


def test_dp_fedavg_sweep_prices_the_chosen_run_by_composing_all_runs(tmp_path, capsys):
    out = tmp_path / "sweep"
    text = _sweep(capsys, DEMO, "--grid", "training.lr=0.05,0.1", "--set",
                  "federated.rounds=3", "--out", out)
    report = json.loads((out / "sweep.json").read_text())
    own = [row["own_bound"]["epsilon"] for row in report["runs"]]
    assert own == [pytest.approx(1.7813, abs=1e-4)] * 2  # T = 3 (dp_accounting: 1.7813)
    chosen = report["release_of_chosen_run"]
    # two runs of 3 rounds each: the 6-round composition, as dp_accounting's PLD gives it
    assert chosen["epsilon"] == pytest.approx(_dp_accounting_pld(6), abs=2e-3)
    assert chosen["epsilon"] > max(own)
    assert (chosen["delta"], chosen["kind"], chosen["runs"]) == (1e-4, "bound", 2)
    assert chosen["method"].startswith("pld composition of the 2 runs")
    assert "chosen among these 2" in chosen["covers"]
    assert "not drawn at random" in chosen["selection"]
    assert "Papernot and Steinke 2022" in chosen["selection"]
    assert text.count(f"releasing the chosen run: eps {chosen['epsilon']:.4g}") == 2
    assert "own bound eps 1.781" in text


def test_sweep_of_other_mechanisms_adds_the_runs_headlines(tmp_path, capsys):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "sweep"
    _sweep(capsys, config, "--grid", "training.lr=0.01,0.05,0.1", "--out", out)
    report = json.loads((out / "sweep.json").read_text())
    heads = [json.loads((Path(row["run_dir"]) / "summary.json").read_text())["headline"]
             for row in report["runs"]]
    chosen = report["release_of_chosen_run"]
    assert chosen["epsilon"] == pytest.approx(sum(h["epsilon"] for h in heads), rel=1e-12)
    assert chosen["delta"] == pytest.approx(3e-5, rel=1e-12)
    assert chosen["method"].startswith("basic composition of the 3 runs' headlines")
