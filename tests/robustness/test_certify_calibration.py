"""Monte Carlo certificates: Hoeffding and Clopper-Pearson bounds, their coverage when the top
class is chosen on the same samples, the certified-accuracy worked example of Xie et al. 2023's
setting (epsilon 0.6298, delta 0.0029), and bad inputs."""

import math

import numpy as np
import pytest
from scipy import stats

from privfl.robustness.calibration import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    guaranteed_confidence,
    hoeffding_radius,
    side_level,
)
from privfl.robustness.certified_accuracy import (
    EnsembleScores,
    certified_accuracy,
    certify_ensemble,
)

EPS, DELTA = 0.6298, 0.0029
ROWS = np.array([[0.97, 0.03], [0.80, 0.20], [0.40, 0.60], [0.55, 0.45], [0.10, 0.90]])
LABELS = np.array([0, 0, 0, 0, 1])


@pytest.mark.parametrize(
    ("models", "psi", "radius"),
    [(1000, 0.01, 0.047985), (100, 0.01, 0.151743), (1000, 0.2, 0.028368), (70, 0.2, 0.107219),
     (200, 0.05, 0.0865)],
)
def test_hoeffding_radius_golden(models, psi, radius):
    assert hoeffding_radius(models, psi) == pytest.approx(radius, abs=5e-5 if models == 200
                                                          else 5e-7)


def test_worked_example_estimate():
    cert = certify_ensemble(EnsembleScores.from_mean(ROWS, 1000), EPS, DELTA, method="estimate")
    np.testing.assert_array_equal(cert.predictions, [0, 0, 1, 0, 1])
    np.testing.assert_allclose(cert.certified_k,
                               [2.679395, 1.090842, 0.319728, 0.158260, 1.721473], atol=5e-7)
    assert cert.kind == "estimate" and cert.confidence is None and "not a guarantee" in cert.note
    np.testing.assert_array_equal(cert.certified(1.0), [True, True, False, False, True])
    acc = certified_accuracy(cert, LABELS, [0, 0.5, 1, 2, 3, 4])
    np.testing.assert_allclose(acc.accuracy, [0.8, 0.6, 0.6, 0.2, 0.0, 0.0])
    assert acc.ensemble_accuracy == 0.8
    assert acc.largest_certified_k == pytest.approx(2.679395, abs=5e-7)


def test_worked_example_hoeffding_as_the_paper():
    scores = EnsembleScores.from_mean(ROWS, 1000)
    cert = certify_ensemble(scores, EPS, DELTA, confidence=0.99, adjustment="none")
    np.testing.assert_allclose(cert.certified_k,
                               [1.930854, 0.873714, 0.164682, 0.006356, 1.375254], atol=5e-7)
    # two one-sided 99 % bounds with A chosen on the same samples: proven at 98 %
    assert cert.kind == "bound" and cert.guaranteed_confidence == pytest.approx(0.98)
    one = certify_ensemble(EnsembleScores.from_mean([[1.0, 0.0]], 1000), EPS, DELTA,
                           adjustment="none")
    assert one.certified_k[0] == pytest.approx(2.321792, abs=5e-7)  # 4.537444 uncalibrated


def test_simultaneous_default_is_stricter_and_can_leave_k0_uncertified():
    scores = EnsembleScores.from_mean(ROWS, 1000)
    paper = certify_ensemble(scores, EPS, DELTA, adjustment="none")
    ours = certify_ensemble(scores, EPS, DELTA)
    assert ours.guaranteed_confidence == 0.99 and ours.adjustment == "simultaneous"
    r = hoeffding_radius(1000, 0.005)  # two-sided 99 %: 0.5 % per side
    np.testing.assert_allclose(ours.top_bound, ROWS.max(axis=1) - r)
    np.testing.assert_allclose(ours.runner_up_bound, ROWS.min(axis=1) + r)
    assert np.all(ours.certified_k < paper.certified_k)
    assert ours.certified_k[3] < 0  # 0.55 vs 0.45 is not separated at 99 %
    literal = certified_accuracy(ours, LABELS, [0])
    plain = certified_accuracy(ours, LABELS, [0], plain_at_zero=True)
    assert literal.accuracy[0] == 0.6 and plain.accuracy[0] == 0.8 and plain.plain_at_zero


def test_clopper_pearson_matches_scipy_exact_interval():
    n = 57
    for x in (0, 1, 13, 28, 56, 57):
        ci = stats.binomtest(x, n).proportion_ci(confidence_level=0.9, method="exact")
        assert float(clopper_pearson_lower(x, n, 0.05)) == pytest.approx(ci.low, abs=1e-12)
        assert float(clopper_pearson_upper(x, n, 0.05)) == pytest.approx(ci.high, abs=1e-12)


def test_clopper_pearson_is_tighter_than_hoeffding_near_one():
    votes = EnsembleScores.from_votes([[100, 0]], 100)
    cp = certify_ensemble(votes, EPS, DELTA, method="clopper-pearson")
    hoeff = certify_ensemble(votes, EPS, DELTA, method="hoeffding")
    # all 100 votes for A: CP lower bound (alpha/2 = 0.005)^(1/100), Hoeffding 1 - 0.163
    assert cp.top_bound[0] == pytest.approx(0.005 ** (1 / 100), rel=1e-12)
    assert hoeff.top_bound[0] == pytest.approx(1 - hoeffding_radius(100, 0.005), rel=1e-12)
    assert cp.certified_k[0] > 1.5 * hoeff.certified_k[0] > 0


def test_votes_from_predictions():
    predictions = np.array([[0, 1, 2], [0, 1, 1], [0, 2, 1], [1, 1, 1]])  # 4 models, 3 points
    scores = EnsembleScores.from_predictions(predictions, classes=3)
    np.testing.assert_array_equal(scores.votes, [[3, 1, 0], [0, 3, 1], [0, 3, 1]])
    assert scores.models == 4 and scores.hard
    cert = certify_ensemble(scores, 1.0, 1e-5, method="clopper-pearson", confidence=0.9)
    np.testing.assert_array_equal(cert.predictions, [0, 1, 1])
    np.testing.assert_array_equal(cert.runner_up, [1, 2, 2])
    assert side_level(0.9, 3) == pytest.approx(0.1 / 6)  # Bonferroni over 2C bounds
    lower = clopper_pearson_lower(3, 4, 0.1 / 6)
    assert cert.top_bound[0] == pytest.approx(float(lower))
    # runner-up bound: min(1 - lower(F_A), max over the other classes' upper bounds)
    upper_b = max(clopper_pearson_upper(1, 4, 0.1 / 6), clopper_pearson_upper(0, 4, 0.1 / 6))
    assert cert.runner_up_bound[0] == pytest.approx(min(1 - float(lower), float(upper_b)))


def test_probabilities_are_averaged():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(30, 7, 3))
    probs = np.exp(logits) / np.exp(logits).sum(axis=2, keepdims=True)
    scores = EnsembleScores.from_probabilities(probs)
    np.testing.assert_allclose(scores.mean, probs.mean(axis=0))
    assert scores.models == 30 and not scores.hard and scores.classes == 3


def test_guaranteed_confidence():
    assert guaranteed_confidence(0.99, 2, "none") == pytest.approx(0.98)
    assert guaranteed_confidence(0.99, 10, "none") == pytest.approx(0.8)
    assert guaranteed_confidence(0.9, 10, "none") == 0.0
    assert guaranteed_confidence(0.95, 10) == 0.95


def _error_rate(method, adjustment, p, *, models=40, repeats=20_000, seed=0):
    """How often the bounds of the *selected* A and B miss the true F_A, F_B."""
    rng = np.random.default_rng(seed)
    x = rng.binomial(models, p, repeats)
    scores = EnsembleScores.from_votes(np.stack([x, models - x], axis=1), models)
    cert = certify_ensemble(scores, 1.0, 1e-3, method=method, confidence=0.9,
                            adjustment=adjustment)
    truth = np.array([p, 1 - p])
    missed = (cert.top_bound > truth[cert.predictions]) | (
        cert.runner_up_bound < truth[cert.runner_up])
    return missed.mean()


@pytest.mark.parametrize("method", ["clopper-pearson", "hoeffding"])
@pytest.mark.parametrize("p", [0.5, 0.6, 0.8])
def test_simultaneous_bounds_cover_at_the_stated_level(method, p):
    # 20,000 repeats: the standard error of a rate near 0.1 is 0.002
    assert _error_rate(method, "simultaneous", p) <= 0.1 + 0.006


def test_unadjusted_bounds_can_miss_more_than_stated():
    # Xie et al. 2023's calibration at "90 %", A chosen on the same samples: at F_A = 1/2 the
    # exact bounds miss about 15 % of the time (each tail up to 10 %), within the proven 80 %
    rate = _error_rate("clopper-pearson", "none", 0.5)
    assert 0.12 < rate <= 0.2 + 0.006


def test_soft_scores_three_classes_coverage():
    rng = np.random.default_rng(1)
    alpha = np.array([6.0, 3.0, 1.0])
    truth = alpha / alpha.sum()
    models, repeats = 200, 2000
    draws = rng.dirichlet(alpha, size=(models, repeats))
    cert = certify_ensemble(EnsembleScores.from_probabilities(draws), 1.0, 1e-3,
                            confidence=0.8)
    others = np.where(np.arange(3)[None, :] == cert.predictions[:, None], -1.0, truth[None, :])
    missed = (cert.top_bound > truth[cert.predictions]) | (
        cert.runner_up_bound < others.max(axis=1))
    assert missed.mean() <= 0.2
    assert np.mean(cert.certified_k > 0) > 0.5  # the bound is not vacuous here


def test_certified_accuracy_default_grid_and_record():
    cert = certify_ensemble(EnsembleScores.from_mean(ROWS, 1000), EPS, DELTA, method="estimate")
    acc = certified_accuracy(cert, LABELS)
    np.testing.assert_array_equal(acc.k, [0.0, 1.0, 2.0])
    np.testing.assert_allclose(acc.standard_error, np.sqrt(acc.accuracy * (1 - acc.accuracy) / 5))
    record = acc.to_dict()
    assert record["privacy"]["certification_epsilon"] == pytest.approx(1000 * EPS)
    assert record["privacy"]["epsilon"] == EPS and record["kind"] == "estimate"
    assert "Theorem 3" in record["theorem"]


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda: EnsembleScores.from_mean([[0.7, 0.2]], 10), "summing to 0.9"),
        (lambda: EnsembleScores.from_mean([[1.2, -0.2]], 10), "mean = 1.2 is out of range"),
        (lambda: EnsembleScores.from_mean([[0.5, 0.5]], 0), "models = 0 is out of range"),
        (lambda: EnsembleScores.from_votes([[3, 2]], 4), "votes has a row summing to 5"),
        (lambda: EnsembleScores.from_votes([[1.5, 2.5]], 4), "votes = 1.5 is out of range"),
        (lambda: EnsembleScores.from_predictions([[0, 3]], 3), "predictions = 3 is out of range"),
        (lambda: certify_ensemble(EnsembleScores.from_mean(ROWS, 9), EPS, DELTA,
                                  method="clopper-pearson"), "needs hard votes"),
        (lambda: certify_ensemble(EnsembleScores.from_mean(ROWS, 9), EPS, DELTA,
                                  confidence=1.0), "confidence = 1.0 is out of range"),
        (lambda: certify_ensemble(EnsembleScores.from_mean(ROWS, 9), 0.0, DELTA),
         "epsilon = 0.0 is out of range"),
        (lambda: certify_ensemble(EnsembleScores.from_mean(ROWS, 9), EPS, DELTA,
                                  adjustment="bonf"), "adjustment = 'bonf'"),
        (lambda: certified_accuracy(certify_ensemble(EnsembleScores.from_mean(ROWS, 9), EPS,
                                                     DELTA), [0, 1]), "labels has shape"),
        (lambda: certified_accuracy(certify_ensemble(EnsembleScores.from_mean(ROWS, 9), EPS,
                                                     DELTA), LABELS, [-1]), "k = -1.0"),
        (lambda: hoeffding_radius(0, 0.1), "models = 0 is out of range"),
    ],
)
def test_bad_inputs_one_line(call, fragment):
    with pytest.raises(ValueError) as error:
        call()
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_ties_go_to_the_lowest_class():
    cert = certify_ensemble(EnsembleScores.from_mean([[0.5, 0.5]], 10), EPS, DELTA,
                            method="estimate")
    assert cert.predictions[0] == 0 and cert.runner_up[0] == 1 and cert.certified_k[0] == 0.0
    assert math.isclose(cert.k_max, 4.537444, abs_tol=1e-6)
