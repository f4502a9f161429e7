"""Efficiency, the third axis of Zhang, Chen and Yang 2022's trade-off: what a protection costs
in communication and computation for one client and one round.

:func:`efficiency` gives, for one mechanism, the expected bytes of a client's upload (dense
values; a random mask's upload as the kept values plus a bitmap of the kept positions, when that
is smaller), the expected per-record gradients of the local step (record sampling at rate ``p``
computes ``p n`` of them, the other mechanisms ``p0 n``) and the random numbers the mechanism
draws. Measured seconds are added by the caller (:mod:`privfl.runs.tradeoff_run`).
"""

from __future__ import annotations

import math
from typing import Any

from privfl._validation import check_int, check_range
from privfl.distortion.mechanisms import GaussianDistortion, PoissonRecordSampling, RandomMask

__all__ = ["efficiency"]


def efficiency(mechanism: Any, dimension: int, records: int, base_rate: float,
               bytes_per_value: int = 4) -> dict[str, float]:
    """``{"upload_bytes", "dense_upload_bytes", "gradients", "random_numbers"}`` (expected
    values per client and round) of ``mechanism`` (a :class:`GaussianDistortion`,
    :class:`RandomMask` or :class:`PoissonRecordSampling`) on a ``dimension``-parameter model
    whose client holds ``records`` records and samples them at ``base_rate`` otherwise."""
    d = check_int("dimension", dimension, 1)
    n = check_int("records", records, 1)
    p0 = check_range("base_rate", base_rate, 0.0, 1.0)
    b = check_int("bytes_per_value", bytes_per_value, 1)
    dense = float(d * b)
    upload, gradients, draws = dense, p0 * n, 0.0
    if isinstance(mechanism, GaussianDistortion):
        draws = float(d)
    elif isinstance(mechanism, RandomMask):
        upload = min(dense, mechanism.keep_rate * d * b + math.ceil(d / 8))
        draws = float(d)
    elif isinstance(mechanism, PoissonRecordSampling):
        gradients, draws = mechanism.rate * n, float(n)
    else:
        raise ValueError(f"mechanism = {mechanism!r} is not allowed: must be a "
                         "GaussianDistortion, RandomMask or PoissonRecordSampling")
    return {"upload_bytes": upload, "dense_upload_bytes": dense, "gradients": gradients,
            "random_numbers": draws}
