"""Xie et al. 2023's unprinted accounting parameters fitted to its printed epsilons
(privfl.reproduce.xie2023_fit): the fitted steps, their residuals, the printed V = 25 and the
accounting the paper states, against values computed independently in the spec
(/work/shared/specs, seed 2, Section 7.1: Balle et al.'s conversion)."""

from __future__ import annotations

import pytest

from privfl.reproduce.rows import Reproduction
from privfl.reproduce.xie2023_fit import _stated_epsilon, fit_rows, fit_steps, residual


@pytest.mark.parametrize(("table", "label", "steps", "runner_up"), [
    ("Table 4", "T = 3", 3, "T = 4"),
    ("Table 7", "V = 26, T = 3", 78, "V = 25, T = 3"),
    ("Table 8", "V = 100, T = 1", 100, "V = 100, T = 2"),
])
def test_the_fit_reproduces_every_printed_digit_and_no_other_candidate_does(
        table, label, steps, runner_up):
    fit = fit_steps(table)
    assert (fit.label, fit.steps) == (label, steps)
    assert 0.5 < fit.residual <= 1.0  # within half a unit of every printed last digit
    other, other_residual = fit.runner_up()
    assert other == runner_up and other_residual > 100  # the next best misses by far
    assert all(r > 100 for c, r in fit.residuals.items() if c != label)


def test_printed_v25_gives_the_epsilon_the_issue_quotes():
    rep = Reproduction("xie2023", "t", "quick")
    fit_rows(rep)
    (row,) = [r for r in rep.rows if r.quantity.startswith(
        "epsilon at the printed V = 25, T = 3 (75 steps), Table 7, sigma = 1,")]
    assert row.privfl == pytest.approx(3.53024, abs=1e-5) and row.paper == 3.5691
    assert row.verdict == "differs" and "3.5691" in row.reason
    fits = [r for r in rep.rows if r.quantity.startswith("fit residual")]
    assert len(fits) == 5 and all(r.verdict == "match" and r.basis == "derived" for r in fits)
    stated = [r for r in rep.rows if r.quantity.startswith("epsilon by the stated")]
    assert len(stated) == 10 and all(r.verdict == "differs" for r in stated)


@pytest.mark.parametrize(("z", "q", "steps", "delta", "expected"), [
    (1.8, 0.1, 3, 0.0029, 0.3334),     # Table 4, sigma 1.8 (the spec: alpha* = 12)
    (6.0, 0.2, 1, 0.0029, 0.0556),     # Table 5, sigma 6
    (2.0, 10 / 805, 3, 1e-6, 0.2767),  # Table 6, sigma 2
    (5.0, 50 / 1266, 78, 1e-5, 0.2693),  # Table 7, sigma 5
    (4.0, 0.05, 100, 1e-5, 0.5116),    # Table 8, sigma 4
])
def test_the_stated_conversion_matches_the_spec_s_independent_values(z, q, steps, delta,
                                                                     expected):
    assert _stated_epsilon(z, q, steps, delta, "poisson") == pytest.approx(expected, abs=6e-5)


def test_sampling_without_replacement_costs_more_than_poisson():
    poisson = _stated_epsilon(1.0, 50 / 1266, 78, 1e-5, "poisson")
    fixed = _stated_epsilon(1.0, 50 / 1266, 78, 1e-5, "without-replacement")
    assert fixed > 5 * poisson  # replace-one: twice the sensitivity


def test_residual_counts_half_units_of_the_last_printed_digit():
    assert residual({1.0: "0.546"}, {1.0: 0.5465}) == pytest.approx(1.0)
    assert residual({1.0: "0.546", 2.0: "1.5"}, {1.0: 0.546, 2.0: 1.6}) == pytest.approx(2.0)
    with pytest.raises(ValueError, match=r"computed lacks sigma = \[2.0\]"):
        residual({1.0: "0.5", 2.0: "0.3"}, {1.0: 0.5})
    with pytest.raises(ValueError, match="table = 'Table 9' is not allowed"):
        fit_steps("Table 9")
