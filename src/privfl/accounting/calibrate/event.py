"""One calibration over any event: the smallest noise whose guarantee meets a target.

``build(z)`` describes what would run with noise ``z`` (any node of the event tree,
:mod:`privfl.accounting.events`: a DP-SGD event, PriFedSync's weak/strong scopes, a random
participation step, ...); :func:`privfl.accounting.dispatch.evaluate` answers it, and the noise
search is privfl's one (:mod:`privfl.accounting.noise_search`, through
:func:`~privfl.accounting.calibrate.solve.smallest_noise`: bracket by halving or doubling
from 1 within
[1e-6, 1e6], then bisection in log space to relative ``rtol``, always returning a noise whose
answer is <= the target). The answer checked is the worst (largest epsilon) among the
results of ``method`` in ``scopes`` (all scopes when None): e.g. PriFedSync's weak scope alone,
the headline of a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from privfl._validation import check_delta, check_epsilon, check_positive
from privfl.accounting.calibrate.solve import DEFAULT_METHOD, Calibration, Probe, smallest_noise
from privfl.accounting.dispatch import evaluate
from privfl.accounting.methods import AccountingOptions
from privfl.accounting.results import PrivacyResult

__all__ = ["calibrate_event_noise"]


def calibrate_event_noise(
    build: Callable[[float], object],
    epsilon: float,
    delta: float,
    *,
    method: str = DEFAULT_METHOD,
    scopes: Iterable[str] | None = None,
    options: AccountingOptions | None = None,
    rtol: float = 1e-4,
) -> Calibration:
    """Smallest noise z (within relative ``rtol``) with every ``method`` result of
    ``build(z)`` in ``scopes`` at most ``epsilon`` at ``delta``."""
    if not callable(build):
        raise ValueError(f"build = {build!r} is not allowed: must map a noise to an event")
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon == 0:
        raise ValueError("epsilon = 0.0 is out of range: no finite noise reaches epsilon 0")
    delta = check_delta("delta", delta)
    rtol = check_positive("rtol", rtol)
    wanted = None if scopes is None else set(scopes)

    def worst(z: float) -> PrivacyResult:
        results = [r for r in evaluate(build(z), delta, methods=method, options=options)
                   if wanted is None or r.extras.get("scope") in wanted]
        if not results:
            raise ValueError(f"scopes = {sorted(wanted or ())!r} is not allowed: the event "
                             f"gives no {method} result in them")
        return max(results, key=lambda r: r.epsilon)

    return smallest_noise(Probe(worst, epsilon), epsilon, method, rtol)
