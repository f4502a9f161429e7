"""Training verdicts from several seeds: a quick run repeated over seeds, the spread of what it
measures, and the row that judges a paper's number or ordering by it.

A single seed is not evidence: quick runs at another seed move by points (docs/experiments/
xie2023.md: 26 points at sigma = 3). :func:`run_seeds` trains one configuration at seeds
``0 .. n-1`` (``n``: ``--seeds``, :data:`DEFAULT_SEEDS` at the quick scale); :class:`Spread`
holds one value per seed, their mean, sample standard deviation ``s`` and the interval a row is
judged by, the two-sided 95 % *prediction interval* of one more run under a normal model,

    mean +- t_{0.975, n-1} * s * sqrt(1 + 1/n)        (Student t; n >= 2),

the range within which a new seed (or the paper's own run, at the paper's settings) falls with
95 % probability, cut to the range the quantity can take (``limits``: an accuracy lies in
[0, 100] %, a count of rounds is at least 1), since a normal model's tails know no such range.
:func:`compare_spread` makes the row of a number: ``match`` only when the
paper's value lies in that interval *and* the runs are at the paper's scale; a run at another
scale (``scale`` given) says so and cannot match. :func:`compare_ordering` makes the row of an
ordering claim (``A > B > C``): ``match`` only when the ordering holds in every seed and the runs
are at the settings the paper states for the claim (``settings`` given: they are not).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfl.reproduce.rows import Row, compare
from privfl.reproduce.runner import Progress, QuickRun, run_config

__all__ = ["DEFAULT_SEEDS", "LEVEL", "PERCENT", "POSITIVE", "ROUNDS", "Spread", "check_seeds",
           "compare_ordering", "compare_spread", "run_seeds", "spread"]

#: seeds of a quick reproduction's training (each quick run is seconds; three is the fewest
#: that gives a spread with a finite interval of useful width)
DEFAULT_SEEDS = 3
#: the coverage of the prediction interval a row is judged by
LEVEL = 0.95
#: the ranges a measured quantity can take (:attr:`Spread.limits`): an accuracy in percent, a
#: number of rounds, a positive ratio
PERCENT, ROUNDS, POSITIVE = (0.0, 100.0), (1.0, math.inf), (0.0, math.inf)


def check_seeds(seeds: int) -> int:
    """``seeds`` as a count of training seeds: an integer >= 2 (one seed has no spread)."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 2:
        raise ValueError(f"seeds = {seeds!r} is not allowed: must be an integer >= 2 (one seed "
                         "has no spread to judge a training row by)")
    return seeds


@dataclass(frozen=True)
class Spread:
    """One measured value per seed (``values[i]`` at ``seeds[i]``), in the row's unit, and the
    range ``limits = (low, high)`` that the quantity can take (:data:`PERCENT`, :data:`ROUNDS`,
    :data:`POSITIVE`; default unbounded)."""

    seeds: tuple[int, ...]
    values: tuple[float, ...]
    limits: tuple[float, float] = (-math.inf, math.inf)

    def __post_init__(self) -> None:
        if len(self.seeds) != len(self.values) or len(self.values) < 2:
            raise ValueError(f"values = {self.values!r}: need one value per seed "
                             f"({len(self.seeds)} seeds), at least 2")
        if not all(math.isfinite(v) for v in self.values):
            raise ValueError(f"values = {self.values!r}: every value must be finite")
        low, high = self.limits
        if math.isnan(low) or math.isnan(high) or not low < high:
            raise ValueError(f"limits = {self.limits!r}: must be (low, high) with low < high")
        outside = [v for v in self.values if not low <= v <= high]
        if outside:
            raise ValueError(f"values {outside!r} lie outside limits = {self.limits!r}")

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def std(self) -> float:
        """The sample standard deviation ``s`` (n - 1 in the denominator)."""
        return statistics.stdev(self.values)

    @property
    def interval(self) -> tuple[float, float]:
        """The 95 % prediction interval ``mean +- t s sqrt(1 + 1/n)`` (module docstring), cut
        to :attr:`limits`."""
        from scipy.stats import t as student

        n = len(self.values)
        half = float(student.ppf(0.5 + LEVEL / 2, n - 1)) * self.std * math.sqrt(1 + 1 / n)
        low, high = self.limits
        return max(self.mean - half, low), min(self.mean + half, high)

    def describe(self, unit: str = "") -> str:
        """``mean 83.1 +- 2.3 (sd, 3 seeds: 80.9, 83.4, 85.0); 95 % prediction interval
        [73.2, 93.0]``."""
        low, high = self.interval
        values = ", ".join(f"{v:.4g}" for v in self.values)
        return (f"mean {self.mean:.4g}{unit} +- {self.std:.2g} (sd, {len(self.values)} seeds "
                f"{_seed_range(self.seeds)}: {values}); {100 * LEVEL:.0f} % prediction interval "
                f"[{low:.4g}, {high:.4g}] (Student t, one more run)")


def _seed_range(seeds: Sequence[int]) -> str:
    return (f"{seeds[0]}-{seeds[-1]}" if list(seeds) == list(range(seeds[0], seeds[-1] + 1))
            else ",".join(map(str, seeds)))


def run_seeds(raw: Mapping[str, Any], seeds: int, out: Path | None, *,
              overrides: Sequence[str] = (), progress: Progress | None = None) -> list[QuickRun]:
    """Configuration ``raw`` run at seeds ``0 .. seeds-1`` (each named ``<name>-seed<i>``)."""
    check_seeds(seeds)
    runs = []
    for seed in range(seeds):
        config = {**raw, "seed": seed, "name": f"{raw['name']}-seed{seed}"}
        runs.append(run_config(config, out, overrides=overrides, progress=progress))
    return runs


def spread(runs: Sequence[QuickRun], value: Callable[[QuickRun], float | None],
           limits: tuple[float, float] = PERCENT) -> Spread:
    """The :class:`Spread` of ``value(run)`` over ``runs`` (from :func:`run_seeds`), a quantity
    in ``limits`` (default: an accuracy in percent)."""
    values = []
    for run in runs:
        got = value(run)
        if got is None:
            raise ValueError(f"run {run.name!r} did not report the measured value")
        values.append(float(got))
    return Spread(tuple(int(run.summary.get("seed", i)) for i, run in enumerate(runs)),
                  tuple(values), limits)


def compare_spread(quantity: str, source: str, paper: str, measured: Spread, *,
                   scale: str | None, reason: str = "", basis: str = "printed") -> Row:
    """The row of a number measured over seeds: privfl's value is the prediction interval;
    ``match`` when the paper's value (as printed) lies in it and the runs are at the paper's
    scale (``scale`` None); ``scale``: how the runs differ from the paper's (then the row cannot
    match: the number is not reproducible at that scale)."""
    low, high = measured.interval
    parts = [measured.describe()]
    if scale is not None:
        parts.append(f"at another scale, the paper's number cannot be reproduced there: {scale}")
    if reason:
        parts.append(reason)
    inside = low <= float(paper) <= high
    if scale is None:
        parts.append(f"the paper's {paper} lies {'inside' if inside else 'outside'} the interval")
    return compare(quantity, source, paper, (low, high),
                   tolerance=None if scale is not None else "interval",
                   reason="; ".join(parts), kind="training", basis=basis)


def compare_ordering(quantity: str, source: str, claim: Sequence[str],
                     per_seed: Sequence[Mapping[str, float]], *, settings: str | None,
                     reason: str = "", unit: str = " %", larger_first: bool = True) -> Row:
    """The row of an ordering claim ``claim[0] > claim[1] > ...`` (``larger_first`` False:
    ``claim[0] < claim[1] < ...``, e.g. rounds to a target) measured at each seed
    (``per_seed[i]``: name -> value): privfl's column is the ordering of the seed means;
    ``match`` when the claimed ordering holds strictly in every seed and the runs are at the
    settings the paper states for the claim (``settings`` None; else how they differ)."""
    if len(claim) < 2 or len(set(claim)) != len(claim):
        raise ValueError(f"claim = {list(claim)!r}: an ordering of at least two distinct names")
    if len(per_seed) < 2:
        raise ValueError(f"per_seed has {len(per_seed)} seeds: need at least 2")
    for values in per_seed:
        if set(values) != set(claim):
            raise ValueError(f"per_seed names {sorted(values)} differ from the claim's "
                             f"{sorted(claim)}")
    sign = 1.0 if larger_first else -1.0
    means = {name: statistics.fmean(v[name] for v in per_seed) for name in claim}
    order = (" > " if larger_first else " < ").join(
        sorted(means, key=lambda name: sign * means[name], reverse=True))
    holds = sum(all(sign * v[a] > sign * v[b] for a, b in zip(claim, claim[1:], strict=False))
                for v in per_seed)
    detail = ", ".join(
        f"{name} {means[name]:.4g}{unit} +- {statistics.stdev(v[name] for v in per_seed):.2g}"
        for name in claim)
    parts = [f"seed means (sd): {detail}; the claimed ordering holds in {holds} of "
             f"{len(per_seed)} seeds"]
    if settings is not None:
        parts.append(f"not at the paper's settings for this claim: {settings}")
    if reason:
        parts.append(reason)
    text = (" > " if larger_first else " < ").join(claim)
    row = compare(quantity, source, text, order, tolerance=None, reason="; ".join(parts),
                  kind="training")
    if settings is None and holds == len(per_seed) and order == text:
        return row
    if row.verdict == "match":  # the means agree, but not every seed, or not the paper's settings
        return _with_verdict(row, "differs")
    return row


def _with_verdict(row: Row, verdict: str) -> Row:
    from dataclasses import replace

    return replace(row, verdict=verdict)
