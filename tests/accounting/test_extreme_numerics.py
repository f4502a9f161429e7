"""Accountants at the edges of floating point: honest numbers or ValueErrors naming the argument.

Companion of ``tests/cli/test_extreme_inputs.py`` (issue 8, item 6).
"""

import math
import warnings

import numpy as np
import pytest

from privfl._validation import MAX_COUNT, check_int, check_positive
from privfl.accounting.base import check_event
from privfl.accounting.events import (
    AccountingLimitError,
    NoisyStep,
    PrivacyEvent,
    dpsgd_event,
)
from privfl.accounting.gdp.accountant import (
    GdpCltAccountant,
    fdp_clt_mu,
    gdp_epsilon,
    poisson_clt_mu,
)
from privfl.accounting.methods import AccountingOptions, account
from privfl.accounting.rdp import (
    DEFAULT_ORDERS,
    MAX_SUBSAMPLED_ORDER,
    RdpAccountant,
    rdp_laplace,
    rdp_poisson_gaussian,
    rdp_without_replacement,
    rdp_without_replacement_gaussian,
)
from privfl.accounting.rdp import poisson as rdp_poisson
from privfl.accounting.rdp import poisson_quadrature as rdp_poisson_quadrature

pytestmark = pytest.mark.filterwarnings("error")  # no RuntimeWarning leaks to the user either


# ------------------------------------------------------------------ account(None, ...)
@pytest.mark.parametrize("event", [None, "dpsgd", 3, (NoisyStep(1.0), 10)])
def test_account_refuses_what_is_not_an_event(event):
    with pytest.raises(ValueError, match=r"^event = .* is not a PrivacyEvent"):
        account(event, delta=1e-5)
    for method in ("rdp", "pld", "gdp"):
        with pytest.raises(ValueError, match="is not a PrivacyEvent"):
            account(event, delta=1e-5, methods=method)
    with pytest.raises(ValueError, match="is not a PrivacyEvent"):
        RdpAccountant().supports(event)
    with pytest.raises(ValueError, match="is not a PrivacyEvent"):
        check_event(event)


def test_account_validates_delta_and_epsilon_before_any_accountant_runs():
    event = dpsgd_event(1.0, 0.01, 10)
    with pytest.raises(ValueError, match=r"^delta = 2\.0 is out of range"):
        account(event, delta=2.0)
    with pytest.raises(ValueError, match=r"^epsilon = -1\.0 is out of range"):
        account(event, epsilon=-1.0)


@pytest.mark.parametrize("steps", [None, 5, "ab"])
def test_event_steps_must_be_pairs(steps):
    with pytest.raises(ValueError, match="steps"):
        PrivacyEvent(steps)


# ------------------------------------------------------------------ step counts
def test_step_counts_up_to_int64_are_accepted_and_beyond_refused():
    assert dpsgd_event(1.0, 0.01, MAX_COUNT).total_steps == 2**63 - 1
    with pytest.raises(ValueError, match=r"^steps = 9223372036854775808 is out of range"):
        dpsgd_event(1.0, 0.01, 2**63)
    with pytest.raises(ValueError, match=r"^steps = <a 400-digit integer> is out of range"):
        dpsgd_event(1.0, 0.01, 10**399)
    step = NoisyStep(1.0, 0.01)
    with pytest.raises(ValueError, match="in all is out of range"):
        PrivacyEvent(((step, MAX_COUNT), (step, 1)))


def test_huge_integers_give_value_errors_not_overflow_errors():
    with pytest.raises(ValueError, match=r"noise_multiplier = <a 401-digit integer> .* finite"):
        check_positive("noise_multiplier", 10**400)
    with pytest.raises(ValueError, match="5001-digit"):  # beyond int -> str's 4300-digit limit
        check_int("steps", 10**5000, maximum=MAX_COUNT)
    with pytest.raises(ValueError, match="noise_multiplier"):
        NoisyStep(10**400)


def test_largest_count_is_answered_by_the_closed_forms():
    event = dpsgd_event(1.0, 0.01, MAX_COUNT)
    report = account(event, delta=1e-5, methods=("rdp", "gdp"))
    rdp, gdp = report.results
    # T * KL (KL = 8.38122e-5 per step, mpmath) is below the truth; the RDP bound is above it
    assert MAX_COUNT * 8.38e-5 < rdp.epsilon < 1.02 * MAX_COUNT * 8.47e-5
    assert gdp.epsilon == pytest.approx(rdp.epsilon, rel=0.05)


# ------------------------------------------------------------------ GDP beyond the float range
def test_gdp_epsilon_is_finite_up_to_the_float_range_then_inf():
    assert gdp_epsilon(1e-5, 1e100) == pytest.approx(5e199, rel=1e-12)
    assert gdp_epsilon(1e-5, 1.8e154) == pytest.approx(0.5 * 1.8e154 * 1.8e154, rel=1e-12)
    assert math.isinf(gdp_epsilon(1e-5, 1.9e154))
    assert math.isinf(gdp_epsilon(1e-5, 1e300))


@pytest.mark.parametrize("z", [1e-8, 1e-160, 1e-300, 5e-324, 1e141, 1e200, 1e307])
@pytest.mark.parametrize("q", [1.0, 0.5, 1e-12])
def test_gdp_accountant_at_extreme_noise(z, q):
    result = GdpCltAccountant().epsilon(dpsgd_event(z, q, 10**6), 1e-5)
    if z < 1:
        assert result.epsilon > 1e21 or math.isinf(result.epsilon)
        if math.isinf(result.epsilon):
            assert "float range" in result.note
    else:
        assert result.epsilon == 0.0


def test_clt_mu_at_huge_noise_is_its_limit():
    # expm1(1/z^2) = 1/z^2 and kappa(s) = 1/(s sqrt 2) when the noise is huge
    assert poisson_clt_mu(0.5, 1e200, 10**6) == pytest.approx(0.5 * 1e3 / 1e200, rel=1e-12)
    assert fdp_clt_mu(0.5, 10**6, 2e200) == pytest.approx(0.5 * 1e3 / 1e200, rel=1e-12)


# ------------------------------------------------------------------ RDP at extreme noise
@pytest.mark.parametrize("sigma", np.logspace(-12, -2, 11).tolist() + [3e-11, 1e-10])
@pytest.mark.parametrize("q", [0.999, 0.5, 1e-6])
def test_sampled_gaussian_rdp_stays_in_its_bracket_at_small_noise(sigma, q):
    """a/(2s^2) + a log(q)/(a-1) <= rdp <= a/(2s^2): the bracket pins small-noise values."""
    alphas = np.array(DEFAULT_ORDERS + (1.0001, 1.18, 1.33, 1.48, 2.5, 100.5, 5000.5))
    got = rdp_poisson_gaussian(alphas, q, sigma)
    upper = alphas / (2 * sigma * sigma)
    lower = upper + alphas * math.log(q) / (alphas - 1)
    assert np.all(np.isfinite(got))
    assert np.all(got <= upper * (1 + 1e-11)) and np.all(got >= lower - 1e-11 * upper)


def test_quadrature_resolves_narrow_bumps():
    """The windowed quadrature at a noise where one grid over [0, alpha] would miss the bumps."""
    for sigma in (1e-4, 1e-6, 1e-8):
        log_am1 = rdp_poisson_quadrature.log_a_minus_1_quad(0.01, sigma, 1.18)
        rdp = np.logaddexp(0.0, log_am1) / 0.18
        upper = 1.18 / (2 * sigma * sigma)
        assert upper + 1.18 * math.log(0.01) / 0.18 - 1e-11 * upper <= rdp <= upper * (1 + 1e-11)


@pytest.mark.parametrize("z", [1e-160, 1e-300, 5e-324])
@pytest.mark.parametrize("q", [1.0, 0.01])
@pytest.mark.parametrize("scheme", ["poisson", "without-replacement"])
def test_rdp_beyond_the_float_range_is_inf_with_a_note(z, q, scheme):
    relation = "add-remove" if scheme == "poisson" else "replace-one"
    event = dpsgd_event(z, q, 10, sampling=scheme, neighbouring=relation)
    result = RdpAccountant().epsilon(event, 1e-5)
    assert math.isinf(result.epsilon) and "float range" in result.note


@pytest.mark.parametrize("z", [1e141, 1e200, 1e307])
def test_rdp_at_huge_noise_is_tiny_and_positive(z):
    curve = rdp_poisson_gaussian([1.5, 64.0], 1e-12, z)
    assert np.all(curve > 0) and np.all(curve <= np.array([1.5, 64.0]) / (2 * z) / z + 5e-324)
    assert RdpAccountant().epsilon(dpsgd_event(z, 1e-12, 10**6), 1e-5).epsilon == 0.0


@pytest.mark.parametrize("scale", [5e-324, 1e-300, 1e160, 1e300])
def test_laplace_rdp_at_extreme_scales_terminates(scale):
    curve = rdp_laplace([1.01, 2.0, 64.0], scale)
    assert np.all(curve >= 0)
    if scale < 1:
        assert np.all(curve >= 1e299)


# ------------------------------------------------------------------ huge orders
def test_subsampled_orders_above_the_cap_are_refused_naming_orders():
    too_big = [2.0, MAX_SUBSAMPLED_ORDER * 10]
    for curve in (
        lambda: rdp_poisson_gaussian(too_big, 0.01, 1.0),
        lambda: rdp_without_replacement_gaussian(too_big, 0.01, 1.0),
        lambda: rdp_without_replacement(too_big, 0.01, lambda a: a / 2.0),
    ):
        with pytest.raises(AccountingLimitError, match=r"^orders = 1e\+06 is out of range"):
            curve()
    # without subsampling the curve is a closed form: any order
    assert np.all(np.isfinite(rdp_poisson_gaussian([1e8, 1e300], 1.0, 1.0)))


def test_the_order_cap_itself_is_evaluated_cheaply():
    curve = rdp_poisson_gaussian([MAX_SUBSAMPLED_ORDER, MAX_SUBSAMPLED_ORDER - 0.5], 0.01, 1.0)
    assert np.all(np.isfinite(curve)) and np.all(curve > 0)


def test_many_large_orders_are_evaluated_in_bounded_groups():
    alphas = np.array([float(a) for a in range(2, 40)] + [4096.0, 4096.5, 20000.0])
    groups = rdp_poisson._order_groups(alphas)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(alphas)))
    for group in groups:
        assert len(group) == 1 or len(group) * (alphas[group].max() + 3) <= (1 << 22)


def test_all_methods_list_a_refusing_accountant_and_answer_with_the_others():
    event = dpsgd_event(1.0, 0.01, 1000)
    report = account(event, delta=1e-5, options=AccountingOptions(orders=[1e8]))
    assert {r.method for r in report.results} == {"pld", "gdp-clt"}
    assert "orders" in report.unsupported["rdp"]
    with pytest.raises(AccountingLimitError, match="orders"):
        account(event, delta=1e-5, methods="rdp", options=AccountingOptions(orders=[1e8]))


def test_a_memory_error_is_a_refusal_in_the_dispatcher(monkeypatch):
    def boom(self, event, delta):
        raise MemoryError("Unable to allocate 42.1 GiB")

    monkeypatch.setattr(RdpAccountant, "_epsilon", boom)
    event = dpsgd_event(1.0, 0.01, 100)
    report = account(event, delta=1e-5)
    assert "out of memory" in report.unsupported["rdp"]
    with pytest.raises(AccountingLimitError, match="rdp accountant ran out of memory"):
        account(event, delta=1e-5, methods="rdp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert {r.method for r in report.results} == {"pld", "gdp-clt"}
