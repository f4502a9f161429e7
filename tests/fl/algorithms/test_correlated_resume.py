"""DP-FTRL and BandMF over a run's whole life (issue 34, items 1 and 2).

1. An extension (``--resume --set federated.rounds=...``) that would change what the accountant
   assumed at round 1 (DP-FTRL's groups, one per planned round by default; BandMF's C,
   optimised for the planned horizon) is refused, and ``check-privacy`` fails a config.yaml
   edited to claim another schedule: both read the pins run.json keeps from round 1. An
   extension that keeps them is accounted on the schedule that really ran.
2. Secure rounds re-drawn after a kill restart the tree (or BandMF's noise history): each lost
   attempt is its own release of the same clients, composed with the run that continued.

"True" values are privfl's own accountant on the event that actually ran.
"""

from __future__ import annotations

import copy
import json
import math

import pytest

from privfl.accounting.dispatch import evaluate
from privfl.accounting.gdp.accountant import gdp_epsilon
from privfl.algorithms.base import lost_attempts, redrawn_of, released_results
from privfl.config import ConfigError, config_from_dict
from privfl.mechanisms.correlated_privacy import composed_release, tree_release
from privfl.mechanisms.sensitivity import Participation
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment, privacy_plan
from privfl.runs.rundir import RunDirectory

DELTA = 1e-5
_BASE = {
    "name": "x", "seed": 0, "run": {"threads": 1},
    "data": {"dataset": "synthetic", "synthetic_examples": 240, "test_fraction": 0.25,
             "partition": "iid", "clients": 12, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 1, "batch_size": 5, "optimizer": "sgd", "lr": 0.5},
    "privacy": {"noise_multiplier": 2.0, "clip_norm": 1.0, "delta": DELTA,
                "accountants": ["gdp"]},
}


def _config(algorithm="dp-ftrl", *, secure=False, run=None, **federated):
    raw = copy.deepcopy(_BASE)
    raw["privacy"]["secure"] = secure
    raw["run"].update(run or {})
    raw["federated"] = {"algorithm": algorithm, **federated}
    return config_from_dict(raw)


def _mu(results):
    (gdp,) = [r for r in results if r.method.startswith("gdp")]
    return gdp.extras["mu"]


def _tree_epsilon(*attempts: int) -> float:
    """The exact epsilon of independent single-participation trees of these lengths."""
    s2 = sum(math.ceil(math.log2(t + 1)) for t in attempts)
    return gdp_epsilon(DELTA, math.sqrt(s2) / 2.0)


# ---------------------------------------------------------------- item 1: extensions
def test_extending_dp_ftrl_past_its_groups_is_refused(tmp_path):
    """3 rounds, min_separation unset: groups = 3, pinned in run.json. Extended to 6 the
    groups would become 6 (client 3 in rounds 1 and 4, accounted as single participation:
    printed 3.709, true 6.573): refused with one line naming what changed."""
    Experiment.create(_config(rounds=3), tmp_path / "run").run()
    assert json.loads((tmp_path / "run" / "run.json").read_text())["pinned"] == {"groups": 3}
    with pytest.raises(ConfigError) as refused:
        Experiment.resume(tmp_path / "run", ["federated.rounds=6"])
    message = str(refused.value)
    assert "\n" not in message
    assert "federated.rounds = 6 would change the client groups pinned at round 1 " \
           "(groups 3 -> 6)" in message and "federated.min_separation" in message
    # what the refused extension would have printed, and what it would have released
    printed = privacy_plan(_config(rounds=6)).results(6)
    true = evaluate(tree_release(Participation.cyclic(6, 3), 2.0, methods=("gdp",)), DELTA)
    assert printed[0].epsilon == pytest.approx(3.7086349307150726, rel=1e-9)
    assert true[0].epsilon == pytest.approx(6.573, abs=5e-4)
    # the run is untouched: its own settings still resume (nothing to do) and check
    assert check_run_privacy(tmp_path / "run").ok


def test_an_extension_that_keeps_the_groups_is_accounted_as_it_ran(tmp_path):
    """min_separation = 3 pins the groups: 3 -> 6 rounds is the cyclic schedule (two
    participations 3 apart) in one tree, which is what ran and what is printed."""
    Experiment.create(_config(rounds=3, min_separation=3), tmp_path / "run").run()
    result = Experiment.resume(tmp_path / "run", ["federated.rounds=6"]).run()
    assert result.summary["rounds_completed"] == 6
    true = evaluate(tree_release(Participation.cyclic(6, 3), 2.0, methods=("gdp",)), DELTA)
    assert result.privacy[0].epsilon == true[0].epsilon
    assert result.privacy[0].epsilon == pytest.approx(6.573, abs=5e-4)
    assert check_run_privacy(tmp_path / "run").ok


def test_check_privacy_fails_a_config_edited_to_claim_other_groups(tmp_path):
    """config.yaml's federated.rounds edited 3 -> 6 after the run: the groups it implies (6)
    are not the pinned ones (3) that ran."""
    Experiment.create(_config(rounds=3), tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    text = directory.config.read_text()
    assert "rounds: 3\n" in text
    directory.config.write_text(text.replace("rounds: 3\n", "rounds: 6\n"))
    check = check_run_privacy(tmp_path / "run")
    assert not check.ok and not check.pinned["ok"]
    assert check.pinned["problems"] == [
        "run.json: pinned groups = 3 at round 1, but config.yaml gives 6: the configuration "
        "claims another schedule than the one that ran"]


def test_extending_bandmf_past_its_encoders_horizon_is_refused(tmp_path):
    """BandMF's C is optimised for max(rounds, band) = 3 rounds; extended to 6 it would be
    re-optimised and the noise would switch mid-run (column norm above 1 across the switch)."""
    Experiment.create(_config("bandmf-fedavg", rounds=3, band=2), tmp_path / "run").run()
    with pytest.raises(ConfigError, match=r"federated.rounds = 6 would change the client groups "
                       r"or BandMF's encoder C pinned at round 1 \(encoder_horizon 3 -> 6\)"):
        Experiment.resume(tmp_path / "run", ["federated.rounds=6"])


# ---------------------------------------------------------------- item 2: re-drawn rounds
def test_lost_attempts_split_where_the_rounds_restart():
    assert lost_attempts([]) == ()
    assert lost_attempts([1, 2]) == (2,)
    assert lost_attempts([1, 2, 1, 2, 3]) == (2, 3)
    assert lost_attempts([3, 4, 3]) == (4, 3)
    with pytest.raises(ValueError, match="every re-drawn round must be an int >= 1"):
        lost_attempts([0])


def test_lost_attempts_split_where_the_rounds_jump_or_a_resume_came_between():
    """A jump forward past a gap (a second kill after a later checkpoint) starts another
    attempt: rounds 3, 4, 6 are attempts ending at 4 and 6. So does a row logged under more
    re-drawn rounds (redrawn.jsonl's (round, released_rounds)): rounds 3, 4 lost back to
    checkpoint 2, then round 5 (logged with 2 re-drawn rounds: released_rounds 7) back to
    checkpoint 4 are attempts ending at 4 and 5; the same round numbers lost by one kill
    (released_rounds = round) are one attempt."""
    assert lost_attempts([3, 4, 6]) == (4, 6)
    assert lost_attempts([(3, 3), (4, 4), (6, 8)]) == (4, 6)
    assert lost_attempts([(3, 3), (4, 4), (5, 7)]) == (4, 5)
    assert lost_attempts([(3, 3), (4, 4), (5, 5)]) == (5,)
    assert lost_attempts([(3, 5), (4, 6), (3, 7)]) == (4, 3)
    rows = [{"round": 3}, {"round": 4}, {"round": 5, "released_rounds": 7}]
    assert redrawn_of(rows) == ((3, 3), (4, 4), (5, 7))
    with pytest.raises(ValueError, match="released_rounds must be an int >= its round"):
        lost_attempts([(3, 2)])
    with pytest.raises(ValueError, match="re-drawn row 3 is not allowed: every row of "
                       "redrawn.jsonl must be a JSON object"):
        redrawn_of([{"round": 2}, 3])
    # the composed bound (6-round secure DP-FTRL, a tree per attempt): merging the attempts
    # into one would print the bound of trees of 6 and 6 leaves, 5.545, not 7.051
    plan = privacy_plan(_config(rounds=6, secure=True))
    split = released_results(plan, 6, [3, 4, 6])[0].epsilon
    assert split == pytest.approx(_tree_epsilon(4, 6, 6), rel=1e-12)
    assert split == pytest.approx(7.051, abs=5e-4)
    assert released_results(plan, 6, [(3, 3), (4, 4), (5, 7)])[0].epsilon == split
    assert _tree_epsilon(6, 6) == pytest.approx(5.545, abs=5e-4)


@pytest.mark.parametrize("second_kill", ["gap", "continued"])
def test_two_kills_of_a_secure_dp_ftrl_run_are_two_lost_attempts(
        tmp_path, kill_before_checkpoints, second_kill):
    """A secure 6-round DP-FTRL run, checkpointed every round, killed twice. Kill 1: rounds 1-4
    logged, checkpoints 3 and 4 never written: rounds 3, 4 re-drawn from checkpoint 2. Kill
    2 ("gap"): rounds 3-6 logged, checkpoint 6 lost: round 6 re-drawn from checkpoint 5, so
    redrawn.jsonl holds rounds 3, 4, 6; ("continued"): rounds 3-5 logged, checkpoint 5 lost:
    round 5 re-drawn from checkpoint 4, rounds 3, 4, 5. Either way two attempts (ending at 4,
    and at 6 or 5) and the run: trees of 4, 6 (or 5) and 6 leaves, 7.051 (one attempt would
    print 5.545)."""
    config = _config(rounds=6, secure=True, run={"max_rounds": 4, "keep_checkpoints": 10})
    Experiment.create(config, tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    kill_before_checkpoints(directory, 2)
    last = 6 if second_kill == "gap" else 5
    Experiment.resume(tmp_path / "run", [f"run.max_rounds={last - 2}"]).run()  # rounds 3..last
    kill_before_checkpoints(directory, last - 1)
    result = Experiment.resume(tmp_path / "run", ["run.max_rounds=null"]).run()
    rows = directory.read_metrics(directory.redrawn)
    assert [row["round"] for row in rows] == [3, 4, last]
    assert lost_attempts(redrawn_of(rows)) == (4, last)
    assert result.summary["rounds_completed"] == 6 and result.summary["rounds_released"] == 9
    true = _tree_epsilon(4, last, 6)
    assert true == pytest.approx(7.051, abs=5e-4)
    assert result.privacy[0].epsilon == pytest.approx(true, rel=1e-12)
    assert result.metrics[-1]["epsilon"] == pytest.approx(true, rel=1e-12)
    check = check_run_privacy(tmp_path / "run")
    assert check.ok, check.to_dict()


def test_composed_release_is_the_gaussian_of_the_summed_squares():
    two = tree_release(Participation.single(2), 2.0)
    four = tree_release(Participation.single(4), 2.0)
    both = composed_release([two, four])
    assert both.sensitivity == pytest.approx(math.sqrt(2 + 3), rel=1e-15)
    assert both.steps == 6 and both.participation.startswith("2 independent releases")
    with pytest.raises(ValueError, match="every release must have noise_multiplier = 2.0"):
        composed_release([two, tree_release(Participation.single(2), 3.0)])
    with pytest.raises(ValueError, match="non-empty list"):
        composed_release([])


@pytest.mark.parametrize("stop", [None, 4.0])
def test_secure_dp_ftrl_redrawn_rounds_are_separate_trees(tmp_path, kill_before_checkpoints,
                                                          stop):
    """Kill a secure 4-round DP-FTRL run after 2 rows, before any checkpoint; resume. What
    ran: a tree of 2 leaves, then a fresh tree over the same clients. Without a stop: trees of
    2 and 4 leaves, mu = sqrt(2 + 3) / 2 (before: one tree of 6 leaves in 4 groups). With
    stop.epsilon = 4: round 1 (trees of 2 and 1 leaves: 3.709) runs, round 2 (2 and 2: mu 1,
    4.377) would exceed it (before: round 2 ran and 3.709 was printed for mu 1.0)."""
    config = _config(rounds=4, secure=True, run={"max_rounds": 2})
    Experiment.create(config, tmp_path / "run").run()
    directory = RunDirectory(tmp_path / "run")
    kill_before_checkpoints(directory, 0)
    overrides = ["run.max_rounds=null"] + ([f"stop.epsilon={stop}"] if stop else [])
    result = Experiment.resume(tmp_path / "run", overrides).run()
    ran = result.summary["rounds_completed"]
    assert ran == (4 if stop is None else 1)
    true = _tree_epsilon(2, ran)
    assert result.privacy[0].epsilon == pytest.approx(true, rel=1e-12)
    assert _mu(result.privacy) == pytest.approx(math.sqrt(2 + (3 if stop is None else 1)) / 2,
                                                rel=1e-12)
    assert result.metrics[-1]["epsilon"] == pytest.approx(true, rel=1e-12)
    if stop is not None:
        assert true == pytest.approx(3.7086349307150726, rel=1e-9) and true <= stop
        assert result.stop_reason == "budget"
    saved = json.loads(directory.privacy.read_text())
    assert saved["results"][0]["epsilon"] == pytest.approx(true, rel=1e-12)
    check = check_run_privacy(tmp_path / "run")
    assert check.ok, check.to_dict()


def test_a_restart_after_a_checkpoint_counts_the_lost_attempt_whole():
    """Rounds 3-4 lost after the round-2 checkpoint of a 6-round run: the lost attempt
    released rounds 1-4 of a tree (counted whole, a sound over-count), the run 1-6."""
    plan = privacy_plan(_config(rounds=6, secure=True))
    results = released_results(plan, 6, [3, 4])
    assert results[0].epsilon == pytest.approx(_tree_epsilon(4, 6), rel=1e-12)
    assert released_results(plan, 6, [])[0].epsilon == pytest.approx(_tree_epsilon(6),
                                                                      rel=1e-12)


def test_sampled_bandmf_refuses_redrawn_rounds():
    plan = privacy_plan(_config("bandmf-fedavg", rounds=4, band=2, sampling_rate=0.5,
                                secure=True))
    with pytest.raises(ValueError, match="BandMF's amplified accountant does not cover"):
        plan.check_continuation(plan.pins(), [1, 2])
    plan.check_continuation(plan.pins(), [])
