"""From an encoder C and a participation bound to labelled privacy numbers, in one call.

The sensitivity of C (:func:`privfl.mechanisms.sensitivity.sensitivity`, exact or a sound
bound) feeds the Gaussian-mechanism accountant of
:mod:`privfl.accounting.correlated.accountant`; the sampling label says which participation bound
the guarantee assumes and whether the sensitivity is exact or a bound (both are bounds on
epsilon: an upper bound on s only makes epsilon larger).

:func:`tree_release` and :func:`banded_release` build the accountant's event
(:class:`~privfl.accounting.events.CorrelatedNoiseRelease`) for DP-FTRL and BandMF; ``privfl
account|calibrate dp-ftrl|bandmf`` and the ``dp-ftrl`` / ``bandmf-fedavg`` training plans call
the same builders and the same dispatcher, so one setting gives one number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from privfl._validation import check_int, check_rate
from privfl.accounting.correlated.accountant import (
    METHODS,
    calibrate_noise_multiplier,
    gaussian_mechanism_results,
)
from privfl.accounting.events import CorrelatedNoiseRelease
from privfl.accounting.results import PrivacyResult
from privfl.mechanisms.sensitivity import Participation, Sensitivity, sensitivity
from privfl.mechanisms.tree import restarted_tree_encoder, tree_sensitivity

#: the largest T for which a tree's sensitivity under k > 1 participations is computed (its
#: T x T Gram matrix)
MAX_TREE_GRAM = 2048
#: how BandMF's sensitivity m sqrt(k) is obtained
BAND_NOTE = (
    "sensitivity m sqrt(k): band <= separation, so a client's columns never share a row "
    "(exact when its columns have norm m)"
)


def participation_label(participation: Participation, found: Sensitivity) -> str:
    """``"<participation>; sensitivity exact|upper bound (<how>)"``."""
    how = "exact" if found.exact else "upper bound"
    return f"{participation.label}; sensitivity {how} ({found.method})"


def factorization_privacy(
    encoder: object,
    participation: Participation,
    noise_multiplier: float,
    delta: float,
    *,
    methods: Sequence[str] = METHODS,
) -> tuple[Sensitivity, list[PrivacyResult]]:
    """The sensitivity of ``encoder`` under ``participation`` and the labelled (epsilon, delta)
    of ``C x + N(0, z^2)`` released over ``participation.steps`` rounds."""
    found = sensitivity(encoder, participation)
    results = gaussian_mechanism_results(
        noise_multiplier,
        found.value,
        delta,
        steps=participation.steps,
        participation=participation_label(participation, found),
        methods=methods,
    )
    return found, results


def calibrate_factorization(
    encoder: object, participation: Participation, epsilon: float, delta: float
) -> tuple[float, Sensitivity, list[PrivacyResult]]:
    """The smallest noise multiplier meeting ``(epsilon, delta)`` (exact GDP), with the
    sensitivity and the labelled results at that noise."""
    found = sensitivity(encoder, participation)
    z = calibrate_noise_multiplier(epsilon, delta, found.value)
    results = gaussian_mechanism_results(
        z,
        found.value,
        delta,
        steps=participation.steps,
        participation=participation_label(participation, found),
    )
    return z, found, results


def tree_release(
    participation: Participation,
    noise_multiplier: float,
    *,
    restart_every: int = 0,
    methods: Sequence[str] = METHODS,
) -> CorrelatedNoiseRelease:
    """DP-FTRL's event: tree aggregation over ``participation.steps`` rounds (restarted every
    ``restart_every`` rounds, 0: never) under ``participation``. The sensitivity is
    ``sqrt(ceil(log2(T + 1)))`` for one participation in one tree, else
    :func:`~privfl.mechanisms.sensitivity.sensitivity` of the (restarted) tree encoder."""
    if not isinstance(participation, Participation):
        raise ValueError(f"participation = {participation!r}: must be a Participation")
    rounds = participation.steps
    if participation.max_participations == 1 and not restart_every:
        s, how = tree_sensitivity(rounds), "exact, sqrt(ceil(log2(T + 1)))"
    else:
        if rounds > MAX_TREE_GRAM:
            raise ValueError(f"rounds = {rounds} with more than one participation or restarts: "
                             f"allowed range 1..{MAX_TREE_GRAM} (the tree's T x T Gram matrix)")
        found = sensitivity(restarted_tree_encoder(rounds, restart_every), participation)
        s = found.value
        how = ("exact" if found.exact else "upper bound") + f", {found.method}"
    label = f"{participation.label}; sensitivity {how}"
    if restart_every:
        label += f"; tree restarted every {restart_every} rounds"
    return CorrelatedNoiseRelease(noise_multiplier, s, rounds, label, methods=tuple(methods))


def banded_release(
    participation: Participation,
    band: int,
    noise_multiplier: float,
    *,
    max_column_norm: float = 1.0,
    sampling_rate: float | None = None,
    methods: Sequence[str] = METHODS,
) -> CorrelatedNoiseRelease:
    """BandMF's event: a lower-triangular C with ``band`` diagonals and column norms at most
    ``max_column_norm`` m over ``participation.steps`` rounds. Without ``sampling_rate``: the
    participation bound with sensitivity ``m sqrt(k)`` (needs band <= the separation when
    k > 1). With it, the clients are in ``band`` cyclic groups (``participation`` must be theirs,
    :meth:`Participation.groups`: k = ceil(T / band) participations, band rounds apart; any other
    bound is refused, since the groups decide who may join): q < 1 gives the amplified
    accounting (pld, rdp); q = 1 (every member joins) the participation bound of the groups."""
    if not isinstance(participation, Participation):
        raise ValueError(f"participation = {participation!r}: must be a Participation")
    band = check_int("band", band, minimum=1)
    k, b = participation.max_participations, participation.min_separation
    if sampling_rate is not None:
        q = check_rate("sampling_rate", sampling_rate)
        groups = Participation.groups(participation.steps, band)
        if (k, b) != (groups.max_participations, groups.min_separation):
            raise ValueError(
                f"participation = {participation.label!r} with sampling_rate = {q:g}: not "
                f"allowed, the sampling is within band = {band} cyclic groups, so the only "
                f"participation is theirs ({groups.label}); pass Participation.groups("
                f"{participation.steps}, {band}) (CLI: leave --participations, --min-separation "
                "and --schedule unset)")
        if q < 1.0:
            methods = tuple(m for m in methods if m != "gdp")
            if not methods:
                raise ValueError("methods: gdp alone with a sampling rate below 1: allowed "
                                 "methods pld, rdp")
            label = f"cyclic Poisson in {band} groups; {participation.label}"
            return CorrelatedNoiseRelease(noise_multiplier, max_column_norm * k**0.5,
                                          participation.steps, label, sampling_rate=q,
                                          band=band, max_column_norm=max_column_norm,
                                          methods=tuple(methods))
        # q = 1: every member of the group joins, the groups' participation bound below
    if k > 1 and b < band:
        raise ValueError(
            f"min_separation = {b} is below band = {band}: the columns overlap, compute the "
            "sensitivity of your C with privfl.mechanisms.sensitivity.sensitivity")
    return CorrelatedNoiseRelease(noise_multiplier, max_column_norm * k**0.5,
                                  participation.steps, f"{participation.label}; {BAND_NOTE}",
                                  band=band, max_column_norm=max_column_norm,
                                  methods=tuple(methods))


def composed_release(releases: Sequence[CorrelatedNoiseRelease]) -> CorrelatedNoiseRelease:
    """Independent releases of one unsampled correlated-noise mechanism (the same noise
    multiplier z), composed: a run whose tree (DP-FTRL) or noise history (BandMF) restarted
    after a kill released each attempt on its own. Each is a Gaussian mechanism with
    ``mu_i = s_i / z``; their composition is exactly the Gaussian mechanism with
    ``mu = sqrt(sum mu_i^2)`` (Dong, Roth and Su 2019, Cor. 3.3), so the result is one
    release with sensitivity ``sqrt(sum s_i^2)`` over ``sum T_i`` rounds, answered exactly by
    every method (gdp, pld, rdp). One release is returned as it is; two or more sampled ones
    (BandMF's amplification) are refused: their composition is not a Gaussian mechanism."""
    releases = list(releases)
    if not releases or not all(isinstance(r, CorrelatedNoiseRelease) for r in releases):
        raise ValueError(f"releases = {releases!r}: must be a non-empty list of "
                         "CorrelatedNoiseRelease")
    first = releases[0]
    if len(releases) == 1:
        return first
    for release in releases:
        if release.sampling_rate < 1.0:
            raise ValueError(f"releases: sampling_rate = {release.sampling_rate!r} is not "
                             "allowed: only unsampled releases (sampling_rate 1) compose as "
                             "one Gaussian mechanism")
        if (release.noise_multiplier, release.methods) != (first.noise_multiplier,
                                                           first.methods):
            raise ValueError(
                f"releases: noise_multiplier = {release.noise_multiplier!r}, methods = "
                f"{release.methods!r}: every release must have noise_multiplier = "
                f"{first.noise_multiplier!r} and methods = {first.methods!r}")
    s = math.sqrt(sum(r.sensitivity**2 for r in releases))
    label = (f"{len(releases)} independent releases composed (a run restarted after a kill): "
             + " + ".join(f"[{r.steps} rounds: {r.participation}]" for r in releases))
    return CorrelatedNoiseRelease(first.noise_multiplier, s, sum(r.steps for r in releases),
                                  label, band=max(r.band for r in releases),
                                  max_column_norm=max(r.max_column_norm for r in releases),
                                  methods=first.methods)
