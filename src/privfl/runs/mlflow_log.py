"""A run tracked in MLflow (``run.mlflow: true`` or a tracking URI; ``pip install
'privfl[mlflow]'``), beside metrics.jsonl and the TensorBoard writer.

What is logged (through ``mlflow.MlflowClient``, no global MLflow state):

* one MLflow run per privfl run, in the MLflow experiment named after ``config.name``, tagged
  ``privfl.run_id`` (run.json's id: ``privfl run --resume`` continues the same MLflow run);
* parameters: the resolved configuration, flattened (``training.lr``, ...);
* per-round metrics at step = round: the finite numbers of each metrics row
  (:func:`privfl.runs.tensorboard.scalars`; privacy entries as
  ``privacy/<method>-<kind>/epsilon``); with ``run.outputs: guarantee-only`` only the keys the
  guarantee covers;
* at the end: the labelled privacy results as tags ``privacy.<n>`` (method, bound or estimate,
  epsilon, delta, unit, neighbouring relation, sampling, release) and the run directory's files
  as artifacts (privacy.json holds every result with its labels).

``run.mlflow: true`` uses a file store beside the run directory, ``DIR/../mlruns`` (works
offline; ``MLFLOW_ALLOW_FILE_STORE=true mlflow ui --backend-store-uri DIR/../mlruns``: MLflow
3.x keeps its file store in maintenance mode behind that variable, which privfl sets for
``file:`` URIs); a string is any MLflow tracking URI (e.g. ``sqlite:///mlflow.db`` with the full
``mlflow`` package, or a tracking server).
What the store holds is classified with the run's other outputs
(:func:`privfl.algorithms.outputs.file_outputs`, ``mlflow``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from privfl.runs.rounding import format_bound
from privfl.runs.tensorboard import scalars

__all__ = ["MlflowLog", "check_available", "tracking_uri"]


def check_available() -> None:
    """A ValueError naming ``run.mlflow`` and the install command if it cannot work."""
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise ValueError("run.mlflow needs the mlflow package: pip install 'privfl[mlflow]' "
                         "(or set run.mlflow: false)") from None


def tracking_uri(setting: bool | str, run_dir: Path) -> str:
    """The tracking URI of ``run.mlflow``: ``true`` -> the file store ``DIR/../mlruns``."""
    if setting is True:
        return (Path(run_dir).resolve().parent / "mlruns").as_uri()
    if not isinstance(setting, str) or not setting.strip():
        raise ValueError(f"run.mlflow = {setting!r} is not allowed: must be true, false or a "
                         "tracking URI")
    return setting


def _flat(prefix: str, value: Any) -> Iterable[tuple[str, str]]:
    if isinstance(value, Mapping):
        for key, inner in value.items():
            yield from _flat(f"{prefix}.{key}" if prefix else str(key), inner)
    else:
        yield prefix, str(value)[:6000]


class MlflowLog:
    """One privfl run as one MLflow run (module docstring).

    Parameters
    ----------
    uri
        Tracking URI (:func:`tracking_uri`).
    name
        MLflow experiment name (the configuration's ``name``).
    run_id
        privfl's run id (run.json): an MLflow run with this tag is continued (resume).
    params
        The resolved configuration (``config.model_dump(mode="json")``).
    covered
        Metrics keys to log; None logs every key.
    """

    def __init__(self, uri: str, name: str, run_id: str, params: Mapping[str, Any],
                 covered: set[str] | None = None, run_name: str | None = None) -> None:
        check_available()
        from mlflow import MlflowClient
        from mlflow.entities import Param

        if uri.startswith("file:"):  # MLflow 3.x refuses its file store without this opt-in
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        self.uri = uri
        self.covered = covered
        experiment = self.client.get_experiment_by_name(name)
        experiment_id = (experiment.experiment_id if experiment is not None
                         else self.client.create_experiment(name))
        found = self.client.search_runs([experiment_id],
                                        filter_string=f"tags.`privfl.run_id` = '{run_id}'")
        if found:
            self.run_id = found[0].info.run_id
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            run = self.client.create_run(experiment_id, run_name=run_name,
                                         tags={"privfl.run_id": run_id})
            self.run_id = run.info.run_id
            params = list(_flat("", params))
            for start in range(0, len(params), 100):
                self.client.log_batch(self.run_id, params=[
                    Param(k, v) for k, v in params[start:start + 100]])

    def log(self, metrics: Mapping[str, Any]) -> None:
        """One round's metrics (step = round)."""
        from mlflow.entities import Metric

        step = int(metrics["round"])
        shown = (metrics if self.covered is None else
                 {k: v for k, v in metrics.items() if k in self.covered or k == "round"})
        values = [Metric(tag, value, 0, step) for tag, value in scalars(shown).items()]
        if values:
            self.client.log_batch(self.run_id, metrics=values)

    def finish(self, results: Iterable[Any], run_dir: Path) -> None:
        """The labelled privacy results as tags and the run directory as artifacts."""
        for n, result in enumerate(results):
            r = result.to_dict() if hasattr(result, "to_dict") else dict(result)
            self.client.set_tag(self.run_id, f"privacy.{n}", (
                f"{r['method']} {r['kind']}: epsilon = "
                f"{format_bound(r['epsilon'], kind=r['kind'])} at delta = "
                f"{format_bound(r['delta'], kind=r['kind'])}, {r['unit']} level, "
                f"{r['neighbouring']}, {r['sampling']}, "
                f"release: {r['release']}"))
        self.client.log_artifacts(self.run_id, str(run_dir))

    def close(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.run_id, status=status)
