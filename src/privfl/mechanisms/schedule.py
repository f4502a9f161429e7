"""The participation schedule of DP-FTRL and BandMF training: cyclic balanced groups.

The clients ``0..N-1`` are split into ``b`` balanced groups by index, client j in group
``j mod b`` (sizes differ by at most one; the assignment is public). Round t (0-based) may use
only group ``t mod b``:

* ``sampling_rate`` q = 1: the whole group takes part (DP-FTRL, Kairouz et al. 2021; BandMF
  without amplification). A client then joins rounds ``i, i + b, i + 2b, ...`` only: at most
  ``k = ceil(T / b)`` participations, consecutive ones exactly b apart — the cyclic pattern of
  :class:`~privfl.mechanisms.sensitivity.Participation` (single participation when b >= T).
* q < 1: each member of the group joins independently with probability q, secretly (cyclic
  Poisson sampling, Choquette-Choo et al. 2023, "(Amplified) Banded Matrix Factorization"):
  the participation bound still holds (a subset of the cyclic pattern), and the amplified
  accountant applies where the deployment can guarantee the secret sampling.

One object, two readers: the training draws each round's cohort with :meth:`CyclicGroups.cohort`
and the privacy plan builds the accountant's event from :meth:`CyclicGroups.participation`, so
the schedule that ran is the schedule that was accounted (privacy rule 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfl._validation import check_int, check_rate
from privfl.mechanisms.sensitivity import Participation

__all__ = ["CyclicGroups"]


@dataclass(frozen=True)
class CyclicGroups:
    """``num_clients`` clients in ``groups`` balanced groups; round t uses group ``t mod
    groups``, each member with probability ``sampling_rate`` (see the module docstring)."""

    num_clients: int
    groups: int
    sampling_rate: float = 1.0

    def __post_init__(self) -> None:
        n = check_int("num_clients", self.num_clients, minimum=1)
        check_int("groups", self.groups, minimum=1, maximum=n)
        check_rate("sampling_rate", self.sampling_rate)

    @property
    def sampled(self) -> bool:
        """Whether cohorts are Poisson-sampled within the group (q < 1)."""
        return self.sampling_rate < 1.0

    def group(self, round_index: int) -> np.ndarray:
        """The clients of round ``round_index``'s group (0-based round), sorted."""
        t = check_int("round_index", round_index, minimum=0)
        return np.arange(t % self.groups, self.num_clients, self.groups)

    def cohort(self, round_index: int, uniforms: np.ndarray | None = None) -> np.ndarray:
        """Round ``round_index``'s cohort: its group, or (q < 1) the members whose uniform is
        below q (``uniforms``: one per member, from the seeded generator or os.urandom)."""
        members = self.group(round_index)
        if not self.sampled:
            return members
        keys = np.asarray(uniforms, dtype=float) if uniforms is not None else None
        if keys is None or keys.shape != members.shape:
            raise ValueError(f"uniforms must have shape {members.shape} (one per member of the "
                             "group) when sampling_rate < 1")
        return members[keys < self.sampling_rate]

    def participation(self, rounds: int) -> Participation:
        """The participation bound of the first ``rounds`` rounds: cyclic with period
        ``groups`` (``ceil(rounds / groups)`` participations), single when groups >= rounds."""
        return Participation.groups(check_int("rounds", rounds, minimum=1), self.groups)

    def label(self) -> str:
        """The schedule in words (for the privacy card)."""
        text = (f"cyclic: N = {self.num_clients} clients in {self.groups} balanced groups "
                f"(client j in group j mod {self.groups}), round t uses group t mod "
                f"{self.groups}")
        if self.sampled:
            return text + (f", each member with probability q = {self.sampling_rate:g} "
                           "(secret Poisson sampling)")
        return text + ", every member"
