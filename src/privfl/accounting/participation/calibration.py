"""Random participation: the noise per scheme for a per-iteration (epsilon, delta) target, by
privfl's one noise search (:mod:`privfl.accounting.noise_search`), and its labelled rows
(what the noise means for random participation: bound, estimate or reference)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from privfl._validation import check_choice, check_delta, check_epsilon
from privfl.accounting.events import Neighbouring, Unit
from privfl.accounting.noise_search import (
    RTOL_CLOSED_FORM,
    NoiseOutOfRangeError,
    smallest_noise_search,
)
from privfl.accounting.participation.labels import (
    CALIBRATION_NOTES,
    RELATION,
    RELEASE,
    scheme_sampling,
)
from privfl.accounting.participation.per_iteration import log_delta
from privfl.accounting.participation.setting import (
    SERVERS,
    Setting,
    _setting,
    check_scheme,
    resolve_schemes,
    scheme_kind,
)
from privfl.accounting.results import Kind

_THEOREM41_GRID = np.geomspace(0.005, 100.0, 241)


def _noise_for(scheme: str, eps: float, delta: float, p: float, q: float, d: int) -> float | None:
    """Noise multiplier z = sigma / C for the per-iteration target, or None (never reached),
    by privfl's one noise search (:func:`~privfl.accounting.noise_search.smallest_noise_search`,
    to relative ``RTOL_CLOSED_FORM``); Theorem 4.1, not monotone in z, scans
    :data:`_THEOREM41_GRID`."""
    target = math.log(delta)

    def meets(z: float) -> bool:
        return log_delta(scheme, eps, Setting(p, q, d, z)) <= target

    scan = _THEOREM41_GRID if scheme == "theorem-4.1" else None
    try:
        return smallest_noise_search(meets, rtol=RTOL_CLOSED_FORM, scan=scan)
    except NoiseOutOfRangeError:
        return None


def participation_noise(
    scheme: str,
    epsilon: float,
    delta: float,
    client_rate: float,
    record_rate: float,
    records: int,
    *,
    clip_norm: float = 1.0,
) -> float | None:
    """Smallest noise sigma (std on the sum) whose per-iteration ``scheme`` delta at ``epsilon``
    is <= ``delta`` from there on; ``None`` when the scheme's delta never reaches the target
    (it stays below ``delta`` for every sigma tried, so the formula gives no calibration: the
    paper's Theorem 4.1 in its Section 6.2 setting - the formula would claim the target with
    any noise).

    Bounds (all schemes but Theorem 4.1) are non-increasing in sigma (proven), so the answer
    is bracketed on powers of two of sigma/C in [1e-6, 1e6] and bisected; Theorem 4.1 is not
    monotone, so a log grid of sigma/C in [0.005, 100] is scanned and the last crossing from
    above is bisected (privfl's one noise search, :mod:`privfl.accounting.noise_search`,
    to relative 1e-13; the returned sigma meets the target when re-evaluated).
    """
    scheme = check_scheme(scheme)
    eps = check_epsilon("epsilon", epsilon)
    delta = check_delta("delta", delta)
    s = _setting(client_rate, record_rate, records, 1.0, clip_norm)
    z = _noise_for(scheme, eps, delta, s.p, s.q, s.d)
    return None if z is None else z * float(clip_norm)


@dataclass(frozen=True)
class NoiseCalibration:
    """One scheme's noise for a per-iteration ``(epsilon, delta)`` target, labelled.

    ``noise`` is sigma (std on the sum, units of the clip norm's scale) or ``None`` when the
    scheme's delta never reaches the target ("unreachable"). ``kind`` says what the noise means
    for random participation: ``"bound"`` (provably meets the target), ``"estimate"`` (solved on
    a formula that can be below the truth: may not meet it) or ``"reference"`` (solved on a
    lower reference: random participation needs at least this noise).
    """

    method: str
    noise: float | None
    kind: Kind
    epsilon: float
    delta: float
    unit: str
    neighbouring: str
    sampling: str
    release: str
    random_participation: str
    note: str

    @property
    def reachable(self) -> bool:
        return self.noise is not None

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "kind": self.kind,
            "noise": self.noise,
            "reachable": self.reachable,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "steps": 1,
            "unit": self.unit,
            "neighbouring": self.neighbouring,
            "sampling": self.sampling,
            "release": self.release,
            "random_participation": self.random_participation,
            "note": self.note,
        }


def calibrate_participation_report(
    client_rate: float,
    record_rate: float,
    records: int,
    epsilon: float,
    delta: float,
    *,
    clip_norm: float = 1.0,
    schemes: str | Iterable[str] = "all",
    server: str = "trusted",
) -> list[NoiseCalibration]:
    """:func:`calibrate_participation` with every row labelled (kind, unit, neighbouring
    relation, sampling, release, and what the noise means for random participation)."""
    noise = calibrate_participation(
        client_rate, record_rate, records, epsilon, delta, clip_norm=clip_norm, schemes=schemes,
        server=server,
    )
    p, q = float(client_rate), float(record_rate)
    return [
        NoiseCalibration(
            method=scheme,
            noise=value,
            kind=scheme_kind(scheme),
            epsilon=float(epsilon),
            delta=float(delta),
            unit=Unit.RECORD.value,
            neighbouring=Neighbouring.ADD_REMOVE.value,
            sampling=scheme_sampling(scheme, p, q),
            release=RELEASE[server],
            random_participation=RELATION[scheme],
            note=CALIBRATION_NOTES[scheme]
            + ("" if value is not None else "; unreachable: the scheme's delta never reaches "
               "the target, so it gives no calibration"),
        )
        for scheme, value in noise.items()
    ]


def calibrate_participation(
    client_rate: float,
    record_rate: float,
    records: int,
    epsilon: float,
    delta: float,
    *,
    clip_norm: float = 1.0,
    schemes: str | Iterable[str] = "all",
    server: str = "trusted",
) -> dict[str, float | None]:
    """Noise sigma (std on the sum, units of ``clip_norm``) per scheme for a per-iteration
    ``(epsilon, delta)`` target, or ``None`` where the scheme's delta never reaches the target
    (print "unreachable"; see :func:`participation_noise`)."""
    server = check_choice("server", server, SERVERS)
    s = _setting(client_rate, record_rate, records, 1.0, clip_norm)
    eps = check_epsilon("epsilon", epsilon)
    dlt = check_delta("delta", delta)
    names = resolve_schemes(schemes, server, "schemes")
    out: dict[str, float | None] = {}
    for scheme in names:
        z = _noise_for(scheme, eps, dlt, s.p, s.q, s.d)
        out[scheme] = None if z is None else z * float(clip_norm)
    return out
