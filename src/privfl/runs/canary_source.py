"""The seam between an audit's canaries and its statistics (issue 47): a *canary source*.

``privfl audit run`` (:mod:`privfl.runs.canary_audit`) is generic: it draws the secret bits,
asks a source to train once with the canaries whose bit is set and to score every canary from
what the guarantee releases, then turns scores and bits into ``epsilon_lower``,
``epsilon_estimate``, the verdict, audit.json and the report section. A source knows one kind
of canary:

* client level (:class:`privfl.runs.canary_clients.ClientCanaries`): canary clients sending a
  fixed random direction, scored by cosine with the released updates (Andrew et al. 2024);
  dp-fedavg, dp-ftrl, bandmf-fedavg, through the algorithm seam's ``canary_cohort`` and
  ``add_canaries``;
* record level (another module): canary records, each included with probability 1/2, scored
  by loss on the released model (Steinke, Nasr and Jagielski 2023).

A source implements :class:`CanarySource`: ``unit`` (``"client"`` or ``"record"``, the unit of
the guarantee it audits) and ``run(algorithm, inserted, rng, rounds) -> CanaryScores``. It must

1. insert canary i (and only through the guarantee's own threat model: the same sampling,
   neighbouring relation and sensitivity as one real unit) exactly when ``inserted[i]``;
2. train ``rounds`` rounds with the algorithm's own code (its noise, clipping, aggregation);
3. score every canary, inserted or not, from the outputs the guarantee releases only (all
   global models, or only the last for a last-iterate guarantee), by a rule that does not read
   ``inserted``, higher meaning "more likely in";
4. describe what it did (:attr:`CanaryScores.description`: ``canary``, ``score``,
   ``neighbouring``, ``sampling``, ``released``).

The source's randomness (canary directions or records, participation uniforms) comes from
``rng``, the auditor's generator, independent of the clients' data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

__all__ = ["DESCRIPTION_KEYS", "CanaryScores", "CanarySource"]

#: what :attr:`CanaryScores.description` must say (audit.json copies it)
DESCRIPTION_KEYS = ("canary", "score", "neighbouring", "sampling", "released")


@dataclass(frozen=True)
class CanaryScores:
    """What a source returns: one score per canary (``scores`` ``[m]``, finite floats, higher
    = more likely inserted), the bits it was given (``inserted`` ``[m]`` bool), the rounds
    trained and the :data:`DESCRIPTION_KEYS` texts."""

    scores: np.ndarray
    inserted: np.ndarray
    rounds: int
    description: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        scores = np.asarray(self.scores, dtype=float)
        inserted = np.asarray(self.inserted)
        if scores.ndim != 1 or scores.shape != inserted.shape or inserted.dtype != bool:
            raise ValueError(f"scores (shape {scores.shape}) and inserted (shape "
                             f"{inserted.shape}, dtype {inserted.dtype}) must be 1-D of equal "
                             "length, inserted boolean")
        if not np.all(np.isfinite(scores)):
            raise ValueError("scores contains NaN or infinite values: must be finite (a run "
                             "that diverged has no audit)")
        missing = [key for key in DESCRIPTION_KEYS if key not in self.description]
        if missing:
            raise ValueError(f"description lacks {', '.join(missing)}: a source must say "
                             f"{', '.join(DESCRIPTION_KEYS)}")
        object.__setattr__(self, "scores", scores)


@runtime_checkable
class CanarySource(Protocol):
    """A kind of canary (module docstring): ``unit`` and ``run``."""

    unit: ClassVar[str]

    def run(self, algorithm: Any, inserted: np.ndarray, rng: np.random.Generator,
            rounds: int) -> CanaryScores:
        """Train ``algorithm`` (built from the configuration, round 0) for ``rounds`` rounds
        with canary i inserted iff ``inserted[i]``; score every canary."""
        ...
