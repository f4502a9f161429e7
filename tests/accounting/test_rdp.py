"""Tests of the RDP accountant: seed-2 reproduction targets, exactness against numerical
integration and dp-accounting, conversions, properties and input validation."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfl.accounting.events import (
    Neighbouring,
    Noise,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    UnsupportedEventError,
    dpsgd_event,
)
from privfl.accounting.rdp import (
    DEFAULT_ORDERS,
    LEGACY_ORDERS,
    RdpAccountant,
    delta_from_rdp,
    epsilon_from_rdp,
    rdp_gaussian,
    rdp_laplace,
    rdp_poisson_gaussian,
    rdp_without_replacement,
    rdp_without_replacement_gaussian,
    resolve_orders,
    xie2023_proposition2_epsilon,
)
from privfl.accounting.rdp import accountant as rdp_accountant
from privfl.accounting.rdp import poisson as rdp_poisson
from privfl.accounting.rdp import poisson_quadrature as rdp_poisson_quadrature
from privfl.accounting.rdp import without_replacement_gaussian as rdp_wor_gaussian

PROPERTY = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def legacy_epsilon(q, z, steps, delta, conversion="classic"):
    curve = steps * rdp_poisson_gaussian(LEGACY_ORDERS, q, z)
    return epsilon_from_rdp(LEGACY_ORDERS, curve, delta, conversion)


def mp_rdp(q, sigma, alpha):
    """Reference: log E_{x~N(0,s^2)}[((1-q) + q e^{(2x-1)/(2s^2)})^alpha] / (alpha-1), mpmath."""
    with mp.workdps(30):
        q_, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

        def integrand(x):
            return mp.npdf(x, 0, s) * ((1 - q_) + q_ * mp.exp((2 * x - 1) / (2 * s * s))) ** a

        z0 = s * s * mp.log(1 / q_ - 1) + mp.mpf(0.5)
        centres = sorted({mp.mpf(0), z0, a})
        points = sorted({c + d * s for c in centres for d in (-8, 0, 8)})
        return float(mp.log(mp.quad(integrand, [-mp.inf, *points, mp.inf])) / (a - 1))


# ------------------------------------------------------------------------------------------
# Order grids
# ------------------------------------------------------------------------------------------


def test_legacy_grid_is_opacus_grid():
    opacus = tuple([1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)))
    assert opacus == LEGACY_ORDERS
    assert len(LEGACY_ORDERS) == 151  # 99 fractional-step orders + 52 integers (spec says 150)
    assert 11.0 not in LEGACY_ORDERS and 10.9 in LEGACY_ORDERS and 12.0 in LEGACY_ORDERS
    assert min(LEGACY_ORDERS) == 1.1 and max(LEGACY_ORDERS) == 63.0


def test_default_grid():
    orders = np.array(DEFAULT_ORDERS)
    assert len(orders) < 400 and np.all(np.diff(orders) > 0) and np.all(orders > 1)
    assert 1.01 in DEFAULT_ORDERS and 1.5 in DEFAULT_ORDERS and max(DEFAULT_ORDERS) == 1024.0


def test_resolve_orders():
    np.testing.assert_array_equal(resolve_orders("default"), np.array(DEFAULT_ORDERS))
    np.testing.assert_array_equal(resolve_orders("legacy"), np.array(LEGACY_ORDERS))
    np.testing.assert_array_equal(resolve_orders("1.5, 2,32"), [1.5, 2.0, 32.0])
    np.testing.assert_array_equal(resolve_orders([32, 2, 1.5, 2]), [1.5, 2.0, 32.0])
    for bad in ("abc", "1.5,x", "1.0,2", "", [], [0.5], [2, float("nan")]):
        with pytest.raises(ValueError, match="orders"):
            resolve_orders(bad)


def test_orders_keep_caller_order():
    forward = rdp_poisson_gaussian([2.0, 32.0, 1.5], 0.1, 1.0)
    backward = rdp_poisson_gaussian([1.5, 32.0, 2.0], 0.1, 1.0)
    np.testing.assert_array_equal(forward, backward[::-1])


# ------------------------------------------------------------------------------------------
# Seed 2 reproduction targets (spec seed2 3.2, 7.1, 7.3)
# ------------------------------------------------------------------------------------------

# (rate, steps, delta, multiplier, table epsilon, optimal order or None)
TABLES = [
    # Table 4 - UserDP-FedAvg MNIST
    *[
        (0.1, 3, 0.0029, z, e, o)
        for z, e, o in [
            (0.5, 6.9269, 2.2),
            (0.6, 4.8913, None),
            (0.8, 2.8305, None),
            (1.0, 1.8504, None),
            (1.5, 0.8694, None),
            (1.8, 0.6298, 13.0),
            (2.3, 0.4187, None),
            (3.0, 0.2808, None),
        ]
    ],
    # Table 5 - UserDP-FedAvg CIFAR
    *[
        (0.2, 1, 0.0029, z, e, o)
        for z, e, o in [
            (1.7, 0.8781, 9.9),
            (2.3, 0.5460, None),
            (2.6, 0.4527, None),
            (3.0, 0.3663, None),
            (4.0, 0.2444, None),
            (6.0, 0.1451, 63.0),
        ]
    ],
    # Table 6 - UserDP-FedAvg Sent140
    *[
        (10 / 805, 3, 1e-6, z, e, o)
        for z, e, o in [
            (1.0, 1.7151, 9.3),
            (1.5, 0.7382, None),
            (1.7, 0.5790, None),
            (2.0, 0.4102, None),
            (3.0, 0.2247, None),
        ]
    ],
    # Table 7 - InsDP-FedAvg MNIST
    *[
        (50 / 1266, 78, 1e-5, z, e, o)
        for z, e, o in [
            (1, 3.5691, 5.5),
            (2, 1.0587, None),
            (3, 0.6373, None),
            (4, 0.4589, None),
            (5, 0.3593, None),
            (8, 0.2484, None),
            (10, 0.2251, None),
            (15, 0.2029, None),
        ]
    ],
    # Table 8 - InsDP-FedAvg CIFAR
    *[
        (0.05, 100, 1e-5, z, e, o)
        for z, e, o in [
            (1, 4.6978, 4.7),
            (2, 1.4949, None),
            (3, 0.9067, None),
            (4, 0.6546, None),
            (5, 0.5130, None),
            (6, 0.4221, None),
            (7, 0.3587, None),
            (8, 0.3158, None),
        ]
    ],
]


def test_table_count():
    assert len(TABLES) == 35


@pytest.mark.parametrize(("q", "steps", "delta", "z", "expected", "order"), TABLES)
def test_seed2_tables_4_to_8(q, steps, delta, z, expected, order):
    epsilon, best = legacy_epsilon(q, z, steps, delta)
    assert round(epsilon, 4) == expected
    if order is not None:
        assert best == order


def test_seed2_tables_through_the_accountant():
    accountant = RdpAccountant(orders="legacy", conversion="classic")
    result = accountant.epsilon(dpsgd_event(1.8, 0.1, 3), 0.0029)
    assert round(result.epsilon, 4) == 0.6298
    assert result.extras == {"order": 13.0, "conversion": "classic"}
    grid_end = accountant.epsilon(dpsgd_event(6.0, 0.2, 1), 0.0029)
    assert round(grid_end.epsilon, 4) == 0.1451 and grid_end.extras["order"] == 63.0
    assert "largest of the grid" in grid_end.note


@pytest.mark.parametrize(
    ("q", "steps", "delta", "z", "expected", "order"),
    [
        (0.1, 3, 0.0029, 1.8, 0.3334, 12.0),
        (0.2, 1, 0.0029, 6.0, 0.0556, 47.0),
        (10 / 805, 3, 1e-6, 2.0, 0.2767, None),
        (50 / 1266, 78, 1e-5, 5.0, 0.2693, None),
        (0.05, 100, 1e-5, 4.0, 0.5116, None),
    ],
)
def test_seed2_balle_conversion_sensitivity(q, steps, delta, z, expected, order):
    epsilon, best = legacy_epsilon(q, z, steps, delta, conversion="improved")
    assert round(epsilon, 4) == expected
    if order is not None:
        assert best == order


def test_seed2_figure9_values():
    ours = legacy_epsilon(0.4 * 10 / 30, 3 * math.sqrt(10), 200, 1e-4)[0]
    dopamine = legacy_epsilon(0.4, 3 * math.sqrt(10), 200, 1e-4)[0]
    assert round(ours, 4) == 0.8872 and round(dopamine, 4) == 2.7680
    assert abs(ours - 0.87) <= 0.03 and abs(dopamine - 2.70) <= 0.1  # the paper's figure
    assert round(legacy_epsilon(0.4 * 10 / 30, 3 * math.sqrt(10), 200, 1.5e-4)[0], 4) == 0.8679
    assert round(legacy_epsilon(0.4, 3 * math.sqrt(10), 200, 1.5e-4)[0], 4) == 2.7098
    assert round(legacy_epsilon(0.4 * 20 / 30, 3 * math.sqrt(20), 200, 1e-4)[0], 4) == 1.2576
    assert round(legacy_epsilon(0.4, 3 * math.sqrt(20), 200, 1e-4)[0], 4) == 1.9132


def test_seed2_sanity_values():
    alpha2, alpha12 = rdp_poisson_gaussian([2, 12], 0.1, 1.8)
    assert round(alpha2, 7) == 0.0036092 and round(alpha12, 7) == 0.0383744
    assert alpha2 == pytest.approx(math.log1p(0.01 * math.expm1(1 / 1.8**2)), rel=1e-13)


def test_seed2_proposition2_as_printed():
    epsilon, order = xie2023_proposition2_epsilon(3.0, 0.4, 10 / 30, 10, 200, 1e-4)
    assert round(epsilon, 4) == 3.9697 and order == 4.0
    assert round(xie2023_proposition2_epsilon(3.0, 0.4, 10 / 30, 10, 200, 1e-5)[0], 2) == 4.74
    # far above the Poisson accountant (0.8872): the figure cannot come from this bound
    assert epsilon > 4 * legacy_epsilon(0.4 * 10 / 30, 3 * math.sqrt(10), 200, 1e-4)[0]
    with pytest.raises(ValueError, match="cohort_size"):
        xie2023_proposition2_epsilon(3.0, 0.4, 10 / 30, 0, 200, 1e-4)
    with pytest.raises(ValueError, match="batch_rate"):
        xie2023_proposition2_epsilon(3.0, 1.4, 10 / 30, 10, 200, 1e-4)


# ------------------------------------------------------------------------------------------
# Exactness: dp-accounting at integer orders, numerical integration at fractional orders
# ------------------------------------------------------------------------------------------

INTEGER_ORDERS = [float(a) for a in range(2, 65)] + [80.0, 128.0, 256.0]


@pytest.mark.parametrize("q", [1e-3, 0.01, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("z", [0.5, 1.0, 2.0, 4.0])
def test_integer_orders_match_dp_accounting(q, z):
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    for steps in (1, 1000):
        theirs = rdp_privacy_accountant.RdpAccountant(INTEGER_ORDERS)
        theirs.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps)
        ours = steps * rdp_poisson_gaussian(INTEGER_ORDERS, q, z)
        np.testing.assert_allclose(ours, np.asarray(theirs._rdp), rtol=1e-9, atol=0)
        for delta in (1e-5, 1e-9):
            eps_theirs, order_theirs = theirs.get_epsilon_and_optimal_order(delta)
            eps_ours, order_ours = epsilon_from_rdp(INTEGER_ORDERS, ours, delta)
            assert eps_ours == pytest.approx(eps_theirs, rel=1e-9, abs=1e-12)
            assert order_ours == order_theirs


FRACTIONAL_CASES = [
    # small noise, large sampling rates, orders near 1 (where the signed series cancels most)
    (0.5, 0.3, 1.1),
    (0.7, 0.3, 1.2),
    (0.9, 0.4, 1.3),
    (0.99, 0.5, 1.4),
    (0.5, 0.5, 1.5),
    (0.6, 1.5, 1.25),
    # usual DP-SGD regimes
    (0.01, 1.0, 1.1),
    (0.1, 1.0, 1.5),
    (1e-3, 2.0, 2.5),
    (1e-4, 0.8, 1.3),
    (0.2, 1.7, 9.9),
    (0.05, 1.0, 4.7),
    # large noise at q near 1/2: the quadrature regime
    (0.5, 8.0, 1.01),
    (0.3, 100.0, 1.1),
]


@pytest.mark.parametrize(("q", "sigma", "alpha"), FRACTIONAL_CASES)
def test_fractional_orders_match_integration(q, sigma, alpha):
    ours = rdp_poisson_gaussian([alpha], q, sigma)[0]
    assert ours == pytest.approx(mp_rdp(q, sigma, alpha), rel=1e-8, abs=0)


def test_regimes_and_both_fractional_methods_agree():
    _, regimes = rdp_poisson._log_a(0.5, 100.0, np.array([1.01, 2.0]))
    assert regimes == ["quadrature", "integer"]
    _, regimes = rdp_poisson._log_a(0.01, 1.0, np.array([1.01, 2.0, 2.5]))
    assert regimes == ["series", "integer", "series"]
    _, regimes = rdp_poisson._log_a(0.01, 1.0, np.array(LEGACY_ORDERS))
    assert "quadrature" not in regimes
    for q, sigma, alpha in [(0.5, 0.3, 1.1), (0.01, 1.0, 1.5), (0.9, 2.0, 3.3)]:
        series, error = rdp_poisson._log_a_minus_1_series(q, sigma, np.array([alpha]))
        quadrature = rdp_poisson_quadrature.log_a_minus_1_quad(q, sigma, alpha)
        assert error[0] < 1e-11
        assert np.logaddexp(0, series[0]) == pytest.approx(np.logaddexp(0, quadrature), rel=1e-11)


def test_dp_accounting_overestimates_fractional_orders():
    from dp_accounting.rdp import rdp_privacy_accountant

    cases = [(0.01, 1.0, 1.1), (0.1, 2.0, 1.3)]
    for q, sigma, alpha in cases:
        ours = rdp_poisson_gaussian([alpha], q, sigma)[0]
        theirs = rdp_privacy_accountant._compute_rdp_poisson_subsampled_gaussian(q, sigma, [alpha])[
            0
        ]
        assert ours == pytest.approx(mp_rdp(q, sigma, alpha), rel=1e-8)
        assert theirs > 1.05 * ours  # |C(alpha, i)| log-added: 7% and 43% too large here


def test_q_one_is_plain_gaussian():
    orders = [1.5, 2.0, 10.0]
    np.testing.assert_allclose(rdp_poisson_gaussian(orders, 1.0, 2.0), np.array(orders) / 8.0)
    np.testing.assert_allclose(
        rdp_poisson_gaussian(orders, 1.0 - 1e-12, 2.0), np.array(orders) / 8.0, rtol=1e-9
    )


# ------------------------------------------------------------------------------------------
# Other mechanisms
# ------------------------------------------------------------------------------------------


def test_rdp_gaussian():
    np.testing.assert_allclose(rdp_gaussian([2.0, 3.5], 2.0), [0.25, 3.5 / 8])
    np.testing.assert_allclose(rdp_gaussian([2.0], 2.0, sensitivity=2.0), [1.0])


def test_rdp_laplace_matches_dp_accounting_and_closed_form():
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = [1.05, 1.5, 2.0, 7.5, 64.0]
    for b in (0.3, 1.0, 5.0):
        ours = rdp_laplace(orders, b)
        theirs = [rdp_privacy_accountant._laplace_rdp(1.0 / b, a) for a in orders]
        np.testing.assert_allclose(ours, theirs, rtol=1e-10)
    with mp.workdps(40):
        for a, b in [(1.5, 1e4), (2.0, 0.1), (30.0, 3.0)]:
            a_, b_ = mp.mpf(a), mp.mpf(b)
            exact = mp.log(
                a_ / (2 * a_ - 1) * mp.exp((a_ - 1) / b_)
                + (a_ - 1) / (2 * a_ - 1) * mp.exp(-a_ / b_)
            ) / (a_ - 1)
            assert rdp_laplace([a], b)[0] == pytest.approx(float(exact), rel=1e-12)
    assert rdp_laplace([1e6], 2.0)[0] == pytest.approx(0.5, rel=1e-5)  # -> 1/b as a -> inf


def test_without_replacement_formula_and_properties():
    z = 2.0

    def base(a):
        return 2.0 * a / z**2

    g = 0.05
    e2 = base(2)
    expected2 = math.log1p(g**2 * min(4 * math.expm1(e2), 2 * math.exp(e2)))
    expected3 = (
        math.log1p(
            g**2 * 3 * min(4 * math.expm1(e2), 2 * math.exp(e2)) + g**3 * 2 * math.exp(2 * base(3))
        )
        / 2
    )
    values = rdp_without_replacement([1.5, 2.0, 2.5, 3.0, 10.0], g, base)
    assert values[0] == values[1] == pytest.approx(expected2, rel=1e-13)
    assert values[2] == values[3] == pytest.approx(expected3, rel=1e-13)
    assert np.all(np.diff(values) >= 0)
    np.testing.assert_allclose(rdp_without_replacement([2.0, 5.5], 1.0, base), [1.0, 2.75])
    # a finite e(inf) caps the terms: Laplace-like base with e(inf) = 0.1
    capped = rdp_without_replacement([4.0], 0.5, lambda a: 0.05, base_rdp_inf=0.1)[0]
    assert capped < rdp_without_replacement([4.0], 0.5, lambda a: 0.05)[0]
    with pytest.raises(ValueError, match="base_rdp"):
        rdp_without_replacement([2.0], 0.1, lambda a: -1.0)
    with pytest.raises(ValueError, match="base_rdp"):
        rdp_without_replacement([2.0], 0.1, 3.0)


def test_without_replacement_is_above_wbk_gaussian_specific_bound():
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = [2.0, 3.0, 8.0, 32.0]
    for q, sigma in [(0.01, 1.0), (0.1, 2.0), (0.3, 0.8)]:
        general = rdp_without_replacement(orders, q, lambda a, s=sigma: a / (2 * s * s))
        specific = rdp_privacy_accountant._compute_rdp_sample_wor_gaussian(q, sigma, orders)
        assert np.all(general >= specific * (1 - 1e-12))


# ------------------------------------------------------------------------------------------
# Sampling without replacement: the Gaussian-specific bound (WBK 2019, Theorem 27)
# ------------------------------------------------------------------------------------------

WOR_ORDERS = [1.05, 1.5, 2.0, 2.3, 3.0, 5.5, 8.0, 17.7, 32.0, 64.0, 100.5, 128.0, 200.0, 255.5]
WOR_ORDERS += [256.0, 256.5, 300.0, 512.0]


def mp_wor_gaussian(q, z, alphas, dps=300):
    """Reference: the Theorem 27 formula evaluated in mpmath (sigma = z/2, e(a) = 2a/z^2)."""
    with mp.workdps(dps):
        c, q_ = mp.mpf(2) / mp.mpf(z) ** 2, mp.mpf(q)
        top = int(max(alphas)) + 2
        g = [mp.exp(c * i * (i - 1)) for i in range(top + 1)]
        b = {
            ell: mp.fsum((-1) ** (ell - i) * mp.binomial(ell, i) * g[i] for i in range(ell + 1))
            for ell in range(2, top + 1, 2)
        }
        out = []
        for alpha in alphas:
            a = int(alpha)
            total = mp.mpf(1)
            for j in range(2, a + 1):
                fd = 4 * mp.sqrt(b[2 * (j // 2)] * b[2 * ((j + 1) // 2)])
                total += q_**j * mp.binomial(a, j) * min(fd, 2 * mp.exp(c * j * (j - 1)))
            out.append(float(mp.log(total) / (a - 1)))
        return np.array(out)


@pytest.mark.parametrize("z", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_wor_gaussian_matches_dp_accounting(z):
    """Equal to dp-accounting's Theorem 27 code called with sigma = z/2 (replace-one
    sensitivity 2C), integer and fractional orders, below and above the exact range 256."""
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = [a for a in WOR_ORDERS if a not in (200.0, 255.5)]  # dp-accounting is slow there
    for q in (1e-3, 16 / 600, 0.1, 0.5, 0.9):
        ours = rdp_without_replacement_gaussian(orders, q, z)
        theirs = rdp_privacy_accountant._compute_rdp_sample_wor_gaussian(q, z / 2, orders)
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=0)


def test_wor_gaussian_exact_where_dp_accounting_cancels():
    """Large noise: the alternating forward differences cancel; ours stay exact (mpmath
    reference) while dp-accounting's float differencing over-estimates by up to ~20x."""
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = [3.0, 8.0, 32.0, 128.0]
    worst = 0.0
    for z in (20.0, 100.0):
        for q in (0.1, 0.5):
            ours = rdp_without_replacement_gaussian(orders, q, z)
            np.testing.assert_allclose(ours, mp_wor_gaussian(q, z, orders), rtol=1e-12)
            theirs = rdp_privacy_accountant._compute_rdp_sample_wor_gaussian(q, z / 2, orders)
            worst = max(worst, float(np.max(theirs / ours)))
    assert worst > 10.0


def test_wor_gaussian_forward_differences_exact_path():
    """The integer forward differences against mpmath, and the float / exact switch."""
    for c in (0.125, 0.02, 2e-4, 2e-9):
        m = 40
        ours = rdp_wor_gaussian._log_forward_diffs_exact(c, m)
        with mp.workdps(200):
            g = [mp.exp(mp.mpf(c) * i * (i - 1)) for i in range(m + 1)]
            for ell in range(2, m + 1, 2):
                terms = ((-1) ** (ell - i) * mp.binomial(ell, i) * g[i] for i in range(ell + 1))
                ref = mp.fsum(terms)
                assert ours[ell] == pytest.approx(float(mp.log(ref)), rel=1e-14, abs=1e-13)
        combined = rdp_wor_gaussian._log_forward_diffs(c, m)
        np.testing.assert_allclose(combined[2::2], ours[2::2], rtol=1e-12)
    _, unreliable = rdp_wor_gaussian._log_forward_diffs_float(2.0, 256)  # z = 1: no cancellation
    assert unreliable == 0
    # z = 100: cancels everywhere
    _, unreliable = rdp_wor_gaussian._log_forward_diffs_float(2e-4, 256)
    assert unreliable == 256


def test_wor_gaussian_convention_q_one_and_interpolation():
    z = 3.0
    orders = np.array([1.2, 2.0, 4.5, 64.0])
    # q = 1: the plain Gaussian under replace-one, sensitivity 2C: 2 alpha / z^2
    np.testing.assert_allclose(rdp_without_replacement_gaussian(orders, 1.0, z), 2 * orders / 9)
    np.testing.assert_allclose(
        rdp_without_replacement_gaussian(orders, 1.0, z), rdp_gaussian(orders, z, sensitivity=2)
    )
    # alpha <= 2 has only the j = 2 term: identical to Theorem 9 with base 2 alpha / z^2
    q, e2 = 0.05, 4.0 / z**2
    k2 = math.log1p(q**2 * min(4 * math.expm1(e2), 2 * math.exp(e2)))
    np.testing.assert_allclose(
        rdp_without_replacement_gaussian([1.2, 1.7, 2.0], q, z), [k2, k2, k2], rtol=1e-14
    )
    # fractional orders: convex interpolation of the CGF (alpha - 1) rdp(alpha)
    k4, k5 = rdp_without_replacement_gaussian([4.0, 5.0], q, z) * np.array([3.0, 4.0])
    assert rdp_without_replacement_gaussian([4.25], q, z)[0] == pytest.approx(
        (0.75 * k4 + 0.25 * k5) / 3.25, rel=1e-14
    )


@pytest.mark.parametrize("z", [0.7, 2.0, 4.75, 20.0])
def test_wor_gaussian_never_above_theorem9(z):
    strictly_below = False
    for q in (1e-3, 0.03, 0.1, 0.5, 0.95):
        specific = rdp_without_replacement_gaussian(WOR_ORDERS, q, z)
        generic = rdp_without_replacement(WOR_ORDERS, q, lambda a: 2 * a / z**2)
        assert np.all(specific <= generic * (1 + 1e-11))  # equal terms above 256: rounding
        strictly_below |= bool(np.any(specific < 0.99 * generic))
    assert strictly_below


@pytest.mark.parametrize(
    ("z", "q"), [(1.0, 0.01), (2.0, 16 / 600), (4.75, 0.1), (1.0, 0.3), (8.0, 0.5)]
)
def test_wor_gaussian_epsilon_not_below_exact(z, q):
    """Sanity (lower) check: the RDP epsilon of T fixed-size-batch steps is never below the
    exact single-step epsilon (T = 1, exact profile) nor the PLD accountant's (T = 1, 3, 10)."""
    from privfl.accounting.pld.accountant import PldAccountant, without_replacement_gaussian_delta

    delta = 1e-5
    step = NoisyStep(z, q, Sampling.WITHOUT_REPLACEMENT)
    rdp, pld = RdpAccountant(), PldAccountant()
    for steps in (1, 3, 10):
        event = PrivacyEvent(((step, steps),), neighbouring=Neighbouring.REPLACE_ONE)
        eps_rdp = rdp.epsilon(event, delta).epsilon
        assert eps_rdp >= pld.epsilon(event, delta).epsilon
        if steps == 1:
            assert without_replacement_gaussian_delta(eps_rdp, z, q) <= delta


def test_wor_gaussian_accountant_values():
    """Seed 0 (q = 16/600, z = 2, T = 3534, delta = 1e-5): the optimal order is 2, where
    Theorems 9 and 27 coincide, so epsilon stays 23.76 (PLD: 13.88). Where higher orders are
    optimal the specific bound is much tighter: q = 0.1, z = 4.75, T = 10: 1.2014 vs 1.6274."""
    accountant = RdpAccountant()

    def event(z, q, steps):
        step = NoisyStep(z, q, Sampling.WITHOUT_REPLACEMENT)
        return PrivacyEvent(((step, steps),), neighbouring=Neighbouring.REPLACE_ONE)

    def generic(z, q, steps):
        curve = rdp_without_replacement(DEFAULT_ORDERS, q, lambda a: 2 * a / z**2)
        return epsilon_from_rdp(DEFAULT_ORDERS, steps * curve, 1e-5)[0]

    seed0 = accountant.epsilon(event(2.0, 16 / 600, 3534), 1e-5)
    assert seed0.epsilon == pytest.approx(23.762736, abs=1e-5) and seed0.extras["order"] == 2.0
    assert seed0.epsilon == pytest.approx(generic(2.0, 16 / 600, 3534), rel=1e-12)
    small = accountant.epsilon(event(4.75, 0.1, 10), 1e-5).epsilon
    assert small == pytest.approx(1.2014, abs=1e-4)
    assert generic(4.75, 0.1, 10) == pytest.approx(1.6274, abs=1e-4)


def test_wor_gaussian_validation():
    with pytest.raises(ValueError, match="sampling_rate"):
        rdp_without_replacement_gaussian([2.0], 0.0, 1.0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        rdp_without_replacement_gaussian([2.0], 0.1, -1.0)
    with pytest.raises(ValueError, match="orders"):
        rdp_without_replacement_gaussian([1.0], 0.1, 1.0)


# ------------------------------------------------------------------------------------------
# Conversions
# ------------------------------------------------------------------------------------------


def test_classic_and_improved_conversion_formulas():
    orders, rdp, delta = [2.0, 8.0, 32.0], [0.1, 0.5, 3.0], 1e-5
    eps, order = epsilon_from_rdp(orders, rdp, delta, "classic")
    candidates = [r + math.log(1 / delta) / (a - 1) for a, r in zip(orders, rdp, strict=True)]
    assert eps == pytest.approx(min(candidates)) and order == 8.0
    eps, order = epsilon_from_rdp(orders, rdp, delta)
    candidates = [
        r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
        for a, r in zip(orders, rdp, strict=True)
    ]
    assert eps == pytest.approx(min(candidates))
    # delta at that epsilon gives back delta (the optimum order is the same)
    for conversion in ("classic", "improved"):
        eps, order = epsilon_from_rdp(orders, rdp, delta, conversion)
        back, back_order = delta_from_rdp(orders, rdp, eps, conversion)
        assert back == pytest.approx(delta, rel=1e-9) and back_order == order


@given(
    rdp=st.lists(st.floats(1e-6, 50.0), min_size=3, max_size=3),
    log_delta=st.floats(-30, -1),
)
@PROPERTY
def test_conversions_match_dp_accounting(rdp, log_delta):
    from dp_accounting.rdp import rdp_privacy_accountant

    orders = [2.0, 5.0, 40.0]
    delta = math.exp(log_delta)
    eps, _ = epsilon_from_rdp(orders, rdp, delta)
    assert eps == pytest.approx(
        rdp_privacy_accountant.compute_epsilon(orders, rdp, delta)[0], rel=1e-12, abs=1e-15
    )
    back, _ = delta_from_rdp(orders, rdp, 1.0)
    # rel 1e-9: dp-accounting's KL bound log1p(-exp(-r)) loses digits for tiny r, ours uses expm1
    assert back == pytest.approx(
        rdp_privacy_accountant.compute_delta(orders, rdp, 1.0)[0], rel=1e-9, abs=1e-300
    )


def test_conversion_edge_cases():
    assert epsilon_from_rdp([2.0, 3.0], [math.inf, math.inf], 1e-5) == (math.inf, math.nan) or (
        math.isinf(epsilon_from_rdp([2.0, 3.0], [math.inf, math.inf], 1e-5)[0])
    )
    assert epsilon_from_rdp([2.0, 3.0], [math.inf, 0.5], 1e-5)[1] == 3.0
    assert epsilon_from_rdp([2.0, 3.0], [0.0, 0.0], 1e-5, "classic") == (0.0, 2.0)
    assert delta_from_rdp([2.0, 3.0], [0.0, 0.0], 0.0)[0] == 0.0
    assert delta_from_rdp([2.0], [math.inf], 1.0)[0] == 1.0
    # KL shortcut: tiny RDP at large delta gives epsilon 0 (Bretagnolle-Huber)
    assert epsilon_from_rdp([2.0], [1e-8], 1e-3)[0] == 0.0
    assert epsilon_from_rdp([2.0], [1e-8], 1e-3, "classic")[0] > 0.0
    assert delta_from_rdp([2.0], [100.0], 1.0)[0] == 1.0


def test_conversion_validation():
    for bad in (0.0, 1.0, -1e-5, math.nan, math.inf, "x"):
        with pytest.raises(ValueError, match="delta"):
            epsilon_from_rdp([2.0], [0.1], bad)
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="epsilon"):
            delta_from_rdp([2.0], [0.1], bad)
    with pytest.raises(ValueError, match="conversion"):
        epsilon_from_rdp([2.0], [0.1], 1e-5, "balle")
    with pytest.raises(ValueError, match="rdp"):
        epsilon_from_rdp([2.0, 3.0], [0.1], 1e-5)
    with pytest.raises(ValueError, match="rdp"):
        epsilon_from_rdp([2.0], [math.nan], 1e-5)
    with pytest.raises(ValueError, match="rdp"):
        delta_from_rdp([2.0], [-0.1], 1.0)


# ------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------

rates = st.floats(1e-4, 1.0)
noises = st.floats(0.3, 20.0)


@given(
    q=rates,
    z=noises,
    orders=st.lists(st.floats(1.01, 200.0), min_size=2, max_size=8, unique=True),
)
@PROPERTY
def test_rdp_non_decreasing_in_order(q, z, orders):
    orders = sorted(orders + [float(math.ceil(orders[0]))])
    values = rdp_poisson_gaussian(orders, q, z)
    assert np.all(np.isfinite(values)) and np.all(values > 0)
    assert np.all(np.diff(values) >= -1e-10 * values[1:])


@given(q=rates, z1=noises, z2=noises, steps=st.integers(1, 10_000))
@PROPERTY
def test_epsilon_non_increasing_in_noise(q, z1, z2, steps):
    low, high = sorted((z1, z2))
    accountant = RdpAccountant()
    eps_low = accountant.epsilon(dpsgd_event(low, q, steps), 1e-5).epsilon
    eps_high = accountant.epsilon(dpsgd_event(high, q, steps), 1e-5).epsilon
    assert eps_high <= eps_low * (1 + 1e-9) + 1e-12


@given(q=rates, z=noises, t1=st.integers(0, 10_000), t2=st.integers(0, 10_000))
@PROPERTY
def test_epsilon_non_decreasing_in_steps(q, z, t1, t2):
    few, many = sorted((t1, t2))
    accountant = RdpAccountant(conversion="classic")
    eps_few = accountant.epsilon(dpsgd_event(z, q, few), 1e-6).epsilon
    eps_many = accountant.epsilon(dpsgd_event(z, q, many), 1e-6).epsilon
    assert eps_few <= eps_many * (1 + 1e-12)


@given(q1=rates, q2=rates, z=noises, steps=st.integers(1, 1000))
@PROPERTY
def test_epsilon_non_decreasing_in_sampling_rate(q1, q2, z, steps):
    low, high = sorted((q1, q2))
    accountant = RdpAccountant()
    eps_low = accountant.epsilon(dpsgd_event(z, low, steps), 1e-5).epsilon
    eps_high = accountant.epsilon(dpsgd_event(z, high, steps), 1e-5).epsilon
    assert eps_low <= eps_high * (1 + 1e-9) + 1e-12
    curve_low = rdp_poisson_gaussian(LEGACY_ORDERS, low, z)
    curve_high = rdp_poisson_gaussian(LEGACY_ORDERS, high, z)
    assert np.all(curve_low <= curve_high * (1 + 1e-10))


bad_rates = st.sampled_from([0.0, -0.5, 1.5, math.nan, math.inf, True, "0.1"])
bad_positive = st.sampled_from([0.0, -1.0, math.nan, math.inf, -math.inf, None])
bad_orders = st.sampled_from([[1.0], [0.5, 2.0], [], [[2.0, 3.0]], [math.nan], ["a"], [math.inf]])


@given(bad=bad_rates)
@PROPERTY
def test_bad_sampling_rate_is_named(bad):
    with pytest.raises(ValueError, match="sampling_rate"):
        rdp_poisson_gaussian([2.0], bad, 1.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        rdp_without_replacement([2.0], bad, lambda a: a)


@given(bad=bad_positive)
@PROPERTY
def test_bad_noise_and_scale_are_named(bad):
    with pytest.raises(ValueError, match="noise_multiplier"):
        rdp_poisson_gaussian([2.0], 0.1, bad)
    with pytest.raises(ValueError, match="noise_multiplier"):
        rdp_gaussian([2.0], bad)
    with pytest.raises(ValueError, match="sensitivity"):
        rdp_gaussian([2.0], 1.0, bad)
    with pytest.raises(ValueError, match="scale"):
        rdp_laplace([2.0], bad)


@given(bad=bad_orders)
@PROPERTY
def test_bad_orders_are_named(bad):
    for call in (
        lambda: rdp_poisson_gaussian(bad, 0.1, 1.0),
        lambda: rdp_gaussian(bad, 1.0),
        lambda: rdp_laplace(bad, 1.0),
        lambda: rdp_without_replacement(bad, 0.1, lambda a: a),
        lambda: epsilon_from_rdp(bad, [0.1], 1e-5),
        lambda: RdpAccountant(orders=bad),
    ):
        with pytest.raises(ValueError, match="orders"):
            call()


def test_bad_accountant_arguments():
    with pytest.raises(ValueError, match="conversion"):
        RdpAccountant(conversion="balle")
    with pytest.raises(ValueError, match="orders"):
        RdpAccountant(orders="dense")
    with pytest.raises(ValueError, match="delta"):
        RdpAccountant().epsilon(dpsgd_event(1.0, 0.1, 10), 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        RdpAccountant().delta(dpsgd_event(1.0, 0.1, 10), -1.0)
    with pytest.raises(ValueError, match="event"):
        RdpAccountant().rdp_curve("not an event")


# ------------------------------------------------------------------------------------------
# The accountant: supported and unsupported events
# ------------------------------------------------------------------------------------------


def test_accountant_result_labels():
    accountant = RdpAccountant()
    assert accountant.name == "rdp" and accountant.kind == "bound"
    event = dpsgd_event(1.1, 0.01, 1000)
    result = accountant.epsilon(event, 1e-5)
    assert result.method == "rdp" and result.kind == "bound" and result.delta == 1e-5
    assert result.extras["conversion"] == "improved" and result.extras["order"] in DEFAULT_ORDERS
    assert result.steps == 1000 and result.neighbouring == "add-remove"
    back = accountant.delta(event, result.epsilon)
    assert back.delta == pytest.approx(1e-5, rel=1e-6) and back.epsilon == result.epsilon


def test_supported_step_kinds():
    orders = (2.0, 4.5)
    accountant = RdpAccountant(orders=orders)

    def curve(step, neighbouring):
        return accountant.rdp_curve(PrivacyEvent(((step, 3),), neighbouring=neighbouring))

    gauss = NoisyStep(2.0, 1.0, Sampling.NONE)
    np.testing.assert_allclose(curve(gauss, "add-remove"), 3 * np.array(orders) / 8)
    np.testing.assert_allclose(curve(gauss, "replace-one"), 3 * 2 * np.array(orders) / 4)
    poisson_q1 = NoisyStep(2.0, 1.0, Sampling.POISSON)  # effective sampling: none
    np.testing.assert_allclose(curve(poisson_q1, "replace-one"), 3 * 2 * np.array(orders) / 4)
    poisson = NoisyStep(2.0, 0.1, Sampling.POISSON)
    np.testing.assert_allclose(
        curve(poisson, "add-remove"), 3 * rdp_poisson_gaussian(orders, 0.1, 2.0)
    )
    wor = NoisyStep(2.0, 0.1, Sampling.WITHOUT_REPLACEMENT)
    np.testing.assert_allclose(
        curve(wor, "replace-one"), 3 * rdp_without_replacement_gaussian(orders, 0.1, 2.0)
    )
    laplace = NoisyStep(2.0, 1.0, Sampling.NONE, Noise.LAPLACE)
    np.testing.assert_allclose(curve(laplace, "add-remove"), 3 * rdp_laplace(orders, 2.0))
    np.testing.assert_allclose(curve(laplace, "replace-one"), 3 * rdp_laplace(orders, 1.0))


def test_heterogeneous_composition_adds_and_is_cached():
    accountant = RdpAccountant()
    a = NoisyStep(1.0, 0.01)
    b = NoisyStep(3.0, 0.2)
    both = PrivacyEvent(((a, 100), (b, 7), (a, 0)))
    expected = 100 * rdp_poisson_gaussian(DEFAULT_ORDERS, 0.01, 1.0) + 7 * rdp_poisson_gaussian(
        DEFAULT_ORDERS, 0.2, 3.0
    )
    first = accountant.rdp_curve(both)
    np.testing.assert_allclose(first, expected, rtol=1e-14)
    first[:] = 0.0  # the caller's copy; the cache is untouched
    hits = rdp_accountant._step_curve.cache_info().hits
    np.testing.assert_allclose(accountant.rdp_curve(both), expected, rtol=1e-14)
    assert rdp_accountant._step_curve.cache_info().hits >= hits + 2
    assert accountant.epsilon(PrivacyEvent(((a, 0),)), 1e-5).epsilon == 0.0


@pytest.mark.parametrize(
    ("step", "neighbouring", "words"),
    [
        (NoisyStep(1.0, 0.1, Sampling.POISSON), "replace-one", ["Poisson", "replace-one"]),
        (
            NoisyStep(1.0, 0.1, Sampling.WITHOUT_REPLACEMENT),
            "add-remove",
            ["without replacement", "add-remove"],
        ),
        (
            NoisyStep(1.0, 0.1, Sampling.POISSON, Noise.LAPLACE),
            "add-remove",
            ["laplace", "poisson"],
        ),
        (
            NoisyStep(1.0, 0.1, Sampling.WITHOUT_REPLACEMENT, Noise.LAPLACE),
            "replace-one",
            ["laplace", "without-replacement"],
        ),
    ],
)
def test_unsupported_combinations(step, neighbouring, words):
    accountant = RdpAccountant()
    event = PrivacyEvent(((step, 10),), neighbouring=Neighbouring(neighbouring))
    reason = accountant.unsupported_reason(event)
    assert reason is not None and not accountant.supports(event)
    for word in words:
        assert word in reason
    for call in (
        lambda: accountant.epsilon(event, 1e-5),
        lambda: accountant.delta(event, 1.0),
        lambda: accountant.rdp_curve(event),
    ):
        with pytest.raises(UnsupportedEventError, match="rdp accountant cannot handle"):
            call()


@pytest.mark.parametrize("conversion", ["classic", "improved"])
def test_delta_from_rdp_caps_at_one_where_every_order_gives_delta_beyond_floats(conversion):
    """A curve far above epsilon at every order (log delta > 709, beyond exp's range under the
    classic conversion) gives delta = 1, not an OverflowError: RdpAccountant.delta of a
    nearly noiseless event reaches it."""
    from privfl.accounting.events import dpsgd_event
    from privfl.accounting.rdp import RdpAccountant, delta_from_rdp

    orders = np.array([2.0, 8.0, 64.0])
    delta, order = delta_from_rdp(orders, 50.0 * orders, 3.0, conversion=conversion)
    assert delta == 1.0 and order in orders
    result = RdpAccountant(conversion=conversion).delta(dpsgd_event(0.05, 0.9, 1000), 3.0)
    assert result.delta == 1.0
