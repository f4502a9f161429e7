"""Privacy entries compared with fresh ones: the comparison ``privfl check-privacy`` makes for
every metrics row (:mod:`privfl.runs.check`), privacy.json's results and summary.json's
results (:mod:`privfl.runs.check_files`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from privfl.runs.rundir import logged_number

__all__ = ["compare_entries", "relative_difference"]

_FIELDS = ("epsilon", "delta", "mu")


def relative_difference(a: float, b: float) -> float:
    """|a - b| / max(|a|, |b|); 0 for equal numbers (two NaNs too), inf when one is not finite."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return 0.0
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def _key(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    return str(entry.get("method")), str(entry.get("kind")), str(entry.get("scope", ""))


def _keyed(entries: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping]:
    return {_key(e): e for e in entries}


def compare_entries(logged: Any, fresh: Sequence[Mapping[str, Any]], rtol: float
                    ) -> dict[str, Any]:
    """Logged privacy entries against fresh ones (:func:`privfl.algorithms.base.privacy_entries`
    of the plan's results): ``{"ok", "max_rel_diff", "problems"}``. Entries are keyed by
    ``(method, kind, scope)``; an entry missing, extra or logged twice, a field (epsilon,
    delta, mu) missing on either side, or a number further than ``rtol`` (relative) is a
    problem naming the entry and the field."""
    if not isinstance(fresh, Sequence) or not all(isinstance(e, Mapping) for e in fresh):
        raise ValueError(f"fresh = {type(fresh).__name__} is not allowed: must be a list of "
                         "privacy entries")
    if not isinstance(rtol, (int, float)) or isinstance(rtol, bool) or not 0.0 <= rtol <= 1.0:
        raise ValueError(f"rtol = {rtol!r} is out of range: must be a number in [0, 1]")
    problems: list[str] = []
    worst = 0.0
    if not isinstance(logged, list) or not all(isinstance(e, Mapping) for e in logged):
        return {"ok": False, "max_rel_diff": math.inf,
                "problems": ["the logged privacy entries are missing or malformed"]}
    old, new = _keyed(logged), _keyed(fresh)
    counts = Counter(_key(e) for e in logged)
    for key, count in sorted(counts.items()):
        if count > 1:
            problems.append(f"{'/'.join(part for part in key if part)}: logged {count} times")
            worst = math.inf
    for key in sorted(set(old) | set(new)):
        name = "/".join(part for part in key if part)
        if key not in old:
            problems.append(f"{name}: not logged")
            worst = math.inf
            continue
        if key not in new:
            problems.append(f"{name}: logged but not derived from the config")
            worst = math.inf
            continue
        for name_field in _FIELDS:
            if name_field not in old[key] and name_field not in new[key]:
                continue
            if name_field not in old[key]:
                problems.append(f"{name} {name_field}: missing from the logged entry (fresh "
                                f"{new[key][name_field]!r})")
                worst = math.inf
                continue
            if name_field not in new[key]:
                problems.append(f"{name} {name_field}: logged {old[key][name_field]!r} but not "
                                "derived from the config")
                worst = math.inf
                continue
            a, b = old[key][name_field], new[key][name_field]
            a = logged_number(a)  # metrics.jsonl spells infinity "inf"
            if not isinstance(a, (int, float)) or isinstance(a, bool) or b is None:
                problems.append(f"{name} {name_field}: logged {a!r}, fresh {b!r}")
                worst = math.inf
                continue
            diff = relative_difference(float(a), float(b))
            worst = max(worst, diff)
            if diff > rtol:
                problems.append(f"{name} {name_field}: logged {a!r}, fresh {b!r} "
                                f"(relative difference {diff:.3g})")
    return {"ok": not problems, "max_rel_diff": worst, "problems": problems}
