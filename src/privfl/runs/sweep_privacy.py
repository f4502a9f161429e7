"""The price of a sweep: K runs on one dataset compose, and releasing the best of them is
covered only by the composition of all K (Liu and Talwar 2019; Papernot and Steinke 2022).

:func:`sweep_guarantee` reads the K finished run directories of ``privfl sweep`` and returns
the bound for releasing the chosen run, which ``privfl sweep`` prints next to each run's own
bound and writes to sweep.json with what it covers:

* where every run's guarantee is one composition of noisy steps (a
  :class:`~privfl.accounting.events.PrivacyEvent` of the rounds its guarantee covers, the same
  unit, neighbouring relation and delta, no re-drawn rounds and no budget filter: DP-FedAvg),
  the K events composed into one and answered by the same accountants (PLD and RDP; the
  tightest bound);
* otherwise the basic composition of the runs' headlines (Dwork et al. 2006: epsilons and
  deltas add up), which holds for any mix of mechanisms at the summed delta.

The sweep runs every point of its grid: K is fixed, not drawn at random, so Papernot and
Steinke 2022's bound for tuning with a random number of runs (which can be far below the
K-fold composition) does not apply, and sweep.json says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["SELECTION_NOTE", "sweep_guarantee"]

#: why the random-K tuning bound is not used
SELECTION_NOTE = (
    "the sweep runs every grid point (K is fixed, not drawn at random), so Papernot and "
    "Steinke 2022's hyperparameter-tuning bound for a random number of runs does not apply; "
    "the bound is the composition of all K runs")


def _covers(k: int) -> str:
    return (f"releasing any one run chosen among these {k} after looking at their results "
            "(the best accuracy, say), or all of them: every output each run's own guarantee "
            "covers, from all K runs together; choosing by an output a run's guarantee does "
            "not cover (see its privacy.json outputs) is outside it. Each run's own bound "
            "holds only if it is the only run ever made on this dataset")


def _read(run_dir: Path) -> tuple[Any, dict[str, Any]]:
    from privfl.config.loader import load_config

    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    return load_config(run_dir / "config.yaml"), summary


def _composed_events(configs: Sequence[Any], summaries: Sequence[dict[str, Any]],
                     delta: float) -> dict[str, Any] | None:
    """The K runs' events composed and answered by PLD and RDP (None when a run's guarantee
    is not one composition of noisy steps that the accountants read as one)."""
    from privfl.accounting.dispatch import evaluate
    from privfl.accounting.events import PrivacyEvent, compose_events
    from privfl.algorithms.base import tightest_bound
    from privfl.algorithms.builders import privacy_plan

    events = []
    for config, summary in zip(configs, summaries, strict=True):
        if config.privacy.epsilon_budget is not None or summary.get("redrawn_rounds"):
            return None
        plan = privacy_plan(config)
        if hasattr(plan, "restarted_results") or not callable(getattr(plan, "event", None)):
            return None
        event = plan.event(int(summary.get("rounds_accounted", summary["rounds_completed"])))
        if not isinstance(event, PrivacyEvent):
            return None
        events.append(event)
    try:
        composed = compose_events(events)
    except ValueError:  # different units, relations or releases
        return None
    best = tightest_bound(evaluate(composed, delta, methods=("pld", "rdp")))
    if best is None:
        return None
    return {"epsilon": float(best.epsilon), "delta": float(best.delta),
            "method": f"{best.method} composition of the {len(events)} runs' rounds",
            "kind": "bound", "unit": best.unit}


def sweep_guarantee(run_dirs: Sequence[str | Path]) -> dict[str, Any]:
    """The bound for releasing the run chosen among the finished runs in ``run_dirs`` (see
    the module docstring): ``{"runs", "epsilon", "delta", "method", "kind", "covers",
    "selection"}``; epsilon is infinite when a run is not private."""
    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("run_dirs = []: a sweep's guarantee needs at least one finished run")
    loaded = []
    for path in dirs:
        try:
            loaded.append(_read(path))
        except (OSError, ValueError, KeyError) as error:
            raise ValueError(f"run_dirs: {str(path)!r} is not a finished run ({error})") from None
    configs = [config for config, _ in loaded]
    summaries = [summary for _, summary in loaded]
    out: dict[str, Any] = {"runs": len(dirs), "covers": _covers(len(dirs)),
                           "selection": SELECTION_NOTE}
    public = [str(p) for p, c in zip(dirs, configs, strict=True) if not c.privacy.enabled]
    heads = [s.get("headline", {}) for s in summaries]
    if public or any(not isinstance(h.get("epsilon"), (int, float)) for h in heads):
        which = ", ".join(public) or "a run without a rigorous bound"
        return {**out, "epsilon": math.inf, "delta": None, "kind": "bound",
                "method": f"none: {which} releases without a guarantee"}
    deltas = {float(h["delta"]) for h in heads}
    composed = (_composed_events(configs, summaries, deltas.pop())
                if len(deltas) == 1 else None)
    if composed is not None:
        return {**out, **composed}
    return {**out, "epsilon": float(sum(h["epsilon"] for h in heads)),
            "delta": float(sum(h["delta"] for h in heads)), "kind": "bound",
            "method": f"basic composition of the {len(dirs)} runs' headlines (Dwork et al. "
                      "2006: epsilons and deltas add up)",
            "unit": _unit(heads)}


def _unit(heads: Sequence[dict[str, Any]]) -> str:
    """The runs' common unit; ``record`` when they differ (a client-level guarantee implies
    the record-level one at the same epsilon and delta)."""
    units = {str(h.get("unit", "")) for h in heads}
    return units.pop() if len(units) == 1 else "record"
