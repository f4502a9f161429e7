"""Correlated-noise accounting: tree aggregation against dp-accounting's RDP of its event, the
exact Gaussian value, PLD beside it, labels, calibration, BandMF amplification against
dp-accounting's PLD of Poisson-subsampled Gaussians."""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event
from scipy import stats

from privfl.accounting.correlated.accountant import (
    NEIGHBOURING,
    ORDERS,
    bandmf_amplified_results,
    calibrate_bandmf_noise,
    calibrate_noise_multiplier,
    gaussian_mechanism_results,
    tree_aggregation_results,
)
from privfl.mechanisms.sensitivity import Participation, sensitivity
from privfl.mechanisms.tree import tree_encoder


def _by_method(results):
    return {r.method.split(" ")[0]: r for r in results}


@pytest.mark.parametrize(("steps", "z"), [(1000, 2.0), (100, 5.0), (7, 1.0)])
def test_tree_rdp_equals_dp_accounting_tree_event(steps: int, z: float) -> None:
    acc = dp_accounting.rdp.RdpAccountant(
        orders=list(ORDERS), neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_SPECIAL
    )
    acc.compose(dp_event.SingleEpochTreeAggregationDpEvent(z, steps))
    ours = _by_method(tree_aggregation_results(steps, z, 1e-5))["rdp"]
    assert ours.epsilon == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)


def test_tree_exact_value_is_gaussian_with_sqrt_levels() -> None:
    steps, z, delta = 1000, 2.0, 1e-5
    results = _by_method(tree_aggregation_results(steps, z, delta))
    mu = math.sqrt(math.ceil(math.log2(steps + 1))) / z
    assert results["gdp"].extras["mu"] == pytest.approx(mu, rel=1e-15)
    eps = results["gdp"].epsilon
    # Balle-Wang: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
    back = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
    assert back == pytest.approx(delta, rel=1e-6)
    assert eps == pytest.approx(7.5112759, rel=1e-7)
    assert results["gdp"].epsilon <= results["pld"].epsilon <= results["gdp"].epsilon + 1e-3
    assert results["pld"].epsilon < results["rdp"].epsilon == pytest.approx(8.0878616, rel=1e-7)


def test_tree_sensitivity_from_the_encoder_feeds_the_accountant() -> None:
    steps = 100
    s = sensitivity(tree_encoder(steps), Participation.single(steps))
    direct = gaussian_mechanism_results(2.0, s.value, 1e-6, steps=steps, participation="single")
    tree = tree_aggregation_results(steps, 2.0, 1e-6)
    for a, b in zip(direct, tree, strict=True):
        assert a.epsilon == pytest.approx(b.epsilon, rel=1e-12)


def test_labels() -> None:
    for r in tree_aggregation_results(64, 3.0, 1e-5, trees=2):
        d = r.to_dict()
        assert d["unit"] == "client" and d["neighbouring"] == NEIGHBOURING
        assert "replace-with-zero" in d["neighbouring"] and d["kind"] == "bound"
        assert (
            d["sampling"].startswith("none (participation bound:") and "2 tree(s)" in d["sampling"]
        )
        assert d["steps"] == 128 and d["release"].startswith("every noisy prefix sum")
        assert d["sensitivity"] == pytest.approx(math.sqrt(14))
    for r in bandmf_amplified_results(100, 10, 0.1, 1.0, 1e-5):
        assert "Poisson" in r.sampling and "10 balanced groups" in r.sampling


@pytest.mark.parametrize(("epsilon", "s"), [(1.0, 1.0), (2.0, math.sqrt(10)), (8.0, 3.0)])
def test_calibration_hits_the_target_from_the_safe_side(epsilon: float, s: float) -> None:
    z = calibrate_noise_multiplier(epsilon, 1e-5, s)
    got = _by_method(gaussian_mechanism_results(z, s, 1e-5, steps=1, participation="x"))
    assert got["gdp"].epsilon <= epsilon
    assert got["gdp"].epsilon == pytest.approx(epsilon, rel=1e-9)
    # known: (1, 1e-5) <-> mu = 0.268051 (privfl.accounting.gdp.accountant.gdp_mu_for)
    if epsilon == 1.0:
        assert s / z == pytest.approx(0.268051, rel=1e-5)


@pytest.mark.parametrize(
    ("steps", "band", "q", "z"), [(200, 20, 0.05, 1.0), (64, 64, 0.2, 2.0), (100, 30, 0.1, 1.5)]
)
def test_bandmf_amplification_equals_dpsgd_pld(steps: int, band: int, q: float, z: float) -> None:
    k = -(-steps // band)
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), k)
    reference = acc.get_epsilon(1e-6)
    got = _by_method(bandmf_amplified_results(steps, band, q, z, 1e-6))
    assert got["pld"].extras["participations"] == k
    assert got["pld"].epsilon == pytest.approx(reference, rel=2e-3)
    assert got["pld"].epsilon < got["rdp"].epsilon


def test_bandmf_column_norm_scales_the_noise_and_amplification_helps() -> None:
    a = _by_method(bandmf_amplified_results(100, 10, 0.1, 2.0, 1e-5, max_column_norm=2.0))
    b = _by_method(bandmf_amplified_results(100, 10, 0.1, 1.0, 1e-5))
    assert a["pld"].epsilon == pytest.approx(b["pld"].epsilon, rel=1e-12)
    # without amplification (q = 1): the same k Gaussians = one with s = sqrt(k)
    full = _by_method(bandmf_amplified_results(100, 10, 1.0, 1.0, 1e-5, methods=("pld",)))
    plain = _by_method(
        gaussian_mechanism_results(1.0, math.sqrt(10), 1e-5, steps=100, participation="cyclic")
    )
    assert full["pld"].epsilon == pytest.approx(plain["gdp"].epsilon, rel=1e-3)
    assert b["pld"].epsilon < full["pld"].epsilon


def test_bandmf_calibration() -> None:
    z = calibrate_bandmf_noise(2.0, 1e-5, 200, 20, 0.05)
    eps = _by_method(bandmf_amplified_results(200, 20, 0.05, z, 1e-5, methods=("pld",)))["pld"]
    assert eps.epsilon <= 2.0
    assert eps.epsilon == pytest.approx(2.0, rel=2e-3)


def test_validation() -> None:
    with pytest.raises(ValueError, match="noise_multiplier"):
        gaussian_mechanism_results(0.0, 1.0, 1e-5, steps=1, participation="x")
    with pytest.raises(ValueError, match="methods"):
        gaussian_mechanism_results(1.0, 1.0, 1e-5, steps=1, participation="x", methods=("bogus",))
    with pytest.raises(ValueError, match="participation"):
        gaussian_mechanism_results(1.0, 1.0, 1e-5, steps=1, participation="")
    with pytest.raises(ValueError, match="band"):
        bandmf_amplified_results(10, 0, 0.1, 1.0, 1e-5)
    # a band wider than the rounds: one participation, as with band = rounds
    assert [r.epsilon for r in bandmf_amplified_results(10, 11, 0.1, 1.0, 1e-5)] == [
        r.epsilon for r in bandmf_amplified_results(10, 10, 0.1, 1.0, 1e-5)]
    with pytest.raises(ValueError, match="epsilon"):
        calibrate_noise_multiplier(0.0, 1e-5, 1.0)
    assert np.all(np.diff(ORDERS) > 0)


def test_step_accountants_read_replace_with_zero_soundly() -> None:
    """Neighbouring.REPLACE_WITH_ZERO on ordinary steps: zeroing a Poisson-sampled clipped
    contribution is add/remove's pair (PLD gives the same number), and an unsampled Gaussian
    step has sensitivity 1 as under add/remove (RDP, PLD); where an accountant has no analysis
    for the relation it refuses (RDP with Poisson) or doubles the sensitivity (gdp-clt without
    sampling), never reports less."""
    from privfl.accounting.events import (
        Neighbouring,
        NoisyStep,
        PrivacyEvent,
        Sampling,
        UnsupportedEventError,
    )
    from privfl.accounting.methods import account

    def eps(sampling, q, relation, method):
        event = PrivacyEvent(((NoisyStep(1.0, q, sampling), 20),), neighbouring=relation)
        try:
            return account(event, delta=1e-5, methods=(method,)).results[0].epsilon
        except UnsupportedEventError:
            return None

    zero, add = Neighbouring.REPLACE_WITH_ZERO, Neighbouring.ADD_REMOVE
    assert eps(Sampling.POISSON, 0.1, zero, "pld") == eps(Sampling.POISSON, 0.1, add, "pld")
    assert eps(Sampling.POISSON, 0.1, zero, "rdp") is None
    for method in ("rdp", "pld"):
        assert eps(Sampling.NONE, 1.0, zero, method) == eps(Sampling.NONE, 1.0, add, method)
    assert eps(Sampling.NONE, 1.0, zero, "gdp-clt") >= eps(Sampling.NONE, 1.0, add, "gdp-clt")


@pytest.mark.parametrize(("z", "s", "delta"), [(2.0, math.sqrt(10.0), 1e-5), (4.88, 1.0, 1e-12),
                                               (0.5, 3.0, 1e-6)])
def test_pld_row_is_the_pld_accountants_answer_for_the_same_gaussian(z, s, delta) -> None:
    """One path: the correlated-noise ``pld`` row is what the PLD accountant answers for one
    unsampled Gaussian step of noise multiplier z/s (exact GDP in closed form, on the safe
    side): equal to it (to the rounding of mu), at most 1e-9 relative above the exact GDP
    value, never below."""
    from privfl.accounting.events import dpsgd_event
    from privfl.accounting.pld.accountant import PldAccountant

    rows = _by_method(gaussian_mechanism_results(z, s, delta, steps=3, participation="single"))
    event = dpsgd_event(noise_multiplier=z / s, sampling_rate=1.0, steps=1)
    accountant = PldAccountant().epsilon(event, delta)
    # equal up to the last bit of mu (s/z here, sqrt((1/(z/s))^2) there)
    assert rows["pld"].epsilon == pytest.approx(accountant.epsilon, rel=1e-15)
    assert rows["pld"].extras["closed_form"] == accountant.extras["closed_form"]
    assert rows["gdp"].epsilon <= rows["pld"].epsilon <= rows["gdp"].epsilon * (1 + 1e-9)
