"""Side-by-side comparison of finished (or partial) run directories at the same rounds.

Generic over algorithms (e.g. a private run against its non-private baseline, or PriFedSync
against DP-FedAvg): at each compared round the table holds every run's headline accuracies (the
first two metrics its algorithm declares) and, for private runs, the guarantee reached by then:
``epsilon`` (the tightest rigorous bound in the algorithm's primary scope, with the accountant
that gave it) and ``mu`` (a Gaussian-DP estimate, where the algorithm reports one).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from privfl._validation import check_int
from privfl.config.loader import load_config
from privfl.runs.card import format_percent
from privfl.runs.plots import _series, figure
from privfl.runs.rounding import format_bound
from privfl.runs.rundir import RunDirectory, logged_guarantees, logged_number

__all__ = ["EPSILON_NOTE", "MISSING", "RunRecord", "common_rounds", "comparison_markdown",
           "comparison_notes", "comparison_rows", "disagreement_notes", "distinct_labels",
           "accountant_series", "column_accountants", "epsilon_cell", "epsilon_series",
           "final_point", "load_run", "own_accountant", "number_cell", "percent_cell",
           "plot_comparison", "reports_mu", "shared_accountant", "unshared_rounds"]

#: A table cell with no number: not measured at that round, or not reported by that run.
MISSING = "—"
#: What a compared eps is (the markdown and HTML tables' note).
EPSILON_NOTE = (
    "eps at delta in each algorithm's primary scope, from one accountant for every private run "
    "at a round (named in brackets): the tightest rigorous bound they all report, else an "
    "estimate they all report (marked estimate); at a stopped run's last round, its headline "
    "(summary.json, marked headline): the bound for the mechanism that ran (after a stop on a "
    "target, every round the stop rules allowed; with a budget, its filter's bound), never "
    "the epsilon of the rounds that ran alone. Runs with different units (record or client) "
    "are not "
    "comparable; mu is the largest Gaussian-DP mu a run reports, with the accountant and its "
    "kind (a CLT mu is an estimate; a Gaussian mechanism's own mu is exact).")
MISSING_NOTE = (f"{MISSING}: not measured at that round (e.g. an algorithm that evaluates "
                "every k rounds) or not reported by that run's accountants.")


@dataclass(frozen=True)
class RunRecord:
    """What a comparison needs from one run directory."""

    path: Path
    name: str
    algorithm: str
    private: bool
    delta: float | None
    unit: str
    sampling: str
    metric_labels: tuple[tuple[str, str], ...]
    metrics: tuple[dict[str, Any], ...]
    dataset: str = "-"
    #: summary.json's ``headline`` of a stopped run (None: not stopped, or no bound)
    final: dict[str, Any] | None = None

    @property
    def headline(self) -> tuple[str, ...]:
        """The (at most two) accuracy metrics shown for this run."""
        return tuple(key for key, _ in self.metric_labels[:2])

    def at(self, round_index: int) -> dict[str, Any]:
        for row in self.metrics:
            if row["round"] == round_index:
                return row
        done = sorted(row["round"] for row in self.metrics)
        raise ValueError(f"round = {round_index!r} is not a completed round of run {self.name!r}: "
                         f"must be one of its rounds {done[0]}..{done[-1]}")


def _labels_of_saved_privacy(run_dir: RunDirectory) -> tuple[str, str]:
    """(unit, sampling) of the run's privacy.json results, when it was written."""
    try:
        results = json.loads(run_dir.privacy.read_text()).get("results") or []
        first = results[0]
        return str(first.get("unit", "-")), str(first.get("sampling", "-"))
    except (OSError, ValueError, AttributeError, IndexError, TypeError):
        return "-", "-"


def _final_headline(run_dir: RunDirectory, last_round: int) -> dict[str, Any] | None:
    """summary.json's ``headline`` when it carries a bound and the run stopped at
    ``last_round`` (its last logged round), else None."""
    try:
        summary = json.loads(run_dir.summary.read_text(encoding="utf-8"))
        headline = summary["headline"]
        epsilon = headline["epsilon"]
        stopped = summary["rounds_completed"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if (stopped != last_round or not isinstance(epsilon, (int, float))
            or isinstance(epsilon, bool)):
        return None
    return {key: headline.get(key) for key in ("epsilon", "delta", "method", "kind", "unit",
                                               "scope", "sentence")}


def final_point(run: RunRecord) -> tuple[int, dict[str, Any]] | None:
    """``(round, headline)`` of a stopped private run: its final point is its headline (the
    bound for the mechanism that ran: after a stop on a target, every round the stop rules
    allowed; with a budget, the filter's bound), not the epsilon of the rounds that ran."""
    if not run.private or run.final is None:
        return None
    return run.metrics[-1]["round"], run.final


def load_run(path: str | Path) -> RunRecord:
    """Read ``config.yaml``, ``metrics.jsonl`` and (if present) ``privacy.json`` of a run."""
    from privfl.algorithms.registry import algorithm_class

    run_dir = RunDirectory(path)
    if not run_dir.config.is_file():
        raise ValueError(f"run directory = {str(path)!r} is not a privfl run: no config.yaml")
    config = load_config(run_dir.config)
    metrics = run_dir.read_metrics()
    for line, row in enumerate(metrics, 1):
        if not isinstance(row, dict) or isinstance(row.get("round"), bool) or not isinstance(
                row.get("round"), int):
            raise ValueError(f"{run_dir.metrics}: line {line} is not a round's metrics (no "
                             "integer 'round'): the file is damaged")
    if not metrics:
        raise ValueError(f"run directory = {str(path)!r} has no completed rounds "
                         "(metrics.jsonl is empty or missing)")
    private = config.privacy.enabled
    unit, sampling = _labels_of_saved_privacy(run_dir) if private else ("-", "-")
    labels = tuple(algorithm_class(config.federated.algorithm).metric_labels.items())
    return RunRecord(Path(path), config.name, config.federated.algorithm, private,
                     config.privacy.delta if private else None, unit, sampling, labels,
                     tuple(metrics), dataset=config.data.dataset,
                     final=_final_headline(run_dir, metrics[-1]["round"]) if private else None)


def distinct_labels(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The runs, each named so that no two share a label: the config name where it is unique,
    else ``name (directory)``, else the directory's full path."""
    names = [run.name for run in runs]
    out = []
    for run in runs:
        label = run.name
        if names.count(run.name) > 1:
            label = f"{run.name} ({run.path.name})"
            if sum(f"{r.name} ({r.path.name})" == label for r in runs) > 1:
                label = str(run.path)
        out.append(replace(run, name=label))
    return out


def common_rounds(runs: Sequence[RunRecord], every: int = 1) -> list[int]:
    """Rounds completed by every run: every ``every``-th one, always the first and the last."""
    check_int("every", every, minimum=1)
    if len(runs) < 1:
        raise ValueError("runs = [] is not allowed: must name at least one run directory")
    shared = set.intersection(*({row["round"] for row in run.metrics} for run in runs))
    if not shared:
        names = ", ".join(str(run.path) for run in runs)
        raise ValueError(f"runs = {names} share no completed round: nothing to compare")
    ordered = sorted(shared)
    chosen = [r for r in ordered if r % every == 0]
    return sorted({ordered[0], *chosen, ordered[-1]})


def _value(row: dict[str, Any], key: str) -> float:
    value = logged_number(row.get(key))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return math.nan


def number_cell(value: Any) -> str:
    """A finite epsilon or mu rounded up (:func:`~privfl.runs.rounding.format_bound`), else
    :data:`MISSING` (never ``nan``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return format_bound(float(value))
    return MISSING


def percent_cell(value: Any) -> str:
    """A fraction as a percentage (2 decimals, no sign), else :data:`MISSING`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return format_percent(value, suffix="")
    return MISSING


def reports_mu(run: RunRecord) -> bool:
    """Whether ``run`` logged a finite Gaussian-DP ``mu`` at any round (a column is shown)."""
    return run.private and any(math.isfinite(_value(row, "mu")) for row in run.metrics)


def comparison_notes(runs: Sequence[RunRecord]) -> list[str]:
    """Warnings about runs that are not comparable: private runs protecting different units
    (record or client), runs on different datasets."""
    notes = []
    units = {run.unit for run in runs if run.private}
    if len(units) > 1:
        notes.append(f"the private runs protect different units ({', '.join(sorted(units))}): "
                     "their epsilons are not comparable")
    datasets = {run.dataset for run in runs}
    if len(datasets) > 1:
        notes.append("the runs use different datasets ("
                     + ", ".join(f"{run.name}: {run.dataset}" for run in runs)
                     + "): their accuracies are not comparable")
    return notes


def disagreement_notes(runs: Sequence[RunRecord], *, shown: int = 3) -> list[str]:
    """Warnings about stopped runs (privacy.json or summary.json written) whose files disagree
    with a fresh computation from their config.yaml (:func:`privfl.runs.check.check_run_privacy`
    on the first and last rounds, privacy.json, summary.json and the reports): a forged
    headline must not be compared as if it were the run's. ``shown``: the problems quoted per
    run. A run that has not stopped is left to ``privfl check-privacy``."""
    from privfl.config import ConfigError
    from privfl.runs.check import check_run_privacy

    shown = check_int("shown", shown, minimum=1)
    notes = []
    for run in runs:
        if not isinstance(run, RunRecord):
            raise ValueError(f"runs holds {type(run).__name__}: must be RunRecords (load_run)")
        directory = RunDirectory(run.path)
        if not (directory.privacy.is_file() or directory.summary.is_file()):
            continue
        try:
            report = check_run_privacy(run.path, every=max(len(run.metrics), 1))
        except (ConfigError, ValueError) as error:
            notes.append(f"{run.path}: its files could not be checked against its config.yaml "
                         f"({error})")
            continue
        if report.ok:
            continue
        problems = [p for row in report.rows for p in row["problems"]]
        problems += report.released["problems"] + report.files["problems"]
        more = f" (and {len(problems) - shown} more)" if len(problems) > shown else ""
        notes.append(f"{run.path}: its files disagree with a fresh computation from its "
                     f"config.yaml (privfl check-privacy): {'; '.join(problems[:shown])}{more}")
    return notes


def shared_accountant(rows: Sequence[dict[str, Any]]) -> tuple[str, str] | None:
    """(method, kind) that every row (one per private run, at one round) reports, so that their
    epsilons are like beside like: the bound every row's own ``epsilon_method`` names when they
    agree, else the tightest bound (in the first row) they all carry, else such an estimate;
    None when they share no accountant."""
    if not rows:
        return None
    own = {row.get("epsilon_method") for row in rows}
    for kind in ("bound", "estimate"):
        tables = [logged_guarantees(row, kind) for row in rows]
        common = set.intersection(*(set(t) for t in tables))
        if not common:
            continue
        if kind == "bound" and len(own) == 1 and own <= common:
            return own.pop(), kind
        return min(common, key=lambda m: (tables[0][m], m)), kind
    return None


def epsilon_series(run: RunRecord) -> tuple[str, dict[int, float]]:
    """(label, round -> epsilon) of one run's per-round epsilon, from one accountant
    (:func:`own_accountant`): its rows' ``epsilon`` (``"rdp bound"``), or where no row carries
    a bound, the tightest estimate every row carries (``"gdp-clt estimate"``); ``("", {})``
    when there is neither."""
    found = own_accountant(run)
    if found is None:
        return "", {}
    method, kind = found
    return f"{method} {kind}", accountant_series(run, method, kind)


def own_accountant(run: RunRecord) -> tuple[str | None, str] | None:
    """(method, kind) of a run's own per-round series: its rows' ``epsilon_method`` (a bound;
    None in rows that do not name it), else the tightest estimate every row carries; None
    when there is neither."""
    logged = [row for row in run.metrics if math.isfinite(_value(row, "epsilon"))]
    if logged:
        return logged[0].get("epsilon_method"), "bound"
    tables = [logged_guarantees(row, "estimate") for row in run.metrics]
    common = set.intersection(*(set(t) for t in tables)) if tables else set()
    if not common:
        return None
    return min(common, key=lambda m: (tables[-1][m], m)), "estimate"


def column_accountants(runs: Sequence[RunRecord], rounds: Sequence[int]
                       ) -> dict[str, tuple[str | None, str]]:
    """run name -> (method, kind) of each private run's epsilon column: one accountant and one
    kind for every compared round, so that a column never mixes estimates with a bound. The
    accountant every private run carries at every compared round (:func:`shared_accountant`,
    like beside like); where they share none, each run's own series (:func:`own_accountant`:
    its rows' bound, else its estimate)."""
    private = [run for run in runs if run.private]
    shared = shared_accountant([run.at(r) for run in private for r in rounds])
    if shared is not None:
        return {run.name: shared for run in private}
    return {run.name: found for run in private
            if (found := own_accountant(run)) is not None}


def accountant_series(run: RunRecord, method: str | None, kind: str) -> dict[int, float]:
    """round -> epsilon of ``method`` (``kind``) in each of ``run``'s rows that carries it (a
    row without a ``privacy`` list: its logged ``epsilon`` where ``epsilon_method`` is
    ``method``): what compare's table and report.html's plot show for the run."""
    out = {}
    for row in run.metrics:
        found = logged_guarantees(row, kind)
        if method is not None and method in found:
            out[row["round"]] = found[method]
        elif kind == "bound" and row.get("epsilon_method") == method \
                and not math.isnan(_value(row, "epsilon")):  # infinity stays
            out[row["round"]] = _value(row, "epsilon")
    return out


def comparison_rows(runs: Sequence[RunRecord], rounds: Sequence[int]) -> list[dict[str, Any]]:
    """One dict per round: ``{"round": r, run name: {accuracies, epsilon, epsilon_method,
    epsilon_kind, mu}}``. Each private run's epsilons come from one accountant and one kind at
    every round (:func:`column_accountants`): the one all private runs share where there is
    one (a run whose last row carries the sampled PLD is still read from the accountant every
    row carries), else each run's own series, and a note says the runs are not like for like
    (:func:`unshared_rounds`). A round whose row lacks the column's accountant shows no value."""
    accountants = column_accountants(runs, rounds)
    series = {name: accountant_series(run, *accountants[name])
              for run in runs for name in [run.name] if name in accountants}
    rows = []
    for r in rounds:
        row: dict[str, Any] = {"round": r}
        for run in runs:
            m = run.at(r)
            entry: dict[str, Any] = {k: _value(m, k) for k in run.headline}
            if run.private:
                method, kind = accountants.get(run.name, (None, "bound"))
                entry.update(epsilon=series.get(run.name, {}).get(r, math.nan),
                             epsilon_method=method, epsilon_kind=kind,
                             mu=_value(m, "mu"), mu_method=m.get("mu_method"))
                final = final_point(run)
                if final is not None and final[0] == r:  # the final point is the headline
                    entry.update(epsilon=float(final[1]["epsilon"]),
                                 epsilon_method=final[1]["method"],
                                 epsilon_kind=final[1]["kind"], headline=True)
            row[run.name] = entry
        rows.append(row)
    return rows


def unshared_rounds(runs: Sequence[RunRecord], rows: Sequence[dict[str, Any]]) -> list[int]:
    """The compared rounds at which the private runs' epsilons come from different
    accountants (they share none); a run's final point (its headline) is its own by design."""
    out = []
    for row in rows:
        methods = {row[run.name]["epsilon_method"] for run in runs
                   if run.private and not row[run.name].get("headline")}
        if len(methods) > 1:
            out.append(row["round"])
    return out


def _mu_cell(entry: dict[str, Any]) -> str:
    """``0.91 (gdp-clt estimate)``, ``1 (pld bound)``, or :data:`MISSING`."""
    mu = number_cell(entry["mu"])
    method = entry.get("mu_method")
    return f"{mu} ({method})" if mu != MISSING and method else mu


def epsilon_cell(entry: dict[str, Any]) -> str:
    """``3.04 (pld)``, ``3.9 (gdp-clt estimate)``, or :data:`MISSING`."""
    eps = number_cell(entry["epsilon"])
    if eps == MISSING or not entry.get("epsilon_method"):
        return eps
    kind = " estimate" if entry.get("epsilon_kind") == "estimate" else ""
    final = ", headline" if entry.get("headline") else ""
    return f"{eps} ({entry['epsilon_method']}{kind}{final})"


def comparison_markdown(runs: Sequence[RunRecord], rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table: accuracies (%) of every run per round, privacy of the private runs."""
    lines = [f"**Warning:** {note}." for note in comparison_notes(runs)]
    lines += [""] if lines else []
    lines += ["| run | algorithm | dataset | directory | private | unit | sampling | "
              "rounds completed | delta |", "|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        delta = format_bound(run.delta) if run.private else "-"
        lines.append(f"| {run.name} | {run.algorithm} | {run.dataset} | `{run.path}` | "
                     f"{'yes' if run.private else 'no'} | {run.unit} | {run.sampling} | "
                     f"{run.metrics[-1]['round']} | {delta} |")
    header = ["round"]
    for run in runs:
        header += [f"{run.name} {dict(run.metric_labels)[k]} %" for k in run.headline]
        if run.private:
            header += [f"{run.name} eps"]
            header += [f"{run.name} mu"] if reports_mu(run) else []
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    missing = False
    for row in rows:
        cells = [str(row["round"])]
        for run in runs:
            entry = row[run.name]
            cells += [percent_cell(entry[key]) for key in run.headline]
            if run.private:
                cells += [epsilon_cell(entry)]
                cells += [_mu_cell(entry)] if reports_mu(run) else []
        missing = missing or MISSING in cells
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Accuracy: test accuracy as each algorithm defines it (mean over clients' own "
              f"test sets). Privacy: {EPSILON_NOTE}"]
    unshared = unshared_rounds(runs, rows)
    if unshared:
        lines += [f"**Not like for like:** at round(s) {', '.join(map(str, unshared))} the "
                  "private runs share no accountant; each run's eps column is its own one "
                  "accountant (its rows' bound, or where they carry none its estimate, marked)."]
    lines += [MISSING_NOTE] if missing else []
    return "\n".join(lines) + "\n"


def plot_comparison(runs: Sequence[RunRecord], path: str | Path, *, title: str = "") -> Path:
    """Each run's headline accuracies per round (first solid, second dashed)."""
    fig = figure()
    ax = fig.add_subplot()
    for index, run in enumerate(runs):
        color = f"C{index % 10}"
        for key, style in zip(run.headline, ("-", "--"), strict=False):
            xs, ys = _series(run.metrics, key)
            if xs:
                ax.plot(xs, ys, style, color=color,
                        label=f"{run.name}: {dict(run.metric_labels)[key]}")
    ax.set_xlabel("round")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title(title or "accuracy per round", fontsize=10)
    path = Path(path)
    fig.savefig(path)
    return path
