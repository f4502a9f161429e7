"""What a run of :class:`~privfl.runs.experiment.Experiment` writes, and where.

:class:`RunOutputs` classifies every metrics key and file as covered by the printed guarantee
or outside it (the table of :mod:`privfl.algorithms.outputs`, privacy.json's ``outputs``),
and writes each round's metrics row; with ``run.outputs: guarantee-only`` the run directory
shows only the covered keys and the rest goes to a separate private directory
(:func:`private_root`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from privfl.algorithms.outputs import (
    GENERIC_METRICS,
    classify_metrics,
    file_outputs,
    private_dir_of,
    split_row,
    test_set_classes,
)
from privfl.config import ConfigError, ExperimentConfig
from privfl.runs.ledger import LEDGER


def private_root(config: ExperimentConfig, run_dir: str | Path) -> Path | None:
    """The separate private directory of ``run.outputs: guarantee-only`` (None: the run
    directory itself); refuses the setting where no guarantee could hold for the outputs."""
    if config.run.outputs != "guarantee-only":
        return None
    if not config.privacy.enabled:
        raise ConfigError("run.outputs = 'guarantee-only' needs a private run (privacy.enabled"
                          " = false: there is no guarantee to cover anything)")
    if not config.privacy.secure:
        raise ConfigError("run.outputs = 'guarantee-only' needs privacy.secure = true: a seeded "
                          "run's config.yaml holds the seed that regenerates its noise, so no "
                          "output would be covered")
    return private_dir_of(Path(run_dir))


class RunOutputs:
    """The outputs of :class:`~privfl.runs.experiment.Experiment` (a part of its run loop, holding
    the experiment as ``run``; it reads the experiment's ``config``, ``dir``, ``algorithm``,
    ``metrics`` and ``redrawn``)."""

    def __init__(self, run: Any) -> None:
        self.run = run


    def metric_classes(self) -> dict[str, tuple[bool, str]]:
        """``metrics key -> (covered, reason)`` of this run: the algorithm's table, with the
        accuracies outside the guarantee where the data's test sets were chosen by the
        clients' training labels (:func:`privfl.algorithms.outputs.test_set_classes`)."""
        algorithm = self.run.algorithm
        return test_set_classes(algorithm.output_classes(), algorithm.metric_labels,
                                self.run.data.info)

    def covered_metrics(self) -> set[str]:
        """The metrics keys the printed guarantee covers (:mod:`privfl.algorithms.outputs`)."""
        table = {**GENERIC_METRICS, **self.metric_classes()}
        return {key for key, (covered, _) in table.items() if covered}

    def check_stops_read_covered(self) -> None:
        """Refuse a stop that reads an output outside the guarantee: ``stop.target_accuracy``
        on an uncovered accuracy would make the round the run stops at (and every output
        after it) depend on data the guarantee does not cover."""
        stop = self.run.config.stop
        key = f"{stop.target_metric}_accuracy"
        if (stop.target_accuracy is None or not self.run.algorithm.private
                or key in self.covered_metrics()):
            return
        reason = {**GENERIC_METRICS, **self.metric_classes()}.get(key, (False, "not classified"))
        raise ConfigError(
            f"stop.target_accuracy = {stop.target_accuracy:g} is not allowed here: the stop "
            f"would read {key}, which is outside the guarantee ({reason[1]}); remove the stop "
            "or draw the test sets from public information")

    def split_rows(self, rows: list[dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """``(what the run directory shows, what the private directory keeps)``: the rows
        themselves and None unless ``run.outputs: guarantee-only`` separates them."""
        if not self.run.dir.separate_private:
            return rows, None
        covered = self.covered_metrics()
        parts = [split_row(row, covered) for row in rows]
        return [public for public, _ in parts], [private for _, private in parts]

    def write_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Rewrite metrics.jsonl (and the private one, see :meth:`split_rows`)."""
        public, private = self.split_rows(rows)
        if private is not None:
            self.run.dir.write_metrics(private, self.run.dir.private_metrics)
        self.run.dir.write_metrics(public)

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one round's row to metrics.jsonl (and the private one), after recording
        the row metrics.jsonl shows in the release ledger (:mod:`privfl.runs.ledger`)."""
        public, private = self.split_rows([row])
        ledger = self.run.ledger
        ledger.append("row", {"round": row["round"], "attempt": ledger.attempt(),
                              "row": public[0]})
        if private is not None:
            self.run.dir.append_metrics(private[0], self.run.dir.private_metrics)
        self.run.dir.append_metrics(public[0])

    def table(self, *, checkpoints: bool, model_file: bool = True,
                client_state: bool | None = None) -> list[dict[str, Any]]:
        """Every metrics key and file of this run, covered by the guarantee or not, with the
        reason (privacy.json's ``outputs``). ``checkpoints``: the private state is on disk;
        ``model_file`` False: no model.pt (a diverged run, or a paused run whose guarantee
        hides its intermediate models); ``client_state``: per-client state is memory-mapped in
        ``client-state/`` (None: look at the run directory; ``privfl check-privacy`` passes
        what the run found, since the folder goes when the process ends)."""
        if client_state is None:
            client_state = (self.run.dir.client_state.is_dir()
                            and any(self.run.dir.client_state.iterdir()))
        keys = [key for row in self.run.metrics for key in row]
        metrics = classify_metrics(keys, self.metric_classes())
        files = file_outputs(
            metrics=metrics, accuracy_keys=self.run.algorithm.metric_labels,
            secure=self.run.config.privacy.secure, guarantee_only=self.run.dir.separate_private,
            private_name=self.run.dir.private.name, checkpoints=checkpoints,
            tensorboard=self.run.config.run.tensorboard,
            mlflow=bool(self.run.config.run.mlflow),
            model_file=model_file and callable(getattr(self.run.algorithm, "global_params", None)),
            redrawn=bool(self.run.redrawn), health=self.health_keys(),
            client_state=client_state, ledger=(self.run.dir.path / LEDGER).is_file())
        return [o.to_dict() for o in metrics + files]

    def health_keys(self) -> list[str]:
        """The health signals health.png and report.html plot: the numeric keys of the rows the
        run directory shows that are neither accuracies nor privacy numbers."""
        from privfl.runs.plots import health_keys

        return health_keys(self.split_rows(self.run.metrics)[0],
                           list(self.run.algorithm.metric_labels))
