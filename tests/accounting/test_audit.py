"""Tests of the privacy auditor (privfl.accounting.audit).

References are written independently of the module: closed forms evaluated with mpmath, scipy
quadrature of (p - e^eps q)_+ on plain densities, dp-accounting's pessimistic PLD, and the
seed-003 Theorem 4.1 formula in its survival-function form (spec seed3 section 4.2).
"""

from __future__ import annotations

import json
import math
import os

import mpmath
import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, special, stats

from privfl.accounting import audit as A  # noqa: N812
from privfl.accounting import participation as rp
from privfl.accounting.events import (
    Neighbouring,
    Noise,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    dpsgd_event,
)
from privfl.accounting.methods import account

FAST = settings(max_examples=int(os.environ.get("PRIVFL_HYPOTHESIS_EXAMPLES", "20")), deadline=None)


@pytest.fixture(autouse=True, scope="module")
def _mpmath_40_digits():
    """This module's references use 40 digits (a scoped setting: mpmath's precision is global)."""
    with mpmath.workdps(40):
        yield



# ---------------------------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------------------------
def mp_gaussian_delta(epsilon: float, mu: float) -> mpmath.mpf:
    """Balle-Wang: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), at 40 digits."""
    eps, mu = mpmath.mpf(epsilon), mpmath.mpf(mu)
    return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.exp(eps) * mpmath.ncdf(-eps / mu - mu / 2)


def mp_laplace_delta(epsilon: float, eps0: float) -> mpmath.mpf:
    """Laplace(D, b) vs Laplace(0, b), eps0 = D / b: delta = 1 - e^{(eps - eps0)/2} (eps < eps0)."""
    if epsilon >= eps0:
        return mpmath.mpf(0)
    return 1 - mpmath.exp((mpmath.mpf(epsilon) - mpmath.mpf(eps0)) / 2)


def quad_reference(p_pdf, q_pdf, epsilon: float, low: float, high: float) -> float:
    """int (p - e^eps q)_+ by scipy quad on plain densities, split at sign changes on a grid."""
    gamma = math.exp(epsilon)

    def diff(x):
        return p_pdf(x) - gamma * q_pdf(x)

    xs = np.linspace(low, high, 400_001)
    values = diff(xs)
    idx = np.flatnonzero((values[1:] > 0) != (values[:-1] > 0))
    roots = [optimize.brentq(diff, xs[i], xs[i + 1], xtol=1e-15) for i in idx]
    points = [low, *roots, high]
    total = 0.0
    for a, b in zip(points[:-1], points[1:], strict=True):
        if diff(0.5 * (a + b)) > 0:
            value, _ = integrate.quad(
                lambda x: max(float(diff(x)), 0.0), a, b, epsabs=1e-15, epsrel=1e-13, limit=500
            )
            total += value
    return total


def theorem41_delta(epsilon: float, sigma: float, p: float, q: float, d: int, clip=1.0):
    """Seed 003 Theorem 4.1 (Eq. 6) in the survival-function form of spec seed3 section 4.2.

    Returns (delta, z_star). Written from the spec, independently of privfl.accounting.audit.
    """
    pq = p * q
    eps1 = math.log1p(math.expm1(epsilon) / pq)
    alpha1 = math.exp(eps1)
    beta = math.exp(epsilon - eps1)
    c1 = (1 - p) / (1 - pq)
    c2 = p * (1 - q) / (1 - pq)
    cb1 = (1 - beta) * c1
    cb2 = (1 - beta) * c2 + beta
    i = np.arange(d + 1)
    log_b = stats.binom.logpmf(i, d, q)
    keep = log_b >= log_b.max() - 80
    i, log_b = i[keep], log_b[keep]
    m1, m0 = (i + 1) * clip, i * clip

    def F(z):
        top = special.logsumexp(log_b + (z * m1 - m1**2 / 2) / sigma**2)
        mid = math.log(alpha1 * cb2) + special.logsumexp(log_b + (z * m0 - m0**2 / 2) / sigma**2)
        return top - np.logaddexp(mid, math.log(alpha1 * cb1))

    low, high = -1.0, 1.0
    while F(low) > 0:
        low *= 2
    while F(high) < 0:
        high *= 2
    z = optimize.brentq(F, low, high, xtol=1e-14)
    log_sf = special.log_ndtr
    plus = special.logsumexp(log_b + log_sf(-(z - m1) / sigma))
    minus = np.logaddexp(
        math.log(alpha1 * cb2) + special.logsumexp(log_b + log_sf(-(z - m0) / sigma)),
        math.log(alpha1 * cb1) + log_sf(-z / sigma),
    )
    return pq * math.exp(plus) * -math.expm1(minus - plus), z


# ---------------------------------------------------------------------------------------------
# Exact divergence against closed forms
# ---------------------------------------------------------------------------------------------
@FAST
@given(
    sensitivity=st.floats(0.05, 5.0),
    std=st.floats(0.2, 5.0),
    epsilon=st.floats(0.0, 20.0),
)
def test_gaussian_matches_balle_wang(sensitivity, std, epsilon):
    mu = sensitivity / std
    ref = mp_gaussian_delta(epsilon, mu)
    pair = A.gaussian_pair(sensitivity, std)
    for P, Q in ((pair.P, pair.Q), (pair.Q, pair.P)):
        result = A.exact_divergence(P, Q, epsilon)
        err = abs(mpmath.mpf(result.value) - ref)
        assert err <= 1e-8 * ref + 1e-300
        assert err <= result.error + 1e-14 * ref + 1e-300  # the reported error bound is honest


def test_gaussian_known_values():
    # spec seed3 section 7: delta_G at (eps, sigma) = (1, 1), (0.5, 2), (5.0225, 0.5674)
    for epsilon, sigma, expected in [
        (1.0, 1.0, 0.126936737506),
        (0.5, 2.0, 0.0524403232877),
        (5.0225, 0.5674, 0.0100261470570),
    ]:
        assert A.hockey_stick(A.gaussian(1.0, sigma), A.gaussian(0.0, sigma), epsilon) == (
            pytest.approx(expected, rel=1e-10)
        )


@FAST
@given(sensitivity=st.floats(0.05, 5.0), scale=st.floats(0.1, 5.0), epsilon=st.floats(0.0, 10.0))
def test_laplace_matches_closed_form(sensitivity, scale, epsilon):
    ref = mp_laplace_delta(epsilon, sensitivity / scale)
    pair = A.laplace_pair(sensitivity, scale)
    forward, backward, worst = A.hockey_stick_both(pair.P, pair.Q, epsilon)
    for value in (forward, backward, worst):
        assert abs(mpmath.mpf(value) - ref) <= 1e-8 * ref + 1e-15


@FAST
@given(
    q=st.floats(1e-4, 0.99),
    z=st.floats(0.3, 5.0),
    epsilon=st.floats(0.0, 5.0),
)
def test_subsampled_gaussian_remove_direction_matches_amplification_identity(q, z, epsilon):
    # E((1-q) N0 + q N1 || N0) = q delta_G(log(1 + (e^eps - 1)/q)) exactly (advanced joint
    # convexity is an equality against the mixture's own component)
    ref = q * mp_gaussian_delta(float(mpmath.log(1 + mpmath.expm1(epsilon) / q)), 1.0 / z)
    pair = A.subsampled_gaussian_pair(q, z)
    value = A.hockey_stick(pair.P, pair.Q, epsilon)
    assert abs(mpmath.mpf(value) - ref) <= 1e-8 * ref + 1e-300


@pytest.mark.parametrize(
    ("q", "z", "epsilon"), [(0.01, 1.0, 1.0), (0.1, 0.8, 0.5), (0.5, 2.0, 0.1)]
)
def test_subsampled_gaussian_matches_dp_accounting_pessimistic_pld(q, z, epsilon):
    pair = A.subsampled_gaussian_pair(q, z)
    forward, backward, worst = A.hockey_stick_both(pair.P, pair.Q, epsilon)
    upper = dp_pld.from_gaussian_mechanism(
        standard_deviation=z,
        sensitivity=1.0,
        sampling_prob=q,
        value_discretization_interval=1e-4,
        pessimistic_estimate=True,
    ).get_delta_for_epsilon(epsilon)
    # dp-accounting's pessimistic PLD is an upper bound, tight to discretisation error (measured
    # 1e-13 relative at this interval; at 1e-5 its float rounding puts it ~2e-12 *below* exact)
    assert worst <= upper * (1 + 1e-11)
    assert abs(upper - worst) <= 1e-8 * worst


@pytest.mark.parametrize(
    ("q", "z", "epsilon", "relation"),
    [
        (0.5, 2.0, 0.1, "add-remove"),
        (0.2, 0.7, 0.3, "add-remove"),
        (0.1, 1.0, 0.2, "replace-one"),
        (0.6, 3.0, 0.05, "replace-one"),
    ],
)
def test_both_directions_match_independent_quadrature(q, z, epsilon, relation):
    pair = A.subsampled_gaussian_pair(q, z, neighbouring=relation)
    shift = -1.0 if relation == "replace-one" else 0.0

    def p_pdf(x):
        return (1 - q) * stats.norm.pdf(x, 0, z) + q * stats.norm.pdf(x, 1, z)

    def q_pdf(x):
        if relation == "replace-one":
            return (1 - q) * stats.norm.pdf(x, 0, z) + q * stats.norm.pdf(x, shift, z)
        return stats.norm.pdf(x, 0, z)

    low, high = -40 * z - 1, 40 * z + 1
    forward = quad_reference(p_pdf, q_pdf, epsilon, low, high)
    backward = quad_reference(q_pdf, p_pdf, epsilon, low, high)
    ours = A.hockey_stick_both(pair.P, pair.Q, epsilon)
    assert ours[0] == pytest.approx(forward, rel=1e-8, abs=1e-12)
    assert ours[1] == pytest.approx(backward, rel=1e-8, abs=1e-12)


def test_mixture_of_gaussians_and_laplaces_matches_quadrature_and_quad_method():
    P = A.mixture([A.gaussian(-2, 0.5), A.laplace(1, 0.7), A.gaussian(3, 2)], [0.3, 0.3, 0.4])
    Q = A.mixture([A.gaussian(-1, 0.5), A.laplace(1.2, 0.7), A.gaussian(2, 2)], [0.2, 0.5, 0.3])

    def pdf(weights, parts):
        return lambda x: sum(w * f(x) for w, f in zip(weights, parts, strict=True))

    p_pdf = pdf(
        [0.3, 0.3, 0.4],
        [
            lambda x: stats.norm.pdf(x, -2, 0.5),
            lambda x: stats.laplace.pdf(x, 1, 0.7),
            lambda x: stats.norm.pdf(x, 3, 2),
        ],
    )
    q_pdf = pdf(
        [0.2, 0.5, 0.3],
        [
            lambda x: stats.norm.pdf(x, -1, 0.5),
            lambda x: stats.laplace.pdf(x, 1.2, 0.7),
            lambda x: stats.norm.pdf(x, 2, 2),
        ],
    )
    for epsilon in (0.0, 0.3, 1.5):
        ref = quad_reference(p_pdf, q_pdf, epsilon, -60, 60)
        exact = A.exact_divergence(P, Q, epsilon)
        quad = A.exact_divergence(P, Q, epsilon, method="quad")
        assert exact.value == pytest.approx(ref, rel=1e-9, abs=1e-13)
        assert quad.value == pytest.approx(exact.value, rel=1e-10, abs=1e-14)


def test_crossings_closer_than_the_grid_are_found():
    # h = log p - log q has a maximum just above 0: its two crossings lie inside one grid cell
    P = A.gaussian(0, 1)
    Q = A.mixture([A.gaussian(-1, 1), A.gaussian(1, 1)], [0.4, 0.6])
    res = optimize.minimize_scalar(
        lambda x: -(P.logpdf(x) - Q.logpdf(x)),
        bounds=(-1, 1),
        method="bounded",
        options={"xatol": 1e-12},
    )
    h_max = -float(res.fun)
    for gap in (1e-6, 1e-9):
        result = A.exact_divergence(P, Q, h_max - gap)
        assert len(result.crossings) == 2
        assert result.crossings[1] - result.crossings[0] < 1.0 / 16
        ref = quad_reference(
            lambda x: stats.norm.pdf(x),
            lambda x: 0.4 * stats.norm.pdf(x, -1) + 0.6 * stats.norm.pdf(x, 1),
            h_max - gap,
            result.crossings[0] - 0.01,
            result.crossings[1] + 0.01,
        )
        assert result.value > 0
        assert result.value == pytest.approx(ref, rel=1e-6)


def test_tiny_delta_keeps_relative_accuracy():
    # delta ~ 1e-15 and ~ 1e-193: no cancellation against O(1) masses; the error bound holds
    for epsilon, rel in ((8.0, 1e-12), (30.0, 1e-10)):
        result = A.exact_divergence(A.gaussian(1, 1), A.gaussian(0, 1), epsilon)
        ref = mp_gaussian_delta(epsilon, 1.0)
        err = abs(mpmath.mpf(result.value) - ref)
        assert err <= rel * ref
        assert err <= result.error


def test_identical_laws_and_epsilon_zero():
    law = A.mixture([A.gaussian(0, 1), A.laplace(1, 2)], [0.5, 0.5])
    assert A.hockey_stick(law, law, 0.0) == 0.0
    # epsilon = 0: total variation distance; for N(1,1) vs N(0,1) it is 2 Phi(1/2) - 1
    tv = A.hockey_stick(A.gaussian(1, 1), A.gaussian(0, 1), 0.0)
    assert tv == pytest.approx(2 * special.ndtr(0.5) - 1, rel=1e-13)


# ---------------------------------------------------------------------------------------------
# Monte Carlo
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("interval", ["bernstein", "clt"])
@pytest.mark.parametrize(
    ("pair", "epsilon"),
    [
        (A.gaussian_pair(1.0, 1.0), 1.0),
        (A.laplace_pair(1.0, 1.0), 0.3),
        (A.subsampled_gaussian_pair(0.2, 0.8), 0.5),
        (A.subsampled_gaussian_pair(0.5, 2.0, neighbouring="replace-one"), 0.05),
    ],
    ids=["gaussian", "laplace", "subsampled", "replace-one"],
)
def test_monte_carlo_interval_covers_exact(pair, epsilon, interval):
    for P, Q in ((pair.P, pair.Q), (pair.Q, pair.P)):
        exact = A.hockey_stick(P, Q, epsilon)
        mc = A.monte_carlo_hockey_stick(
            P, Q, epsilon, 200_000, seed=7, confidence=0.999, interval=interval
        )
        assert mc.lower <= exact <= mc.upper
        assert mc.samples == 200_000 and mc.interval == interval and mc.seed == 7
        if exact > 1e-3:
            assert abs(mc.estimate - exact) <= 5 * mc.std_error


def test_monte_carlo_is_reproducible_and_bernstein_is_wider():
    pair = A.subsampled_gaussian_pair(0.2, 0.8)
    a = A.monte_carlo_hockey_stick(pair.P, pair.Q, 0.5, 10_000, seed=3)
    b = A.monte_carlo_hockey_stick(pair.P, pair.Q, 0.5, 10_000, seed=3)
    c = A.monte_carlo_hockey_stick(pair.P, pair.Q, 0.5, 10_000, seed=3, interval="clt")
    assert a == b
    assert a.estimate == c.estimate
    assert a.upper - a.lower > c.upper - c.lower


def test_composed_gaussian_is_exact_and_monte_carlo_agrees():
    pair = A.gaussian_pair(0.5, 1.0).compose(12)
    mu = 0.5 * math.sqrt(12)
    result = A.exact_divergence(pair.P, pair.Q, 1.0)
    assert "composition of Gaussian shifts" in result.method
    assert abs(mpmath.mpf(result.value) - mp_gaussian_delta(1.0, mu)) <= 1e-12
    mc = A.monte_carlo_hockey_stick(pair.P, pair.Q, 1.0, 100_000, seed=1, confidence=0.999)
    assert mc.lower <= result.value <= mc.upper
    # heterogeneous composition of Gaussian shifts: mu^2 adds up
    P = A.product((A.gaussian(1, 2), 3), A.gaussian(0.5, 1))
    Q = A.product((A.gaussian(0, 2), 3), A.gaussian(0.0, 1))
    mu = math.sqrt(3 * 0.25 + 0.25)
    assert A.hockey_stick(P, Q, 0.5) == pytest.approx(float(mp_gaussian_delta(0.5, mu)), rel=1e-12)


def test_composition_without_exact_form_needs_monte_carlo():
    pair = A.subsampled_gaussian_pair(0.1, 1.0).compose(5)
    with pytest.raises(A.UnsupportedAuditError, match="Monte Carlo"):
        A.exact_divergence(pair.P, pair.Q, 1.0)
    with pytest.raises(ValueError, match="monte_carlo_samples"):
        pair.audit(1.0, 1e-3)
    report = pair.audit(1.0, 1e-3, monte_carlo_samples=20_000, seed=0)
    assert report.basis == "monte-carlo" and report.delta is None


# ---------------------------------------------------------------------------------------------
# Rigorous accountants hold on worst-case instances
# ---------------------------------------------------------------------------------------------
SINGLE_STEPS = [
    (1.0, 0.01, 1e-5, "add-remove"),
    (0.8, 0.1, 1e-3, "add-remove"),
    (2.0, 0.5, 1e-6, "add-remove"),
    (0.6, 0.02, 1e-5, "add-remove"),
    (1.0, 1.0, 1e-5, "add-remove"),
    (3.0, 1.0, 1e-3, "replace-one"),
    (1.0, 0.1, 1e-4, "replace-one"),
]


@pytest.mark.parametrize(("z", "q", "delta", "relation"), SINGLE_STEPS)
def test_rigorous_accountants_hold_on_one_step(z, q, delta, relation):
    event = dpsgd_event(z, q, 1, neighbouring=relation)
    # privfl's RDP accountant refuses Poisson sampling with replace-one neighbours
    methods = ("pld",) if relation == "replace-one" and q < 1 else ("rdp", "pld")
    audits = A.audit_accountants(event, delta, methods=methods)
    assert set(audits) == set(methods)
    for method, report in audits.items():
        assert report.basis == "exact"
        assert not report.violated, report.summary
        assert report.delta <= delta * (1 + 1e-9), method
    # the PLD accountant is tight: its epsilon leaves little slack on the worst-case pair
    assert audits["pld"].delta >= 0.5 * delta


@settings(max_examples=int(os.environ.get("PRIVFL_HYPOTHESIS_EXAMPLES", "8")), deadline=None)
@given(
    z=st.floats(0.5, 4.0),
    q=st.floats(1e-3, 1.0),
    log10_delta=st.floats(-8.0, -2.0),
)
def test_rigorous_accountants_hold_on_one_step_property(z, q, log10_delta):
    delta = 10.0**log10_delta
    audits = A.audit_accountants(dpsgd_event(z, q, 1), delta, methods=("rdp", "pld"))
    for report in audits.values():
        assert report.delta <= delta * (1 + 1e-9), report.summary


@pytest.mark.parametrize(
    ("z", "steps", "relation"), [(1.0, 10, "add-remove"), (4.0, 50, "replace-one")]
)
def test_rigorous_accountants_hold_on_unsampled_compositions(z, steps, relation):
    event = dpsgd_event(z, 1.0, steps, neighbouring=relation)
    for report in A.audit_accountants(event, 1e-5).values():
        assert report.basis == "exact"
        assert "composition of Gaussian shifts" in report.method
        assert report.delta <= 1e-5 * (1 + 1e-9), report.summary


@pytest.mark.parametrize(("z", "q", "steps"), [(1.0, 0.1, 10), (2.0, 0.2, 20)])
def test_rigorous_accountants_hold_on_sampled_compositions_by_monte_carlo(z, q, steps):
    delta = 1e-2
    event = dpsgd_event(z, q, steps)
    audits = A.audit_accountants(
        event, delta, monte_carlo_samples=60_000, seed=11, confidence=1 - 1e-6
    )
    for report in audits.values():
        assert report.basis == "monte-carlo"
        assert not report.violated, report.summary  # one-sided lower ends below delta


def _one_sided_pair():
    """P = N(0,1), Q = 0.9 N(0,1) + 0.1 N(1,1): at epsilon = 0.1 the claim delta = 1e-3 fails in
    the Q||P direction only."""
    return A.gaussian(0.0, 1.0), A.mixture([A.gaussian(0.0, 1.0), A.gaussian(1.0, 1.0)],
                                           [0.9, 0.1])


def test_the_verdict_and_delta_take_the_worse_of_both_directions():
    P, Q = _one_sided_pair()
    e = math.exp(0.1)
    # closed forms: Q > e^0.1 P iff x > x0, P > e^0.1 Q iff x < x1
    x0, x1 = 0.5 + math.log(10 * (e - 0.9)), 0.5 + math.log(10 * (1 / e - 0.9))
    sf, cdf = stats.norm.sf, stats.norm.cdf
    backward = 0.9 * sf(x0) + 0.1 * sf(x0 - 1) - e * sf(x0)
    forward = cdf(x1) - e * (0.9 * cdf(x1) + 0.1 * cdf(x1 - 1))
    assert backward == pytest.approx(0.0184719, rel=1e-5) and forward < 1e-3
    report = A.audit(P, Q, 0.1, 1e-3)
    assert report.delta_forward == pytest.approx(forward, rel=1e-9)
    assert report.delta_backward == pytest.approx(backward, rel=1e-9)
    assert report.delta == report.delta_backward
    assert report.violated and report.worst_direction == "Q||P"
    assert report.margin == pytest.approx(backward - 1e-3, rel=1e-9)
    assert "VIOLATED" in report.summary
    # the same pair the other way round: violated in the first direction
    swapped = A.audit(Q, P, 0.1, 1e-3)
    assert swapped.violated and swapped.worst_direction == "P||Q"
    assert swapped.delta == pytest.approx(backward, rel=1e-9)
    # a claim above both directions holds
    assert not A.audit(P, Q, 0.1, 0.02).violated


def test_monte_carlo_verdict_takes_the_worse_of_both_directions():
    """Two steps of the pair (no exact form): at delta = 0.02 only the Q||P interval lies
    above the claim."""
    P, Q = (A.compose(law, 2) for law in _one_sided_pair())
    report = A.audit(P, Q, 0.1, 0.02, monte_carlo_samples=20_000, seed=1)
    assert report.basis == "monte-carlo"
    assert report.monte_carlo["P||Q"].upper < 0.02 < report.monte_carlo["Q||P"].lower
    assert report.violated and report.worst_direction == "Q||P"
    assert report.margin == pytest.approx(report.monte_carlo["Q||P"].lower - 0.02)


def test_monte_carlo_detects_an_understated_epsilon():
    event = dpsgd_event(1.0, 0.1, 10)
    (result,) = account(event, delta=1e-2, methods="pld").results
    pair = A.pair_for_event(event)
    report = pair.audit(0.5 * result.epsilon, 1e-2, monte_carlo_samples=60_000, seed=5)
    assert report.violated
    assert "VIOLATED" in report.summary
    assert report.worst_direction.startswith("remove")


def test_pair_for_event_shapes():
    pair = A.pair_for_event(dpsgd_event(1.0, 0.1, 1))
    assert pair.worst_case and isinstance(pair.P, A.MixtureLaw)
    mixed = PrivacyEvent(
        ((NoisyStep(1.0, 0.1), 3), (NoisyStep(2.0, 1.0, Sampling.NONE), 2)),
        neighbouring=Neighbouring.ADD_REMOVE,
    )
    pair = A.pair_for_event(mixed)
    assert isinstance(pair.P, A.ProductLaw) and pair.P.steps == 5
    laplace_event = dpsgd_event(1.0, 1.0, 1, noise=Noise.LAPLACE)
    pair = A.pair_for_event(laplace_event)
    assert A.hockey_stick(pair.P, pair.Q, 0.5) == pytest.approx(1 - math.exp(-0.25), rel=1e-12)
    with pytest.raises(A.UnsupportedAuditError, match="without-replacement"):
        A.pair_for_event(dpsgd_event(1.0, 0.1, 1, sampling=Sampling.WITHOUT_REPLACEMENT))


# ---------------------------------------------------------------------------------------------
# Seed 003: Theorem 4.1 is not a worst-case bound (spec seed3 section 4.6, section 7 item 10)
# ---------------------------------------------------------------------------------------------
def test_participation_aligned_instance_equals_theorem41():
    # spec section 7: (eps, sigma, p, q, d) = (0.5, 1, 0.1, 0.1, 10): delta = 7.1327676138e-7
    thm, z_star = theorem41_delta(0.5, 1.0, 0.1, 0.1, 10)
    assert thm == pytest.approx(7.1327676138e-7, rel=1e-9)
    assert z_star == pytest.approx(7.020639677689849, rel=1e-12)
    pair = A.participation_pair(0.1, 0.1, 10, 1.0, scale=1.0)
    result = A.exact_divergence(pair.P, pair.Q, 0.5)
    assert result.value == pytest.approx(thm, rel=1e-9)
    assert result.crossings == pytest.approx((z_star,), rel=1e-12)
    assert A.hockey_stick(pair.Q, pair.P, 0.5) == 0.0
    # and privfl's own Theorem 4.1 implementation (privfl.accounting.participation)
    theirs = rp.participation_delta("theorem-4.1", 0.5, 0.1, 0.1, 10, 1.0, direction="forward")
    assert theirs == pytest.approx(result.value, rel=1e-9)
    assert rp.theorem41_zstar(0.5, 0.1, 0.1, 10, 1.0) == pytest.approx(z_star, rel=1e-12)


@pytest.mark.parametrize(
    ("p", "q", "d", "sigma", "epsilon"),
    [
        (0.1, 0.001, 1000, 0.646, 0.015),  # paper section 6.2
        (0.001, 0.1, 30, 1.065, 0.015),  # paper section 6.1
        (0.1, 0.1, 10, 1.0, 0.5),
        (0.5, 0.3, 5, 0.8, 0.3),
    ],
)
def test_rigorous_participation_bounds_hold_on_the_aligned_family(p, q, d, sigma, epsilon):
    # per-S1 convexity and WCS are upper bounds: no aligned instance (any scale a) may exceed
    # them; Theorem 4.1 is exceeded by some instance in the paper's settings
    bound_b = rp.participation_delta("per-s1-convexity", epsilon, p, q, d, sigma)
    bound_wcs = rp.participation_delta("wcs", epsilon, p, q, d, sigma)
    worst = 0.0
    for scale in (0.0, 0.25, 0.296, 0.5, 0.85, 1.0):
        pair = A.participation_pair(p, q, d, sigma, scale=scale)
        report = pair.audit(epsilon, bound_b)
        assert not report.violated, report.summary
        assert report.delta <= bound_wcs
        worst = max(worst, report.delta)
    thm = rp.participation_delta("theorem-4.1", epsilon, p, q, d, sigma, direction="forward")
    assert worst > thm


def test_participation_without_other_records_is_centralized_sampling():
    for scale, d in ((1.0, 0), (0.0, 30)):
        pair = A.participation_pair(0.1, 0.1, d, 1.0, scale=scale)
        cs = A.subsampled_gaussian_pair(0.01, 1.0)
        assert A.hockey_stick(pair.P, pair.Q, 0.5) == pytest.approx(
            A.hockey_stick(cs.P, cs.Q, 0.5), rel=1e-11
        )
        assert A.hockey_stick(pair.P, pair.Q, 0.5) == pytest.approx(2.2145190132e-7, rel=1e-9)


def test_seed3_theorem41_claim_is_violated_at_the_papers_sigma():
    # paper section 6.2: p = 0.1, q = 0.001, d = 1000, sigma = 0.646 claimed (0.015, 1e-6)
    epsilon, claimed = 0.015, 1e-6
    thm, _ = theorem41_delta(epsilon, 0.646, 0.1, 0.001, 1000)
    assert thm == pytest.approx(5.12e-20, rel=1e-2)  # the theorem's own delta at this sigma
    assert rp.participation_delta(
        "theorem-4.1", epsilon, 0.1, 0.001, 1000, 0.646, direction="forward"
    ) == pytest.approx(thm, rel=1e-8)
    pair = A.participation_pair(0.1, 0.001, 1000, 0.646, clip_norm=1.0, scale=0.296)
    report = pair.audit(epsilon, claimed)
    assert report.basis == "exact"
    assert report.violated
    assert report.delta == pytest.approx(1.7343e-6, rel=1e-3)
    assert report.delta_forward == report.delta and report.worst_direction.startswith("add")
    assert report.delta_backward == 0.0
    assert report.error < 1e-12
    assert "VIOLATED" in report.summary and "disproves" in report.summary
    assert 0 < pair.truncation < 1e-30
    # the theorem's own (even smaller) delta is violated too
    assert pair.audit(epsilon, thm).violated
    # the aligned instance at scale 1 reproduces the theorem (a configuration, not a bound)
    aligned = A.participation_pair(0.1, 0.001, 1000, 0.646, scale=1.0)
    assert A.hockey_stick(aligned.P, aligned.Q, epsilon) == pytest.approx(thm, rel=1e-6)


def test_seed3_exact_value_agrees_with_monte_carlo():
    pair = A.participation_pair(0.1, 0.001, 1000, 0.646, scale=0.296)
    for interval in ("clt", "bernstein"):
        report = pair.audit(
            0.015, 1e-6, monte_carlo_samples=200_000, seed=2, confidence=0.999, interval=interval
        )
        assert report.monte_carlo_consistent
        assert "Monte Carlo check" in report.summary
    # at delta ~ 1e-6 only the CLT interval is informative with 2e5 draws (Bernstein's additive
    # floor is ~7 ln(4/(1-c)) / (3n) ~ 1e-4)
    clt = pair.audit(0.015, 1e-6, monte_carlo_samples=200_000, seed=2, interval="clt")
    forward = clt.monte_carlo[pair.directions[0]]
    assert 0 < forward.lower < clt.delta < forward.upper < 5e-6


# ---------------------------------------------------------------------------------------------
# Reports and input validation
# ---------------------------------------------------------------------------------------------
def test_report_to_dict_is_json_ready_and_labelled():
    pair = A.subsampled_gaussian_pair(0.01, 1.0)
    report = pair.audit(0.5, 1e-5, monte_carlo_samples=1000, seed=0)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["violated"] is False and data["basis"] == "exact"
    assert set(data["monte_carlo"]) == set(pair.directions)
    assert data["parameters"]["sampling_rate"] == 0.01
    assert data["worst_case"] is True and "dominating pair" in data["summary"]
    instance = A.participation_pair(0.1, 0.1, 10, 1.0).audit(0.5, 1e-3)
    assert instance.worst_case is False and "does not prove" in instance.summary
    # Monte Carlo that cannot resolve the claim says so
    composed = pair.compose(20).audit(1.0, 1e-5, monte_carlo_samples=2000, seed=0)
    assert not composed.violated and not composed.conclusive
    assert "INCONCLUSIVE" in composed.summary
    # a claim equal to the truth up to 1e-10 relative is not flagged (rtol = 1e-9)
    exact = report.delta
    assert not pair.audit(0.5, exact * (1 - 1e-10)).violated
    assert pair.audit(0.5, exact * (1 - 1e-6)).violated


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: A.gaussian(0.0, -1.0), "std"),
        (lambda: A.gaussian(float("nan"), 1.0), "mean"),
        (lambda: A.laplace(0.0, 0.0), "scale"),
        (lambda: A.mixture([A.gaussian()], [0.5]), "weights"),
        (lambda: A.mixture([A.gaussian(), A.gaussian(1)], [1.5, -0.5]), "weights[0]"),
        (lambda: A.mixture([A.gaussian()], [1.0, 0.0]), "weights"),
        (lambda: A.mixture([], []), "components"),
        (lambda: A.mixture(["x"], [1.0]), "components[0]"),
        (lambda: A.compose(A.gaussian(), 0), "times"),
        (lambda: A.hockey_stick(A.gaussian(), A.gaussian(1), -0.5), "epsilon"),
        (lambda: A.hockey_stick("P", A.gaussian(1), 0.5), "P"),
        (lambda: A.hockey_stick(A.gaussian(), 3.0, 0.5), "Q"),
        (lambda: A.exact_divergence(A.gaussian(), A.gaussian(1), 0.5, method="mc"), "method"),
        (lambda: A.audit(A.gaussian(), A.gaussian(1), 1.0, 1.0), "delta"),
        (lambda: A.audit(A.gaussian(), A.gaussian(1), 1.0, -0.1), "delta"),
        (
            lambda: A.audit(A.gaussian(), A.gaussian(1), 1.0, 0.1, monte_carlo_samples=1),
            "monte_carlo_samples",
        ),
        (lambda: A.audit(A.gaussian(), A.gaussian(1), 1.0, 0.1, rtol=-1.0), "rtol"),
        (
            lambda: A.audit(A.gaussian(), A.gaussian(1), 1.0, 0.1, directions=("a", "a")),
            "directions",
        ),
        (
            lambda: A.monte_carlo_hockey_stick(
                A.gaussian(), A.gaussian(1), 1.0, 100, confidence=1.0
            ),
            "confidence",
        ),
        (
            lambda: A.monte_carlo_hockey_stick(A.gaussian(), A.gaussian(1), 1.0, 100, interval="x"),
            "interval",
        ),
        (
            lambda: A.monte_carlo_hockey_stick(A.gaussian(), A.gaussian(1), 1.0, 100, seed=-1),
            "seed",
        ),
        (lambda: A.gaussian_pair(0.0, 1.0), "sensitivity"),
        (lambda: A.laplace_pair(1.0, -2.0), "scale"),
        (lambda: A.subsampled_gaussian_pair(0.0, 1.0), "sampling_rate"),
        (lambda: A.subsampled_gaussian_pair(0.1, 0.0), "noise_multiplier"),
        (lambda: A.subsampled_gaussian_pair(0.1, 1.0, neighbouring="swap"), "neighbouring"),
        (lambda: A.participation_pair(1.5, 0.1, 10, 1.0), "participation_rate"),
        (lambda: A.participation_pair(0.1, 0.0, 10, 1.0), "sampling_rate"),
        (lambda: A.participation_pair(0.1, 0.1, -1, 1.0), "local_size"),
        (lambda: A.participation_pair(0.1, 0.1, 2.5, 1.0), "local_size"),
        (lambda: A.participation_pair(0.1, 0.1, 10, 0.0), "std"),
        (lambda: A.participation_pair(0.1, 0.1, 10, 1.0, clip_norm=-1), "clip_norm"),
        (lambda: A.participation_pair(0.1, 0.1, 10, 1.0, scale=1.5), "scale"),
        (lambda: A.pair_for_event("event"), "event"),
        (lambda: A.audit_accountants(dpsgd_event(1.0, 0.1, 1), 0.0), "delta"),
        (
            lambda: A.hockey_stick(A.compose(A.gaussian(), 2), A.compose(A.gaussian(1), 3), 0.5),
            "steps",
        ),
    ],
)
def test_bad_input_raises_value_error_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=name.replace("[", r"\[").replace("]", r"\]")):
        call()


def test_audit_module_never_imports_torch():
    import subprocess
    import sys

    code = "import sys, privfl.accounting.audit; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
