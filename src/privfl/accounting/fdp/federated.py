"""Record-level federated f-DP of PriFedSync with noisy SGD (Zheng et al. 2021, Theorem 2).

Conventions (Zheng et al. 2021, Section 3.2, Algorithm 2 and Theorem 2):

* neighbours differ by **replacing one record** of one client j;
* client j runs K local steps per round on fixed-size batches of B_j records drawn uniformly
  **without replacement** from its n_j records;
* the paper's noise scale sigma is noise std / (2C): the noise std is ``2 * sigma * C`` on the
  *sum* of clipped per-example gradients, so privfl's ``noise_multiplier`` is ``z = 2 * sigma``
  and one unsampled step is G_{1/sigma} = G_{2/z} (privfl takes z everywhere; the paper's sigma
  enters only as the config key ``privacy.sigma`` and ``--paper-sigma``);
* every round counts (K·R steps), also for client-sampling probability p < 1: Theorem 2 drops the
  sampling branch of Lemma 3.8, so p does not enter the guarantee.

Per client the guarantee is the trade-off function C_{B_j/n_j}(G_{1/sigma_j})^{⊗KR}. The paper
reports its CLT limit, an **estimate**::

    mu_j = sqrt(2) * c_j * sqrt(e^{1/sigma_j^2} Phi(1.5/sigma_j) + 3 Phi(-0.5/sigma_j) - 2),
    c_j = (B_j / n_j) * sqrt(K R)

(the main text's sqrt(2 c_j) is a typo; Appendix D and all tables use sqrt(2) c_j). privfl also
computes a rigorous **bound** for the same composition with a pessimistic PLD.

Theorem 2 assumes every record belongs to one client. With ``multiplicity = k`` (a record held
by up to k clients, e.g. an overlapping Dirichlet partition) a record's loss is the composition
of its k holders' mechanisms: the CLT mu is sqrt of the sum of the k largest mu_j^2, and the
numerical bounds compose the worst k clients' events (every choice of k clients is tried over
the distinct client settings).

Scopes: *weak* federated f-DP (any one other client i sees its helper-model stream) is
G_{mu_max}; *strong* (all m - 1 other clients collude) is, as the paper states it,
G_{sqrt(m-1) mu_max}, i.e. the composition over (m - 1)·K·R steps. The paper's proof of the strong
case treats the helper models as independent, which they are not; the strong numbers remain valid
upper bounds because the coalition's view is post-processing of client j's model stream, which is
already covered by the weak guarantee — they are simply very loose (docs/accountants/
federated-fdp.md, "Departures", item 2).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations_with_replacement

from privfl._validation import check_delta, check_int, check_positive, check_rate
from privfl.accounting.events import (
    HeldByClients,
    Neighbouring,
    NoisyStep,
    PrivacyEvent,
    Sampling,
    Scope,
    Scopes,
    Unit,
)
from privfl.accounting.gdp.accountant import fdp_clt_mu
from privfl.accounting.methods import AccountingOptions, resolve_methods
from privfl.accounting.noise_search import (
    RTOL_CLOSED_FORM,
    NoiseOutOfRangeError,
    smallest_noise_search,
)
from privfl.accounting.results import PrivacyResult, zero_rounds

WEAK_RELEASE = "helper-model stream of one other client (weak federated f-DP)"
STRONG_RELEASE = "helper-model streams of all other clients, colluding (strong federated f-DP)"


@dataclass(frozen=True)
class ClientTraining:
    """Local private training of one client in every round (Zheng et al. 2021, Algorithm 2).

    ``noise_multiplier`` is z = noise std / C on the sum of clipped per-example gradients; the
    paper's sigma is z / 2 (``noise_multiplier = 2 sigma``).
    """

    records: int
    batch_size: int
    local_steps: int
    noise_multiplier: float

    def __post_init__(self) -> None:
        check_int("records", self.records, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("local_steps", self.local_steps, minimum=1)
        check_positive("noise_multiplier", self.noise_multiplier)
        if self.batch_size > self.records:
            raise ValueError(
                f"batch_size = {self.batch_size} is out of range: must be in [1, records = "
                f"{self.records}]"
            )

    @property
    def sampling_rate(self) -> float:
        return self.batch_size / self.records

    def step(self) -> NoisyStep:
        """One local DP-SGD step exactly as the accountant sees it."""
        return NoisyStep(
            noise_multiplier=self.noise_multiplier,
            sampling_rate=self.sampling_rate,
            sampling=Sampling.WITHOUT_REPLACEMENT,
        )

    def event(self, rounds: int, *, colluders: int = 1) -> PrivacyEvent:
        """K·R local steps (times ``colluders`` for the paper's strong composition)."""
        rounds = check_int("rounds", rounds, minimum=0)
        colluders = check_int("colluders", colluders, minimum=1)
        release = WEAK_RELEASE if colluders == 1 else STRONG_RELEASE
        return PrivacyEvent(
            ((self.step(), colluders * self.local_steps * rounds),),
            neighbouring=Neighbouring.REPLACE_ONE,
            unit=Unit.RECORD,
            release=release,
        )

    def mu(self, rounds: int) -> float:
        """CLT estimate mu_j of Theorem 2 after ``rounds`` rounds."""
        steps = self.local_steps * check_int("rounds", rounds, minimum=0)
        return fdp_clt_mu(self.sampling_rate, steps, self.noise_multiplier)


@dataclass(frozen=True)
class FederatedSetting:
    """PriFedSync with ``clients`` (one ClientTraining per client) over ``rounds`` rounds."""

    clients: tuple[ClientTraining, ...]
    rounds: int
    client_rate: float = 1.0
    multiplicity: int = 1

    def __post_init__(self) -> None:
        if len(self.clients) < 2:
            raise ValueError(
                f"clients has {len(self.clients)} entries: federated f-DP needs at least 2 clients"
            )
        object.__setattr__(self, "clients", tuple(self.clients))
        check_int("rounds", self.rounds, minimum=0)
        check_rate("client_rate", self.client_rate)
        check_int("multiplicity", self.multiplicity, 1, len(self.clients))

    @classmethod
    def homogeneous(
        cls,
        *,
        clients: int,
        records: int,
        batch_size: int,
        local_steps: int,
        noise_multiplier: float,
        rounds: int,
        client_rate: float = 1.0,
        multiplicity: int = 1,
    ) -> FederatedSetting:
        """``clients`` identical clients (the paper's experiments)."""
        client = ClientTraining(records, batch_size, local_steps, noise_multiplier)
        count = check_int("clients", clients, minimum=2)
        return cls((client,) * count, rounds, client_rate, multiplicity)

    @property
    def distinct_clients(self) -> tuple[ClientTraining, ...]:
        return tuple(dict.fromkeys(self.clients))

    def mu_max(self) -> float:
        """max_j mu_j over clients (Theorem 2, weak scope; estimate); with ``multiplicity``
        k, the composed mu of the worst k holders: sqrt of the sum of the k largest mu_j^2."""
        squares = [client.mu(self.rounds) ** 2 for client in self.worst_holders()]
        return math.sqrt(sum(squares))

    def worst_holders(self) -> list[ClientTraining]:
        """The ``multiplicity`` clients with the largest CLT mu_j (repeats allowed as far as
        clients share a setting)."""
        available = Counter(self.clients)
        ranked = sorted(available, key=lambda c: c.mu(self.rounds), reverse=True)
        worst: list[ClientTraining] = []
        for client in ranked:
            worst += [client] * min(available[client], self.multiplicity - len(worst))
        return worst

    def holder_choices(self) -> list[tuple[ClientTraining, ...]]:
        """Every choice of ``multiplicity`` clients, as multisets of distinct client settings
        (a setting appears at most as often as clients have it)."""
        available = Counter(self.clients)
        return [choice for choice in combinations_with_replacement(self.distinct_clients,
                                                                  self.multiplicity)
                if all(available[c] >= n for c, n in Counter(choice).items())]

    def mu_strong(self) -> float:
        """sqrt(m - 1) mu_max (Theorem 2, strong scope, as the paper states it; estimate)."""
        return math.sqrt(len(self.clients) - 1) * self.mu_max()


#: the note of each scope's worst-client result (the run's plan and ``account fedfdp`` alike)
WORST_NOTE = "max over clients of the per-client composition"
STRONG_NOTE = "paper's strong composition over (m-1)·K·R steps (valid but very loose)"


def federated_event(weak: Sequence[PrivacyEvent], strong: Sequence[PrivacyEvent],
                    holder_sets: Iterable[Sequence[int]] = ()) -> Scopes:
    """What PriFedSync releases, as one event tree: the *weak* scope (one other client sees a
    client's helper-model stream; ``weak[j]`` is client position j's K R steps) and the *strong*
    scope (all m - 1 others collude; ``strong[j]`` its (m - 1) K R steps), each the worst record
    over clients (``holder_sets``: the client positions sharing a record, empty for disjoint
    clients). ``privfl run`` (:class:`privfl.algorithms.prifedsync.PriFedSyncPrivacy`) and
    ``privfl account fedfdp`` (:func:`federated_fdp`) both build it, and
    :func:`privfl.accounting.dispatch.evaluate` answers it."""
    holder_sets = tuple(tuple(h) for h in holder_sets)
    return Scopes((
        Scope("weak", HeldByClients(tuple(weak), WORST_NOTE, holder_sets)),
        Scope("strong", HeldByClients(tuple(strong), f"{WORST_NOTE}; {STRONG_NOTE}",
                                      holder_sets)),
    ))


def setting_event(setting: FederatedSetting) -> Scopes:
    """:func:`federated_event` of ``setting``: its clients' events after ``setting.rounds``
    rounds (at least one: a zero-round setting is accounted as one round); with
    ``multiplicity`` k, every choice of k clients (:meth:`FederatedSetting.holder_choices`)
    holds a record."""
    rounds = max(setting.rounds, 1)
    colluders = len(setting.clients) - 1
    holder_sets = []
    if setting.multiplicity > 1:
        positions: dict[ClientTraining, list[int]] = {}
        for j, client in enumerate(setting.clients):
            positions.setdefault(client, []).append(j)
        for choice in setting.holder_choices():
            holder_sets.append(tuple(j for client, n in Counter(choice).items()
                                     for j in positions[client][:n]))
    return federated_event([c.event(rounds) for c in setting.clients],
                           [c.event(rounds, colluders=colluders) for c in setting.clients],
                           holder_sets)


def federated_fdp(
    setting: FederatedSetting,
    delta: float,
    *,
    methods: str | Iterable[str] = ("gdp-clt", "pld"),
    options: AccountingOptions | None = None,
) -> list[PrivacyResult]:
    """Weak and strong federated guarantees of PriFedSync at ``delta``, one entry per method
    and scope: :func:`privfl.accounting.dispatch.evaluate` of :func:`setting_event`, the very
    path of ``privfl run`` (zero rounds give epsilon 0 with the labels of one round).

    ``gdp-clt`` gives the paper's mu (Theorem 2's CLT limit; estimate); ``pld`` (and ``rdp``)
    give rigorous bounds on the same composition C_{B/n}(G_{2/z})^{⊗KR}.
    """
    from privfl.accounting.dispatch import evaluate

    delta = check_delta("delta", delta)
    results = evaluate(setting_event(setting), delta, methods=resolve_methods(methods),
                       options=options)
    return zero_rounds(results) if setting.rounds == 0 else results


def noise_multiplier_for_mu(
    target_mu: float, *, records: int, batch_size: int, local_steps: int, rounds: int
) -> float:
    """The noise multiplier z whose Theorem 2 CLT mu equals ``target_mu``:
    ``z = 2 sigma`` for the smallest paper sigma (noise std / 2C) with CLT mu <= ``target_mu``,
    to relative 1e-13, by privfl's one noise search over the paper's sigma
    (:mod:`privfl.accounting.noise_search`, sigma in [1e-6, 1e6]).

    Solved on the CLT **estimate**, so z is an estimate too: it is not certified to meet any
    (epsilon, delta) target. ``privfl calibrate fedfdp --mu`` labels it so; for a certified
    noise calibrate on the PLD bound (``privfl calibrate fedfdp --epsilon --delta``, i.e.
    :func:`privfl.accounting.calibrate.solve.calibrate_noise` with ``method="pld"``), and read the
    bound at any noise from :func:`federated_fdp`.
    """
    target_mu = check_positive("target_mu", target_mu)
    client = ClientTraining(records, batch_size, local_steps, 1.0)
    steps = check_int("rounds", rounds, minimum=1) * client.local_steps

    def meets(paper_sigma: float) -> bool:  # searched on the paper's sigma = z / 2
        return fdp_clt_mu(client.sampling_rate, steps, 2.0 * paper_sigma) <= target_mu

    try:
        return 2.0 * smallest_noise_search(meets, rtol=RTOL_CLOSED_FORM)
    except NoiseOutOfRangeError as error:
        reach = "too large" if error.side == "below" else "too small"
        raise ValueError(f"target_mu = {target_mu!r} is out of range: {reach} to reach "
                         f"({error})") from None
