"""Solve for the missing one of (noise multiplier, steps, sampling rate) under an (epsilon, delta)
budget, with any accountant that supports the event.

The default accountant is ``pld`` (pessimistic privacy loss distribution), the tightest sound
method privfl has: RDP is 7-15 % looser in noise for Poisson sampling and 1.7-2x for fixed-size
batches, which is noise (or steps, or sampling rate) given away for nothing.

Every solution is on the safe side of the target: the returned noise is the smallest found whose
epsilon is <= the target (never the bracket end below it; privfl's one noise search,
:mod:`privfl.accounting.noise_search`), the returned steps and rate are the
largest whose epsilon is <= the target. The epsilon actually certified at the solution is
returned alongside, so nothing the user asked for is silently changed.

What an answer is, is said, never left implicit (:class:`Calibration`):

* ``kind`` is the kind of the accountant's answer at the solution: ``"bound"`` for rdp / pld (the
  solution provably meets the target), ``"estimate"`` when solved on an approximation
  (``method="gdp"`` / ``"gdp-clt"`` on a subsampled event): it may not meet the target, and
  ``warning`` says so;
* ``capped`` is True when the value is where the search stopped rather than a solution: the steps
  search reached its ``limit`` (more steps may fit), or the accountant could not evaluate beyond
  the returned value (e.g. the PLD's memory budget at very many steps or very little noise);
  ``warning`` says which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from privfl._validation import check_delta, check_epsilon, check_int, check_positive, check_rate
from privfl.accounting.events import Neighbouring, Noise, Sampling, Unit, dpsgd_event
from privfl.accounting.methods import AccountingOptions, build_accountant, resolve_methods
from privfl.accounting.noise_search import (
    NOISE_MAX,
    NOISE_MIN,
    NoiseOutOfRangeError,
    log_bisect,
    smallest_noise_search,
)
from privfl.accounting.results import PrivacyResult

#: The default accountant of every calibration: the tightest sound one.
DEFAULT_METHOD = "pld"


@dataclass(frozen=True)
class Calibration:
    """The solved parameter, its value, and the accountant's answer at that value.

    ``capped``: the value is a search limit, not a solution (``warning`` explains).
    ``warning``: empty, or a sentence every consumer should show (a cap, or an answer solved on
    an estimate).
    """

    parameter: str
    value: float
    target_epsilon: float
    result: PrivacyResult
    capped: bool = False
    warning: str = ""

    @property
    def kind(self) -> str:
        """The kind of the answer: the accountant's kind at the solution."""
        return self.result.kind

    def to_dict(self) -> dict:
        data = {
            "parameter": self.parameter,
            "value": self.value,
            "target_epsilon": self.target_epsilon,
            "kind": self.kind,
            "method": self.result.method,
            "capped": self.capped,
            "result": self.result.to_dict(),
        }
        if self.warning:
            data["warning"] = self.warning
        return data


@dataclass(frozen=True)
class DpSgdTemplate:
    """Everything about a DP-SGD run except the parameter being solved for."""

    delta: float
    method: str = DEFAULT_METHOD
    sampling: Sampling = Sampling.POISSON
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    unit: Unit = Unit.RECORD
    noise: Noise = Noise.GAUSSIAN
    options: AccountingOptions = AccountingOptions()

    def __post_init__(self) -> None:
        (method,) = resolve_methods(self.method)
        object.__setattr__(self, "method", method)

    def epsilon(self, noise_multiplier: float, sampling_rate: float, steps: int) -> PrivacyResult:
        event = dpsgd_event(
            noise_multiplier,
            sampling_rate,
            steps,
            sampling=self.sampling,
            neighbouring=self.neighbouring,
            unit=self.unit,
            noise=self.noise,
        )
        return build_accountant(self.method, self.options).epsilon(event, self.delta)


class Probe:
    """``ok(x)``: does the accountant certify the target at x?

    The first evaluation's errors propagate (the accountant cannot answer this calibration at
    all). Later a ValueError, ArithmeticError or MemoryError (the accountant cannot evaluate this
    x: a memory budget, an overflow at extreme noise) counts as "not certified" - the safe
    answer - and is remembered for the warning.
    """

    def __init__(self, evaluate: Callable[[float], PrivacyResult], epsilon: float) -> None:
        self.evaluate = evaluate
        self.epsilon = epsilon
        self.failure: tuple[float, str] | None = None
        self.results: dict[float, PrivacyResult] = {}

    def __call__(self, x: float) -> bool:
        if not self.results and self.failure is None:
            result = self.evaluate(x)
        else:
            try:
                result = self.evaluate(x)
            except (ValueError, ArithmeticError, MemoryError) as error:
                if self.failure is None:
                    self.failure = (x, str(error))
                return False
        self.results[x] = result
        return result.epsilon <= self.epsilon

    def result(self, x: float) -> PrivacyResult:
        """The accountant's answer at x (evaluated once)."""
        if x not in self.results:
            self.results[x] = self.evaluate(x)
        return self.results[x]


def _finish(
    parameter: str,
    value: float,
    epsilon: float,
    method: str,
    probe: Probe,
    *,
    capped: bool = False,
    cap_warning: str = "",
) -> Calibration:
    """The labelled calibration: a cap, an accountant that gave up, or an estimate is said."""
    result = probe.result(value)
    warnings = [cap_warning] if capped and cap_warning else []
    if probe.failure is not None:
        where, reason = probe.failure
        capped = True
        better = {"noise_multiplier": "less noise", "steps": "more steps"}.get(
            parameter, "a larger rate"
        )
        warnings.append(
            f"search stopped at {parameter} = {_show(value)}, the best value the "
            f"{method} accountant certified: it could not evaluate {parameter} = "
            f"{_show(where)} [{reason.rstrip('.')}], so {better} may still meet the target"
        )
    if result.kind != "bound":
        warnings.append(
            f"solved on the {result.method} {result.kind}, not a bound: the solution may not "
            "meet the target; use method 'pld' or 'rdp' for a guarantee"
        )
    return Calibration(parameter, value, epsilon, result, capped, "; ".join(warnings))


def _show(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:.6g}"


def calibrate_noise(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    steps: int,
    *,
    rtol: float = 1e-4,
    **template: object,
) -> Calibration:
    """Smallest noise multiplier z (within relative ``rtol``) with epsilon(z) <= ``epsilon``.

    ``template``: the :class:`DpSgdTemplate` fields (``method`` defaults to ``"pld"``).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon == 0:
        raise ValueError("epsilon = 0.0 is out of range: no finite noise reaches epsilon 0")
    setting = DpSgdTemplate(delta=check_delta("delta", delta), **template)
    sampling_rate = check_rate("sampling_rate", sampling_rate)
    steps = check_int("steps", steps, minimum=1)
    rtol = check_positive("rtol", rtol)
    ok = Probe(lambda z: setting.epsilon(z, sampling_rate, steps), epsilon)
    return smallest_noise(ok, epsilon, setting.method, rtol)


def smallest_noise(ok: Probe, epsilon: float, method: str, rtol: float) -> Calibration:
    """The smallest noise (within relative ``rtol``) that ``ok`` certifies, found by privfl's one
    noise search (:func:`privfl.accounting.noise_search.smallest_noise_search`: bracket from
    1 by halving or doubling within [1e-6, 1e6], then bisection in log space; no bisection next
    to a limit where the accountant failed). :func:`calibrate_noise` and
    :func:`privfl.accounting.calibrate.event.calibrate_event_noise` (over any event) run it."""
    try:
        z = smallest_noise_search(ok, rtol=rtol, halt=lambda: ok.failure is not None)
    except NoiseOutOfRangeError as error:
        if error.side == "below":
            raise ValueError(
                f"epsilon = {epsilon!r} is out of range: met even with noise multiplier "
                f"{NOISE_MIN:g}; calibrating below that is not meaningful"
            ) from None
        raise ValueError(
            f"epsilon = {epsilon!r} is out of range: not reached with noise multipliers "
            f"up to {NOISE_MAX:g}"
            + (
                f" (the {method} accountant could not evaluate some of them: {ok.failure[1]})"
                if ok.failure
                else ""
            )
        ) from None
    return _finish("noise_multiplier", z, epsilon, method, ok)


def _rdp_steps(
    epsilon: float, delta: float, sampling_rate: float, noise_multiplier: float, limit: int,
    template: dict,
) -> Calibration | None:
    """The RDP answer of :func:`max_steps` (a certified lower bracket for any tighter bound), or
    None where RDP does not support the event."""
    try:
        return max_steps(
            epsilon, delta, sampling_rate, noise_multiplier, limit=limit,
            **{**template, "method": "rdp"},
        )
    except (ValueError, ArithmeticError):
        return None


def max_steps(
    epsilon: float,
    delta: float,
    sampling_rate: float,
    noise_multiplier: float,
    *,
    limit: int = 10**9,
    rtol: float = 1e-3,
    **template: object,
) -> Calibration:
    """Largest number of steps T <= ``limit`` with epsilon(T) <= ``epsilon`` (0 if none fits),
    found to within a factor ``1 + rtol`` (or one step) below the largest.

    An answer equal to ``limit`` is the search cap, not a solution: it comes back with
    ``capped = True`` and a ``warning``. Where the accountant cannot evaluate more steps (the PLD's
    memory budget), the search stops at the largest T it certified, also ``capped``. For a
    method other than RDP the search starts from RDP's answer, which the tighter method also
    certifies (RDP is cheap at any T; each PLD evaluation costs about a second at T = 1e6).
    """
    epsilon = check_epsilon("epsilon", epsilon)
    setting = DpSgdTemplate(delta=check_delta("delta", delta), **template)
    sampling_rate = check_rate("sampling_rate", sampling_rate)
    noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
    limit = check_int("limit", limit, minimum=1)
    rtol = check_positive("rtol", rtol)
    ok = Probe(lambda t: setting.epsilon(noise_multiplier, sampling_rate, t), epsilon)

    good, bad = 0, 1
    rdp = None if setting.method == "rdp" else _rdp_steps(
        epsilon, delta, sampling_rate, noise_multiplier, limit, dict(template)
    )
    if rdp is not None and rdp.value >= 1:
        try:
            starts = ok(rdp.value)
        except (ValueError, ArithmeticError, MemoryError) as error:
            note = (
                f"the {setting.method} accountant could not evaluate T = {rdp.value:,} "
                f"({str(error).rstrip('.')}); this is the rdp answer"
            )
            return Calibration(
                rdp.parameter, rdp.value, rdp.target_epsilon, rdp.result, rdp.capped,
                "; ".join(w for w in (rdp.warning, note) if w),
            )
        if starts:
            good, bad = rdp.value, max(rdp.value + 1, int(rdp.value * 1.25))
    while bad <= limit and ok(bad):
        good, bad = bad, max(bad + 1, bad * 2)
    if ok.failure is None and bad > limit > good and ok(limit):
        good = limit  # the cap itself is certified: say so rather than stop just below it
    if ok.failure is None and good < limit:  # else: stop at good
        bad = min(bad, limit + 1)
        while bad - good > max(1, rtol * good):
            middle = (good + bad) // 2
            good, bad = (middle, bad) if ok(middle) else (good, middle)
            if ok.failure is not None:  # more evaluations near the accountant's limit: stop
                break
    return _finish(
        "steps",
        good,
        epsilon,
        setting.method,
        ok,
        capped=good == limit,
        cap_warning=(
            f"T = {limit:,} is the search cap (limit), not a solution: the target allows at "
            "least this many steps"
        ),
    )


def max_sampling_rate(
    epsilon: float,
    delta: float,
    noise_multiplier: float,
    steps: int,
    *,
    rtol: float = 1e-4,
    **template: object,
) -> Calibration:
    """Largest sampling rate q in (0, 1] (to relative ``rtol``) with epsilon(q) <= ``epsilon``.

    ``q = 1`` (every record in every step) is a solution, not a cap: the budget is not binding.
    """
    epsilon = check_epsilon("epsilon", epsilon)
    setting = DpSgdTemplate(delta=check_delta("delta", delta), **template)
    noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
    steps = check_int("steps", steps, minimum=1)
    rtol = check_positive("rtol", rtol)
    ok = Probe(lambda q: setting.epsilon(noise_multiplier, q, steps), epsilon)

    if ok(1.0):
        q = 1.0
    else:
        good = 0.5
        while not ok(good):
            good /= 2.0
            if good < 1e-12:
                raise ValueError(
                    f"epsilon = {epsilon!r} is out of range: not reached with sampling rates "
                    "down to 1e-12"
                )
        q = log_bisect(ok, min(1.0, good * 2.0), good, rtol,
                       halt=lambda: ok.failure is not None)
    return _finish("sampling_rate", q, epsilon, setting.method, ok)
