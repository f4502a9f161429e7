"""Record-level guarantees over clients (privfl.accounting.parallel): the worst client, and
records held by several clients composed over their holders."""

from __future__ import annotations

import math

import pytest

from privfl.accounting.events import (
    AccountingLimitError,
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    compose_events,
    dpsgd_event,
)
from privfl.accounting.gdp.accountant import fdp_clt_mu, gdp_epsilon
from privfl.accounting.methods import build_accountant
from privfl.accounting.parallel import (
    MAX_HOLDER_COMBINATIONS,
    holder_combinations,
    worst_client_results,
    worst_record_results,
)

DELTA = 1e-5


def _event(q, steps, z=2.0):
    return dpsgd_event(z, q, steps, sampling=Sampling.WITHOUT_REPLACEMENT,
                       neighbouring=Neighbouring.REPLACE_ONE)


def test_compose_events_merges_identical_steps():
    a, b = _event(0.1, 10), _event(0.2, 5)
    assert compose_events([a, a, a]) == _event(0.1, 30)
    both = compose_events([a, b, a])
    assert dict(both.steps) == {a.steps[0][0]: 20, b.steps[0][0]: 5}
    assert compose_events([a]) is a


def test_compose_events_refuses_mixed_relations():
    a = _event(0.1, 10)
    b = dpsgd_event(2.0, 0.1, 10)  # add/remove
    with pytest.raises(ValueError, match=r"events\[1\] has unit record, neighbouring add-remove"):
        compose_events([a, b])
    with pytest.raises(ValueError, match=r"events = \[\] is out of range"):
        compose_events([])


def test_disjoint_clients_are_exactly_the_worst_client():
    events = [_event(0.1, 10), _event(0.2, 10), _event(0.1, 10)]
    for method in ("gdp-clt", "pld", "rdp"):
        old = worst_client_results(events, DELTA, methods=method)
        new = worst_record_results(lambda j, h: events[j], 3, [], DELTA, methods=method)
        assert new == old


@pytest.mark.parametrize("method", ["pld", "rdp"])
def test_a_shared_record_composes_its_holders(method):
    """A record held by clients 0, 1, 2 (q = 0.1 each) is 3-fold exposure: its epsilon is
    the accountant's on 3x the steps, above the worst single client (q = 0.12, alone)."""
    events = [_event(0.1, 40), _event(0.1, 40), _event(0.1, 40), _event(0.12, 40)]
    (result,) = worst_record_results(lambda j, h: events[j], 4, [(0, 1, 2)], DELTA,
                                     methods=method)
    accountant = build_accountant(method)
    expected = max(accountant.epsilon(_event(0.1, 120), DELTA).epsilon,
                   accountant.epsilon(_event(0.12, 40), DELTA).epsilon)
    assert result.epsilon == pytest.approx(expected, rel=1e-12)
    assert result.epsilon > worst_client_results(events, DELTA, methods=method)[0].epsilon
    assert result.steps == 120 and result.extras["holders"] == 3
    assert "up to k = 3 clients" in result.note


def test_gdp_clt_of_holders_is_the_composed_mu():
    """Gaussian DP: the holders' mu compose as sqrt(sum mu_j^2) (independent formula)."""
    events = [_event(16 / 500, 360), _event(16 / 250, 360), _event(16 / 500, 360)]
    (result,) = worst_record_results(lambda j, h: events[j], 3, [(0, 1), (0, 1, 2)], DELTA,
                                     methods="gdp-clt")
    mu = math.sqrt(2 * fdp_clt_mu(16 / 500, 360, 2.0) ** 2 + fdp_clt_mu(16 / 250, 360, 2.0) ** 2)
    assert result.extras["mu"] == pytest.approx(mu, rel=1e-12)
    assert result.epsilon == pytest.approx(gdp_epsilon(DELTA, mu), rel=1e-9)


def test_holder_combinations_drop_those_inside_another():
    events = [_event(0.1, 10), _event(0.1, 10), _event(0.2, 10)]
    kept = holder_combinations(lambda j, h: events[j], 3, [(0, 1), (0, 1, 2), (1, 2)])
    assert len(kept) == 1 and kept[0].total() == 3  # {0, 1, 2} holds every other
    kept = holder_combinations(lambda j, h: events[j], 3, [(0, 1)])
    assert sorted(c.total() for c in kept) == [1, 2]  # client 2 alone is not inside {0, 1}


def test_holder_count_reaches_the_client_event():
    seen = []

    def client_event(j, holders):
        seen.append(holders)
        return _event(0.1, 10)

    holder_combinations(client_event, 4, [(0, 1, 3)])
    assert sorted(set(seen)) == [1, 3]


def test_bad_holder_sets_and_too_many_combinations():
    events = [_event(0.01 * (j + 1), 10) for j in range(80)]
    with pytest.raises(ValueError, match=r"holder_sets entry \(0, 0\) is out of range"):
        holder_combinations(lambda j, h: events[j], 80, [(0, 0)])
    with pytest.raises(ValueError, match=r"holder_sets entry \(0, 80\) is out of range"):
        holder_combinations(lambda j, h: events[j], 80, [(0, 80)])
    pairs = [(2 * i, 2 * i + 1) for i in range(40)] + [(1, 2)] + [
        (2 * i + 1, 2 * i + 2) for i in range(1, 39)]
    with pytest.raises(AccountingLimitError, match=f"more than {MAX_HOLDER_COMBINATIONS}"):
        worst_record_results(lambda j, h: events[j], 80, pairs, DELTA, methods="rdp")


def test_events_are_plain_privacy_events():
    step = NoisyStep(2.0, 0.1, Sampling.WITHOUT_REPLACEMENT)
    event = PrivacyEvent(((step, 3),), neighbouring=Neighbouring.REPLACE_ONE)
    assert compose_events([event, event]).total_steps == 6
