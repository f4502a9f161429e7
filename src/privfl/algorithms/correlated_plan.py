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
from privfl.algorithms.base import lost_attempts, zero_rounds
from privfl.mechanisms.correlated_privacy import banded_release, composed_release, tree_release
from privfl.mechanisms.schedule import CyclicGroups
from privfl.mechanisms.secure import randomness_text
from privfl.mechanisms.toeplitz import UNIT_COLUMN_NORM, optimise_toeplitz
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
        self._cache: dict[tuple[int, tuple[int, ...]], list[PrivacyResult]] = {}

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
        """BandMF's banded Toeplitz C (first column, length ``band``, norm below 1,
        :func:`within_unit_norm`): optimised for
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
            # every column of the Toeplitz C has norm <= ||c|| < 1 (within_unit_norm): the bound
            # m = 1, the same number `privfl account bandmf` takes by default, on every CPU
            max_column_norm=UNIT_COLUMN_NORM,
            sampling_rate=self.schedule.sampling_rate if self.schedule.sampled else None,
            methods=self.accountants)

    def results(self, rounds: int) -> list[PrivacyResult]:
        """Labelled client-level bounds after ``rounds`` rounds (empty when not private)."""
        return self.restarted_results(rounds, ())

    def restarted_results(self, rounds: int, attempts: Sequence[int]) -> list[PrivacyResult]:
        """The bounds once ``rounds`` rounds ran after ``attempts`` lost attempts (each by its
        last round L: it released rounds ``1..L``; :func:`~.base.lost_attempts`). A resumed
        secure run restarts the tree (or BandMF's noise history) from the checkpoint with fresh
        noise, so an attempt is not more leaves of one tree: each attempt is its own release
        of the same clients, and the releases compose (:func:`composed_release`; a sound
        over-count of the rounds an attempt shares with its checkpoint, whose Gaussian
        sensitivities add in squares). Sampled BandMF refuses attempts (ValueError)."""
        rounds = check_int("rounds", rounds, 0)
        attempts = tuple(check_int("attempts", a, 1) for a in attempts)
        if not self.private or self.delta is None:
            return []
        key = (rounds, attempts)
        if key not in self._cache:
            if attempts and self.schedule.sampled:
                raise ValueError(self._sampled_redraw_text(attempts))
            if rounds == 0 and not attempts:
                self._cache[key] = zero_rounds(evaluate(self.event(1), self.delta))
            else:
                ran = (*attempts, rounds) if rounds else attempts
                event = composed_release([self.event(r) for r in ran])
                self._cache[key] = evaluate(event, self.delta)
        return self._cache[key]

    @staticmethod
    def _sampled_redraw_text(attempts: Sequence[int]) -> str:
        return (f"re-drawn rounds (attempts lost after rounds {list(attempts)}) with "
                "federated.sampling_rate < 1: BandMF's amplified accountant does not cover a "
                "secret sampling that was re-drawn after a kill; start the run again with "
                "--out NEW_DIR (its released rounds stay released)")

    # ---------------------------------------------------------------- pinned at round 1
    def pins(self) -> dict[str, int]:
        """What the accountant assumed at round 1 that a resume's ``federated.rounds`` could
        change: the number of groups b (DP-FTRL's default, no ``min_separation``, is one group
        per planned round) and BandMF's horizon ``max(rounds, band)`` that C is optimised for.
        The runner writes them to run.json when it creates the run."""
        pins = {"groups": self.schedule.groups}
        if self.mechanism == "banded":
            pins["encoder_horizon"] = max(self.rounds, self.band)
        return pins

    def check_continuation(self, pinned: dict[str, Any] | None,
                           redrawn: Sequence[int] = ()) -> None:
        """Refuse (ValueError, one line) a resume this plan's accountant would not cover:
        ``pinned`` (run.json's pins, None for a run made before them) that :meth:`pins`
        would change, i.e. an extension that regroups the clients or re-optimises C mid-run;
        or re-drawn rounds (``redrawn``) of a sampled BandMF run."""
        if pinned is not None:
            if not isinstance(pinned, dict):
                raise ValueError(f"pinned = {pinned!r} is not allowed: must be a dict of the "
                                 "settings pinned at round 1 (run.json)")
            changed = [f"{k} {pinned.get(k)!r} -> {v!r}" for k, v in self.pins().items()
                       if pinned.get(k) != v]
            if changed:
                what = ("the client groups" if self.mechanism == "tree"
                        else "the client groups or BandMF's encoder C")
                fix = ("set federated.min_separation when creating a run you may extend"
                       if self.mechanism == "tree" else
                       "plan the longer federated.rounds when creating the run")
                raise ValueError(
                    f"federated.rounds = {self.rounds} would change {what} pinned at round 1 "
                    f"({'; '.join(changed)}): the rounds already run used the pinned ones and "
                    "no accountant covers the mix; keep the run's federated.rounds, or start a "
                    f"new run ({fix})")
        if redrawn and self.schedule.sampled:
            raise ValueError(self._sampled_redraw_text(lost_attempts(redrawn)))

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
