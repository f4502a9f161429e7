"""``privfl sweep``: one run per combination of grid values, locally or as Ray tasks.

``privfl sweep CONFIG --grid training.lr=0.01,0.05 --grid privacy.noise_multiplier=1,2`` runs
the 4 configurations (``--set`` overrides apply to all of them) as ordinary runs, each in its own
run directory under ``--out DIR`` (``NNN-key=value_...``), and writes ``DIR/sweep.json``: the
grid, and per run its overrides, run directory, stop reason, final metrics and privacy
guarantee (``own_bound``: its headline, valid only if it were the only run on the dataset),
and ``release_of_chosen_run``: the bound for releasing the run chosen among all K after
reading their results (:mod:`privfl.runs.sweep_privacy`: the K runs compose), with what it
covers. Every configuration is validated before the first run starts. sweep.json is written
at the start and again as each run finishes (``"complete": false`` and the ``pending`` runs
until the last one is done): ``privfl sweep --resume DIR`` finishes an interrupted sweep,
continuing each unfinished run from its checkpoint (``privfl run --resume``) and starting the
runs that never started.

``--backend local`` (default) runs them one after another in this process, with the per-round
progress of ``privfl run``. ``--backend ray`` runs each as a Ray task (at most ``--workers`` at
once), on a local Ray instance bound to 127.0.0.1 or on the cluster at ``--address``; the tasks'
per-round lines are forwarded by Ray. A run's result does not depend on where it ran. On a
cluster, ``DIR`` must be on a file system every node shares, and the data must be readable on
every node (each task loads its configuration's dataset).
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from privfl.runs.rounding import format_bound

__all__ = ["grid_points", "parse_grid", "sweep_command"]

SWEEP_HELP = (
    "Run a configuration once per combination of --grid values.\n\n"
    "Each combination is an ordinary run (its own run directory under --out, with report.md, "
    "metrics and privacy.json); DIR/sweep.json lists them with their final metrics and "
    "privacy. --backend ray runs them as Ray tasks (a local Ray instance on 127.0.0.1 unless "
    "--address names a cluster); results do not depend on the backend."
)


def parse_grid(items: list[str]) -> list[tuple[str, list[str]]]:
    """``["key=v1,v2", ...]`` -> ``[(key, ["v1", "v2"]), ...]`` (each value a YAML value, a
    flow list or map kept whole (:func:`split_values`); a key at most once; at least one value
    each)."""
    from privfl.config import parse_override

    if not items:
        raise ValueError("--grid is required: e.g. --grid training.lr=0.01,0.05")
    grid: list[tuple[str, list[str]]] = []
    for item in items:
        if not isinstance(item, str) or "=" not in item:
            raise ValueError(f"--grid {item!r} is not valid: must be key=v1,v2,... with a "
                             "dotted key")
        key, _, raw = item.partition("=")
        key = key.strip()
        if not key:
            raise ValueError(f"--grid {item!r} is not valid: the dotted key before '=' is empty")
        values = split_values(item, raw)
        if any(not v for v in values):
            raise ValueError(f"--grid {item!r} is not valid: an empty value (values are "
                             "separated by commas)")
        for value in values:
            parse_override(f"{key}={value}")  # the key's and the value's syntax
        if key in (k for k, _ in grid):
            raise ValueError(f"--grid {key} is given twice: list all its values in one --grid")
        if len(set(values)) != len(values):
            raise ValueError(f"--grid {item!r} lists a value twice")
        grid.append((key, values))
    return grid


def split_values(item: str, raw: str) -> list[str]:
    """``raw`` cut at the commas outside brackets, braces and quotes: ``0.1,[0, 1],{a: 1}`` ->
    ``["0.1", "[0, 1]", "{a: 1}"]`` (YAML flow lists and maps stay whole)."""
    values, current, depth, quote = [], [], 0, None
    for ch in raw:
        if quote is not None:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            values.append("".join(current).strip())
            current = []
            continue
        current.append(ch)
    if depth != 0 or quote is not None:
        raise ValueError(f"--grid {item!r} is not valid: unbalanced brackets or quotes")
    return [*values, "".join(current).strip()]


def grid_points(grid: list[tuple[str, list[str]]]) -> list[list[str]]:
    """Every combination as ``--set`` overrides, the last key varying fastest."""
    keys = [key for key, _ in grid]
    return [[f"{k}={v}" for k, v in zip(keys, combo, strict=True)]
            for combo in itertools.product(*(values for _, values in grid))]


def _run_name(index: int, point: list[str]) -> str:
    label = "_".join(f"{text.split('=', 1)[0].rsplit('.', 1)[-1]}={text.split('=', 1)[1]}"
                     for text in point)
    safe = "".join(ch if ch.isalnum() or ch in "-_.=" else "-" for ch in label)
    return f"{index:03d}-{safe}"[:120]


def _status(summary: dict[str, Any]) -> str:
    """The headline accuracy and the epsilon of a run, as in ``privfl run``'s progress."""
    final = summary.get("final", {})
    labels = list(summary.get("metric_labels", {}))
    text = ""
    if labels and isinstance(final.get(labels[0]), (int, float)):
        text = f"{labels[0].removesuffix('_accuracy')} {100 * final[labels[0]]:.1f}%"
    if "epsilon" in final:
        text += f"  eps {format_bound(final['epsilon'], 3)} ({final.get('epsilon_method')})"
    return text.strip()


class _RoundLines:
    """Per-round progress lines of one run (printed where the run executes)."""

    def __init__(self, label: str, print_fn=print) -> None:
        self.label, self.print = label, print_fn

    def on_start(self, experiment) -> None:
        pass

    def on_warning(self, experiment, message: str) -> None:
        self.print(f"{self.label}: warning: {message}", flush=True)

    def on_round(self, experiment, metrics: dict[str, Any]) -> None:
        summary = {"final": metrics, "metric_labels": experiment.algorithm.metric_labels}
        self.print(f"{self.label} round {metrics['round']}/{experiment.config.federated.rounds}:"
                   f" {_status(summary)} ({metrics.get('seconds', 0.0):.2g} s)", flush=True)

    def on_end(self, experiment, result) -> None:
        pass


def run_point(raw: dict[str, Any], run_dir: str, label: str, say=print) -> dict[str, Any]:
    """One run of the sweep (locally or inside a Ray task): its summary; progress lines go
    to ``say`` (``print`` in a Ray task: Ray forwards them to the driver). A run directory that
    already holds the run (an interrupted sweep) is continued from its checkpoint."""
    from privfl.config import config_from_dict
    from privfl.runs.experiment import Experiment
    from privfl.runs.rundir import json_safe

    if (Path(run_dir) / "config.yaml").is_file():
        experiment = Experiment.resume(run_dir)
    else:
        experiment = Experiment.create(config_from_dict(raw), run_dir)
    return json_safe(experiment.run(_RoundLines(label, say)).summary)


def _row(name: str, point: list[str], summary: dict[str, Any]) -> dict[str, Any]:
    head = summary.get("headline", {})
    own = ({k: head.get(k) for k in ("epsilon", "delta", "method", "kind", "unit")}
           if "epsilon" in head else None)
    return {"run": name, "overrides": point, "run_dir": summary["run_dir"],
            "stop_reason": summary["stop_reason"], "final": summary["final"],
            "privacy": summary["privacy"], "own_bound": own, "status": _status(summary)}


def _bound_text(bound: dict[str, Any] | None) -> str:
    """``eps 4.28 (pld)``, or ``no guarantee``."""
    if not bound or not isinstance(bound.get("epsilon"), (int, float)) or not math.isfinite(
            bound["epsilon"]):
        return "no guarantee"
    return f"eps {bound['epsilon']:.4g} at delta {bound['delta']:g} ({bound['method']})"


def _run_on_ray(jobs, address: str | None, workers: int | None, console: Console,
                done=lambda index, summary: None) -> list:
    from privfl.backends import connect
    from privfl.fl.workers import available_cores

    cpus = None if address is not None else max(available_cores(), workers or 1)
    connection = connect(address, cpus=cpus, log_to_driver=True)
    try:
        ray = connection.ray
        limit = workers or max(1, connection.cpus)
        task = ray.remote(num_cpus=1)(run_point)
        console.print(f"backend: {escape(connection.describe())}, at most {limit} run(s) at once")
        results: dict[int, dict] = {}
        waiting: dict[Any, int] = {}
        queue = list(enumerate(jobs))
        while queue or waiting:
            while queue and len(waiting) < limit:
                index, (name, point, raw, run_dir) = queue.pop(0)
                waiting[task.remote(raw, run_dir, name)] = index
            ready, _ = ray.wait(list(waiting), num_returns=1)
            index = waiting.pop(ready[0])
            try:
                results[index] = ray.get(ready[0])
            except ray.exceptions.RayTaskError as error:
                cause = getattr(error, "cause", None)
                raise (cause if isinstance(cause, Exception) else RuntimeError(
                    " ".join(str(error).split())[:300])) from None
            console.print(f"{escape(jobs[index][0])}: done ({escape(_status(results[index]))})",
                          highlight=False, soft_wrap=True)
            done(index, results[index])
        return [results[i] for i in range(len(jobs))]
    finally:
        connection.close()


class _SweepFile:
    """``DIR/sweep.json``, rewritten (atomically) at the start and as each run finishes."""

    def __init__(self, root: Path, head: dict[str, Any], jobs: list) -> None:
        self.path, self.head, self.jobs = root / "sweep.json", head, jobs
        self.rows: dict[int, dict[str, Any]] = {}
        #: the bound for releasing the run chosen among all of them (privfl.runs.sweep_privacy)
        self.chosen: dict[str, Any] | None = None

    def done(self, index: int, summary: dict[str, Any]) -> None:
        name, point = self.jobs[index][:2]
        self.rows[index] = _row(name, point, summary)
        self.write()

    def report(self) -> dict[str, Any]:
        from privfl.runs.rundir import json_safe

        pending = [{"run": name, "overrides": point, "run_dir": run_dir, "config": raw}
                   for i, (name, point, raw, run_dir) in enumerate(self.jobs)
                   if i not in self.rows]
        return json_safe({**self.head, "complete": not pending,
                          "runs": [self.rows[i] for i in sorted(self.rows)],
                          "pending": pending,
                          **({"release_of_chosen_run": self.chosen} if self.chosen else {})})

    def write(self) -> None:
        from privfl.runs.rundir import write_atomically

        text = json.dumps(self.report(), indent=2) + "\n"
        write_atomically(self.path, lambda stream: stream.write(text.encode("utf-8")))


def _resumed(root: Path) -> tuple[_SweepFile, list[int]]:
    """The sweep in ``root`` (its sweep.json) and the indices of the runs still to do."""
    path = root / "sweep.json"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        runs, pending = saved["runs"], saved["pending"]
        head = {k: saved[k] for k in ("command", "config", "backend", "grid", "set")}
        jobs = [(r["run"], r["overrides"], None, r["run_dir"]) for r in runs]
        jobs += [(p["run"], p["overrides"], p["config"], p["run_dir"]) for p in pending]
    except FileNotFoundError:
        raise ValueError(f"resume = {str(root)!r} is not a sweep directory: it has no "
                         "sweep.json") from None
    except (OSError, ValueError, TypeError, KeyError) as error:
        raise ValueError(f"resume = {str(root)!r}: sweep.json is damaged ({error}): run the "
                         "sweep again with --out NEW_DIR") from None
    jobs.sort(key=lambda job: job[0])
    sweep = _SweepFile(root, head, jobs)
    finished = {r["run"]: r for r in runs}
    for index, job in enumerate(jobs):
        if job[0] in finished:
            sweep.rows[index] = finished[job[0]]
    return sweep, [i for i in range(len(jobs)) if i not in sweep.rows]


def _check_backend(backend: str, address: str | None, workers: int | None) -> None:
    from privfl.backends import check_options  # imports torch

    check_options(backend, address, workers)


def sweep_command(
    config: Annotated[Path | None, typer.Argument(
        help="YAML configuration the grid varies (not with --resume).", show_default=False)
    ] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option("--grid", help="key=v1,v2,... (dotted key, YAML values; repeatable: "
                     "every combination runs).", show_default=False),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override one key in every run, e.g. --set "
                     "federated.rounds=10 (repeatable).", show_default=False),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Directory of the sweep (default runs/sweep-NAME-TIME); "
                     "must not exist yet.", show_default=False),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option("--resume", help="Finish the interrupted sweep in this directory (its "
                     "sweep.json): unfinished runs continue, the others start.",
                     show_default=False),
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", help="local (one run after another here) or ray (runs "
                          "as Ray tasks; pip install 'privfl\\[ray]').")
    ] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="With --backend ray: the Ray cluster; "
                                 "default: a local Ray instance on 127.0.0.1.",
                                 show_default=False)
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="With --backend ray: runs at once "
                                 "(default: one per CPU of the cluster).", show_default=False)
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print sweep.json's content on stdout (progress goes "
                           "to stderr).")
    ] = False,
) -> None:
    from privfl.cli.common import fail
    from privfl.config import load_config

    console = Console(stderr=as_json)
    try:
        if resume is not None:
            _check_backend(backend, address, workers)
            if config is not None or grid or set_ or out is not None:
                raise ValueError("--resume takes no CONFIG, --grid, --set or --out: the sweep "
                                 "continues as its sweep.json says")
            root = Path(resume)
            sweep, todo = _resumed(root)
            name = root.name
        else:
            if config is None:
                raise ValueError("CONFIG is missing: privfl sweep CONFIG --grid KEY=V1,V2 (or "
                                 "--resume DIR)")
            points = grid_points(parse_grid(grid or []))
            configs = [load_config(config, list(set_ or []) + point) for point in points]
            _check_backend(backend, address, workers)  # after the configurations: torch loads
            name = configs[0].name
            root = Path(out) if out is not None else Path("runs") / (
                f"sweep-{name}-{time.strftime('%Y%m%d-%H%M%S')}")
            if root.exists():
                raise ValueError(f"out = {str(root)!r} already exists: a sweep writes a new "
                                 "directory (an interrupted one: privfl sweep --resume DIR)")
            root.mkdir(parents=True)
            jobs = [(_run_name(i, p), p, c.model_dump(mode="json"), str(root / _run_name(i, p)))
                    for i, (p, c) in enumerate(zip(points, configs, strict=True))]
            head = {"command": "sweep", "config": str(config), "backend": backend,
                    "grid": [{"key": k, "values": v} for k, v in parse_grid(grid)],
                    "set": list(set_ or [])}
            sweep, todo = _SweepFile(root, head, jobs), list(range(len(jobs)))
        sweep.write()
        jobs = sweep.jobs
        console.print(f"[bold]privfl sweep[/bold] {escape(name)}: {len(todo)} of {len(jobs)} "
                      f"run(s) to do -> {escape(str(root))}")
        if backend == "ray":
            todo_jobs = [jobs[i] for i in todo]
            _run_on_ray(todo_jobs, address, workers, console,
                        lambda index, summary: sweep.done(todo[index], summary))
        else:
            def say(text: str, flush: bool = True) -> None:
                console.print(escape(text), highlight=False, soft_wrap=True)

            for index in todo:
                job_name, _, raw, run_dir = jobs[index]
                sweep.done(index, run_point(raw, run_dir, job_name, say))
        from privfl.runs.sweep_privacy import sweep_guarantee

        sweep.chosen = sweep_guarantee([sweep.rows[i]["run_dir"] for i in sorted(sweep.rows)])
        sweep.write()
        report = sweep.report()
        rows = report["runs"]
    except KeyboardInterrupt:
        typer.echo("privfl: sweep interrupted; finished runs are in sweep.json: finish it with "
                   f"privfl sweep --resume {root if 'root' in locals() else 'DIR'}", err=True)
        raise typer.Exit(code=130) from None
    except Exception as error:  # noqa: BLE001 - one line, never a traceback (cli.common)
        raise fail(error) from None
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    chosen = _bound_text(report["release_of_chosen_run"])
    for row in rows:
        console.print(f"{escape(row['run'])}: {escape(row['status'])} ({row['stop_reason']}); "
                      f"own bound {escape(_bound_text(row.get('own_bound')))}, releasing the "
                      f"chosen run: {escape(chosen)}", highlight=False, soft_wrap=True)
    console.print(f"releasing the run chosen among these {len(rows)}: {escape(chosen)}; it "
                  "covers all of them together (K runs on one dataset compose; the sweep runs "
                  "every grid point, so no random-K tuning bound applies); each run's own "
                  "bound holds only if it is the only run made on this dataset",
                  highlight=False, soft_wrap=True)
    console.print(f"sweep: {escape(str(root / 'sweep.json'))}")


sweep_command.__doc__ = SWEEP_HELP
