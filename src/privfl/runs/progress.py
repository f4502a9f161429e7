"""Progress of :meth:`Experiment.run <privfl.runs.experiment.Experiment.run>` from Python.

:class:`RunProgress` shows a rich bar (rounds, and the clients of the current round) where one
can be redrawn, a terminal or a Jupyter notebook with ipywidgets, and one line per round
elsewhere. ``Experiment.run(progress=None)`` shows it only for interactive use
(:func:`interactive`: a terminal or a notebook, not under pytest) and only when no callbacks
were given (``privfl run`` passes its own display, which prints its own lines);
``progress=True`` or ``False`` decides. :func:`round_status` is the status text ``privfl run``
shows too.
"""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

from rich.console import Console

from privfl.runs.headline import method_name
from privfl.runs.rounding import format_bound
from privfl.runs.rundir import logged_guarantees

__all__ = ["ECHO_ROOM", "RunProgress", "fmt", "interactive", "progress_bar", "round_status",
           "stop_bar", "with_progress"]


def fmt(value: Any, pct: bool = False) -> str:
    """A metric for a status line: ``84.0%`` or ``0.123``; ``n/a`` when not a finite number."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{100 * value:.1f}%" if pct else f"{value:.3g}"


def round_status(labels: Any, metrics: dict[str, Any]) -> str:
    """``global 84.0%  eps 1.235 (RDP)``: the first two of ``labels`` (the algorithm's metric
    keys) and the tightest rigorous bound the round's row carries in its primary scope, worded
    and rounded up as the headline is (:mod:`privfl.runs.headline`): at the last planned round
    of a run that stops there, the row carries what the headline is selected from, so the last
    round line shows the headline's value and accountant (``eps 6.188 (PLD)``), not the
    per-round series' looser one. A row without a bound shows its tightest estimate, marked
    (``eps ~3.9 (gdp-clt estimate)``)."""
    status = "  ".join(f"{key.removesuffix('_accuracy')} {fmt(metrics.get(key), True)}"
                       for key in list(labels)[:2])
    bounds = logged_guarantees(metrics, "bound")
    if not bounds and "epsilon" in metrics:  # a row without a privacy list: its one series
        bounds = {str(metrics.get("epsilon_method")): float(metrics["epsilon"])}
    if bounds:
        method = min(bounds, key=lambda m: (bounds[m], m))
        status += f"  eps {format_bound(bounds[method], 4)} ({method_name(method)})"
    else:  # no per-round bound (the sampled PLD is composed at the last round): an estimate
        estimates = logged_guarantees(metrics, "estimate")
        if estimates:
            method = min(estimates, key=lambda m: (estimates[m], m))
            status += f"  eps ~{format_bound(estimates[method], 3)} ({method} estimate)"
    return status


#: columns a bar leaves free at the right: a terminal echoes Ctrl-C as ``^C`` where the cursor
#: is, at the end of the bar's last line; a line that fills the width wraps there, the bar's
#: redraw then starts one line too low and the rounds' bar stays on screen twice
ECHO_ROOM = 3


def progress_bar(console: Console) -> Any:
    """A started rich ``Progress`` (what, done/total, bar, elapsed, remaining, status): the
    rounds of a run and the clients of a round, for ``privfl run`` and the Python API. Its
    lines stay :data:`ECHO_ROOM` columns short of the console's width (read at each redraw)."""
    from rich.constrain import Constrain
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    class Bar(Progress):
        def get_renderable(self) -> Any:
            width = max(console.width - ECHO_ROOM, 20)
            return Constrain(super().get_renderable(), width=width)

    progress = Bar(
        TextColumn("{task.description}"), MofNCompleteColumn(), BarColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
        console=console, transient=False)
    progress.start()
    return progress


def stop_bar(progress: Any, clients_task: Any) -> None:
    """Stop a :func:`progress_bar`, first removing the clients of a round (``clients_task``,
    None if none was shown), so that the rounds' bar alone stays on screen, once (after a
    finished run as after Ctrl-C; never a stale ``clients 0/6``)."""
    if clients_task is not None:
        progress.remove_task(clients_task)
    progress.stop()


def _has_widgets() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def interactive(console: Console) -> bool:
    """Whether a person is watching: a terminal or a notebook, and not a pytest run."""
    if "PYTEST_CURRENT_TEST" in os.environ:
        return False
    return console.is_jupyter or (console.is_terminal and not console.is_dumb_terminal)


class RunProgress:
    """Run callbacks that show progress (see the module docstring); :meth:`close` ends it."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        live = (self.console.is_jupyter and _has_widgets()) or (
            self.console.is_terminal and not self.console.is_dumb_terminal)
        self.lines = not live
        self.progress: Any = None
        self.task = self.clients_task = None
        self.total = 0
        self.trainer: Any = None
        self.started = time.monotonic()
        self._lock = threading.Lock()  # on_clients may come from several worker threads

    def on_start(self, experiment: Any) -> None:
        self.total = experiment.config.federated.rounds
        self.labels = list(experiment.algorithm.metric_labels)
        self.started = time.monotonic()
        self.done_at_start = experiment.algorithm.round
        trainer = getattr(experiment.algorithm, "trainer", None)
        if hasattr(trainer, "progress") and trainer.progress is None:
            self.trainer, trainer.progress = trainer, self.on_clients
        if self.lines:
            return
        self.progress = progress_bar(self.console)
        self.task = self.progress.add_task("round", total=self.total,
                                           completed=self.done_at_start, status="")

    def on_clients(self, done: int, total: int) -> None:
        """Within a round (the engine calls it, possibly from a worker thread)."""
        with self._lock:
            if self.progress is None:
                return
            if self.clients_task is None:
                self.clients_task = self.progress.add_task("clients", total=total, status="")
            self.progress.update(self.clients_task, completed=done, total=total)

    def on_round(self, experiment: Any, metrics: dict[str, Any]) -> None:
        status = round_status(self.labels, metrics)
        if self.progress is not None:
            self.progress.update(self.task, completed=metrics["round"], status=status)
            if self.clients_task is not None:
                self.progress.update(self.clients_task, completed=0)
            return
        ran = int(metrics["round"]) - self.done_at_start
        left = self.total - int(metrics["round"])
        eta = (f", ETA {left * (time.monotonic() - self.started) / ran:.0f} s"
               if left > 0 and ran > 0 else "")
        self.console.print(f"round {metrics['round']}/{self.total}: {status}  "
                           f"({fmt(metrics.get('seconds'))} s{eta})", highlight=False,
                           soft_wrap=True)

    def on_warning(self, experiment: Any, message: str) -> None:
        self.console.print(f"warning: {message}", highlight=False, markup=False)

    def on_end(self, experiment: Any, result: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the bar and give the engine its progress hook back (also after an error)."""
        with self._lock:
            if self.progress is not None:
                stop_bar(self.progress, self.clients_task)
                self.progress = self.clients_task = None
        if self.trainer is not None:
            self.trainer.progress = None
            self.trainer = None


class _Both:
    """Two sets of run callbacks, called in turn."""

    def __init__(self, first: Any, second: Any) -> None:
        self.parts = (first, second)

    def on_start(self, experiment: Any) -> None:
        for part in self.parts:
            part.on_start(experiment)

    def on_round(self, experiment: Any, metrics: dict[str, Any]) -> None:
        for part in self.parts:
            part.on_round(experiment, metrics)

    def on_warning(self, experiment: Any, message: str) -> None:
        for part in self.parts:
            part.on_warning(experiment, message)

    def on_end(self, experiment: Any, result: Any) -> None:
        for part in self.parts:
            part.on_end(experiment, result)


def with_progress(callbacks: Any, progress: bool | None) -> tuple[Any, RunProgress | None]:
    """``(callbacks to call, the progress display or None)`` for ``Experiment.run``:
    ``progress`` None shows it when ``callbacks`` is None and a person is watching."""
    if progress not in (None, True, False):
        raise ValueError(f"progress = {progress!r} is not allowed: must be True, False or None "
                         "(None: shown in a terminal or notebook when no callbacks are given)")
    console = Console(stderr=True)
    show = progress if progress is not None else callbacks is None and interactive(console)
    if not show:
        return callbacks, None
    display = RunProgress(console)
    return (display if callbacks is None else _Both(callbacks, display)), display
