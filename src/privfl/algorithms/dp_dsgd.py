"""DP distributed SGD with random client participation (Hasircioglu and Gunduz 2022, Algorithm 1).

One iteration ``t`` (a "round" of the runner)::

    P_t  <- each of the N clients independently with probability p       (random participation)
    S_i  <- each record of client i in P_t independently with probability q   (Poisson)
    g_i  <- sum_{s in S_i} clip_C(grad l(w_t, s))          clip_C(g) = g min(1, C / ||g||)
    g^_t <- ( sum_{i in P_t} g_i + noise_t ) / (p q sum_i n_i)       (expected contributing records)
    w_{t+1} <- w_t - eta v_{t+1},  v_{t+1} = mu v_t + g^_t           (server momentum, PyTorch's)

``noise_t`` depends on who adds it (``federated.server``); the accountant sees the matching
release (:func:`privfl.accounting.participation.participation_report`):

``trusted`` (the paper's Algorithm 1)
    the server adds one ``N(0, sigma^2 I)`` to the sum, ``sigma = z C``; the adversary sees the
    noisy aggregates (or the models), never who took part.
``untrusted`` (the paper's section 5.5)
    every available client sends a message every iteration: a participant its ``g_i`` plus its
    own ``N(0, sigma^2 I)``, a non-participant pure ``N(0, sigma^2 I)``. The server sees each
    message, whose law is the trusted pair with the same sigma, so the same numbers hold for
    the server's view; the aggregate carries ``N sigma^2`` (more noise, as the paper says).
``untrusted-participants-only``
    only participants send (``g_i`` plus their own ``N(0, sigma^2 I)``): the server learns who
    took part, so only WCS and OLS apply; the aggregate carries ``|P_t| sigma^2``.
``secure-aggregation``
    every available client sends a message with a noise *share* ``N(0, sigma^2 I / N)``
    (participants add ``g_i``) through secure aggregation (Bonawitz et al. 2017), so the server
    sees only the sum, which carries exactly the trusted server's ``N(0, sigma^2 I)``: the
    trusted analysis applies, provided no client reveals its share to the server and none drops
    out (then the sum would carry less noise than accounted).

The divisor is the *expected* number of contributing records, ``p q sum_i n_i`` (``p N q d``
for equal client sizes ``d``, the paper's Eq. 4); the realised count is never used, so the
scaling is post-processing. Unequal sizes are allowed: the divisor stays the expected count
(an unbiased estimate of the record-weighted mean gradient) and the accountant uses the largest
client (``d = max_i n_i`` other records beside the added one: every rigorous bound is
non-decreasing in d; Theorem 4.1, an estimate, is evaluated there too).

Privacy (record level, add/remove one record; see :class:`DpDsgdPrivacy`): the per-iteration
guarantee of each scheme of the participation accountant (Theorem 4.1 = the paper's formula,
an *estimate*; ``per-s1-convexity``, ``wcs``, ``ols`` = rigorous bounds; ``cs`` = centralised
sampling at rate p q, a lower *reference*) and their composition over the iterations so far,
exactly as :func:`~privfl.accounting.participation.participation_report` composes them.

Everything the guarantee relies on - who participates, which records, the noise - is drawn
from a seeded generator (reproducible experiments) or, in secure mode (``privacy.secure``),
from ``os.urandom``. The monitoring metrics (``participants``, ``records``, ``train_loss``,
``clipped_fraction``) are computed without noise and reveal the secret sampling: they are for
the experimenter, not for release.

A simulated poisoning attack the data carry (Xie et al. 2023; backdoor, label flip, DBA: the
clients only poison data, and no server clips a client's sum, so update scaling is refused)
adds ``attack_success`` / ``attack_loss`` of the global model w_t at the iterations that
evaluate it (NaN at the others), measured on the attack test set without noise.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.func import functional_call

from privfl._validation import (
    check_choice,
    check_delta,
    check_int,
    check_nonnegative,
    check_positive,
    check_range,
    check_rate,
)
from privfl.accounting.dispatch import evaluate
from privfl.accounting.events import RandomParticipationStep
from privfl.accounting.methods import AccountingOptions
from privfl.accounting.participation import (
    ACCOUNTANTS as COMPOSITION_ACCOUNTANTS,
)
from privfl.accounting.participation import COMPOSABLE_SCHEMES, SCHEMES
from privfl.accounting.results import PrivacyResult
from privfl.algorithms.algorithm_support import (
    FlatPredictor,
    as_tensor,
    check_model_and_data,
    check_partition,
    checkpoint_optimizer_state,
    checkpoint_streams,
    checkpoint_tensor,
    restore_streams,
    seeded_generators,
)
from privfl.algorithms.base import RoundAlgorithm
from privfl.algorithms.cohort_stream import CohortStream
from privfl.algorithms.outputs import RELEASED_ACCURACY, UNNOISED_TRAINING
from privfl.algorithms.plan_results import PlanResults
from privfl.attacks.metrics import attack_monitor
from privfl.config.algorithms.dp_dsgd import SERVERS, DpDsgdConfig
from privfl.config.schema import ExperimentConfig, FederatedConfig
from privfl.data.datasets import FederatedDataset
from privfl.fl.cohort_sampler import CohortSampler
from privfl.fl.params import trainable_parameters
from privfl.fl.spec import LocalTrainingSpec
from privfl.fl.trainer import CohortTrainer, cross_entropy_loss
from privfl.fl.unit_sums import (
    RECORD_UNIT,
    clipped_units,
    plain_units,
    record_units,
    unit_bytes,
    units_per_chunk,
)
from privfl.mechanisms.noise import standard_normal_
from privfl.mechanisms.secure import SECURE_RANDOM, randomness_text

__all__ = ["SERVERS", "Cohort", "DpDsgd", "DpDsgdConfig", "DpDsgdPrivacy", "GradientSum"]

#: The participation accountant's release model behind each server.
_ACCOUNTANT_SERVER = {
    "trusted": "trusted",
    "untrusted": "untrusted",
    "untrusted-participants-only": "untrusted-participants-only",
    "secure-aggregation": "trusted",
}
_SECURE_AGGREGATION_RELEASE = (
    "the aggregated noisy gradient only (secure aggregation: every available client sends its "
    "clipped sum, or nothing, plus a noise share N(0, sigma^2 I / N); the server sees only the "
    "sum, which carries N(0, sigma^2 I))"
)
_SECURE_AGGREGATION_NOTE = (
    "secure aggregation: the trusted-server analysis of the sum; assumes no client reveals its "
    "noise share to the server and no client drops out"
)
#: Clients whose noise messages are drawn per block (bounded temporary memory).
_NOISE_BLOCK = 64


def refuse_shared_records(data: FederatedDataset) -> None:
    """Refuse a partition that gives one record to several clients (a private run).

    The random-participation accountants (Hasircioglu and Gunduz 2022) bound one record of one
    client inside one noisy aggregate; a record held by k clients enters the aggregate up to k
    times under the same noise, which none of the schemes describes, so there is no sound
    number to print.
    """
    sharing = data.record_sharing()
    if not sharing.disjoint:
        raise ValueError(
            f"data shares records between clients (up to k = {sharing.max_multiplicity} clients "
            "hold one record): DP-DSGD's random-participation accounting assumes each record "
            "belongs to one client; use a disjoint partition (data.disjoint: true)")


class DpDsgdPrivacy(PlanResults):
    """DP-DSGD's privacy plan: record-level, add/remove, random participation.

    The single copy of everything the guarantee depends on: the training reads its sampling
    rates (:attr:`client_rate`, :attr:`record_rate`), noise (:attr:`noise_std`,
    :meth:`message_noise`), clip norm and divisor (:attr:`expected_records`) from this object,
    and :meth:`results` hands the same numbers to
    :func:`~privfl.accounting.participation.participation_report`.

    Results after ``rounds`` iterations carry ``extras["scope"]``:

    * ``"iteration"``: each scheme's per-iteration (epsilon, delta) (the paper's statement);
    * ``"run"`` (the primary scope: budgets and headline epsilon): the guarantee after
      ``rounds`` iterations - for one iteration the per-iteration results themselves, else the
      composed results of ``participation_report(..., iterations=rounds)``: ``cs`` / ``ols`` /
      ``wcs`` with RDP and PLD (``wcs`` by its exact mixture), ``theorem-4.1`` and
      ``per-s1-convexity`` by basic composition. The headline is the tightest rigorous bound.

    Parameters
    ----------
    client_sizes
        Records of every client (the accountant uses the largest: ``records = max n_i``).
    client_rate, record_rate
        p and q.
    noise_multiplier, clip_norm
        z and C: noise std ``sigma = z C`` on the sum (per message for the untrusted servers).
        ``clip_norm=None`` (and z = 0): non-private (no clipping); ``z = 0`` with a clip norm:
        clipping without noise (not private either).
    server
        One of :data:`SERVERS`.
    secure
        Secure mode: participation, records and noise from ``os.urandom``.
    delta
        The delta of every reported pair.
    schemes, composition
        Participation schemes to report and the accountants that compose them (rdp, pld).
    options
        :class:`~privfl.accounting.methods.AccountingOptions` of the composition.
    seed
        The run's seed (only for the card's randomness row).
    """

    unit = "record"
    primary_scope = "run"
    #: why each scope (the headline's scope advice, :mod:`privfl.runs.headline`)
    scope_notes = {
        "run": "every iteration of the run composed",
        "iteration": "one iteration alone, the paper's statement; not a guarantee for the run",
    }

    def __init__(self, client_sizes: Sequence[int] | np.ndarray, *, client_rate: float,
                 record_rate: float, noise_multiplier: float, clip_norm: float | None,
                 server: str = "trusted", secure: bool = False, delta: float = 1e-5,
                 schemes: str | Sequence[str] = SCHEMES,
                 composition: Sequence[str] = COMPOSITION_ACCOUNTANTS,
                 options: AccountingOptions | None = None, seed: int = 0) -> None:
        sizes = np.asarray(client_sizes)
        if sizes.ndim != 1 or sizes.size < 1 or not np.issubdtype(sizes.dtype, np.integer):
            raise ValueError(f"client_sizes = {client_sizes!r} is not allowed: must be a "
                             "non-empty sequence of record counts")
        for j, n in enumerate(sizes):
            check_int(f"client_sizes[{j}]", int(n), minimum=1)
        self.client_sizes = sizes.astype(np.int64)
        self.num_clients = int(sizes.size)
        #: participation: client i takes part iff u_i < p; the event reads the same p
        self.sampler = CohortSampler.poisson(self.num_clients, client_rate)
        self.client_rate = self.sampler.sampling_rate
        self.record_rate = check_rate("record_rate", record_rate)
        self.noise_multiplier = check_nonnegative("noise_multiplier", noise_multiplier)
        if clip_norm is None:
            if self.noise_multiplier != 0.0:
                raise ValueError(f"noise_multiplier = {noise_multiplier!r} is out of range: must "
                                 "be 0 when clip_norm is None (unbounded sensitivity)")
            self.clip_norm = None
        else:
            self.clip_norm = check_positive("clip_norm", clip_norm)
        self.server = check_choice("server", server, SERVERS)
        if not isinstance(secure, bool):
            raise ValueError(f"secure = {secure!r} is not a bool")
        self.secure = secure
        self.delta = check_delta("delta", delta)
        names = [schemes] if isinstance(schemes, str) else list(schemes)
        if not names:
            raise ValueError("schemes = [] is out of range: must name at least one scheme")
        self.schemes = tuple(dict.fromkeys(check_choice("schemes", s, SCHEMES) for s in names))
        if self.server == "untrusted-participants-only":
            bad = [s for s in self.schemes if s not in ("wcs", "ols")]
            if bad:
                raise ValueError(f"schemes = {list(self.schemes)!r} is not allowed with server = "
                                 "'untrusted-participants-only': must be among wcs, ols")
        comp = [composition] if isinstance(composition, str) else list(composition)
        if not comp:
            raise ValueError("composition = [] is out of range: must name rdp and/or pld")
        self.composition = tuple(dict.fromkeys(
            check_choice("composition", a, COMPOSITION_ACCOUNTANTS) for a in comp))
        self.options = options or AccountingOptions()
        self.seed = seed
        self._cache: dict[tuple[int, bool], list[PrivacyResult]] = {}

    # ------------------------------------------------------------------ what the training uses
    @property
    def private(self) -> bool:
        return self.clip_norm is not None and self.noise_multiplier > 0.0

    @property
    def records(self) -> int:
        """d of the accountant: the largest client's record count (the worst case)."""
        return int(self.client_sizes.max())

    @property
    def expected_records(self) -> float:
        """The divisor ``p q sum_i n_i`` (``p N q d`` for equal sizes d)."""
        return self.client_rate * self.record_rate * float(self.client_sizes.sum())

    @property
    def noise_std(self) -> float:
        """z C (Hasircioglu and Gunduz 2022's sigma): the std the accountant is told (on the
        sum, or per client message)."""
        return 0.0 if self.clip_norm is None else self.noise_multiplier * self.clip_norm

    def message_noise(self, participants: int) -> tuple[int, float]:
        """``(count, std)``: the independent Gaussian vectors whose sum is the iteration's
        noise: one of std sigma (trusted), one per available client of std sigma
        (untrusted) or ``sigma / sqrt(N)`` (secure aggregation), one per participant of std
        sigma (participants only)."""
        noise_std = self.noise_std
        if noise_std == 0.0:
            return 0, 0.0
        if self.server == "trusted":
            return 1, noise_std
        if self.server == "untrusted":
            return self.num_clients, noise_std
        if self.server == "secure-aggregation":
            return self.num_clients, noise_std / math.sqrt(self.num_clients)
        return check_int("participants", participants, 0), noise_std

    @property
    def aggregate_noise_std(self) -> float:
        """Std per coordinate of the noise on the aggregate (expected, for participants-only)."""
        if self.server == "untrusted-participants-only":
            return self.noise_std * math.sqrt(self.client_rate * self.num_clients)
        count, std = self.message_noise(0)
        return std * math.sqrt(count)

    # ------------------------------------------------------------------ what the accountant gets
    def _scoped(self, result: PrivacyResult, scope: str) -> PrivacyResult:
        extras = {**result.extras, "scope": scope}
        if self.server != "secure-aggregation":
            return replace(result, extras=extras)
        extras["server"] = self.server
        note = f"{result.note}; {_SECURE_AGGREGATION_NOTE}" if result.note else (
            _SECURE_AGGREGATION_NOTE)
        return replace(result, release=_SECURE_AGGREGATION_RELEASE, extras=extras, note=note)

    def report(self, rounds: int, full: bool = True) -> list[PrivacyResult]:
        """``participation_report`` for this plan after ``rounds`` >= 1 iterations (``full``
        False: a per-round row's, see :meth:`event`)."""
        return evaluate(self.event(rounds, full), self.delta, options=self.options)

    def event(self, rounds: int, full: bool = True) -> RandomParticipationStep:
        """What ``rounds`` >= 1 iterations release, as ``privfl account participation`` builds
        it too; the ``participation`` accountant answers it. ``full`` False asks only what a
        per-round row carries: the compositions by ``composition`` without pld, and no basic
        composition (:attr:`round_skips`)."""
        return RandomParticipationStep(
            self.client_rate, self.record_rate, self.records, self.noise_std,
            clip_norm=self.clip_norm, iterations=check_int("rounds", rounds, 1),
            schemes=self.schemes, composition=self._accountants(full),
            server=_ACCOUNTANT_SERVER[self.server], basic_composition=full)

    @property
    def accountants(self) -> tuple[str, ...]:
        """The composition accountants (:class:`~privfl.algorithms.plan_results.PlanResults`
        composes them; the schemes are :attr:`schemes`)."""
        return self.composition

    @property
    def round_skips(self) -> tuple[str, ...]:
        """What a per-round row leaves out: every scheme's pld composition and the basic
        compositions (each iteration count recomputes them from scratch)."""
        return (*(f"{s}-pld" for s in self.schemes if s in COMPOSABLE_SCHEMES
                  and "pld" in self.composition),
                *(f"{s}-basic" for s in self._basic_schemes))

    @property
    def _basic_schemes(self) -> tuple[str, ...]:
        return tuple(s for s in self.schemes if s not in COMPOSABLE_SCHEMES)

    def _compose(self, rounds: int, full: bool) -> list[PrivacyResult]:
        """Per-iteration and run-scope guarantees after ``rounds`` >= 1 iterations (results
        and caching: :class:`~privfl.algorithms.plan_results.PlanResults`)."""
        report = self.report(rounds, full)
        per_iteration = [r for r in report if r.steps == 1]
        composed = per_iteration if rounds == 1 else [r for r in report if r.steps > 1]
        return ([self._scoped(r, "iteration") for r in per_iteration]
                + [self._scoped(r, "run") for r in composed])

    def card(self, rounds: int) -> dict[str, Any]:
        """Privacy-card rows after ``rounds`` iterations."""
        p, q, n = self.client_rate, self.record_rate, self.num_clients
        sizes = self.client_sizes
        n_text = (f"{int(sizes[0])}" if sizes.min() == sizes.max()
                  else f"{int(sizes.min())}..{int(sizes.max())}")
        sampling = (f"random participation: each of N = {n} clients joins each iteration with "
                    f"probability p = {p:g}, each of its records with probability q = {q:g} "
                    f"(Poisson, both secret); expected batch p q sum n_i = "
                    f"{self.expected_records:.6g} (the divisor)")
        randomness = randomness_text(self.secure, self.seed, private=self.private)
        if not self.private:
            why = ("no clipping, no noise" if self.clip_norm is None
                   else "clipping without noise")
            return {"privacy": f"NONE: non-private baseline ({why}); no guarantee",
                    "clients": f"N = {n}, n_i = {n_text} records",
                    "sampling": sampling, "iterations": rounds, "randomness": randomness}
        std = self.noise_std
        noise = {
            "trusted": f"Gaussian, sigma = z C = {std:g} on the sum, added once by the server",
            "untrusted": f"Gaussian, sigma = z C = {std:g} added by every available client to "
            f"its message (non-participants send pure noise); aggregate std "
            f"{self.aggregate_noise_std:.6g}",
            "untrusted-participants-only": f"Gaussian, sigma = z C = {std:g} added by every "
            "participant to its message",
            "secure-aggregation": f"Gaussian shares N(0, sigma^2/N), sigma = z C = {std:g}, "
            "one per available client; their sum on the aggregate has std sigma",
        }[self.server]
        release = self._scoped(self.results(1)[0], "run").release
        return {
            "unit": "record (one example of one client)",
            "neighbouring": "add/remove one record",
            "sampling": sampling,
            "noise": f"{noise} (noise multiplier z = {self.noise_multiplier:g}); the sum is "
            f"divided by p q sum n_i = {self.expected_records:.6g}",
            "clipping": f"flat L2 per record, C = {self.clip_norm:g}",
            "records (d)": f"{self.records} (the largest client, worst case)",
            "steps": f"T = {rounds} iterations (composition: {', '.join(self.composition)}; "
            "per-iteration rows have scope 'iteration')",
            "delta": self.delta,
            "release": release,
            "threat model": {
                "trusted": "trusted server; secure channels hide who participates",
                "untrusted": "untrusted server sees every client message; participation hidden "
                "because every available client sends",
                "untrusted-participants-only": "untrusted server sees every message and who "
                "participates (WCS / OLS only)",
                "secure-aggregation": "untrusted server sees only the sum (secure "
                "aggregation); no client reveals its share; no dropouts",
            }[self.server],
            "randomness": randomness,
            "clients": f"N = {n}, n_i = {n_text} records",
        }


# ------------------------------------------------------------------------------- the algorithm
@dataclass
class Cohort:
    """One iteration's secret sampling: participants and the records each one contributes."""

    participants: np.ndarray  #: sorted client indices, the clients with B = 1
    records: list[np.ndarray]  #: per participant, indices into ``data.train`` (possibly empty)

    @property
    def indices(self) -> np.ndarray:
        """All sampled records (indices into ``data.train``)."""
        if not self.records:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate(self.records).astype(np.int64, copy=False)


@dataclass
class GradientSum:
    """The clients' work of one iteration: the (clipped) gradient sum and monitoring values."""

    total: torch.Tensor  #: [d] sum over participants of g_i (no noise yet)
    records: int  #: realised number of contributing records (monitoring only)
    loss: float  #: mean loss over the sampled records (NaN if none)
    clipped_fraction: float  #: fraction of sampled records with norm > C (NaN if none / no clip)


class DpDsgd(RoundAlgorithm):
    """DP-DSGD with random participation over a :class:`~privfl.data.FederatedDataset`.

    Parameters
    ----------
    model
        Architecture; its parameters are w_0 (unless ``init_params`` is given).
    data
        Clients' training records (``data.train_indices``); the global model is evaluated on
        the union of the clients' test sets, or on the whole test set if they have none.
    plan
        :class:`DpDsgdPrivacy`: p, q, z, C, the server model and secure mode. The training
        reads them from this object only.
    server_lr, server_momentum
        eta and mu of the server's heavy-ball step (PyTorch's SGD convention).
    seed
        Seeds participation and record sampling (numpy) and the noise (a torch generator);
        in secure mode (``plan.secure``) those come from ``os.urandom`` instead.
    eval_every, last_round
        Evaluate the global model at iteration 1, every ``eval_every`` iterations and at
        ``last_round``; other iterations report NaN.
    device, eval_batch_size, trainer_options
        Where tensors live; evaluation batch size; options of
        :class:`~privfl.fl.CohortTrainer`.
    stream
        :class:`~privfl.algorithms.cohort_stream.CohortStream`: the memory budget
        (``run.memory_budget``) that sets how many summation units of
        :data:`~privfl.fl.unit_sums.RECORD_UNIT` records one engine call takes (or a fixed
        number of units); the result is the same bits for any (:mod:`privfl.fl.unit_sums`).
    """

    #: why the local work runs in the driver's process, not through privfl.backends'
    #: train_clients (measured on the demo configurations: a round's gradient takes 1-5 ms here,
    #: a sharded call's overhead 70-130 ms); a distributed backend refuses the algorithm
    local_only: ClassVar[str | None] = (
        "a round is one clipped gradient of the sampled records at the server's model "
        "(no local steps), summed in fixed units of records; a shard must be whole "
        "units to keep the result identical, and a round of the shipped configurations "
        "samples a few units of records (Ray would add about 0.1 s a call to 1-5 ms "
        "of work)")

    name: ClassVar[str] = "dp-dsgd"
    title: ClassVar[str] = ("DP distributed SGD with random client participation (Hasircioglu "
                            "and Gunduz 2022)")
    config_class: ClassVar[type[FederatedConfig]] = DpDsgdConfig
    applies_protection: ClassVar[bool] = True  # client-side protection (protection.py)
    metric_labels: ClassVar[dict[str, str]] = {"global_accuracy": "global model (test set)"}
    METRIC_OUTPUTS: ClassVar[dict[str, tuple[bool, str]]] = {
        "global_accuracy": RELEASED_ACCURACY,
        "participants": (False, "the realised number of participating clients: the guarantee "
                         "assumes participation hidden"),
        "records": (False, "the realised number of sampled records: the guarantee assumes "
                    "the sampling hidden"),
        "train_loss": UNNOISED_TRAINING,
        "clipped_fraction": UNNOISED_TRAINING,
    }

    def __init__(
        self,
        model: nn.Module,
        data: FederatedDataset,
        plan: DpDsgdPrivacy,
        *,
        server_lr: float = 0.002,
        server_momentum: float = 0.9,
        seed: int = 0,
        eval_every: int = 1,
        last_round: int | None = None,
        device: str | torch.device = "cpu",
        eval_batch_size: int = 1000,
        trainer_options: dict[str, Any] | None = None,
        init_params: dict[str, torch.Tensor] | None = None,
        stream: CohortStream | None = None,
    ) -> None:
        check_model_and_data(model, data)
        if stream is not None and not isinstance(stream, CohortStream):
            raise ValueError(f"stream = {stream!r} is not allowed: must be a CohortStream")
        self.stream = stream or CohortStream()
        if not isinstance(plan, DpDsgdPrivacy):
            raise ValueError(f"plan = {plan!r} is not allowed: must be a DpDsgdPrivacy")
        if not np.array_equal(plan.client_sizes, data.client_sizes):
            raise ValueError("plan.client_sizes do not match data.client_sizes: build the plan "
                             "from the same data")
        if plan.private:
            refuse_shared_records(data)
        self.plan = plan
        self.data = data
        self.num_clients = data.num_clients
        self.server_lr = check_positive("server_lr", server_lr)
        self.server_momentum = check_range("server_momentum", server_momentum, 0.0, 1.0,
                                           high_open=True)
        self.seed = check_int("seed", seed, 0)
        self.eval_every = check_int("eval_every", eval_every, 1)
        self.last_round = None if last_round is None else check_int("last_round", last_round, 1)
        self.device = torch.device(device)
        self.eval_batch_size = check_int("eval_batch_size", eval_batch_size, 1)
        # the engine: C for clipped_sums, the server's momentum step; its batch fields are not
        # used (the sampling is random participation, drawn here from the plan's p and q)
        self.engine_spec = LocalTrainingSpec(
            local_steps=1, batch_size=1, sampling="poisson", clip_norm=plan.clip_norm,
            noise_multiplier=plan.noise_multiplier, optimizer="momentum", lr=self.server_lr,
            momentum=self.server_momentum, secure=plan.secure,
        )
        self.trainer = CohortTrainer(model, self.engine_spec, **(trainer_options or {}))
        self.dtype = self.trainer.dtype
        self._model = copy.deepcopy(model).to(self.device)  # train mode: plain gradients
        self.predict = FlatPredictor(model, self.trainer.unflatten, self.device,
                                     self.eval_batch_size)
        start = init_params if init_params is not None else trainable_parameters(model)
        self.params = self.trainer.flatten(
            {n: start[n].detach().unsqueeze(0) for n in self.trainer.param_names}
        ).to(self.device)  # w_t, [1, d]
        self.optimizer_state = self.trainer.init_optimizer_state(1, device=self.device)
        self._load_data()
        self.round = 0
        self.global_accuracy = math.nan
        self.rng, self.generator = seeded_generators(self.seed, self.device)
        # a simulated data-poisoning attack the data carry (privfl.robustness): its success
        self.attack = attack_monitor(data, self.dtype, self.device, scaling=False)
        if self.attack is not None:
            self.metric_labels = {**self.metric_labels, **self.attack.metric_labels}

    def _load_data(self) -> None:
        data, dev = self.data, self.device
        self._x = as_tensor(data.train.x, self.dtype, dev)  # the shared pool
        self._y = as_tensor(data.train.y, torch.int64, dev)
        self._owned = [np.asarray(i, dtype=np.int64) for i in data.train_indices]
        tests = [np.asarray(i, dtype=np.int64) for i in (data.test_indices or [])]
        pooled = np.concatenate(tests) if tests and sum(t.size for t in tests) else (
            np.arange(len(data.test)))
        self._test_x = as_tensor(data.test.x[pooled], self.dtype, dev)
        self._test_y = as_tensor(data.test.y[pooled], torch.int64, dev)

    # ------------------------------------------------------------------ construction
    @classmethod
    def privacy_plan(cls, config: ExperimentConfig, data: FederatedDataset) -> DpDsgdPrivacy:
        """The plan alone (no model): the training and ``privfl check-privacy`` both use it."""
        f, p = config.federated, config.privacy
        if p.enabled:
            refuse_shared_records(data)
        return DpDsgdPrivacy(
            data.client_sizes, client_rate=f.client_rate, record_rate=f.record_rate,
            noise_multiplier=p.z, clip_norm=p.clip_norm if p.enabled else None,
            server=f.server, secure=p.secure, delta=p.delta,
            schemes=tuple(p.accountants), composition=tuple(f.composition), seed=config.seed,
        )

    @classmethod
    def from_config(cls, config: ExperimentConfig, data: FederatedDataset) -> DpDsgd:
        """DP-DSGD with everything the configuration says."""
        from privfl.algorithms.builders import build_model, trainer_options

        f = config.federated
        return cls(
            build_model(config, data), data, cls.privacy_plan(config, data),
            server_lr=f.server_lr, server_momentum=f.server_momentum, seed=config.seed,
            eval_every=f.eval_every, last_round=f.rounds, device=config.run.device,
            eval_batch_size=config.run.eval_batch_size,
            trainer_options=trainer_options(config), stream=CohortStream.from_config(config),
        )

    def setup(self) -> dict[str, str]:
        plan = self.plan
        return {
            "model": f"{type(self._model).__name__} ({self.trainer.num_params:,} parameters)",
            "DP-DSGD": f"p = {plan.client_rate:g}, q = {plan.record_rate:g}, server "
            f"{plan.server}, server SGD lr {self.server_lr:g} momentum "
            f"{self.server_momentum:g}, divisor p q sum n_i = {plan.expected_records:.6g}",
            "privacy": (f"record-level, random participation (Hasircioglu and Gunduz 2022), "
                        f"z = {plan.noise_multiplier:g}, C = {plan.clip_norm:g}")
            if plan.private else "none (non-private baseline)",
        }

    # ------------------------------------------------------------------ the four stages
    def _uniforms(self, count: int) -> np.ndarray:
        return SECURE_RANDOM.random(count) if self.plan.secure else self.rng.random(count)

    def select_cohort(self) -> Cohort:
        """Participation ``u_i < p`` per client, then ``u_s < q`` per record of each
        participant (float64 uniforms, 53 random bits; ``os.urandom`` in secure mode)."""
        participants = self.plan.sampler.draw(self._uniforms)
        owned = [self._owned[j] for j in participants]
        keep = self._uniforms(int(sum(o.size for o in owned))) < self.plan.record_rate
        records, lo = [], 0
        for o in owned:
            records.append(o[keep[lo: lo + o.size]])
            lo += o.size
        return Cohort(participants, records)

    def round_info(self, cohort: Cohort) -> dict[str, Any]:
        return {"participants": int(cohort.participants.size),
                "records": int(sum(r.size for r in cohort.records))}

    def local_work(self, cohort: Cohort) -> GradientSum:
        """Sum over participants of their clipped per-record gradient sums at w_t, all
        sampled records of the iteration on the engine together (units of records, as many
        per call as the memory budget allows); with a client-side protection, participant by
        participant, each sum distorted before the server adds it."""
        index = torch.as_tensor(cohort.indices, device=self.device)
        count = int(index.numel())
        if count == 0 and self.protection is None:
            return GradientSum(self._zeros(), 0, math.nan, math.nan)
        if self.protection is None:
            total, loss, clipped = self._record_sums(index, 0)
        else:  # each participant's message distorted (privfl.algorithms.protection)
            total, loss, clipped = self._zeros(), 0.0, 0.0
            for k, records in enumerate(cohort.records, start=1):
                part, part_loss, part_clipped = self._record_sums(
                    torch.as_tensor(records, dtype=torch.long, device=self.device), k)
                total += self.protection.distort(part.unsqueeze(0), self.generator)[0]
                loss, clipped = loss + part_loss, clipped + part_clipped
        if count == 0:
            return GradientSum(total, 0, math.nan, math.nan)
        fraction = clipped / count if self.plan.clip_norm is not None else math.nan
        return GradientSum(total, count, loss / count, fraction)

    def _zeros(self) -> torch.Tensor:
        return torch.zeros(self.trainer.num_params, dtype=self.dtype, device=self.device)

    def _record_sums(self, index: torch.Tensor, domain: int
                     ) -> tuple[torch.Tensor, float, float]:
        """The (clipped) gradient sum ``[d]`` of records ``index`` at w_t, their loss sum and
        the number of clipped records: units of :data:`RECORD_UNIT` records in order, as many
        per engine call as the memory budget allows (:mod:`privfl.fl.unit_sums`; dropout
        masks from the run's seed, the iteration and ``domain``)."""
        if index.numel() == 0:
            return self._zeros(), 0.0, 0.0
        units, mask = record_units(index, RECORD_UNIT)
        per_unit = unit_bytes(self.trainer, self._x[:1], self._y[:1], RECORD_UNIT)
        chunk = units_per_chunk(units.shape[0], per_unit, self.stream.budget(self.device),
                                self.stream.chunk)
        if self.plan.clip_norm is None:
            def unit_sum(u):
                rows = units[u][mask[u]]
                sums, losses = self._plain_sums(self._x[rows], self._y[rows])
                return self.trainer.flatten(sums)[0], losses, torch.ones_like(losses)

            totals = plain_units(self.trainer.num_params, self.device, units.shape[0], chunk,
                                 unit_sum, seed=self.seed, round=self.round, domain=domain)
        else:
            totals = clipped_units(self.trainer, self.params, self._x, self._y, units, mask,
                                   chunk, seed=self.seed, round=self.round, domain=domain)
        return totals.total.result(self.dtype), totals.loss, float(totals.clipped)

    def _plain_sums(self, x: torch.Tensor, y: torch.Tensor):
        """Unclipped gradient sum of one unit of records (the non-private baseline)."""
        leaves = {n: v[0].detach().requires_grad_(True)
                  for n, v in self.trainer.unflatten(self.params).items()}
        with torch.enable_grad():
            losses = cross_entropy_loss(functional_call(self._model, leaves, (x,)), y)
            grads = torch.autograd.grad(losses.sum(), list(leaves.values()), allow_unused=True)
        sums = {n: (torch.zeros_like(v) if g is None else g).unsqueeze(0)
                for (n, v), g in zip(leaves.items(), grads, strict=True)}
        return sums, losses.detach()

    def noise(self, participants: int) -> torch.Tensor:
        """The iteration's total noise: the sum of the plan's independent message noises."""
        count, std = self.plan.message_noise(participants)
        d = self.trainer.num_params
        total = torch.zeros(d, dtype=self.dtype, device=self.device)
        for lo in range(0, count, _NOISE_BLOCK):
            block = torch.empty(min(_NOISE_BLOCK, count - lo), d, dtype=self.dtype,
                                device=self.device)
            standard_normal_(block, self.generator, secure=self.plan.secure)
            total += block.sum(0)
        return total.mul_(std)

    def aggregate(self, cohort: Cohort, updates: GradientSum) -> None:
        """``g^ = (sum g_i + noise) / (p q sum n_i)``, then the server's momentum step."""
        noisy = updates.total + self.noise(int(cohort.participants.size))
        grad = (noisy / self.plan.expected_records).unsqueeze(0)
        self.trainer.optimizer.step_(self.params, grad, self.optimizer_state, self.server_lr)

    def accuracy(self) -> float:
        """Accuracy of the global model on the evaluation set (pooled client test sets)."""
        if not self._test_y.numel():
            return math.nan
        return float((self.predict(self.params[0], self._test_x) == self._test_y)
                     .to(torch.float64).mean())

    def evaluate(self, cohort: Cohort, updates: GradientSum) -> dict[str, Any]:
        r = self.round
        evaluated = r == 1 or r % self.eval_every == 0 or r == self.last_round
        if evaluated:
            self.global_accuracy = self.accuracy()
            accuracy = self.global_accuracy
        else:
            accuracy = math.nan
        metrics = {"global_accuracy": accuracy, "train_loss": updates.loss,
                   "clipped_fraction": updates.clipped_fraction}
        if self.attack is not None:
            metrics.update(self.attack.metrics(self.trainer, self.params[0]) if evaluated
                           else self.attack.unmeasured())
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: model, momentum, every RNG state.

        In secure mode the rounds after a restore draw fresh participation, records and noise
        from ``os.urandom``: they continue the run, never replay it."""
        return {
            "round": self.round,
            "params": self.params.detach().cpu().clone(),
            "optimizer_state": {k: v.detach().cpu().clone()
                                for k, v in self.optimizer_state.items()},
            "global_accuracy": float(self.global_accuracy),
            **checkpoint_streams(self.data, self.rng, self.generator),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (same data partition and model required)."""
        check_partition(state, self.data)
        params = checkpoint_tensor(state, "params", self.params)
        optimizer_state = checkpoint_optimizer_state(state, self.trainer.optimizer, 1,
                                                     self.trainer.num_params, self.device)
        self.round = check_int("round", state["round"], 0)
        self.params = params
        self.optimizer_state = optimizer_state
        self.global_accuracy = float(state["global_accuracy"])
        restore_streams(state, self.rng, self.generator)

    def global_params(self) -> dict[str, torch.Tensor]:
        """The global model as ``name -> tensor`` (copies)."""
        return {n: v[0].clone() for n, v in self.trainer.unflatten(self.params).items()}

    def __repr__(self) -> str:
        plan = self.plan
        return (f"DpDsgd(clients={self.num_clients}, p={plan.client_rate}, "
                f"q={plan.record_rate}, z={plan.noise_multiplier}, server={plan.server!r}, "
                f"round={self.round}, private={plan.private})")
