"""What :meth:`Experiment.run <privfl.runs.experiment.Experiment.run>` returns.

:class:`ExperimentResult` holds what the run wrote (summary, metrics, privacy results, card), the
headline (:mod:`privfl.runs.headline`, as ``privfl run`` prints it) with its epsilon and delta,
and the trained model as a ready ``nn.Module`` (:func:`released_model`: the model ``model.pt``
holds). :class:`PrivateState` says where a stopped run's private state is.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from privfl.accounting.results import PrivacyResult
from privfl.runs.headline import Headline
from privfl.runs.rounding import format_bound
from privfl.runs.run_resume import STATE_DELETED
from privfl.runs.run_stops import DIVERGED

__all__ = ["ExperimentResult", "PrivateState", "released_model"]


@dataclass(frozen=True)
class PrivateState:
    """Where a stopped run's private state is (its checkpoints: models, optimizer and generator
    states, the sampling decisions the guarantee assumes secret)."""

    deleted: bool  #: a finished last-iterate run deleted it, as its guarantee needs
    folder: str = ""  #: where it is kept ("" once deleted), relative to the run directory
    separate: bool = False  #: kept in a private folder apart from the covered outputs

    @property
    def text(self) -> str:
        """summary.json's ``private_state``: ``deleted`` or ``kept in FOLDER``."""
        return STATE_DELETED if self.deleted else f"kept in {self.folder}"


@dataclass(repr=False)
class ExperimentResult:
    """What a run (or one invocation of it) produced.

    ``model``: the trained model (CPU, eval mode; ``model(x)`` gives logits or
    log-probabilities for inputs laid out as the training data's ``x``), or None when the run
    releases none (``model_note`` says which model it is, or why there is none).
    ``headline``: the sentence ``privfl run`` prints; ``epsilon``/``delta``: its bound (None
    when the run has no rigorous bound, e.g. a non-private run).
    """

    summary: dict[str, Any]
    metrics: list[dict[str, Any]]
    privacy: list[PrivacyResult]
    card: dict[str, Any]
    run_dir: Path
    stop_reason: str
    private_state: PrivateState = PrivateState(deleted=False, folder="checkpoints/")
    extra: dict[str, Any] = field(default_factory=dict)
    model: nn.Module | None = None
    model_note: str = ""
    headline_parts: Headline | None = None  #: the headline's sentence, advice and bound
    client_params: Callable[[int], dict[str, torch.Tensor]] | None = None

    @property
    def headline(self) -> str:
        """The headline (:meth:`privfl.runs.headline.Headline.text`): what the privacy number
        is, which scope to report, and what it means in plain words."""
        if self.headline_parts is not None:
            return self.headline_parts.text()
        saved = self.summary.get("headline") or {}
        return "\n\n".join(str(saved[k]) for k in ("sentence", "advice", "reading")
                             if saved.get(k))

    @property
    def epsilon(self) -> float | None:
        """The headline's epsilon (a rigorous bound), or None without one."""
        value = (self.summary.get("headline") or {}).get("epsilon")
        return None if value is None else float(value)

    @property
    def delta(self) -> float | None:
        """The headline's delta, or None without a bound."""
        value = (self.summary.get("headline") or {}).get("delta")
        return None if value is None else float(value)

    def client_model(self, client: int) -> nn.Module:
        """Client ``client``'s own model (personalised algorithms such as PriFedSync: its
        helper model), built like :attr:`model`; ValueError for an algorithm without one."""
        if self.client_params is None or self.model is None:
            raise ValueError(f"client = {client!r} is not allowed: this run's algorithm "
                             f"({self.summary.get('algorithm')}) has no per-client models")
        return _with_params(self.model, self.client_params(client))

    def __repr__(self) -> str:
        final = self.summary.get("final") or {}
        scores = ", ".join(f"{k} = {v:.3f}" for k, v in final.items()
                           if k.endswith("_accuracy") and isinstance(v, float)
                           and math.isfinite(v))
        eps = "none" if self.epsilon is None else (f"{format_bound(self.epsilon, 4)} at delta "
                                                   f"{format_bound(self.delta)}")
        return (f"ExperimentResult(stop_reason={self.stop_reason!r}, rounds="
                f"{self.summary.get('rounds_completed')}, {scores or 'no accuracy'}, "
                f"epsilon={eps}, run_dir='{self.run_dir}')")


def _with_params(template: nn.Module, params: dict[str, torch.Tensor]) -> nn.Module:
    """A CPU copy of ``template`` (eval mode) holding ``params`` (``name -> tensor``) in its
    trainable parameters; frozen ones (a fixed embedding) keep the template's values."""
    model = copy.deepcopy(template).cpu().eval()
    trainable = {name: p for name, p in model.named_parameters() if p.requires_grad}
    if set(trainable) != set(params):
        raise ValueError(f"params name {sorted(set(params) ^ set(trainable))}: must be exactly "
                         "the model's trainable parameters")
    with torch.no_grad():
        for name, value in trainable.items():
            value.copy_(params[name].detach().cpu())
    return model


def released_model(algorithm: Any, releases: bool, reason: str) -> tuple[nn.Module | None, str]:
    """``(model, note)``: the model ``algorithm`` releases (its ``global_params()`` on its
    trainer's architecture; what model.pt holds), or None and why (``releases`` False: a run
    stopped for ``reason`` DIVERGED, or a paused run whose guarantee keeps intermediate models
    hidden)."""
    template = getattr(getattr(algorithm, "trainer", None), "template", None)
    if not callable(getattr(algorithm, "global_params", None)) or template is None:
        return None, "no model: this algorithm has no global model"
    if not releases and reason == DIVERGED:
        return None, "no model: the run diverged (summary['stop_detail'] says where)"
    if not releases:
        return None, ("no model: the run paused before its last round, and its guarantee keeps "
                      "intermediate models hidden (a last-iterate release); resume it to the end")
    model = _with_params(template, algorithm.global_params())
    note = f"the global model after round {algorithm.round} (what model.pt holds)"
    if callable(getattr(algorithm, "client_params", None)):
        note += "; each client's personalised model: result.client_model(j)"
    return model, note
