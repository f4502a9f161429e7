"""Aggregation of client updates, and server-side DP as a wrapper that any aggregation takes.

Client updates arrive as one flat ``[c, d]`` tensor: row ``k`` is the model change
``u_k = w_k - w`` of client ``cohort[k]``. An *aggregation* combines them linearly
(:class:`MeanAggregation`; weights ``0 < a_j <= 1`` per client, all 1 for the unweighted mean)::

    mean(u)          = sum_k a_k u_k / sum_k a_k        (non-private: the realised cohort)
    weighted_sum(u)  = sum_k a_k u_k                    (what a DP wrapper noises)

:class:`ServerSideDp` wraps any such aggregation, as Flower's DP strategy wrappers wrap any
strategy (client-level DP-FedAvg: McMahan et al. 2018, "Learning differentially private
recurrent language models", with its fixed-denominator estimator; UserDP-FedAvg of Xie et al.
2023, Algorithm 1)::

    S_t   <- clip norm of round t: S (fixed), the cohort's median (Xie et al.'s median
             variants, not accounted) or the adaptive estimate (Andrew et al. 2021)
    u~_k  <- clip(u_k)                      flat: u_k min(1, S_t / ||u_k||)
                                            per layer j: u_kj min(1, S_j / ||u_kj||),
                                            sum_j S_j^2 = S_t^2, so ||u~_k|| <= S_t
    step  <- (sum_k a_k u~_k + N(0, (z_u S_t)^2 I_d)) / (E[m] a-bar)

``E[m]`` is the EXPECTED cohort size (``q N`` for Poisson client sampling at rate ``q``, ``m``
for fixed-size cohorts of ``m``) and ``a-bar`` the mean weight over all ``N`` clients, never the
realised cohort or weight: dividing by the realised size would make the denominator depend on
one client's presence (and leak the cohort size). Adding or removing one client changes the
noised sum by at most ``max_k a_k S_t <= S_t``, replacing one by ``2 S_t``, so one round is the
(subsampled) Gaussian mechanism with noise multiplier ``z_u`` on that sum. The noise is one
isotropic draw of std ``z_u S_t`` on every coordinate, also with per-layer clipping
(McMahan et al. 2018's per-layer variant): noise ``z S_j`` per layer instead, as Xie et al.'s
code uses with ``S_j = S`` for every tensor, has total sensitivity ``S sqrt(L)`` for ``L``
tensors and would understate epsilon by that factor.

Adaptive clipping (Andrew et al. 2021, "Differentially private learning with adaptive
clipping", Algorithm 1 with the geometric update; the quantile estimator of TensorFlow
Federated and Flower)::

    b_k   <- 1[clipping leaves u_k unchanged]          (flat: ||u_k|| <= S_t)
    b~    <- (sum_k (b_k - 1/2) + N(0, sigma_b^2)) / E[m] + 1/2    noisy unclipped fraction
    S_t+1 <- S_t exp(-eta_C (b~ - gamma))             towards the gamma-quantile of ||u_k||

The centred bits have add/remove sensitivity 1/2, so the pair (noised update sum, noised
count) is one Gaussian mechanism with noise multiplier
``z = (z_u^-2 + (2 sigma_b)^-2)^(-1/2)`` (Andrew et al. 2021, Theorem 1; under replace-one
both sensitivities double and the same ``z`` results). :func:`effective_noise_multiplier` is
that formula; :func:`update_noise_multiplier` inverts it: the accountant gets ``z`` and the
update noise is ``z_u = (z^-2 - (2 sigma_b)^-2)^(-1/2)``, possible only when ``z < 2 sigma_b``.

Randomness: the noise comes from the seeded ``torch.Generator`` passed in, or with
``secure=True`` from ``os.urandom`` (:func:`privfl.mechanisms.gaussian_noise`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from privfl._validation import (
    check_choice,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability,
    check_range,
)
from privfl.accounting.update_clipping import (
    CLIPPINGS,
    MEDIAN_CLIPPINGS,
    effective_noise_multiplier,
    update_noise_multiplier,
)
from privfl.mechanisms.clipping import clip_factors
from privfl.mechanisms.noise import gaussian_noise

__all__ = [
    "CLIPPINGS",
    "MEDIAN_CLIPPINGS",
    "AdaptiveClipping",
    "ClippedUpdates",
    "DpAggregate",
    "DpRound",
    "LinearAggregation",
    "MeanAggregation",
    "MeanRound",
    "ServerSideDp",
    "UpdateClipping",
    "effective_noise_multiplier",
    "layer_norms",
    "update_noise_multiplier",
]

# --------------------------------------------------------------------------------- aggregation
@runtime_checkable
class LinearAggregation(Protocol):
    """What :class:`ServerSideDp` needs from an aggregation: a weighted sum whose weights are
    at most 1 (so one client moves it by at most the clip norm) and the mean weight over all
    clients (for the expected total weight of a cohort)."""

    num_clients: int
    max_weight: float
    mean_weight: float

    def weighted_sum(self, updates: torch.Tensor, cohort: np.ndarray) -> torch.Tensor: ...

    def client_weights(self, cohort: np.ndarray, like: torch.Tensor) -> torch.Tensor | None: ...

    def mean(self, updates: torch.Tensor, cohort: np.ndarray) -> torch.Tensor: ...


def check_updates(updates: torch.Tensor, cohort: np.ndarray, num_clients: int) -> np.ndarray:
    """``cohort`` as int64 client ids after checking that ``updates`` is ``[c, d]`` with one row
    per client of ``cohort``, each in ``[0, num_clients)``."""
    if not isinstance(updates, torch.Tensor) or updates.dim() != 2:
        raise ValueError("updates must be a [c, d] tensor (one flat update per client)")
    cohort = np.asarray(cohort, dtype=np.int64).reshape(-1)
    if cohort.size != updates.shape[0]:
        raise ValueError(f"cohort has {cohort.size} clients: updates has "
                         f"{updates.shape[0]} rows")
    if cohort.size and (cohort.min() < 0 or cohort.max() >= num_clients):
        raise ValueError(f"cohort holds a client outside [0, {num_clients - 1}]")
    return cohort


class MeanAggregation:
    """The (weighted) mean of client updates.

    Parameters
    ----------
    num_clients
        N, the population the cohorts are drawn from.
    weights
        ``None`` (default): the unweighted mean, every client weight 1. Otherwise N weights in
        ``(0, 1]`` (e.g. :meth:`capped` for McMahan et al. 2018's ``min(n_j / n_cap, 1)``); the
        DP wrapper's sensitivity needs them bounded by 1, so record counts must be capped.
    """

    name = "mean"

    def __init__(self, num_clients: int, weights: Sequence[float] | np.ndarray | None = None):
        self.num_clients = check_int("num_clients", num_clients, 1)
        if weights is None:
            self.weights = None
            self.max_weight = self.mean_weight = 1.0
            return
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (self.num_clients,):
            raise ValueError(f"weights has shape {w.shape}: must be ({self.num_clients},), one "
                             "weight per client")
        if not np.all(np.isfinite(w)) or w.min() <= 0 or w.max() > 1:
            bad = float(w[~(np.isfinite(w) & (w > 0) & (w <= 1))][0])
            raise ValueError(f"weights contains {bad!r}: every weight must be in (0, 1]")
        self.weights = w
        self.max_weight = float(w.max())
        self.mean_weight = float(w.mean())

    @classmethod
    def capped(cls, counts: Sequence[int] | np.ndarray, cap: float) -> MeanAggregation:
        """Weights ``min(n_j / cap, 1)`` from record counts ``n_j`` (McMahan et al. 2018)."""
        cap = check_positive("cap", cap)
        n = np.asarray(counts, dtype=np.float64)
        if n.ndim != 1 or n.size == 0 or not np.all(np.isfinite(n)) or n.min() <= 0:
            raise ValueError(f"counts = {counts!r} is out of range: must be positive counts")
        return cls(n.size, np.minimum(n / cap, 1.0))

    def client_weights(self, cohort: np.ndarray, like: torch.Tensor) -> torch.Tensor | None:
        """The cohort's weights as a ``[c]`` tensor (None for the unweighted mean)."""
        if self.weights is None:
            return None
        return torch.as_tensor(self.weights[np.asarray(cohort, dtype=np.int64)],
                               dtype=like.dtype, device=like.device)

    def _check(self, updates: torch.Tensor, cohort: np.ndarray) -> np.ndarray:
        return check_updates(updates, cohort, self.num_clients)

    def weighted_sum(self, updates: torch.Tensor, cohort: np.ndarray) -> torch.Tensor:
        """``sum_k a_k u_k`` over the rows of ``updates`` (zeros for an empty cohort)."""
        cohort = self._check(updates, cohort)
        weights = self.client_weights(cohort, updates)
        if weights is None:
            return updates.sum(0)
        return weights @ updates

    def mean(self, updates: torch.Tensor, cohort: np.ndarray) -> torch.Tensor:
        """Non-private mean over the realised cohort (refuses an empty one)."""
        cohort = self._check(updates, cohort)
        if cohort.size == 0:
            raise ValueError("cohort is empty: the mean of no updates is undefined")
        weights = self.client_weights(cohort, updates)
        if weights is None:
            return updates.mean(0)
        return (weights @ updates) / weights.sum()

    def __repr__(self) -> str:
        kind = "unweighted" if self.weights is None else "weighted"
        return f"MeanAggregation({kind}, num_clients={self.num_clients})"


# ------------------------------------------------------------------------------------ clipping
def layer_norms(updates: torch.Tensor, sizes: Sequence[int]) -> torch.Tensor:
    """L2 norms ``[c, L]`` of the consecutive column blocks of ``updates`` with ``sizes``."""
    if sum(sizes) != updates.shape[1]:
        raise ValueError(f"layer sizes sum to {sum(sizes)}: updates have {updates.shape[1]} "
                         "columns")
    return torch.stack([block.norm(dim=1) for block in updates.split(list(sizes), dim=1)], 1)


@dataclass(frozen=True)
class ClippedUpdates:
    """Result of :meth:`UpdateClipping.clip`."""

    updates: torch.Tensor  #: [c, d] clipped updates
    thresholds: torch.Tensor  #: [L] per-layer thresholds S_j ([1] for flat clipping)
    clip_norm: float  #: S_t = sqrt(sum_j S_j^2), the sensitivity of one clipped update
    unclipped: torch.Tensor  #: [c] bool, clipping left the update unchanged (b_k)
    norms: torch.Tensor  #: [c] flat L2 norms of the unclipped updates (monitoring)


@dataclass(frozen=True)
class UpdateClipping:
    """How each client's update is clipped (Xie et al. 2023 Figure 2).

    ``kind``:

    * ``"flat"``: the whole update to L2 norm ``S`` (McMahan et al. 2018 FlatClip);
    * ``"per-layer"``: tensor ``j`` to ``S_j = S / sqrt(L)`` for ``L`` tensors (equal split,
      ``sum_j S_j^2 = S^2``; McMahan et al. 2018 PerLayerClip);
    * ``"flat-median"``: flat to ``S_t = min(S, median_k ||u_k||)`` over the round's cohort
      (Geyer et al. 2017 as in Xie et al. 2023);
    * ``"per-layer-median"``: ``S_j = median_k ||u_kj||`` per tensor, scaled down together if
      ``sqrt(sum_j S_j^2) > S``.

    The median variants make the threshold (and so the noise scale) a function of this round's
    updates, which no accountant charges: their guarantees are estimates (Xie et al. 2023 ignore
    this leakage). An empty cohort uses the non-median rule at ``S``. ``layer_sizes`` are the
    numbers of entries of the model's tensors in flat order (needed by the per-layer kinds).
    """

    kind: str = "flat"
    layer_sizes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        check_choice("clipping", self.kind, CLIPPINGS)
        sizes = tuple(check_int("layer_sizes", s, 1) for s in self.layer_sizes)
        object.__setattr__(self, "layer_sizes", sizes)
        if self.per_layer and not sizes:
            raise ValueError(f"layer_sizes = () is out of range: clipping = {self.kind!r} needs "
                             "the sizes of the model's tensors")

    @property
    def per_layer(self) -> bool:
        return self.kind in ("per-layer", "per-layer-median")

    @property
    def median(self) -> bool:
        return self.kind in MEDIAN_CLIPPINGS

    @property
    def num_layers(self) -> int:
        return len(self.layer_sizes) if self.per_layer else 1

    def thresholds(self, norms: torch.Tensor, clip_norm: float) -> tuple[torch.Tensor, float]:
        """Per-layer thresholds ``[L]`` from the cohort's ``[c, L]`` norms and the cap ``S``,
        and their total ``S_t = sqrt(sum_j S_j^2)`` (exactly ``S`` without a median)."""
        cap = check_positive("clip_norm", clip_norm)
        count = norms.shape[0]
        if not self.median or count == 0:
            return norms.new_full((self.num_layers,), cap / math.sqrt(self.num_layers)), cap
        medians = torch.quantile(norms, 0.5, dim=0)  # the midpoint for even counts, as np.median
        total = float(medians.double().norm())
        if total > cap:
            return medians * (cap / total), cap
        return medians, total

    def norms(self, updates: torch.Tensor) -> torch.Tensor:
        """The ``[c, L]`` norms the thresholds apply to (``L = 1`` for flat clipping)."""
        if not isinstance(updates, torch.Tensor) or updates.dim() != 2:
            raise ValueError("updates must be a [c, d] tensor (one flat update per client)")
        return layer_norms(updates, self.layer_sizes if self.per_layer else (updates.shape[1],))

    def clip(self, updates: torch.Tensor, clip_norm: float) -> ClippedUpdates:
        """Clip every row of ``updates`` ``[c, d]``; ``clip_norm`` is ``S`` (the cap for the
        median variants)."""
        norms = self.norms(updates)  # [c, L]
        thresholds, total = self.thresholds(norms, clip_norm)
        return self.clip_to(updates, thresholds, total, norms)

    def clip_to(self, updates: torch.Tensor, thresholds: torch.Tensor, total: float,
                norms: torch.Tensor | None = None) -> ClippedUpdates:
        """Clip every row of ``updates`` to given ``thresholds`` ``[L]`` (total ``S_t``): row by
        row, so a chunk of a cohort is clipped exactly as inside the whole cohort."""
        if norms is None:
            norms = self.norms(updates)
        sizes = self.layer_sizes if self.per_layer else (updates.shape[1],)
        flat_norms = norms.norm(dim=1)
        within = norms <= thresholds  # [c, L]; those rows stay bit-identical (factor exactly 1)
        if self.per_layer:
            tiny = torch.finfo(norms.dtype).tiny
            factors = (thresholds / norms.clamp_min(tiny)).clamp_max(1.0).masked_fill(within, 1.0)
            scale = factors.repeat_interleave(
                torch.as_tensor(sizes, device=updates.device), dim=1)
        elif float(thresholds[0]) > 0:
            scale = clip_factors(norms, float(thresholds[0])).masked_fill(within, 1.0)  # [c, 1]
        else:  # a median of 0: every update is clipped to 0
            scale = torch.zeros_like(norms)
        unclipped = within.all(dim=1)
        return ClippedUpdates(updates * scale, thresholds, total, unclipped, flat_norms)


@dataclass(frozen=True)
class AdaptiveClipping:
    """Andrew et al. 2021's quantile-tracking clip norm (geometric update).

    Parameters
    ----------
    target_quantile
        gamma in ``[0, 1]``: the fraction of updates the clip norm should leave unclipped.
    learning_rate
        eta_C > 0: ``S_t+1 = S_t exp(-eta_C (b~ - gamma))``.
    count_noise
        sigma_b > 0: std of the Gaussian noise on the sum of the centred bits ``b_k - 1/2``
        (Andrew et al. suggest ``E[m] / 20``).
    """

    target_quantile: float = 0.5
    learning_rate: float = 0.2
    count_noise: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_quantile",
                           check_probability("target_quantile", self.target_quantile))
        # 0: the clip norm stays fixed and the noised count is only reported (a private,
        # accounted clipped fraction)
        object.__setattr__(self, "learning_rate",
                           check_nonnegative("learning_rate", self.learning_rate))
        object.__setattr__(self, "count_noise", check_positive("count_noise", self.count_noise))

    def next_clip_norm(self, clip_norm: float, unclipped_fraction: float) -> float:
        """``S exp(-eta_C (b~ - gamma))`` for the noisy unclipped fraction ``b~``."""
        clip_norm = check_positive("clip_norm", clip_norm)
        b = check_range("unclipped_fraction", unclipped_fraction)
        return clip_norm * math.exp(-self.learning_rate * (b - self.target_quantile))


# -------------------------------------------------------------------------- the DP wrapper
@dataclass(frozen=True)
class DpAggregate:
    """One round of :class:`ServerSideDp`."""

    step: torch.Tensor  #: [d] (weighted sum of clipped updates + noise) / expected weight
    clip_norm: float  #: S_t, the sensitivity the noise was scaled to
    noise_std: float  #: z_u S_t, the std of the noise on the sum
    expected_weight: float  #: the fixed denominator E[m] a-bar
    unclipped_estimate: float | None  #: b~ (released; adaptive clipping only)
    next_clip_norm: float  #: S_t+1 (= S_t without adaptive clipping)
    clipped_fraction: float  #: share of the cohort clipped (NOT private; NaN if empty)
    mean_norm: float  #: mean flat update norm before clipping (NOT private; NaN if empty)


class ServerSideDp:
    """Server-side client-level DP around a :class:`LinearAggregation` (see the module doc).

    Parameters
    ----------
    aggregation
        The wrapped aggregation; its weights must be at most 1.
    clipping
        :class:`UpdateClipping` (flat, per-layer, or a median variant).
    noise_multiplier
        z, the EFFECTIVE noise multiplier the accountant gets. Without adaptive clipping the
        update noise is ``z S_t``; with it, ``z_u S_t`` with ``z_u`` from
        :func:`update_noise_multiplier`.
    clip_norm
        S: the clip norm (the initial one with adaptive clipping, the cap with a median
        variant).
    expected_cohort
        E[m]: ``q N`` for Poisson client sampling at rate q, ``m`` for fixed-size cohorts.
    adaptive
        :class:`AdaptiveClipping` settings, or None for a fixed clip norm.
    secure
        Draw the noise from ``os.urandom`` instead of the generator.
    """

    def __init__(
        self,
        aggregation: LinearAggregation,
        clipping: UpdateClipping,
        *,
        noise_multiplier: float,
        clip_norm: float,
        expected_cohort: float,
        adaptive: AdaptiveClipping | None = None,
        secure: bool = False,
    ) -> None:
        if not isinstance(aggregation, LinearAggregation):
            raise ValueError(f"aggregation = {aggregation!r} is not a LinearAggregation "
                             "(weighted_sum, mean, num_clients, max_weight, mean_weight)")
        if not 0.0 < aggregation.max_weight <= 1.0:
            raise ValueError(f"aggregation.max_weight = {aggregation.max_weight!r} is out of "
                             "range: must be in (0, 1] (one client's weighted update must stay "
                             "within the clip norm)")
        if not isinstance(clipping, UpdateClipping):
            raise ValueError(f"clipping = {clipping!r} is not an UpdateClipping")
        if adaptive is not None and not isinstance(adaptive, AdaptiveClipping):
            raise ValueError(f"adaptive = {adaptive!r} is not an AdaptiveClipping")
        if adaptive is not None and clipping.median:
            raise ValueError(f"clipping = {clipping.kind!r} with adaptive clipping: both set the "
                             "threshold; use flat or per-layer with adaptive clipping")
        self.aggregation = aggregation
        self.clipping = clipping
        self.noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
        self.clip_norm = check_positive("clip_norm", clip_norm)
        self.expected_cohort = check_range("expected_cohort", expected_cohort, 0.0,
                                           float(aggregation.num_clients), low_open=True)
        self.adaptive = adaptive
        self.secure = bool(secure)
        self.update_noise = (noise_multiplier if adaptive is None else
                             update_noise_multiplier(noise_multiplier, adaptive.count_noise))

    @property
    def expected_weight(self) -> float:
        """The fixed denominator: expected cohort size times the mean client weight."""
        return self.expected_cohort * self.aggregation.mean_weight

    def __call__(self, updates: torch.Tensor, cohort: np.ndarray,
                 generator: torch.Generator | None = None) -> DpAggregate:
        """Clip, sum, noise once, divide by the expected weight (``updates`` may have 0 rows:
        an empty Poisson cohort still releases the noise). Equals :meth:`begin`, one
        :meth:`DpRound.add` of all rows and :meth:`finish`, bit for bit."""
        self._check_generator(generator)
        norms = self.clipping.norms(updates)
        thresholds, total = self.clipping.thresholds(norms, self.clip_norm)
        round_ = DpRound(self, updates.shape[1], updates.dtype, updates.device, thresholds,
                         total)
        round_.add(updates, cohort, norms)
        return self.finish(round_, generator)

    def _check_generator(self, generator: torch.Generator | None) -> None:
        if not self.secure and not isinstance(generator, torch.Generator):
            raise ValueError(f"generator = {generator!r} is not allowed: must be a "
                             "torch.Generator (or use secure=True)")

    def begin(self, size: int, dtype: torch.dtype = torch.float32,
              device: torch.device | str = "cpu") -> DpRound:
        """A streamed round over updates of ``size`` entries: add the cohort's updates chunk
        by chunk (:meth:`DpRound.add`), then :meth:`finish`. The thresholds are the fixed (or
        adaptive) ones; the median variants need every norm first and refuse streaming."""
        if self.clipping.median:
            raise ValueError(f"clipping = {self.clipping.kind!r} cannot be streamed: its "
                             "threshold is the median over the whole cohort (call the wrapper "
                             "on all updates at once)")
        thresholds, total = self.clipping.thresholds(
            torch.empty(0, self.clipping.num_layers, dtype=dtype, device=device), self.clip_norm)
        return DpRound(self, size, dtype, device, thresholds, total)

    def finish(self, round_: DpRound, generator: torch.Generator | None = None) -> DpAggregate:
        """Noise the round's sum once, divide by the expected weight; adaptive clipping's count
        (see :meth:`__call__`)."""
        self._check_generator(generator)
        total = round_.sum.result(round_.dtype)
        std = self.update_noise * round_.clip_norm
        noise = gaussian_noise(total.shape, std, generator=generator, secure=self.secure,
                               dtype=total.dtype, device=total.device)
        step = (total + noise) / self.expected_weight
        estimate = None
        next_clip = self.clip_norm
        unclipped = round_.unclipped()
        norms = round_.norms()
        if self.adaptive is not None:
            centred = float(unclipped.sum()) - 0.5 * unclipped.numel()
            count_noise = float(gaussian_noise((1,), self.adaptive.count_noise,
                                               generator=generator, secure=self.secure,
                                               dtype=torch.float64, device=total.device)[0])
            estimate = (centred + count_noise) / self.expected_cohort + 0.5
            next_clip = self.adaptive.next_clip_norm(self.clip_norm, estimate)
            self.clip_norm = next_clip
        empty = unclipped.numel() == 0
        return DpAggregate(
            step=step, clip_norm=round_.clip_norm, noise_std=std,
            expected_weight=self.expected_weight, unclipped_estimate=estimate,
            next_clip_norm=next_clip,
            clipped_fraction=math.nan if empty else float((~unclipped).double().mean()),
            mean_norm=math.nan if empty else float(norms.double().mean()),
        )

    def state_dict(self) -> dict[str, float]:
        """The adaptive state (the current clip norm)."""
        return {"clip_norm": float(self.clip_norm)}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.clip_norm = check_positive("state['clip_norm']", state["clip_norm"])

    def __repr__(self) -> str:
        return (f"ServerSideDp({self.aggregation!r}, clipping={self.clipping.kind!r}, "
                f"z={self.noise_multiplier:g}, S={self.clip_norm:g}, "
                f"E[m]={self.expected_cohort:g}, adaptive={self.adaptive is not None})")


class DpRound:
    """One round of :class:`ServerSideDp` in progress: the clipped updates' weighted sum
    (:class:`~privfl.fl.chunked_cohorts.RowSum`: row by row in cohort order, float64) and, per row,
    the unclipped bit and the norm. Chunks must come in cohort order; the result does not
    depend on how the cohort was cut."""

    def __init__(self, dp: ServerSideDp, size: int, dtype: torch.dtype,
                 device: torch.device | str, thresholds: torch.Tensor, clip_norm: float) -> None:
        from privfl.fl.chunked_cohorts import RowSum

        self.dp = dp
        self.dtype = dtype
        self.thresholds = thresholds
        self.clip_norm = float(clip_norm)  #: S_t, the sensitivity of one clipped update
        self.sum = RowSum(size, device)
        self._unclipped: list[torch.Tensor] = []
        self._norms: list[torch.Tensor] = []

    def add(self, updates: torch.Tensor, cohort: np.ndarray,
            norms: torch.Tensor | None = None) -> None:
        """Clip the rows ``updates`` ``[c, d]`` of clients ``cohort`` and add them."""
        cohort = check_updates(updates, cohort, self.dp.aggregation.num_clients)
        clipped = self.dp.clipping.clip_to(updates, self.thresholds, self.clip_norm, norms)
        weights = self.dp.aggregation.client_weights(cohort, updates)
        self.sum.add(clipped.updates, None if weights is None else weights.tolist())
        self._unclipped.append(clipped.unclipped)
        self._norms.append(clipped.norms)

    def unclipped(self) -> torch.Tensor:
        """``[c]`` bool: clipping left the update unchanged (b_k), for the whole cohort."""
        return torch.cat(self._unclipped) if self._unclipped else torch.zeros(0, dtype=torch.bool)

    def norms(self) -> torch.Tensor:
        """``[c]`` flat norms of the unclipped updates (monitoring)."""
        return torch.cat(self._norms) if self._norms else torch.zeros(0)


class MeanRound:
    """The non-private (weighted) mean over the realised cohort, streamed: the weighted sum row
    by row in cohort order (float64) and the total weight."""

    def __init__(self, aggregation: MeanAggregation, size: int,
                 device: torch.device | str = "cpu") -> None:
        from privfl.fl.chunked_cohorts import RowSum

        self.aggregation = aggregation
        self.sum = RowSum(size, device)
        self.weight = 0.0

    def add(self, updates: torch.Tensor, cohort: np.ndarray) -> None:
        cohort = check_updates(updates, cohort, self.aggregation.num_clients)
        weights = self.aggregation.client_weights(cohort, updates)
        w = [1.0] * updates.shape[0] if weights is None else weights.tolist()
        self.sum.add(updates, None if weights is None else w)
        for value in w:  # one by one in cohort order: independent of the chunks
            self.weight += value

    def mean(self, dtype: torch.dtype) -> torch.Tensor:
        """``sum_k a_k u_k / sum_k a_k`` (refuses an empty cohort)."""
        if self.sum.count == 0:
            raise ValueError("cohort is empty: the mean of no updates is undefined")
        return (self.sum.total / self.weight).to(dtype)
