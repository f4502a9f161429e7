"""sqrt-JS and total variation (Zhang, Chen and Yang 2022; spec checks T3, T4, T16, T17)."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats
from scipy.spatial.distance import jensenshannon

from privfl.distortion.bounds import gaussian_tv_sandwich
from privfl.distortion.divergence import (
    SQRT_LN2,
    js_divergence,
    sqrt_js,
    tv_discrete,
    tv_gaussian_devroye,
    tv_gaussian_isotropic,
    tv_random_mask,
    tv_record_sampling,
)


# ------------------------------------------------------------------------ golden values
def test_sqrt_js_golden_t16():
    assert sqrt_js([0.5, 0.3, 0.2], [0.2, 0.3, 0.5]) == pytest.approx(0.257709748326, abs=1e-9)
    assert js_divergence([0.5, 0.3, 0.2], [0.2, 0.3, 0.5]) == pytest.approx(
        0.066414314382, abs=1e-9)
    assert sqrt_js([1, 0], [0, 1]) == pytest.approx(0.832554611158, abs=1e-9)
    assert pytest.approx(0.832554611158, abs=1e-12) == SQRT_LN2


def test_sqrt_js_base2_t16():
    # with base 2, sqrt-JS(F, prior) of the T9 model is 0.045575878389 (= natural / sqrt(ln 2))
    value = sqrt_js([25 / 56, 31 / 56], [0.5, 0.5]) / math.sqrt(math.log(2))
    assert value == pytest.approx(0.045575878389, abs=1e-9)


def test_sqrt_js_equals_scipy():
    p, q = [0.1, 0.2, 0.7], [0.3, 0.3, 0.4]
    assert sqrt_js(p, q) == pytest.approx(float(jensenshannon(p, q)), abs=1e-15)
    # scipy returns NaN on these (JS rounds below 0); privfl gives 0
    a = np.array([0.25, 0.25, 0.25, 0.25 + 1e-17])
    assert sqrt_js(a / a.sum(), a / a.sum()) == 0.0


@pytest.mark.parametrize(("s1", "s2", "d", "expected"), [
    (1, 1.05, 100, 0.136726920644),          # T3 row 1
    (0.04, 0.0402, 10000, 0.139967859877),   # T3 row 2
    (2, 2.02, 1, 0.00240768379945),          # T3 row 3
    (1, 2, 1, 0.166064074984),               # T4
    (1, 1.1, 100, 0.263423243839),
    (1, 1.01, 10000, 0.275005153332),
    (1, 2, 100, 0.985251147254),
])
def test_exact_isotropic_tv_golden(s1, s2, d, expected):
    assert tv_gaussian_isotropic(s1, s2, d) == pytest.approx(expected, abs=1e-9)
    assert tv_gaussian_isotropic(s2, s1, d) == pytest.approx(expected, abs=1e-9)  # symmetric


def test_exact_tv_matches_quadrature_in_one_dimension():
    # 1/2 int |N(0, 2) - N(0, 2.02)| by scipy quadrature (T3: 0.0024076837941)
    f = lambda x: abs(stats.norm.pdf(x, scale=math.sqrt(2)) - stats.norm.pdf(  # noqa: E731
        x, scale=math.sqrt(2.02)))
    cross = math.sqrt(math.log(2.02 / 2) / (1 / 2 - 1 / 2.02))  # where the densities meet
    value = sum(0.5 * integrate.quad(f, a, b, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
                for a, b in ((-40, -cross), (-cross, cross), (cross, 40)))
    assert tv_gaussian_isotropic(2, 2.02, 1) == pytest.approx(value, rel=1e-8)


def test_exact_tv_matches_two_dimensional_quadrature():
    # d = 2 in polar coordinates: TV = 1/2 int_0^inf |chi2_2 density difference| dr
    s1, s2 = 1.0, 1.7
    f = lambda r: abs(r / s1 * math.exp(-r * r / (2 * s1)) - r / s2 * math.exp(  # noqa: E731
        -r * r / (2 * s2)))
    value = 0.5 * integrate.quad(f, 0, 60, limit=200)[0]
    assert tv_gaussian_isotropic(s1, s2, 2) == pytest.approx(value, rel=1e-8)


@pytest.mark.parametrize("eps", [1e-14, 1e-9, 1e-4, 0.3, 50.0])
@pytest.mark.parametrize("d", [1, 7, 1000, 100_000])
def test_exact_tv_against_mpmath(eps, d):
    mpmath.mp.dps = 40
    e = mpmath.mpf(eps)
    a = d * mpmath.log1p(e) / e
    expected = float(mpmath.gammainc(mpmath.mpf(d) / 2, a / 2, a * (1 + e) / 2,
                                     regularized=True))
    assert tv_gaussian_isotropic(1.0, 1.0 + eps, d) == pytest.approx(expected, rel=1e-9)


def test_random_mask_tv_t17():
    assert tv_random_mask(0.9, 10) == pytest.approx(0.651321559900, abs=1e-9)
    assert tv_random_mask(0.99, 100) == pytest.approx(0.633967658727, abs=1e-9)
    assert tv_random_mask(0.5, 1) == 0.5
    assert tv_random_mask(1.0, 5) == 0.0
    assert tv_random_mask(0.0, 5) == 1.0


def test_record_sampling_tv_is_a_binomial_tv():
    n, p, q = 30, 0.3, 0.5
    k = np.arange(n + 1)
    expected = 0.5 * np.abs(stats.binom.pmf(k, n, p) - stats.binom.pmf(k, n, q)).sum()
    assert tv_record_sampling(n, p, q) == pytest.approx(expected, abs=1e-15)
    assert tv_record_sampling(n, 0.4, 0.4) == 0.0
    assert tv_record_sampling(n, 1.0, 0.5) == pytest.approx(1 - 0.5**n)  # P~ = all records


# ------------------------------------------------------------------------ properties
probability_vectors = st.integers(2, 6).flatmap(lambda n: st.tuples(*[
    st.lists(st.floats(0, 1), min_size=n, max_size=n).filter(lambda v: sum(v) > 1e-3)
    for _ in range(3)]))


@settings(max_examples=150, deadline=None)
@given(probability_vectors)
def test_tv_and_sqrt_js_are_metrics_in_range(vectors):
    p, q, r = (np.array(v) / sum(v) for v in vectors)
    for metric, top in ((tv_discrete, 1.0), (sqrt_js, SQRT_LN2)):
        assert 0.0 <= metric(p, q) <= top + 1e-12
        assert metric(p, p) == pytest.approx(0.0, abs=1e-7)
        assert metric(p, q) == pytest.approx(metric(q, p), abs=1e-12)
        assert metric(p, r) <= metric(p, q) + metric(q, r) + 1e-9


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-4, 1e3), st.floats(1e-6, 1e4), st.integers(1, 100_000))
def test_exact_tv_inside_devroye_and_lemma_6_7(s, noise, d):
    tv = tv_gaussian_isotropic(s, s + noise, d)
    lower, upper = gaussian_tv_sandwich(s, noise, d)
    assert lower.value * (1 - 1e-9) <= tv <= upper.value * (1 + 1e-9) + 1e-300
    lo, hi = tv_gaussian_devroye(np.full(3, s), np.full(3, s + noise))
    tv3 = tv_gaussian_isotropic(s, s + noise, 3)
    assert lo * (1 - 1e-9) <= tv3 <= hi * (1 + 1e-9)


def test_devroye_full_covariance_equals_diagonal_form():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 4))
    c1 = a @ a.T + 4 * np.eye(4)
    c2 = c1 + np.diag([0.5, 0.1, 0.0, 2.0])
    lam = np.linalg.eigvals(np.linalg.solve(c1, c2)).real - 1
    x = min(1.0, float(np.linalg.norm(lam)))
    assert tv_gaussian_devroye(c1, c2) == pytest.approx((x / 100, 1.5 * x), rel=1e-10)


# ------------------------------------------------------------------------ validation
@pytest.mark.parametrize(("call", "message"), [
    (lambda: tv_gaussian_isotropic(-1, 1, 3), "variance = -1"),
    (lambda: tv_gaussian_isotropic(1, 0, 3), "distorted_variance = 0"),
    (lambda: tv_gaussian_isotropic(1, 2, 0), "dimension = 0"),
    (lambda: tv_discrete([0.5, 0.6], [0.5, 0.5]), "p sums to"),
    (lambda: tv_discrete([1.5, -0.5], [0.5, 0.5]), "p[0] = 1.5 is out of range"),
    (lambda: sqrt_js([1.0], [0.5, 0.5]), "same support"),
    (lambda: tv_random_mask(1.2, 3), "keep_rate = 1.2"),
    (lambda: tv_record_sampling(5, 0.5, -0.1), "base_rate = -0.1"),
    (lambda: tv_gaussian_devroye([1, 0], [1, 1]), "covariance contains 0"),
])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[")) as error:
        call()
    assert "\n" not in str(error.value)


def test_subnormal_entries_do_not_break_js():
    # halving (p + q) flushes 5e-324 to 0: a naive m = (p + q) / 2 gives JS = inf -> sqrt(ln 2)
    p, q = [1.0, 0.0, 0.0], [1.0, 0.0, 5e-324]
    assert sqrt_js(p, q) == pytest.approx(0.0, abs=1e-150)
    assert js_divergence([0.5, 0.5], [0.5, 0.5]) == 0.0
