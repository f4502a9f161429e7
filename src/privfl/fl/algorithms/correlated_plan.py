"""The privacy plan of DP-FTRL and BandMF-FedAvg: one schedule, one event, one dispatcher.

:class:`CorrelatedPrivacy` holds the participation schedule
(:class:`~privfl.mechanisms.schedule.CyclicGroups`), the encoder and the noise multiplier. The
training reads them (its cohorts from ``schedule.cohort``, its noise from :meth:`noise_std`
and, for BandMF, :meth:`coefficients`) and :meth:`event` builds the accountant's
:class:`~privfl.accounting.events.CorrelatedNoiseRelease` from the same objects with the
builders ``privfl account dp-ftrl|bandmf`` uses (:mod:`privfl.mechanisms.correlated_privacy`),
answered by :func:`privfl.accounting.dispatch.evaluate`. So a run's privacy.json, ``privfl
check-privacy`` and ``privfl account dp-ftrl|bandmf --json`` with the same settings agree.

Labels: unit client; neighbouring replace-with-zero (one client's contributions in every
round it joins replaced by zeros: Kairouz et al. 2021; Choquette-Choo et al. 2023); sampling
none (a participation bound), or BandMF's cyclic Poisson amplification; release every model
iterate (every noisy prefix sum); method gdp (exact), pld, rdp, all bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privfl._validation import check_choice, check_delta, check_int, check_range
from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import CorrelatedNoiseRelease
from privfl.accounting.results import PrivacyResult
from privfl.fl.algorithms.base import zero_rounds
from privfl.mechanisms.correlated_privacy import banded_release, tree_release
from privfl.mechanisms.schedule import CyclicGroups
from privfl.mechanisms.secure import randomness_text
from privfl.mechanisms.toeplitz import optimise_toeplitz
from privfl.mechanisms.tree import ESTIMATORS

__all__ = ["MECHANISMS", "CorrelatedPrivacy"]

MECHANISMS = ("tree", "banded")


class CorrelatedPrivacy:
    """DP-FTRL's (``mechanism="tree"``) or BandMF's (``"banded"``) privacy plan.

    Parameters
    ----------
    mechanism
        ``"tree"`` (tree aggregation, Kairouz et al. 2021) or ``"banded"`` (banded Toeplitz C
        optimised for the prefix-sum workload with momentum, Choquette-Choo et al. 2023).
    schedule
        The cohorts: :class:`CyclicGroups` (groups b, sampling rate q).
    rounds
        T, the planned horizon (BandMF's C is optimised for it; the tree is online).
    noise_multiplier, clip_norm
        z (0: non-private) and S: ``Z`` has std ``z S``.
    delta, accountants
        The (epsilon, delta) delta (None: off) and the methods (gdp, pld, rdp).
    secure, seed
        Noise (and sampled cohorts) from os.urandom; the seed otherwise.
    estimator, restart_every
        The tree's estimator (vanilla, honaker) and restart period (0: never).
    band, momentum
        BandMF's band and the workload's momentum (the server momentum).
    """

    unit = "client"
    primary_scope = ""

    def __init__(self, *, mechanism: str, schedule: CyclicGroups, rounds: int,
                 noise_multiplier: float, clip_norm: float = 1.0, delta: float | None = 1e-5,
                 accountants: Sequence[str] = ("gdp", "pld", "rdp"), secure: bool = False,
                 seed: int = 0, estimator: str = "honaker", restart_every: int = 0,
                 band: int = 1, momentum: float = 0.0) -> None:
        self.mechanism = check_choice("mechanism", mechanism, MECHANISMS)
        if not isinstance(schedule, CyclicGroups):
            raise ValueError(f"schedule = {schedule!r} is not allowed: must be a CyclicGroups")
        self.schedule = schedule
        self.rounds = check_int("rounds", rounds, 1)
        self.noise_multiplier = check_range("noise_multiplier", noise_multiplier, 0.0)
        self.clip_norm = check_range("clip_norm", clip_norm, 0.0, low_open=True)
        self.delta = None if delta is None else check_delta("delta", delta)
        self.accountants = tuple(check_choice("accountants", a, ("gdp", "pld", "rdp"))
                                 for a in accountants)
        if not self.accountants:
            raise ValueError("accountants = (): name at least one of gdp, pld, rdp")
        self.secure, self.seed = bool(secure), check_int("seed", seed, 0)
        self.estimator = check_choice("estimator", estimator, ESTIMATORS)
        self.restart_every = check_int("restart_every", restart_every, 0)
        self.band = check_int("band", band, 1)
        self.momentum = check_range("momentum", momentum, 0.0, 1.0, high_open=True)
        if self.mechanism == "tree" and schedule.sampled:
            raise ValueError("schedule.sampling_rate < 1 with mechanism 'tree': DP-FTRL is "
                             "accounted on its participation bound (no amplification)")
        self._coefficients: np.ndarray | None = None
        self._cache: dict[int, list[PrivacyResult]] = {}

    @classmethod
    def from_config(cls, config: Any, num_clients: int) -> CorrelatedPrivacy:
        """The plan of a ``dp-ftrl`` or ``bandmf-fedavg`` configuration."""
        f, p = config.federated, config.privacy
        tree = f.algorithm == "dp-ftrl"
        schedule = CyclicGroups(num_clients, f.groups(),
                                1.0 if tree else f.sampling_rate)
        extra = ({"estimator": f.estimator, "restart_every": f.restart_every} if tree
                 else {"band": f.band, "momentum": f.server_momentum})
        return cls(mechanism="tree" if tree else "banded", schedule=schedule, rounds=f.rounds,
                   noise_multiplier=p.z, clip_norm=p.clip_norm,
                   delta=p.delta if p.enabled else None, accountants=tuple(p.accountants),
                   secure=p.secure, seed=config.seed, **extra)

    # ---------------------------------------------------------------- what the training reads
    @property
    def private(self) -> bool:
        return self.noise_multiplier > 0.0

    @property
    def noise_std(self) -> float:
        """``z S``: the std of each coordinate of Z."""
        return self.noise_multiplier * self.clip_norm

    @property
    def expected_cohort(self) -> float:
        """E[m] = q N / b: the public divisor of the noisy sum (never the realised count)."""
        s = self.schedule
        return s.sampling_rate * s.num_clients / s.groups

    def coefficients(self) -> np.ndarray:
        """BandMF's banded Toeplitz C (first column, length ``band``, unit norm): optimised for
        prefix sums with the server momentum over ``max(rounds, band)`` (:func:`optimise_toeplitz`;
        a Toeplitz C streams past its horizon)."""
        if self.mechanism != "banded":
            raise ValueError("coefficients: only the 'banded' mechanism has them")
        if self._coefficients is None:
            self._coefficients = optimise_toeplitz(max(self.rounds, self.band), self.band,
                                                   momentum=self.momentum)
        return self._coefficients

    # ---------------------------------------------------------------- what the accountant sees
    def event(self, rounds: int) -> CorrelatedNoiseRelease:
        """The release of the first ``rounds`` rounds, from :attr:`schedule`."""
        rounds = check_int("rounds", rounds, 1)
        if not self.private:
            raise ValueError("noise_multiplier = 0: this run is not differentially private")
        participation = self.schedule.participation(rounds)
        if self.mechanism == "tree":
            return tree_release(participation, self.noise_multiplier,
                                restart_every=self.restart_every, methods=self.accountants)
        return banded_release(
            participation, self.band, self.noise_multiplier,
            max_column_norm=float(np.linalg.norm(self.coefficients())),
            sampling_rate=self.schedule.sampling_rate if self.schedule.sampled else None,
            methods=self.accountants)

    def results(self, rounds: int) -> list[PrivacyResult]:
        """Labelled client-level bounds after ``rounds`` rounds (empty when not private)."""
        rounds = check_int("rounds", rounds, 0)
        if not self.private or self.delta is None:
            return []
        if rounds not in self._cache:
            results = evaluate(self.event(max(rounds, 1)), self.delta)
            self._cache[rounds] = zero_rounds(results) if rounds == 0 else results
        return self._cache[rounds]

    def card(self, rounds: int) -> dict[str, Any]:
        """Privacy-card rows."""
        randomness = randomness_text(self.secure, self.seed, private=self.private)
        if not self.private:
            return {"privacy": "NONE: non-private baseline (no clipping, no noise); no "
                               "guarantee, epsilon = inf",
                    "client schedule": self.schedule.label(), "randomness": randomness,
                    "rounds": rounds}
        if self.mechanism == "tree":
            mechanism = (f"tree aggregation of the clipped sums (Kairouz et al. 2021), "
                         f"{self.estimator} estimator"
                         + (f", restarted every {self.restart_every} rounds"
                            if self.restart_every else ""))
        else:
            mechanism = (f"banded matrix factorization (Choquette-Choo et al. 2023): Toeplitz C "
                         f"with {self.band} diagonals, noise C^-1 Z streamed")
        amplified = self.schedule.sampled
        return {
            "unit": "client (all records of one client)",
            "neighbouring": "replace-with-zero: one client's contributions, in every round it "
                            "joins, replaced by zeros",
            "sampling": ("cyclic Poisson within groups (BandMF amplification: holds only if "
                         "the deployment keeps the sampling secret); " if amplified else
                         "none: a participation bound, which the deployment must enforce; ")
                        + self.schedule.label(),
            "noise": f"{mechanism}; Z i.i.d. N(0, (z S)^2), z = {self.noise_multiplier:g}",
            "clipping": f"flat: each client's whole update to L2 norm S = {self.clip_norm:g}",
            "aggregation": f"(sum of clipped updates + correlated noise) / E[m] = / "
                           f"{self.expected_cohort:g} (public, never the realised count)",
            "steps": f"R = {rounds} rounds",
            "delta": self.delta,
            "release": "every round's global model (every noisy prefix sum)",
            "threat model": "trusted server: it sees the clients' raw updates, clips them and "
                            "adds the correlated noise; only the noised models are released",
            "randomness": randomness,
            "clients": f"N = {self.schedule.num_clients}",
        }
