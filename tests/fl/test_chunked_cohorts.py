"""privfl.fl.chunked_cohorts: the order-fixed row sum, the budget and the chunk size."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl._memory import free_system_memory, parse_memory_budget
from privfl.fl.chunked_cohorts import (
    MAX_DEFAULT_BUDGET,
    RowSum,
    chunk_rows,
    default_memory_budget,
    row_bytes,
    stream_chunks,
)


def test_row_sum_adds_rows_one_by_one_in_float64():
    rows = torch.tensor([[1e8, 1.0], [1.0, 2.0], [-1e8, 3.0]], dtype=torch.float32)
    total = RowSum(2)
    total.add(rows)
    assert total.total.tolist() == [1.0, 6.0]  # float32 would lose the 1.0 against 1e8
    assert total.count == 3
    weighted = RowSum(2)
    weighted.add(rows, [0.5, 1.0, 0.5])
    assert weighted.total.tolist() == [1.0, 4.0]
    assert weighted.result(torch.float32).dtype == torch.float32


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 64), st.lists(st.integers(1, 40), min_size=1),
       st.integers(0, 2**31))
def test_row_sum_does_not_depend_on_the_chunks(count, size, cuts, seed):
    """Any cut of the rows into chunks gives the same bits as one add of all rows."""
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randn(count, size, generator=gen) * torch.logspace(-6, 6, size)
    weights = torch.rand(count, generator=gen).tolist()
    whole, parts = RowSum(size), RowSum(size)
    whole_w, parts_w = RowSum(size), RowSum(size)
    whole.add(rows)
    whole_w.add(rows, weights)
    lo = 0
    for cut in cuts * count:
        if lo >= count:
            break
        hi = min(count, lo + cut)
        parts.add(rows[lo:hi])
        parts_w.add(rows[lo:hi], weights[lo:hi])
        lo = hi
    if lo < count:
        parts.add(rows[lo:])
        parts_w.add(rows[lo:], weights[lo:])
    assert torch.equal(whole.total, parts.total)
    assert torch.equal(whole_w.total, parts_w.total)


def test_row_sum_validation():
    with pytest.raises(ValueError, match="rows must be a"):
        RowSum(3).add(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="weights has 1 entries"):
        RowSum(3).add(torch.zeros(2, 3), [1.0])
    with pytest.raises(ValueError, match="size = 0"):
        RowSum(0)


def test_budget_and_chunks():
    assert parse_memory_budget("1MiB") == 1 << 20
    assert parse_memory_budget("0.25 GiB") == 1 << 28
    with pytest.raises(ValueError, match="memory_budget = 'x' is not allowed"):
        parse_memory_budget("x")
    with pytest.raises(ValueError, match="out of range"):
        parse_memory_budget(10)
    free = free_system_memory()
    budget = default_memory_budget()
    assert 1 << 20 <= budget <= MAX_DEFAULT_BUDGET
    if free is not None:
        assert budget == max(1 << 20, min(MAX_DEFAULT_BUDGET, free // 4))
    # 8 float32 rows of 1,000 parameters + 968 bytes of records = 32,968 bytes
    assert row_bytes(1000, torch.float32, 968.0) == 32_968
    assert row_bytes(1000, torch.float64) == 64_000
    assert chunk_rows(5000, 32_968, 1 << 20) == 31
    assert chunk_rows(10, 32_968, 1 << 20) == 10
    assert chunk_rows(10, 1 << 30, 1 << 20) == 1
    assert stream_chunks(7, 3) == [(0, 3), (3, 6), (6, 7)]
    assert stream_chunks(0, 3) == []
