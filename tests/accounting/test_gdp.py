"""mu-GDP: conversion, composition, CLT mu (spec seed0 2.4, 4.4, 6.1, 6.2) and the accountant."""

import math
import os

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from privfl.accounting.events import (
    Neighbouring,
    Noise,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    UnsupportedEventError,
    dpsgd_event,
    noise_multiplier_from_paper_sigma,
)
from privfl.accounting.gdp.accountant import (
    GDP_RELATIVE_ERROR,
    GdpCltAccountant,
    fdp_clt_kappa,
    fdp_clt_mu,
    gdp_compose,
    gdp_delta,
    gdp_epsilon,
    gdp_log_delta,
    gdp_mu_for,
    poisson_clt_mu,
)

# PRIVFL_HYPOTHESIS_EXAMPLES=500 for a deeper local search
FAST = settings(max_examples=int(os.environ.get("PRIVFL_HYPOTHESIS_EXAMPLES", "40")), deadline=None)


def mp_log_delta(epsilon: float, mu: float) -> mpmath.mpf:
    """Reference log delta(epsilon) of mu-GDP at 60 significant digits."""
    with mpmath.workdps(60):
        e, m = mpmath.mpf(epsilon), mpmath.mpf(mu)
        value = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
        return mpmath.log(value)


# --------------------------------------------------------------------------- golden values
@pytest.mark.parametrize(
    ("mu", "epsilons", "deltas"),
    [
        (1.0, [0, 1, 2, 5], [0.3829249, 0.1269367, 0.0209236, 5.7937e-7]),
        (0.5, [0, 0.5, 1, 2], [0.1974127, 0.0524403, 0.0068296, 9.4392e-6]),
        (2.71, [0, 1, 2, 5], [0.824582, 0.722804, 0.597090, 0.210087]),
        (2.0, [0, 1, 2, 5], [0.682689, 0.509862, 0.331898, 0.032282]),
    ],
)
def test_delta_tables(mu, epsilons, deltas):
    got = gdp_delta(np.array(epsilons, float), mu)  # vectorised
    np.testing.assert_allclose(got, deltas, atol=1e-6)
    for eps, want in zip(epsilons, deltas, strict=True):
        assert gdp_delta(eps, mu) == pytest.approx(want, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize(("epsilon", "mu"), [(1.0, 0.268051), (2.0, 0.501552), (8.0, 1.666031)])
def test_mu_for_epsilon_delta(epsilon, mu):
    assert gdp_mu_for(epsilon, 1e-5) == pytest.approx(mu, abs=1e-6)
    found = gdp_mu_for(epsilon, 1e-5)
    assert gdp_delta(epsilon, found) == pytest.approx(1e-5, rel=1e-9)
    assert gdp_epsilon(1e-5, found) == pytest.approx(epsilon, rel=1e-9)


def test_mu_for_at_zero_epsilon_is_total_variation_inverse():
    mu = gdp_mu_for(0.0, 0.3829249225480263)
    assert mu == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize(("mu", "tv"), [(1.0, 0.382925), (2.71, 0.824582)])
def test_total_variation_is_delta_at_zero(mu, tv):
    assert gdp_delta(0.0, mu) == pytest.approx(tv, abs=1e-6)
    assert gdp_delta(0.0, mu) == pytest.approx(2 * special.ndtr(mu / 2) - 1, rel=1e-12)


def test_zero_mu_is_perfect_privacy():
    assert gdp_delta(0.0, 0.0) == 0.0 and gdp_log_delta(1.0, 0.0) == -math.inf
    assert gdp_epsilon(1e-10, 0.0) == 0.0


def test_epsilon_is_zero_when_delta_reaches_total_variation():
    assert gdp_epsilon(0.4, 1.0) == 0.0
    assert gdp_epsilon(0.38, 1.0) > 0.0


def test_compose():
    assert gdp_compose(1.0, 1.0, 1.0, 1.0) == pytest.approx(2.0)
    assert gdp_compose(3.0, 4.0) == pytest.approx(5.0)
    assert gdp_compose() == 0.0
    with pytest.raises(ValueError, match="mus"):
        gdp_compose(1.0, -1.0)


# --------------------------------------------------------------------------- numerics
def test_extreme_points_against_mpmath():
    worst = 0.0
    for mu, delta in [
        (50.0, 1e-15),
        (37.5065, 1e-15),
        (26.8142, 1e-5),
        (0.01, 1e-15),
        (0.05, 1e-12),
        (1.0, 1e-15),
        (10.0, 1e-10),
    ]:
        eps = gdp_epsilon(delta, mu)
        got = gdp_log_delta(eps, mu)
        ref = mp_log_delta(eps, mu)
        worst = max(worst, abs(float(mpmath.expm1(got - ref))))
    assert gdp_epsilon(1e-15, 50.0) == pytest.approx(1646.139, abs=1e-2)
    assert worst < 1e-8


@pytest.mark.parametrize(
    ("epsilon", "mu"),
    [
        (0.0, 0.01),
        (1e-6, 0.01),
        (12.5, 5.0),
        (12.4999, 5.0),
        (5000.0, 50.0),
        (1000.0, 1.0),
        (2000.0, 0.05),
    ],
)
def test_log_delta_against_mpmath_including_underflow(epsilon, mu):
    # delta(1000; 1) ~ exp(-500000): far below the smallest double, its log is still exact
    ref = mp_log_delta(epsilon, mu)
    got = gdp_log_delta(epsilon, mu)
    assert abs(got - float(ref)) <= 1e-9 * max(1.0, abs(float(ref)))


@FAST
@given(
    log_mu=st.floats(math.log(0.01), math.log(50.0)),
    log10_delta=st.floats(-15.0, math.log10(0.5)),
)
def test_epsilon_delta_round_trip(log_mu, log10_delta):
    mu, delta = math.exp(log_mu), 10.0**log10_delta
    eps = gdp_epsilon(delta, mu)
    if eps == 0.0:
        assert gdp_delta(0.0, mu) <= delta
    else:  # read at delta lowered by the profile's error allowance (the safe side)
        assert gdp_delta(eps, mu) == pytest.approx(delta / (1 + GDP_RELATIVE_ERROR), rel=1e-11)


#: the grid where epsilon came out one float step below the exact root (13 of its 108 points)
#: before the margin: mu x delta
ROOT_GRID_MUS = (0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 10.0, 20.0, 50.0)
ROOT_GRID_DELTAS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-12)


def _exact_delta_at_most(epsilon: float, mu: float, delta: float) -> bool:
    """Whether the exact (60-digit) delta of mu-GDP at the float ``epsilon`` is <= ``delta``,
    i.e. ``epsilon`` is not below the exact root."""
    with mpmath.workdps(60):
        return mp_log_delta(epsilon, mu) <= mpmath.log(mpmath.mpf(delta))


def test_epsilon_is_never_below_the_exact_root_on_the_grid():
    below = [(mu, delta) for mu in ROOT_GRID_MUS for delta in ROOT_GRID_DELTAS
             if not _exact_delta_at_most(float(gdp_epsilon(delta, mu)), mu, delta)]
    assert below == []  # before the margin: (0.1, 1e-4), (0.1, 1e-9), ... 13 points
    eps = float(gdp_epsilon(1e-4, 0.1))  # one of them: now above, by a hair (about 1e-10)
    with mpmath.workdps(60):
        root = mpmath.findroot(lambda e: mp_log_delta(e, 0.1) - mpmath.log(mpmath.mpf(1e-4)),
                               mpmath.mpf(0.2759242412))
    assert 0.0 < eps - float(root) < 1e-9 * float(root)


@FAST
@given(
    log_mu=st.floats(math.log(0.01), math.log(50.0)),
    log10_delta=st.floats(-15.0, math.log10(0.5)),
)
def test_epsilon_is_never_below_the_exact_root(log_mu, log10_delta):
    """Property against mpmath: the exact delta at the returned epsilon is at most delta."""
    mu, delta = math.exp(log_mu), 10.0**log10_delta
    eps = float(gdp_epsilon(delta, mu))
    assert _exact_delta_at_most(eps, mu, delta)
    # and not needlessly far: the exact delta there is within twice the margin of the target
    if eps > 0.0:
        with mpmath.workdps(60):
            exact = mpmath.exp(mp_log_delta(eps, mu))
        assert float(exact) >= delta / (1.0 + 2.0 * GDP_RELATIVE_ERROR)


@FAST
@given(
    mu=st.floats(0.01, 50.0),
    eps1=st.floats(0.0, 2000.0),
    eps2=st.floats(0.0, 2000.0),
)
def test_delta_non_increasing_in_epsilon(mu, eps1, eps2):
    low, high = sorted((eps1, eps2))
    assert gdp_log_delta(high, mu) <= gdp_log_delta(low, mu) + 1e-12 * abs(gdp_log_delta(low, mu))


@FAST
@given(eps=st.floats(0.0, 200.0), mu1=st.floats(0.01, 50.0), mu2=st.floats(0.01, 50.0))
def test_delta_non_decreasing_in_mu(eps, mu1, mu2):
    low, high = sorted((mu1, mu2))
    assert gdp_log_delta(eps, low) <= gdp_log_delta(eps, high) + 1e-12 * abs(
        gdp_log_delta(eps, high)
    )


def test_vectorised_shapes_and_scalars():
    out = gdp_delta(np.array([[0.0, 1.0], [2.0, 5.0]]), np.array([1.0, 2.0]))
    assert out.shape == (2, 2)
    assert out[0, 1] == pytest.approx(gdp_delta(1.0, 2.0))
    assert isinstance(gdp_delta(1.0, 1.0), float)
    eps = gdp_epsilon(np.array([1e-5, 1e-10]), 1.0)
    assert eps.shape == (2,) and eps[1] > eps[0]


# --------------------------------------------------------------------------- CLT mu
KAPPAS = {0.5: 7.280138, 0.75: 2.130626, 0.9: 1.463016, 1.0: 1.209253, 1.5: 0.648464, 2.0: 0.443747}

# n, B, K, sigma, R, mu (MINE), paper mu, eps at delta = 1e-5 (spec seed0 6.1)
TABLE_6_1 = [
    (600, 16, 38, 1.0, 93, 2.7110, 2.71, 14.64),
    (600, 16, 38, 0.9, 83, 3.0986, 3.10, 17.39),
    (600, 16, 38, 0.75, 64, 3.9625, 3.96, 24.07),
    (600, 16, 38, 1.0, 194, 3.9156, 3.92, 23.69),
    (600, 16, 38, 0.9, 176, 4.5121, 4.51, 28.72),
    (600, 16, 38, 0.75, 127, 5.5819, 5.58, 38.64),
    (600, 16, 38, 1.0, 386, 5.5231, 5.52, 38.07),
    (600, 16, 38, 0.9, 325, 6.1315, 6.13, 44.19),
    (600, 16, 38, 0.75, 245, 7.7529, 7.75, 62.32),
    (600, 8, 76, 1.0, 266, 3.2420, 3.24, 18.45),
    (600, 8, 76, 0.9, 229, 3.6394, 3.64, 21.49),
    (600, 8, 76, 0.75, 191, 4.8404, 4.84, 31.64),
    (500, 16, 32, 1.0, 468, 6.6970, 6.70, 50.21),
    (500, 16, 32, 0.75, 321, 9.7724, 9.77, 88.60),
    (500, 16, 32, 0.5, 207, 26.8142, 26.81, 472.93),
    (500, 16, 32, 1.0, 904, 9.3077, 9.31, 82.19),
    (500, 16, 32, 0.75, 671, 14.1289, 14.13, 159.20),
    (500, 16, 32, 0.5, 405, 37.5065, 37.51, 862.39),
]


@pytest.mark.parametrize(("sigma", "kappa"), sorted(KAPPAS.items()))
def test_kappa_values(sigma, kappa):
    assert fdp_clt_kappa(2 * sigma) == pytest.approx(kappa, abs=1e-6)  # z = 2 sigma


@pytest.mark.parametrize("row", TABLE_6_1)
def test_paper_mu_table(row):
    n, batch, local_steps, sigma, rounds, mine, paper, eps = row
    mu = fdp_clt_mu(batch / n, local_steps * rounds, 2 * sigma)  # the paper's sigma = z / 2
    assert mu == pytest.approx(mine, abs=1e-4)
    assert mu == pytest.approx(paper, abs=0.005)
    assert gdp_epsilon(1e-5, mu) == pytest.approx(eps, abs=0.01)
    assert math.sqrt(99) * mu == pytest.approx(math.sqrt(99) * mine, abs=1e-3)


def test_negative_checks_of_the_formula_choice():
    # (spec 6.1) Opacus multiplier fed as sigma (z = 4), and the Poisson/add-remove formula, differ
    assert fdp_clt_mu(16 / 600, 3534, 4.0) == pytest.approx(0.9948, abs=1e-4)
    assert poisson_clt_mu(16 / 600, 2.0, 3534) == pytest.approx(0.8449, abs=1e-4)


@pytest.mark.parametrize("sigma", [0.03, 0.05, 0.3, 0.9999, 1.0001, 3.0, 10.0, 1e2, 1e4, 1e8])
def test_kappa_is_stable_at_both_ends(sigma):
    # small sigma: e^{1/sigma^2} overflows a double (sigma < 0.0376), logs keep kappa right;
    # large sigma: kappa^2 ~ 1/(2 sigma^2) is a difference of O(1) terms, cancelled analytically
    with mpmath.workdps(80):
        s = mpmath.mpf(sigma)
        ref = mpmath.sqrt(
            mpmath.exp(1 / s**2) * mpmath.ncdf(1.5 / s) + 3 * mpmath.ncdf(-0.5 / s) - 2
        )
    assert fdp_clt_kappa(2 * sigma) == pytest.approx(float(ref), rel=1e-12)


def test_overflowing_mu_is_inf():
    assert fdp_clt_kappa(0.02) == math.inf  # sigma 0.01, e^5000: beyond doubles, reported as inf
    assert fdp_clt_mu(0.1, 10, 0.02) == math.inf
    assert poisson_clt_mu(0.1, 0.01, 10) == math.inf


def test_poisson_clt_formula():
    q, z, steps = 0.01, 1.1, 10_000
    assert poisson_clt_mu(q, z, steps) == pytest.approx(
        q * math.sqrt(steps * math.expm1(1 / z**2)), rel=1e-14
    )
    assert poisson_clt_mu(q, z, 0) == 0.0 and fdp_clt_mu(q, 0, z) == 0.0


def test_mu_squared_is_additive_in_steps():
    a, b = fdp_clt_mu(0.02, 1000, 1.6), fdp_clt_mu(0.02, 3000, 1.6)
    assert gdp_compose(a, b) == pytest.approx(fdp_clt_mu(0.02, 4000, 1.6), rel=1e-12)


# --------------------------------------------------------------------------- accountant
ACCOUNTANT = GdpCltAccountant()


def test_paper_row_through_an_event():
    event = dpsgd_event(
        noise_multiplier_from_paper_sigma(1.0),
        16 / 600,
        38 * 93,
        sampling="without-replacement",
        neighbouring="replace-one",
    )
    mu, exact = ACCOUNTANT.mu(event)
    assert mu == pytest.approx(2.7110, abs=1e-4) and not exact
    result = ACCOUNTANT.epsilon(event, 1e-5)
    assert result.kind == "estimate" and result.method == "gdp-clt"
    assert result.epsilon == pytest.approx(14.64, abs=0.01)
    assert result.extras["mu"] == pytest.approx(mu)
    assert "not a certified bound" in result.note
    assert result.sampling == "without-replacement (q=0.0266667)"
    back = ACCOUNTANT.delta(event, result.epsilon)
    assert back.delta == pytest.approx(1e-5, rel=1e-8) and back.kind == "estimate"


def test_poisson_event():
    event = dpsgd_event(1.1, 0.01, 10_000)
    mu, exact = ACCOUNTANT.mu(event)
    assert mu == pytest.approx(poisson_clt_mu(0.01, 1.1, 10_000)) and not exact
    assert ACCOUNTANT.epsilon(event, 1e-5).kind == "estimate"


@pytest.mark.parametrize(
    ("neighbouring", "sensitivity"), [("add-remove", 1.0), ("replace-one", 2.0)]
)
def test_unsampled_steps_are_exact(neighbouring, sensitivity):
    event = dpsgd_event(4.0, 1.0, 16, sampling="none", neighbouring=neighbouring)
    mu, exact = ACCOUNTANT.mu(event)
    assert exact and mu == pytest.approx(4 * sensitivity / 4.0)
    result = ACCOUNTANT.epsilon(event, 1e-5)
    assert result.kind == "bound" and result.note.startswith("exact")
    assert result.epsilon == pytest.approx(gdp_epsilon(1e-5, mu))
    # a rate of 1 under a sampling scheme is also unsampled
    scheme = "poisson" if neighbouring == "add-remove" else "without-replacement"
    full = dpsgd_event(4.0, 1.0, 16, sampling=scheme, neighbouring=neighbouring)
    assert ACCOUNTANT.mu(full) == (mu, True)


def test_heterogeneous_steps_compose():
    steps = (
        (NoisyStep(2.0, 1.0, Sampling.NONE), 9),
        (NoisyStep(1.0, 0.05, Sampling.POISSON), 400),
        (NoisyStep(0.7, 0.05, Sampling.POISSON), 0),  # releases nothing
    )
    event = PrivacyEvent(steps)
    mu, exact = ACCOUNTANT.mu(event)
    assert not exact
    assert mu == pytest.approx(gdp_compose(3 / 2.0, poisson_clt_mu(0.05, 1.0, 400)))
    assert ACCOUNTANT.delta(event, 1.0).kind == "estimate"


@pytest.mark.parametrize("last_exact", [False, True])
def test_one_clt_group_makes_the_whole_event_an_estimate_in_either_order(last_exact):
    """1000 Poisson steps and one unsampled step, in both orders: the CLT part makes the
    composition an estimate, whichever group comes last; two unsampled groups stay exact."""
    clt = (NoisyStep(1.0, 0.01, Sampling.POISSON), 1000)
    exact = (NoisyStep(2.0, 1.0, Sampling.NONE), 1)
    event = PrivacyEvent((clt, exact) if last_exact else (exact, clt))
    mu, is_exact = ACCOUNTANT.mu(event)
    assert not is_exact
    assert mu == pytest.approx(gdp_compose(poisson_clt_mu(0.01, 1.0, 1000), 0.5), rel=1e-12)
    for result in (ACCOUNTANT.epsilon(event, 1e-5), ACCOUNTANT.delta(event, 1.0)):
        assert result.kind == "estimate" and "not a certified bound" in result.note
    both = PrivacyEvent(((NoisyStep(2.0, 1.0, Sampling.NONE), 1),
                         (NoisyStep(4.0, 1.0, Sampling.NONE), 4)))
    assert ACCOUNTANT.mu(both) == (pytest.approx(math.sqrt(0.25 + 4 / 16)), True)
    assert ACCOUNTANT.epsilon(both, 1e-5).kind == "bound"


def test_warning_when_clt_exceeds_the_no_amplification_bound():
    event = dpsgd_event(0.5, 0.5, 100)
    result = ACCOUNTANT.epsilon(event, 1e-5)
    assert result.kind == "estimate" and "WARNING" in result.note


@pytest.mark.parametrize(
    ("step", "neighbouring", "words"),
    [
        (NoisyStep(1.0, 0.1, Sampling.POISSON, Noise.LAPLACE), "add-remove", "laplace"),
        (NoisyStep(1.0, 0.1, Sampling.POISSON), "replace-one", "Poisson"),
        (NoisyStep(1.0, 0.1, Sampling.WITHOUT_REPLACEMENT), "add-remove", "without replacement"),
    ],
)
def test_unsupported_events(step, neighbouring, words):
    event = PrivacyEvent(((step, 10),), neighbouring=Neighbouring(neighbouring))
    reason = ACCOUNTANT.unsupported_reason(event)
    assert reason is not None and words in reason
    assert not ACCOUNTANT.supports(event)
    with pytest.raises(UnsupportedEventError, match="gdp-clt"):
        ACCOUNTANT.epsilon(event, 1e-5)
    with pytest.raises(UnsupportedEventError):
        ACCOUNTANT.mu(event)


@FAST
@given(
    z1=st.floats(0.3, 20.0),
    z2=st.floats(0.3, 20.0),
    q=st.floats(1e-4, 0.99),
    steps=st.integers(1, 100_000),
    scheme=st.sampled_from(["poisson", "without-replacement"]),
)
def test_epsilon_non_increasing_in_noise(z1, z2, q, steps, scheme):
    neighbouring = "add-remove" if scheme == "poisson" else "replace-one"
    low, high = sorted((z1, z2))
    results = [
        ACCOUNTANT.epsilon(
            dpsgd_event(z, q, steps, sampling=scheme, neighbouring=neighbouring), 1e-5
        )
        for z in (low, high)
    ]
    assert all(r.kind == "estimate" for r in results)  # sampled events are never bounds
    assert results[1].epsilon <= results[0].epsilon * (1 + 1e-9) + 1e-12


@FAST
@given(
    z=st.floats(0.3, 20.0),
    q1=st.floats(1e-4, 0.99),
    q2=st.floats(1e-4, 0.99),
    s1=st.integers(1, 100_000),
    s2=st.integers(1, 100_000),
    scheme=st.sampled_from(["poisson", "without-replacement"]),
)
def test_epsilon_non_decreasing_in_steps_and_rate(z, q1, q2, s1, s2, scheme):
    # (within q < 1: at q = 1 the exact unsampled mu takes over, see the estimate's note)
    neighbouring = "add-remove" if scheme == "poisson" else "replace-one"

    def eps(q, steps):
        event = dpsgd_event(z, q, steps, sampling=scheme, neighbouring=neighbouring)
        result = ACCOUNTANT.epsilon(event, 1e-5)
        assert result.kind == "estimate"
        return result.epsilon

    (qa, qb), (sa, sb) = sorted((q1, q2)), sorted((s1, s2))
    assert eps(qa, s1) <= eps(qb, s1) * (1 + 1e-9) + 1e-12
    assert eps(q1, sa) <= eps(q1, sb) * (1 + 1e-9) + 1e-12


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: gdp_delta(-1.0, 1.0), "epsilon"),
        (lambda: gdp_delta(float("nan"), 1.0), "epsilon"),
        (lambda: gdp_delta(1.0, -0.5), "mu"),
        (lambda: gdp_delta(1.0, float("nan")), "mu"),
        (lambda: gdp_delta(np.array([1.0, -1.0]), 1.0), "epsilon"),
        (lambda: gdp_log_delta(1.0, float("inf")), "mu"),
        (lambda: gdp_epsilon(0.0, 1.0), "delta"),
        (lambda: gdp_epsilon(1.0, 1.0), "delta"),
        (lambda: gdp_epsilon(float("nan"), 1.0), "delta"),
        (lambda: gdp_epsilon(1e-5, -1.0), "mu"),
        (lambda: gdp_mu_for(-1.0, 1e-5), "epsilon"),
        (lambda: gdp_mu_for(1.0, 1.5), "delta"),
        (lambda: poisson_clt_mu(0.0, 1.0, 10), "sampling_rate"),
        (lambda: poisson_clt_mu(0.1, 0.0, 10), "noise_multiplier"),
        (lambda: poisson_clt_mu(0.1, 1.0, -1), "steps"),
        (lambda: fdp_clt_mu(1.5, 10, 1.0), "sampling_rate"),
        (lambda: fdp_clt_mu(0.1, 2.5, 1.0), "steps"),
        (lambda: fdp_clt_mu(0.1, 10, float("nan")), "noise_multiplier"),
        (lambda: fdp_clt_kappa(-1.0), "noise_multiplier"),
        (lambda: gdp_delta("1", 1.0), "epsilon"),
        (lambda: ACCOUNTANT.epsilon(dpsgd_event(1.0, 0.1, 10), 0.0), "delta"),
        (lambda: ACCOUNTANT.delta(dpsgd_event(1.0, 0.1, 10), -1.0), "epsilon"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()
