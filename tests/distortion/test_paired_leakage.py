"""Paired standard errors of leakage differences (issue 21: 48 draws left the default run's
orderings unresolved): the vectorised bootstrap against the scalar sqrt-JS, the leakage
against closed forms, and the paired and client-mean standard errors against the spread of
repeated seeded runs."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.distortion.divergence import sqrt_js, sqrt_js_rows
from privfl.distortion.measure import _leakage, _resampling_weights
from privfl.distortion.orderings import leakage_orderings, paired_se
from privfl.runs.tradeoff_run import _mean_se

PRIOR = np.full(4, 0.25)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(0.0, 1.0), min_size=4, max_size=4).filter(
    lambda row: sum(row) > 1e-3), min_size=1, max_size=6))
def test_rows_equal_the_scalar_sqrt_js_row_by_row(rows):
    table = np.array(rows)
    expected = [sqrt_js(r / r.sum(), PRIOR) for r in table]
    assert sqrt_js_rows(table, PRIOR) == pytest.approx(expected, abs=1e-12)


def test_rows_refuse_bad_shapes_and_values_in_one_line():
    for rows, fragment in (([[0.5, 0.5]], r"shape \(1, 2\)"), ([[0.0] * 4], "positive sum"),
                           ([[math.nan, 1, 1, 1]], "finite")):
        with pytest.raises(ValueError, match=fragment) as info:
            sqrt_js_rows(rows, PRIOR)
        assert "\n" not in str(info.value)


def test_identical_posteriors_give_their_closed_form_without_error():
    posterior = np.array([0.7, 0.1, 0.1, 0.1])
    weights = _resampling_weights(np.random.default_rng(0), 40).numpy()
    leak = _leakage(np.log(np.tile(posterior, (40, 1))), PRIOR, weights)
    assert leak.value == pytest.approx(sqrt_js(posterior, PRIOR), abs=1e-15)
    assert leak.se == pytest.approx(0.0, abs=1e-12) and leak.bias == pytest.approx(0, abs=1e-12)
    assert leak.replicates.shape == (200,)


def _posteriors(rng, r, scale):
    """Draws' posteriors of a toy attacker: softmax of a Gaussian score around a true signal."""
    scores = np.array([0.6, 0.0, 0.0, 0.0]) + scale * rng.standard_normal((r, 4))
    return scores - np.log(np.exp(scores).sum(1, keepdims=True))


def _pair(seed, r=200):
    """Two leakages from common random numbers: point b is point a with a little more noise
    on the same draws (as two Gaussian distortions with shared standard normals)."""
    rng = np.random.default_rng(seed)
    base = _posteriors(rng, r, 1.0)
    extra = 0.3 * rng.standard_normal((r, 4))
    b = base + extra
    b -= np.log(np.exp(b).sum(1, keepdims=True))
    weights = _resampling_weights(rng, r).numpy()
    return _leakage(base, PRIOR, weights), _leakage(b, PRIOR, weights)


def test_paired_standard_error_matches_the_spread_of_repeated_runs():
    runs = [_pair(seed) for seed in range(60)]
    differences = np.array([a.value - b.value for a, b in runs])
    paired = np.mean([paired_se(a.replicates, b.replicates) for a, b in runs])
    single = np.mean([a.se for a, _ in runs])
    empirical = differences.std(ddof=1)
    assert paired == pytest.approx(empirical, rel=0.3)
    assert np.array([a.value for a, _ in runs]).std(ddof=1) == pytest.approx(single, rel=0.3)
    # common random numbers: the difference is far less noisy than each estimate
    assert paired < 0.5 * math.hypot(single, single)


def test_client_mean_standard_error_matches_the_spread_of_repeated_runs():
    clients = 10

    def run(seed):
        leaks = [_pair(seed * 100 + k, r=100)[0] for k in range(clients)]
        return np.mean([leak.value for leak in leaks]), _mean_se([leak.se for leak in leaks])

    runs = [run(seed) for seed in range(30)]
    empirical = np.std([value for value, _ in runs], ddof=1)
    assert np.mean([se for _, se in runs]) == pytest.approx(empirical, rel=0.35)
    assert _mean_se([0.03] * 9) == pytest.approx(0.01)


def test_orderings_use_paired_replicates_where_given():
    replicates = np.random.default_rng(1).normal(0.15, 0.02, 200)

    def point(value, eps_p, shift):
        return {"mechanism": "gaussian", "parameter": "x", "value": value, "eps_p": eps_p,
                "eps_p_se": 0.02, "c1": 0.15, "c1_se": 0.02,
                "eps_p_replicates": replicates - shift, "c1_replicates": replicates}

    rows = leakage_orderings([point(1.0, 0.149, 0.001), point(10.0, 0.14, 0.01)], 48)
    assert [r["se_method"] for r in rows] == ["paired bootstrap"] * 3
    # the replicates move together: the difference has (almost) no error and is resolved
    assert all(r["se"] < 1e-12 and not r["within_one_se"] for r in rows)
    unpaired = leakage_orderings([{k: v for k, v in point(1.0, 0.149, 0.0).items()
                                   if not k.endswith("replicates")}], 48)
    assert unpaired[0]["se_method"] == "independent"
    assert unpaired[0]["se"] == pytest.approx(math.hypot(0.02, 0.02))
    assert unpaired[0]["within_one_se"]


def test_paired_se_refuses_unpaired_replicates():
    with pytest.raises(ValueError, match="not paired"):
        paired_se([0.1, 0.2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="finite"):
        paired_se([0.1, math.nan], [0.1, 0.2])


def test_largest_unresolved_bounds_every_unresolved_difference():
    from privfl.distortion.orderings import largest_unresolved

    rows = [{"difference": -0.002, "se": 0.003, "within_one_se": True},
            {"difference": 0.0001, "se": 0.004, "within_one_se": True},
            {"difference": 0.05, "se": 0.001, "within_one_se": False}]
    assert largest_unresolved(rows) == pytest.approx(0.005)
    assert largest_unresolved(rows[2:]) == 0.0
