"""Leakage orderings within one standard error (issue 21: 48 draws leave the default run's
orderings unresolved)."""

import math

import pytest

from privfl.distortion.orderings import draws_to_resolve, leakage_orderings, within_one_se


def _point(mechanism, value, eps_p, se, c1=0.16, c1_se=0.03):
    return {"mechanism": mechanism, "parameter": "x", "value": value, "eps_p": eps_p,
            "eps_p_se": se, "c1": c1, "c1_se": c1_se}


def test_within_one_se_uses_the_combined_error():
    assert within_one_se(0.17, 0.03, 0.16, 0.04)  # |0.01| <= 0.05
    assert not within_one_se(0.30, 0.03, 0.16, 0.04)  # 0.14 > 0.05
    assert within_one_se(0.21, 0.03, 0.16, 0.04)  # exactly one standard error: unresolved
    assert not within_one_se(0.2100001, 0.03, 0.16, 0.04)


def test_draws_to_resolve_scale_as_the_square_of_se_over_difference():
    assert draws_to_resolve(48, 0.01, 0.05) == 48 * 25
    assert draws_to_resolve(48, -0.02, 0.02) == 48
    assert draws_to_resolve(10, 0.0, 0.1) == math.inf


def test_orderings_compare_each_point_with_c1_and_its_neighbour():
    points = [_point("gaussian", 0.01, 0.163, 0.037), _point("gaussian", 1e4, 0.065, 0.016),
              _point("gaussian", 1e7, 0.0007, 0.0005), _point("mask", 0.99, 0.20, 0.03),
              _point("sampling", 0.1, math.nan, 0.03)]
    rows = leakage_orderings(points, 48)
    pairs = [(r["first"], r["second"]) for r in rows]
    assert pairs == [("gaussian x=0.01", "C1"), ("gaussian x=10000", "C1"),
                     ("gaussian x=1e+07", "C1"), ("mask x=0.99", "C1"),
                     ("gaussian x=0.01", "gaussian x=10000"),
                     ("gaussian x=10000", "gaussian x=1e+07")]
    flags = {pair: r["within_one_se"] for pair, r in zip(pairs, rows, strict=True)}
    assert flags[("gaussian x=0.01", "C1")] and flags[("mask x=0.99", "C1")]
    assert not flags[("gaussian x=10000", "C1")]
    assert not flags[("gaussian x=0.01", "gaussian x=10000")]
    first = rows[0]
    assert first["difference"] == pytest.approx(0.003)
    assert first["se"] == pytest.approx(math.hypot(0.037, 0.03))
    assert first["draws_to_resolve"] == math.ceil(48 * (first["se"] / 0.003) ** 2)
    assert rows[1]["draws_to_resolve"] is None


@pytest.mark.parametrize(("call", "message"), [
    (lambda: within_one_se(0.1, -0.1, 0.2, 0.1), "se_a = -0.1 is out of range"),
    (lambda: draws_to_resolve(0, 0.1, 0.1), "draws = 0"),
    (lambda: draws_to_resolve(5, 0.1, math.nan), "se = nan is out of range"),
    (lambda: leakage_orderings([], 1.5), "draws = 1.5"),
])
def test_bad_input_is_one_line(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)
