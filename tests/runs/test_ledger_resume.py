"""Issue 44, items 1-3: after any resume the headline is never below what the run's release
ledger says was released or printed, nor below the bound of the plan it was created with when
that plan stops on released results; a seeded round runs again only bit for bit.

Numbers: ``configs/demo-dp-fedavg.yaml`` (Poisson q = 0.3, z = 1.5, delta = 1e-4, client
level), cross-checked with Google's dp_accounting PLD accountant (T = 3: 1.7813, T = 20:
4.2843)."""

from __future__ import annotations

import pytest
from _ledger_runs import create_killed, demo
from dp_accounting import dp_event, pld

from privfl.algorithms.base import released_results, tightest_bound
from privfl.algorithms.builders import privacy_plan
from privfl.config import ConfigError
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment
from privfl.runs.ledger import Ledger, released_rounds


def _dp_accounting(rounds: int) -> float:
    """epsilon at delta = 1e-4 of ``rounds`` Poisson-subsampled Gaussian steps (an
    independent implementation: dp_accounting's PLD)."""
    accountant = pld.PLDAccountant()
    accountant.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(0.3, dp_event.GaussianDpEvent(1.5)), rounds))
    return accountant.get_epsilon(1e-4)


def _bound(config, rounds, redrawn=()):
    return tightest_bound(released_results(privacy_plan(config), rounds, redrawn)).epsilon


@pytest.fixture(scope="module")
def target_run(tmp_path_factory):
    """Up to 20 rounds, stop on 60 % global accuracy: stops after round 3 (55.0 % at round 2,
    69.3 % at round 3 on the machines tried; the target sits far from both)."""
    out = tmp_path_factory.mktemp("target") / "run"
    config = demo(federated={"rounds": 20}, stop={"target_accuracy": 0.6})
    result = Experiment.create(config, out).run(progress=False)
    assert result.stop_reason == "target" and result.summary["rounds_completed"] == 3
    return config, out, result


@pytest.mark.parametrize("overrides", [["federated.rounds=3"],
                                       ["federated.rounds=3", "stop.target_accuracy=null"]])
def test_a_resume_that_lowers_a_stops_rounds_keeps_the_planned_bound(target_run, tmp_path,
                                                                      overrides):
    """Item 1: 'up to 20 rounds, stop on accuracy' is the mechanism that ran: 4.284."""
    import shutil

    config, out, first = target_run
    twenty = _bound(config, 20)
    assert twenty == pytest.approx(_dp_accounting(20), rel=2e-3)  # 4.2843
    assert first.summary["headline"]["epsilon"] == twenty
    run = tmp_path / "run"
    shutil.copytree(out, run)
    result = Experiment.resume(run, overrides).run(progress=False)
    assert result.stop_reason == "rounds" and result.summary["rounds_completed"] == 3
    assert result.summary["headline"]["epsilon"] == twenty  # not 1.781, the 3-round value
    assert result.summary["rounds_accounted"] == 20
    note = result.summary["after_the_fact"]["note"]
    assert "a headline of epsilon = 4.28433 was printed before" in note
    assert result.summary["after_the_fact"]["epsilon"] == pytest.approx(_dp_accounting(3),
                                                                       rel=2e-3)
    check = check_run_privacy(run)
    assert check.ok, check.to_dict()


def test_the_creation_plan_is_kept_even_without_an_earlier_headline(tmp_path):
    """Item 1, killed before any headline: the creation record alone keeps 20 rounds."""
    config = demo(federated={"rounds": 20}, stop={"target_accuracy": 0.6})
    create_killed(config, tmp_path / "run", 2)
    result = Experiment.resume(tmp_path / "run", ["federated.rounds=3",
                                                  "stop.target_accuracy=null"]).run()
    assert result.stop_reason == "rounds"
    assert result.summary["headline"]["epsilon"] == _bound(config, 20)
    assert "up to 20 rounds with stop.target_accuracy = 0.6" in \
        result.summary["after_the_fact"]["note"]
    assert check_run_privacy(tmp_path / "run").ok


def test_a_secure_divergence_keeps_its_planned_bound_after_rounds_are_lowered(tmp_path):
    """Item 1 through a divergence stop: 10 rounds planned, round 3 diverges; the resume that
    re-draws round 3 with a lower step size and plans 3 rounds still covers 10 (+ 1 re-drawn)."""
    config = demo(federated={"rounds": 10}, privacy={"secure": True}, run={"max_rounds": 2})
    Experiment.create(config, tmp_path / "run").run()
    diverged = Experiment.resume(tmp_path / "run", ["training.lr=3e38",
                                                    "run.max_rounds=null"]).run()
    assert diverged.stop_reason == "diverged"
    assert diverged.summary["headline"]["epsilon"] == _bound(config, 10)
    result = Experiment.resume(tmp_path / "run", ["training.lr=0.1",
                                                  "federated.rounds=3"]).run()
    assert result.stop_reason == "rounds" and result.summary["redrawn_rounds"] == [3]
    assert result.summary["headline"]["epsilon"] == _bound(config, 10, [3])
    assert check_run_privacy(tmp_path / "run").ok


def test_rows_released_before_a_kill_are_never_dropped(tmp_path):
    """Item 2: 3 rows logged, no checkpoint (checkpoint_every = 5), SIGKILL."""
    config = demo(run={"checkpoint_every": 5})
    out = tmp_path / "run"
    create_killed(config, out, 3)
    assert released_rounds(out) == [1, 2, 3]
    with pytest.raises(ConfigError, match=r"federated.rounds = 1 is out of range: the rows of "
                       r"rounds 1\.\.3 were released \(ledger.jsonl\)"):
        Experiment.resume(out, ["federated.rounds=1"])
    # the refused resume cut metrics.jsonl back to round 0: the ledger still has the rows
    assert (out / "metrics.jsonl").read_text() == ""
    result = Experiment.resume(out, ["run.max_rounds=1"]).run()  # a pause after round 1
    assert result.summary["rounds_completed"] == 1
    three = _bound(config, 3)
    assert three == pytest.approx(_dp_accounting(3), rel=2e-3)  # 1.7813, not 1.177
    assert result.summary["headline"]["epsilon"] == three
    assert "records the rows of rounds 1..3 as released" in result.summary["after_the_fact"][
        "note"]
    # the re-run rounds were verified bit for bit (one release each): 3 rounds, not 6
    result = Experiment.resume(out, ["run.max_rounds=null", "federated.rounds=4"]).run()
    assert result.summary["headline"]["epsilon"] == _bound(config, 4)
    assert result.summary["redrawn_rounds"] == []
    assert check_run_privacy(out).ok


def test_a_seeded_rerun_with_another_step_size_is_refused(tmp_path):
    """Item 3: rounds 1-3 would run again on the same noise draws with training.lr = 0.05."""
    out = tmp_path / "run"
    create_killed(demo(run={"checkpoint_every": 5}), out, 3)
    before = (out / "ledger.jsonl").read_bytes()
    with pytest.raises(ConfigError, match=r"rows of rounds 1\.\.3 were released after the "
                       r"checkpoint of round 0 .* same noise draws with another step size"):
        Experiment.resume(out, ["training.lr=0.05"])
    assert (out / "ledger.jsonl").read_bytes().startswith(before)


def test_a_seeded_rerun_that_differs_is_not_released(tmp_path, monkeypatch):
    """Item 3: a re-run round is compared with its released row before it is shown."""
    out = tmp_path / "run"
    create_killed(demo(run={"checkpoint_every": 5}), out, 2)
    resumed = Experiment.resume(out)
    honest = resumed.algorithm.run_round

    def elsewhere():  # as if another machine ran it
        row = honest()
        row["global_accuracy"] += 0.01
        return row

    monkeypatch.setattr(resumed.algorithm, "run_round", elsewhere)
    with pytest.raises(ConfigError, match=r"round 1 ran again after the resume with the same "
                       r"seed but differs from the row released before the interruption in "
                       r"global_accuracy .* it is not released"):
        resumed.run()
    rows = [e.payload["row"] for e in Ledger(out).of_kind("row")]
    assert [r["round"] for r in rows] == [1, 2]  # nothing else was recorded, nor shown
    assert (out / "metrics.jsonl").read_text() == ""  # cut back to the state of round 0


def test_a_per_round_row_of_an_extended_plan_stays_valid_after_the_plan_is_lowered(tmp_path):
    """Found by the slow state machine (InsDP-FedSGD): round 3 logged per-round while the plan
    was 5 rounds, then a resume lowered the plan back to 3. The row was right when it was
    written (the ledger's resume entry records the plan then), so check-privacy passes."""
    from pathlib import Path

    import yaml

    from privfl.config import config_from_dict

    configs = Path(__file__).resolve().parents[2] / "configs"
    raw = yaml.safe_load((configs / "demo-insdp-fedsgd.yaml").read_text())
    raw["federated"]["rounds"] = 3
    raw["run"] = {**raw.get("run", {}), "threads": 1, "max_rounds": 2}
    out = tmp_path / "run"
    Experiment.create(config_from_dict(raw), out).run(progress=False)
    Experiment.resume(out, ["federated.rounds=5", "run.max_rounds=1"]).run(progress=False)
    Experiment.resume(out, ["federated.rounds=3", "run.max_rounds=null"]).run(progress=False)
    rows = [e.payload["row"] for e in Ledger(out).of_kind("row")]
    assert [r["round"] for r in rows] == [1, 2, 3]
    assert rows[2]["privacy_methods"] == "per-round"  # logged under the 5-round plan
    report = check_run_privacy(out)
    assert report.ok, report.to_dict()
    assert [e.payload["rounds"] for e in Ledger(out).of_kind("resume")] == [5, 3]
