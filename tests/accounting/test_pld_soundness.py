"""The PLD accountant's bound is never below the truth, down to delta = 1e-12 and T = 1e7.

Soundness has two parts, tested separately:

* the step PMFs dominate the exact step (their delta(eps) is never below the exact profile,
  checked against mpmath), and
* the composition is computed soundly: the accountant's float64, tilted, error-bounded FFT
  composition is compared with an independent composition of the *same* step PMFs,
  exponentially tilted at the answer and computed in extended precision (numpy long double,
  u ~ 5e-20 on x86, 2000x below float64), with delta read by bisection. That composition was
  what failed (float64 round-off in the far tail summed into delta).

End to end, q = 1 is checked against the exact closed form of G_mu (mpmath).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import fft as sp_fft

from privfl.accounting.events import dpsgd_event
from privfl.accounting.methods import AccountingOptions, account
from privfl.accounting.pld import compose as pld_compose
from privfl.accounting.pld.accountant import PldAccountant
from privfl.accounting.rdp import RdpAccountant

LD = np.longdouble


def _step_directions(event, interval):
    """The accountant's own step PMFs of each direction: [(lower, probs, infinity)]."""
    directions = PldAccountant(interval)._directions(event, interval)
    out = []
    for parts in directions:
        (part,) = parts
        out.append((part.lower, part.probs, part.infinity))
    return out


def _reference_delta_curve(lower, probs, steps, interval, tilt_loss):
    """Composed masses (long double) on a window around ``tilt_loss``: (first index, masses)."""
    p = probs.astype(LD)
    idx = np.arange(p.size, dtype=LD)
    target = tilt_loss / interval - steps * lower  # composed relative index to tilt at

    def tilted(t):
        with np.errstate(divide="ignore"):
            logw = np.log(p) + LD(t) * idx
        top = logw.max()
        w = np.exp(logw - top)
        s = w.sum()
        return top + np.log(s), w / s

    # bisection for the tilt whose composed mean is the target
    lo_t, hi_t = 0.0, 1.0
    if float((tilted(0.0)[1] * idx).sum()) * steps < target:
        while float((tilted(hi_t)[1] * idx).sum()) * steps < target and hi_t < 30:
            hi_t *= 2
        for _ in range(60):
            mid = 0.5 * (lo_t + hi_t)
            if float((tilted(mid)[1] * idx).sum()) * steps < target:
                lo_t = mid
            else:
                hi_t = mid
        t = hi_t
    else:
        t = 0.0
    log_m, pt = tilted(t)
    mean = float((pt * idx).sum())
    var = float((pt * (idx - LD(mean)) ** 2).sum())
    centre = steps * mean
    # Bernstein: P(|S - ES| >= a) <= 2 exp(-a^2 / (2 (T var + (n-1) a / 3))) <= 1e-40
    a = 1.0
    while 2 * math.exp(-(a**2) / (2 * (steps * var + (p.size - 1) * a / 3))) > 1e-40:
        a *= 1.25
    first = max(0, int(centre - a))
    last = min(steps * (p.size - 1), int(centre + a) + 1)
    size = sp_fft.next_fast_len(last - first + 1 + p.size)
    spectrum = sp_fft.rfft(pt, size)
    composed = sp_fft.irfft(spectrum**steps, size)
    window = composed[(first + np.arange(last - first + 1)) % size]
    i = np.arange(first, last + 1, dtype=LD)
    with np.errstate(over="ignore", invalid="ignore"):
        masses = np.maximum(window, 0) * np.exp(LD(steps) * log_m - LD(t) * i)
    return steps * lower + first, np.nan_to_num(np.minimum(masses, 1), nan=1.0)


def _delta_of(start, masses, interval, eps):
    losses = (start + np.arange(masses.size, dtype=LD)) * LD(interval)
    keep = losses > eps
    return float((masses[keep] * -np.expm1(LD(eps) - losses[keep])).sum())


def reference_epsilon(event, steps, delta, interval, guess):
    """epsilon(delta) of the composed step PMFs, in long double (max over the directions)."""
    interval = PldAccountant(interval).grid(event)  # the grid the accountant composes on
    best = 0.0
    for lower, probs, infinity in _step_directions(event, interval):
        start, masses = _reference_delta_curve(lower, probs, steps, interval, guess)
        atom = float(-np.expm1(steps * np.log1p(-LD(infinity))))
        lo, hi = 0.0, float((start + masses.size) * interval)
        if _delta_of(start, masses, interval, 0.0) + atom <= delta:
            continue
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            if _delta_of(start, masses, interval, mid) + atom > delta:
                lo = mid
            else:
                hi = mid
        best = max(best, hi)
    return best


# (q, z, T, delta): extremes of q in [1e-6, 1], z in [0.3, 50], T in [1, 1e7], delta in
# [1e-12, 0.1]; discretisation 1e-3 keeps the long-double reference fast.
SLOW = pytest.mark.slow
GRID = [
    (0.2, 50.0, 10**6, 1e-12),
    (0.1, 20.0, 10**6, 1e-9),
    (0.01, 1.0, 10**5, 1e-12),
    (0.5, 0.3, 1, 1e-12),
    (0.3, 1.0, 100, 1e-12),
    pytest.param(0.01, 50.0, 10**7, 0.1, marks=SLOW),
    pytest.param(0.5, 2.0, 1000, 1e-12, marks=SLOW),
    pytest.param(1e-3, 0.8, 10**7, 1e-12, marks=SLOW),
    (1e-4, 5.0, 10**5, 1e-9),  # losses far below the default grid: composed on a finer one
    pytest.param(0.05, 5.0, 10**7, 1e-6, marks=SLOW),
]


def _check_against_reference(event, steps, delta, interval=1e-3):
    ours = PldAccountant(interval).epsilon(event, delta).epsilon
    ref = reference_epsilon(event, steps, delta, interval, guess=ours)
    assert ours >= ref * (1 - 1e-9), (ours, ref)
    # and tight: the error allowance costs little
    assert ours <= ref * (1 + 1e-5) + 1e-6, (ours, ref)
    if ref > 0:  # the delta direction at the reference's epsilon
        ours_delta = PldAccountant(interval).delta(event, ref).delta
        assert ours_delta >= delta * (1 - 1e-6)


@pytest.mark.parametrize(("q", "z", "steps", "delta"), GRID)
def test_pld_bound_never_below_the_reference(q, z, steps, delta):
    _check_against_reference(dpsgd_event(z, q, steps), steps, delta)


@pytest.mark.parametrize(
    ("q", "z", "steps", "delta"),
    [pytest.param(0.2, 1.0, 1000, 1e-12, marks=SLOW), (0.05, 2.0, 10**5, 1e-9)]
)
def test_replace_one_and_fixed_size_never_below_the_reference(q, z, steps, delta):
    _check_against_reference(dpsgd_event(z, q, steps, neighbouring="replace-one"), steps, delta)
    event = dpsgd_event(z, q, steps, sampling="without-replacement", neighbouring="replace-one")
    _check_against_reference(event, steps, delta)


def test_step_pmfs_dominate_the_exact_profile():
    """A single step's PMF: delta(eps) >= the exact profile (dp-accounting's closed form)."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    for z, q in [(1.0, 0.01), (50.0, 0.2), (0.8, 0.5), (2.0, 1.0)]:
        event = dpsgd_event(z, q, 1, sampling="poisson" if q < 1 else "none")
        pld = PldAccountant(1e-3).pld(event)
        for pmf, adjacency in [
            (pld._pmf_remove, plm.AdjacencyType.REMOVE),
            (pld._pmf_add, plm.AdjacencyType.ADD),
        ]:
            loss = plm.GaussianPrivacyLoss(z, sampling_prob=q, adjacency_type=adjacency)
            for eps in np.linspace(-1.0, 5.0, 301):
                exact = float(loss.get_delta_for_epsilon(eps))
                assert pmf.get_delta_for_epsilon(eps) >= exact * (1 - 1e-12) - 1e-300


def test_the_issue_examples_are_sound_and_tight():
    """Values a privacy audit found below the truth (true eps from a tilted composition)."""
    acc_fine = PldAccountant(3e-5)
    eps = acc_fine.epsilon(dpsgd_event(50, 0.2, 10**6), 1e-12).epsilon
    assert 35.567 <= eps <= 35.6
    eps = PldAccountant().epsilon(dpsgd_event(50, 0.2, 10**6), 1e-9).epsilon
    assert 31.386 <= eps <= 31.42
    eps = PldAccountant().epsilon(dpsgd_event(20, 0.1, 10**6), 1e-9).epsilon
    assert 41.8684 <= eps <= 41.9
    report = account(
        dpsgd_event(50, 0.2, 10**6),
        epsilon=35.5675,
        methods="pld",
        options=AccountingOptions(discretization=3e-5),
    )
    assert report.results[0].delta >= 1e-12 * 0.999
    # no longer far too loose: below RDP at the default discretisation
    event = dpsgd_event(1.0, 0.01, 10**5)
    pld_eps = PldAccountant().epsilon(event, 1e-12).epsilon
    rdp_eps = RdpAccountant().epsilon(event, 1e-12).epsilon
    assert 37.5 <= pld_eps <= 37.6 < rdp_eps


def test_unsampled_and_fixed_size_at_q1_match_exact_gdp_at_tiny_delta():
    """q = 1 composes to G_mu exactly: compare with the closed form (mpmath root)."""
    z, steps, delta = 20.0, 10**4, 1e-12
    mu = 2.0 * math.sqrt(steps) / z  # replace-one: sensitivity 2
    mpmath.mp.dps = 40

    def gdp_delta(eps):
        return mpmath.ncdf(-eps / mu + mu / 2) - mpmath.e**eps * mpmath.ncdf(-eps / mu - mu / 2)

    exact = float(mpmath.findroot(lambda e: gdp_delta(e) - delta, (mu * mu / 2 + 7 * mu)))
    for sampling in ("none", "without-replacement", "poisson"):
        event = dpsgd_event(z, 1.0, steps, sampling=sampling, neighbouring="replace-one")
        ours = PldAccountant(1e-3).epsilon(event, delta).epsilon
        assert exact * (1 - 1e-9) <= ours <= exact * (1 + 1e-3)


def test_gaussian_profile_is_accurate_relative_to_mpmath():
    """The profile values the step PMFs are built from are within 1e-10 of mpmath, relative
    (the PMF construction allows 1e-9)."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from privfl.accounting.pld.steps import _gaussian_profile

    mpmath.mp.dps = 50
    worst = 0.0
    for z, q in [(1.0, 0.01), (50.0, 0.2), (0.8, 0.5)]:
        for adjacency in (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD):
            loss = plm.GaussianPrivacyLoss(z, sampling_prob=q, adjacency_type=adjacency)
            top = min(loss.connect_dots_bounds().epsilon_upper, 40.0)
            for eps in np.linspace(0.0, top, 25)[1:-1]:
                x = float(loss.inverse_privacy_loss(eps))
                sd = mpmath.mpf(z)

                def cdf(v, shift, sd=sd):
                    return mpmath.ncdf((mpmath.mpf(v) - shift) / sd)

                if adjacency is plm.AdjacencyType.REMOVE:
                    upper = (1 - q) * cdf(x, 0) + q * cdf(x, -1)
                    lower = cdf(x, 0)
                else:
                    upper = cdf(x, 0)
                    lower = (1 - q) * cdf(x, 0) + q * cdf(x, 1)
                exact = upper - mpmath.e ** mpmath.mpf(eps) * lower
                ours = float(_gaussian_profile(loss, np.array([eps]))[0])
                if exact > 1e-300:
                    worst = max(worst, float(abs(ours - exact) / exact))
    assert worst <= 1e-10


def test_composition_error_bound_covers_the_realised_error():
    """float64 composition vs long double: the realised error is below the bound eta."""
    probs = np.exp(-0.5 * ((np.arange(401) - 200) / 40.0) ** 2)
    probs /= probs.sum()
    parts = [pld_compose.StepPmf(0, probs, 0.0, 5000)]
    composed = pld_compose.compose_upper(parts, 1e-3, 1e-15, tilt=0.0)
    ld = probs.astype(LD)
    size = sp_fft.next_fast_len(composed.masses.size + 2 * 401)
    exact = sp_fft.irfft(sp_fft.rfft(ld, size) ** 5000, size)
    first = composed.lower
    point = composed.point_masses()
    reference = exact[(first + np.arange(point.size)) % size]
    realised = float(np.max(np.abs(point - reference.astype(float))))
    assert realised <= composed.eta
    assert composed.eta < 1e-9 * float(reference.max())  # and the bound is not vacuous
    assert np.all(composed.masses >= reference.astype(float))


def test_fft_over_the_memory_budget_is_a_clear_error():
    with pytest.raises(ValueError, match="discretization"):
        PldAccountant(1e-9).epsilon(dpsgd_event(1.0, 0.01, 10**5), 1e-6)
    with pytest.raises(ValueError, match="discretization"):
        PldAccountant().epsilon(dpsgd_event(1.0, 0.01, 10**11), 1e-6)



@pytest.mark.parametrize(
    ("q", "z", "steps", "delta"),
    [(0.01, 1.0, 10**5, 1e-12), (0.2, 50.0, 10**6, 1e-12), (1e-3, 0.5, 10**4, 1e-9),
     (0.5, 3.0, 1000, 1e-12), (0.05, 1.0, 10**4, 0.1),
     # steps whose losses are far below the default grid (refined automatically)
     (1e-4, 50.0, 10**6, 1e-12), (1e-4, 5.0, 10**6, 1e-6), (1e-6, 5.0, 10**6, 1e-6),
     (1e-6, 50.0, 10**7, 1e-12), (1e-6, 0.3, 10**7, 1e-12)],
)  # fmt: skip
def test_pld_is_never_looser_than_rdp_at_the_default_discretisation(q, z, steps, delta):
    event = dpsgd_event(z, q, steps)
    pld_eps = PldAccountant().epsilon(event, delta).epsilon
    assert pld_eps <= RdpAccountant().epsilon(event, delta).epsilon


@settings(max_examples=40, deadline=None)
@given(
    weights=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=40),
    tiny=st.integers(0, 3),
    count=st.integers(1, 3000),
    tilt=st.floats(0.0, 2.0),
)
def test_upper_masses_dominate_an_extended_precision_composition(weights, tiny, count, tilt):
    """Any step PMF (with entries down to 1e-300), any count and tilt: every upper mass is at
    least the exact composed mass (long double), and the +inf atom at least the exact one."""
    probs = np.array(weights, dtype=float)
    probs[: tiny] *= 1e-300
    if probs.sum() <= 0:
        probs[0] = 1.0
    probs /= probs.sum() * (1 + 1e-3)  # 1e-3/(1+1e-3) of the mass at +inf
    infinity = 1.0 - float(probs.sum())
    part = pld_compose.StepPmf(-3, probs, infinity, count)
    composed = pld_compose.compose_upper([part], 1e-2, 1e-15, tilt=tilt)
    ld = probs.astype(LD)
    span = count * (probs.size - 1) + 1
    size = sp_fft.next_fast_len(span)
    exact = np.maximum(sp_fft.irfft(sp_fft.rfft(ld, size) ** count, size)[:span], 0)
    first = composed.lower - part.lower * count
    window = exact[first : first + composed.masses.size].astype(float)
    # the long-double composition is itself exact only up to its own round-off (~count u_LD)
    noise = 64.0 * (count + 16) * float(np.finfo(LD).eps)
    assert np.all(composed.masses >= window * (1 - 1e-12) - noise)
    exact_inf = float(-np.expm1(count * np.log1p(-LD(infinity))))
    assert composed.infinity >= exact_inf * (1 - 1e-12)


@pytest.mark.parametrize("q", [0.3, 1.0])
def test_laplace_step_pmfs_dominate_the_exact_profile(q):
    from dp_accounting.pld import privacy_loss_mechanism as plm

    event = dpsgd_event(2.0, q, 1, sampling="poisson" if q < 1 else "none", noise="laplace")
    pld = PldAccountant(1e-3).pld(event)
    for pmf, adjacency in [
        (pld._pmf_remove, plm.AdjacencyType.REMOVE),
        (pld._pmf_add, plm.AdjacencyType.ADD),
    ]:
        loss = plm.LaplacePrivacyLoss(2.0, sampling_prob=q, adjacency_type=adjacency)
        for eps in np.linspace(-1.0, 1.0, 201):
            assert pmf.get_delta_for_epsilon(eps) >= float(loss.get_delta_for_epsilon(eps))


@settings(max_examples=25, deadline=None)
@given(
    first=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30),
    second=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=30),
    counts=st.tuples(st.integers(0, 800), st.integers(1, 800)),
    tilt=st.floats(0.0, 1.0),
)
def test_upper_masses_of_two_step_kinds_dominate_the_exact_composition(first, second, counts, tilt):
    """Heterogeneous events (two step PMFs, each composed its own number of times)."""
    parts, span, lower = [], 1, 0
    for weights, count, low in ((first, counts[0], -2), (second, counts[1], 5)):
        probs = np.array(weights) + 1e-3
        probs /= probs.sum()
        parts.append(pld_compose.StepPmf(low, probs, 0.0, count))
        span += count * (probs.size - 1)
        lower += count * low
    size = sp_fft.next_fast_len(span)
    product = np.ones(size // 2 + 1, dtype=np.clongdouble)
    for part in parts:
        product *= sp_fft.rfft(part.probs.astype(LD), size) ** part.count
    exact = np.maximum(sp_fft.irfft(product, size)[:span], 0)
    composed = pld_compose.compose_upper(parts, 1e-2, 1e-15, tilt=tilt)
    first_index = composed.lower - lower
    window = exact[first_index : first_index + composed.masses.size].astype(float)
    noise = 64.0 * (sum(counts) + 16) * float(np.finfo(LD).eps)
    assert np.all(composed.masses >= window * (1 - 1e-12) - noise)


def test_a_step_narrower_than_the_grid_gets_a_finer_grid_and_says_so():
    event = dpsgd_event(50.0, 1e-4, 10**6)
    accountant = PldAccountant()
    assert accountant.grid(event) < 1e-4
    result = accountant.epsilon(event, 1e-6)
    assert result.extras["discretization"] == 1e-4
    assert result.extras["discretization_used"] == accountant.grid(event)
    # a step wider than the grid keeps it, and no extra field appears
    wide = accountant.epsilon(dpsgd_event(1.0, 0.01, 1000), 1e-6)
    assert "discretization_used" not in wide.extras


def test_a_delta_below_the_truncated_mass_is_refused_with_the_number():
    from privfl.accounting.events import AccountingLimitError

    with pytest.raises(AccountingLimitError, match=r"delta = 1e-300 is below .* ask for delta >="):
        PldAccountant().epsilon(dpsgd_event(1.0, 0.01, 10**5), 1e-300)
    report = account(dpsgd_event(1.0, 0.01, 10**4), delta=1e-100)  # the others still answer
    assert "pld" in report.unsupported and {r.method for r in report.results} >= {"rdp"}
