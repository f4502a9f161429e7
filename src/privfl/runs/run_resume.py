"""Resume support of :class:`~privfl.runs.experiment.Experiment`: checkpoints, rounds run again.

What a resume may change (:data:`RESUMABLE_KEYS`, :func:`check_resumable`; the step sizes
:data:`STEP_SIZE_KEYS` only where the plan's accounting does not read them,
:func:`step_size_problem`), the part of a configuration that must stay fixed (its digest is
carried by every checkpoint), the refusal to continue a run that deleted its private state,
and :class:`Checkpointing`: writing a checkpoint, loading the newest one whose digests verify
(:mod:`privfl.runs.checkpoints`), and the rounds logged after it, which run again (compared
with the logged rows when seeded, composed once more in secure mode; see
:mod:`privfl.runs.experiment`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from privfl.algorithms.outputs import COVERED_ACCOUNTING, GENERIC_METRICS
from privfl.config import ConfigError, ExperimentConfig, parse_override
from privfl.runs.checkpoints import digest_json
from privfl.runs.rundir import RunDirectory, json_safe

#: Keys that ``--set`` may change when resuming (prefixes ending in "." cover a section).
RESUMABLE_KEYS = ("run.", "stop.", "federated.rounds")
#: ... except these (where the run's files live)
FIXED_RUN_KEYS = ("run.outputs",)
#: Step sizes a resume may change (e.g. after a divergence) where the plan's accounting does not
#: read them (:func:`step_size_problem`); the contraction bound of projected SGD does
STEP_SIZE_KEYS = ("training.lr", "federated.server_lr", "federated.lr")


def fixed_part(config: ExperimentConfig, *, steps: bool = True) -> dict[str, Any]:
    """The part of a configuration that a resume must not change (``steps`` False: without
    :data:`STEP_SIZE_KEYS`, which :func:`step_size_problem` checks instead)."""
    if not isinstance(config, ExperimentConfig):
        raise ValueError(f"config = {type(config).__name__} is not allowed: must be an "
                         "ExperimentConfig")
    data = config.model_dump(mode="json")
    data.pop("run")
    data.pop("stop")
    data["federated"].pop("rounds")
    if not config.attack.active:  # runs made before the attack section keep their digests
        data.pop("attack")
    for key in () if steps else STEP_SIZE_KEYS:
        section, _, name = key.partition(".")
        data[section].pop(name, None)
    return data


def _step_sizes(fixed: dict[str, Any]) -> dict[str, Any]:
    """``key -> value`` of the :data:`STEP_SIZE_KEYS` a fixed part (:func:`fixed_part`) has."""
    pairs = ((key, *key.split(".")) for key in STEP_SIZE_KEYS)
    return {key: fixed.get(section, {}).get(name) for key, section, name in pairs
            if name in fixed.get(section, {})}


def with_step_sizes(config: ExperimentConfig, values: dict[str, Any]) -> ExperimentConfig:
    """``config`` with the step sizes ``values`` (``key -> value`` of :data:`STEP_SIZE_KEYS`);
    a ConfigError where the algorithm does not take one (e.g. ``training.lr`` of DP-DSGD)."""
    from privfl.config import config_from_dict

    if not isinstance(config, ExperimentConfig):
        raise ValueError(f"config = {type(config).__name__} is not allowed: must be an "
                         "ExperimentConfig")
    data = config.model_dump(mode="json")
    for key, value in dict(values).items():
        if key not in STEP_SIZE_KEYS:
            raise ValueError(f"key = {key!r} is not allowed: must be one of {STEP_SIZE_KEYS}")
        section, _, name = key.partition(".")
        data[section][name] = value
    return config_from_dict(data)


def step_size_problem(old: ExperimentConfig, new: ExperimentConfig, data: Any,
                      rounds: Iterable[int]) -> str | None:
    """Why a run planned with ``old`` cannot continue with the step sizes of ``new`` (None if
    it can): the plans built from both (on ``data``) must give the same privacy results after
    each of ``rounds`` and the same pins, i.e. the accountant does not read the step size.
    Composition accountants (RDP, PLD, GDP) do not; the last-iterate contraction bound
    (Asoodeh et al. 2021) does."""
    from privfl.algorithms.base import privacy_entries
    from privfl.algorithms.builders import privacy_plan

    for name, value in (("old", old), ("new", new)):
        if not isinstance(value, ExperimentConfig):
            raise ValueError(f"{name} = {type(value).__name__} is not allowed: must be an "
                             "ExperimentConfig")
    changed = {key: (value, _step_sizes(fixed_part(new)).get(key))
               for key, value in _step_sizes(fixed_part(old)).items()
               if value != _step_sizes(fixed_part(new)).get(key)}
    if not changed:
        return None
    before, after = privacy_plan(old, data), privacy_plan(new, data)
    same = all(privacy_entries(before.results(r)) == privacy_entries(after.results(r))
               for r in sorted({int(r) for r in rounds if r > 0}))
    if same and getattr(before, "pins", dict)() == getattr(after, "pins", dict)():
        return None
    key, (was, now) = next(iter(changed.items()))
    return (f"{key} = {now!r} (was {was!r}) cannot change when this run continues: the privacy "
            f"accounting of federated.algorithm = {new.federated.algorithm!r} reads it (its "
            "planned guarantee changes); start a new run with --out NEW_DIR")


def check_resumable(overrides: Iterable[str]) -> list[str]:
    """The ``--set KEY=VALUE`` overrides of a resume, each checked to change only
    :data:`RESUMABLE_KEYS` or :data:`STEP_SIZE_KEYS` (checked against the plan when the
    checkpoint is loaded) and none of :data:`FIXED_RUN_KEYS` (a ConfigError naming the key)."""
    checked = []
    for text in overrides:
        key, _ = parse_override(text)
        if key == "privacy.epsilon_budget":
            raise ConfigError("--set privacy.epsilon_budget is not allowed with --resume: the "
                              "budget is fixed when the run is created (its privacy filter "
                              "covers every extension only if it never changes); start a new "
                              "run with --out NEW_DIR")
        if key in FIXED_RUN_KEYS:
            raise ConfigError(f"--set {key} is not allowed with --resume: it decides where the "
                              "run's files live, so it is fixed when the run is created")
        if key not in STEP_SIZE_KEYS and not any(
                key == k or (k.endswith(".") and key.startswith(k)) for k in RESUMABLE_KEYS):
            raise ConfigError(
                f"--set {key} is not allowed with --resume: only run.*, stop.*, "
                "federated.rounds and, where the privacy accounting does not read them, the "
                f"step sizes {', '.join(STEP_SIZE_KEYS)} can change when a run continues "
                "(anything else would change what the logged rounds were)"
            )
        checked.append(text)
    return checked


#: summary.json's ``private_state`` once a last-iterate run deleted its checkpoints
STATE_DELETED = "deleted"


def check_private_state_kept(directory: RunDirectory) -> None:
    """Refuse to resume a run that finished and deleted its private state."""
    try:
        summary = json.loads(directory.summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(summary, dict) and summary.get("private_state") == STATE_DELETED:
        raise ConfigError(
            f"resume = {str(directory.path)!r}: this run finished and deleted its private state "
            "(its checkpoints held intermediate models and the secret schedule, which its "
            "last-iterate guarantee assumes never published), so it cannot be continued or "
            "extended; start a new run, with federated.keep_private_state: true if you need to "
            "extend it later (the headline is then the all-iterates bound)"
        )


class Checkpointing:
    """Checkpoints and resume of :class:`~privfl.runs.experiment.Experiment`.

    A part of its run loop, holding the experiment as ``run``: it reads and sets the
    experiment's ``config``, ``dir``, ``store``, ``algorithm``, ``metrics``, ``redrawn`` and
    resume fields (``resumed_from``, ``resume_warnings``, ``resume_notes``, ``previous_fixed``,
    ``steps_changed``), and rewrites metrics.jsonl with
    :meth:`~privfl.runs.run_outputs.RunOutputs.write_metrics`."""

    def __init__(self, run: Any) -> None:
        self.run = run


    def save_checkpoint(self) -> Path:
        """Write the checkpoint of the current round and its digest record; prune old ones."""
        if self.run.store is None:
            raise ValueError("save_checkpoint needs a run directory: use Experiment.create or "
                             "Experiment.resume")
        payload = {
            "algorithm": self.run.algorithm.state_dict(),
            "metrics": self.run.metrics,
            "torch_rng": torch.get_rng_state(),
            "fixed_config": fixed_part(self.run.config),
            "redrawn": self.run.redrawn,
        }
        path = self.run.store.write(self.run.algorithm.round, payload,
                                config_digest=digest_json(fixed_part(self.run.config, steps=False)),
                                metrics=self.run.metrics)
        self.run.dir.prune_checkpoints(self.run.config.run.keep_checkpoints)
        return path

    def load_latest(self) -> None:
        """Load the newest checkpoint whose digests verify (see
        :mod:`privfl.runs.checkpoints`); each one skipped is reported in
        :attr:`resume_warnings`. With none written, or none usable because every one is
        damaged (corrupted or unverifiable, :attr:`Candidate.damaged`): round 0 as built (the
        run was killed before its first checkpoint, or lost them all). With one that does not
        fit this run (another configuration or dataset): a ConfigError that says how to start
        again. Rounds logged after the loaded state run again
        (:meth:`_rounds_after_checkpoint`: compared with their logged rows when seeded,
        re-drawn and composed once more in secure mode)."""
        skipped, misfit, damaged = [], False, []
        # without the step sizes (_check_step_sizes reads them); with them: older checkpoints
        digests = (digest_json(fixed_part(self.run.config, steps=False)),
                   digest_json(fixed_part(self.run.config)))
        for candidate in self.run.store.candidates(digests):
            if candidate.payload is not None:
                try:
                    self._restore(candidate.payload)
                except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as error:
                    candidate.problem = ("its contents do not fit this run's algorithm ("
                                         f"{' '.join(str(error).split())[:160]})")
                    candidate.damaged = False  # verified, so the run differs (e.g. its data)
                    self.run.algorithm = self.run._build_algorithm()  # undo a partial load
            if candidate.problem is not None:
                skipped.append(f"{candidate.path.name}: {candidate.problem}")
                misfit = misfit or not candidate.damaged
                damaged += [candidate.round] if candidate.damaged else []
                continue
            self.run.resumed_from = candidate.round
            self.run.resume_warnings = skipped
            self._check_step_sizes(candidate.payload.get("fixed_config"), self.run.previous_fixed)
            self._remove_damaged(damaged)
            self._rounds_after_checkpoint(candidate.payload.get("redrawn", []))
            return
        if misfit:
            raise ConfigError(
                f"resume = {str(self.run.dir.path)!r}: no usable checkpoint "
                f"({'; '.join(skipped)}), "
                f"although {self._logged_rounds()} round(s) were logged: the run cannot continue "
                "where it stopped; start it again with privfl run "
                f"{self.run.dir.config} --out NEW_DIR"
            )
        # killed before its first checkpoint, or every checkpoint damaged: from round 0
        self.run.metrics = []
        self.run.resumed_from = 0
        self.run.resume_warnings = skipped
        self._check_step_sizes(self.run.previous_fixed)
        self._remove_damaged(damaged)
        if skipped:
            self.run.resume_notes.append(
                f"no usable checkpoint ({len(skipped)} damaged): the run starts again from "
                f"round 0, and the {self._logged_rounds()} round(s) already logged run again")
        self._rounds_after_checkpoint([])

    def _check_step_sizes(self, *earlier: Any) -> None:
        """Refuse a changed step size (:data:`STEP_SIZE_KEYS`) that the plan's accounting reads
        (:func:`step_size_problem`, after the planned rounds and those resumed from); accept
        another with a resume note. ``earlier``: the :func:`fixed_part` the loaded checkpoint
        was written under and config.yaml's before this resume (its rounds logged after the
        checkpoint ran with it)."""
        now = _step_sizes(fixed_part(self.run.config))
        changes: dict[str, None] = {}  # "key old -> new", in order, once
        for fixed in earlier:
            was = _step_sizes(fixed) if isinstance(fixed, dict) else now
            if was == now or set(was) != set(now):
                continue
            rounds = (self.run.config.federated.rounds, self.run.resumed_from)
            problem = step_size_problem(with_step_sizes(self.run.config, was), self.run.config,
                                        self.run.data, rounds)
            if problem is not None:
                raise ConfigError(f"resume = {str(self.run.dir.path)!r}: {problem}")
            changes.update({f"{k} {was[k]!r} -> {now[k]!r}": None for k in now
                            if was[k] != now[k]})
        if not changes:
            return
        self.run.resume_notes.append(
            f"changed from round {self.run.resumed_from + 1} on: {', '.join(changes)}; the privacy "
            "accounting does not read it (the planned guarantee is unchanged), but the result is "
            "no longer bit for bit that of an uninterrupted run, and rounds logged after the "
            "checkpoint are not compared with their re-run")
        self.run.steps_changed = True

    def _remove_damaged(self, rounds: list[int]) -> None:
        """Delete the damaged checkpoints skipped by a resume that goes on (reported in
        :attr:`resume_warnings`): newer than the state loaded, they would otherwise outlive the
        good checkpoints the run now writes (pruning keeps the newest)."""
        for round_index in rounds:
            self.run.dir.checkpoint(round_index).unlink(missing_ok=True)
            self.run.dir.checkpoint_record(round_index).unlink(missing_ok=True)

    def _restore(self, payload: dict[str, Any]) -> None:
        metrics = [dict(m) for m in payload["metrics"]][: payload["round"]]
        if [m.get("round") for m in metrics] != list(range(1, payload["round"] + 1)):
            raise ValueError("its metrics rows are not rounds 1..R")
        redrawn = payload.get("redrawn", [])
        if not isinstance(redrawn, list) or not all(isinstance(r, dict) for r in redrawn):
            raise ValueError("its re-drawn rounds are not a list of metrics rows")
        self.run.algorithm.load_state_dict(payload["algorithm"])
        if self.run.algorithm.round != payload["round"]:
            raise ValueError(f"the algorithm's state is at round {self.run.algorithm.round}")
        torch.set_rng_state(payload["torch_rng"])
        self.run.metrics = metrics

    def logged_rows(self) -> list[dict[str, Any]]:
        """The rows of metrics.jsonl up to the first damaged line (a kill mid-append)."""
        rows = []
        text = (self.run.dir.metrics.read_text(encoding="utf-8", errors="replace")
                if self.run.dir.metrics.is_file() else "")
        for line in text.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                break
            if not isinstance(row, dict) or not isinstance(row.get("round"), int):
                break
            rows.append(row)
        return rows

    def _logged_rounds(self) -> int:
        return max((row["round"] for row in self.logged_rows()), default=0)

    def _rows_after_checkpoint(self) -> list[tuple[int, dict[str, Any]]]:
        """``(ledger index, row)`` of the rounds after the loaded state whose rows were
        released: each round's latest row in ledger.jsonl (:meth:`Ledger.latest_rows`), which
        holds rows lost from metrics.jsonl by an interruption as well."""
        latest = self.run.ledger.latest_rows()
        return [(latest[r].index, latest[r].payload["row"]) for r in sorted(latest)
                if r > self.run.resumed_from]

    def _rounds_after_checkpoint(self, saved_redrawn: list[dict[str, Any]]) -> None:
        """Rounds whose rows were released after the loaded state run again (issue 44, item
        3). Seeded, with the same step sizes: each is reproduced and verified bit for bit
        against its released row before it is shown (:meth:`verify_rerun`). Seeded, with a
        changed step size: refused (the round would run again on the same noise draws, and
        no composition covers two releases that share one noise draw). Secure: they are
        drawn again from os.urandom, so their rows join ``redrawn.jsonl`` (recorded in the
        ledger, then written, before metrics.jsonl is cut back) and each is composed once
        more. ``saved_redrawn``: those the checkpoint knew of."""
        from privfl.algorithms.base import redrawn_of

        directory = self.run.dir
        redrawn = (directory.read_metrics(directory.redrawn) if directory.redrawn.is_file()
                   else [])
        redrawn += [row for row in saved_redrawn if row not in redrawn]
        pending = self._rows_after_checkpoint()
        after = [row for _, row in pending]
        if after and self.run.config.privacy.secure:
            self.run.ledger.append("redrawn", {"rounds": [row["round"] for row in after],
                                               "indices": [index for index, _ in pending]})
            redrawn += [row for row in after if row not in redrawn]
            self.run.dir.write_metrics(redrawn, self.run.dir.redrawn)
            self.run.resume_notes.append(
                f"rounds {after[0]['round']}..{after[-1]['round']} were logged after the last "
                "checkpoint and run again with fresh os.urandom randomness (secure mode): each "
                f"was released twice and is counted twice ({len(redrawn)} re-drawn round(s) "
                "composed in all; their first rows are in redrawn.jsonl)")
        elif after and self.run.steps_changed:
            raise ConfigError(
                f"resume = {str(directory.path)!r}: the rows of rounds "
                f"{after[0]['round']}..{after[-1]['round']} were released after the checkpoint "
                f"of round {self.run.resumed_from} (ledger.jsonl), and this seeded run would "
                "run them again on the same noise draws with another step size: two releases "
                "that share one noise draw are covered by no composition. Resume without "
                "changing the step size (the rounds are then verified bit for bit), or start a "
                "new run with --out NEW_DIR (privacy.secure: true runs re-draw such rounds "
                "and compose them)")
        elif after:
            self.run._expected = {row["round"]: row for row in after}
        self.run.redrawn = redrawn
        self.run.algorithm.redrawn_rounds = redrawn_of(redrawn)
        self._check_continuation()
        self.run.outputs.write_metrics(self.run.metrics)

    def _check_continuation(self) -> None:
        """Refuse a resume the plan's accountant would not cover: a plan that pins what it
        assumed at round 1 (``plan.pins()``, in run.json) checks them against the resumed
        configuration and its re-drawn rounds (``plan.check_continuation``); a ConfigError of
        one line names what changed and what to do."""
        check = getattr(self.run.algorithm.plan, "check_continuation", None)
        if check is None:
            return
        try:
            check(self.run.dir.pinned(), self.run.algorithm.redrawn_rounds)
        except ValueError as error:
            raise ConfigError(f"resume = {str(self.run.dir.path)!r}: {error}") from None

    def verify_rerun(self, metrics: dict[str, Any]) -> None:
        """Before a seeded round that ran again is shown: its row (as metrics.jsonl would show
        it, timing and accounting aside) must be the row released before the interruption,
        bit for bit, so
        that both are one release; otherwise a ConfigError refuses to release it (two releases
        on one noise draw are covered by no composition; a seeded round repeats its noise
        draws only on the same machine and privfl version)."""
        logged = self.run._expected.pop(metrics["round"], None)
        if logged is None:
            return
        shown = self.run.outputs.split_rows([metrics])[0][0]
        fresh = json.loads(json.dumps(json_safe(shown)))
        # the accounting keys are computed from the public settings (the cadence may differ
        # when federated.rounds changed), the timing is not a function of the noise
        classes = {**GENERIC_METRICS, **self.run.outputs.metric_classes()}
        public = {key for key, value in classes.items() if value == COVERED_ACCOUNTING}
        keys = sorted((set(logged) | set(fresh)) - {"seconds", *public})
        differ = [k for k in keys if logged.get(k) != fresh.get(k)]
        if not differ:
            return
        key = differ[0]
        raise ConfigError(
            f"round {metrics['round']} ran again after the resume with the same seed but "
            f"differs from the row released before the interruption in {', '.join(differ)} "
            f"({key}: released {logged.get(key)!r}, now {fresh.get(key)!r}): it is not released "
            "(two releases that share one noise draw are covered by no composition) and the run "
            "stops; a seeded round repeats its noise draws only on the same machine and privfl "
            "version: resume there, or start a new run with --out NEW_DIR")
