"""The one noise search of privfl: the smallest noise meeting a target, on the safe side.

Every calibration that solves for a noise runs :func:`smallest_noise_search`:
:func:`privfl.accounting.calibrate.solve.calibrate_noise` and
:func:`privfl.accounting.calibrate.event.calibrate_event_noise` (any accountant, any event),
random participation's noise per scheme (Hasircioglu and Gunduz 2022,
:func:`privfl.accounting.participation.participation_noise`), the CLT noise of Zheng et al.
2021 (:func:`privfl.accounting.fdp.federated.noise_multiplier_for_mu`) and BandMF's amplified
noise (Choquette-Choo et al. 2023,
:func:`privfl.accounting.correlated.accountant.calibrate_bandmf_noise`). The caller passes only its
target, ``meets(z) -> bool`` ("the guarantee at noise z meets the target").
(A noise with a closed-form inverse, the exact Gaussian mechanism of
:func:`~privfl.accounting.correlated.accountant.calibrate_noise_multiplier`, needs no search.)

The search
----------
1. **Bracket** on the powers of two from ``z = 1``: halve while the target is met, double while
   it is not, within ``[NOISE_MIN, NOISE_MAX]``. A target that is not monotone in z (Theorem 4.1
   of Hasircioglu and Gunduz 2022) passes a ``scan`` grid instead: every grid point is
   evaluated, and the bracket is the *last* failing point and the next one (doubling on from
   the grid's end when the last point fails), so the answer is met at every scanned noise above
   it.
2. **Bisection in log z** (:func:`log_bisect`): the geometric mean of the ends replaces the end
   of its side until ``good / bad <= 1 + rtol``. The answer is the ``good`` end, a noise that
   was evaluated and met the target: re-evaluating it meets the target again (the safe side;
   never the bracket end below).

Limits and tolerances (the same for every calibration)
------------------------------------------------------
* :data:`NOISE_MIN` = 1e-6 and :data:`NOISE_MAX` = 1e6: a target met at every power of two down
  to ``NOISE_MIN`` (or everywhere on a scan), or not met at any up to ``NOISE_MAX``, raises
  :class:`NoiseOutOfRangeError` (``side`` says which); each caller turns it into its own answer (an
  error naming the target, or "unreachable").
* :data:`RTOL` = 1e-4, the default relative precision: an accountant's evaluation can cost
  seconds (a PLD over thousands of steps) and four digits of a noise multiplier change the
  guarantee far less than the accountant's own discretisation. :data:`RTOL_CLOSED_FORM` =
  1e-13 for targets with a closed form that costs microseconds (random participation's
  per-iteration deltas, the CLT mu): configs generated from them reproduce to 12 digits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = [
    "NOISE_MAX",
    "NOISE_MIN",
    "RTOL",
    "RTOL_CLOSED_FORM",
    "NoiseOutOfRangeError",
    "log_bisect",
    "smallest_noise_search",
]

#: Smallest noise any calibration tries: a target met even there is "out of range".
NOISE_MIN = 1e-6
#: Largest noise any calibration tries: a target not met there is "out of range".
NOISE_MAX = 1e6
#: Default relative precision of a calibrated noise (targets evaluated by an accountant).
RTOL = 1e-4
#: Relative precision for targets with a cheap closed form.
RTOL_CLOSED_FORM = 1e-13


class NoiseOutOfRangeError(ValueError):
    """The target is met at every noise tried (``side = "below"``: even at ``NOISE_MIN``, or at
    every point of a scan) or at none (``side = "above"``: not even at ``NOISE_MAX``)."""

    def __init__(self, side: str, message: str) -> None:
        super().__init__(message)
        self.side = side


def log_bisect(
    meets: Callable[[float], bool],
    bad: float,
    good: float,
    rtol: float,
    *,
    halt: Callable[[], bool] | None = None,
) -> float:
    """Shrink ``[bad, good]`` (either order, both > 0) in log space until their ratio is within
    ``1 + rtol``; ``meets(good)`` is True and ``meets(bad)`` False. Returns the final ``good``
    end. ``halt()`` True stops early at ``good`` (an accountant that failed to evaluate a point:
    the points left lie next to its limit, where every evaluation is at its most expensive)."""
    while (halt is None or not halt()) and abs(math.log(good / bad)) > math.log1p(rtol):
        middle = math.sqrt(good * bad)
        if meets(middle):
            good = middle
        else:
            bad = middle
    return good


def smallest_noise_search(
    meets: Callable[[float], bool],
    *,
    rtol: float = RTOL,
    scan: Sequence[float] | None = None,
    halt: Callable[[], bool] | None = None,
) -> float:
    """The smallest noise z in ``[NOISE_MIN, NOISE_MAX]`` (within relative ``rtol``) with
    ``meets(z)``, for a target monotone in z; with ``scan`` (increasing grid of noises), the
    smallest z at which the target holds at every scanned noise above z (see the module
    docstring). The returned z met the target when evaluated. Raises :class:`NoiseOutOfRangeError`
    when no such z is in range. ``rtol`` and the grid are the caller's (not validated here)."""
    if scan is not None:
        bad, good = _scan_bracket(meets, scan)
    elif meets(1.0):
        good, bad = 1.0, 0.5
        while meets(bad):
            good, bad = bad, bad / 2.0
            if bad < NOISE_MIN:
                raise NoiseOutOfRangeError(
                    "below", f"met even with noise {NOISE_MIN:g}; calibrating below that is not "
                    "meaningful")
    else:
        bad, good = _double_until_met(meets, 1.0)
    return log_bisect(meets, bad, good, rtol, halt=halt)


def _double_until_met(meets: Callable[[float], bool], bad: float) -> tuple[float, float]:
    """``(bad, good)``: double from ``bad`` (which fails) until the target is met, within
    :data:`NOISE_MAX`."""
    good = 2.0 * bad
    while not meets(good):
        bad, good = good, good * 2.0
        if good > NOISE_MAX:
            raise NoiseOutOfRangeError("above", f"not reached with noise up to {NOISE_MAX:g}")
    return bad, good


def _scan_bracket(meets: Callable[[float], bool], scan: Sequence[float]) -> tuple[float, float]:
    """``(bad, good)`` around the last failing point of ``scan`` (doubling past its end)."""
    failing = [i for i, z in enumerate(scan) if not meets(float(z))]
    if not failing:
        raise NoiseOutOfRangeError(
            "below", f"met at every noise scanned ({float(scan[0]):g} to {float(scan[-1]):g})")
    last = failing[-1]
    if last < len(scan) - 1:
        return float(scan[last]), float(scan[last + 1])
    return _double_until_met(meets, float(scan[-1]))
