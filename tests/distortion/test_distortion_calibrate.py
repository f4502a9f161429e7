"""Noise for a TV target: Lemma 6.8 and the exact calibration (spec T3, T3b), the mask."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.distortion.calibrate import (
    mask_keep_rate,
    noise_calibrations,
    noise_variance_exact,
    noise_variance_paper,
)
from privfl.distortion.divergence import tv_gaussian_isotropic, tv_random_mask


@pytest.mark.parametrize(("sigma2", "c1", "tau", "d", "expected"), [
    (1, 0.5, 0.495, 100, 0.05), (0.04, 0.3, 0.295, 10000, 2e-4), (2, 0.2, 0.1999, 1, 0.02)])
def test_lemma_6_8_t3(sigma2, c1, tau, d, expected):
    assert noise_variance_paper(sigma2, c1 - tau, d) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("sigma2", "d", "exact", "ratio"), [
    (1, 100, 0.00177699902, 28.14), (1, 1, 0.0208788159, 23.95),
    (0.04, 10000, 7.09060836e-06, 28.21)])
def test_exact_calibration_t3b(sigma2, d, exact, ratio):
    noise = noise_variance_exact(sigma2, 0.005, d)
    assert noise == pytest.approx(exact, rel=1e-8)  # the spec prints 9 digits
    assert tv_gaussian_isotropic(sigma2, sigma2 + noise, d) == pytest.approx(0.005, rel=1e-10)
    assert noise_variance_paper(sigma2, 0.005, d) / noise == pytest.approx(ratio, abs=0.005)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([1, 2, 10, 100, 1000, 10**4, 10**5]),
       st.floats(1e-4, 100), st.floats(1e-6, 0.0099))
def test_paper_rule_reaches_the_target_with_16_to_28_times_slack(d, sigma2, gap):
    tv = tv_gaussian_isotropic(sigma2, sigma2 + noise_variance_paper(sigma2, gap, d), d)
    assert tv >= gap
    assert 16.6 <= tv / gap <= 28.22


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10**6), st.floats(1e-3, 1e3), st.floats(1e-9, 0.999))
def test_exact_calibration_round_trip(d, sigma2, target):
    noise = noise_variance_exact(sigma2, target, d)
    assert tv_gaussian_isotropic(sigma2, sigma2 + noise, d) == pytest.approx(target, rel=1e-7)


def test_domains_and_refusals():
    assert noise_variance_paper(1, 0.0, 10) == 0.0 and noise_variance_paper(1, -0.2, 10) == 0.0
    with pytest.raises(ValueError, match=r"gap = 0.01 is out of range for Lemma 6.8"):
        noise_variance_paper(1, 0.01, 10)
    with pytest.raises(ValueError, match=r"target_tv = 1.0 is infeasible"):
        noise_variance_exact(1, 1.0, 10)
    assert noise_variance_exact(1, 0.0, 10) == 0.0
    rows = noise_calibrations(1, 0.3, 100)
    assert rows[0].method == "paper" and rows[0].noise_variance is None
    assert "out of range for Lemma 6.8" in rows[0].refused
    assert rows[1].tv == pytest.approx(0.3, rel=1e-9)
    with pytest.raises(ValueError, match="infeasible.*paper's rule refuses"):
        noise_calibrations(1, 1.0, 100)


def test_calibrations_side_by_side():
    paper, exact = noise_calibrations(1, 0.005, 100)
    assert paper.noise_variance == pytest.approx(0.05)
    assert paper.tv == pytest.approx(0.136726920644, abs=1e-9)
    assert (paper.tv_lower, paper.tv_upper) == pytest.approx((0.005, 0.75))
    assert exact.tv == pytest.approx(0.005, rel=1e-10)
    assert "NOT guaranteed" in paper.note and "NOT guaranteed" in exact.note


def test_mask_keep_rate():
    rho = mask_keep_rate(0.3, 50)
    assert tv_random_mask(rho, 50) == pytest.approx(0.3, rel=1e-12)
    assert mask_keep_rate(0.0, 5) == 1.0 and mask_keep_rate(1.0, 5) == 0.0
    assert math.isclose(mask_keep_rate(0.5, 1), 0.5)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: noise_variance_paper(-1, 0.001, 10), "variance = -1"),
    (lambda: noise_variance_paper(1, 0.001, 0), "dimension = 0"),
    (lambda: noise_variance_exact(1, 1.5, 3), "target_tv = 1.5 is out of range"),
    (lambda: mask_keep_rate(0.5, 0), "dimension = 0"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_docs_noise_table():
    from privfl.distortion.tables import noise_table, noise_table_rows

    rows = noise_table_rows((0.005, 0.05), (1, 100))
    assert [r["ratio"] is None for r in rows] == [False, False, True, True]
    assert rows[1]["exact"] == pytest.approx(0.00177699902, rel=1e-8)
    assert rows[1]["ratio"] == pytest.approx(28.14, abs=0.005)
    assert all(23.7 < r["ratio"] < 28.22 for r in noise_table_rows((0.001, 0.009)))
    text = noise_table((0.005,), (100,))
    assert "| 0.005 | 100 | 0.05 | 0.001777 | 28.14 | 0.1367 |" in text
