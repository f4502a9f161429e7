"""Secure mode takes every sampling decision from os.urandom, for every algorithm.

Two secure runs differing proves only that *some* randomness is secret (the secure noise alone
does that). Here the secure source (:mod:`privfl.mechanisms.secure` and the secure normals of
:mod:`privfl.mechanisms.noise`) is spied on: a secure round must leave every seeded generator
exactly as seeded (so no cohort, batch, order, stop or noise draw fell back to the seed), and the
spy must have been asked for exactly the round's draws: one uniform per client for the cohort,
one per record per local step for the batches, one for projected SGD's random stop, the user
order when the algorithm is built, and the noise.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import privfl.mechanisms.noise as noise_module
import privfl.mechanisms.secure as secure_module
from privfl.algorithms.algorithm_support import seeded_generators
from privfl.config import config_from_dict
from privfl.fl.random_streams import noise_streams
from privfl.runs.experiment import build_algorithm

_RUN = {"threads": 1}
_SYNTHETIC = {"dataset": "synthetic", "synthetic_examples": 240, "test_fraction": 0.25,
              "partition": "iid", "clients": 4, "test_size": 12}
_MLP = {"name": "mlp", "kwargs": {"hidden": [6]}}

#: One tiny secure configuration per algorithm (and two schedules of projected SGD).
CONFIGS = {
    "prifedsync": {
        "data": _SYNTHETIC, "model": _MLP,
        "training": {"local_steps": 2, "batch_size": 8, "lr": 0.01},
        "privacy": {"sigma": 1.0, "delta": 1e-5, "accountants": ["gdp-clt"]},
        "federated": {"rounds": 3, "client_rate": 0.7}},
    "dp-fedavg": {
        "data": {**_SYNTHETIC, "synthetic_examples": 480, "clients": 12, "test_size": 10},
        "model": {"name": "logreg"},
        "training": {"local_steps": 2, "batch_size": 6, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"noise_multiplier": 0.8, "clip_norm": 0.5, "delta": 1e-3,
                    "accountants": ["rdp"]},
        "federated": {"algorithm": "dp-fedavg", "rounds": 3, "client_rate": 0.5}},
    "insdp-fedavg": {
        "data": _SYNTHETIC, "model": _MLP,
        "training": {"local_steps": 2, "batch_size": 8, "sampling": "poisson",
                     "optimizer": "momentum", "lr": 0.05},
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": ["rdp"]},
        "federated": {"algorithm": "insdp-fedavg", "rounds": 3}},
    "insdp-fedsgd": {
        "data": _SYNTHETIC, "model": _MLP,
        "training": {"local_steps": 1, "batch_size": 8, "sampling": "poisson",
                     "optimizer": "sgd", "lr": 0.05},
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": ["rdp"]},
        "federated": {"algorithm": "insdp-fedsgd", "rounds": 3, "clients_per_round": 2,
                      "client_sampling": "uniform"}},
    "dp-dsgd": {
        "data": {**_SYNTHETIC, "synthetic_examples": 300, "test_fraction": 0.2, "clients": 6,
                 "train_size": 40, "test_size": 10},
        "model": _MLP,
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5, "accountants": ["wcs"]},
        "federated": {"algorithm": "dp-dsgd", "rounds": 3, "client_rate": 0.5,
                      "record_rate": 0.2, "composition": ["rdp"]}},
    "projected-sgd": {  # one pass: the secret order at build, a random stop every round
        "data": {"dataset": "digits", "partition": "iid", "clients": 40, "train_size": 2,
                 "test_size": 0},
        "model": {"name": "logreg"},
        "privacy": {"noise_multiplier": 2.0, "clip_norm": 2.0, "delta": 1e-5},
        "federated": {"algorithm": "projected-sgd", "rounds": 4, "users_per_round": 8,
                      "radius": 0.3, "lr": 0.5, "input_bound": 1.0,
                      "release": "random-stop"}},
    "projected-sgd-independent": {  # a fresh uniform m-subset of users every round
        "data": {"dataset": "digits", "partition": "iid", "clients": 40, "train_size": 2,
                 "test_size": 0},
        "model": {"name": "logreg"},
        "privacy": {"noise_multiplier": 2.0, "clip_norm": 2.0, "delta": 1e-5},
        "federated": {"algorithm": "projected-sgd", "rounds": 4, "users_per_round": 8,
                      "radius": 0.3, "lr": 0.5, "input_bound": 1.0,
                      "schedule": "independent"}},
    "dp-ftrl": {  # no sampling: the cohort is the round's group, only the noise is secret
        "data": {**_SYNTHETIC, "clients": 6, "test_size": 5}, "model": {"name": "logreg"},
        "training": {"local_steps": 2, "batch_size": 6, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
        "federated": {"algorithm": "dp-ftrl", "rounds": 3, "min_separation": 3}},
    "bandmf-fedavg": {  # cyclic Poisson sampling within 2 groups: one uniform per member
        "data": {**_SYNTHETIC, "clients": 6, "test_size": 5}, "model": {"name": "logreg"},
        "training": {"local_steps": 2, "batch_size": 6, "optimizer": "sgd", "lr": 0.1},
        "privacy": {"noise_multiplier": 1.0, "delta": 1e-5},
        "federated": {"algorithm": "bandmf-fedavg", "rounds": 3, "band": 2,
                      "sampling_rate": 0.7}},
}

#: every algorithm the project ships must be covered here
ALGORITHMS = ("prifedsync", "dp-fedavg", "insdp-fedsgd", "insdp-fedavg", "dp-dsgd",
              "projected-sgd", "dp-ftrl", "bandmf-fedavg")


def _config(name: str):
    raw = {"name": name, "seed": 3, "run": _RUN, **copy.deepcopy(CONFIGS[name])}
    raw["privacy"]["secure"] = True
    return config_from_dict(raw)


class SecureSpy:
    """Counts the draws from the secure source: uniforms, stream seeds, normals."""

    def __init__(self, monkeypatch) -> None:
        self.uniforms: list[int] = []
        self.seeds: list[int] = []
        self.normals = 0
        uniform, seeds, block = (secure_module.secure_uniform, secure_module.secure_seeds,
                                 noise_module._secure_block)

        def spy_uniform(count):
            self.uniforms.append(int(count))
            return uniform(count)

        def spy_seeds(count):
            self.seeds.append(int(count))
            return seeds(count)

        def spy_block(count):
            self.normals += int(count)
            return block(count)

        monkeypatch.setattr(secure_module, "secure_uniform", spy_uniform)
        monkeypatch.setattr(secure_module, "secure_seeds", spy_seeds)
        monkeypatch.setattr(noise_module, "_secure_block", spy_block)

    def clear(self) -> None:
        self.uniforms, self.seeds, self.normals = [], [], 0


def _generators(obj, path="algorithm", seen=None, out=None, depth=0):
    """Every numpy / torch generator reachable from ``obj`` (attributes, dicts, lists)."""
    seen = set() if seen is None else seen
    out = {} if out is None else out
    if id(obj) in seen or depth > 5:
        return out
    seen.add(id(obj))
    if isinstance(obj, (np.random.Generator, torch.Generator)):
        out[path] = obj
    elif isinstance(obj, dict):
        for key, value in obj.items():
            _generators(value, f"{path}[{key!r}]", seen, out, depth + 1)
    elif isinstance(obj, (list, tuple)):
        for k, value in enumerate(obj):
            _generators(value, f"{path}[{k}]", seen, out, depth + 1)
    elif hasattr(obj, "__dict__") and not isinstance(obj, (torch.Tensor, np.ndarray, type)):
        for key, value in vars(obj).items():
            _generators(value, f"{path}.{key}", seen, out, depth + 1)
    return out


def _state(generator):
    if isinstance(generator, np.random.Generator):
        return repr(generator.bit_generator.state)
    return generator.get_state().clone()


def _states(generators):
    return {path: _state(g) for path, g in generators.items()}


def _same(a, b) -> bool:
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def _global_states():
    return {"torch.default_generator": torch.default_generator.get_state().clone(),
            "numpy.random (legacy global)": repr(np.random.get_state())}


def test_every_shipped_algorithm_is_covered():
    from privfl.algorithms.registry import ALGORITHM_NAMES

    assert set(ALGORITHM_NAMES) == set(ALGORITHMS)
    assert {_config(name).federated.algorithm for name in CONFIGS} == set(ALGORITHMS)


def _clients(cohort) -> np.ndarray:
    """The sampled clients of any algorithm's cohort object."""
    if isinstance(cohort, tuple):  # PriFedSync: (clients, redraws)
        return cohort[0]
    return getattr(cohort, "participants", cohort)  # DP-DSGD: Cohort(participants, records)


def _expected_uniforms(name: str, algorithm, cohort, t: int) -> int:
    """The uniforms a secure round ``t`` must read: cohort keys, batch keys, stop draws."""
    f = algorithm.plan if name.startswith("projected") else None
    sizes = np.asarray(algorithm.data.client_sizes)
    if name in ("insdp-fedavg", "dp-ftrl"):  # every client (of the group): no cohort draw
        cohort_keys = 0
    elif name == "bandmf-fedavg":  # one key per member of the round's group
        cohort_keys = algorithm.plan.schedule.group(t - 1).size
    elif name.startswith("projected"):  # one pass: the order was drawn at build
        cohort_keys = f.users if f.schedule == "independent" else 0
    elif name == "prifedsync":  # an empty cohort is drawn again
        cohort_keys = algorithm.num_clients * (1 + cohort[1])
    else:
        cohort_keys = algorithm.num_clients
    cohort = _clients(cohort)
    if name == "dp-dsgd":  # one Poisson(q) key per record of every participant
        batch_keys = int(sizes[cohort].sum())
    elif name.startswith("projected"):  # full-batch user gradients; the stop from round 2
        batch_keys = int(f.release == "random-stop" and t >= 2)
    else:  # one key per record of every sampled client per local step
        batch_keys = algorithm.spec.local_steps * int(sizes[cohort].sum())
    return cohort_keys + batch_keys


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_secure_round_reads_only_the_secure_source(monkeypatch, name):
    config = _config(name)
    spy = SecureSpy(monkeypatch)
    algorithm = build_algorithm(config)
    generators = _generators(algorithm)
    assert {"algorithm.rng", "algorithm.generator"} <= set(generators)
    # built: the seeded generators are exactly as seeded (the secret user order came from
    # os.urandom: one uniform per user, one pass)
    rng, generator = seeded_generators(config.seed, config.run.device)
    assert _same(_state(algorithm.rng), _state(rng))
    assert _same(_state(algorithm.generator), _state(generator))
    one_pass = name == "projected-sgd"
    assert spy.uniforms == ([algorithm.plan.users] if one_pass else [])
    cohorts = []
    select = algorithm.select_cohort

    def spy_select():
        cohorts.append(select())
        return cohorts[-1]

    algorithm.select_cohort = spy_select
    for t in (1, 2):
        before, globals_before = _states(generators), _global_states()
        spy.clear()
        algorithm.run_round()
        after = _states(generators)
        moved = [p for p in before if not _same(before[p], after[p])]
        assert moved == [], f"{name}: a secure round {t} moved the seeded generators {moved}"
        moved = [p for p, s in _global_states().items() if not _same(globals_before[p], s)]
        assert moved == [], f"{name}: a secure round {t} moved {moved}"
        assert sum(spy.uniforms) == _expected_uniforms(name, algorithm, cohorts[-1], t)
        cohort = _clients(cohorts[-1])
        if name.startswith(("prifedsync", "dp-fedavg", "insdp", "dp-ftrl", "bandmf")):
            streams = 2 + noise_streams(config.run.device)
            assert spy.seeds == ([cohort.size * streams] if cohort.size else [])
        else:
            assert spy.seeds == []
        assert spy.normals > 0  # the noise came from the secure source too


@pytest.mark.parametrize("name", ["dp-fedavg", "projected-sgd-independent", "dp-dsgd"])
def test_a_seeded_round_moves_the_seeded_generator(name):
    """The check above can fail: the same round without secure mode draws its cohort from the
    seeded numpy generator."""
    raw = {"name": name, "seed": 3, "run": _RUN, **copy.deepcopy(CONFIGS[name])}
    algorithm = build_algorithm(config_from_dict(raw))
    before = _state(algorithm.rng)
    algorithm.run_round()
    assert not _same(before, _state(algorithm.rng))


def test_secure_client_protection_reads_only_the_secure_source(monkeypatch):
    """DP-FedAvg with a secure client-side protection (Zhang, Chen and Yang 2022: record
    sampling, a random mask, Gaussian distortion): the protection's draws leave the seeded
    generators untouched too."""
    from privfl.algorithms.dp_fedavg import DpFedAvg
    from privfl.distortion import (
        ClientProtection,
        GaussianDistortion,
        PoissonRecordSampling,
        RandomMask,
    )

    config = _config("dp-fedavg")
    base = build_algorithm(config)
    protection = ClientProtection(sampling=PoissonRecordSampling(0.9, secure=True),
                                  distortions=(RandomMask(0.9, secure=True),
                                               GaussianDistortion(1e-4, secure=True)))
    algorithm = DpFedAvg(base.predictor.model, base.spec, base.data, base.plan,
                         protection=protection, seed=config.seed)
    spy = SecureSpy(monkeypatch)
    generators = _generators(algorithm)
    cohorts = []
    select = algorithm.select_cohort
    algorithm.select_cohort = lambda: cohorts.append(select()) or cohorts[-1]
    before = _states(generators)
    algorithm.run_round()
    after = _states(generators)
    assert [p for p in before if not _same(before[p], after[p])] == []
    m, d = cohorts[0].size, algorithm.global_model.numel()
    sizes = np.asarray(algorithm.data.client_sizes)[cohorts[0]]
    # cohort keys, one key per record (record sampling), one per coordinate of every model (mask)
    assert sum(spy.uniforms) >= algorithm.num_clients + int(sizes.sum()) + m * d
    assert spy.normals >= m * d + d  # the distortion of every model and the server's noise
