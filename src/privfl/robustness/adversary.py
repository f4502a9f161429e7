"""Which (epsilon, delta) a certificate uses for which adversary (Xie et al. 2023, Theorems 3
and 6, read for the attack that is certified).

A certificate counts adversaries; group privacy counts neighbouring steps. privfl's simulated
attacks *replace* the data of k existing clients (or k records), which is 2k steps under the
add/remove-one relation of a Poisson-sampled accountant, or k steps under replace-one. Both are
sound readings of the same training:

* add/remove epsilon, 2 steps per adversary (group privacy over 2k steps);
* the replace-one epsilon of the same mechanism (the accountant run on the same events with the
  replace-one relation), 1 step per adversary.

Neither is tighter everywhere: with ``eps_r <= 2 eps`` the replace-one reading gives a larger K
for every point (both its e^{k eps} and its delta_k terms are smaller), otherwise the delta term
can favour either. :func:`readings` lists the sound readings of an adversary, and the pipeline
certifies with each and keeps the tighter. Xie et al. 2023 count k replaced users as k
add/remove steps; that reading is ``adversary = "add-remove"``: sound for adversaries who add or
remove units, not for privfl's replacing attacks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from privfl._validation import check_choice
from privfl.robustness.certify import ADVERSARIES, steps_per_adversary

__all__ = ["Reading", "readings"]


@dataclass(frozen=True)
class Reading:
    """One sound reading: the per-model (epsilon, delta) for ``neighbouring`` neighbours (from
    the accountant ``method``) and the steps one ``adversary`` takes in that relation."""

    adversary: str
    neighbouring: str
    epsilon: float
    delta: float
    method: str

    @property
    def steps_per_adversary(self) -> int:
        return steps_per_adversary(self.adversary, self.neighbouring)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "steps_per_adversary": self.steps_per_adversary}


def readings(privacy: Any, adversary: str) -> list[Reading]:
    """The sound readings of a :class:`~privfl.robustness.replica_privacy.ReplicaPrivacy` for
    ``adversary`` (``replace``: every relation whose epsilon is known, replace-one first;
    ``add-remove``: the add/remove epsilon, refused under replace-one neighbours)."""
    adversary = check_choice("adversary", adversary, ADVERSARIES)
    if not privacy.private:
        raise ValueError("privacy: the models have no rigorous (epsilon, delta) bound, so no "
                         "certificate")
    steps_per_adversary(adversary, privacy.neighbouring)  # add-remove needs add/remove DP
    found = [Reading(adversary, privacy.neighbouring, float(privacy.epsilon),
                     float(privacy.delta), str(privacy.method))]
    replace_epsilon = getattr(privacy, "replace_epsilon", None)
    if (adversary == "replace" and privacy.neighbouring == "add-remove"
            and replace_epsilon is not None):
        found.insert(0, Reading(adversary, "replace-one", float(replace_epsilon),
                                float(privacy.delta), str(privacy.replace_method)))
    return found
