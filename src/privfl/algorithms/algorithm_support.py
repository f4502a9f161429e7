"""Pieces every algorithm on the seam shares: client tensors, evaluation, seeds, checkpoints.

* :class:`ClientTensors` — every client's train and test tensors on one device (built once), and
  a model's per-client test accuracy (one pass over the concatenated test sets).
* :class:`FlatPredictor` — predicted labels of a flat parameter row ``[d]`` of one architecture.
* :func:`seeded_generators` — the numpy generator (cohorts) and torch generator (training) of a
  run, spawned from one seed.
* :func:`data_fingerprint`, :func:`jsonable_state` — what a checkpoint needs to refuse a
  different partition and to store numpy generator states loadable with ``weights_only``;
  :func:`checkpoint_streams` writes both generators and the fingerprint, :func:`check_partition`
  refuses a checkpoint of another partition (call it before restoring anything),
  :func:`restore_streams` restores the generators.

Accuracies are computed from the clients' data without noise: monitoring values for the
experimenter, not covered by any guarantee.
"""

from __future__ import annotations

import copy
import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from privfl._validation import check_int
from privfl.data.datasets import FederatedDataset
from privfl.fl.pool import PooledClients

__all__ = ["ClientTensors", "FlatPredictor", "as_tensor", "check_model_and_data", "check_partition",
           "checkpoint_optimizer_state", "checkpoint_streams", "checkpoint_tensor",
           "data_fingerprint", "flat_model", "jsonable_state", "restore_streams",
           "seeded_generators"]


def check_model_and_data(model: Any, data: Any) -> None:
    """ValueError unless ``model`` is a torch Module and ``data`` a FederatedDataset."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model = {type(model).__name__} is not allowed: must be a Module")
    if not isinstance(data, FederatedDataset):
        raise ValueError(f"data = {type(data).__name__} is not allowed: must be a "
                         "FederatedDataset")


def as_tensor(array: np.ndarray, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A contiguous copy of ``array`` as a tensor of ``dtype`` on ``device``."""
    return torch.as_tensor(np.ascontiguousarray(array)).to(device=device, dtype=dtype)


def flat_model(trainer: Any, params: Any, device: torch.device) -> torch.Tensor:
    """A new flat ``[d]`` row on ``device`` of ``params`` (``name -> tensor``, e.g. a model's
    trainable parameters) in the order of ``trainer`` (a :class:`~privfl.fl.CohortTrainer`)."""
    stacked = {n: params[n].detach().unsqueeze(0) for n in trainer.param_names}
    return trainer.flatten(stacked).to(device)[0].clone()


def data_fingerprint(data: FederatedDataset) -> str:
    """SHA-256 of the partition (client train/test indices): a resume must match it."""
    digest = hashlib.sha256()
    for part in (*data.train_indices, *data.test_indices):
        digest.update(np.asarray(part, dtype=np.int64).tobytes())
        digest.update(b"|")
    return digest.hexdigest()


def jsonable_state(state: Any) -> Any:
    """A numpy bit-generator state as plain Python values (loadable with weights_only)."""
    if isinstance(state, dict):
        return {k: jsonable_state(v) for k, v in state.items()}
    if isinstance(state, np.ndarray):
        return state.tolist()
    if isinstance(state, np.integer):
        return int(state)
    return state


def seeded_generators(seed: int, device: torch.device | str = "cpu"
                      ) -> tuple[np.random.Generator, torch.Generator]:
    """``(numpy generator, torch generator)`` spawned from ``SeedSequence(seed)``: the first
    draws cohorts, the second seeds the training's per-client streams."""
    seeds = np.random.SeedSequence(check_int("seed", seed, 0)).spawn(2)
    generator = torch.Generator(device=torch.device(device)).manual_seed(
        int(seeds[1].generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
    )
    return np.random.default_rng(seeds[0]), generator


def checkpoint_streams(data: FederatedDataset, rng: np.random.Generator,
                       generator: torch.Generator) -> dict[str, Any]:
    """The checkpoint entries every algorithm shares: ``numpy_rng`` (plain values),
    ``torch_generator`` and ``data_fingerprint`` (the partition a resume must match)."""
    return {
        "numpy_rng": jsonable_state(rng.bit_generator.state),
        "torch_generator": generator.get_state(),
        "data_fingerprint": data_fingerprint(data),
    }


def check_partition(state: dict[str, Any], data: FederatedDataset) -> None:
    """ValueError unless ``state["data_fingerprint"]`` is the fingerprint of ``data``."""
    if state.get("data_fingerprint") != data_fingerprint(data):
        raise ValueError("checkpoint data_fingerprint does not match this run's client "
                         "partition: resume needs the same data settings and seed")


def checkpoint_tensor(state: dict[str, Any], key: str, current: torch.Tensor,
                      what: str = "a different model") -> torch.Tensor:
    """``state[key]`` as a copy on ``current``'s device and dtype; ValueError (naming ``what``
    differs) unless it has ``current``'s shape."""
    saved = state[key]
    if tuple(saved.shape) != tuple(current.shape):
        raise ValueError(f"checkpoint {key} has shape {tuple(saved.shape)}: this run has "
                         f"{tuple(current.shape)} ({what})")
    return saved.to(current.device, current.dtype).clone()


def checkpoint_optimizer_state(state: dict[str, Any], optimizer: Any, rows: int,
                               num_params: int, device: torch.device) -> dict[str, torch.Tensor]:
    """``state["optimizer_state"]`` checked against the stacked optimizer's layout (``rows``
    clients of ``num_params`` parameters) and copied to ``device`` (float64 step counts of older
    checkpoints become float32, :meth:`~privfl.fl.optim.StackedOptimizer.conform_state`)."""
    saved = state["optimizer_state"]
    optimizer.check_state(saved, rows, num_params, name="checkpoint optimizer")
    return optimizer.conform_state(saved, device)


def restore_streams(state: dict[str, Any], rng: np.random.Generator,
                    generator: torch.Generator) -> None:
    """Restore both generators from :func:`checkpoint_streams` entries of ``state``."""
    rng.bit_generator.state = state["numpy_rng"]
    generator.set_state(state["torch_generator"])


class FlatPredictor:
    """Labels predicted by the model with flat parameters ``[d]`` (eval mode, batched)."""

    def __init__(self, model: nn.Module, unflatten: Callable[[torch.Tensor], dict],
                 device: torch.device, eval_batch_size: int = 1000) -> None:
        self.model = copy.deepcopy(model).to(device).eval()
        self.unflatten = unflatten
        self.eval_batch_size = check_int("eval_batch_size", eval_batch_size, 1)

    def params(self, flat_row: torch.Tensor) -> dict[str, torch.Tensor]:
        """``name -> tensor`` views of one flat row."""
        return {n: v[0] for n, v in self.unflatten(flat_row.unsqueeze(0)).items()}

    @torch.no_grad()
    def __call__(self, flat_row: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        params = self.params(flat_row)
        out = [
            functional_call(self.model, params, (x[lo: lo + self.eval_batch_size],)).argmax(-1)
            for lo in range(0, x.shape[0], self.eval_batch_size)
        ]
        return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64, device=x.device)


class ClientTensors:
    """Every client's ``(x, y)`` train and test pairs on ``device``: sequences over one pool
    per split (:class:`~privfl.fl.pool.PooledClients`), built once."""

    def __init__(self, data: FederatedDataset, dtype: torch.dtype, device: torch.device) -> None:
        self.num_clients = data.num_clients
        # one pool per split, clients as index ranges (no per-client tensors: populations of
        # 100,000 clients; a client's pair is gathered when asked)
        self.train = PooledClients(data.train.x, data.train.y, data.train_indices, dtype, device)
        self.test = PooledClients(data.test.x, data.test.y, data.test_indices, dtype, device)
        self.test_sizes = np.diff(self.test.offsets)
        self.test_owner = torch.as_tensor(np.repeat(np.arange(self.num_clients),
                                                    self.test_sizes), device=device)
        if self.test_sizes.sum():
            self.test_x = self.test.x[self.test.index]
            self.test_y = self.test.y[self.test.index]
        else:
            self.test_x = self.test_y = None

    @property
    def has_test(self) -> np.ndarray:
        """Which clients have a test set."""
        return self.test_sizes > 0

    def client_accuracy(self, predict: Callable[[torch.Tensor], torch.Tensor],
                        client: int) -> float:
        """Accuracy of ``predict`` (x -> labels) on one client's test set (NaN if none)."""
        x, y = self.test[client]
        if y.numel() == 0:
            return math.nan
        return float((predict(x) == y).to(torch.float64).mean())

    def accuracies(self, predict: Callable[[torch.Tensor], torch.Tensor]) -> np.ndarray:
        """Per-client accuracy of one model (``predict``: x -> labels) on every test set (NaN
        for clients without one)."""
        result = np.full(self.num_clients, math.nan)
        if self.test_x is None:
            return result
        correct = (predict(self.test_x) == self.test_y).to(torch.float64)
        hits = torch.zeros(self.num_clients, dtype=torch.float64, device=correct.device)
        hits.index_add_(0, self.test_owner, correct)
        has = self.has_test
        result[has] = hits.cpu().numpy()[has] / self.test_sizes[has]
        return result

    def mean_accuracy(self, per_client: np.ndarray) -> float:
        """Mean over the clients that have a test set (NaN if none has)."""
        has = self.has_test
        return float(np.nanmean(per_client[has])) if has.any() else math.nan
