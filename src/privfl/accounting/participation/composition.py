"""Random participation composed over T iterations, rigorously: cs and ols as standard
Poisson-subsampled Gaussian events for privfl's RDP and PLD accountants, wcs by its exact
closed-form RDP and its exact PLD mixture ``(1-p) * identity + p * PLD_ols`` (not in the
paper: docs/accountants/random-participation.md, "Composition over T iterations")."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as dp_pld

from privfl._validation import check_choice, check_int, check_positive, check_rate
from privfl.accounting.events import Neighbouring, NoisyStep, PrivacyEvent, Sampling, Unit
from privfl.accounting.methods import AccountingOptions, account
from privfl.accounting.participation.labels import (
    NOTES,
    RELEASE,
    _result,
    sampling_label,
    scheme_sampling,
    setting_extras,
)
from privfl.accounting.participation.setting import SCHEMES, SERVERS, Setting, scheme_kind
from privfl.accounting.pld.accountant import composed_delta, composed_epsilon, poisson_gaussian_pld
from privfl.accounting.rdp import (
    delta_from_rdp,
    epsilon_from_rdp,
    rdp_poisson_gaussian,
    resolve_orders,
)
from privfl.accounting.results import PrivacyResult


def participation_event(
    scheme: str,
    client_rate: float,
    record_rate: float,
    noise: float,
    iterations: int,
    *,
    clip_norm: float = 1.0,
    server: str = "trusted",
) -> PrivacyEvent:
    """The standard privfl event whose accountants compose ``scheme`` exactly.

    * ``cs``: ``iterations`` Poisson-subsampled Gaussian steps at rate p q, noise multiplier
      noise std / C, add/remove, unit record. (A lower reference for random participation.)
    * ``ols``: the same at rate q; its pair dominates random participation's step (and WCS's),
      so the composed bound holds for random participation.

    ``wcs`` has no standard event (use :func:`wcs_rdp`, :func:`wcs_pld`); ``theorem-4.1`` and
    ``per-s1-convexity`` have no dominating pair here.
    """
    scheme = check_choice("scheme", scheme, SCHEMES)
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    z = check_positive("noise", noise) / check_positive("clip_norm", clip_norm)
    steps = check_int("iterations", iterations, minimum=1)
    server = check_choice("server", server, SERVERS)
    if scheme not in ("cs", "ols"):
        raise ValueError(
            f"scheme = {scheme!r} is not allowed: must be 'cs' or 'ols' (only they are standard "
            "Poisson-subsampled Gaussian events; use wcs_rdp / wcs_pld for 'wcs')"
        )
    rate = p * q if scheme == "cs" else q
    return PrivacyEvent(
        ((NoisyStep(z, rate, Sampling.POISSON), steps),),
        neighbouring=Neighbouring.ADD_REMOVE,
        unit=Unit.RECORD,
        release=RELEASE[server],
        description=f"random participation (Hasircioglu and Gunduz 2022) {scheme}: "
        f"{sampling_label(p, q)}",
    )


def wcs_rdp(
    orders: Sequence[float] | np.ndarray,
    client_rate: float,
    record_rate: float,
    noise_multiplier: float,
) -> np.ndarray:
    """RDP of one Weak-Client-Sampling step (participation revealed), add/remove, both directions:
    ``log(1 - p + p exp((a - 1) RDP_psg(a; q, z))) / (a - 1)`` (not in the paper; see the module),
    exact for the revealed pair and an upper bound for random participation (post-processing).
    Cached per setting (a run asks the same curve every round)."""
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    key = tuple(np.asarray(orders, dtype=float).ravel().tolist())
    return _wcs_curve(key, p, q, z).copy()


@functools.lru_cache(maxsize=256)
def _wcs_curve(orders: tuple[float, ...], p: float, q: float, z: float) -> np.ndarray:
    inner = rdp_poisson_gaussian(orders, q, z)
    a = np.asarray(orders, dtype=float)
    x = (a - 1.0) * inner
    if p == 1.0:
        return inner
    with np.errstate(over="ignore", divide="ignore"):
        small = np.log1p(p * np.expm1(np.minimum(x, 1.0)))
        large = np.logaddexp(math.log1p(-p), math.log(p) + x)
    return np.where(x < 1.0, small, large) / (a - 1.0)


def wcs_pld(
    client_rate: float,
    record_rate: float,
    noise_multiplier: float,
    *,
    discretization: float = 1e-4,
) -> dp_pld.PrivacyLossDistribution:
    """Pessimistic PLD of one WCS step: ``(1 - p) * (loss 0) + p * PLD_psg(q, z)`` in both
    directions (privfl's pessimistic connect-the-dots Gaussian PLD, then an exact mixture
    with the identity; the revealed participation bit splits the output, and when client 1 does
    not participate both worlds have the same law, i.e. privacy loss 0)."""
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    z = check_positive("noise_multiplier", noise_multiplier)
    interval = check_positive("discretization", discretization)
    inner = poisson_gaussian_pld(z, q, value_discretization_interval=interval)
    if p == 1.0:
        return inner
    return inner.compute_mixture(dp_pld.identity(interval, pessimistic_estimate=True), p)


def _composed_wcs(
    accountant: str,
    p: float,
    q: float,
    z: float,
    steps: int,
    epsilon: float | None,
    delta: float | None,
    options: AccountingOptions,
) -> tuple[float, float, dict]:
    if accountant == "rdp":
        orders = resolve_orders(options.orders)
        curve = steps * wcs_rdp(orders, p, q, z)
        if delta is not None:
            eps, order = epsilon_from_rdp(orders, curve, delta, options.conversion)
            result = (eps, delta)
        else:
            dlt, order = delta_from_rdp(orders, curve, epsilon, options.conversion)
            result = (epsilon, dlt)
        extras = {"order": order, "conversion": options.conversion}
        if math.isfinite(order) and order == float(np.max(orders)):
            extras["grid_note"] = "optimal order is the largest of the grid"
        return result[0], result[1], extras
    pld = wcs_pld(p, q, z, discretization=options.discretization)
    extras = {"discretization": options.discretization}
    if delta is not None:  # sound tilted composition (dp-accounting's self_compose is not)
        return composed_epsilon(pld, steps, delta), delta, extras
    return epsilon, min(max(composed_delta(pld, steps, epsilon), 0.0), 1.0), extras


def composed_results(
    scheme: str,
    accountants: Sequence[str],
    s: Setting,
    noise_std: float,
    clip_norm: float,
    steps: int,
    epsilon: float | None,
    delta: float | None,
    options: AccountingOptions,
    server: str,
) -> list[PrivacyResult]:
    common = {
        "scheme": scheme,
        "iterations": steps,
        **setting_extras(scheme, s, noise_std, clip_norm, server),
    }
    results = []
    if scheme in ("cs", "ols"):
        event = participation_event(scheme, s.p, s.q, noise_std, steps, clip_norm=clip_norm,
                                    server=server)
        report = account(
            event, delta=delta, epsilon=epsilon, methods=tuple(accountants), options=options
        )
        for r in report.results:
            results.append(
                replace(
                    r,
                    method=f"{scheme}-{r.method}",
                    kind=scheme_kind(scheme) if r.kind == "bound" else r.kind,
                    sampling=scheme_sampling(scheme, s.p, s.q),
                    extras={
                        **common,
                        "accountant": r.method,
                        "event": event.sampling_label,
                        **r.extras,
                    },
                    note=(
                        f"{NOTES[scheme]}; composed over {steps} iterations by privfl's "
                        f"{r.method} accountant on the equivalent event ({event.sampling_label})"
                    ),
                )
            )
        return results
    for accountant in accountants:
        eps, dlt, extras = _composed_wcs(accountant, s.p, s.q, s.z, steps, epsilon, delta, options)
        how = (
            "closed-form WCS RDP"
            if accountant == "rdp"
            else "pessimistic PLD (1-p) * identity + p * PLD_psg(q), dp-accounting"
        )
        results.append(
            _result(
                f"wcs-{accountant}",
                "bound",
                eps,
                dlt,
                sampling=sampling_label(s.p, s.q),
                server=server,
                steps=steps,
                extras={**common, "accountant": accountant, **extras},
                note=f"{NOTES['wcs']}; composed over {steps} iterations with the {how}",
            )
        )
    return results
