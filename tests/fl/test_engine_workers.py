"""Client workers (privfl.fl.workers): clients trained at once, each on one torch thread.

The result is bit-identical whatever the number of workers and torch's thread count (before
the workers, two intra-op threads changed the MNIST CNN's weights by ~3e-8); a model that draws
from torch's global RNG is trained serially; an error in one worker reaches the caller.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from _engine_helpers import TinyCNN, perturbed_params
from torch import nn

from privfl.fl import CohortTrainer, LocalTrainingSpec
from privfl.fl.workers import ClientWorkers, available_cores, single_thread
from privfl.models import build_model


def _data(m, n, shape, seed=0, classes=3):
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, *shape, generator=gen), torch.randint(0, classes, (n,), generator=gen))
            for _ in range(m)]


def _train(model, spec, data, *, workers, threads, start):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        trainer = CohortTrainer(model, spec, workers=workers)
        trainer.parallel_min_work = 0  # the tiny models too (default: only clients with work)
        return trainer.train(start, data, None, torch.Generator().manual_seed(5))
    finally:
        torch.set_num_threads(before)


def _same(a, b):
    (pa, sa, ta), (pb, sb, tb) = a, b
    assert all(torch.equal(pa[n], pb[n]) for n in pa)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert torch.equal(ta.loss, tb.loss)
    assert torch.equal(ta.mean_grad_norm.nan_to_num(7.0), tb.mean_grad_norm.nan_to_num(7.0))


@pytest.mark.parametrize("private", [False, True])
def test_the_mnist_cnn_is_bit_identical_for_any_workers_and_threads(private):
    """The case of the reliability issue: zheng2021-mnist-cnn, 1 vs 2 torch threads."""
    torch.manual_seed(0)
    model = build_model("zheng2021-mnist-cnn")
    spec = LocalTrainingSpec(local_steps=2, batch_size=8, optimizer="momentum", lr=0.05,
                             momentum=0.9, clip_norm=1.0 if private else None,
                             noise_multiplier=1.0 if private else 0.0)
    data = _data(3, 20, (1, 28, 28), classes=10)
    start = perturbed_params(model, 3)
    reference = _train(model, spec, data, workers=1, threads=1, start=start)
    assert reference[2].workers == 1
    for workers, threads in ((2, 1), (3, 2), (1, 2)):
        result = _train(model, spec, data, workers=workers, threads=threads, start=start)
        _same(reference, result)
        assert result[2].workers == min(workers, 3)


def test_dropout_masks_and_poisson_batches_do_not_depend_on_workers():
    model = TinyCNN(dropout=True)
    spec = LocalTrainingSpec(local_steps=3, batch_size=4, sampling="poisson", clip_norm=0.5,
                             noise_multiplier=1.3, optimizer="adam", lr=0.01)
    data = _data(5, 12, (1, 10, 10))
    start = perturbed_params(model, 5)
    serial = _train(model, spec, data, workers=1, threads=1, start=start)
    parallel = _train(model, spec, data, workers=4, threads=2, start=start)
    _same(serial, parallel)
    assert parallel[2].workers == 4
    assert torch.equal(serial[2].batch_sizes, parallel[2].batch_sizes)


class GlobalRngDropout(nn.Module):
    """Functional dropout: draws from torch's global RNG, which concurrent workers would share."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x):
        return F.log_softmax(self.fc(F.dropout(torch.flatten(x, -3), 0.5, self.training)), -1)


def test_a_model_using_the_global_rng_is_trained_serially_and_reproducibly():
    model = GlobalRngDropout()
    spec = LocalTrainingSpec(local_steps=2, batch_size=3, clip_norm=1.0, noise_multiplier=1.0)
    data = _data(4, 6, (1, 2, 2))
    start = perturbed_params(model, 4)
    a = _train(model, spec, data, workers=4, threads=2, start=start)
    b = _train(model, spec, data, workers=1, threads=1, start=start)
    assert a[2].workers == 1
    _same(a, b)


def test_an_error_in_a_worker_reaches_the_caller():
    def bad_loss(output, target):
        return output.sum()  # one number, not one loss per example

    spec = LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=None)
    trainer = CohortTrainer(TinyCNN(), spec, loss_fn=bad_loss, workers=2)
    trainer.parallel_min_work = 0
    with pytest.raises(ValueError, match="one loss per example"):
        trainer.train(perturbed_params(TinyCNN(), 3), _data(3, 4, (1, 10, 10)), None,
                      torch.Generator().manual_seed(0))


def test_tiny_clients_run_serially_by_default():
    """Below parallel_min_work a step is mostly Python overhead: one thread is faster."""
    spec = LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=None)
    trainer = CohortTrainer(TinyCNN(), spec, workers=2)
    assert spec.local_steps * spec.batch_size * trainer.num_params < trainer.parallel_min_work
    _, _, stats = trainer.train(perturbed_params(TinyCNN(), 3), _data(3, 4, (1, 10, 10)), None,
                                torch.Generator().manual_seed(0))
    assert stats.workers == 1


def test_worker_pool_helpers():
    assert available_cores() >= 1
    before = torch.get_num_threads()
    with single_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    pool = ClientWorkers(2, lambda: "replica")
    seen = []
    pool.map(lambda item: seen.append((item, pool.replica, torch.get_num_threads())), range(6))
    assert sorted(seen) == [(i, "replica", 1) for i in range(6)]
    assert pool.replica is None  # outside the workers
    with pytest.raises(ValueError, match="workers = 0"):
        ClientWorkers(0, lambda: None)
    with pytest.raises(ValueError, match="workers"):
        CohortTrainer(TinyCNN(), LocalTrainingSpec(local_steps=1, batch_size=2), workers=0)
