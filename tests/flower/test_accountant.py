"""PrivflAccountant behind Flower's PrivacyAccountant interface: the issue's numbers (1,000
clients, 200 rounds, z = 1, delta = 1e-5) against Flower's own RDP accountant, the same
epsilon as privfl's DP-FedAvg plan on the same settings, amplification only for secret Poisson
sampling, labels, budget checks, state round trip, and Flower's DP wrapper accepting it."""

from __future__ import annotations

import pytest

pytest.importorskip("flwr")

from flwr.serverapp import (  # noqa: E402
    GaussianPrivacyEvent,
    NeighboringRelation,
    PrivacyConfig,
    RdpAccountant,
    SamplingMethod,
)

from privfl.algorithms.dp_fedavg import DpFedAvgPrivacy  # noqa: E402
from privfl.flower.accountant import PrivflAccountant  # noqa: E402

N, ROUNDS, DELTA = 1000, 200, 1e-5


def _config(sampling):
    return PrivacyConfig(target_delta=DELTA, population_size=N,
                         neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE,
                         sampling_method=sampling)


def _composed(accountant, m):
    accountant.compose(GaussianPrivacyEvent(noise_multiplier=1.0, sample_size=m,
                                            population_size=N), ROUNDS)
    return accountant


def test_without_sampling_privfl_is_tighter_than_flowers_rdp():
    """No amplification: exact GDP 159.44 (a bound when nothing is subsampled) vs Flower's
    RDP 166.04; privfl's own RDP agrees with Flower's to 1 % (other orders)."""
    privfl = _composed(PrivflAccountant(_config(SamplingMethod.NO_AMPLIFICATION)), N)
    flower = _composed(RdpAccountant(_config(SamplingMethod.NO_AMPLIFICATION)), N)
    assert privfl.get_epsilon(DELTA) == pytest.approx(159.4415, abs=1e-3)
    assert flower.get_epsilon(DELTA) == pytest.approx(166.0355, abs=1e-3)
    by_method = {r.method: r for r in privfl.results()}
    assert by_method["gdp-clt"].kind == "bound" and by_method["gdp-clt"].sampling.startswith("none")
    assert by_method["rdp"].epsilon == pytest.approx(166.04, rel=0.01)
    spent = privfl.get_privacy_spent()
    assert (spent.epsilon, spent.delta, spent.num_releases) == (
        privfl.get_epsilon(DELTA), DELTA, ROUNDS)
    assert "bound, client level, add-remove" in spent.accounting_method
    assert "no amplification claimed" in spent.accounting_method


def test_secret_poisson_sampling_is_amplified_and_matches_privfls_own_plan():
    """Secret Poisson q = 0.1: PLD 9.97 vs Flower's RDP 11.06, and exactly the epsilon of
    privfl's DP-FedAvg plan (privfl run) on the same settings."""
    privfl = _composed(PrivflAccountant(_config(SamplingMethod.POISSON),
                                        secret_sampling=True), 100)
    flower = _composed(RdpAccountant(_config(SamplingMethod.POISSON)), 100)
    assert privfl.get_epsilon(DELTA) == pytest.approx(9.9713, abs=1e-3)
    assert flower.get_epsilon(DELTA) == pytest.approx(11.0631, abs=1e-3)
    plan = DpFedAvgPrivacy(num_clients=N, client_rate=0.1, noise_multiplier=1.0, delta=DELTA,
                           accountants=("pld", "rdp"))
    want = {r.method: r.epsilon for r in plan.results(ROUNDS)}
    got = {r.method: r.epsilon for r in privfl.results()}
    assert got == want
    assert privfl.get_privacy_spent().accounting_method.startswith(
        "privfl pld (bound, client level, add-remove, poisson (q=0.1) of clients")


def test_poisson_without_secrecy_is_not_amplified():
    """Flower's own node sampling (random.sample, visible): no amplification, whatever the
    configured method says."""
    open_sampling = _composed(PrivflAccountant(_config(SamplingMethod.POISSON)), 100)
    assert not open_sampling.amplified
    assert open_sampling.get_epsilon(DELTA) == pytest.approx(159.4415, abs=1e-3)


def test_budget_check_and_state_round_trip():
    accountant = PrivflAccountant(_config(SamplingMethod.POISSON), secret_sampling=True)
    event = GaussianPrivacyEvent(noise_multiplier=1.0, sample_size=100, population_size=N)
    assert accountant.get_epsilon(DELTA) == 0.0 and accountant.num_releases == 0
    accountant.compose(event, 199)
    assert accountant.would_exceed(event, max_epsilon=9.95)
    assert not accountant.would_exceed(event, max_epsilon=10.0)
    assert accountant.num_releases == 199  # nothing composed by the check
    copy = PrivflAccountant(_config(SamplingMethod.POISSON), secret_sampling=True)
    copy.load_state_dict(accountant.state_dict())
    accountant.compose(event)
    copy.compose(event)
    assert copy.get_epsilon(DELTA) == accountant.get_epsilon(DELTA) == pytest.approx(
        9.9713, abs=1e-3)
    with pytest.raises(ValueError, match="population_size = 999"):
        accountant.compose(GaussianPrivacyEvent(1.0, 10, 999))
    with pytest.raises(ValueError, match="secret_sampling or methods"):
        PrivflAccountant(_config(SamplingMethod.POISSON)).load_state_dict(
            accountant.state_dict())


def test_flowers_fixed_clipping_wrapper_reports_privfls_epsilon():
    """Flower's server-side fixed-clipping wrapper with a PrivflAccountant made from its own
    settings: each release it composes is accounted by privfl."""
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg

    probe = DifferentialPrivacyServerSideFixedClipping(FedAvg(), noise_multiplier=1.0,
                                                       clipping_norm=0.5,
                                                       num_sampled_clients=N)
    accountant = PrivflAccountant.for_wrapper(probe, population_size=N, target_delta=DELTA)
    assert accountant.wrapper == {"noise_multiplier": 1.0, "clipping_norm": 0.5,
                                  "num_sampled_clients": N}
    strategy = DifferentialPrivacyServerSideFixedClipping(
        FedAvg(), noise_multiplier=1.0, clipping_norm=0.5, num_sampled_clients=N,
        accountant=accountant)
    for _ in range(ROUNDS):
        strategy._compose_release(accountant.event())
    spent = strategy.privacy_spent()
    assert spent.num_releases == ROUNDS
    assert spent.epsilon == pytest.approx(159.4415, abs=1e-3)
    with pytest.raises(ValueError, match="differs from the wrapper's"):
        accountant.compose(GaussianPrivacyEvent(2.0, N, N))
