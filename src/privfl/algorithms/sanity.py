"""Warnings about settings that cannot learn or are risky, shown by ``privfl run`` and
``--dry-run`` before anything trains (they never change a run).

* **Too few contributions for the noise.** A DP aggregate is (sum of ``m`` clipped
  contributions + Gaussian noise of std ``z C``) / ``m``: per coordinate the noise std is
  ``z C / m`` while a clipped contribution has norm at most ``C``. With ``m < 4 z`` the noise on
  the average is at least a quarter of the clip norm in *every* coordinate, which drowns the
  signal of any model with more than a handful of parameters (McMahan et al. 2018 train with
  hundreds to thousands of clients per round for this reason). ``m`` is what the plan averages:
  the expected cohort of a client-level plan (``expected_cohort``), the expected records of one
  noisy sum (``expected_records``) or the local batch of a record-level one (``spec``).
* **delta >= 1/n.** A mechanism that publishes one random individual's data outright satisfies
  (0, 1/n)-DP over n individuals (records, or clients for a client-level unit), so a delta of
  1/n or more permits exactly that; privfl warns unless delta < 0.1 / n (the usual choice is
  delta well below 1/n, Dwork and Roth 2014, Section 2.3), e.g. delta = 1e-3 with 100 clients.
* **Groups that never train.** DP-FTRL and BandMF cycle through ``min_separation`` client groups,
  one per round: with fewer rounds than groups, the later groups never take part.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DELTA_FRACTION", "MIN_AVERAGED_PER_NOISE", "averaged_and_noise",
           "setting_warnings"]

#: the smallest m / z (contributions averaged per unit of noise multiplier) that can learn
MIN_AVERAGED_PER_NOISE = 4.0
#: delta must be below DELTA_FRACTION / n not to be risky
DELTA_FRACTION = 0.1


#: plan attributes that count the contributions of one noisy aggregate, and what they count
_AVERAGED = (("expected_cohort", "expected clients per round"),
             ("expected_records", "expected records per noisy sum"),
             ("cohort_size", "clients per round"))


def averaged_and_noise(plan: Any) -> tuple[float, float, str] | None:
    """``(m, z, what m counts)`` of one noisy aggregate of ``plan``, or None when the plan does
    not say (a plan without one of the attributes the module docstring names)."""
    spec = getattr(plan, "spec", None)
    z = getattr(plan, "noise_multiplier", None)
    if z is None and spec is not None:
        z = getattr(spec, "noise_multiplier", None)
    found = [(value, what) for name, what in _AVERAGED
             if isinstance(value := getattr(plan, name, None), (int, float))]
    m, what = found[0] if found else (getattr(spec, "batch_size", None),
                                      "records per local batch")
    if not isinstance(m, (int, float)) or not isinstance(z, (int, float)) or z <= 0:
        return None
    return float(m), float(z), what


def setting_warnings(plan: Any, *, clients: int, records: int) -> list[str]:
    """The warnings for ``plan`` on data with ``clients`` clients holding ``records`` training
    records (empty for a non-private plan)."""
    if not getattr(plan, "private", False):
        return []
    warnings = []
    found = averaged_and_noise(plan)
    if found is not None:
        m, z, what = found
        if m < MIN_AVERAGED_PER_NOISE * z:
            warnings.append(
                f"this setting cannot learn: {what} m = {m:g} for noise multiplier z = {z:g}: "
                f"the noise on the average (std z C / m = {z / m:.2g} C per coordinate) "
                f"drowns the clipped contributions; need m >= {MIN_AVERAGED_PER_NOISE:g} z = "
                f"{MIN_AVERAGED_PER_NOISE * z:g} (more clients per round, larger batches or "
                "less noise)")
    groups = getattr(getattr(plan, "schedule", None), "groups", None)
    rounds = getattr(plan, "rounds", None)
    if isinstance(groups, int) and isinstance(rounds, int) and 0 < rounds < groups:
        warnings.append(
            f"only {rounds} of the {groups} client groups take part: federated.rounds = "
            f"{rounds} is below federated.min_separation = {groups} (one group per round, in "
            f"turn), so about {clients * (groups - rounds) // groups} of the {clients} clients "
            "never train; raise federated.rounds to at least min_separation or lower "
            "min_separation")
    unit = getattr(plan, "unit", "record")
    n = clients if unit == "client" else records
    delta = getattr(plan, "delta", None)
    if isinstance(delta, float) and n > 0 and delta >= DELTA_FRACTION / n:
        warnings.append(
            f"risky delta: privacy.delta = {delta:g} is not well below 1/n = {1.0 / n:.3g} "
            f"(n = {n} {unit}s; delta >= 1/n lets a mechanism publish one random {unit}'s "
            f"data outright): choose delta < {DELTA_FRACTION:g}/n, e.g. {_below(n):g}")
    return warnings


def _below(n: int) -> float:
    """The largest power of ten below DELTA_FRACTION / n."""
    exponent = 1
    while 10.0 ** -exponent >= DELTA_FRACTION / n:
        exponent += 1
    return 10.0 ** -exponent
