"""The bounds of Zhang, Chen and Yang 2022, each labelled with what is proven for its inputs.

Every function returns a :class:`Bound`: the paper's number for the given inputs, which side of
which quantity it bounds, whether the paper's stated hypothesis holds (``hypothesis``) and
whether a correct proof covers these inputs (``proven``), with a one-line ``note``. privfl's
findings (proofs and counterexamples in ``docs/distortion.md``):

* Lemma B.3 holds, with a better constant: ``sqrt(JS(F~ || F)) <= C2 e^{-xi/2} TV`` (KL <= chi^2
  on the mixture, whose density is >= e^{-xi} times the prior).
* Lemma 6.5, ``eps_p <= 2 C1 - C2 TV``, is FALSE under its stated hypothesis ``C2 TV <= C1``
  (Bayesian counterexample below); it is proven under ``2 C2 TV <= C1``, where it is looser than
  the triangle bound ``eps_p <= C1 + C2 TV`` (:func:`leakage_triangle_bounds`, always valid).
* Lemma 6.6 (``TV >= C1 - tau`` implies ``eps_p <= tau``) rests on an unproven step (their eq.
  32) that fails on almost every random instance: never a guarantee. What IS proven is the
  converse direction: ``eps_p <= tau`` needs ``TV >= (C1 - tau) / C2``.
* Lemma 6.3's main-text constant (``C3``) is off by a factor 2; Theorem 6.1 is proven for
  zero-mean distortion under their Assumption 6.1 (bounded parameters) and bounds the
  Appendix L conditional-mean proxy, not the literal utility loss.
* Theorem 6.12 inherits Lemma 6.5's flaw; Theorem 6.13 (Zhang et al. 2022a, "No free lunch")
  is implemented as restated by the paper (its proof was not checked).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from privfl._validation import (
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_range,
)
from privfl.distortion.bayesian import c2_from_xi
from privfl.distortion.divergence import check_leakage

__all__ = [
    "Bound",
    "bias_gap_bound",
    "c2_from_xi",
    "c6_from_constants",
    "c_d",
    "gaussian_tv_sandwich",
    "leakage_triangle_bounds",
    "min_tv_for_budget",
    "nfl_holds",
    "nfl_lower_bound",
    "optimal_tradeoff",
    "privacy_leakage_upper_bound",
    "smaller_root",
    "tradeoff_upper_bound",
    "utility_loss_upper_bound",
    "variance_gap_bound",
]


@dataclass(frozen=True)
class Bound:
    """One statement's number for given inputs.

    Attributes
    ----------
    statement
        Where it comes from, e.g. ``"Lemma 6.5"`` (Zhang, Chen and Yang 2022).
    form
        ``"paper"`` (as printed) or privfl's ``"corrected"`` / ``"triangle"`` / ... form.
    quantity
        What is bounded, e.g. ``"eps_p"``, ``"eps_u (Appendix L proxy)"``, ``"TV"``.
    side
        ``"upper"`` (quantity <= value) or ``"lower"`` (quantity >= value).
    value
        The bound's value (may be infinite).
    hypothesis
        The paper's stated hypothesis holds for these inputs.
    proven
        A correct proof covers these inputs (under the assumptions named in ``note``).
    note
        One line: assumptions, or why it is not proven.
    """

    statement: str
    form: str
    quantity: str
    side: str
    value: float
    hypothesis: bool
    proven: bool
    note: str

    def holds(self, measured: float, tolerance: float = 0.0) -> bool:
        """Whether a measured value of the quantity is on the bound's side (within tolerance)."""
        if self.side == "upper":
            return measured <= self.value + tolerance
        return measured >= self.value - tolerance

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _xi(xi: float) -> float:
    if isinstance(xi, (int, float)) and not isinstance(xi, bool) and math.isinf(xi) and xi > 0:
        return math.inf
    return check_nonnegative("xi", xi)


# ------------------------------------------------------------------------------- constants
def c_d(gamma: float, delta: float, xi: float) -> float:
    """``C_d = gamma (e^{2 xi} - 1) / (4 Delta)`` of Theorem 6.13 (Zhang et al. 2022a).

    ``gamma = sum_k TV_k / TV_aggregate`` (in ``[1/150, 150]`` for Gaussian randomisation) and
    ``Delta > 0`` (their Assumption C.1) are inputs: neither is computable from a run.
    """
    gamma = check_positive("gamma", gamma)
    delta = check_positive("delta", delta)
    return gamma * 2.0 * c2_from_xi(_xi(xi)) / (4.0 * delta)


def c6_from_constants(c3: float, c4: float, c5: float, sup_norm: float | None = None) -> float:
    """An admissible ``C6 = 2 sup||W|| C3 + C4 (C3 + 2 C5)`` (the last lines of the proof of
    Theorem 6.1, with ``TV^2 <= TV``; ``sup||W||`` defaults to ``C3``). The paper never gives C6.
    """
    c3 = check_nonnegative("c3", c3)
    c4 = check_nonnegative("c4", c4)
    c5 = check_nonnegative("c5", c5)
    sup = c3 if sup_norm is None else check_range("sup_norm", sup_norm, 0.0, c3)
    return 2.0 * sup * c3 + c4 * (c3 + 2.0 * c5)


# ------------------------------------------------------------------------------- utility
def utility_loss_upper_bound(expected_variance: float, tv: float, c6: float, *,
                             zero_mean: bool = True) -> Bound:
    """Theorem 6.1: ``eps_u <= -E(Var[W~ | W_{t-1}]) + C6 TV(P || P~)``.

    Proven (privfl's reading of their Appendix L) for ZERO-MEAN distortion (``E W~ = E W``,
    e.g. Gaussian noise) under Assumption 6.1 (``||W|| <= C3`` on both supports), the hidden
    assumption ``Bias <= C5 TV`` and a C6 as in :func:`c6_from_constants`; it bounds the
    conditional-mean proxy (:func:`privfl.distortion.utility.proxy_utility_loss`), not the
    literal loss. With ``zero_mean=False`` (e.g. random masks) the bias step is not proven.
    """
    var = check_nonnegative("expected_variance", expected_variance)
    tv = check_probability("tv", tv)
    c6 = check_nonnegative("c6", c6)
    note = ("bounds the Appendix L proxy (distorted parameter at its conditional mean); "
            "assumes ||W|| <= C3 on both supports and Bias <= C5 TV")
    if not zero_mean:
        note = ("not proven for distortion that moves the mean: the bias step (Lemma 6.3) and "
                "tr(E W~ E W~^T - E W E W^T) = 0 need E W~ = E W; " + note)
    return Bound("Theorem 6.1", "paper", "eps_u (Appendix L proxy)", "upper",
                 -var + c6 * tv, True, bool(zero_mean), note)


def bias_gap_bound(tv: float, c3: float, form: str = "paper") -> Bound:
    """Lemma 6.3: ``|Bias(W~) - Bias(W)| <= C3 TV`` (paper, main text) or ``2 C3 TV``
    (corrected: ``|Bias~ - Bias| <= ||E W~ - E W|| <= diameter * TV <= 2 C3 TV`` when
    ``||W|| <= C3`` on both supports). The paper's constant fails on two point masses: P at
    ``-b``, P~ = ``(1 - t) P + t delta_b``, ``W* = -b``, ``||b|| = C3`` give ``2 C3 TV``.
    """
    tv = check_probability("tv", tv)
    c3 = check_nonnegative("c3", c3)
    if form == "paper":
        return Bound("Lemma 6.3", "paper", "|Bias(W~) - Bias(W)|", "upper", c3 * tv, True,
                     False, "false as stated (off by a factor 2); see the corrected form")
    if form == "corrected":
        return Bound("Lemma 6.3", "corrected", "|Bias(W~) - Bias(W)|", "upper", 2 * c3 * tv,
                     True, True, "||E W~ - E W|| <= 2 sup||W|| TV, with ||W|| <= C3")
    raise ValueError(f"form = {form!r} is not allowed: must be one of paper, corrected")


def variance_gap_bound(expected_variance: float, tv: float, c3: float,
                       sup_norm: float | None = None) -> Bound:
    """Lemma 6.4: ``Var(E[W~ | W_{t-1}]) - Var(W) <= -E(Var[W~ | W_{t-1}]) + 2 sup||W|| C3 TV``.

    Proven for zero-mean distortion under ``||W|| <= C3`` on both supports (law of total
    variance, then ``|E ||W~||^2 - E ||W||^2| <= C3^2 TV``).
    """
    var = check_nonnegative("expected_variance", expected_variance)
    tv = check_probability("tv", tv)
    c3 = check_nonnegative("c3", c3)
    sup = c3 if sup_norm is None else check_range("sup_norm", sup_norm, 0.0, c3)
    return Bound("Lemma 6.4", "paper", "Var(E[W~ | W_{t-1}]) - Var(W)", "upper",
                 -var + 2.0 * sup * c3 * tv, True, True,
                 "zero-mean distortion, ||W|| <= C3 on both supports")


# ------------------------------------------------------------------------------- privacy
def privacy_leakage_upper_bound(c1: float, c2: float, tv: float) -> Bound:
    """Lemma 6.5 as printed: ``eps_p <= 2 C1 - C2 TV`` if ``C2 TV <= C1``.

    ``hypothesis``: the printed condition ``C2 TV <= C1``; ``proven``: the condition the last
    step actually needs, ``2 C2 TV <= C1`` (then the bound is >= the triangle bound
    ``C1 + C2 TV`` and >= 1.5 C1: it can never certify a budget below 1.5 C1). Under the printed
    condition alone it is false (a two-point Bayesian model with C1 = 0.0379, C2 = 1.5,
    TV = 0.025 has eps_p = 0.0443 > 2 C1 - C2 TV = 0.0384).
    """
    c1 = check_leakage("c1", c1)
    c2 = _c2(c2)
    tv = check_probability("tv", tv)
    shift = c2 * tv if tv > 0 else 0.0
    hypothesis, proven = shift <= c1, 2.0 * shift <= c1
    if proven:
        note = "2 C2 TV <= C1: valid, but looser than the triangle bound C1 + C2 TV"
    elif hypothesis:
        note = "C2 TV <= C1 holds but 2 C2 TV <= C1 fails: NOT guaranteed (counterexamples)"
    else:
        note = "outside the lemma: C2 TV > C1"
    return Bound("Lemma 6.5", "paper", "eps_p", "upper", 2.0 * c1 - shift, hypothesis, proven,
                 note)


def _c2(c2: float) -> float:
    if isinstance(c2, (int, float)) and not isinstance(c2, bool) and math.isinf(c2) and c2 > 0:
        return math.inf
    return check_nonnegative("c2", c2)


def leakage_triangle_bounds(c1: float, c2: float, tv: float, xi: float | None = None
                            ) -> tuple[Bound, Bound]:
    """The corrected forms of Lemmas 6.5 and B.1: ``C1 - s <= eps_p <= C1 + s`` with ``s`` a
    bound on ``sqrt(JS(F~ || F))``: ``C2 TV`` (their Lemma B.3) or, given ``xi``, privfl's
    tighter ``C2 e^{-xi/2} TV``. Both follow from the triangle inequality of sqrt(JS).
    """
    c1 = check_leakage("c1", c1)
    c2 = _c2(c2)
    tv = check_probability("tv", tv)
    shift = c2 * tv if tv > 0 else 0.0
    source = "Lemma B.3: sqrt(JS(F~||F)) <= C2 TV"
    if xi is not None and math.isfinite(_xi(xi)) and shift:
        # C2 e^{-xi/2} = (e^{3 xi / 2} - e^{-xi / 2}) / 2, without inf * 0
        factor = 0.5 * (math.exp(1.5 * xi) - math.exp(-0.5 * xi)) if xi < 470 else math.inf
        shift = factor * tv
        source = "sqrt(JS(F~||F)) <= C2 e^{-xi/2} TV (privfl's sharper Lemma B.3)"
    lower = Bound("Lemma B.1", "corrected", "eps_p", "lower", max(c1 - shift, 0.0), True, True,
                  "triangle inequality of sqrt(JS); " + source)
    upper = Bound("Lemma 6.5", "triangle", "eps_p", "upper", min(c1 + shift, math.sqrt(
        math.log(2.0))), True, True, "triangle inequality of sqrt(JS); " + source)
    return lower, upper


def min_tv_for_budget(c1: float, tau: float, variant: str = "paper",
                      c2: float | None = None) -> Bound:
    """Lemma 6.6: the distortion ``TV`` asked for a leakage budget ``tau``.

    ``paper``: ``TV >= C1 - tau`` "implies eps_p <= tau" (their eq. 15). NOT proven: the proof
    uses ``eps_p <= C1 - TV`` (eq. 32), which no lemma gives and which fails on almost every
    random instance (``proven`` is False; ``side="lower"`` on TV is the paper's requirement).
    ``necessary`` (privfl, needs ``c2``): ``eps_p <= tau`` REQUIRES ``TV >= (C1 - tau) / C2``
    (from ``eps_p >= C1 - C2 TV``): a proven necessary condition, not a sufficient one.
    ``lemma65`` (needs ``c2``): ``TV >= (2 C1 - tau) / C2`` from Lemma 6.5; only meaningful
    together with ``2 C2 TV <= C1``, i.e. for ``tau >= 1.5 C1``.
    """
    c1 = check_leakage("c1", c1)
    tau = check_leakage("tau", tau)
    if variant == "paper":
        return Bound("Lemma 6.6", "paper", "TV", "lower", c1 - tau, True, False,
                     "sufficiency rests on the unproven eq. (32); NOT a guarantee")
    if variant not in ("necessary", "lemma65"):
        raise ValueError(f"variant = {variant!r} is not allowed: must be one of paper, "
                         "necessary, lemma65")
    if c2 is None:
        raise ValueError(f"c2 is missing: variant = {variant!r} needs C2")
    c2 = _c2(c2)
    if variant == "necessary":
        need = (c1 - tau) / c2 if c2 > 0 else (math.inf if c1 > tau else -math.inf)
        return Bound("Lemma 6.6", "necessary", "TV", "lower", need, True, True,
                     "necessary for eps_p <= tau (eps_p >= C1 - C2 TV), not sufficient")
    need = (2 * c1 - tau) / c2 if c2 > 0 else math.inf
    ok = tau >= 1.5 * c1
    return Bound("Lemma 6.6", "lemma65", "TV", "lower", need, True, ok,
                 "sufficient with Lemma 6.5 only if 2 C2 TV <= C1 as well (tau >= 1.5 C1)")


def gaussian_tv_sandwich(variance: float, noise_variance: float, dimension: int
                         ) -> tuple[Bound, Bound]:
    """Lemma 6.7: with ``x = sigma_eps^2 sqrt(d) / sigma^2``,
    ``min{1, x} / 100 <= TV(N(mu, sigma^2 I), N(mu, (sigma^2 + sigma_eps^2) I)) <= 1.5 min{1, x}``
    (Devroye, Mehrabian and Reddad 2018, Theorem 1.1, all eigenvalues equal). Proven for
    isotropic Gaussians with equal means; the paper applies it to the law of trained parameters,
    which is a modelling assumption.
    """
    s = check_positive("variance", variance)
    e = check_nonnegative("noise_variance", noise_variance)
    x = min(1.0, e * math.sqrt(check_int("dimension", dimension, 1)) / s)
    lo, hi = x / 100.0, 1.5 * x
    note = "Devroye et al. 2018 Theorem 1.1; isotropic Gaussians with equal means"
    return (Bound("Lemma 6.7", "paper", "TV", "lower", lo, True, True, note),
            Bound("Lemma 6.7", "paper", "TV", "upper", hi, True, True, note))


def smaller_root(r: float) -> float:
    """The smaller root of ``p (1 - p) = r`` for ``0 <= r <= 1/4``: ``2 r / (1 + sqrt(1 - 4 r))``
    (the same as ``(1 - sqrt(1 - 4 r)) / 2`` without its cancellation for small ``r``)."""
    r = check_range("r", r, 0.0, 0.25)
    return 2.0 * r / (1.0 + math.sqrt(1.0 - 4.0 * r))


# ------------------------------------------------------------------------------- trade-off
def tradeoff_upper_bound(c1: float, c2: float, c6: float, expected_variance: float,
                         tv: float | None = None) -> Bound:
    """Theorem 6.12: ``eps_p + (C2/C6) eps_u <= 2 C1 - (C2/C6) E(Var[W~ | W_{t-1}])``.

    Stated under Assumptions 6.1 and 6.2 only (``hypothesis`` is True), but it combines
    Theorem 6.1 with Lemma 6.5, so it is proven only where Lemma 6.5 is (``2 C2 TV <= C1``;
    unknown without ``tv``) and only for the Appendix L proxy of ``eps_u``.
    """
    c1 = check_leakage("c1", c1)
    c2 = _c2(c2)
    c6 = check_positive("c6", c6)
    var = check_nonnegative("expected_variance", expected_variance)
    weight = c2 / c6
    if not math.isfinite(weight):
        raise ValueError(f"c2 = {c2!r} is out of range for Theorem 6.12: C2 / C6 = {weight!r} "
                         "makes the bound vacuous; must give a finite C2 / C6")
    value = 2.0 * c1 - weight * var if var else 2.0 * c1
    if tv is None:
        return Bound("Theorem 6.12", "paper", "eps_p + (C2/C6) eps_u", "upper", value, True,
                     False, "proven only where 2 C2 TV <= C1 (TV not given)")
    lemma = privacy_leakage_upper_bound(c1, c2, tv)
    return Bound("Theorem 6.12", "paper", "eps_p + (C2/C6) eps_u", "upper", value, True,
                 lemma.proven, "inherits Lemma 6.5: " + lemma.note)


def nfl_lower_bound(c1: float) -> Bound:
    """Theorem 6.13 (Zhang et al. 2022a, "No free lunch", as restated by the paper):
    ``eps_p + C_d eps_u >= C1`` with ``C_d`` from :func:`c_d`. Its proof (in the cited paper)
    was not checked by privfl, and ``C_d`` needs the unobservable gamma and Delta."""
    c1 = check_leakage("c1", c1)
    return Bound("Theorem 6.13", "paper", "eps_p + C_d eps_u", "lower", c1, True, False,
                 "restated from Zhang et al. 2022a; proof not checked; gamma, Delta are inputs")


def nfl_holds(eps_p: float, eps_u: float, c1: float, cd: float) -> bool:
    """Whether ``eps_p + C_d eps_u >= C1`` (Theorem 6.13) for measured ``eps_p``, ``eps_u``."""
    return (check_leakage("eps_p", eps_p) + check_nonnegative("cd", cd)
            * check_range("eps_u", eps_u) >= check_leakage("c1", c1))


@dataclass(frozen=True)
class OptimalTradeoff:
    """Theorem 6.14's optimum: the variance and sampling probability it asks for."""

    expected_variance: float
    sampling_probability: float | None
    cd_matches: bool | None
    note: str


def optimal_tradeoff(c1: float, c2: float, c6: float, gradient_sq_sum: float | None = None,
                     *, gamma: float | None = None, delta: float | None = None
                     ) -> OptimalTradeoff:
    """Theorem 6.14: if ``C_d = C2/C6`` (i.e. ``C6 = 2 Delta / gamma``) and
    ``C1 = (C2/C6) E(Var)``, the upper bound of Theorem 6.12 meets the lower bound of 6.13.

    Returns the variance ``E(Var) = C1 C6 / C2``, the smallest ``p`` with
    ``p (1 - p) G = E(Var)`` (Theorem 6.10; None without ``G`` or if no p reaches it) and, given
    gamma and Delta, whether ``C_d = C2/C6`` holds (to 1e-9 relative).
    """
    c1 = check_leakage("c1", c1)
    c2 = check_positive("c2", c2)
    c6 = check_positive("c6", c6)
    variance = c1 * c6 / c2
    p = None
    note = "E(Var) = C1 C6 / C2"
    if gradient_sq_sum is not None:
        g = check_positive("gradient_sq_sum", gradient_sq_sum)
        r = variance / g
        if r <= 0.25:
            p = smaller_root(r)
            note += "; p solves p(1 - p) G = E(Var) (Theorem 6.10, one sampling round)"
        else:
            note += f"; no p reaches it: p(1 - p) G <= G/4 = {g / 4:.6g}"
    matches = None
    if gamma is not None or delta is not None:
        if gamma is None or delta is None:
            raise ValueError("gamma and delta go together: give both or neither")
        cd = check_positive("gamma", gamma) / (2.0 * check_positive("delta", delta))
        matches = math.isclose(cd, 1.0 / c6, rel_tol=1e-9)  # C_d / C2 = gamma / (2 Delta)
    return OptimalTradeoff(variance, p, matches, note)
