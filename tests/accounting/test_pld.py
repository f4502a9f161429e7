"""Tests of the pessimistic PLD accountant (privfl.accounting.pld.accountant)."""

from __future__ import annotations

import math
import os

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as dp_pld
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from privfl.accounting.events import (
    Neighbouring,
    Noise,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    UnsupportedEventError,
    dpsgd_event,
)
from privfl.accounting.pld import accountant as pld
from privfl.accounting.pld import steps as pld_steps
from privfl.accounting.pld.accountant import PldAccountant

FAST = settings(max_examples=int(os.environ.get("PRIVFL_HYPOTHESIS_EXAMPLES", "15")), deadline=None)
NR = dp_accounting.NeighboringRelation


# ---------------------------------------------------------------------------------------------
# Independent references
# ---------------------------------------------------------------------------------------------


def gdp_delta(eps: float, mu: float) -> float:
    """Exact delta(eps) of mu-GDP: Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    log_a = special.log_ndtr(-eps / mu + mu / 2.0)
    log_b = eps + special.log_ndtr(-eps / mu - mu / 2.0)
    return math.exp(log_a) - math.exp(log_b)


def gdp_epsilon(delta: float, mu: float) -> float:
    if gdp_delta(0.0, mu) <= delta:
        return 0.0
    high = 1.0
    while gdp_delta(high, mu) > delta:
        high *= 2.0
    return optimize.brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, high, xtol=1e-14, rtol=1e-15)


def subsampled_tradeoff(q: float, mu: float):
    """C_q(G_mu) by its closed form (spec seed0 2.2): f_p, the slope -1 segment, f_p^{-1}."""

    def G(alpha: float) -> float:
        return float(special.ndtr(-special.ndtri(alpha) - mu))

    def f_p(alpha: float) -> float:
        return q * G(alpha) + (1.0 - q) * (1.0 - alpha)

    x_star = float(special.ndtr(-mu / 2.0))
    y_star = f_p(x_star)

    def f_p_inv(alpha: float) -> float:
        if alpha <= 0.0:
            return 1.0
        return optimize.brentq(lambda t: f_p(t) - alpha, 0.0, 1.0, xtol=1e-15, rtol=1e-15)

    return f_p, f_p_inv, x_star, y_star


def subsampled_delta(eps: float, q: float, mu: float) -> float:
    """delta(eps) = 1 - inf_alpha (C_q(G_mu)(alpha) + e^eps alpha), minimised piece by piece."""
    f_p, f_p_inv, x_star, y_star = subsampled_tradeoff(q, mu)
    slope = math.exp(eps)
    # piece 1: f_p on [0, x*] (searched in log alpha, where the optimum can be tiny)
    res = optimize.minimize_scalar(
        lambda s: f_p(math.exp(s)) + slope * math.exp(s),
        bounds=(-700.0, math.log(x_star)),
        method="bounded",
        options={"xatol": 1e-12, "maxiter": 2000},
    )
    candidates = [float(res.fun), 1.0, f_p(x_star) + slope * x_star]
    # piece 2: the line x* + y* - alpha is affine, so its minimum is at an end point
    candidates += [x_star + y_star - x + slope * x for x in (x_star, y_star)]
    # piece 3: f_p^{-1} on [y*, 1]
    res = optimize.minimize_scalar(
        lambda a: f_p_inv(a) + slope * a,
        bounds=(y_star, 1.0),
        method="bounded",
        options={"xatol": 1e-12, "maxiter": 2000},
    )
    candidates += [float(res.fun), slope]
    return 1.0 - min(candidates)


def dp_accountant_epsilon(events, delta, relation=NR.ADD_OR_REMOVE_ONE, interval=1e-4):
    accountant = dp_accounting.pld.PLDAccountant(relation, value_discretization_interval=interval)
    for event in events:
        accountant.compose(event)
    return accountant


# Tolerances against dp-accounting reflect floating-point error, not bit identity. Composing T
# steps by FFT leaves an absolute error on the order of T machine epsilons in every tail mass,
# hence in delta, in both libraries (measured: (0.2..0.6) * T * eps64 between privfl and
# dp-accounting 0.6.0 for T = 40..1e5, about 5 * eps64 for one step). Comparing epsilon at a
# fixed relative tolerance instead turns that absolute delta error into an ever larger relative
# one as delta shrinks (1.9e-6 relative at T = 5000, delta = 1e-8 on numpy 2.4 / scipy 1.17), so
# the comparisons below are made in delta: privfl's epsilon must lie between dp-accounting's
# epsilons at delta +- DELTA_TOL(T). A real modelling error (a wrong q, z, sensitivity or
# relation) moves delta by orders of magnitude more.
EPS64 = float(np.finfo(float).eps)


def delta_tolerance(steps: int) -> float:
    """Absolute floating-point error allowed on a delta of a T-fold FFT composition."""
    return (4 * steps + 32) * EPS64


#: privfl's step PMFs are raised by their measured rounding error and every composed mass
#: carries the FFT's error bound, so privfl may be above dp-accounting by this much (relative),
#: never below it beyond dp-accounting's own rounding.
ALLOWANCE = 1e-6


def dp_step_excess(q: float, z: float, relation=NR.ADD_OR_REMOVE_ONE, interval=1e-4) -> float:
    """Mass dp-accounting's Gaussian step PMF carries above 1 (its second differences of
    delta ~ 1 leave ~1e-11 of rounding noise per grid point; e.g. 2.6e-8 for q = 0.01,
    z = 0.6, replace-one). T steps inflate its deltas by up to (1 + excess)^T."""
    step = dp_pld.from_gaussian_mechanism(
        z, sampling_prob=q, value_discretization_interval=interval, neighboring_relation=relation
    )
    excess = 0.0
    for pmf in pld_steps._directions(step):
        if pmf is not None:
            _, probs, infinity = pld_steps._arrays(pmf)
            excess = max(excess, float(probs.sum()) + infinity - 1.0)
    return excess


def assert_epsilon_matches(
    mine: float, epsilon_at, delta: float, steps: int, excess: float = 0.0
) -> None:
    """``mine`` is the reference's epsilon at ``delta`` up to rounding and privfl's allowances
    (above), and down to what the reference's ``excess`` step mass inflates its delta by."""
    tol = delta_tolerance(steps)
    inflation = math.expm1(steps * math.log1p(max(excess, 0.0)))
    low = epsilon_at((delta + tol) * (1 + inflation))
    high = epsilon_at(max(delta - tol, 0.5 * delta))
    high = high * (1 + ALLOWANCE)
    # dp-accounting walks its loss grid by repeated float addition (itertools.count), so where
    # epsilon lands on a grid point it carries up to (grid length) * ulp of drift: measured
    # 5e-8 at epsilon = 841 (6e-11 relative). Allow 1e-9 relative for that.
    slack = 1e-9 * max(abs(low), abs(high), 1.0)
    assert low - slack <= mine <= high + slack, (mine, epsilon_at(delta), (low, high))


def poisson(q: float, z: float, steps: int) -> dp_event.DpEvent:
    return dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps
    )


# ---------------------------------------------------------------------------------------------
# The step PMFs are dp-accounting's, bit for bit
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("z", "q", "replace"),
    [(1.0, 0.01, False), (0.7, 0.2, False), (2.0, 1.0, False), (1.0, 0.05, True),
     (1.5, 1.0, True), (0.5, 0.3, True)],
)  # fmt: skip
def test_gaussian_step_pmf_equals_dp_accounting(z, q, replace):
    relation = NR.REPLACE_ONE if replace else NR.ADD_OR_REMOVE_ONE
    reference = dp_pld.from_gaussian_mechanism(
        z, sampling_prob=q, value_discretization_interval=1e-4, neighboring_relation=relation
    )
    mine = pld_steps.gaussian_pld(z, 1.0, q, replace, 1e-4, True)
    pairs = zip(pld_steps._directions(reference), pld_steps._directions(mine), strict=True)
    for theirs, ours in pairs:
        assert (theirs is None) == (ours is None)
        if theirs is None:
            continue
        lower_t, probs_t, inf_t = pld_steps._arrays(theirs)
        lower_o, probs_o, inf_o = pld_steps._arrays(ours)
        assert lower_t == lower_o
        assert len(probs_t) == len(probs_o)
        # Each entry is (d[i+1] - d[i] - e^h (d[i] - d[i-1])) / (e^h - 1) of profile values
        # d <= 1 that carry about one ulp(1) of rounding each (the vectorised and the scalar
        # profile round differently for sampled replace-one; measured 5.6e-12 = 2.5 eps64 / h).
        # Allow 8 eps64 / (e^h - 1) ~ 1.8e-11 absolute, plus 1e-9 relative. privfl's PMF is
        # built from the profile raised by 1e-9 relative (pld_steps._PROFILE_RELATIVE_ERROR): its
        # atom at loss 0 is lower by up to that, every other mass only higher.
        atol = 8 * EPS64 / math.expm1(1e-4)
        zero = -lower_o
        rest = np.arange(len(probs_o)) != zero
        np.testing.assert_allclose(probs_o[rest], probs_t[rest], rtol=2e-9, atol=atol)
        assert abs(probs_o[zero] - probs_t[zero]) <= 2e-9
        assert inf_o == pytest.approx(inf_t, rel=2e-9, abs=1e-300)


# ---------------------------------------------------------------------------------------------
# Cross-checks against dp-accounting's PLDAccountant
# ---------------------------------------------------------------------------------------------

POISSON_GRID = [
    (0.01, 1.0, 1000),
    (0.1, 0.8, 40),
    (0.05, 2.0, 10),
    (0.3, 3.0, 1),
    (0.002, 0.9, 5000),
]


@pytest.mark.parametrize(("q", "z", "steps"), POISSON_GRID)
def test_poisson_add_remove_matches_dp_accounting(q, z, steps):
    reference = dp_accountant_epsilon([poisson(q, z, steps)], None)
    event = dpsgd_event(z, q, steps)
    ours = PldAccountant(1e-4)
    excess = dp_step_excess(q, z)
    for delta in (1e-5, 1e-8):
        mine = ours.epsilon(event, delta).epsilon
        assert_epsilon_matches(mine, reference.get_epsilon, delta, steps, excess)
    inflation = math.expm1(steps * math.log1p(excess))
    for eps in (0.5, 2.0):
        theirs, tol = reference.get_delta(eps), delta_tolerance(steps)
        low = (theirs - tol) / (1 + inflation)
        assert low <= ours.delta(event, eps).delta <= theirs * (1 + 10 * ALLOWANCE) + tol


@pytest.mark.parametrize(("q", "z", "steps"), POISSON_GRID)
def test_poisson_replace_one_matches_dp_accounting(q, z, steps):
    reference = dp_accountant_epsilon([poisson(q, z, steps)], None, NR.REPLACE_ONE)
    event = dpsgd_event(z, q, steps, neighbouring="replace-one")
    ours = PldAccountant(1e-4)
    excess = dp_step_excess(q, z, NR.REPLACE_ONE)
    for delta in (1e-5, 1e-8):
        mine = ours.epsilon(event, delta).epsilon
        assert_epsilon_matches(mine, reference.get_epsilon, delta, steps, excess)


@pytest.mark.slow
@pytest.mark.parametrize("relation", ["add-remove", "replace-one"])
@pytest.mark.parametrize("q", [0.001, 0.01, 0.1, 0.5])
@pytest.mark.parametrize("z", [0.6, 1.0, 3.0])
@pytest.mark.parametrize("steps", [1, 100, 20000])
def test_poisson_grid_matches_dp_accounting(relation, q, z, steps):
    # float64 FFT round-off moves dp-accounting's own epsilon by 1e-5..1e-4 relative at T = 20000
    # and delta = 1e-7 when only its FFT length changes (see the pld docstring): compared in
    # delta, up to the composition's rounding (assert_epsilon_matches).
    dp_relation = NR.REPLACE_ONE if relation == "replace-one" else NR.ADD_OR_REMOVE_ONE
    event = dpsgd_event(z, q, steps, neighbouring=relation)
    # steps whose losses are far below 1e-4 are composed on a finer grid: compare on that grid
    interval = PldAccountant(1e-4).grid(event)
    reference = dp_accountant_epsilon([poisson(q, z, steps)], None, dp_relation, interval)
    excess = dp_step_excess(q, z, dp_relation, interval)
    for delta in (1e-5, 1e-7):
        mine = PldAccountant(1e-4).epsilon(event, delta).epsilon
        assert_epsilon_matches(mine, reference.get_epsilon, delta, steps, excess)


def test_benchmark_setting_matches_dp_accounting():
    reference = dp_accountant_epsilon([poisson(0.01, 1.0, 100_000)], None)
    mine = PldAccountant(1e-4).epsilon(dpsgd_event(1.0, 0.01, 100_000), 1e-6).epsilon
    assert_epsilon_matches(mine, reference.get_epsilon, 1e-6, 100_000)


def test_heterogeneous_composition_matches_dp_accounting():
    steps = (
        (NoisyStep(1.0, 0.02), 300),
        (NoisyStep(1.5, 0.1), 50),
        (NoisyStep(4.0, 1.0, Sampling.NONE), 3),
        (NoisyStep(8.0, 1.0, Sampling.NONE), 5),
    )
    event = PrivacyEvent(steps)
    reference = dp_accountant_epsilon(
        [
            poisson(0.02, 1.0, 300),
            poisson(0.1, 1.5, 50),
            dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(4.0), 3),
            dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(8.0), 5),
        ],
        None,
    )
    for delta in (1e-5, 1e-9):
        mine = PldAccountant(1e-4).epsilon(event, delta).epsilon
        assert_epsilon_matches(mine, reference.get_epsilon, delta, event.total_steps)


@pytest.mark.parametrize(("q", "z", "steps"), [(1.0, 2.0, 20), (0.1, 1.0, 30)])
def test_laplace_add_remove_matches_dp_accounting(q, z, steps):
    inner = dp_event.LaplaceDpEvent(z)
    event = dp_event.PoissonSampledDpEvent(q, inner) if q < 1 else inner
    reference = dp_accountant_epsilon([dp_event.SelfComposedDpEvent(event, steps)], None)
    ours = dpsgd_event(z, q, steps, sampling="poisson" if q < 1 else "none", noise="laplace")
    for delta in (1e-5, 1e-9):
        mine = PldAccountant(1e-4).epsilon(ours, delta).epsilon
        assert_epsilon_matches(mine, reference.get_epsilon, delta, steps)


def test_laplace_replace_one_uses_sensitivity_two():
    z, steps = 4.0, 6
    reference = dp_pld.from_laplace_mechanism(z, sensitivity=2.0).self_compose(steps)
    event = dpsgd_event(z, 1.0, steps, sampling="none", neighbouring="replace-one", noise="laplace")
    result = PldAccountant().epsilon(event, 1e-6)
    assert_epsilon_matches(result.epsilon, reference.get_epsilon_for_delta, 1e-6, steps)
    assert result.epsilon <= 2.0 * steps / z + 1e-3  # never above the pure-DP value 2T/z


# ---------------------------------------------------------------------------------------------
# Fixed-size batches without replacement: C_q(G_mu)
# ---------------------------------------------------------------------------------------------

WOR_CASES = [(16 / 600, 2.0), (0.3, 1.0), (0.05, 0.8), (0.7, 3.0)]


@pytest.mark.parametrize(("q", "z"), WOR_CASES)
def test_exact_profile_matches_closed_form(q, z):
    for eps in (0.0, 0.05, 0.31237, 1.0, 2.5):
        exact = subsampled_delta(eps, q, 2.0 / z)
        assert pld.without_replacement_gaussian_delta(eps, z, q) == pytest.approx(
            exact, rel=1e-7, abs=1e-13
        )


@pytest.mark.parametrize("connect_dots", [True, False])
@pytest.mark.parametrize(("q", "z"), WOR_CASES)
def test_single_step_pld_is_pessimistic_and_tight(q, z, connect_dots):
    step_pld = pld.without_replacement_gaussian_pld(z, q, connect_dots=connect_dots)
    for eps in (0.0, 0.05, 0.31237, 1.0, 2.5):
        exact = subsampled_delta(eps, q, 2.0 / z)
        ours = float(step_pld.get_delta_for_epsilon(eps))
        assert ours >= exact - 1e-12  # pessimistic (rounding slack only)
        assert ours <= exact + 1e-4  # within the discretisation
        if connect_dots:
            assert ours <= exact + 1e-8  # connect-the-dots is exact on the grid, tight between


@pytest.mark.parametrize("connect_dots", [True, False])
def test_single_step_pld_is_a_symmetric_probability_pair(connect_dots):
    step_pld = pld.without_replacement_gaussian_pld(2.0, 0.1, connect_dots=connect_dots)
    remove, add = pld_steps._directions(step_pld)
    assert add is None
    lower, probs, infinity = pld_steps._arrays(remove)
    losses = (lower + np.arange(len(probs))) * 1e-4
    assert np.all(probs >= 0)
    assert probs.sum() + infinity == pytest.approx(1.0, abs=1e-12)
    # mass of the lower law: at most 1 for a pessimistic pair
    assert float(np.sum(probs * np.exp(-losses))) <= 1.0 + 1e-12


@pytest.mark.parametrize("connect_dots", [True, False])
@pytest.mark.parametrize(("z", "steps"), [(1.0, 4), (2.0, 30), (4.0, 200)])
def test_q_one_reduces_to_gaussian(z, steps, connect_dots):
    mu = 2.0 / z * math.sqrt(steps)
    step_pld = pld.without_replacement_gaussian_pld(z, 1.0, connect_dots=connect_dots)
    composed = step_pld.self_compose(steps)
    for delta in (1e-3, 1e-6):
        exact = gdp_epsilon(delta, mu)
        ours = composed.get_epsilon_for_delta(delta)
        assert ours >= exact - 1e-9
        tolerance = 1e-6 if connect_dots else steps * 1e-4
        assert ours <= exact + tolerance


def test_q_one_single_step_profile_is_gaussian():
    for eps in (0.0, 0.7, 3.0):
        assert pld.without_replacement_gaussian_delta(eps, 1.5, 1.0) == pytest.approx(
            gdp_delta(eps, 2.0 / 1.5), rel=1e-12
        )


# Spec seed0 6.1: (dataset, n, B, K, p, sigma, R, eps_clt at delta = 1e-5)
SEED0_ROWS = [
    ("MNIST", 600, 16, 38, 1.0, 1.0, 93, 14.64),
    ("MNIST", 600, 16, 38, 1.0, 0.9, 83, 17.39),
    ("MNIST", 600, 16, 38, 1.0, 0.75, 64, 24.07),
    ("MNIST", 600, 16, 38, 0.5, 1.0, 194, 23.69),
    ("MNIST", 600, 16, 38, 0.5, 0.9, 176, 28.72),
    ("MNIST", 600, 16, 38, 0.5, 0.75, 127, 38.64),
    ("MNIST", 600, 16, 38, 0.25, 1.0, 386, 38.07),
    ("MNIST", 600, 16, 38, 0.25, 0.9, 325, 44.19),
    ("MNIST", 600, 16, 38, 0.25, 0.75, 245, 62.32),
    ("MNIST", 600, 8, 76, 0.5, 1.0, 266, 18.45),
    ("MNIST", 600, 8, 76, 0.5, 0.9, 229, 21.49),
    ("MNIST", 600, 8, 76, 0.5, 0.75, 191, 31.64),
    ("CIFAR", 500, 16, 32, 1.0, 1.0, 468, 50.21),
    ("CIFAR", 500, 16, 32, 1.0, 0.75, 321, 88.60),
    ("CIFAR", 500, 16, 32, 1.0, 0.5, 207, 472.93),
    ("CIFAR", 500, 16, 32, 0.5, 1.0, 904, 82.19),
    ("CIFAR", 500, 16, 32, 0.5, 0.75, 671, 159.20),
    ("CIFAR", 500, 16, 32, 0.5, 0.5, 405, 862.39),
]


def clt_mu(n: int, batch: int, local_steps: int, sigma: float, rounds: int) -> float:
    kappa = math.sqrt(
        math.exp(sigma**-2) * special.ndtr(1.5 / sigma) + 3 * special.ndtr(-0.5 / sigma) - 2
    )
    return math.sqrt(2) * batch / n * math.sqrt(local_steps * rounds) * kappa


def seed0_event(n, batch, local_steps, sigma, rounds) -> PrivacyEvent:
    return dpsgd_event(
        2.0 * sigma,  # Opacus multiplier z = 2 sigma (paper sigma is std / 2C)
        batch / n,
        local_steps * rounds,
        sampling="without-replacement",
        neighbouring="replace-one",
    )


def test_seed0_row1_pld_below_clt_by_several_percent():
    mu = clt_mu(600, 16, 38, 1.0, 93)
    assert mu == pytest.approx(2.7110, abs=5e-4)
    eps_clt = gdp_epsilon(1e-5, mu)
    assert eps_clt == pytest.approx(14.64, abs=0.01)
    eps_pld = PldAccountant().epsilon(seed0_event(600, 16, 38, 1.0, 93), 1e-5).epsilon
    assert 0.90 * eps_clt < eps_pld < 0.97 * eps_clt  # 13.88 vs 14.64 (-5.2%)


@pytest.mark.parametrize("row", SEED0_ROWS, ids=lambda r: f"{r[0]}-B{r[2]}-p{r[4]}-s{r[5]}")
def test_seed0_rows_pld_below_clt(row):
    _, n, batch, local_steps, _, sigma, rounds, table_eps = row
    eps_clt = gdp_epsilon(1e-5, clt_mu(n, batch, local_steps, sigma, rounds))
    assert eps_clt == pytest.approx(table_eps, abs=0.006)
    result = PldAccountant().epsilon(seed0_event(n, batch, local_steps, sigma, rounds), 1e-5)
    assert result.kind == "bound"
    assert result.epsilon < 0.975 * eps_clt


@pytest.mark.slow
def test_seed0_row1_finer_grid_is_consistent():
    event = seed0_event(600, 16, 38, 1.0, 93)
    coarse = PldAccountant(1e-4).epsilon(event, 1e-5).epsilon
    fine = PldAccountant(2e-5).epsilon(event, 1e-5).epsilon
    assert fine <= coarse + 1e-6
    assert fine == pytest.approx(coarse, rel=5e-3)


# ---------------------------------------------------------------------------------------------
# The antipodal replace-one pair is the worst case (numerical check of the docstring argument)
# ---------------------------------------------------------------------------------------------


def _mixture_hockey_stick(q, a, b, rho, gamma, points=801):
    """E[(q e^X1 - gamma q e^X2 + (1-q)(1-gamma))_+] for the bivariate normal (X1, X2) of the
    pld module docstring (means -a^2/2, -b^2/2, sds a, b, correlation rho), on a product grid."""
    x = np.linspace(-10.0, 10.0, points)
    w = np.exp(-x * x / 2.0)
    w /= w.sum()
    u, v = np.meshgrid(x, x, indexing="ij")
    x1 = a * u - a * a / 2.0
    x2 = b * (rho * u + math.sqrt(max(0.0, 1.0 - rho * rho)) * v) - b * b / 2.0
    payoff = q * np.exp(x1) - gamma * q * np.exp(x2) + (1.0 - q) * (1.0 - gamma)
    return float(np.sum(np.outer(w, w) * np.maximum(payoff, 0.0)))


@pytest.mark.parametrize(("q", "z"), [(0.1, 1.0), (0.3, 2.0), (0.5, 0.5)])
def test_antipodal_pair_dominates_other_replacements(q, z):
    c = 1.0 / z  # ||v|| / z for a contribution of norm C
    others = [(c, c, 0.0), (c, c, 0.5), (c, c, -0.95), (0.5 * c, c, -1.0), (c, 0.3 * c, -0.7)]
    for gamma in (0.5, 1.0, math.e, math.e**2):
        worst = _mixture_hockey_stick(q, c, c, -1.0, gamma)
        for a, b, rho in others:
            assert _mixture_hockey_stick(q, a, b, rho, gamma) <= worst * (1 + 1e-6) + 1e-15


# ---------------------------------------------------------------------------------------------
# Pure Gaussian compositions and monotonicity (hypothesis)
# ---------------------------------------------------------------------------------------------


@FAST
@given(
    z=st.floats(1.0, 30.0),
    steps=st.integers(1, 200),
    relation=st.sampled_from(["add-remove", "replace-one"]),
    log_delta=st.floats(-9.0, -3.0),
)
def test_pure_gaussian_never_below_exact(z, steps, relation, log_delta):
    mu = (2.0 if relation == "replace-one" else 1.0) * math.sqrt(steps) / z
    assume(mu <= 6.0)
    delta = 10.0**log_delta
    exact = gdp_epsilon(delta, mu)
    event = dpsgd_event(z, 1.0, steps, sampling="none", neighbouring=relation)
    ours = PldAccountant(1e-4).epsilon(event, delta).epsilon
    assert ours >= exact - 1e-9
    assert ours <= exact + 1e-6


@FAST
@given(
    z=st.floats(0.6, 5.0),
    factor=st.floats(1.0, 2.0),
    q=st.floats(0.001, 0.5),
    steps=st.integers(1, 300),
)
def test_epsilon_non_increasing_in_noise(z, factor, q, steps):
    accountant = PldAccountant(1e-3)
    low = accountant.epsilon(dpsgd_event(z, q, steps), 1e-6).epsilon
    high = accountant.epsilon(dpsgd_event(z * factor, q, steps), 1e-6).epsilon
    assert high <= low * (1 + 1e-9) + 1e-12


@FAST
@given(
    z=st.floats(0.6, 5.0),
    q=st.floats(0.001, 0.5),
    steps=st.integers(1, 300),
    extra=st.integers(1, 300),
    relation=st.sampled_from(["add-remove", "replace-one"]),
)
def test_epsilon_non_decreasing_in_steps(z, q, steps, extra, relation):
    accountant = PldAccountant(1e-3)
    fewer = accountant.epsilon(dpsgd_event(z, q, steps, neighbouring=relation), 1e-6).epsilon
    more = accountant.epsilon(dpsgd_event(z, q, steps + extra, neighbouring=relation), 1e-6)
    assert more.epsilon >= fewer * (1 - 1e-9) - 1e-12


@FAST
@given(
    z=st.floats(0.6, 5.0),
    q=st.floats(0.001, 0.5),
    factor=st.floats(1.0, 2.0),
    steps=st.integers(1, 300),
    sampling=st.sampled_from(["poisson", "without-replacement"]),
)
def test_epsilon_non_decreasing_in_sampling_rate(z, q, factor, steps, sampling):
    relation = "replace-one" if sampling == "without-replacement" else "add-remove"
    accountant = PldAccountant(1e-3)
    small = accountant.epsilon(
        dpsgd_event(z, q, steps, sampling=sampling, neighbouring=relation), 1e-6
    ).epsilon
    large = accountant.epsilon(
        dpsgd_event(z, min(1.0, q * factor), steps, sampling=sampling, neighbouring=relation),
        1e-6,
    ).epsilon
    assert large >= small * (1 - 1e-9) - 1e-12


# ---------------------------------------------------------------------------------------------
# API: results, PLD objects, cache, unsupported events, bad inputs
# ---------------------------------------------------------------------------------------------


def test_result_labels_and_pld_object():
    event = dpsgd_event(1.2, 0.05, 500)
    accountant = PldAccountant(1e-4)
    result = accountant.epsilon(event, 1e-6)
    assert (result.method, result.kind) == ("pld", "bound")
    assert result.extras["discretization"] == 1e-4
    assert result.extras["infinity_mass"] <= 1e-13
    assert (result.neighbouring, result.steps, result.delta) == ("add-remove", 500, 1e-6)
    composed = accountant.pld(event)
    assert isinstance(composed, dp_pld.PrivacyLossDistribution)
    # the untilted object carries the FFT error allowance at every grid point: an upper bound,
    # slightly looser than the accountant's tilted answer
    untilted = composed.get_epsilon_for_delta(1e-6)
    assert result.epsilon <= untilted <= result.epsilon * (1 + 1e-5)
    back = accountant.delta(event, result.epsilon)
    assert back.delta == pytest.approx(1e-6, rel=1e-6)
    assert back.epsilon == result.epsilon


def test_replace_one_pld_is_symmetric_add_remove_is_not():
    accountant = PldAccountant()
    assert pld_steps._directions(accountant.pld(dpsgd_event(1.0, 0.1, 3)))[1] is not None
    replace = dpsgd_event(1.0, 0.1, 3, neighbouring="replace-one")
    assert pld_steps._directions(accountant.pld(replace))[1] is None


def test_zero_steps_is_perfect_privacy():
    event = PrivacyEvent(((NoisyStep(1.0, 0.1), 0),))
    accountant = PldAccountant()
    assert accountant.epsilon(event, 1e-6).epsilon == 0.0
    assert accountant.delta(event, 0.0).delta == 0.0


def test_step_plds_are_cached():
    pld.clear_cache()
    accountant = PldAccountant()
    accountant.epsilon(dpsgd_event(1.3, 0.02, 10), 1e-5)
    accountant.epsilon(dpsgd_event(1.3, 0.02, 20), 1e-5)
    info = pld_steps._step_pld.cache_info()
    assert (info.hits, info.misses) == (1, 1)
    pld.clear_cache()
    assert pld_steps._step_pld.cache_info().currsize == 0


def test_round_up_option_is_an_upper_bound_too():
    event = dpsgd_event(
        2.0, 16 / 600, 500, sampling="without-replacement", neighbouring="replace-one"
    )
    dots = PldAccountant(connect_dots=True).epsilon(event, 1e-5).epsilon
    rounded = PldAccountant(connect_dots=False).epsilon(event, 1e-5).epsilon
    assert rounded >= dots - 1e-9
    assert rounded == pytest.approx(dots, rel=2e-2)


@pytest.mark.parametrize(
    ("step", "relation", "words"),
    [
        (NoisyStep(1.0, 0.1, Sampling.WITHOUT_REPLACEMENT), Neighbouring.ADD_REMOVE,
         "fixed-size batches"),
        (NoisyStep(1.0, 0.1, Sampling.POISSON, Noise.LAPLACE), Neighbouring.REPLACE_ONE,
         "Poisson-subsampled Laplace"),
        (NoisyStep(1.0, 0.1, Sampling.WITHOUT_REPLACEMENT, Noise.LAPLACE),
         Neighbouring.REPLACE_ONE, "Laplace noise with fixed-size batches"),
    ],
)  # fmt: skip
def test_unsupported_combinations_are_refused(step, relation, words):
    event = PrivacyEvent(((step, 10),), neighbouring=relation)
    accountant = PldAccountant()
    assert not accountant.supports(event)
    assert words in accountant.unsupported_reason(event)
    with pytest.raises(UnsupportedEventError, match=words):
        accountant.epsilon(event, 1e-5)
    with pytest.raises(UnsupportedEventError, match=words):
        accountant.pld(event)
    # a count of zero contributes nothing and is not refused
    assert accountant.supports(PrivacyEvent(((step, 0),), neighbouring=relation))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"value_discretization_interval": 0.0}, "value_discretization_interval"),
        ({"value_discretization_interval": -1e-4}, "value_discretization_interval"),
        ({"value_discretization_interval": float("nan")}, "value_discretization_interval"),
        ({"value_discretization_interval": "1e-4"}, "value_discretization_interval"),
        ({"tail_mass_truncation": -1.0}, "tail_mass_truncation"),
        ({"tail_mass_truncation": 0.1}, "tail_mass_truncation"),
        ({"connect_dots": 1}, "connect_dots"),
    ],
)
def test_bad_constructor_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        PldAccountant(**kwargs)


def test_bad_call_arguments():
    accountant = PldAccountant()
    event = dpsgd_event(1.0, 0.01, 10)
    with pytest.raises(ValueError, match="delta"):
        accountant.epsilon(event, 0.0)
    with pytest.raises(ValueError, match="delta"):
        accountant.epsilon(event, 1.5)
    with pytest.raises(ValueError, match="epsilon"):
        accountant.delta(event, -1.0)
    with pytest.raises(ValueError, match="event"):
        accountant.epsilon("not an event", 1e-5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        pld.without_replacement_gaussian_pld(0.0, 0.1)
    with pytest.raises(ValueError, match="sampling_rate"):
        pld.without_replacement_gaussian_pld(1.0, 0.0)
    with pytest.raises(ValueError, match="value_discretization_interval"):
        pld.without_replacement_gaussian_pld(1.0, 0.1, value_discretization_interval=0.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        pld.without_replacement_gaussian_delta(0.5, 1.0, 1.5)
    with pytest.raises(ValueError, match="epsilon"):
        pld.without_replacement_gaussian_delta(float("nan"), 1.0, 0.5)
