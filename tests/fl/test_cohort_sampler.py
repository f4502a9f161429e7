"""The one client-cohort sampler: what it draws is what it tells the accountant."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from privfl.accounting.events import Neighbouring, Sampling
from privfl.fl.cohort_sampler import CohortSampler


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 500), st.floats(1e-3, 1.0), st.integers(0, 2**32 - 1))
def test_poisson_cohort_is_the_clients_whose_uniform_is_below_q(n, q, seed):
    sampler = CohortSampler.poisson(n, q)
    keys = np.random.default_rng(seed).random(n)
    cohort = sampler.draw(lambda count: keys[:count])
    assert np.array_equal(cohort, np.flatnonzero(keys < q))
    assert sampler.sampling is Sampling.POISSON and sampler.sampling_rate == q
    assert sampler.neighbouring is Neighbouring.ADD_REMOVE
    assert sampler.expected_size == pytest.approx(q * n)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 500), st.data(), st.integers(0, 2**32 - 1))
def test_fixed_size_cohort_is_the_m_smallest_keys_sorted(n, data, seed):
    m = data.draw(st.integers(1, n))
    sampler = CohortSampler.fixed_size(n, m)
    keys = np.random.default_rng(seed).random(n)
    cohort = sampler.draw(lambda count: keys[:count])
    assert cohort.size == m and np.all(np.diff(cohort) > 0)
    assert set(cohort) == set(np.argsort(keys)[:m])
    assert keys[cohort].max() <= np.delete(keys, cohort).min(initial=1.0)
    assert sampler.sampling is Sampling.WITHOUT_REPLACEMENT
    assert sampler.sampling_rate == m / n and sampler.neighbouring is Neighbouring.REPLACE_ONE


def test_fixed_size_inclusion_is_uniform():
    """Every client is included with probability m/N (chi-square over 4,000 rounds)."""
    n, m, rounds = 20, 5, 4000
    rng = np.random.default_rng(7)
    counts = np.zeros(n)
    for _ in range(rounds):
        counts[CohortSampler.fixed_size(n, m).draw(rng.random)] += 1
    assert counts.sum() == m * rounds
    assert stats.chisquare(counts).pvalue > 1e-3


def test_poisson_size_is_binomial():
    n, q, rounds = 200, 0.1, 3000
    rng = np.random.default_rng(3)
    sizes = [CohortSampler.poisson(n, q).draw(rng.random).size for _ in range(rounds)]
    assert np.mean(sizes) == pytest.approx(n * q, abs=4 * np.sqrt(n * q * (1 - q) / rounds))
    assert np.var(sizes) == pytest.approx(n * q * (1 - q), rel=0.1)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"population": 0, "scheme": "poisson", "rate": 0.1}, "population = 0"),
    ({"population": 10, "scheme": "poisson", "rate": 0.0}, "client_rate = 0"),
    ({"population": 10, "scheme": "poisson", "rate": float("nan")}, "client_rate = nan"),
    ({"population": 10, "scheme": "poisson", "rate": 0.1, "size": 3}, "cohort_size = 3"),
    ({"population": 10, "scheme": "fixed-size", "size": 11}, "cohort_size = 11"),
    ({"population": 10, "scheme": "fixed-size", "size": 2, "rate": 0.2}, "client_rate = 0.2"),
    ({"population": 10, "scheme": "shuffle", "rate": 0.2}, "client_sampling = 'shuffle'"),
])
def test_invalid_settings_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        CohortSampler(**kwargs)


def test_draw_refuses_a_wrong_number_of_uniforms():
    with pytest.raises(ValueError, match=r"uniforms\(10\) returned shape \(9,\)"):
        CohortSampler.poisson(10, 0.5).draw(lambda count: np.zeros(count - 1))
