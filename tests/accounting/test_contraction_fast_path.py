"""The fast paths of the contraction accountant (Asoodeh et al. 2021) against the reference paths.

A training run asks for the last-iterate epsilon every round, and every evaluation of delta(eps)
inside the root finder used to pay numpy's per-call overhead on vectors of T <= 5 entries. The
fast paths must not move a single bit of any bound (the golden numbers are pinned exactly):

* short inputs of :func:`log_theta` go entry by entry through ``_log_theta_point``, which must
  equal the array path ``_log_theta_array`` bit for bit (so also never below it: that value is
  rounded up where the last digits cancel);
* a run with constant parameters evaluates one theta per argument instead of one per round;
* a run remembers the log delta(eps) values it computed, and the one-shot epsilon is remembered
  across runs with the same entry argument and delta.

Hypothesis draws epsilon, r, T and the schedules; the reference is the same bound with every
theta computed by the array path on the full per-round arrays, and nothing remembered.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privfl.accounting.contraction.bounds as bounds
from privfl.accounting.contraction import ProjectedNoisySGD, log_theta
from privfl.accounting.contraction.run import _one_shot_epsilon
from privfl.accounting.contraction.theta import (
    _POINTWISE_MAX,
    _log_theta_array,
    _log_theta_point,
    sharpened_eps,
)
from privfl.accounting.safe_epsilon import smallest_safe_epsilon

FAST = settings(max_examples=60, deadline=None)

SPECIAL = [0.0, -0.0, 5e-324, 1e-300, 1e-12, 0.5, 1.0, 3.5, 40.0, 1e8, 1e300, math.inf]
EPSILONS = st.one_of(
    st.floats(0.0, 60.0), st.floats(0.0, 1e6), st.sampled_from(SPECIAL + [math.nan, -math.inf])
)
RADII = st.one_of(
    st.floats(0.0, 50.0), st.floats(1e-300, 1e12), st.sampled_from(SPECIAL + [math.nan])
)


def same(fast, reference):
    """Bit-for-bit equal (NaN where the reference is NaN), same shape and float type."""
    fast, reference = np.asarray(fast), np.asarray(reference)
    assert fast.shape == reference.shape and fast.dtype == reference.dtype == np.float64
    return bool(np.array_equal(fast, reference, equal_nan=True))


@FAST
@given(eps=EPSILONS, r=RADII)
def test_point_equals_the_array_path(eps, r):
    reference = _log_theta_array(np.asarray(eps, float), np.asarray(r, float))
    assert isinstance(reference, float)
    got = log_theta(eps, r)
    assert isinstance(got, float) and same(got, reference)
    assert same(_log_theta_point(eps, r), reference)


@FAST
@given(eps=EPSILONS, rs=st.lists(RADII, min_size=0, max_size=_POINTWISE_MAX))
def test_short_vectors_equal_the_array_path(eps, rs):
    r = np.array(rs, float)
    assert same(log_theta(eps, r), _log_theta_array(np.asarray(eps, float), r))
    repeated = np.repeat(r[:1], 5)  # a constant run: one evaluation, repeated
    assert same(log_theta(eps, repeated), _log_theta_array(np.asarray(eps, float), repeated))
    # the sharpened chain's shape: a vector of epsilons (eps~ per chain) against one r
    eps_vector = np.array(rs, float)
    assert same(log_theta(eps_vector, eps), _log_theta_array(eps_vector, np.asarray(eps, float)))


def test_grid_and_long_vectors_take_the_array_path_with_the_same_values():
    eps = np.linspace(0.0, 10.0, 41)[:, None]
    r = np.geomspace(1e-3, 1e3, 25)[None, :]
    grid = log_theta(eps, r)
    assert grid.shape == (41, 25)
    pointwise = np.array([[_log_theta_point(e, x) for x in r[0]] for e in eps[:, 0]])
    assert same(grid, pointwise)
    long = np.geomspace(1e-2, 1e2, _POINTWISE_MAX + 1)
    assert same(log_theta(1.5, long), np.array([_log_theta_point(1.5, x) for x in long]))
    # the sharpened chains of a long run: many epsilons (eps~), one r; with and without zeros
    for eps_tilde in (np.linspace(0.01, 30.0, 40), np.linspace(0.0, 30.0, 40)):
        assert same(log_theta(eps_tilde, 3.5), np.array([_log_theta_point(e, 3.5)
                                                          for e in eps_tilde]))


@FAST
@given(
    log_em1=st.one_of(st.floats(-700.0, 700.0), st.sampled_from([-math.inf, math.inf, 0.0])),
    log_d=st.lists(st.one_of(st.floats(-800.0, 0.0), st.just(-math.inf)), min_size=1,
                   max_size=30),
)
def test_sharpened_eps_equals_the_guarded_formula(log_em1, log_d):
    log_d = np.array(log_d)
    with np.errstate(invalid="ignore"):
        x = log_em1 - log_d
    x = np.where(np.isneginf(log_d), np.inf, x)
    x = np.where(np.isneginf(log_em1), -np.inf, x)
    assert same(sharpened_eps(log_em1, log_d), np.logaddexp(0.0, x))


# --------------------------------------------------------------------------------------------
# whole bounds: fast (one theta per constant argument, remembered values) vs reference
# --------------------------------------------------------------------------------------------


@st.composite
def runs(draw):
    """A one-pass or independent run, constant or per-round (non-constant lr) parameters."""
    schedule = draw(st.sampled_from(["one-pass", "independent"]))
    m = draw(st.sampled_from([5, 10, 20]))
    batches = draw(st.integers(1, 8))
    n = m * batches if schedule == "one-pass" else m * draw(st.integers(1, 50))
    T = draw(st.integers(1, batches)) if schedule == "one-pass" else draw(st.integers(1, 12))
    convex = draw(st.booleans())
    noise = draw(st.floats(0.3, 6.0))
    kind = draw(st.sampled_from(["constant", "decaying", "drawn"]))
    if kind == "constant":
        lr = draw(st.floats(0.05, 1.0))
    elif kind == "decaying":
        lr = [1.0 / (2.0 * t) for t in range(1, T + 1)]
    else:
        lr = draw(st.lists(st.floats(0.05, 1.0), min_size=T, max_size=T))
    radius = draw(st.floats(0.01, 2.0))
    return ProjectedNoisySGD(
        n, m, 1.0, radius, lr, noise, convex=convex, smooth=1.0 if convex else None,
        rounds=T, schedule=schedule,
    )


def _reference_log_delta(run, eps, sharpened, release, secret):
    """The bound with every theta taken from the array path on whole arrays, nothing remembered."""
    fresh = ProjectedNoisySGD(
        run.users, run.batch_size, run.lipschitz, run.radius, run.lr, run.noise,
        convex=run.convex, smooth=run.smooth, rounds=run.rounds, schedule=run.schedule,
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bounds, "log_theta", lambda e, r: _log_theta_array(
            np.asarray(e, dtype=float), np.asarray(r, dtype=float)))
        return fresh._compute_log_delta(eps, sharpened, release, secret)


@settings(max_examples=80, deadline=None)
@given(
    run=runs(),
    eps=st.one_of(st.floats(0.0, 30.0), st.sampled_from([0.0, 1e-9, 4.155, 1e3])),
    sharpened=st.booleans(),
    random_stop=st.booleans(),
    secret=st.booleans(),
)
def test_log_delta_equals_the_reference(run, eps, sharpened, random_stop, secret):
    release = "random-stop" if random_stop and run.schedule == "one-pass" else "last"
    reference = _reference_log_delta(run, eps, sharpened, release, secret)
    got = run._log_delta(eps, sharpened, release, secret)
    assert got == reference or (math.isnan(got) and math.isnan(reference))
    assert run._log_delta(eps, sharpened, release, secret) == got  # remembered: same value
    assert run.delta(eps, sharpened=sharpened, release=release, secret_assignment=secret) == (
        math.exp(reference))


@settings(max_examples=25, deadline=None)
@given(run=runs(), delta=st.sampled_from([1e-5, 1e-3, 0.05]), sharpened=st.booleans())
def test_epsilon_equals_the_unremembered_solve_and_is_safe(run, delta, sharpened):
    got = run.epsilon(delta, sharpened=sharpened)

    def log_delta(e):
        return _reference_log_delta(run, e, sharpened, "last", True)

    assert got == smallest_safe_epsilon(log_delta, delta)
    if math.isfinite(got):
        assert math.exp(log_delta(got)) <= delta
    if run.schedule == "one-pass":
        r = float(np.max(run.entry_r))
        one_shot = smallest_safe_epsilon(
            lambda e: _log_theta_array(np.asarray(e, float), np.asarray(r)), delta)
        assert run.one_shot_epsilon(delta) == one_shot == _one_shot_epsilon(r, delta)


def test_memory_is_bounded_and_per_run():
    run = ProjectedNoisySGD(100, 10, 1.0, 0.1, 0.5, 1.5, rounds=4)
    other = ProjectedNoisySGD(100, 10, 1.0, 0.1, 0.5, 1.5, rounds=5)
    for eps in np.linspace(0.0, 20.0, bounds._MEMO_SIZE + 10):
        run._log_delta(float(eps), False, "last", True)
    assert 0 < len(run._log_delta_memo) <= bounds._MEMO_SIZE
    assert other._log_delta_memo == {}
    assert run.delta(1.0) < other.delta(1.0)  # one more round: more users enter


def test_per_round_arguments_are_read_only():
    run = ProjectedNoisySGD(100, 10, 1.0, 0.1, [0.5] * 10, 1.5, convex=True, smooth=1.0)
    for name in ("entry_r", "contraction_r", "reentry_r", "diameter"):
        values = getattr(run, name)
        assert getattr(run, name) is values  # computed once
        with pytest.raises(ValueError, match="read-only"):
            values[0] = 0.0
    assert run.entry_r[0] == 2.0 / (math.sqrt(10) * 1.5)


@FAST
@given(
    k=st.lists(st.integers(0, 10**6), min_size=1, max_size=40),
    log_c=st.one_of(st.floats(-50.0, 0.0), st.sampled_from([0.0, -0.0, -5e-324, -math.inf])),
)
def test_times_log_equals_the_guarded_product(k, log_c):
    k = np.array(k)
    with np.errstate(invalid="ignore"):
        reference = np.where(k == 0, 0.0, k * log_c)
    got = bounds._times_log(k, log_c)
    assert same(got, reference) and np.array_equal(np.signbit(got), np.signbit(reference))


def test_saturation_epsilon_is_remembered_with_the_same_value():
    run = ProjectedNoisySGD(1000, 10, 1.0, 0.02, 0.5, 1.5, convex=True, smooth=1.0,
                            schedule="independent", rounds=7)
    limit = ProjectedNoisySGD(1000, 10, 1.0, 0.02, 0.5, 1.5, convex=True, smooth=1.0,
                              schedule="independent", rounds=math.inf)
    for sharpened in (False, True):
        direct = smallest_safe_epsilon(
            lambda e, s=sharpened: _reference_log_delta(limit, e, s, "last", True), 1e-5)
        assert run.saturation_epsilon(1e-5, sharpened=sharpened) == direct
        assert run.epsilon(1e-5, sharpened=sharpened) <= direct  # T rounds never exceed it
    with pytest.raises(ValueError, match="delta"):
        run.saturation_epsilon(0.0)
