"""Accounting for correlated-noise mechanisms without sampling: DP-FTRL and (Band)MF.

A matrix-factorization mechanism (tree aggregation included) releases ``C x + Z`` with ``Z``
i.i.d. N(0, z^2) per coordinate (clip norm 1). Whatever the decoder B does afterwards is
post-processing, so the whole release — every noisy prefix sum, every model iterate — is **one
Gaussian mechanism** with L2 sensitivity ``s`` = the sensitivity of C under the participation
bound (:mod:`privfl.mechanisms.sensitivity`, computed there and passed here as a number: this
module never imports the mechanisms package). Neighbouring relation: **replace-with-zero**
(zero-out): one client's contributions at its participations replaced by zeros, the relation
of Kairouz et al. 2021 and Choquette-Choo et al. 2023 (dp-accounting's ``REPLACE_SPECIAL``);
a replace-one guarantee follows with sensitivity 2 s. Unit: the client (user-level DP).
Sampling: none; the guarantee rests on the participation bound holding in deployment.

The event node is :class:`~privfl.accounting.events.CorrelatedNoiseRelease` (built by
:mod:`privfl.mechanisms.correlated_privacy` from the same schedule the training samples
cohorts with); the dispatcher answers it with :func:`account_correlated_noise`, registered as
``correlated-noise`` in :mod:`privfl.accounting.registry`.

Three answers, all for ``mu = s / z``:

* ``gdp``: the Gaussian mechanism is exactly mu-GDP, and ``epsilon(delta)`` inverts the exact
  curve ``delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle and Wang 2018,
  "Improving the Gaussian mechanism", Thm 8; Dong, Roth, Su 2019, Cor. 2.13): exact, a bound.
* ``pld``: what the PLD accountant answers for an unsampled Gaussian: the same exact mu-GDP
  curve, read at delta lowered by its relative error allowance 1e-9 (a bound, at most 1e-9
  relative above gdp; :func:`privfl.accounting.gdp.closed_form.gdp_closed_form`, no grid).
* ``rdp``: ``alpha s^2 / (2 z^2)`` (Mironov 2017) converted to (epsilon, delta) (a bound,
  looser); for a single-epoch tree this is dp-accounting's RDP of
  ``SingleEpochTreeAggregationDpEvent`` (``s^2 = ceil(log2(T + 1))``).

**BandMF amplification** (:func:`bandmf_amplified_results`; Choquette-Choo et al. 2023,
"(Amplified) Banded Matrix Factorization", Thm 4): with C lower triangular with ``band`` b
diagonals and column norms at most ``m``, split the clients into b balanced groups; step t
uses only group ``t mod b``, each of whose clients joins independently with probability q
(Poisson). A client then joins only steps ``i, i + b, i + 2b, ...`` (``k = ceil(T / b)`` of
them); its columns of C have disjoint row supports (band b), so the rows of ``C x + Z`` that it
influences split into k blocks, each touched by one of its steps only. The adversary's view is
thus (adaptively) the composition of k Poisson-subsampled Gaussian mechanisms with rate q and
noise multiplier ``z / m``: DP-SGD's accounting for k steps. It holds only where the
deployment guarantees the groups and the secret Poisson sampling; the relation is then
add/remove-equivalent zero-out (the Poisson PLD of privfl is for add/remove, which equals
zero-out for the subsampled Gaussian).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privfl._validation import check_delta, check_epsilon, check_int, check_positive, check_rate
from privfl.accounting.events import CorrelatedNoiseRelease, Neighbouring
from privfl.accounting.gdp.accountant import gdp_epsilon, gdp_mu_for
from privfl.accounting.gdp.closed_form import CLOSED_FORM, gdp_closed_form
from privfl.accounting.noise_search import RTOL, NoiseOutOfRangeError, smallest_noise_search
from privfl.accounting.pld.accountant import composed_epsilon, poisson_gaussian_pld
from privfl.accounting.rdp import epsilon_from_rdp, rdp_gaussian, rdp_poisson_gaussian
from privfl.accounting.results import PrivacyResult

#: the neighbouring relation of every number here (one client's contributions zeroed)
NEIGHBOURING = Neighbouring.REPLACE_WITH_ZERO.value
#: default RDP orders
ORDERS = tuple([1.25, 1.5, 1.75, *range(2, 64), 80, 128, 256, 512, 1024])
METHODS = ("gdp", "pld", "rdp")


def _result(
    method: str,
    kind: str,
    epsilon: float,
    delta: float,
    *,
    steps: int,
    sampling: str,
    release: str,
    note: str = "",
    **extras: object,
) -> PrivacyResult:
    return PrivacyResult(
        method=method,
        kind=kind,  # type: ignore[arg-type]
        epsilon=float(epsilon),
        delta=float(delta),
        unit="client",
        neighbouring=NEIGHBOURING,
        sampling=sampling,
        release=release,
        steps=steps,
        extras=dict(extras),
        note=note,
    )


def gaussian_mechanism_results(
    noise_multiplier: float,
    sensitivity: float,
    delta: float,
    *,
    steps: int,
    participation: str,
    release: str = "every noisy prefix sum (every model iterate)",
    methods: Sequence[str] = METHODS,
    orders: Sequence[float] = ORDERS,
) -> list[PrivacyResult]:
    """(epsilon, delta) of one Gaussian mechanism with ``mu = sensitivity / noise_multiplier``.

    ``participation`` is the participation bound's label (it becomes the sampling label:
    ``"none (participation bound: ...)"``); ``sensitivity`` must be exact or an upper bound
    (say which in ``participation`` or via the caller's label). Returns one labelled result per
    method in ``methods`` (``gdp``, ``pld``, ``rdp``).
    """
    z = check_positive("noise_multiplier", noise_multiplier)
    s = check_positive("sensitivity", sensitivity)
    delta = check_delta("delta", delta)
    steps = check_int("steps", steps, minimum=1)
    if not isinstance(participation, str) or not participation:
        raise ValueError(f"participation = {participation!r}: must be a non-empty label")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"methods = {list(methods)!r}: allowed values are {', '.join(METHODS)}")
    mu = s / z
    sampling = f"none (participation bound: {participation})"
    common = {"steps": steps, "sampling": sampling, "release": release}
    results = []
    for method in methods:
        if method == "gdp":
            eps = gdp_epsilon(delta, mu)
            results.append(
                _result(
                    "gdp (exact Gaussian)",
                    "bound",
                    eps,
                    delta,
                    **common,
                    mu=mu,
                    sensitivity=s,
                    noise_multiplier=z,
                )
            )
        elif method == "pld":
            eps, _ = gdp_closed_form(mu, delta=delta)
            results.append(
                _result(
                    "pld", "bound", eps, delta, **common, mu=mu, sensitivity=s,
                    noise_multiplier=z, closed_form=CLOSED_FORM,
                )
            )
        else:
            alphas = np.asarray(orders, dtype=float)
            eps, order = epsilon_from_rdp(alphas, rdp_gaussian(alphas, z, s), delta)
            results.append(
                _result(
                    "rdp",
                    "bound",
                    eps,
                    delta,
                    **common,
                    order=order,
                    mu=mu,
                    sensitivity=s,
                    noise_multiplier=z,
                )
            )
    return results


def tree_aggregation_results(
    steps: int,
    noise_multiplier: float,
    delta: float,
    *,
    trees: int = 1,
    methods: Sequence[str] = METHODS,
) -> list[PrivacyResult]:
    """DP-FTRL with ``trees`` tree restarts of ``steps`` each, one participation per tree:
    ``s = sqrt(trees * ceil(log2(steps + 1)))`` (Kairouz et al. 2021)."""
    steps = check_int("steps", steps, minimum=1)
    trees = check_int("trees", trees, minimum=1)
    s = math.sqrt(trees * steps.bit_length())
    label = (
        f"at most 1 participation per tree of {steps} rounds, {trees} tree(s); sensitivity exact"
    )
    return gaussian_mechanism_results(
        noise_multiplier, s, delta, steps=steps * trees, participation=label, methods=methods
    )


def calibrate_noise_multiplier(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest z with ``(epsilon, delta)``: ``z = s / mu*``, mu* the largest mu whose exact
    GDP curve meets the target (:func:`~privfl.accounting.gdp.accountant.gdp_mu_for`)."""
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon == 0.0:
        raise ValueError("epsilon = 0: must be > 0 for a Gaussian mechanism")
    delta = check_delta("delta", delta)
    s = check_positive("sensitivity", sensitivity)
    mu = gdp_mu_for(epsilon, delta)
    z = s / mu
    # safe side: nudge up until the exact epsilon is within the target
    step = 1e-12
    while gdp_epsilon(delta, s / z) > epsilon:
        z *= 1.0 + step
        step *= 2.0
    return z


def bandmf_amplified_results(
    steps: int,
    band: int,
    sampling_rate: float,
    noise_multiplier: float,
    delta: float,
    *,
    max_column_norm: float = 1.0,
    methods: Sequence[str] = ("pld", "rdp"),
    orders: Sequence[float] = ORDERS,
) -> list[PrivacyResult]:
    """BandMF with amplification (module docstring): k = ceil(T / b) Poisson-subsampled
    Gaussian steps with rate q and noise multiplier ``z / max_column_norm``."""
    steps = check_int("steps", steps, minimum=1)
    band = check_int("band", band, minimum=1)  # band > steps: one step per client
    q = check_rate("sampling_rate", sampling_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    m = check_positive("max_column_norm", max_column_norm)
    delta = check_delta("delta", delta)
    unknown = [x for x in methods if x not in ("pld", "rdp")]
    if unknown or not methods:
        raise ValueError(f"methods = {list(methods)!r}: allowed values are pld, rdp")
    k = -(-steps // band)
    effective = z / m
    sampling = (
        f"cyclic Poisson (q={q:.6g}) of clients within {band} balanced groups, group "
        f"t mod {band} at step t ({k} steps per client)"
    )
    common = {
        "steps": steps,
        "sampling": sampling,
        "release": "every noisy prefix sum (every model iterate)",
    }
    results = []
    for method in methods:
        if method == "pld":
            eps = composed_epsilon(poisson_gaussian_pld(effective, q), k, delta)
            results.append(
                _result(
                    "pld (BandMF amplification)",
                    "bound",
                    eps,
                    delta,
                    **common,
                    participations=k,
                    effective_noise_multiplier=effective,
                )
            )
        else:
            alphas = np.asarray(orders, dtype=float)
            alphas = alphas[alphas > 1] if q == 1 else alphas[alphas >= 2]
            curve = k * rdp_poisson_gaussian(alphas, q, effective)
            eps, order = epsilon_from_rdp(alphas, curve, delta)
            results.append(
                _result(
                    "rdp (BandMF amplification)",
                    "bound",
                    eps,
                    delta,
                    **common,
                    participations=k,
                    effective_noise_multiplier=effective,
                    order=order,
                )
            )
    return results


def calibrate_bandmf_noise(
    epsilon: float,
    delta: float,
    steps: int,
    band: int,
    sampling_rate: float,
    *,
    max_column_norm: float = 1.0,
) -> float:
    """Smallest z (to relative 1e-4) whose amplified BandMF PLD epsilon is <= ``epsilon``, by
    privfl's one noise search (:mod:`privfl.accounting.noise_search`: z in [1e-6, 1e6],
    bisection in log z; the returned z meets the target when re-evaluated)."""
    epsilon = check_epsilon("epsilon", epsilon)
    if epsilon == 0.0:
        raise ValueError("epsilon = 0: must be > 0 for a Gaussian mechanism")

    def meets(z: float) -> bool:
        result = bandmf_amplified_results(
            steps,
            band,
            sampling_rate,
            z,
            delta,
            max_column_norm=max_column_norm,
            methods=("pld",),
        )[0]
        return result.epsilon <= epsilon

    try:
        return smallest_noise_search(meets, rtol=RTOL)
    except NoiseOutOfRangeError as error:
        raise ValueError(f"epsilon = {epsilon!r} is out of range: {error}") from None


def account_correlated_noise(
    node: CorrelatedNoiseRelease, delta: float, options: object = None
) -> list[PrivacyResult]:
    """The ``correlated-noise`` node accountant: :func:`bandmf_amplified_results` when the node
    carries BandMF's amplification (``sampling_rate < 1``; methods pld, rdp), else
    :func:`gaussian_mechanism_results` on the node's sensitivity. ``options`` is unused (the
    orders are :data:`ORDERS`)."""
    if not isinstance(node, CorrelatedNoiseRelease):
        raise ValueError(f"node = {node!r} is not allowed: must be a CorrelatedNoiseRelease")
    if node.neighbouring is not Neighbouring.REPLACE_WITH_ZERO:
        raise ValueError(f"node.neighbouring = {node.neighbouring.value!r} is not allowed: these "
                         "accountants are for replace-with-zero (double the sensitivity for "
                         "replace-one)")
    if node.sampling_rate < 1.0:
        return bandmf_amplified_results(
            node.steps, node.band, node.sampling_rate, node.noise_multiplier, delta,
            max_column_norm=node.max_column_norm,
            methods=tuple(m for m in node.methods if m != "gdp"))
    return gaussian_mechanism_results(
        node.noise_multiplier, node.sensitivity, delta, steps=node.steps,
        participation=node.participation, methods=node.methods)
