"""FlowerBackend against the local backend with an in-process grid (no Flower runtime): the
same rows bit for bit; silent or failing nodes asked again; malformed and out-of-range replies
refused before the round is aggregated (nothing released, nothing accounted)."""

from __future__ import annotations

import json

import pytest
import torch
from _backend_helpers import (
    DP_FEDAVG,
    INSDP,
    INSDP_SGD,
    PRIFEDSYNC,
    assert_same,
    config,
    outcome,
    run,
)
from _grid import LocalGrid, Reply

pytest.importorskip("flwr")

from privfl.backends import use_backend  # noqa: E402
from privfl.config import dump_config  # noqa: E402
from privfl.flower.backend import FlowerBackend  # noqa: E402
from privfl.flower.wire import RESULT, ReplyError, config_digest  # noqa: E402
from privfl.runs.experiment import Experiment  # noqa: E402


def _backend(cfg, grid, **kwargs):
    return FlowerBackend(grid, config_digest(dump_config(cfg)), cfg.data.clients, **kwargs)


@pytest.mark.parametrize("raw", [DP_FEDAVG, INSDP, INSDP_SGD, PRIFEDSYNC],
                         ids=lambda r: r["name"])
def test_flower_backend_equals_local(tmp_path, raw):
    from privfl.flower.apps import FLOWER_ALGORITHMS

    assert raw["federated"].get("algorithm", "prifedsync") in FLOWER_ALGORITHMS
    """Every client's work as a message to its own node (seeds drawn on the server): models,
    optimizer and generator states, metrics and privacy.json equal the local run's."""
    cfg = config(raw)
    local = run(cfg, tmp_path / "local")
    grid = LocalGrid(cfg)
    backend = _backend(cfg, grid)
    remote = run(cfg, tmp_path / "flower", backend)
    assert_same(outcome(local), outcome(remote))
    assert grid.sent == sum(m["cohort_size"] for m in remote.metrics) > 0
    assert backend.nodes == {j: 1000 + j for j in range(cfg.data.clients)}


def test_dropped_reply_is_asked_again_with_the_same_result(tmp_path):
    cfg = config(DP_FEDAVG)
    want = outcome(run(cfg, tmp_path / "local"))
    dropped = set()

    def drop_first(node, number, reply):  # every node's first reply of call 2 is lost
        if number == 2 and (node, number) not in dropped:
            dropped.add((node, number))
            return None
        return reply

    backend = _backend(cfg, LocalGrid(cfg, drop_first))
    got = outcome(run(cfg, tmp_path / "flower", backend))
    assert_same(want, got)
    assert backend.retried == len(dropped) == 1


def _stopped_run(tmp_path, cfg, tamper, **kwargs):
    """Run until the tampered round fails; the experiment and the error."""
    experiment = Experiment.create(cfg, tmp_path / "flower")
    with pytest.raises(ReplyError) as error, use_backend(
            _backend(cfg, LocalGrid(cfg, tamper), **kwargs)):
        experiment.run()
    return experiment, str(error.value)


#: work messages of rounds 1-2 (set from the local run's cohort sizes): later ones are round 3+
FIRST_TWO_ROUNDS = [0]


def _in_round_3(number):
    return number > FIRST_TWO_ROUNDS[0]


def _nan_model(node, number, reply):
    if _in_round_3(number):
        flat = reply.content[RESULT]["flat"].numpy().copy()
        flat[0, 0] = float("nan")
        from flwr.app import Array

        reply.content[RESULT]["flat"] = Array(flat)
    return reply


def _wrong_shape(node, number, reply):
    if _in_round_3(number):
        from flwr.app import Array

        reply.content[RESULT]["flat"] = Array(reply.content[RESULT]["flat"].numpy()[:, :-1])
    return reply


def _stale(node, number, reply):
    if _in_round_3(number):
        reply.content["privfl.reply"]["call"] = number - 1
    return reply


def _missing(node, number, reply):
    if _in_round_3(number):
        del reply.content[RESULT]
    return reply


def _silent(node, number, reply):
    return None if _in_round_3(number) else reply


def _error(node, number, reply):
    class Failure:
        code, reason = 1, "ClientApp raised ValueError"
    return Reply(node, failure=Failure()) if _in_round_3(number) else reply


@pytest.mark.parametrize("tamper, words", [
    (_nan_model, "non-finite model"), (_wrong_shape, "shape"), (_stale, "stale"),
    (_missing, "malformed"), (_silent, "did not answer 3 time(s)"),
    (_error, "failed: ClientApp raised ValueError 3 time(s)")],
    ids=lambda v: getattr(v, "__name__", ""))
def test_bad_reply_fails_closed(tmp_path, tamper, words):
    """A malformed, out-of-range, stale or missing reply stops the run before round 3 is
    aggregated: metrics, checkpoints and privacy.json hold rounds 1-2 only; resuming on a
    healthy federation gives the undisturbed run."""
    cfg = config(DP_FEDAVG, federated={"rounds": 4})
    want = outcome(run(cfg, tmp_path / "local"))
    FIRST_TWO_ROUNDS[0] = sum(m["cohort_size"] for m in want["metrics"][:2])
    experiment, message = _stopped_run(tmp_path, cfg, tamper)
    assert words in message
    assert experiment.algorithm.round == 2
    rows = [json.loads(line) for line in
            (tmp_path / "flower" / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2]
    resumed = Experiment.resume(tmp_path / "flower")
    with use_backend(_backend(cfg, LocalGrid(cfg))):
        resumed.run()
    got = outcome(resumed)
    assert json.dumps(got["metrics"][2:], default=str) == json.dumps(want["metrics"][2:],
                                                                    default=str)
    assert got["privacy"] == want["privacy"]


def test_registration_refuses_a_node_with_another_configuration(tmp_path):
    cfg = config(DP_FEDAVG)
    other = config(DP_FEDAVG, training={"lr": 0.2})
    grid = LocalGrid(cfg)
    grid.nodes[1003] = LocalGrid(other).nodes[1003]
    experiment = Experiment.create(cfg, tmp_path / "flower")
    with pytest.raises(ValueError, match="node 1003 was built from another configuration"), \
            use_backend(_backend(cfg, grid)):
        experiment.run()


def test_registration_needs_one_node_per_client():
    cfg = config(DP_FEDAVG)
    grid = LocalGrid(cfg)
    del grid.nodes[1009]
    backend = _backend(cfg, grid, timeout=1.0)
    with pytest.raises(ValueError, match="has 9 node"):
        backend.run_shards(None, [None] * 10, torch.zeros(3), [], False, 0)


def test_every_flower_algorithm_is_compared():
    from privfl.algorithms.registry import algorithm_class, available
    from privfl.flower.apps import FLOWER_ALGORITHMS

    sharded = [name for name in available() if algorithm_class(name).local_only is None]
    compared = [raw["federated"].get("algorithm", "prifedsync")
                for raw in (DP_FEDAVG, INSDP, INSDP_SGD, PRIFEDSYNC)]
    assert sorted(compared) == sorted(FLOWER_ALGORITHMS) == sorted(sharded)


def test_budget_stop_before_a_round_as_locally(tmp_path):
    """stop.epsilon: the Flower run stops before the round that would exceed it, at the same
    round and with the same privacy report as the local run; no message of that round is
    sent."""
    cfg = config(DP_FEDAVG, federated={"rounds": 20}, stop={"epsilon": 8.0})  # rdp: 7.15 at 3
    local = run(cfg, tmp_path / "local")
    grid = LocalGrid(cfg)
    remote = run(cfg, tmp_path / "flower", _backend(cfg, grid))
    assert_same(outcome(local), outcome(remote))
    summary = json.loads((tmp_path / "flower" / "summary.json").read_text())
    assert summary["stop_reason"] == json.loads(
        (tmp_path / "local" / "summary.json").read_text())["stop_reason"]
    assert remote.algorithm.round == 3
    assert grid.sent == sum(m["cohort_size"] for m in remote.metrics)
