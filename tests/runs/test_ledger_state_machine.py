"""Issue 44: random sequences of actions on one small run of each algorithm (a short life of
DP-FedAvg in ``make test``, longer lives of all eight under ``slow``, four of them in
test_ledger_long_lives.py) never bring the headline
below what was released or printed before, and check-privacy fails on every edit. The actions:
create, pause, SIGKILL after a round, resume with the overrides a resume accepts (more or fewer
rounds, stop rules set or removed, pauses, step sizes), file edits.

The invariants are tracked independently of the ledger: the largest round whose row was on
disk after any action (a row shown is a release), the rows of redrawn.jsonl, and every headline
an invocation returned. After each action that finished or paused the run, its headline must be
at least the plan's bound for those releases (:func:`released_results`) and at least every
headline printed before; check-privacy must agree with an untouched run directory and fail on an
edited one. A refused resume (a ConfigError) must leave the ledger's releases as they were.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from _ledger_runs import killed_run
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from privfl.algorithms.base import budget_results, released_results, tightest_bound
from privfl.algorithms.builders import privacy_plan
from privfl.config import ConfigError, config_from_dict
from privfl.runs.check import check_run_privacy
from privfl.runs.experiment import Experiment
from privfl.runs.ledger import Ledger

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _small(name: str, rounds: int = 4) -> dict:
    raw = yaml.safe_load((CONFIGS / name).read_text())
    raw["federated"]["rounds"] = rounds
    raw["run"] = {**raw.get("run", {}), "threads": 1}
    return raw


class RunLife(RuleBasedStateMachine):
    """One run directory through a random life; ``RAW``: its configuration."""

    RAW: dict = {}
    #: whether the algorithm takes a stop on accuracy (PriFedSync's reads an uncovered one)
    TARGETS = True

    @initialize(accuracy=st.sampled_from([None, 0.5]), pause=st.sampled_from([None, 1, 2]),
                 kill=st.sampled_from([None, 1, 2]))
    def create(self, accuracy, pause, kill):
        import tempfile

        self.root = Path(tempfile.mkdtemp(prefix="privfl-ledger-"))
        self.out = self.root / "run"
        raw = copy.deepcopy(self.RAW)
        raw["stop"] = {**raw.get("stop", {}),
                       "target_accuracy": accuracy if self.TARGETS else None}
        raw["run"]["max_rounds"] = pause
        try:
            self.config = config_from_dict(raw)
        except ConfigError:  # an algorithm that refuses a stop on accuracy (last iterate)
            raw["stop"]["target_accuracy"] = None
            self.config = config_from_dict(raw)
        self.plan = privacy_plan(self.config)
        self.printed: list[float] = []
        self.released = 0
        self.finished_now = False
        if kill is None:
            self._record(Experiment.create(self.config, self.out).run(progress=False))
        else:
            killed_run(self.out, kill, config=self.config)
            self._after_kill()

    def teardown(self):
        import shutil

        if hasattr(self, "root"):
            shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------------ bookkeeping
    def _rows(self, name: str) -> list[dict]:
        path = self.out / name
        if not path.is_file():
            return []
        rows = []
        for line in path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                break
        return rows

    def _see_releases(self) -> None:
        rounds = [row["round"] for row in self._rows("metrics.jsonl")]
        self.released = max([self.released, *rounds])

    def _record(self, result) -> None:
        self._see_releases()
        self.finished_now = True
        epsilon = result.summary["headline"].get("epsilon")
        floor = self._released_bound()
        if epsilon is not None:
            assert epsilon >= floor * (1 - 1e-12), (epsilon, floor)
            for before in self.printed:
                assert epsilon >= before * (1 - 1e-12), (epsilon, self.printed)
            self.printed.append(epsilon)

    def _after_kill(self) -> None:
        self._see_releases()
        self.finished_now = False

    def _released_bound(self) -> float:
        redrawn = [row["round"] for row in self._rows("redrawn.jsonl")]
        best = tightest_bound(budget_results(self.plan, released_results(
            self.plan, self.released, redrawn)))
        return 0.0 if best is None else best.epsilon

    def _resumed(self, overrides):
        return Experiment.resume(self.out, overrides)

    # ------------------------------------------------------------------ actions
    @precondition(lambda self: (self.out / "config.yaml").is_file())
    @rule(more=st.integers(-2, 3), accuracy=st.sampled_from(["keep", None, 0.3, 0.99]),
          pause=st.sampled_from([None, 1]), lr=st.sampled_from([None, 0.05]),
          kill=st.sampled_from([None, 1, 2]))
    def resume(self, more, accuracy, pause, lr, kill):
        rounds = max(1, self.released + more)
        overrides = [f"federated.rounds={rounds}", f"run.max_rounds={pause or 'null'}"]
        if accuracy != "keep":
            overrides.append(f"stop.target_accuracy={accuracy or 'null'}")
        if lr is not None and "lr" in self.RAW.get("training", {}):
            overrides.append(f"training.lr={lr}")
        before = [e.payload for e in Ledger(self.out).entries() if e.kind in ("row", "headline")]
        if kill is not None:
            killed_run(self.out, self.released + kill, overrides=overrides)
            self._after_kill()
            return
        try:
            experiment = self._resumed(overrides)
        except ConfigError:  # refused: nothing released is forgotten
            after = [e.payload for e in Ledger(self.out).entries()
                     if e.kind in ("row", "headline")]
            assert after[:len(before)] == before
            self.finished_now = False
            return
        try:
            result = experiment.run(progress=False)
        except ConfigError:  # a seeded re-run that differs is refused before its release
            self._after_kill()
            return
        self._record(result)

    @precondition(lambda self: self.finished_now)
    @rule(data=st.data())
    def edit_a_file(self, data):
        names = sorted(p.name for p in self.out.iterdir()
                       if p.is_file() and p.name != ".lock")
        name = data.draw(st.sampled_from(names), label="file")
        how = data.draw(st.sampled_from(["append", "delete"]), label="edit")
        path = self.out / name
        saved = path.read_bytes()
        if how == "append":
            path.write_bytes(saved + (b"\n" if name.endswith(".jsonl") else b"") + b"x")
        else:
            path.unlink()
        try:
            report = check_run_privacy(self.out)
            failed = not report.ok
        except (ValueError, OSError):  # e.g. a metrics.jsonl that is not JSON any more
            failed = True
        path.write_bytes(saved)
        assert failed, (name, how)

    @invariant()
    def check_privacy_agrees_with_an_untouched_run(self):
        if self.finished_now:
            report = check_run_privacy(self.out)
            assert report.ok, report.to_dict()


def _machine(name: str, rounds: int, examples: int, steps: int):
    machine = type(f"RunLife_{name.replace('-', '_')}", (RunLife,),
                   {"RAW": _small(name, rounds), "TARGETS": name != "demo.yaml"})
    machine.TestCase.settings = settings(
        max_examples=examples, stateful_step_count=steps, deadline=None,
        suppress_health_check=list(HealthCheck))
    return machine


#: a short life of DP-FedAvg (part of `make test`)
TestDpFedAvgLife = _machine("demo-dp-fedavg.yaml", 3, 2, 4).TestCase


#: the slow suite's longer lives, split over two files so that both of CI's workers take some
#: (pytest-xdist --dist loadfile); test_ledger_long_lives.py runs the other four
LONG_LIVES = ["demo-dp-fedavg.yaml", "demo-dp-ftrl.yaml", "demo-dp-dsgd.yaml",
              "demo-insdp-fedavg.yaml", "demo-insdp-fedsgd.yaml", "demo-bandmf.yaml",
              "demo-projected-sgd.yaml", "demo.yaml"]


def long_life(name: str) -> None:
    """Two random lives of 8 actions each of ``name``'s demo, 5 rounds planned."""
    from hypothesis.stateful import run_state_machine_as_test

    machine = _machine(name, 5, 2, 8)
    run_state_machine_as_test(machine, settings=machine.TestCase.settings)


@pytest.mark.slow  # about a minute each on 2 cores
@pytest.mark.parametrize("name", LONG_LIVES[:4])
def test_long_lives(name):
    long_life(name)
