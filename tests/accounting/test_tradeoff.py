"""Trade-off functions (f-DP): spec seed0 sections 2, 6.2 and 6.3, plus properties."""

import math
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from privfl.accounting.fdp import (
    ClientSampledTradeOff,
    GaussianTradeOff,
    InverseTradeOff,
    MixtureTradeOff,
    SubsampledGaussianTradeOff,
    TabulatedTradeOff,
    TradeOff,
    client_sampling_lower_bound,
    compose,
    epsilon_delta_profile,
    epsilon_for_delta,
    from_epsilon_delta,
    identity,
    inverse,
    is_convex,
    is_symmetric,
    lower_tabulation,
    mixture,
    subsample,
    tensor_power,
    total_variation_bound,
)
from privfl.accounting.gdp.accountant import gdp_delta, gdp_epsilon

# PRIVFL_HYPOTHESIS_EXAMPLES=500 for a deeper local search
FAST = settings(max_examples=int(os.environ.get("PRIVFL_HYPOTHESIS_EXAMPLES", "25")), deadline=None)
GRID = np.linspace(0.0, 1.0, 2001)


def trade_off_of_pair(p, q) -> TabulatedTradeOff:
    """T(P, Q) of two discrete distributions, by the Neyman-Pearson lemma (test's own code)."""
    p, q = np.asarray(p, float), np.asarray(q, float)
    order = np.argsort(-(q / p))
    alphas = np.concatenate([[0.0], np.cumsum(p[order])])
    betas = np.concatenate([[1.0], 1.0 - np.cumsum(q[order])])
    alphas[-1], betas[-1] = 1.0, 0.0
    return TabulatedTradeOff(alphas, np.clip(betas, 0, 1), tol=1e-9)


def product_delta(pairs, epsilon):
    """delta(epsilon) of the product of discrete pairs: sum over atoms of (Q - e^eps P)_+."""
    p_total, q_total = np.ones(1), np.ones(1)
    for p, q in pairs:
        p_total = np.multiply.outer(p_total, p).ravel()
        q_total = np.multiply.outer(q_total, q).ravel()
    return float(np.sum(np.maximum(q_total - math.exp(epsilon) * p_total, 0.0)))


# --------------------------------------------------------------------------- golden values
def test_g1_values():
    g1 = GaussianTradeOff(1.0)
    np.testing.assert_allclose(g1([0.5, 0.1, 0.3]), [0.158655, 0.610856, 0.317180], atol=1e-6)


def test_g18_table():
    alphas = [0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.9]
    want = [
        0.700677,
        0.438353,
        0.302073,
        0.168936,
        0.101049,
        0.060973,
        0.035930,
        0.020019,
        0.010052,
        0.001030,
    ]
    np.testing.assert_allclose(GaussianTradeOff(1.8)(alphas), want, atol=1e-6)


@pytest.mark.parametrize(
    ("mu", "value"),
    [
        (0.5, 0.873865),
        (1.0, 0.740489),
        (2.0, 0.361240),
        (2.71, 0.143405),
        (3.9156, 0.011581),
        (6.697, 2.184e-7),
    ],
)
def test_g_mu_at_005(mu, value):
    got = GaussianTradeOff(mu)(0.05)
    assert got == pytest.approx(value, abs=1e-6)
    if mu == 6.697:
        assert got == pytest.approx(value, rel=1e-3)  # 2.184e-7 given to 4 digits


def test_gaussian_closed_forms():
    g = GaussianTradeOff(1.8)
    assert g.symmetric and g.fixed_point() == pytest.approx(special.ndtr(-0.9), abs=1e-15)
    assert g(g.fixed_point()) == pytest.approx(g.fixed_point(), abs=1e-14)
    np.testing.assert_allclose(g.inv(GRID), g(GRID), atol=0)
    np.testing.assert_allclose(g(g(GRID[:-200])), GRID[:-200], atol=1e-9)
    eps = np.array([0.0, 0.5, 2.0, 8.0])
    np.testing.assert_allclose(g.delta(eps), gdp_delta(eps, 1.8), rtol=1e-15)
    assert g.epsilon(1e-5) == pytest.approx(gdp_epsilon(1e-5, 1.8), rel=1e-15)
    assert g(0.0) == 1.0 and g(1.0) == 0.0


def test_identity_and_tv_bound():
    ident = identity()
    np.testing.assert_allclose(ident(GRID), 1.0 - GRID, atol=1e-15)
    assert ident.delta(0.0) == 0.0 and ident.epsilon(1e-9) == 0.0
    assert total_variation_bound(GaussianTradeOff(1.0)) == pytest.approx(0.382925, abs=1e-6)
    assert total_variation_bound(GaussianTradeOff(2.71)) == pytest.approx(0.824582, abs=1e-6)
    assert total_variation_bound(GaussianTradeOff(2.71)) == pytest.approx(
        2 * special.ndtr(2.71 / 2) - 1, rel=1e-12
    )


def test_delta_profile_and_epsilon_functions():
    g = GaussianTradeOff(1.0)
    np.testing.assert_allclose(
        epsilon_delta_profile(g, [0, 1, 2, 5]),
        [0.3829249, 0.1269367, 0.0209236, 5.7937e-7],
        # relative: the golden values' own rounding (half a unit in the last digit given) is at
        # most 8.6e-6 of the value (5.7937e-7); an absolute 1e-6 could never fail on that entry
        rtol=1e-5,
        atol=0,
    )
    assert epsilon_for_delta(g, 0.0209236) == pytest.approx(2.0, abs=1e-5)


def test_gaussian_composition():
    g1 = GaussianTradeOff(1.0)
    four = compose(g1, g1, g1, g1)
    assert isinstance(four, GaussianTradeOff) and four.mu == pytest.approx(2.0)
    np.testing.assert_allclose(four(GRID), GaussianTradeOff(2.0)(GRID), atol=1e-15)
    assert tensor_power(g1, 4).mu == pytest.approx(2.0)
    assert compose(GaussianTradeOff(3.0), GaussianTradeOff(4.0)).mu == pytest.approx(5.0)
    assert tensor_power(g1, 0).mu == 0.0
    table = from_epsilon_delta([(1.0, 1e-3)])
    assert compose(identity(), table) is table and compose(table, identity()) is table


def test_lemma_3_8_values():
    g = client_sampling_lower_bound(GaussianTradeOff(1.0), 0.5)
    np.testing.assert_allclose(g([0.1, 0.3, 0.5]), [0.65, 0.45, 0.25], atol=1e-12)
    assert g(0.7) == pytest.approx(0.063704, abs=1e-6)
    assert g(0.7) == pytest.approx(GaussianTradeOff(1.0)(0.7), abs=1e-15)
    assert is_symmetric(g) and is_convex(g)
    assert np.all(g(GRID) >= GaussianTradeOff(1.0)(GRID))
    assert isinstance(g, ClientSampledTradeOff)


# --------------------------------------------------------------------------- C_p (spec 6.3)
CP_TABLE = [  # alpha, C_p(f), f_p, f_p^{-1} for f = G_1.8, p = 0.35
    (0.01, 0.888737, 0.888737, 0.984636),
    (0.05, 0.770924, 0.770924, 0.923412),
    (0.10, 0.690725, 0.690725, 0.847425),
    (0.20, 0.578842, 0.579128, 0.697812),
    (0.30, 0.478842, 0.490367, 0.552803),
    (0.40, 0.378842, 0.411341, 0.415010),
    (0.50, 0.278842, 0.337576, 0.288442),
    (0.60, 0.178874, 0.267007, 0.178874),
    (0.70, 0.093234, 0.198518, 0.093234),
    (0.90, 0.007975, 0.065360, 0.007975),
]


def test_cp_figure_4_values():
    f = GaussianTradeOff(1.8)
    c = subsample(f, 0.35)
    assert isinstance(c, SubsampledGaussianTradeOff)
    assert c.x_star == pytest.approx(0.1840601, abs=1e-7)
    assert c.y_star == pytest.approx(0.5947820, abs=1e-7)
    fp = mixture(f, 0.35)
    alphas, cs, fps, fpis = (np.array(col) for col in zip(*CP_TABLE, strict=True))
    np.testing.assert_allclose(c(alphas), cs, atol=1e-6)
    np.testing.assert_allclose(fp(alphas), fps, atol=1e-6)
    np.testing.assert_allclose(fp.inv(alphas), fpis, atol=1e-6)
    # the generalised inverse really inverts f_p, to double precision
    np.testing.assert_allclose(fp(fp.inv(alphas)), alphas, atol=1e-13)


def test_cp_closed_form_matches_exact_hull_of_a_tabulation():
    f = GaussianTradeOff(1.8)
    table = lower_tabulation(f, 1e-9)
    assert 0 < table.gap <= 1e-9
    closed = subsample(f, 0.35)(GRID)
    hull = subsample(table, 0.35)  # exact hull of the vertices of f_p and f_p^{-1}
    general = subsample(InverseTradeOff(f), 0.35)  # numerical path on (a copy of) f itself
    for other in (hull, general):
        gap = closed - other(GRID)
        assert gap.min() >= -1e-12  # numerical C_p never exceeds the exact one
        assert gap.max() <= 1e-7
        assert other.symmetric


def test_cp_delta_is_amplified_gaussian_delta():
    c = subsample(GaussianTradeOff(1.8), 0.35)
    eps = np.array([0.0, 0.3, 1.0, 3.0])
    numeric = TradeOff._delta(c, eps)  # golden-section search on the function itself
    np.testing.assert_allclose(c.delta(eps), numeric, atol=1e-10)
    delta = c.delta(1.0)
    # the inner mu-GDP epsilon is read at delta lowered by its error allowance (1e-9 relative)
    assert 1.0 <= c.epsilon(delta) <= 1.0 + 1e-8
    assert c.epsilon(0.99) == 0.0


def test_cp_extremes():
    f = GaussianTradeOff(1.8)
    assert subsample(f, 1.0) is f
    np.testing.assert_allclose(subsample(f, 0.0)(GRID), 1.0 - GRID, atol=1e-15)
    table = from_epsilon_delta([(1.0, 0.01), (2.0, 1e-4)])
    np.testing.assert_allclose(subsample(table, 1.0)(GRID), table(GRID), atol=1e-15)
    np.testing.assert_allclose(subsample(table, 0.0)(GRID), 1.0 - GRID, atol=1e-15)
    # SubsampledGaussianTradeOff itself at p = 1 reduces to f
    np.testing.assert_allclose(SubsampledGaussianTradeOff(1.8, 1.0)(GRID), f(GRID), atol=1e-12)


def check_cp_properties(f: TradeOff, p: float, c: TradeOff) -> None:
    alphas = np.linspace(0.0, 1.0, 401)
    values = c(alphas)
    fp = MixtureTradeOff(f, p)
    assert np.all(values <= np.minimum(fp(alphas), fp.inv(alphas)) + 1e-12)
    assert np.all(values >= f(alphas) - 1e-12)
    assert is_convex(c, alphas, tol=1e-12)
    assert np.all(np.diff(values) <= 1e-15)
    assert c.symmetric and is_symmetric(c, alphas, tol=1e-9)
    inner = alphas[values > 1e-6]
    np.testing.assert_allclose(c(c(inner)), inner, atol=1e-8)


@FAST
@given(mu=st.floats(0.05, 6.0), p=st.floats(0.001, 0.999))
def test_cp_gaussian_properties(mu, p):
    f = GaussianTradeOff(mu)
    check_cp_properties(f, p, subsample(f, p))


@FAST
@given(
    pairs=st.lists(st.tuples(st.floats(0.0, 5.0), st.floats(0.0, 0.2)), min_size=1, max_size=4),
    p=st.floats(0.001, 1.0),
)
def test_cp_tabulated_properties(pairs, p):
    f = from_epsilon_delta(pairs)
    c = subsample(f, p)
    check_cp_properties(f, p, c)
    if p == 1.0:
        np.testing.assert_allclose(c(GRID), f(GRID), atol=1e-12)


@FAST
@given(mu=st.floats(0.0, 6.0))
def test_c1_is_f_and_c0_is_identity(mu):
    f = GaussianTradeOff(mu)
    np.testing.assert_allclose(subsample(f, 1.0)(GRID), f(GRID), atol=0)
    np.testing.assert_allclose(subsample(f, 0.0)(GRID), 1.0 - GRID, atol=1e-15)
    np.testing.assert_allclose(SubsampledGaussianTradeOff(mu, 1.0)(GRID), f(GRID), atol=1e-12)


# --------------------------------------------------------------------------- tabulated
def test_from_epsilon_delta_vertices_and_profile():
    eps, delta = 1.0, 1e-3
    f = from_epsilon_delta([(eps, delta)])
    kink = (1 - delta) / (1 + math.e)
    np.testing.assert_allclose(f.alphas, [0.0, kink, 1 - delta, 1.0], atol=1e-15)
    np.testing.assert_allclose(
        f.betas, [1 - delta, 1 - delta - math.e * kink, 0.0, 0.0], atol=1e-15
    )
    alphas = GRID
    direct = np.maximum.reduce(
        [np.zeros_like(alphas), 1 - delta - math.e * alphas, (1 - delta - alphas) / math.e]
    )
    np.testing.assert_allclose(f(alphas), direct, atol=1e-15)
    assert f.symmetric and is_symmetric(f)
    assert f.delta(eps) == pytest.approx(delta, abs=1e-15)
    # (at exactly delta the stored 1 - delta rounds up by 1e-18: ask just above it)
    assert f.epsilon(delta * (1 + 1e-9)) == pytest.approx(eps, abs=1e-9)
    assert f.epsilon(delta / 2) == math.inf  # no finite epsilon reaches a smaller delta


def test_tabulated_profile_is_the_vertex_minimum():
    g = GaussianTradeOff(1.0)
    table = lower_tabulation(g, 1e-9)
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    # a lower bound on f gives a larger delta, by at most the certified gap
    diff = table.delta(eps) - g.delta(eps)
    assert np.all(diff >= -1e-15) and np.all(diff <= table.gap + 1e-15)


@pytest.mark.parametrize("mu", [0.1, 1.0, 5.0, 20.0])
def test_lower_tabulation_is_certified(mu):
    g = GaussianTradeOff(mu)
    table = lower_tabulation(g, 1e-7)
    alphas = np.unique(np.concatenate([GRID, special.ndtr(np.linspace(-37, 8, 2001))]))
    error = g(alphas) - table(alphas)
    assert error.min() >= -1e-15 and error.max() <= table.gap <= 1e-7
    assert table.symmetric and is_symmetric(table, alphas, tol=1e-12)
    inv_error = g.inv(alphas) - table.inv(alphas)
    assert inv_error.min() >= -1e-15 and inv_error.max() <= 1e-7


def test_lower_tabulation_of_an_asymmetric_function():
    f = mixture(GaussianTradeOff(2.0), 0.6)
    table = lower_tabulation(f, 1e-7)
    assert not table.symmetric and not is_symmetric(f)
    error = f(GRID) - table(GRID)
    assert error.min() >= -1e-15 and error.max() <= table.gap <= 1e-7
    inv_error = f.inv(GRID) - table.inv(GRID)
    assert inv_error.min() >= -1e-12 and inv_error.max() <= 1e-7


def test_randomized_response_composition_is_exact():
    eps = 1.0
    f = from_epsilon_delta([(eps, 0.0)])
    two = compose(f, f)
    a = 1 / (1 + math.exp(eps))
    b = 1 - a
    np.testing.assert_allclose(two.alphas, [0, a * a, 1 - b * b, 1], atol=1e-15)
    np.testing.assert_allclose(two.betas, [1, 1 - b * b, a * a, 0], atol=1e-15)
    assert two.symmetric


@FAST
@given(
    sizes=st.lists(st.integers(2, 5), min_size=2, max_size=3),
    seed=st.integers(0, 2**32 - 1),
    eps=st.floats(0.0, 3.0),
)
def test_tabulated_composition_matches_product_measures(sizes, seed, eps):
    rng = np.random.default_rng(seed)
    pairs = []
    for size in sizes:
        p = rng.dirichlet(np.ones(size))
        q = rng.dirichlet(np.ones(size))
        pairs.append((p, q))
    tables = [trade_off_of_pair(p, q) for p, q in pairs]
    composed = compose(*tables, max_vertices=10_000)
    assert composed.delta(eps) == pytest.approx(product_delta(pairs, eps), abs=1e-12)
    # commutative; and coarsening only lowers the function (a sound lower bound)
    swapped = compose(*reversed(tables), max_vertices=10_000)
    np.testing.assert_allclose(composed(GRID), swapped(GRID), atol=1e-12)
    coarse = compose(*tables, max_vertices=4)
    assert np.all(coarse(GRID) <= composed(GRID) + 1e-12)


def test_composition_of_tabulated_gaussians_is_a_tight_lower_bound():
    table = lower_tabulation(GaussianTradeOff(1.0), 1e-7)
    four = tensor_power(table, 4, max_vertices=600)
    exact = GaussianTradeOff(2.0)
    gap = exact(GRID) - four(GRID)
    assert gap.min() >= -1e-12 and gap.max() <= 1e-3
    assert four.symmetric
    assert exact.epsilon(1e-5) <= four.epsilon(1e-5) <= exact.epsilon(1e-5) + 0.1
    mixed = compose(GaussianTradeOff(1.0), table, max_vertices=600)  # Gaussian x table
    gap = GaussianTradeOff(math.sqrt(2))(GRID) - mixed(GRID)
    assert gap.min() >= -1e-12 and gap.max() <= 1e-3


def test_inverse_objects():
    f = mixture(GaussianTradeOff(1.5), 0.4)
    inv = inverse(f)
    assert isinstance(inv, InverseTradeOff)
    np.testing.assert_allclose(inv(GRID), f.inv(GRID), atol=0)
    np.testing.assert_allclose(inv.inv(GRID), f(GRID), atol=0)
    assert is_convex(inv)
    g = GaussianTradeOff(1.0)
    assert inverse(g) is g
    # asymmetric table: inverse of the inverse is the table
    table = lower_tabulation(f, 1e-6)
    back = inverse(inverse(table))
    np.testing.assert_allclose(back(GRID), table(GRID), atol=1e-12)
    np.testing.assert_allclose(inverse(table)(GRID), table.inv(GRID), atol=1e-12)


def test_mixture_profile_closed_form():
    f = mixture(GaussianTradeOff(2.0), 0.3)
    eps = np.array([0.0, 0.5, 2.0])
    np.testing.assert_allclose(f.delta(eps), TradeOff._delta(f, eps), atol=1e-10)
    assert not is_symmetric(f) and is_convex(f)


def test_helpers_detect_failures():
    class Bent(TradeOff):  # slopes -0.5 then -1: concave at 0.4
        def _evaluate(self, alpha):
            return np.where(alpha < 0.4, 0.8 - 0.5 * alpha, 1.0 - alpha)

    bent = Bent()
    assert not is_convex(bent)
    assert not is_symmetric(mixture(GaussianTradeOff(1.0), 0.5))
    assert is_symmetric(GaussianTradeOff(1.0)) and is_convex(GaussianTradeOff(1.0))


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: GaussianTradeOff(1.0)(1.5), "alpha"),
        (lambda: GaussianTradeOff(1.0)(-0.1), "alpha"),
        (lambda: GaussianTradeOff(1.0)(float("nan")), "alpha"),
        (lambda: GaussianTradeOff(1.0)(np.array([0.2, np.nan])), "alpha"),
        (lambda: GaussianTradeOff(1.0).inv(2.0), "beta"),
        (lambda: GaussianTradeOff(-1.0), "mu"),
        (lambda: GaussianTradeOff(float("nan")), "mu"),
        (lambda: GaussianTradeOff(1.0).delta(-1.0), "epsilon"),
        (lambda: GaussianTradeOff(1.0).epsilon(0.0), "delta"),
        (lambda: GaussianTradeOff(1.0).epsilon(1.0), "delta"),
        (lambda: epsilon_for_delta(GaussianTradeOff(1.0), float("nan")), "delta"),
        (lambda: subsample(GaussianTradeOff(1.0), 1.5), "p"),
        (lambda: mixture(GaussianTradeOff(1.0), -0.5), "p"),
        (lambda: subsample("G1", 0.5), "f"),
        (lambda: compose(GaussianTradeOff(1.0), 3.0), "others"),
        (lambda: client_sampling_lower_bound(GaussianTradeOff(1.0), 2.0), "p"),
        (lambda: from_epsilon_delta([(-1.0, 0.1)]), "epsilon"),
        (lambda: from_epsilon_delta([(1.0, 1.0)]), "delta"),
        (lambda: from_epsilon_delta([]), "pairs"),
        (lambda: TabulatedTradeOff([0.0, 0.5, 1.0], [1.0, 0.8, 0.0]), "betas"),  # > 1 - alpha
        (lambda: TabulatedTradeOff([0.0, 0.5, 1.0], [0.5, 0.5 + 1e-3, 0.0]), "betas"),
        (lambda: TabulatedTradeOff([0.0, 0.5, 1.0], [1.0, 0.0, 0.0][::-1]), "betas"),
        (lambda: TabulatedTradeOff([0.0, 0.5, 1.0], [0.8, 0.5, 0.0]), "convex"),
        (lambda: TabulatedTradeOff([0.1, 0.5, 1.0], [0.5, 0.2, 0.0]), "alphas"),
        (lambda: TabulatedTradeOff([0.0, 1.0], [1.0, float("nan")]), "betas"),
        (lambda: lower_tabulation(GaussianTradeOff(1.0), -1.0), "tol"),
        (lambda: tensor_power(GaussianTradeOff(1.0), -1), "k"),
    ],
)
def test_bad_input_names_the_argument(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_subsampling_within_rounding_of_one_keeps_the_hull_symmetric():
    """Found by hypothesis in CI: p = 1 - 2^-53 makes the mixture's vertex (f(0), 0) and f's
    own vertex near it nearly collinear; the float cross product dropped the true vertex, so
    the tabulated C_p(f) was not symmetric at alpha = 0. The hull's turn test is now exact."""
    f = from_epsilon_delta([(1.6817712780165464, 0.08537489191624184),
                            (4.296239056689005, 0.08537489191624184)])
    p = 0.9999999999999999
    check_cp_properties(f, p, subsample(f, p))
