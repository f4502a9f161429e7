"""The privacy plan of instance-level DP FedSGD / FedAvg (Xie et al. 2023, Algorithms 2 and 3).

Every selected client runs DP-SGD on its own records (flat per-example clipping at C, Gaussian
noise ``sigma C`` on the sum, divided by the batch size B) from the global model; the server
averages. The unit of privacy is a **record**. When a record lives in exactly one client, the
run's record-level guarantee is the worst client's (parallel composition, Xie et al. 2023
Proposition 3: ``eps_t = max_i eps_t^i``); a record held by several clients composes its
holders (see below). Every client's event is derived from the run's
:class:`~privfl.fl.LocalTrainingSpec` (the trainer's own object) and the number of rounds the
client is charged for; :meth:`InsDpPrivacy.event` puts them in one event tree (a
:class:`~privfl.accounting.events.HeldByClients` per scope) and
:func:`privfl.accounting.dispatch.evaluate` answers it, as for every other plan.

Rounds charged (``participations``)
-----------------------------------
* every client in every round (``m = N``, the paper's experiments): exact;
* ``cyclic`` cohorts (round t takes clients ``(t-1) m, ..., t m - 1`` modulo N): the schedule is
  public and data-independent, so each client is charged exactly the rounds it takes part in
  (Xie et al. 2023 Algorithm 3 charges only participating clients);
* ``uniform`` cohorts (m of N drawn at random each round, the paper's Algorithms 2-3):
  **conservatively every round for every client**. The realised cohorts are not used (they are
  not reproducible in secure mode), and no amplification by client sampling is claimed.

Scopes (``extras["scope"]``)
----------------------------
* ``client-updates`` (InsDP-FedAvg; InsDP-FedSGD with ``release="client-updates"``): each
  client's update is released (an untrusted server sees it): per client, ``V`` steps of the
  sampled Gaussian at rate ``q_j = B / n_j``, noise multiplier sigma, per charged round.
* ``global-model`` (InsDP-FedSGD, the default): only the mean of the m one-step updates leaves a
  trusted aggregator (or secure aggregation). One record moves the mean by at most
  ``eta C / (B m)`` while the m independent noises give std ``eta sigma C sqrt(m) / (B m)``: a
  sampled Gaussian step with multiplier ``sigma sqrt(m)`` (Xie et al. 2023 Proposition 2's
  "equivalent noise"). Needs one plain SGD step with the same learning rate for every client
  (the mean of momentum/Adam steps is not a function of the noisy sums), so the plan refuses
  other settings.
* ``paper``: the paper's own accounting (Poisson sampled-Gaussian RDP on the order grid
  {1.1, ..., 10.9, 12, ..., 63}, classic conversion; the grid and conversion that reproduce its
  Tables 4-8): InsDP-FedAvg = the client-updates events above; InsDP-FedSGD = Proposition 2's
  inputs, ``T`` steps at rate ``q_j m / N`` and multiplier ``sigma sqrt(m)``. For ``m < N`` the
  rate ``q_j m / N`` claims amplification by client sampling that does not hold in the worst
  case: a client's *other* records can reveal whether it was selected (give them large aligned
  gradients), after which the record is sampled at rate ``q_j``, not ``q_j m / N``. That number
  is rigorous only for centralised Poisson sampling at rate ``q_j m / N`` and is labelled
  ``reference`` (a lower reference, never a guarantee); with ``m = N`` it is a bound.

Records held by several clients
-------------------------------
Propositions 2-3 assume each record belongs to one client. With an overlapping partition
(``sharing``: a record held by h clients) the record enters every holder's release, so its loss
is the composition of the holders' events (each holder samples its own copy and adds its own
noise): ``client-updates`` and InsDP-FedAvg's ``paper`` scope compose the holders' per-client
events. ``global-model`` (and InsDP-FedSGD's ``paper`` scope) cannot reuse ``sigma sqrt(m)`` once
per holder (the same m noises would be counted h times); instead the m noises of the mean are
split into ``min(h, m)`` disjoint groups of at least ``floor(m / min(h, m))``, one per holder in
the cohort, so the mean is post-processing of ``min(h, m)`` independent sampled Gaussians with
multiplier ``sigma sqrt(floor(m / min(h, m)))``; the plan composes the h holders at that
multiplier (every holder every charged round: conservative when fewer are in the cohort).
h = 1 gives exactly the single-client numbers. The event tree carries these per holder count
(``HeldByClients.by_holders``).

Fixed-size local batches (``sampling = without-replacement``) are accounted under replace-one
neighbours (never as Poisson); the paper's tables assume Poisson batches, which privfl runs with
``training.sampling: poisson``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from privfl._validation import check_choice, check_delta, check_int
from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import (
    HeldByClients,
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    Scope,
    Unit,
)
from privfl.accounting.methods import AccountingOptions, resolve_methods
from privfl.accounting.results import PrivacyResult
from privfl.algorithms.base import as_replace_one
from privfl.algorithms.plan_results import PlanResults
from privfl.data.sharing import RecordSharing
from privfl.fl.cohort_sampler import CohortSampler
from privfl.fl.spec import LocalTrainingSpec
from privfl.mechanisms.secure import randomness_text

__all__ = [
    "CLIENT_SAMPLING",
    "PAPER_ACCOUNTING",
    "PAPER_OPTIONS",
    "RELEASES",
    "InsDpPrivacy",
]

#: How the m clients of a round are chosen.
CLIENT_SAMPLING = ("uniform", "cyclic")
#: What the guarantee's adversary sees (the primary scope).
RELEASES = ("client-updates", "global-model")
#: The paper's accounting options: the legacy order grid and the classic conversion.
PAPER_OPTIONS = AccountingOptions(orders="legacy", conversion="classic")
PAPER_ACCOUNTING = "Xie et al. 2023 (legacy orders, classic conversion)"

_RELEASE_TEXT = {
    "client-updates": "each selected client's model update of every round (so every global "
                      "model): the server need not be trusted",
    "global-model": "the global model of every round; individual client updates are seen only by "
                    "a trusted aggregator (or hidden by secure aggregation)",
}


class InsDpPrivacy(PlanResults):
    """Record-level privacy plan of InsDP-FedSGD / InsDP-FedAvg (see the module docstring).

    Parameters
    ----------
    spec
        Every client's local training (V = ``spec.local_steps``; 1 for FedSGD), the very object
        the trainer runs.
    client_sizes
        ``n_j``, the record counts of the N clients (``q_j = B / n_j``).
    algorithm
        ``"fedsgd"`` (Algorithm 2) or ``"fedavg"`` (Algorithm 3): selects the paper's accounting.
    clients_per_round
        m (``None``: all N clients every round).
    client_sampling
        ``"uniform"`` (m of N at random; every round charged) or ``"cyclic"`` (exact charges).
    release
        ``"client-updates"`` or ``"global-model"`` (FedSGD only): the primary scope.
    delta, accountants, options
        The delta of every (epsilon, delta); privfl's accountants (``rdp``, ``pld``) and their
        options for the primary scope (``None``: privfl's defaults).
    paper_accounting
        Also report the ``paper`` scope.
    seed, secure
        For the card's randomness row (the seed and secure mode of the run).
    sharing
        Which clients hold a common record (``FederatedDataset.record_sharing()``; ``None``:
        disjoint clients).
    """

    unit = "record"
    #: why each scope (the headline's scope advice, :mod:`privfl.runs.headline`)
    scope_notes = {
        "client-updates": "each client's update is released: the server need not be trusted",
        "global-model": "only the mean of the cohort's updates leaves a trusted aggregator or "
                        "secure aggregation",
        "paper": "Xie et al. 2023's own accounting, a lower reference when not every client "
                 "takes part",
    }

    def __init__(
        self,
        spec: LocalTrainingSpec,
        client_sizes: Sequence[int] | np.ndarray,
        *,
        algorithm: str,
        clients_per_round: int | None = None,
        client_sampling: str = "uniform",
        release: str = "client-updates",
        delta: float | None = 1e-5,
        accountants: str | Sequence[str] = ("rdp", "pld"),
        options: AccountingOptions | None = None,
        paper_accounting: bool = True,
        seed: int = 0,
        sharing: RecordSharing | None = None,
    ) -> None:
        if not isinstance(spec, LocalTrainingSpec):
            raise ValueError(f"spec = {spec!r} is not allowed: must be a LocalTrainingSpec")
        self.spec = spec
        sizes = np.asarray(client_sizes)
        if sizes.ndim != 1 or sizes.size < 1:
            raise ValueError(f"client_sizes = {client_sizes!r} is out of range: must be a 1-D "
                             "list of record counts, one per client")
        for j, n in enumerate(sizes.tolist()):
            spec.check_records(n, f"client_sizes[{j}]")
        self.client_sizes = sizes.astype(np.int64)
        self.num_clients = int(sizes.size)
        self.algorithm = check_choice("algorithm", algorithm, ("fedsgd", "fedavg"))
        m = self.num_clients if clients_per_round is None else clients_per_round
        self.clients_per_round = check_int("clients_per_round", m, 1, self.num_clients)
        self.client_sampling = check_choice("client_sampling", client_sampling, CLIENT_SAMPLING)
        self.release = check_choice("release", release, RELEASES)
        if self.release == "global-model":
            if self.algorithm != "fedsgd":
                raise ValueError(
                    "release = 'global-model' is not allowed for InsDP-FedAvg: after V local "
                    "DP-SGD steps only each client's own noise protects its records; use "
                    "'client-updates'")
            if spec.local_steps != 1 or spec.optimizer != "sgd":
                raise ValueError(
                    f"local_steps = {spec.local_steps}, optimizer = {spec.optimizer!r}: release "
                    "= 'global-model' needs one plain SGD step per client (local_steps = 1, "
                    "optimizer = 'sgd'), so that the mean update carries the sum of the m "
                    "clients' noises (Xie et al. 2023 Proposition 2)")
        if self.algorithm == "fedsgd" and spec.local_steps != 1:
            raise ValueError(f"local_steps = {spec.local_steps} is out of range: InsDP-FedSGD "
                             "takes exactly 1 local step per round")
        self.delta = None if delta is None else check_delta("delta", delta)
        self.accountants = resolve_methods(accountants)
        self.options = options
        self.paper_accounting = bool(paper_accounting)
        self.seed = check_int("seed", seed, 0)
        self.sharing = RecordSharing() if sharing is None else sharing
        if not isinstance(self.sharing, RecordSharing):
            raise ValueError(f"sharing = {sharing!r} is not allowed: must be a RecordSharing "
                             "(FederatedDataset.record_sharing())")
        self._cache: dict[tuple[int, bool], list[PrivacyResult]] = {}

    # ------------------------------------------------------------------ the protocol's fields
    @property
    def private(self) -> bool:
        return self.spec.private

    @property
    def secure(self) -> bool:
        return self.spec.secure

    @property
    def primary_scope(self) -> str:
        return self.release

    @property
    def full_participation(self) -> bool:
        """Every client takes part in every round (m = N)."""
        return self.clients_per_round == self.num_clients

    # ------------------------------------------------------------------ cohorts and charges
    @property
    def sampler(self) -> CohortSampler:
        """The random (``uniform``) cohorts' sampler: m of N without replacement."""
        return CohortSampler.fixed_size(self.num_clients, self.clients_per_round)

    def scheduled_cohort(self, round_: int) -> np.ndarray:
        """The cohort of round ``round_`` (1-based) when it is fixed in advance (m = N, or
        ``cyclic``: clients ``(round_-1) m ... round_ m - 1`` modulo N), sorted."""
        round_ = check_int("round", round_, 1)
        if self.full_participation:
            return np.arange(self.num_clients)
        if self.client_sampling != "cyclic":
            raise ValueError("client_sampling = 'uniform' draws its cohorts at random: there is "
                             "no schedule")
        m, n = self.clients_per_round, self.num_clients
        return np.sort(((round_ - 1) * m + np.arange(m)) % n)

    def participations(self, rounds: int) -> np.ndarray:
        """Rounds charged to each client after ``rounds`` rounds (see the module docstring):
        exact for m = N and ``cyclic``, every round for ``uniform``."""
        rounds = check_int("rounds", rounds, 0)
        if self.full_participation or self.client_sampling == "uniform":
            return np.full(self.num_clients, rounds, dtype=np.int64)
        seats = rounds * self.clients_per_round  # cohort positions filled so far
        clients = np.arange(self.num_clients, dtype=np.int64)
        return np.maximum((seats - clients + self.num_clients - 1) // self.num_clients, 0)

    # ------------------------------------------------------------------ events
    def _step(self, records: int, scope: str, holders: int = 1) -> NoisyStep:
        """One local step of a client with ``records`` records as ``scope`` accounts it, when
        the client is one of ``holders`` clients holding the record (see the module
        docstring: the mean's m noises are split among the holders in the cohort)."""
        step = self.spec.privacy_step(records)
        if scope == "client-updates" or self.algorithm == "fedavg":
            return step
        m = self.clients_per_round
        share = m // min(holders, m)  # noises of the mean attributed to each holder
        rate = step.sampling_rate * (m / self.num_clients if scope == "paper" else 1.0)
        return dataclasses.replace(
            step, noise_multiplier=step.noise_multiplier * math.sqrt(share), sampling_rate=rate)

    def _scope(self, scope: str | None) -> str:
        return self.primary_scope if scope is None else check_choice(
            "scope", scope, (*RELEASES, "paper"))

    def _charged(self, rounds: int, scope: str) -> np.ndarray:
        if scope == "paper" and self.algorithm == "fedsgd":
            return np.full(self.num_clients, rounds, dtype=np.int64)  # Prop. 2: T steps
        return self.participations(rounds)

    def _event(self, records: int, charged: int, scope: str, holders: int = 1) -> PrivacyEvent:
        if scope == "paper":  # Proposition 2 assumes the mean is released, Proposition 3 not
            scope_release = "global-model" if self.algorithm == "fedsgd" else "client-updates"
        else:
            scope_release = scope
        return PrivacyEvent(
            ((self._step(records, scope, holders), self.spec.local_steps * charged),),
            neighbouring=Neighbouring(self.spec.default_neighbouring()), unit=Unit.RECORD,
            release=_RELEASE_TEXT[scope_release])

    def client_events(self, rounds: int, scope: str | None = None) -> list[PrivacyEvent]:
        """One record-level event per distinct (n_j, charged rounds) after ``rounds`` rounds,
        for ``scope`` (default: the primary scope); clients charged no round are left out."""
        scope = self._scope(scope)
        charged = self._charged(check_int("rounds", rounds, 0), scope)
        pairs = sorted({(int(n), int(c))
                        for n, c in zip(self.client_sizes, charged, strict=True) if c > 0})
        return [self._event(n, c, scope) for n, c in pairs]

    def replace_one_events(self, rounds: int) -> list[PrivacyEvent]:
        """The primary scope's client events re-read under replace-one neighbours."""
        return as_replace_one(self.client_events(rounds))

    def event(self, rounds: int, scope: str | None = None) -> Scope:
        """What the run releases after ``rounds`` >= 1 rounds, as ``scope`` (default: the
        primary scope) accounts it: the worst record over the clients charged a round, each
        record composing its holders' events (one client when disjoint), every client's event
        for the record's holder count (``by_holders``: only where it differs, the global-model
        and paper scopes of InsDP-FedSGD). :meth:`results` is
        :func:`~privfl.accounting.dispatch.evaluate` of it."""
        rounds = check_int("rounds", rounds, 1)
        scope = self._scope(scope)
        charged = self._charged(rounds, scope)
        # a client charged no round releases nothing: leave it out, and out of holder sets
        keep = np.flatnonzero(charged > 0)
        if not keep.size:
            raise ValueError(f"rounds = {rounds} charges no client: nothing to account")
        position = {int(j): i for i, j in enumerate(keep)}
        sets = tuple(shared for shared in (tuple(position[j] for j in s if j in position)
                                           for s in self.sharing.holder_sets)
                     if len(shared) > 1)
        built: dict[tuple[int, int, int], PrivacyEvent] = {}

        def client_events(holders: int) -> tuple[PrivacyEvent, ...]:
            events = []
            for j in keep:
                key = (int(self.client_sizes[j]), int(charged[j]), holders)
                if key not in built:
                    built[key] = self._event(*key[:2], scope, holders)
                events.append(built[key])
            return tuple(events)

        alone = client_events(1)
        by_holders = tuple((h, events) for h in sorted({len(s) for s in sets})
                           if (events := client_events(h)) != alone)
        return Scope(scope, HeldByClients(alone, self._note(scope), sets, by_holders))

    def _note(self, scope: str) -> str:
        if scope != "paper":
            return ("max over clients of each client's composition (parallel composition)"
                    + ("" if self.full_participation or self.client_sampling == "cyclic" else
                       "; every round charged to every client (cohorts drawn at random)"))
        if self.algorithm == "fedsgd":
            return ("paper's accounting: Proposition 2's inputs (rate q m/N, multiplier "
                    "sigma sqrt(m), T steps) on the sampled-Gaussian RDP")
        return ("paper's accounting: each client's sampled-Gaussian RDP (rate q, multiplier "
                "sigma, V steps per round), max over clients (Proposition 3)")

    # ------------------------------------------------------------------ results
    def _compose(self, rounds: int, full: bool) -> list[PrivacyResult]:
        """Labelled guarantees after ``rounds`` >= 1 rounds: privfl's accountants in the primary
        scope (``accountants``, or those of a per-round row), then (``paper_accounting``) the
        paper's RDP in scope ``paper``, each
        :func:`~privfl.accounting.dispatch.evaluate` of :meth:`event` (results and caching:
        :class:`~privfl.algorithms.plan_results.PlanResults`)."""
        results = [_ordered(r) for r in evaluate(
            self.event(rounds), self.delta, methods=self._accountants(full),
            options=self.options)]
        if self.paper_accounting:
            results += self._paper_results(rounds)
        return results

    def _paper_results(self, rounds: int) -> list[PrivacyResult]:
        results = [_ordered(r, accounting=PAPER_ACCOUNTING) for r in evaluate(
            self.event(rounds, "paper"), self.delta, methods="rdp", options=PAPER_OPTIONS)]
        if self.algorithm == "fedsgd" and not self.full_participation:
            caveat = ("reference, NOT a guarantee: the rate q m/N assumes a client's "
                      "participation is hidden, but its other records can reveal it; rigorous "
                      "only for centralised Poisson sampling at rate q m/N")
            results = [dataclasses.replace(r, kind="reference", note=f"{r.note}; {caveat}")
                       for r in results]
        return results

    # ------------------------------------------------------------------ the card
    def card(self, rounds: int) -> dict[str, Any]:
        """Privacy-card rows after ``rounds`` rounds."""
        rounds = check_int("rounds", rounds, 0)
        spec = self.spec
        sizes = self.client_sizes
        n_text = (f"{int(sizes[0])}" if sizes.min() == sizes.max()
                  else f"{int(sizes.min())}..{int(sizes.max())}")
        m, big_n = self.clients_per_round, self.num_clients
        if self.full_participation:
            cohorts = f"all N = {big_n} clients every round"
        elif self.client_sampling == "cyclic":
            cohorts = (f"m = {m} of N = {big_n} per round, cyclic (public schedule): each client "
                       "is charged the rounds it takes part in")
        else:
            cohorts = (f"m = {m} of N = {big_n} per round, uniformly at random without "
                       "replacement: every round is charged to every client (conservative; no "
                       "amplification by client sampling claimed)")
        randomness = randomness_text(self.secure, self.seed, private=self.private)
        local = (f"V = {spec.local_steps} step(s) of B = {spec.batch_size} ({spec.sampling}), "
                 f"{spec.optimizer} lr {spec.lr:g}")
        if not self.private:
            why = "no clipping, no noise" if spec.clip_norm is None else "clipping without noise"
            return {
                "privacy": f"NONE: non-private baseline ({why}); no guarantee, epsilon = inf",
                "clients": cohorts,
                "local training": local,
                "randomness": randomness,
                "rounds": rounds,
            }
        z = spec.noise_multiplier
        relation = spec.default_neighbouring()
        noise = (f"Gaussian, noise multiplier sigma = {z:g} (std sigma*C = {spec.noise_std:g} on "
                 "each client's sum of clipped gradients, divided by B)")
        if self.release == "global-model":
            noise += (f"; the mean of the m = {m} updates carries sigma*sqrt(m) = "
                      f"{z * math.sqrt(m):.6g} relative to one record")
        charged = self.participations(rounds)
        steps = (f"{spec.local_steps} per charged round; at most {spec.local_steps} * "
                 f"{int(charged.max())} = {spec.local_steps * int(charged.max())} per client")
        rows: dict[str, Any] = {
            "unit": "record (one example of one client)",
            "neighbouring": (
                "replace-one (one record of one client swapped)"
                if relation is Neighbouring.REPLACE_ONE
                else "add/remove one record of one client"),
            "sampling": f"local batches {spec.sampling}, q_j = B/n_j = {spec.batch_size}/"
                        f"{n_text} (q = {spec.batch_size / float(sizes.min()):.6g} for the "
                        "smallest client, the worst)",
            "clients": cohorts,
            "noise": noise,
            "clipping": f"flat L2 per example, C = {spec.clip_norm:g}",
            "steps": steps,
            "delta": self.delta,
            "release": _RELEASE_TEXT[self.release],
            "accounting": "per-client accountants, epsilon = max over clients (parallel "
                          "composition, Xie et al. 2023 Proposition 3)"
                          + ("" if self.sharing.disjoint else "; a record held by several "
                             "clients composes its holders' events"),
            "record multiplicity": self.sharing.describe(),
            "threat model": "clients follow DP-SGD; the batches and the noise must stay secret "
                            "(see randomness)",
            "randomness": randomness,
        }
        if self.paper_accounting:
            rows["paper scope"] = (
                f"{PAPER_ACCOUNTING}: the RDP bound the paper's Tables 4-8 report, beside "
                "privfl's tighter accountants"
                + (" (Proposition 2's rate q m/N: a reference only, m < N)"
                   if self.algorithm == "fedsgd" and not self.full_participation else ""))
        return rows

    def __repr__(self) -> str:
        return (f"InsDpPrivacy(algorithm={self.algorithm!r}, clients={self.num_clients}, "
                f"m={self.clients_per_round}, sampling={self.client_sampling!r}, "
                f"release={self.release!r}, private={self.private})")


def _ordered(result: PrivacyResult, **extras: Any) -> PrivacyResult:
    """``result`` with ``extras`` added after its scope and ``holders`` (a shared record's
    holder count) last: the key order privacy.json has always had for InsDP."""
    own = {k: v for k, v in result.extras.items() if k != "holders"}
    held = {"holders": result.extras["holders"]} if "holders" in result.extras else {}
    return dataclasses.replace(result, extras={**own, **extras, **held})
