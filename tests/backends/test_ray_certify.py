"""Monte Carlo certification on a local Ray instance (127.0.0.1, 2 workers) against the local
backend: identical predictions, probabilities, certified accuracy, attack bounds and privacy
report; a worker killed during the replicas' training; `privfl certify --backend ray`.

Marked ``ray`` (`make test-ray`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from privfl.cli.main import app
from privfl.config import config_from_dict
from privfl.robustness import montecarlo
from privfl.robustness.pipeline import run_certification

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray")

PRIVFL = os.path.join(os.path.dirname(sys.executable), "privfl")
#: MNIST 0 vs 1, 12 clients of 20 records, user-level DP-FedAvg with 10 clients a round: with
#: M = 8 replicas an engine call has 80 rows, cut into shards of 64 and 16 rows (the batched
#: layout's chunk for this model, montecarlo.replica_chunk, is 64: every shard is made of
#: whole chunks)
TINY = {
    "name": "certify-ray", "seed": 2,
    "data": {"dataset": "mnist-5k", "classes": [0, 1], "partition": "iid", "clients": 12,
             "train_size": 20, "test_size": 5},
    "model": {"name": "logreg"},
    "training": {"local_steps": 2, "batch_size": 10, "optimizer": "sgd", "lr": 0.2},
    "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-3,
                "accountants": ["rdp"]},
    "federated": {"algorithm": "dp-fedavg", "rounds": 2, "client_sampling": "fixed-size",
                  "cohort_size": 10},
    "run": {"threads": 1},
}
MODELS = 8
_TRAIN = montecarlo.train_replicas


@pytest.fixture(scope="module")
def backend():
    from privfl.backends.ray_backend import RayBackend

    with RayBackend(workers=2) as b:
        yield b


def _certify(monkeypatch, backend=None):
    """The certification (backdoor, 1 attacker) and every ReplicaResult it trained."""
    trained = []

    def recording(*args, **kwargs):
        trained.append(_TRAIN(*args, **kwargs))
        return trained[-1]

    monkeypatch.setattr(montecarlo, "train_replicas", recording)
    result = run_certification(config_from_dict(TINY), MODELS, attack="backdoor", attackers=1,
                               backend=backend)
    return result, trained


def _same_replicas(a, b) -> None:
    assert np.array_equal(a.seeds, b.seeds)
    assert a.predictions.keys() == b.predictions.keys() and "test" in a.predictions
    for name in a.predictions:
        assert np.array_equal(a.predictions[name], b.predictions[name]), name
        assert np.array_equal(a.probabilities[name], b.probabilities[name]), name
        assert np.array_equal(a.labels[name], b.labels[name]), name
    assert a.privacy.to_dict() == b.privacy.to_dict()


def test_certification_on_ray_equals_the_local_one(monkeypatch, backend):
    local, want = _certify(monkeypatch)
    before = len(backend.records)
    pids = []
    backend.on_submit = lambda actors: pids.append(backend.worker_pids())
    try:
        remote, got = _certify(monkeypatch, backend)
    finally:
        backend.on_submit = None
    # the attacked models' data were loaded into the same worker processes (no restart)
    assert len(pids) == 4 and all(p == pids[0] for p in pids) and len(set(pids[0])) == 2
    assert len(got) == len(want) == 2  # the clean models and k = 1 attacker
    for a, b in zip(want, got, strict=True):
        assert set(a.predictions) == {"test", "attack"}
        _same_replicas(a, b)
    a, b = local.to_dict(), remote.to_dict()
    assert a.pop("backend") == "local" and b.pop("backend").startswith("ray (2 worker(s)")
    a.pop("seconds"), b.pop("seconds")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert a["privacy"]["certification_epsilon"] == pytest.approx(
        MODELS * a["privacy"]["epsilon"])
    # every engine call (2 rounds x 2 trainings) went to both workers: 64 + 16 rows
    records = backend.records[before:]
    assert [(r.rows, r.shards) for r in records] == [(MODELS * 10, 2)] * 4
    assert all(len(r.compute_seconds) == 2 for r in records)


def test_worker_killed_during_the_replicas_training_is_replaced(backend):
    """SIGKILL worker 0 right after the second engine call's shards are submitted: its shard
    is trained again by a replacement and the replicas equal the local ones."""
    cfg = config_from_dict({**TINY, "federated": {**TINY["federated"], "rounds": 3}})
    options = {"layout": "batched", "keep_weights": True}
    want = montecarlo.train_replicas(cfg, MODELS, **options)
    calls, seen = [], {}

    def kill_in_call_2(actors):
        calls.append(len(calls) + 1)
        if len(calls) == 1:
            seen["pids"] = backend.worker_pids()
        elif len(calls) == 2:
            os.kill(seen["pids"][0], signal.SIGKILL)

    replaced = backend.replaced
    backend.on_submit = kill_in_call_2
    try:
        got = montecarlo.train_replicas(cfg, MODELS, backend=backend, **options)
    finally:
        backend.on_submit = None
    assert len(calls) == 3 and backend.replaced == replaced + 1
    assert backend.worker_pids()[0] != seen["pids"][0]
    _same_replicas(want, got)
    assert np.array_equal(want.weights.numpy(), got.weights.numpy())


def test_cli_certify_on_ray(tmp_path):
    """`privfl certify --backend ray --workers 2` (its own local Ray instance) writes the
    certification of the local command."""
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({**TINY, "federated": {**TINY["federated"], "rounds": 1}}))

    args = ["certify", str(path), "--models", str(MODELS), "--out"]
    remote = subprocess.run([PRIVFL, *args, str(tmp_path / "ray"), "--backend", "ray",
                             "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert remote.returncode == 0, remote.stderr[-2000:]
    assert "backend: ray (2 worker(s)" in remote.stderr
    local = CliRunner().invoke(app, [*args, str(tmp_path / "local")])
    assert local.exit_code == 0, local.output
    got, want = (json.loads((tmp_path / d / "certify.json").read_text())
                 for d in ("ray", "local"))
    for data, name in ((want, "local"), (got, "ray")):
        data.pop("seconds")
        assert data.pop("replicas") == str(tmp_path / name / "replicas")
    assert want.pop("backend") == "local" and got.pop("backend").startswith("ray")
    assert want == got
