"""MLflow tracking (run.mlflow): a run read back through MLflow's own client - parameters,
every round's metrics equal to metrics.jsonl, the labelled privacy results, the run directory
as artifacts - its classification in privacy.json, guarantee-only runs logging covered keys
only, and a resumed run continuing the same MLflow run. Marker ``mlflow`` (``make
test-flower``, whose venv has the ``mlflow`` extra)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backends"))

from _backend_helpers import DP_FEDAVG, config  # noqa: E402

pytestmark = pytest.mark.mlflow
mlflow = pytest.importorskip("mlflow")

from privfl.runs.experiment import Experiment  # noqa: E402
from privfl.runs.rounding import format_bound  # noqa: E402


def _client(tmp_path):
    import os

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.x: file store opt-in
    return mlflow.MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())


def _only_run(client, name):
    experiment = client.get_experiment_by_name(name)
    (run,) = client.search_runs([experiment.experiment_id])
    return run


def test_run_is_read_back_through_mlflows_client(tmp_path):
    cfg = config(DP_FEDAVG, run={"mlflow": True})
    experiment = Experiment.create(cfg, tmp_path / "run")
    experiment.run()
    client = _client(tmp_path)
    run = _only_run(client, cfg.name)
    assert run.info.status == "FINISHED"
    assert run.data.tags["privfl.run_id"] == experiment.dir.run_id()
    assert run.data.params["training.lr"] == "0.1"
    assert run.data.params["privacy.noise_multiplier"] == "0.8"
    rows = [json.loads(line) for line in
            (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    history = client.get_metric_history(run.info.run_id, "cohort_size")
    assert [(m.step, m.value) for m in history] == [(r["round"], r["cohort_size"])
                                                    for r in rows]
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    rdp = next(r for r in privacy["results"] if r["method"] == "rdp")
    tag = run.data.tags["privacy.0"]
    assert tag.startswith(f"rdp bound: epsilon = {format_bound(rdp['epsilon'])} at delta = 0.001, "
                          "client level")
    epsilon = client.get_metric_history(run.info.run_id, "privacy/rdp-bound/epsilon")
    assert [m.value for m in epsilon] == [
        next(p["epsilon"] for p in r["privacy"] if p["method"] == "rdp") for r in rows]
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"privacy.json", "metrics.jsonl", "config.yaml", "report.md"} <= artifacts
    store = next(o for o in privacy["outputs"] if o["name"] == "mlflow (run.mlflow store)")
    assert store["covered"] is False and "checkpoints" in store["reason"]


def test_guarantee_only_logs_covered_keys_and_resume_continues_the_run(tmp_path):
    cfg = config(DP_FEDAVG, privacy={"secure": True},
                 run={"mlflow": True, "outputs": "guarantee-only", "max_rounds": 2})
    first = Experiment.create(cfg, tmp_path / "run")
    first.run()
    covered = first.covered_metrics()
    client = _client(tmp_path)
    run = _only_run(client, cfg.name)
    logged = set(run.data.metrics)
    assert logged and all(name.split("/")[0] in covered for name in logged)
    assert "loss" not in logged and "train_loss" not in logged
    resumed = Experiment.resume(tmp_path / "run", ["run.max_rounds=null"])
    resumed.run()
    again = _only_run(client, cfg.name)  # still one MLflow run
    assert again.info.run_id == run.info.run_id and again.info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "cohort_size")]
    assert steps == [1, 2, 3] or "cohort_size" not in covered
    privacy = json.loads((tmp_path / "run" / "privacy.json").read_text())
    store = next(o for o in privacy["outputs"] if o["name"] == "mlflow (run.mlflow store)")
    assert store["covered"] is True
