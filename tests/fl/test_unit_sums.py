"""Fixed summation units (privfl.fl.unit_sums): a clipped gradient sum over many records is the
same bits for every number of units per engine call and every torch thread count."""

from __future__ import annotations

import pytest
import torch

from privfl.fl import CohortTrainer, LocalTrainingSpec
from privfl.fl.unit_sums import (
    RECORD_UNIT,
    clipped_units,
    plain_units,
    record_units,
    unit_bytes,
    units_per_chunk,
)
from privfl.models import build_model

SPEC = LocalTrainingSpec(local_steps=1, batch_size=1, sampling="poisson", clip_norm=0.5,
                         noise_multiplier=1.0, optimizer="sgd", lr=0.1)


def _case(name: str, n: int = 300, records: int = 230):
    torch.manual_seed(1)
    if name == "cnn":  # convolutions (per-example gradients materialised) and 2-D dropout
        model = build_model("zheng2021-mnist-cnn", dropout=True)
        x = torch.randn(n, 1, 28, 28)
    else:
        model = build_model("mlp", input_shape=(12,), num_classes=4, hidden=(9,), dropout=0.3)
        x = torch.randn(n, 12)
    y = torch.randint(0, 4, (n,))
    trainer = CohortTrainer(model, SPEC)
    row = trainer.flatten({k: v.detach().unsqueeze(0) for k, v in model.named_parameters()})
    index = torch.randperm(n, generator=torch.Generator().manual_seed(2))[:records]
    return trainer, row, x, y, index


def _totals(trainer, row, x, y, index, chunk, threads=1):
    units, mask = record_units(index)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        t = clipped_units(trainer, row, x, y, units, mask, chunk, seed=7, round=2)
    finally:
        torch.set_num_threads(before)
    return t


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_clipped_sum_is_the_same_bits_for_every_chunk_and_thread_count(name):
    trainer, row, x, y, index = _case(name)
    want = _totals(trainer, row, x, y, index, 1)
    assert want.calls == [1, 1, 1, 1] and want.records == 230
    for chunk, threads in ((2, 1), (3, 2), (4, 2)):
        got = _totals(trainer, row, x, y, index, chunk, threads)
        assert torch.equal(got.total.total, want.total.total), (chunk, threads)
        assert (got.loss, got.clipped, got.max_norm) == (want.loss, want.clipped, want.max_norm)
    assert want.clipped > 0 and want.max_norm > 0.5  # the clip norm bites


def test_units_are_the_per_record_clipped_gradients_summed():
    """Against a per-record backward: sum_i min(1, C/||g_i||) g_i (float64, dropout off)."""
    torch.manual_seed(3)
    model = build_model("mlp", input_shape=(5,), num_classes=3, hidden=(4,)).double()
    trainer = CohortTrainer(model, SPEC)
    x, y = torch.randn(150, 5, dtype=torch.float64), torch.randint(0, 3, (150,))
    row = trainer.flatten({k: v.detach().unsqueeze(0) for k, v in model.named_parameters()})
    index = torch.arange(3, 140)
    units, mask = record_units(index)
    got = clipped_units(trainer, row, x, y, units, mask, 2)
    want = torch.zeros(row.shape[1], dtype=torch.float64)
    for i in index.tolist():
        model.zero_grad()
        out = model(x[i: i + 1])
        torch.nn.functional.cross_entropy(out, y[i: i + 1]).backward()
        g = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        want += g * min(1.0, 0.5 / float(g.norm()))
    assert torch.allclose(got.total.result(torch.float64), want, rtol=0, atol=1e-12)
    assert got.records == index.numel() and got.units == -(-index.numel() // RECORD_UNIT)


def test_record_units_pad_the_last_unit_with_masked_slots():
    index = torch.arange(10, 10 + RECORD_UNIT + 5)
    units, mask = record_units(index)
    assert units.shape == mask.shape == (2, RECORD_UNIT)
    assert torch.equal(units.reshape(-1)[: index.numel()], index)
    assert int(mask.sum()) == index.numel() and not bool(mask[1, 5:].any())
    assert bool((units[1, 5:] == 10).all())  # padded with a real row (never read: masked)


def test_plain_units_add_units_in_order():
    grads = [torch.full((3,), 0.1 * (u + 1)) for u in range(5)]

    def unit_sum(u):
        return grads[u], torch.tensor([1.0, 2.0]), torch.tensor([True, False])

    a = plain_units(3, "cpu", 5, 2, unit_sum)
    b = plain_units(3, "cpu", 5, 5, unit_sum)
    assert torch.equal(a.total.total, b.total.total) and a.calls == [2, 2, 1]
    assert a.loss == b.loss == 5.0 and a.records == 5


def test_budget_sets_the_units_per_call():
    trainer, row, x, y, _ = _case("mlp")
    per_unit = unit_bytes(trainer, x[:1], y[:1], RECORD_UNIT)
    assert per_unit >= 3 * trainer.num_params * 4
    assert units_per_chunk(10, per_unit, 3 * per_unit) == 3
    assert units_per_chunk(10, per_unit, 1) == 1  # at least one unit
    assert units_per_chunk(10, per_unit, 100 * per_unit) == 10
    assert units_per_chunk(10, per_unit, None, fixed=4) == 4


def test_bad_inputs_name_the_argument():
    trainer, row, x, y, index = _case("mlp")
    with pytest.raises(ValueError, match="index must be a non-empty"):
        record_units(index[:0])
    with pytest.raises(ValueError, match="unit = 0"):
        record_units(index, 0)
    units, mask = record_units(index)
    with pytest.raises(ValueError, match="chunk = 0"):
        clipped_units(trainer, row, x, y, units, mask, 0)
    with pytest.raises(ValueError, match="one shape"):
        clipped_units(trainer, row, x, y, units, mask[:1], 1)
    with pytest.raises(ValueError, match="budget = None"):
        units_per_chunk(3, 10, None)
    with pytest.raises(ValueError, match="single_rows"):
        trainer.clipped_sums(trainer.unflatten(row), x[None, :3], y[None, :3], single_rows=1)
