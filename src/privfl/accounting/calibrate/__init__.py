"""Calibration: the smallest noise, the most steps or the largest sampling rate within an
(epsilon, delta) budget, on the safe side, with any accountant that supports the event.

* :mod:`~privfl.accounting.calibrate.solve` - DP-SGD templates: :func:`calibrate_noise`,
  :func:`max_steps`, :func:`max_sampling_rate`, and the :class:`Calibration` they return;
* :mod:`~privfl.accounting.calibrate.event` - the noise of any event tree
  (:func:`calibrate_event_noise`).

The one noise search they share is :mod:`privfl.accounting.noise_search`.
"""

from privfl.accounting.calibrate.event import calibrate_event_noise
from privfl.accounting.calibrate.solve import (
    Calibration,
    DpSgdTemplate,
    calibrate_noise,
    max_sampling_rate,
    max_steps,
)

__all__ = [
    "Calibration",
    "DpSgdTemplate",
    "calibrate_event_noise",
    "calibrate_noise",
    "max_sampling_rate",
    "max_steps",
]
