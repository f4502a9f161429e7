"""Stacked forward / evaluation: equal to a per-row ``functional_call`` in eval mode, the same
for every chunking, shared or per-row inputs, flat or stacked parameters, every model path."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from _engine_helpers import TinyCNN, perturbed_params
from torch import nn
from torch.func import functional_call

from privfl.fl import CohortTrainer, LocalTrainingSpec
from privfl.models import build_model

SPEC = LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=1.0, noise_multiplier=1.0)


def _reference(model, params, x, per_row=False):
    """Row by row: torch.func.functional_call on an eval-mode copy (the reference)."""
    net = copy.deepcopy(model).eval()
    m = next(iter(params.values())).shape[0]
    with torch.no_grad():
        return torch.stack([functional_call(net, {n: v[j] for n, v in params.items()},
                                            (x[j] if per_row else x,)) for j in range(m)])


def _close(a, b):
    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("per_example", ["auto", "vmap"])
def test_forward_equals_per_row_functional_call(per_example):
    """TinyCNN with dropout (off in eval mode), float64: shared and per-row inputs, stacked and
    flat parameters, several chunkings (rows per forward from a tiny memory budget)."""
    torch.manual_seed(0)
    model = TinyCNN(dropout=True).double()
    m, n = 5, 7
    params = perturbed_params(model, m, scale=0.3)
    x = torch.randn(n, 1, 10, 10).double()  # float32 values: x.float() below is exact
    expected = _reference(model, params, x)
    assert expected.shape == (m, n, 3)
    plans = ((None, None), (1, None), (20_000, 3), (None, n))
    for budget, batch in plans if per_example == "auto" else plans[:1]:
        trainer = CohortTrainer(model, SPEC, per_example=per_example, memory_budget=budget)
        _close(trainer.forward(params, x, batch_size=batch), expected)
    trainer = CohortTrainer(model, SPEC, per_example=per_example)
    _close(trainer.forward(trainer.flatten(params), x.float()), expected)  # x cast to float64
    xr = torch.randn(m, n, 1, 10, 10, dtype=torch.float64)
    _close(trainer.forward(params, xr, per_row=True, batch_size=2),
           _reference(model, params, xr, per_row=True))
    assert trainer.uses_fast_path is (per_example == "auto")


def test_evaluate_accuracy_loss_and_predictions():
    torch.manual_seed(1)
    model = TinyCNN().double()
    m, n = 4, 11
    params = perturbed_params(model, m, scale=0.5)
    x = torch.randn(n, 1, 10, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (n,))
    out = _reference(model, params, x)
    trainer = CohortTrainer(model, SPEC, memory_budget=50_000)
    result = trainer.evaluate(params, x, y, batch_size=4)
    pred = out.argmax(-1)
    assert result.count == n and torch.equal(result.predictions, pred)
    assert torch.equal(result.correct, (pred == y).sum(1))
    _close(result.accuracy, (pred == y).double().mean(1))
    _close(result.loss, torch.stack([F.nll_loss(out[j], y) for j in range(m)]))  # log-probs
    yr = torch.randint(0, 3, (m, n))
    xr = torch.randn(m, n, 1, 10, 10, dtype=torch.float64)
    per_row = trainer.evaluate(params, xr, yr, per_row=True)
    outr = _reference(model, params, xr, per_row=True)
    assert torch.equal(per_row.predictions, outr.argmax(-1))
    _close(per_row.loss, torch.stack([F.nll_loss(outr[j], yr[j]) for j in range(m)]))


def test_generic_layers_shared_layers_and_custom_loss():
    """GroupNorm (torch.func layer), a layer called twice (fine in a forward without capture)
    and a custom loss_fn (squared error on one-hot targets)."""
    torch.manual_seed(2)
    mlp = build_model("mlp", input_shape=(6,), num_classes=3, hidden=(8,), norm_groups=2).double()

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)
            self.out = nn.Linear(6, 3)

        def forward(self, z):
            return self.out(torch.tanh(self.lin(torch.tanh(self.lin(z)))))

    def squared(out, target):
        return (out - F.one_hot(target, 3).to(out.dtype)).square().sum(-1)

    x = torch.randn(9, 6, dtype=torch.float64)
    y = torch.randint(0, 3, (9,))
    for model in (mlp, Shared().double()):
        trainer = CohortTrainer(model, SPEC, loss_fn=squared)
        params = perturbed_params(model, 3, scale=0.2)
        ref = _reference(model, params, x)
        _close(trainer.forward(params, x), ref)
        _close(trainer.evaluate(params, x, y).loss, squared(ref.reshape(27, 3),
                                                            y.repeat(3)).reshape(3, 9).mean(1))
        assert trainer.uses_fast_path


def test_training_is_unchanged_by_an_evaluation():
    """Eval mode is switched off again: train, evaluate, train == train, train (bit for bit,
    dropout on)."""
    torch.manual_seed(3)
    model = TinyCNN(dropout=True)
    spec = LocalTrainingSpec(local_steps=2, batch_size=3, clip_norm=1.0, noise_multiplier=0.5)
    gen = torch.Generator().manual_seed(0)
    data = [(torch.randn(8, 1, 10, 10, generator=gen), torch.randint(0, 3, (8,), generator=gen))
            for _ in range(2)]
    start = perturbed_params(model, 2)
    runs = []
    for evaluate in (False, True):
        trainer = CohortTrainer(model, spec)
        params, _, _ = trainer.train(start, data, None, torch.Generator().manual_seed(1))
        if evaluate:
            trainer.evaluate(params, data[0][0], data[0][1])
        runs.append(trainer.train(params, data, None, torch.Generator().manual_seed(2))[0])
        assert trainer.model.training  # train mode restored after the evaluation
    for name in runs[0]:
        assert torch.equal(runs[0][name], runs[1][name])


def test_bad_input_names_the_argument():
    model = TinyCNN()
    trainer = CohortTrainer(model, SPEC)
    params = perturbed_params(model, 2)
    x = torch.randn(4, 1, 10, 10)
    y = torch.randint(0, 3, (4,))
    with pytest.raises(ValueError, match="params = list is not allowed"):
        trainer.forward([params], x)
    with pytest.raises(ValueError, match=r"flat must be a \[M, 595\] tensor"):
        trainer.forward(torch.zeros(2, 3), x)
    with pytest.raises(ValueError, match=r"with per_row=True it must be \[M=2, N"):
        trainer.forward(params, x, per_row=True)
    with pytest.raises(ValueError, match="x has 0 examples"):
        trainer.forward(params, x[:0])
    with pytest.raises(ValueError, match="x = ndarray is not allowed"):
        trainer.forward(params, x.numpy())
    with pytest.raises(ValueError, match="batch_size = 0 is out of range"):
        trainer.forward(params, x, batch_size=0)
    with pytest.raises(ValueError, match=r"y has shape \(3,\): must be \[4\]"):
        trainer.evaluate(params, x, y[:3])
    with pytest.raises(ValueError, match=r"y has shape \(4,\): must be \[2, 4\]"):
        trainer.evaluate(params, x.expand(2, 4, 1, 10, 10), y, per_row=True)
    with pytest.raises(ValueError, match="y has dtype torch.float32"):
        trainer.evaluate(params, x, y.float())
