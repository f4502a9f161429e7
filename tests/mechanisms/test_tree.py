"""Tree aggregation: matrices, closed-form variances, streaming == matrix, restarts, sensitivity."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.mechanisms.sensitivity import Participation, sensitivity, sensitivity_brute_force
from privfl.mechanisms.tree import (
    TreeAggregator,
    decomposition,
    honaker_variances,
    tree_decoder,
    tree_encoder,
    tree_levels,
    tree_nodes,
    tree_sensitivity,
    tree_step_variances,
)


def _prefix(steps: int) -> np.ndarray:
    return np.tril(np.ones((steps, steps)))


@pytest.mark.parametrize("steps", [1, 2, 3, 7, 8, 13, 64, 1000])
def test_levels_are_ceil_log2_t_plus_1(steps: int) -> None:
    assert tree_levels(steps) == math.ceil(math.log2(steps + 1))
    c = tree_encoder(steps)
    assert c.sum(axis=0).max() == tree_levels(steps)  # a step lies in L complete nodes
    assert sensitivity(c, Participation.single(steps)).value == pytest.approx(
        math.sqrt(tree_levels(steps)), rel=1e-15
    )


def test_node_counts_and_decomposition() -> None:
    assert len(tree_nodes(8)) == 15 and len(tree_nodes(13)) == 13 + 6 + 3 + 1
    assert decomposition(13) == [(3, 0), (2, 2), (0, 12)]
    assert decomposition(0) == []


@pytest.mark.parametrize("estimator", ["vanilla", "honaker", "least-squares"])
@pytest.mark.parametrize("steps", [1, 5, 16, 23])
def test_decoder_reproduces_prefix_sums(steps: int, estimator: str) -> None:
    b = tree_decoder(steps, estimator)
    assert np.abs(b @ tree_encoder(steps) - _prefix(steps)).max() < 1e-12


@pytest.mark.parametrize("estimator", ["vanilla", "honaker"])
@pytest.mark.parametrize("steps", [5, 16, 23, 100])
def test_closed_form_variances_match_decoder(steps: int, estimator: str) -> None:
    rows = (tree_decoder(steps, estimator) ** 2).sum(axis=1)
    np.testing.assert_allclose(tree_step_variances(steps, estimator), rows, rtol=1e-12)


def test_vanilla_variance_is_popcount_and_honaker_values() -> None:
    v = tree_step_variances(16)
    assert list(v[:8]) == [1, 1, 2, 1, 2, 2, 3, 1]
    # v_1 = 2/3, v_2 = (4/3)/(7/3) = 4/7, v_3 = (8/7)/(15/7) = 8/15: v_h = 2^h / (2^(h+1) - 1)
    np.testing.assert_allclose(honaker_variances(4), [1, 2 / 3, 4 / 7, 8 / 15], rtol=1e-15)


def test_estimators_order_their_total_error() -> None:
    steps = 64
    totals = {
        e: (tree_decoder(steps, e) ** 2).sum() for e in ("vanilla", "honaker", "least-squares")
    }
    assert totals["least-squares"] < totals["honaker"] < totals["vanilla"]
    assert totals["vanilla"] == sum(bin(t).count("1") for t in range(1, steps + 1))


@pytest.mark.parametrize("estimator", ["vanilla", "honaker"])
@pytest.mark.parametrize("steps", [1, 6, 13])
def test_streaming_equals_matrix_product(steps: int, estimator: str) -> None:
    rng = np.random.default_rng(steps)
    x = rng.normal(size=(steps, 3))
    nodes = tree_nodes(steps)
    noise = {node: rng.normal(size=3) for node in nodes}
    aggregator = TreeAggregator(
        3, 1.0, estimator=estimator, noise=lambda h, j, shape: noise[(h, j)]
    )
    streamed = np.array([aggregator.step(row) for row in x])
    z = np.array([noise[node] for node in nodes])
    expected = tree_decoder(steps, estimator) @ (tree_encoder(steps) @ x + z)
    assert np.abs(streamed - expected).max() < 1e-12


def test_noise_free_tree_is_exact_and_restarts_keep_the_sum() -> None:
    x = np.arange(1.0, 21.0)[:, None]
    for restart in (0, 4, 7):
        aggregator = TreeAggregator(1, 0.0, restart_every=restart)
        out = np.array([aggregator.step(row) for row in x])
        np.testing.assert_allclose(out[:, 0], np.cumsum(x[:, 0]), rtol=1e-15)


@pytest.mark.parametrize("estimator", ["vanilla", "honaker"])
def test_restart_variances_empirically(estimator: str) -> None:
    steps, restart, reps = 12, 5, 20_000
    aggregator = TreeAggregator(
        reps, 1.0, estimator=estimator, restart_every=restart, rng=np.random.default_rng(3)
    )
    out = np.array([aggregator.step(np.zeros(reps)) for _ in range(steps)])
    expected = tree_step_variances(steps, estimator, restart_every=restart)
    np.testing.assert_allclose(out.var(axis=1), expected, rtol=0.05)


def test_restarted_tree_sensitivity_against_block_encoder() -> None:
    # two trees of 6 steps: block-diagonal C, one participation per tree (cyclic period 6)
    c = np.kron(np.eye(2), tree_encoder(6))
    brute = sensitivity_brute_force(c, Participation.cyclic(12, 6))
    assert brute == pytest.approx(tree_sensitivity(6, trees=2), rel=1e-14)
    assert tree_sensitivity(6, trees=2) == pytest.approx(math.sqrt(6))


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 10), st.integers(1, 3), st.integers(1, 4))
def test_tree_sensitivity_monotone_in_participations(steps: int, k: int, b: int) -> None:
    if k + 1 > -(-steps // b):
        return
    c = tree_encoder(steps)
    one = sensitivity(c, Participation(steps, k, b)).value
    two = sensitivity(c, Participation(steps, k + 1, b)).value
    assert two >= one - 1e-12


def test_validation_messages() -> None:
    with pytest.raises(ValueError, match="steps"):
        tree_levels(0)
    with pytest.raises(ValueError, match="estimator"):
        TreeAggregator(2, 1.0, estimator="bogus")
    with pytest.raises(ValueError, match="shape"):
        TreeAggregator(2, 1.0).step(np.zeros(3))
    with pytest.raises(ValueError, match="noise_std"):
        TreeAggregator(2, -1.0)


def test_numpy_modules_never_import_torch() -> None:
    code = (
        "import sys, privfl.mechanisms.tree, privfl.mechanisms.factorization, "
        "privfl.mechanisms.banded_noise, privfl.mechanisms.sensitivity, "
        "privfl.mechanisms.toeplitz, privfl.mechanisms.correlated_privacy, "
        "privfl.accounting.correlated.accountant; sys.exit(1 if 'torch' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
