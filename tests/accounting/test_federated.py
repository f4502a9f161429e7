"""Seed 000 Theorem 2: the 18 mu values of Tables 1-3, weak/strong scopes, PLD bound vs CLT."""

import math

import pytest

from privfl.accounting.fdp.federated import (
    ClientTraining,
    FederatedSetting,
    federated_fdp,
    noise_multiplier_for_mu,
)

# (n, B, K, sigma, R, paper mu, spec mu) from spec seed0 section 6.1; sigma is the paper's = z / 2
TABLE = [
    (600, 16, 38, 1.0, 93, 2.71, 2.7110),
    (600, 16, 38, 0.9, 83, 3.10, 3.0986),
    (600, 16, 38, 0.75, 64, 3.96, 3.9625),
    (600, 16, 38, 1.0, 194, 3.92, 3.9156),
    (600, 16, 38, 0.9, 176, 4.51, 4.5121),
    (600, 16, 38, 0.75, 127, 5.58, 5.5819),
    (600, 16, 38, 1.0, 386, 5.52, 5.5231),
    (600, 16, 38, 0.9, 325, 6.13, 6.1315),
    (600, 16, 38, 0.75, 245, 7.75, 7.7529),
    (600, 8, 76, 1.0, 266, 3.24, 3.2420),
    (600, 8, 76, 0.9, 229, 3.64, 3.6394),
    (600, 8, 76, 0.75, 191, 4.84, 4.8404),
    (500, 16, 32, 1.0, 468, 6.70, 6.6970),
    (500, 16, 32, 0.75, 321, 9.77, 9.7724),
    (500, 16, 32, 0.5, 207, 26.81, 26.8142),
    (500, 16, 32, 1.0, 904, 9.31, 9.3077),
    (500, 16, 32, 0.75, 671, 14.13, 14.1289),
    (500, 16, 32, 0.5, 405, 37.51, 37.5065),
]


@pytest.mark.parametrize("n,B,K,sigma,R,paper_mu,spec_mu", TABLE)
def test_theorem2_mu_matches_paper_tables(n, B, K, sigma, R, paper_mu, spec_mu):
    setting = FederatedSetting.homogeneous(
        clients=100, records=n, batch_size=B, local_steps=K, noise_multiplier=2 * sigma, rounds=R
    )
    assert abs(setting.mu_max() - paper_mu) <= 0.005
    assert setting.mu_max() == pytest.approx(spec_mu, abs=1e-4)
    assert setting.mu_strong() == pytest.approx(math.sqrt(99) * spec_mu, abs=1e-3)


def test_client_sampling_rate_does_not_enter_theorem2():
    kwargs = dict(clients=100, records=600, batch_size=16, local_steps=38, noise_multiplier=2.0,
                  rounds=194)
    full = FederatedSetting.homogeneous(**kwargs)
    half = FederatedSetting.homogeneous(**kwargs, client_rate=0.5)
    assert full.mu_max() == half.mu_max() == pytest.approx(3.9156, abs=1e-4)


def test_mu_max_over_heterogeneous_clients():
    a = ClientTraining(records=600, batch_size=16, local_steps=38, noise_multiplier=2.0)
    b = ClientTraining(records=300, batch_size=16, local_steps=19, noise_multiplier=2.0)
    setting = FederatedSetting((a, a, b), rounds=93)
    assert setting.mu_max() == pytest.approx(max(a.mu(93), b.mu(93)))
    assert setting.mu_max() == pytest.approx(b.mu(93))
    assert setting.mu_strong() == pytest.approx(math.sqrt(2) * b.mu(93))


def test_weak_and_strong_results_are_labelled():
    setting = FederatedSetting.homogeneous(
        clients=100, records=600, batch_size=16, local_steps=38, noise_multiplier=2.0, rounds=93
    )
    results = federated_fdp(setting, 1e-5)
    by_key = {(r.method, r.extras["scope"]): r for r in results}
    assert set(by_key) == {
        ("gdp-clt", "weak"),
        ("gdp-clt", "strong"),
        ("pld", "weak"),
        ("pld", "strong"),
    }
    clt, pld = by_key["gdp-clt", "weak"], by_key["pld", "weak"]
    assert clt.kind == "estimate" and pld.kind == "bound"
    assert clt.extras["mu"] == pytest.approx(2.7110, abs=1e-4)
    assert clt.epsilon == pytest.approx(14.64, abs=0.01)  # spec seed0 6.1, eps at 1e-5
    # The rigorous bound is tighter than the CLT estimate at the paper's parameters (spec 4.4).
    assert 0.80 * clt.epsilon < pld.epsilon < 0.97 * clt.epsilon
    for result in results:
        assert result.unit == "record" and result.neighbouring == "replace-one"
        assert "without-replacement" in result.sampling and result.delta == 1e-5
    assert by_key["gdp-clt", "strong"].extras["mu"] == pytest.approx(26.974, abs=1e-3)
    assert by_key["pld", "strong"].epsilon > pld.epsilon
    assert by_key["pld", "strong"].steps == 99 * 38 * 93


@pytest.mark.parametrize(
    "target,n,B,K,R,expected",
    [
        (3.0, 600, 16, 38, 100, 0.96372),
        (2.71, 600, 16, 38, 93, 1.00022),
        (1.0, 500, 16, 32, 468, 4.31806),
    ],
)
def test_noise_multiplier_for_mu_spec_examples(target, n, B, K, R, expected):
    """The spec's examples are the paper's sigma = z / 2."""
    z = noise_multiplier_for_mu(target, records=n, batch_size=B, local_steps=K, rounds=R)
    assert z / 2 == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        (dict(records=0, batch_size=1, local_steps=1, noise_multiplier=2.0), "records"),
        (dict(records=10, batch_size=11, local_steps=1, noise_multiplier=2.0), "batch_size"),
        (dict(records=10, batch_size=2, local_steps=0, noise_multiplier=2.0), "local_steps"),
        (dict(records=10, batch_size=2, local_steps=1, noise_multiplier=0.0), "noise_multiplier"),
        (dict(records=10, batch_size=2, local_steps=1, noise_multiplier=float("nan")),
         "noise_multiplier"),
    ],
)
def test_client_training_rejects_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ClientTraining(**kwargs)


def test_setting_rejects_bad_input():
    client = ClientTraining(records=10, batch_size=2, local_steps=1, noise_multiplier=2.0)
    with pytest.raises(ValueError, match="clients"):
        FederatedSetting((client,), rounds=3)
    with pytest.raises(ValueError, match="rounds"):
        FederatedSetting((client, client), rounds=-1)
    with pytest.raises(ValueError, match="client_rate"):
        FederatedSetting((client, client), rounds=1, client_rate=1.5)
    with pytest.raises(ValueError, match="delta"):
        federated_fdp(FederatedSetting((client, client), rounds=1), 0.0)


# ---------------------------------------------------- records held by several clients
def test_multiplicity_composes_the_holders_of_a_record():
    """Table 1's first row with a record held by k = 3 clients: mu = sqrt(3) * 2.7110 and the
    PLD bound of 3 K R steps (independent event)."""
    from privfl.accounting.events import Neighbouring, Sampling, dpsgd_event
    from privfl.accounting.methods import build_accountant

    shared = FederatedSetting.homogeneous(clients=100, records=600, batch_size=16,
                                          local_steps=38, noise_multiplier=2.0, rounds=93,
                                          multiplicity=3)
    assert shared.mu_max() == pytest.approx(math.sqrt(3) * 2.7110, abs=2e-4)
    assert shared.mu_strong() == pytest.approx(math.sqrt(99 * 3) * 2.7110, abs=2e-3)
    by = {(r.method, r.extras["scope"]): r for r in federated_fdp(shared, 1e-5)}
    event = dpsgd_event(2.0, 16 / 600, 3 * 38 * 93, sampling=Sampling.WITHOUT_REPLACEMENT,
                        neighbouring=Neighbouring.REPLACE_ONE)
    assert by["pld", "weak"].epsilon == pytest.approx(
        build_accountant("pld").epsilon(event, 1e-5).epsilon, rel=1e-12)
    assert by["pld", "weak"].steps == 3 * 38 * 93 and "k = 3" in by["pld", "weak"].note
    single = {(r.method, r.extras["scope"]): r for r in federated_fdp(
        FederatedSetting.homogeneous(clients=100, records=600, batch_size=16, local_steps=38,
                                     noise_multiplier=2.0, rounds=93), 1e-5)}
    assert by["pld", "weak"].epsilon > single["pld", "weak"].epsilon
    assert "k =" not in single["pld", "weak"].note


def test_multiplicity_with_unequal_clients_takes_the_worst_holders():
    small, large = ClientTraining(250, 16, 10, 2.0), ClientTraining(500, 16, 10, 2.0)
    setting = FederatedSetting((small, large, large), rounds=20, multiplicity=2)
    assert setting.mu_max() == pytest.approx(math.hypot(small.mu(20), large.mu(20)), rel=1e-12)
    assert sorted(c.records for c in setting.worst_holders()) == [250, 500]
    choices = {tuple(sorted(c.records for c in choice)) for choice in setting.holder_choices()}
    assert choices == {(250, 500), (500, 500)}  # only one client has 250 records
    with pytest.raises(ValueError, match=r"multiplicity = 4 is out of range"):
        FederatedSetting((small, large, large), rounds=20, multiplicity=4)
