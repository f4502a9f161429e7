"""Random participation (seed 003): every value of spec seed3 section 7, the structural assertions
1-8 and 10 as property tests, the proof of the per-S1 bound checked numerically, composition
against privfl's RDP/PLD accountants, the report/calibration API and input validation."""

import math
import subprocess
import sys

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize, special, stats

from privfl.accounting import participation as rp
from privfl.accounting.methods import AccountingOptions, account
from privfl.accounting.participation import (
    amplification,
    gaussian,
    per_iteration,
    theorem41,
)
from privfl.accounting.participation import setting as rp_setting
from privfl.accounting.rdp import epsilon_from_rdp, rdp_poisson_gaussian

FAST = settings(max_examples=40, deadline=None)
SIX_ONE = (0.001, 0.1, 30)  # (p, q, d) of the paper's Section 6.1
SIX_TWO = (0.1, 0.001, 1000)  # Section 6.2
POINT = (0.1, 0.1, 10, 1.0)  # (p, q, d, sigma) of the spec's single point, epsilon 0.5
BOUNDS = ("per-s1-convexity", "wcs", "ols", "cs")
COARSE = AccountingOptions(discretization=1e-3)


def delta(scheme, eps, p, q, d, sigma, direction="max", clip_norm=1.0):
    return rp.participation_delta(scheme, eps, p, q, d, sigma, clip_norm=clip_norm,
                                  direction=direction)


# --------------------------------------------------------------------------------------------
# Independent reference: exact hockey-stick divergence of two 1-D Gaussian mixtures
# --------------------------------------------------------------------------------------------


def hockey_1d(pos_w, pos_m, neg_w, neg_m, sigma, n=40001):
    """int [sum pos_w N(m, s^2) - sum neg_w N(m, s^2)]_+ by a sign-change scan, Brent refinement
    of every crossing and exact normal CDFs on each positive interval (any number of crossings)."""
    pos_w, pos_m = np.asarray(pos_w, float), np.asarray(pos_m, float)
    neg_w, neg_m = np.asarray(neg_w, float), np.asarray(neg_m, float)
    lp_w, ln_w = np.log(pos_w), np.log(neg_w)

    def gap(z):
        z = np.atleast_1d(z)[:, None]
        a = special.logsumexp(lp_w - (z - pos_m) ** 2 / (2 * sigma**2), axis=1)
        b = special.logsumexp(ln_w - (z - neg_m) ** 2 / (2 * sigma**2), axis=1)
        return a - b

    means = np.concatenate([pos_m, neg_m])
    grid = np.linspace(means.min() - 60 * sigma, means.max() + 60 * sigma, n)
    g = gap(grid)
    cuts = [-np.inf]
    for a in np.flatnonzero(np.sign(g[:-1]) != np.sign(g[1:])):
        cuts.append(optimize.brentq(lambda x: gap(x)[0], grid[a], grid[a + 1], xtol=1e-14))
    cuts.append(np.inf)
    total = 0.0
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        if np.isinf(lo) and np.isinf(hi):
            mid = 0.0
        elif np.isinf(hi):
            mid = lo + 1.0
        elif np.isinf(lo):
            mid = hi - 1.0
        else:
            mid = 0.5 * (lo + hi)
        if gap(mid)[0] <= 0:
            continue

        def mass(w, m, lo=lo, hi=hi):
            return float(
                np.sum(w * (special.ndtr((hi - m) / sigma) - special.ndtr((lo - m) / sigma)))
            )

        def tail(w, m, lo=lo, hi=hi):  # the same as SF differences (accurate in upper tails)
            return float(
                np.sum(w * (special.ndtr(-(lo - m) / sigma) - special.ndtr(-(hi - m) / sigma)))
            )

        upper = lo > float(np.max(means))
        f = tail if upper else mass
        total += f(pos_w, pos_m) - f(neg_w, neg_m)
    return total


def rp_pair(eps, p, q, d, sigma, scale=1.0, cutoff=60.0):
    """The spec's 1-D random-participation pair (other gradients scale*C, x' gradient C)."""
    i = np.arange(d + 1)
    b = stats.binom.pmf(i, d, q)
    keep = b >= b.max() * math.exp(-cutoff)
    i, b = i[keep], b[keep]
    with_w = np.concatenate([[1 - p], p * (1 - q) * b, p * q * b])
    with_m = np.concatenate([[0.0], scale * i, scale * i + 1.0])
    without_w = np.concatenate([[1 - p], p * b]) * math.exp(eps)
    without_m = np.concatenate([[0.0], scale * i])
    with_w, with_m = with_w[with_w > 0], with_m[with_w > 0]
    without_w, without_m = without_w[without_w > 0], without_m[without_w > 0]
    return (with_w, with_m, without_w, without_m)


def rp_exact(eps, p, q, d, sigma, scale=1.0, reverse=False):
    ww, wm, ow, om = rp_pair(eps, p, q, d, sigma, scale)
    if not reverse:
        return hockey_1d(ww, wm, ow, om, sigma)
    e = math.exp(eps)
    return hockey_1d(ow / e, om, ww * e, wm, sigma)


# --------------------------------------------------------------------------------------------
# Spec section 7: building blocks and the single point
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eps", "sigma", "golden"),
    [(1.0, 1.0, 0.126936737506), (0.5, 2.0, 0.0524403232877), (5.0225, 0.5674, 0.0100261470570)],
)
def test_gaussian_delta_building_blocks(eps, sigma, golden):
    assert rp.gaussian_delta(eps, sigma) == pytest.approx(golden, rel=1e-9)
    assert rp.gaussian_delta(eps, 2 * sigma, clip_norm=2.0) == pytest.approx(golden, rel=1e-12)


@pytest.mark.parametrize(
    ("eps", "rate", "golden"),
    [
        (0.5, 0.01, 4.187715394070089),
        (0.5, 0.1, 2.013196593022799),
        (0.015, 1e-4, 5.024739665867514),
    ],
)
def test_deamplify(eps, rate, golden):
    assert rp.deamplify_epsilon(eps, rate) == pytest.approx(golden, rel=1e-13)
    assert rp.amplify_epsilon(golden, rate) == pytest.approx(eps, rel=1e-12)


def test_single_point_constants():
    k = rp.participation_constants(0.5, 0.1, 0.1)
    assert k["alpha1"] == pytest.approx(65.87212707001278, rel=1e-12)
    assert k["beta"] == pytest.approx(0.02502911844561767, rel=1e-12)
    assert k["cbar1"] == pytest.approx(0.8863371650494385, rel=1e-12)
    assert k["cbar2"] == pytest.approx(0.11366283495056154, rel=1e-12)
    # alpha' cb2 = 1 + (e^eps - 1)/q, i.e. eps'' = deamp(eps, q)  (spec 4.3)
    assert math.log(k["alpha1"] * k["cbar2"]) == pytest.approx(k["eps2"], rel=1e-12)


def test_section_6_1_constants():
    k = rp.participation_constants(0.015, 0.001, 0.1)
    assert k["eps1"] == pytest.approx(5.024739665867514, rel=1e-12)
    assert k["alpha1"] == pytest.approx(152.13064615718974, rel=1e-12)
    assert k["beta"] == pytest.approx(0.006672640196156454, rel=1e-12)
    assert k["cbar1"] == pytest.approx(0.9924332757716169, rel=1e-12)
    assert k["cbar2"] == pytest.approx(0.007566724228383136, rel=1e-12)
    assert k["eps2"] == pytest.approx(0.1407446299509939, rel=1e-12)
    assert rp.participation_constants(0.015, 0.1, 0.001)["eps2"] == pytest.approx(
        2.7796304097440676, rel=1e-12
    )


@pytest.mark.parametrize(
    ("scheme", "golden"),
    [
        ("cs", 2.2145190132e-7),
        ("ols", 2.0325369203e-3),
        ("wcs", 2.0325369203e-4),
        ("theorem-4.1", 7.1327676138e-7),
        ("per-s1-convexity", 1.0222536024e-4),
    ],
)
def test_single_point_deltas(scheme, golden):
    assert delta(scheme, 0.5, *POINT) == pytest.approx(golden, rel=1e-6)
    assert delta(scheme, 0.5, *POINT, direction="forward") == pytest.approx(golden, rel=1e-6)


def test_single_point_zstar():
    assert rp.theorem41_zstar(0.5, *POINT) == pytest.approx(7.020639677689849, rel=1e-10)
    assert rp.theorem41_zstar(0.5, 0.1, 0.1, 10, 2.0, clip_norm=2.0) == pytest.approx(
        2 * 7.020639677689849, rel=1e-10
    )


# --------------------------------------------------------------------------------------------
# Calibrations (spec 6.1 / 6.2), the paper's noise levels and the tables of spec 5
# --------------------------------------------------------------------------------------------


def test_calibration_section_6_1():
    noise = rp.calibrate_participation(*SIX_ONE, 0.015, 1e-6)
    golden = {
        "wcs": 7.6651,
        "ols": 22.4975,
        "cs": 0.5674,
        "theorem-4.1": 2.3715,
        "per-s1-convexity": 2.4903,
    }
    assert set(noise) == set(rp.SCHEMES)
    for scheme, value in golden.items():
        assert noise[scheme] == pytest.approx(value, rel=1e-3), scheme
    for scheme in rp.SCHEMES:  # the calibrated noise meets the target (safe side)
        assert delta(scheme, 0.015, *SIX_ONE, noise[scheme]) <= 1e-6 * (1 + 1e-12)


def test_calibration_section_6_2():
    noise = rp.calibrate_participation(*SIX_TWO, 0.015, 1e-6)
    golden = {"wcs": 0.8739, "ols": 1.1035, "cs": 0.5674, "per-s1-convexity": 0.8151}
    for scheme, value in golden.items():
        assert noise[scheme] == pytest.approx(value, rel=1e-3), scheme
    assert noise["theorem-4.1"] is None  # "unreachable"
    assert rp.participation_noise("theorem-4.1", 0.015, 1e-6, *SIX_TWO) is None


def test_theorem41_section_6_2_never_reaches_target():
    grid = np.geomspace(0.005, 100.0, 60)
    values = [delta("theorem-4.1", 0.015, *SIX_TWO, s) for s in grid]
    assert max(values) == pytest.approx(2.98e-19, rel=2e-3)
    assert delta("cs", 0.015, *SIX_TWO, 0.01) == pytest.approx(1.0e-4, rel=1e-6)


def test_theorem41_section_6_1_calibrated_point():
    sigma = 2.3714975859604563
    assert rp.theorem41_zstar(0.015, *SIX_ONE, sigma) == pytest.approx(9.399058614, rel=1e-9)
    assert delta("theorem-4.1", 0.015, *SIX_ONE, sigma) == pytest.approx(1e-6, rel=1e-6)


def test_calibration_scales_with_clip():
    a = rp.calibrate_participation(*SIX_ONE, 0.015, 1e-6, schemes=["wcs", "cs"])
    b = rp.calibrate_participation(*SIX_ONE, 0.015, 1e-6, clip_norm=3.0, schemes=["wcs", "cs"])
    for scheme in a:
        assert b[scheme] == pytest.approx(3.0 * a[scheme], rel=1e-9)


@pytest.mark.parametrize(
    ("setting", "scheme", "sigma", "golden"),
    [
        (SIX_ONE, "theorem-4.1", 1.065, 1.344e-5),
        (SIX_ONE, "per-s1-convexity", 1.065, 2.174e-5),
        (SIX_ONE, "wcs", 7.65, 1.006e-6),
        (SIX_ONE, "ols", 22.4, 1.056e-6),
        (SIX_TWO, "theorem-4.1", 0.646, 5.12e-20),
        (SIX_TWO, "per-s1-convexity", 0.646, 4.512e-6),
        (SIX_TWO, "wcs", 0.873, 1.008e-6),
        (SIX_TWO, "ols", 1.103, 1.006e-6),
        (SIX_TWO, "cs", 0.646, 2.291e-7),
    ],
)
def test_delta_at_paper_noise(setting, scheme, sigma, golden):
    assert delta(scheme, 0.015, *setting, sigma) == pytest.approx(golden, rel=1e-3)


@pytest.mark.parametrize(
    ("setting", "sigma", "golden"),
    [(SIX_ONE, 1.065, (0.1113, 0.4860, 0.5547)), (SIX_TWO, 0.646, (0.00235, 0.0475, 0.0635))],
)
def test_epsilon_at_paper_noise(setting, sigma, golden):
    schemes = ("theorem-4.1", "per-s1-convexity", "wcs")
    for scheme, value in zip(schemes, golden, strict=True):
        eps = rp.participation_epsilon(scheme, 1e-6, *setting, sigma)
        assert eps == pytest.approx(value, abs=1e-4), scheme


# spec 5.2, epsilon at delta (sigma = 1, p = q = 0.1), abs 1e-4
EPS_TABLE = {
    1e-4: [0.0876, 0.1393, 0.1539, 0.2117, 0.5047, 0.0526, 0.6499, 0.6499, 1.1654],
    1e-5: [0.1995, 0.4186, 0.5538, 0.3468, 1.0254, 0.0881, 1.1654, 1.1654, 1.6845],
    1e-6: [0.3639, 0.8824, 1.0928, 0.4802, 1.5603, 0.1187, 1.6845, 1.6845, 2.1817],
}
EPS_COLUMNS = [
    ("cs", 0),
    ("theorem-4.1", 1),
    ("per-s1-convexity", 1),
    ("theorem-4.1", 10),
    ("per-s1-convexity", 10),
    ("theorem-4.1", 100),
    ("per-s1-convexity", 100),
    ("wcs", 0),
    ("ols", 0),
]


@pytest.mark.parametrize("target", sorted(EPS_TABLE))
def test_figure1_epsilon_table(target):
    for (scheme, d), golden in zip(EPS_COLUMNS, EPS_TABLE[target], strict=True):
        eps = rp.participation_epsilon(scheme, target, 0.1, 0.1, d, 1.0)
        assert eps == pytest.approx(golden, abs=1e-4), (scheme, d)
    if target == 1e-5:
        for d, golden in ((0, 0.1995), (30, 1.1464), (1000, 1.1654)):
            eps = rp.participation_epsilon("per-s1-convexity", target, 0.1, 0.1, d, 1.0)
            assert eps == pytest.approx(golden, abs=1e-4)


@pytest.mark.parametrize(
    ("eps", "golden"),
    [
        (0.1, (1.839e-4, 9.601e-4, 1.847e-3)),
        (0.5, (1.281e-5, 1.022e-4, 2.032e-4)),
        (1.0, (1.472e-6, 1.115e-5, 2.071e-5)),
        (2.0, (2.003e-8, 1.397e-7, 2.355e-7)),
    ],
)
def test_figure1_variant_b_delta_table(eps, golden):
    for d, value in zip((1, 10, 100), golden, strict=True):
        assert delta("per-s1-convexity", eps, 0.1, 0.1, d, 1.0) == pytest.approx(value, rel=1e-3)


@pytest.mark.parametrize(
    ("eps", "d", "golden"),
    [(0.05, 1, 4.662e-4), (0.1, 10, 5.395e-4), (0.25, 30, 9.058e-7), (0.5, 100, 2.897e-24)],
)
def test_figure1_theorem41_table(eps, d, golden):
    assert delta("theorem-4.1", eps, 0.1, 0.1, d, 1.0) == pytest.approx(golden, rel=1e-3)


def test_figure1_theorem41_deep_tail_against_mpmath():
    """The spec's table prints 3.084e-39 at (eps, d) = (1, 100): a cancellation floor. The
    60-digit evaluation of Eq. (6) agrees with the Mills-ratio form (2.4354e-48)."""
    mpmath.mp.dps = 60
    eps, p, q, d, sig = map(mpmath.mpf, (1, "0.1", "0.1", 100, 1))
    pq = p * q
    e1 = mpmath.log(1 + (mpmath.e**eps - 1) / pq)
    a1, beta = mpmath.e**e1, mpmath.e ** (eps - e1)
    c1, c2 = (1 - p) / (1 - pq), p * (1 - q) / (1 - pq)
    k, c = a1 * ((1 - beta) * c2 + beta), a1 * (1 - beta) * c1
    b = [mpmath.binomial(100, i) * q**i * (1 - q) ** (100 - i) for i in range(101)]
    zs = mpmath.mpf(rp.theorem41_zstar(1.0, 0.1, 0.1, 100, 1.0))

    def sf(x):
        return mpmath.ncdf(-x)

    exact = pq * (sum(b[i] * (sf(zs - i - 1) - k * sf(zs - i)) for i in range(101)) - c * sf(zs))
    mpmath.mp.dps = 15
    assert delta("theorem-4.1", 1.0, 0.1, 0.1, 100, 1.0) == pytest.approx(float(exact), rel=1e-8)


@pytest.mark.parametrize(
    ("eps", "sigma", "q", "d", "thm", "ols"),
    [
        (0.5, 1.0, 0.1, 10, 7.13e-6, 2.03e-3),
        (0.1, 1.0, 0.01, 100, 1.45e-12, 7.29e-5),
        (1.0, 2.0, 0.05, 20, 8.28e-27, 9.68e-15),
    ],
)
def test_theorem41_fails_at_p_equal_1(eps, sigma, q, d, thm, ols):
    """Spec 4.6: at p = 1 the scheme IS OLS, but Theorem 4.1 returns far less."""
    assert delta("theorem-4.1", eps, 1.0, q, d, sigma) == pytest.approx(thm, rel=3e-3)
    assert delta("ols", eps, 1.0, q, d, sigma) == pytest.approx(ols, rel=3e-3)
    assert delta("per-s1-convexity", eps, 1.0, q, d, sigma) == pytest.approx(
        delta("ols", eps, 1.0, q, d, sigma), rel=1e-9
    )


def test_theorem41_below_cs_for_large_dq():
    eps_thm = rp.participation_epsilon("theorem-4.1", 1e-5, 0.1, 0.1, 100, 1.0)
    eps_cs = rp.participation_epsilon("cs", 1e-5, 0.1, 0.1, 100, 1.0)
    assert eps_thm == pytest.approx(0.0881, abs=1e-4)
    assert eps_cs == pytest.approx(0.1995, abs=1e-4)


# --------------------------------------------------------------------------------------------
# Structural assertions 1-8 (spec 7) as property tests
# --------------------------------------------------------------------------------------------

eps_st = st.sampled_from([0.01, 0.1, 0.5, 1.0, 2.0]) | st.floats(0.005, 3.0)
sigma_st = st.sampled_from([0.5, 1.0, 2.0, 5.0]) | st.floats(0.3, 8.0)
rate_st = st.sampled_from([0.01, 0.1, 0.5]) | st.floats(0.005, 0.95)
d_st = st.sampled_from([0, 1, 10, 50]) | st.integers(0, 200)


def close(a, b, rel=1e-9, tiny=1e-280):
    return abs(a - b) <= rel * max(abs(a), abs(b)) + tiny


@FAST
@given(eps=eps_st, sigma=sigma_st, p=rate_st, q=rate_st)
def test_1_d_zero_is_cs(eps, sigma, p, q):
    cs_forward = delta("cs", eps, p, q, 0, sigma, "forward")
    assert close(delta("theorem-4.1", eps, p, q, 0, sigma), cs_forward)
    for direction in rp.DIRECTIONS:
        assert close(
            delta("per-s1-convexity", eps, p, q, 0, sigma, direction),
            delta("cs", eps, p, q, 0, sigma, direction),
        )


@FAST
@given(eps=eps_st, sigma=sigma_st, p=rate_st, q=rate_st, d=d_st)
def test_2_wcs_is_p_times_ols(eps, sigma, p, q, d):
    for direction in rp.DIRECTIONS:
        assert close(
            delta("wcs", eps, p, q, d, sigma, direction),
            p * delta("ols", eps, p, q, d, sigma, direction),
        )
    k = rp.participation_constants(eps, p, q)
    assert k["eps2"] == pytest.approx(math.log1p(math.expm1(eps) / q), rel=1e-12)
    # Theorem 5.2 as printed: eps'' = eps' + log(e^{eps - eps'} + (1 - e^{eps-eps'}) p(1-q)/(1-pq))
    printed = k["eps1"] + math.log(k["beta"] + (1 - k["beta"]) * p * (1 - q) / (1 - p * q))
    assert k["eps2"] == pytest.approx(printed, rel=1e-9)


@FAST
@given(eps=eps_st, sigma=sigma_st, q=rate_st, d=d_st)
def test_3_p_one_is_ols(eps, sigma, q, d):
    for direction in rp.DIRECTIONS:
        ols = delta("ols", eps, 1.0, q, d, sigma, direction)
        assert close(delta("per-s1-convexity", eps, 1.0, q, d, sigma, direction), ols)
        assert close(delta("wcs", eps, 1.0, q, d, sigma, direction), ols)
    # the known failure: Theorem 4.1 is below the exact OLS value at p = 1
    assert delta("theorem-4.1", eps, 1.0, q, d, sigma) <= delta("ols", eps, 1.0, q, d, sigma) * (
        1 + 1e-9
    )


@FAST
@given(eps=eps_st, sigma=sigma_st, p=rate_st, q=rate_st, d=d_st)
def test_4_ordering(eps, sigma, p, q, d):
    slack = 1 + 1e-9
    thm = delta("theorem-4.1", eps, p, q, d, sigma)
    for direction in ("max", "forward", "reverse"):
        b = delta("per-s1-convexity", eps, p, q, d, sigma, direction)
        wcs = delta("wcs", eps, p, q, d, sigma, direction)
        ols = delta("ols", eps, p, q, d, sigma, direction)
        cs = delta("cs", eps, p, q, d, sigma, direction)
        assert cs <= b * slack + 1e-300
        assert b <= wcs * slack + 1e-300
        assert wcs <= ols * slack + 1e-300
        if direction != "reverse":
            assert thm <= b * slack + 1e-300


@FAST
@given(
    eps=st.sampled_from([0.05, 0.1, 0.5, 1.0]),
    sigma=st.sampled_from([0.5, 1.0, 2.0]),
    p=st.sampled_from([0.1, 0.5]),
    q=st.sampled_from([0.1, 0.5]),
    d=st.sampled_from([1, 5, 10, 30]),
)
def test_5_phi_form_sf_form_and_direct_integration(eps, sigma, p, q, d):
    s = rp_setting.Setting(p, q, d, sigma)
    sf_form = delta("theorem-4.1", eps, p, q, d, sigma)
    if sf_form / (p * q) > 1e-6:
        assert theorem41._theorem41_phi_form(eps, s) == pytest.approx(sf_form, rel=1e-8)
    if sf_form > 1e-11:
        assert rp_exact(eps, p, q, d, sigma) == pytest.approx(sf_form, rel=1e-6)


@pytest.mark.parametrize(
    "case",
    [
        (0.015, 1.065, *SIX_ONE),
        (0.015, 0.646, *SIX_TWO),
        (0.1, 1.0, 0.1, 0.1, 10),
        (0.5, 1.0, 0.1, 0.1, 1),
        (0.2, 1.0, 0.1, 0.1, 100),
    ],
)
def test_5_spec_consistency_points(case):
    eps, sigma, p, q, d = case
    sf_form = delta("theorem-4.1", eps, p, q, d, sigma)
    assert rp_exact(eps, p, q, d, sigma) == pytest.approx(sf_form, rel=1e-6)
    assert rp_exact(eps, p, q, d, sigma, reverse=True) <= 1e-15  # the reverse was 0 (spec 5.1)


@FAST
@given(
    eps=eps_st,
    sigma=st.floats(0.1, 8.0),
    p=rate_st,
    q=rate_st,
    d=st.sampled_from([0, 1, 5, 30, 100]),
)
def test_6_eq7_single_sign_change(eps, sigma, p, q, d):
    s = rp_setting.Setting(p, q, d, sigma)
    pos_log, pos_m, neg_log, neg_m = theorem41._theorem41_coefficients(eps, s)
    # the grouped coefficients change sign once (negative means all below positive ones)
    assert neg_m.max() < pos_m.min()
    zstar = rp.theorem41_zstar(eps, p, q, d, sigma)
    span = 50 * sigma + d + 5
    grid = np.linspace(zstar - span, zstar + 1.37 * span, 4001)[:, None]

    def log_ratio(log_w, m):
        return special.logsumexp(log_w + (grid * m - 0.5 * m * m) / sigma**2, axis=1)

    values = log_ratio(pos_log, pos_m) - log_ratio(neg_log, neg_m)
    positive = values > 0
    changes = np.flatnonzero(positive[:-1] != positive[1:])
    assert changes.size == 1
    assert grid[changes[0], 0] - 1e-9 <= zstar <= grid[changes[0] + 1, 0] + 1e-9


@FAST
@given(
    eps=st.floats(0.0, 2.5),
    step=st.floats(0.01, 1.0),
    sigma=sigma_st,
    p=rate_st,
    q=rate_st,
    d=d_st,
)
def test_7_monotone(eps, step, sigma, p, q, d):
    for scheme in rp.SCHEMES:
        lo = delta(scheme, eps, p, q, d, sigma)
        hi = delta(scheme, eps + step, p, q, d, sigma)
        assert hi <= lo * (1 + 1e-9) + 1e-300, scheme
    for scheme in BOUNDS:  # non-increasing in sigma (per-s1: proven, see the docs)
        assert (
            delta(scheme, eps + 1e-3, p, q, d, sigma * (1 + step))
            <= delta(scheme, eps + 1e-3, p, q, d, sigma) * (1 + 1e-9) + 1e-300
        ), scheme


def test_8_rdp_values_and_special_cases():
    orders = [2, 3, 5.5, 8, 10.3]
    golden = [0.0170368632, 0.0317123003, 0.2169827372, 1.3783614113, 2.6007421262]
    assert rdp_poisson_gaussian(orders, 0.1, 1.0) == pytest.approx(golden, abs=1e-10)
    # WCS at p = 1 is OLS; WCS lies between CS (rate pq) and OLS order by order
    assert rp.wcs_rdp(orders, 1.0, 0.1, 1.0) == pytest.approx(golden, abs=1e-10)
    wcs = rp.wcs_rdp(orders, 0.3, 0.1, 1.0)
    assert np.all(wcs <= np.asarray(golden) * (1 + 1e-12))
    assert np.all(rdp_poisson_gaussian(orders, 0.03, 1.0) <= wcs * (1 + 1e-12))


@FAST
@given(eps=eps_st, sigma=sigma_st, p=rate_st, q=rate_st)
def test_8_rdp_closed_form_matches_integration(eps, sigma, p, q):
    """RDP_WCS(a) integrates E_Q[(P/Q)^a] of the revealed pair: (1-p) + p E_psg."""
    a = 2.5
    z = sigma
    f = lambda x: (  # noqa: E731
        stats.norm.pdf(x, 0, z) * ((1 - q) + q * math.exp((2 * x - 1) / (2 * z * z))) ** a
    )
    inner = integrate.quad(f, -40 * z - 5, 40 * z + 5, limit=400, epsabs=0, epsrel=1e-12)[0]
    expected = math.log((1 - p) + p * inner) / (a - 1)
    assert rp.wcs_rdp([a], p, q, z)[0] == pytest.approx(expected, rel=1e-7)


@pytest.mark.parametrize("scheme", ["cs", "ols", "wcs"])
def test_8_exact_single_step_below_rdp(scheme):
    p, q, d, sigma = 0.1, 0.1, 10, 1.0
    orders = np.arange(1.1, 64.0, 0.1)
    rate = p * q if scheme == "cs" else q
    curve = (
        rp.wcs_rdp(orders, p, q, sigma)
        if scheme == "wcs"
        else rdp_poisson_gaussian(orders, rate, sigma)
    )
    for target in (1e-4, 1e-6):
        exact = rp.participation_epsilon(scheme, target, p, q, d, sigma)
        assert exact <= epsilon_from_rdp(orders, curve, target)[0] + 1e-12


def test_10_soundness_witness():
    """Spec 7.10: other gradients 0.296 C violate the paper's (0.015, 1e-6) at sigma = 0.646,
    and the proven per-S1 bound covers the witness."""
    witness = rp_exact(0.015, *SIX_TWO, 0.646, scale=0.296)
    assert witness == pytest.approx(1.7343e-6, rel=1e-3)
    assert witness > 1e-6
    assert delta("per-s1-convexity", 0.015, *SIX_TWO, 0.646) >= witness
    assert delta("theorem-4.1", 0.015, *SIX_TWO, 0.646) < witness


# --------------------------------------------------------------------------------------------
# The per-S1 bound: the terms, the worst-case lemma and the reverse direction, checked
# --------------------------------------------------------------------------------------------


def psi(a, k, c, A, B, R):
    """E[(a e^X1 - k e^X2 - c)_+], (X1, X2) Gaussian, means (-A/2, -B/2), covariance [[A, R],
    [R, B]]: the term H(a N(m1) || k N(m2) + c N(0)) in any dimension with A = |m1|^2/s^2,
    B = |m2|^2/s^2, R = <m1, m2>/s^2. Black-Scholes in X1 given X2, quadrature over X2 (the
    kinks of a degenerate, aligned configuration are passed to the quadrature)."""

    def call(mu, var, strike):
        if var <= 1e-300:
            return max(math.exp(mu) - strike, 0.0)
        sd = math.sqrt(var)
        d2 = (mu - math.log(strike)) / sd
        return math.exp(mu + var / 2) * special.ndtr(d2 + sd) - strike * special.ndtr(d2)

    if B <= 1e-300:
        return a * call(-A / 2, A, (k + c) / a)
    sb = math.sqrt(B)
    var = max(A - R * R / B, 0.0)

    def parts(w):
        return -A / 2 + R / sb * w, (k * math.exp(-B / 2 + sb * w) + c) / a

    def integrand(w):
        mu, strike = parts(w)
        return math.exp(-0.5 * w * w) / math.sqrt(2 * math.pi) * a * call(mu, var, strike)

    def edge(w):
        mu, strike = parts(w)
        return mu - math.log(strike)

    # e^X1 and e^X2 tilt the Gaussian weight towards w = R/sqrt(B) and sqrt(B)
    lo, hi = -15 + min(0.0, R / sb, sb), 15 + max(0.0, R / sb, sb)
    grid = np.linspace(lo, hi, 481)
    signs = [edge(w) > 0 for w in grid]
    kinks = [
        optimize.brentq(edge, grid[j], grid[j + 1])
        for j in range(len(grid) - 1)
        if signs[j] != signs[j + 1]
    ]
    return integrate.quad(
        integrand, lo, hi, points=kinks or None, limit=400, epsabs=1e-15, epsrel=1e-11
    )[0]


def test_psi_matches_two_dimensional_integration():
    """psi against brute-force 2-D integration for a non-aligned configuration."""
    k, c, z = 3.0, 2.0, 1.0
    v, u = np.array([1.5, 0.0]), np.array([0.3, 0.8])
    m1, m2 = v + u, v
    h = 0.01
    y1, y2 = np.meshgrid(np.arange(-9, 11, h), np.arange(-9, 10, h), indexing="ij")

    def dens(m):
        return np.exp(-((y1 - m[0]) ** 2 + (y2 - m[1]) ** 2) / (2 * z * z)) / (2 * math.pi)

    brute = float(np.sum(np.maximum(dens(m1) - k * dens(m2) - c * dens([0, 0]), 0.0)) * h * h)
    A, B, R = m1 @ m1, m2 @ m2, m1 @ m2
    assert psi(1.0, k, c, A, B, R) == pytest.approx(brute, rel=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    eps=st.sampled_from([0.1, 0.5, 1.0]),
    z=st.sampled_from([0.5, 1.0, 2.0]),
    p=st.sampled_from([0.1, 0.5]),
    q=st.sampled_from([0.1, 0.5]),
    i=st.integers(0, 4),
    frac_b=st.floats(0, 1),
    s=st.floats(0, 1),
    cos=st.floats(-1, 1),
)
def test_lemma_aligned_maximal_is_worst(eps, z, p, q, i, frac_b, s, cos):
    """Forward term H_{a'}(N(v+u) || cb1 N(0) + cb2 N(v)) over |u| <= C, |v| <= i C is maximal
    at u, v aligned with maximal norms; the reverse term H_{a'}(N(v) || cb1 N(0) +
    (1-beta) c2 N(v) + beta N(v+u)) at u anti-aligned with v. Both maxima are the 1-D closed
    forms used by the accountant."""
    kc = amplification._constants(eps, p, q)
    k, c = math.exp(kc.log_k), math.exp(kc.log_c)
    b = frac_b * i
    A = (b * b + 2 * b * s * cos + s * s) / z**2  # |v+u|^2
    Bv, R = b * b / z**2, (b * b + b * s * cos) / z**2  # |v|^2, <v+u, v>
    forward_max = math.exp(
        gaussian.log_positive_part(
            np.array([0.0]), np.array([[kc.log_k, kc.log_c]]), np.array([[1 / z, (i + 1) / z]])
        )[0]
    )
    assert psi(1.0, k, c, A, Bv, R) <= forward_max * (1 + 1e-7) + 1e-14
    # the maximum itself, in 2-D coordinates (aligned)
    top = psi(1.0, k, c, (i + 1) ** 2 / z**2, i * i / z**2, i * (i + 1) / z**2)
    assert top == pytest.approx(forward_max, rel=1e-6, abs=1e-14)
    # reverse: positive kappa N(v), negatives e^eps N(v+u) and c N(0)
    if kc.log_kappa > -math.inf:
        kappa, alpha = math.exp(kc.log_kappa), math.exp(eps)
        s_ = rp_setting.Setting(p, q, i, z)
        reverse_terms = np.exp(
            gaussian.log_positive_part(
                np.array([kc.log_kappa_pq if i == 0 else kc.log_kappa]),
                np.array([[eps, -np.inf if i == 0 else kc.log_c]]),
                np.array([[1 / z, max(i, 1) / z]]),
            )
        )
        assert s_.d == i
        value = psi(kappa, alpha, c, Bv, A, R)
        assert value <= reverse_terms[0] * (1 + 1e-7) + 1e-14


@pytest.mark.parametrize("direction", ["forward", "reverse"])
@pytest.mark.parametrize("case", [(0.05, 1.0, 0.3, 0.4, 3), (0.02, 0.7, 0.5, 0.5, 6)])
def test_per_s1_terms_match_direct_integration(direction, case):
    """delta_B = pq sum_i b_i T_i with T_i the hockey-stick of the aligned (forward) or
    anti-aligned (reverse) 1-D configuration, integrated numerically."""
    eps, sigma, p, q, d = case
    kc = amplification._constants(eps, p, q)
    k, c, alpha = math.exp(kc.log_k), math.exp(kc.log_c), math.exp(eps)
    kappa = 1 - math.expm1(eps) * (1 - q) / q
    total = 0.0
    for i in range(d + 1):
        if direction == "forward":
            t = hockey_1d([1.0], [i + 1.0], [k, c], [float(i), 0.0], sigma)
        else:
            assert kappa > 0
            c2p = (1 - math.exp(kc.log_beta)) * p * (1 - q) / (1 - p * q) * math.exp(kc.eps1)
            # H_{a'}(N(v) || cb1 N(0) + (1-beta) c2 N(v) + beta N(v - C)) in 1-D
            t = hockey_1d([1.0], [float(i)], [c, c2p, alpha], [0.0, float(i), i - 1.0], sigma)
        total += stats.binom.pmf(i, d, q) * t
    assert delta("per-s1-convexity", eps, p, q, d, sigma, direction) == pytest.approx(
        p * q * total, rel=1e-6
    )


@pytest.mark.parametrize("case", [(0.02, 0.7, 0.5, 0.5, 6), (0.01, 2.0, 0.3, 0.8, 4)])
def test_reverse_direction_covers_configurations(case):
    """The reverse bound covers the exact reverse delta of several configurations."""
    eps, sigma, p, q, d = case
    bound = delta("per-s1-convexity", eps, p, q, d, sigma, "reverse")
    assert bound > 0
    for scale in (0.0, 0.5, 1.0):
        assert rp_exact(eps, p, q, d, sigma, scale=scale, reverse=True) <= bound * (1 + 1e-6)
    # reverse cs/ols closed forms equal numerical integration
    for scheme, rate in (("cs", p * q), ("ols", q)):
        direct = rate * hockey_1d(
            [1 - math.expm1(eps) * (1 - rate) / rate], [0.0], [math.exp(eps)], [1.0], sigma
        )
        assert delta(scheme, eps, p, q, d, sigma, "reverse") == pytest.approx(direct, rel=1e-6)


def test_per_s1_is_non_decreasing_in_records():
    values = [delta("per-s1-convexity", 0.3, 0.2, 0.1, d, 1.0) for d in (0, 1, 2, 5, 20, 100, 400)]
    assert all(a <= b * (1 + 1e-12) for a, b in zip(values, values[1:], strict=False))
    assert values[-1] == pytest.approx(delta("wcs", 0.3, 0.2, 0.1, 0, 1.0), rel=1e-6)


def test_large_and_extreme_inputs():
    # big local datasets use a binomial window with rigorous tail bounds
    big = delta("per-s1-convexity", 0.5, 0.01, 0.5, 200_000, 3.0)
    assert delta("cs", 0.5, 0.01, 0.5, 0, 3.0) <= big <= delta("wcs", 0.5, 0.01, 0.5, 0, 3.0)
    # deltas far below the smallest double stay ordered (log space)
    s = rp_setting.Setting(0.1, 0.1, 10, 1.0)
    cs, b, wcs = (per_iteration.log_delta(x, 40.0, s) for x in ("cs", "per-s1-convexity", "wcs"))
    assert cs < b <= wcs < -700
    # q = 1 and p = q = 1
    assert delta("per-s1-convexity", 0.4, 0.3, 1.0, 5, 1.0) <= delta("wcs", 0.4, 0.3, 1.0, 5, 1.0)
    assert delta("ols", 0.4, 1.0, 1.0, 5, 1.0) == pytest.approx(rp.gaussian_delta(0.4, 1.0))
    assert delta("theorem-4.1", 0.4, 1.0, 1.0, 0, 1.0) == pytest.approx(rp.gaussian_delta(0.4, 1.0))
    assert delta("cs", 0.0, 0.5, 0.5, 3, 1.0) == pytest.approx(
        0.25 * (2 * special.ndtr(0.5) - 1), rel=1e-9
    )


@FAST
@given(target=st.floats(1e-9, 1e-2), sigma=sigma_st, p=rate_st, q=rate_st, d=d_st)
def test_epsilon_delta_round_trip(target, sigma, p, q, d):
    for scheme in ("per-s1-convexity", "wcs", "cs"):
        eps = rp.participation_epsilon(scheme, target, p, q, d, sigma)
        assert delta(scheme, eps, p, q, d, sigma) <= target * (1 + 1e-12)
        if eps > 1e-6:
            assert delta(scheme, eps * (1 - 1e-6) - 1e-9, p, q, d, sigma) > target * (1 - 1e-6)


# --------------------------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["cs", "ols"])
def test_composed_cs_ols_equal_privfl_accountants(scheme):
    p, q, d, sigma, T = 0.1, 0.2, 10, 1.5, 50
    results = rp.participation_report(
        p, q, d, sigma, delta=1e-5, iterations=T, methods=[scheme], options=COARSE
    )
    composed = {r.extras["accountant"]: r for r in results if r.steps == T}
    event = rp.participation_event(scheme, p, q, sigma, T)
    reference = account(event, delta=1e-5, methods=("rdp", "pld"), options=COARSE)
    for r in reference.results:
        mine = composed[r.method]
        assert mine.method == f"{scheme}-{r.method}"
        assert mine.epsilon == pytest.approx(r.epsilon, rel=1e-12)
        # CS is rigorous only for centralised sampling at rate p q: a lower reference here
        assert mine.kind == ("reference" if scheme == "cs" else "bound")
        assert mine.extras["scheme"] == scheme
    step = event.steps[0][0]
    assert step.sampling_rate == pytest.approx(p * q if scheme == "cs" else q)
    assert step.noise_multiplier == pytest.approx(sigma)


def test_composed_wcs_between_cs_and_ols():
    p, q, d, sigma, T = 0.2, 0.3, 5, 2.0, 40
    results = rp.participation_report(
        p, q, d, sigma, delta=1e-6, iterations=T, methods=["wcs", "ols", "cs"], options=COARSE
    )
    eps = {r.method: r.epsilon for r in results if r.steps == T}
    assert eps["cs-rdp"] <= eps["wcs-rdp"] <= eps["ols-rdp"]  # exact order by order
    assert eps["cs-pld"] <= eps["wcs-pld"] * (1 + 1e-3) + 1e-3
    assert eps["wcs-pld"] <= eps["ols-pld"] * (1 + 1e-3) + 1e-3
    assert eps["wcs-pld"] <= eps["wcs-rdp"] + 1e-3  # PLD is tight, RDP is not
    # delta mode
    results = rp.participation_report(
        p, q, d, sigma, epsilon=eps["wcs-pld"], iterations=T, methods=["wcs"], options=COARSE
    )
    by = {r.method: r for r in results}
    assert by["wcs-pld"].delta == pytest.approx(1e-6, rel=0.05)
    assert by["wcs-rdp"].delta >= 1e-6


def test_composed_wcs_at_p_one_is_ols():
    q, sigma, T = 0.1, 1.2, 30
    orders = np.array([1.5, 2, 4, 8, 16, 32])
    assert np.allclose(rp.wcs_rdp(orders, 1.0, q, sigma), rdp_poisson_gaussian(orders, q, sigma))
    wcs = rp.participation_report(
        1.0, q, 3, sigma, delta=1e-5, iterations=T, methods=["wcs", "ols"], options=COARSE
    )
    eps = {r.method: r.epsilon for r in wcs if r.steps == T}
    assert eps["wcs-rdp"] == pytest.approx(eps["ols-rdp"], rel=1e-12)
    assert eps["wcs-pld"] == pytest.approx(eps["ols-pld"], rel=2e-2)


def test_wcs_pld_single_step_matches_closed_form():
    p, q, sigma = 0.3, 0.2, 1.0
    pld = rp.wcs_pld(p, q, sigma, discretization=1e-4)
    for eps in (0.1, 0.5, 1.0):
        exact = delta("wcs", eps, p, q, 0, sigma)
        got = float(pld.get_delta_for_epsilon(eps))
        assert exact <= got <= exact * 1.01 + 1e-12  # pessimistic and close


def test_spec_rdp_totals():
    """Spec 4.7 / 8.6 illustrative totals (delta 1e-5, T = 1000), dp-accounting's order grid."""
    grid = [1 + x / 10 for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512, 1024]
    options = AccountingOptions(orders=grid)
    cases = [
        (SIX_ONE, 0.567, "cs", 1.80, 0.01),
        (SIX_ONE, 7.665, "wcs", 0.083, 1e-3),
        (SIX_ONE, 22.50, "ols", 0.544, 1e-3),
        (SIX_TWO, 0.873, "wcs", 0.873, 1e-3),
        (SIX_TWO, 1.103, "ols", 0.529, 1e-3),
    ]
    for setting, sigma, scheme, golden, tol in cases:
        results = rp.participation_report(
            *setting,
            sigma,
            delta=1e-5,
            iterations=1000,
            methods=[scheme],
            accountants=["rdp"],
            options=options,
        )
        (composed,) = [r for r in results if r.steps == 1000]
        assert composed.epsilon == pytest.approx(golden, abs=tol), (scheme, sigma)


def test_basic_composition_of_per_iteration_schemes():
    results = rp.participation_report(
        *SIX_ONE, 2.4903, delta=1e-3, iterations=1000, methods=["per-s1-convexity", "theorem-4.1"]
    )
    by = {r.method: r for r in results}
    b = by["per-s1-convexity-basic"]
    assert b.kind == "bound" and b.steps == 1000
    assert b.extras["per_iteration_delta"] == pytest.approx(1e-6)
    assert b.epsilon == pytest.approx(1000 * b.extras["per_iteration_epsilon"])
    assert b.extras["per_iteration_epsilon"] == pytest.approx(0.015, abs=1e-4)
    assert by["theorem-4.1-basic"].kind == "estimate"


# --------------------------------------------------------------------------------------------
# Report, labels, servers, calibration API
# --------------------------------------------------------------------------------------------


def test_report_labels_delta_mode():
    results = rp.participation_report(0.1, 0.1, 10, 1.0, epsilon=0.5)
    assert [r.method for r in results] == list(rp.SCHEMES)
    for r in results:
        assert r.epsilon == 0.5
        assert r.delta == pytest.approx(delta(r.method, 0.5, *POINT))
        assert r.unit == "record"
        assert r.neighbouring == "add-remove"
        assert r.release == "every aggregated noisy gradient (trusted server)"
        assert r.steps == 1
        assert r.extras["scheme"] == r.method
        assert r.kind == {"theorem-4.1": "estimate", "cs": "reference"}.get(r.method, "bound")
        assert r.kind == rp.scheme_kind(r.method)
        if r.method == "cs":
            assert r.sampling.startswith("centralized shuffling")
        else:
            assert r.sampling == "random participation (clients p=0.1, records q=0.1)"
    thm = results[0]
    assert (
        "lower bound" in thm.note.lower()
        and "not a worst-case" in thm.extras["random_participation"]
    )
    assert thm.extras["z_star"] == pytest.approx(7.020639677689849, rel=1e-9)
    assert results[1].extras["delta_reverse"] == 0.0


def test_report_epsilon_mode_and_clip():
    results = rp.participation_report(
        0.1, 0.1, 10, 2.0, clip_norm=2.0, delta=1e-5, methods=["per-s1-convexity", "cs"]
    )
    assert [r.method for r in results] == ["per-s1-convexity", "cs"]
    assert results[0].epsilon == pytest.approx(1.0254, abs=1e-4)
    assert results[1].epsilon == pytest.approx(0.1995, abs=1e-4)
    assert all(r.delta == 1e-5 for r in results)


def test_report_servers():
    trusted = rp.participation_report(0.1, 0.1, 10, 1.0, epsilon=0.5)
    untrusted = rp.participation_report(0.1, 0.1, 10, 1.0, epsilon=0.5, server="untrusted")
    for a, b in zip(trusted, untrusted, strict=True):
        assert a.delta == b.delta
        assert b.release.startswith("every client message (untrusted server")
    only = rp.participation_report(
        0.1,
        0.1,
        10,
        1.0,
        epsilon=0.5,
        server="untrusted-participants-only",
        iterations=5,
        options=COARSE,
    )
    assert {r.extras["scheme"] for r in only} == {"wcs", "ols"}
    with pytest.raises(ValueError, match="server"):
        rp.participation_report(
            0.1, 0.1, 10, 1.0, epsilon=0.5, server="untrusted-participants-only", methods=["cs"]
        )
    noise = rp.calibrate_participation(*SIX_ONE, 0.015, 1e-6, server="untrusted-participants-only")
    assert set(noise) == {"wcs", "ols"}


def test_calibrate_subset_and_participation_noise():
    noise = rp.calibrate_participation(*SIX_ONE, 0.015, 1e-6, schemes=["cs"])
    assert list(noise) == ["cs"]
    assert rp.participation_noise("cs", 0.015, 1e-6, *SIX_ONE) == pytest.approx(noise["cs"])
    # a target that sampling alone meets: no calibration (None), never a crash
    assert rp.participation_noise("cs", 0.5, 0.5, 0.1, 0.1, 0) is None


def test_no_torch_import():
    code = "import sys; import privfl.accounting.participation; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------

GOOD = {"client_rate": 0.1, "record_rate": 0.1, "records": 10, "noise": 1.0}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("client_rate", 0.0),
        ("client_rate", 1.5),
        ("client_rate", float("nan")),
        ("record_rate", -0.1),
        ("records", -1),
        ("records", 2.5),
        ("noise", 0.0),
        ("noise", float("inf")),
        ("clip_norm", -1.0),
        ("epsilon", -0.1),
        ("iterations", 0),
        ("server", "cloud"),
        ("methods", ["bogus"]),
        ("accountants", ["gdp-clt"]),
    ],
)
def test_report_rejects_bad_input(name, value):
    kwargs = {**GOOD, "epsilon": 0.5, name: value}
    with pytest.raises(ValueError, match=name):
        rp.participation_report(**kwargs)


def test_bad_input_other_functions():
    with pytest.raises(ValueError, match="epsilon.*delta"):
        rp.participation_report(**GOOD)
    with pytest.raises(ValueError, match="epsilon.*delta"):
        rp.participation_report(**GOOD, epsilon=0.5, delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        rp.participation_report(**GOOD, delta=1.0)
    with pytest.raises(ValueError, match="scheme"):
        rp.participation_delta("paper", 0.5, 0.1, 0.1, 10, 1.0)
    with pytest.raises(ValueError, match="direction"):
        rp.participation_delta("theorem-4.1", 0.5, 0.1, 0.1, 10, 1.0, direction="reverse")
    with pytest.raises(ValueError, match="direction"):
        rp.participation_delta("cs", 0.5, 0.1, 0.1, 10, 1.0, direction="up")
    with pytest.raises(ValueError, match="delta"):
        rp.participation_epsilon("cs", 0.0, 0.1, 0.1, 10, 1.0)
    with pytest.raises(ValueError, match="delta"):
        rp.calibrate_participation(0.1, 0.1, 10, 0.5, 2.0)
    with pytest.raises(ValueError, match="epsilon"):
        rp.calibrate_participation(0.1, 0.1, 10, -1.0, 1e-5)
    with pytest.raises(ValueError, match="schemes"):
        rp.calibrate_participation(0.1, 0.1, 10, 0.5, 1e-5, schemes=[])
    with pytest.raises(ValueError, match="scheme"):
        rp.participation_event("wcs", 0.1, 0.1, 1.0, 10)
    with pytest.raises(ValueError, match="iterations"):
        rp.participation_event("cs", 0.1, 0.1, 1.0, 0)
    with pytest.raises(ValueError, match="client_rate"):
        rp.wcs_rdp([2.0], 0.0, 0.1, 1.0)
    with pytest.raises(ValueError, match="orders"):
        rp.wcs_rdp([0.5], 0.5, 0.1, 1.0)
    with pytest.raises(ValueError, match="discretization"):
        rp.wcs_pld(0.5, 0.1, 1.0, discretization=0.0)
    with pytest.raises(ValueError, match="rate"):
        rp.deamplify_epsilon(0.5, 0.0)
    with pytest.raises(ValueError, match="noise"):
        rp.gaussian_delta(0.5, -1.0)


def test_cs_rows_are_a_reference_never_a_bound():
    """CS (centralised sampling at rate p q) is rigorous for another mechanism only: for random
    participation its rows, per iteration and composed, are a lower reference (issue 8)."""
    results = rp.participation_report(
        *SIX_TWO, 0.874, delta=1e-6, iterations=100, options=COARSE
    )
    by = {r.method: r for r in results}
    for method in ("cs", "cs-rdp", "cs-pld"):
        assert by[method].kind == "reference", method
        assert "reference" in by[method].extras["random_participation"]
    assert by["cs"].steps == 1 and by["cs-rdp"].steps == by["cs-pld"].steps == 100
    for method in ("wcs", "ols", "per-s1-convexity", "wcs-rdp", "wcs-pld", "ols-rdp", "ols-pld"):
        assert by[method].kind == "bound", method
    assert by["theorem-4.1"].kind == by["theorem-4.1-basic"].kind == "estimate"
    # the reference is below the bounds, as a lower reference must be
    assert by["cs-pld"].epsilon <= by["wcs-pld"].epsilon <= by["ols-pld"].epsilon
    assert rp.scheme_kind("cs") == "reference" and rp.scheme_kind("wcs") == "bound"
    with pytest.raises(ValueError, match="scheme"):
        rp.scheme_kind("cs-pld")


def test_calibration_report_labels_every_row():
    rows = rp.calibrate_participation_report(*SIX_TWO, 0.015, 1e-6)
    noise = rp.calibrate_participation(*SIX_TWO, 0.015, 1e-6)
    assert [row.method for row in rows] == list(noise)
    by = {row.method: row for row in rows}
    for row in rows:
        assert row.noise == noise[row.method]
        assert row.kind == rp.scheme_kind(row.method)
        assert (row.unit, row.neighbouring) == ("record", "add-remove")
        assert row.epsilon == 0.015 and row.delta == 1e-6
        data = row.to_dict()
        assert data["kind"] == row.kind and data["neighbouring"] == "add-remove"
        assert data["steps"] == 1 and data["reachable"] == (row.noise is not None)
    thm = by["theorem-4.1"]
    assert thm.kind == "estimate" and thm.noise is None and "unreachable" in thm.note
    assert by["cs"].kind == "reference" and "at least this noise" in by["cs"].note
    assert by["wcs"].kind == "bound" and by["wcs"].noise == pytest.approx(0.8739, rel=1e-3)
    # Section 6.1: Theorem 4.1 gives a number, labelled an estimate that may not meet the target
    six_one = {row.method: row for row in rp.calibrate_participation_report(*SIX_ONE, 0.015, 1e-6)}
    assert six_one["theorem-4.1"].kind == "estimate"
    assert six_one["theorem-4.1"].noise == pytest.approx(2.3715, rel=1e-3)
    assert "may NOT meet the target" in six_one["theorem-4.1"].note


# ------------------------------------------------------------- what a per-round row asks for
def test_without_basic_composition_only_the_basic_rows_go():
    """``basic_composition=False`` (DP-DSGD's per-round rows) leaves out exactly the
    ``*-basic`` results; every other result is the same, bit for bit."""
    args = (0.3, 0.1, 50, 1.2)
    kwargs = {"delta": 1e-5, "iterations": 7, "accountants": ("rdp",)}
    full = rp.participation_report(*args, **kwargs)
    short = rp.participation_report(*args, basic_composition=False, **kwargs)
    assert {r.method for r in full} - {r.method for r in short} == {
        "per-s1-convexity-basic", "theorem-4.1-basic"}
    assert [r.to_dict() for r in short] == [
        r.to_dict() for r in full if not r.method.endswith("-basic")]
    with pytest.raises(ValueError, match="basic_composition"):
        rp.participation_report(*args, basic_composition="no", **kwargs)
    from privfl.accounting.events import RandomParticipationStep

    with pytest.raises(ValueError, match="basic_composition"):
        RandomParticipationStep(0.3, 0.1, 50, 1.2, basic_composition=1)


def test_the_cached_wcs_curve_is_handed_out_as_a_copy():
    orders = [1.5, 2.0, 8.0]
    first = rp.wcs_rdp(orders, 0.3, 0.1, 1.0)
    expected = first.copy()
    first[:] = -1.0  # the caller's array to change
    again = rp.wcs_rdp(np.array(orders), 0.3, 0.1, 1.0)
    assert np.array_equal(again, expected)
    assert again.flags.writeable
