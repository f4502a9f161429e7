"""The MLflow store (run.mlflow) is classified like every other output: outside the guarantee
when it gets every metrics key and the checkpoints (run.outputs: all), covered only with
guarantee-only and secure noise; absent when MLflow is off. No mlflow package needed."""

from __future__ import annotations

from privfl.algorithms.outputs import Output, file_outputs

STORE = "mlflow (run.mlflow store)"


def _store(**kwargs):
    metrics = [Output("global_accuracy", "metric", True, "evaluated on public test data"),
               Output("train_loss", "metric", False, "unnoised training loss")]
    settings = {"accuracy_keys": ["global_accuracy"], "private_name": "run.private",
                "checkpoints": True, "tensorboard": False, "model_file": True}
    files = file_outputs(metrics=metrics, **{**settings, **kwargs})
    return [f for f in files if f.name == STORE]


def test_store_with_all_outputs_is_outside_the_guarantee():
    (store,) = _store(secure=True, guarantee_only=False, mlflow=True)
    assert store.covered is False
    assert "checkpoints" in store.reason and "covered or not" in store.reason


def test_store_with_guarantee_only_is_covered_only_when_secure():
    (secure,) = _store(secure=True, guarantee_only=True, mlflow=True)
    assert secure.covered is True and "run.private" in secure.reason
    (seeded,) = _store(secure=False, guarantee_only=True, mlflow=True)
    assert seeded.covered is False and "seed" in seeded.reason


def test_no_store_without_mlflow():
    assert _store(secure=True, guarantee_only=False, mlflow=False) == []
