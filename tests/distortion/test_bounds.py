"""The paper's bounds with validity flags, and the counterexamples (spec T2, T7-T12, T9)."""

import math

import numpy as np
import pytest

from privfl.distortion.bayesian import BayesianAttacker, c2_from_xi
from privfl.distortion.bounds import (
    bias_gap_bound,
    c6_from_constants,
    c_d,
    gaussian_tv_sandwich,
    leakage_triangle_bounds,
    min_tv_for_budget,
    nfl_holds,
    nfl_lower_bound,
    optimal_tradeoff,
    privacy_leakage_upper_bound,
    tradeoff_upper_bound,
    utility_loss_upper_bound,
    variance_gap_bound,
)
from privfl.distortion.divergence import tv_discrete

C2_HALF = 0.859140914230  # C2 at xi = 0.5


@pytest.mark.parametrize(("gamma", "delta", "xi", "expected"), [
    (1, 0.5, 0.5, 0.859140914230), (150, 1, 0.1, 8.302603431006),
    (1 / 150, 1, 0.1, 0.000369004597)])
def test_cd_golden_t2(gamma, delta, xi, expected):
    assert c_d(gamma, delta, xi) == pytest.approx(expected, abs=1e-9)


def test_c6_from_constants_t12():
    assert c6_from_constants(1.0, 0.5, 0.1) == pytest.approx(2.6, abs=1e-12)
    assert c6_from_constants(1.0, 0.5, 0.1, sup_norm=0.5) == pytest.approx(1.6, abs=1e-12)


def test_lemma_6_5_flags_t7():
    holds_paper_only = privacy_leakage_upper_bound(0.3, C2_HALF, 0.2)
    assert holds_paper_only.value == pytest.approx(0.428171817154, abs=1e-9)
    assert holds_paper_only.hypothesis and not holds_paper_only.proven
    both = privacy_leakage_upper_bound(0.3, C2_HALF, 0.1)
    assert both.value == pytest.approx(0.514085908577, abs=1e-9)
    assert both.hypothesis and both.proven
    _, upper = leakage_triangle_bounds(0.3, C2_HALF, 0.1)
    assert upper.value == pytest.approx(0.385914091423, abs=1e-9)
    assert upper.value < both.value  # the valid paper bound is looser than the triangle one
    outside = privacy_leakage_upper_bound(0.1, C2_HALF, 0.5)
    assert not outside.hypothesis and not outside.proven


def t9():
    attacker = BayesianAttacker.from_likelihood([0.5, 0.5], [[0.15, 0.85], [0.45, 0.55]])
    p = np.array([0.45, 0.55])
    q = p @ (0.5 * np.eye(2) + 0.25)
    return (attacker.unprotected_leakage(p), attacker.leakage(q), attacker.c2(p, q),
            tv_discrete(p, q), attacker.xi(p, q))


def test_counterexample_lemma_6_5_t9():
    """The paper's hypothesis C2 TV <= C1 holds, yet eps_p > 2 C1 - C2 TV."""
    c1, eps_p, c2, tv, xi = t9()
    bound = privacy_leakage_upper_bound(c1, c2, tv)
    assert bound.hypothesis  # 0.0375 <= 0.0379
    assert bound.value == pytest.approx(0.038388815421, abs=1e-9)
    assert eps_p == pytest.approx(0.044295463481, abs=1e-9)
    assert not bound.holds(eps_p)  # VIOLATED
    assert not bound.proven  # and privfl says it is not proven here
    lower, upper = leakage_triangle_bounds(c1, c2, tv)
    assert lower.value == pytest.approx(0.000444407711, abs=1e-9)
    assert upper.value == pytest.approx(0.075444407711, abs=1e-9)
    assert lower.holds(eps_p) and upper.holds(eps_p)
    sharp_low, sharp_up = leakage_triangle_bounds(c1, c2, tv, xi)
    assert sharp_up.value < upper.value and sharp_up.holds(eps_p) and sharp_low.holds(eps_p)


def test_counterexample_lemma_6_6_t9():
    """TV >= C1 - tau, yet eps_p > tau (eq. 32 fails)."""
    c1, eps_p, c2, tv, _ = t9()
    tau = c1 - tv  # the smallest budget the paper's rule certifies with this TV
    rule = min_tv_for_budget(c1, tau)
    assert rule.value == pytest.approx(tv) and not rule.proven
    assert eps_p > tau  # the promised eps_p <= tau fails: 0.0443 > 0.0129
    need = min_tv_for_budget(c1, tau, "necessary", c2)
    assert need.proven and need.value == pytest.approx((c1 - tau) / c2)


def random_instances(count, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        d, w = rng.integers(2, 5), rng.integers(2, 6)
        attacker = BayesianAttacker.from_likelihood(
            rng.dirichlet(np.ones(d)), rng.dirichlet(np.ones(w), size=d))
        p, q = rng.dirichlet(np.ones(w)), rng.dirichlet(np.ones(w))
        yield attacker, p, q


def test_eq_32_fails_on_almost_every_random_instance():
    fails = sum(att.leakage(q) > att.unprotected_leakage(p) - tv_discrete(p, q)
                for att, p, q in random_instances(2000))
    assert fails >= 1990  # the spec found 99,997 of 100,000


def test_necessary_tv_holds_on_every_random_instance():
    for att, p, q in random_instances(500, seed=1):
        c1, eps_p, tv = att.unprotected_leakage(p), att.leakage(q), tv_discrete(p, q)
        need = min_tv_for_budget(c1, eps_p, "necessary", att.c2(p, q))
        assert need.holds(tv + 1e-12)  # eps_p <= tau = eps_p needs TV >= (C1 - tau) / C2


def test_lemma_6_6_thresholds_t8():
    assert min_tv_for_budget(0.3, 0.25).value == pytest.approx(0.05)
    lemma65 = min_tv_for_budget(0.3, 0.25, "lemma65", C2_HALF)
    assert lemma65.value == pytest.approx(0.407383694809, abs=1e-9)
    assert not lemma65.proven  # tau < 1.5 C1
    with pytest.raises(ValueError, match="c2 is missing"):
        min_tv_for_budget(0.3, 0.25, "necessary")


def test_counterexample_lemma_6_3_main_text_constant():
    """P at -b, P~ = (1 - t) P + t delta_b, W* = -b: |Bias~ - Bias| = 2 C3 TV > C3 TV."""
    c3, t = 2.0, 0.3
    b = np.array([c3, 0.0])
    mean_p, mean_q = -b, (1 - t) * -b + t * b
    w_star = -b
    gap = abs(np.linalg.norm(mean_q - w_star) - np.linalg.norm(mean_p - w_star))
    paper, corrected = bias_gap_bound(t, c3), bias_gap_bound(t, c3, "corrected")
    assert not paper.holds(gap) and not paper.proven
    assert corrected.holds(gap, 1e-12) and gap == pytest.approx(corrected.value)  # tight


def test_theorem_6_1_and_lemma_6_4_on_gaussian_noise():
    """Zero-mean noise, fixed W_{t-1}: the proxy is -tr Var(W) and the bound holds with the
    literal E Var[W~] = tr Var W + d sigma_eps^2 whenever d sigma_eps^2 <= C3^2 TV."""
    rng = np.random.default_rng(0)
    d, noise = 5, 0.01
    w = rng.normal(0.5, 0.1, size=(20000, d))
    w_tilde = w + rng.normal(0, math.sqrt(noise), size=w.shape)
    c3 = float(np.linalg.norm(w_tilde, axis=1).max())
    tv = 0.2
    var_tilde = float(w_tilde.var(0).sum())
    proxy = -float(w.var(0).sum())
    bound = utility_loss_upper_bound(var_tilde, tv, c6_from_constants(c3, 0.0, 0.0))
    assert bound.proven and bound.holds(proxy)
    assert not utility_loss_upper_bound(var_tilde, tv, 1.0, zero_mean=False).proven
    assert variance_gap_bound(var_tilde, tv, c3).holds(proxy)


def test_theorem_6_12_t10():
    bound = tradeoff_upper_bound(0.3, C2_HALF, 2.0, 0.1)
    assert bound.value == pytest.approx(0.557042954289, abs=1e-9)
    assert not bound.proven  # unknown without TV
    assert tradeoff_upper_bound(0.3, C2_HALF, 2.0, 0.1, tv=0.1).proven
    assert not tradeoff_upper_bound(0.3, C2_HALF, 2.0, 0.1, tv=0.2).proven


def test_theorem_6_14_t11():
    c2 = c2_from_xi(0.5)
    cd = c_d(1.0, 0.5, 0.5)
    assert cd == pytest.approx(c2 / 1.0, rel=1e-12)  # C6 = 2 Delta / gamma = 1
    opt = optimal_tradeoff(0.3, c2, 1.0, 2.0, gamma=1.0, delta=0.5)
    assert opt.expected_variance == pytest.approx(0.349186024122, abs=1e-9)
    assert opt.sampling_probability == pytest.approx(0.225396671653, abs=1e-9)
    assert opt.cd_matches
    assert tradeoff_upper_bound(0.3, c2, 1.0, opt.expected_variance).value == pytest.approx(0.3)
    # given eps_p = 0.1 the bounds pin eps_u
    nfl_min = (0.3 - 0.1) / cd
    upper_max = (1.0 / c2) * (2 * 0.3 - 0.1) - opt.expected_variance
    assert nfl_min == pytest.approx(0.232790682748, abs=1e-9)
    assert upper_max == pytest.approx(0.232790682748, abs=1e-9)
    assert not optimal_tradeoff(0.3, c2, 1.0, 2.0, gamma=1.0, delta=0.7).cd_matches
    assert optimal_tradeoff(0.3, c2, 1.0, 1.0).sampling_probability is None  # > G/4


def test_nfl_sanity_t11():
    cd = c_d(1.0, 0.5, 0.5)
    assert 0.05 + cd * 0.3 == pytest.approx(0.307742274269, abs=1e-9)
    assert nfl_holds(0.05, 0.3, 0.3, cd)
    assert not nfl_holds(0.05, 0.1, 0.3, cd)
    assert nfl_lower_bound(0.3).value == 0.3 and not nfl_lower_bound(0.3).proven


def test_lemma_6_7_sandwich_t3():
    lower, upper = gaussian_tv_sandwich(1.0, 0.05, 100)
    assert (lower.value, upper.value) == pytest.approx((0.005, 0.75))
    lower, upper = gaussian_tv_sandwich(2.0, 0.02, 1)
    assert (lower.value, upper.value) == pytest.approx((1e-4, 0.015))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: c_d(0, 1, 0.1), "gamma = 0"),
    (lambda: c_d(1, -1, 0.1), "delta = -1"),
    (lambda: privacy_leakage_upper_bound(1.5, 1, 0.1), "c1 = 1.5"),
    (lambda: privacy_leakage_upper_bound(0.1, 1, 1.1), "tv = 1.1"),
    (lambda: min_tv_for_budget(0.3, -0.1), "tau = -0.1"),
    (lambda: min_tv_for_budget(0.3, 0.1, "other"), "variant = 'other'"),
    (lambda: c6_from_constants(1, 1, 1, sup_norm=2), "sup_norm = 2"),
    (lambda: bias_gap_bound(0.1, 1, "nope"), "form = 'nope'"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_small_r_keeps_its_precision():
    """Issue 21: (1 - sqrt(1 - 4 r)) / 2 loses all precision for small r."""
    from privfl.distortion.bounds import smaller_root
    from privfl.distortion.sampling import sampling_probability

    for r in (1e-18, 1e-12, 1e-6, 0.1, 0.25):
        p = smaller_root(r)
        assert p * (1 - p) == pytest.approx(r, rel=1e-14)
    assert optimal_tradeoff(1e-12, 1.0, 1.0, 1.0).sampling_probability == pytest.approx(
        1e-12 * (1 + 1e-12), rel=1e-14)
    rule = sampling_probability(1e-3, 0.5, 0.5 - 1e-9, 1.0)
    ratio = rule.ratio
    assert rule.p_min * (1 - rule.p_min) == pytest.approx(ratio, rel=1e-14)


def test_leakages_above_sqrt_ln2_and_infinite_c2_are_refused():
    with pytest.raises(ValueError, match=r"c1 = 0.9 is out of range: a sqrt-JS leakage"):
        privacy_leakage_upper_bound(0.9, 1.0, 0.01)
    with pytest.raises(ValueError, match=r"tau = 0.85 is out of range"):
        min_tv_for_budget(0.5, 0.85)
    with pytest.raises(ValueError, match=r"c2 = inf is out of range for Theorem 6.12"):
        tradeoff_upper_bound(0.3, math.inf, 1.0, 0.3)
