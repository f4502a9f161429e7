"""`privfl reproduce xie2023`'s certification replicas on Ray: with Ray installed they train on
Ray workers (:func:`privfl.reproduce.xie2023_certification.replica_backend`), and the models are
those of the local backend, bit for bit (issue 46, item 7: "use Ray for the replicas where it is
installed"). Marked ``ray`` (`make test-ray`)."""

from __future__ import annotations

import numpy as np
import pytest

from privfl.reproduce.xie2023_certification import (
    USER_DELTA,
    replica_backend,
    train_sweep,
    user_config,
)

pytestmark = pytest.mark.ray
pytest.importorskip("ray")

#: two points of Table 4's sigma grid; M = 6 replicas each (the reproduction trains 100)
SIGMAS, MODELS = (1.0, 3.0), 6


def _sweep(backend):
    return train_sweep([user_config(z) for z in SIGMAS], [1.8504, 0.2808],
                       [f"sigma = {z:g}" for z in SIGMAS], MODELS, USER_DELTA, "user", backend)


def test_the_reproductions_replicas_train_on_ray_as_they_do_locally():
    backend = replica_backend()
    try:
        assert type(backend).__name__ == "RayBackend"
        on_ray = _sweep(backend)
    finally:
        backend.close()
    local = _sweep(None)
    assert np.array_equal(on_ray.truth, local.truth)
    for remote, here in zip(on_ray.probabilities, local.probabilities, strict=True):
        assert remote.shape == (MODELS, local.truth.size, 2)
        assert np.array_equal(remote, here)
    # the replicas differ from one another (each its own noise), so equality is not vacuous
    assert not np.array_equal(local.probabilities[0][0], local.probabilities[0][1])
