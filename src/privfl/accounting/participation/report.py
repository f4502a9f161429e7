"""Random participation: the labelled report of every requested scheme, per iteration (cached
per setting: a run asks for the same step every round) and composed over T iterations
(rigorous composition where a dominating pair is known, basic composition otherwise)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache

from privfl._validation import check_choice, check_delta, check_epsilon, check_int
from privfl.accounting.methods import AccountingOptions
from privfl.accounting.participation.composition import composed_results
from privfl.accounting.participation.labels import (
    NOTES,
    RELATION,
    _result,
    sampling_label,
    scheme_sampling,
    setting_extras,
)
from privfl.accounting.participation.per_iteration import both_directions, log_delta
from privfl.accounting.participation.setting import (
    ACCOUNTANTS,
    COMPOSABLE_SCHEMES,
    SERVERS,
    Setting,
    _setting,
    resolve_schemes,
    scheme_kind,
)
from privfl.accounting.participation.theorem41 import log_theorem41
from privfl.accounting.results import PrivacyResult
from privfl.accounting.safe_epsilon import smallest_safe_epsilon


def _per_iteration_result(scheme: str, s: Setting, *rest: object) -> PrivacyResult:
    """One iteration's result of ``scheme`` (``rest``: noise_std, clip_norm, epsilon, delta,
    server, as :func:`_per_iteration_cached` takes them): the same at every round of a run, so it
    is computed once per setting and handed out as a fresh copy (its ``extras`` dict is the
    caller's to change)."""
    result = _per_iteration_cached(scheme, s, *rest)
    return replace(result, extras=dict(result.extras))


@lru_cache(maxsize=256)
def _per_iteration_cached(
    scheme: str,
    s: Setting,
    noise_std: float,
    clip_norm: float,
    epsilon: float | None,
    delta: float | None,
    server: str,
) -> PrivacyResult:
    extras: dict = {
        "scheme": scheme,
        **setting_extras(scheme, s, noise_std, clip_norm, server),
        "direction": "forward only (as stated)" if scheme == "theorem-4.1" else "max of both",
    }
    if delta is not None:
        eps = smallest_safe_epsilon(lambda e: log_delta(scheme, e, s), delta)
        dlt = delta
    else:
        eps = epsilon
        dlt = math.exp(log_delta(scheme, eps, s))
    if math.isfinite(eps):
        forward, reverse = both_directions(scheme, eps, s)
        extras["delta_forward"] = forward
        if scheme != "theorem-4.1":
            extras["delta_reverse"] = reverse
        if scheme == "theorem-4.1":
            extras["z_star"] = log_theorem41(eps, s)[1] * clip_norm
    if server == "untrusted":
        extras["aggregate_noise"] = "N_t sigma^2 per coordinate (every client adds its own)"
    return _result(
        scheme,
        scheme_kind(scheme),
        eps,
        dlt,
        sampling=scheme_sampling(scheme, s.p, s.q),
        server=server,
        steps=1,
        extras=extras,
        note=f"per iteration; {NOTES[scheme]}",
    )


def _basic_composition(
    scheme: str,
    s: Setting,
    noise_std: float,
    clip_norm: float,
    steps: int,
    epsilon: float | None,
    delta: float | None,
    server: str,
) -> PrivacyResult:
    """(T eps, T delta): basic composition of the per-iteration numbers (Dwork et al.)."""
    if delta is not None:
        step_eps = smallest_safe_epsilon(lambda e: log_delta(scheme, e, s), delta / steps)
        eps, dlt = steps * step_eps, delta
        per = {"per_iteration_epsilon": step_eps, "per_iteration_delta": delta / steps}
    else:
        step_dlt = math.exp(log_delta(scheme, epsilon / steps, s))
        eps, dlt = epsilon, min(1.0, steps * step_dlt)
        per = {"per_iteration_epsilon": epsilon / steps, "per_iteration_delta": step_dlt}
    kind = scheme_kind(scheme)
    return _result(
        f"{scheme}-basic",
        kind,
        eps,
        dlt,
        sampling=sampling_label(s.p, s.q),
        server=server,
        steps=steps,
        extras={
            "scheme": scheme,
            "iterations": steps,
            "composition": "basic (T eps, T delta)",
            "server": server,
            "random_participation": RELATION[scheme],
            **per,
        },
        note=(
            f"basic composition of the per-iteration {scheme} numbers over {steps} iterations"
            + (
                "; inherits Theorem 4.1's unsoundness"
                if scheme == "theorem-4.1"
                else "; loose: no dominating pair is derived for this scheme, use "
                "wcs-rdp / wcs-pld for a tight composed bound"
            )
        ),
    )


def participation_report(
    client_rate: float,
    record_rate: float,
    records: int,
    noise: float,
    *,
    clip_norm: float = 1.0,
    epsilon: float | None = None,
    delta: float | None = None,
    iterations: int = 1,
    methods: str | Iterable[str] = "all",
    accountants: Iterable[str] = ACCOUNTANTS,
    server: str = "trusted",
    options: AccountingOptions | None = None,
    basic_composition: bool = True,
) -> list[PrivacyResult]:
    """Privacy of DP-DSGD with random participation: every requested scheme, labelled.

    Give exactly one of ``epsilon`` (each result gives delta) or ``delta`` (each gives epsilon).
    Returns, in the order of ``methods`` (default: :data:`SCHEMES` allowed for ``server``), the
    per-iteration result of each scheme (method = scheme name, ``steps = 1``). With
    ``iterations`` T > 1 it then adds the composed results over T iterations (at the same
    epsilon or delta, now for the whole run): ``ols-rdp``, ``ols-pld``, ``wcs-rdp``, ``wcs-pld``
    (rigorous bounds; ``accountants`` picks rdp / pld), ``cs-rdp``, ``cs-pld`` (kind
    ``"reference"``: rigorous for centralised sampling only, a lower reference here) and
    ``theorem-4.1-basic`` (estimate) / ``per-s1-convexity-basic`` (bound; basic composition,
    left out when ``basic_composition`` is False: each T solves a new root at delta / T).
    Every result carries ``extras["scheme"]`` and its ``steps`` (1 per iteration, else T).

    ``server``: ``"trusted"`` (Algorithm 1), ``"untrusted"`` (the paper's Section 5.5: every
    available client sends each iteration, non-participants pure noise, each adds its own
    N(0, sigma^2 I); the same numbers hold for the server's view, with ``noise`` the per-client
    std) or ``"untrusted-participants-only"`` (participation revealed: only ``wcs`` and ``ols``).
    """
    server = check_choice("server", server, SERVERS)
    s = _setting(client_rate, record_rate, records, noise, clip_norm)
    noise_std, clip_norm = float(noise), float(clip_norm)
    if (epsilon is None) == (delta is None):
        raise ValueError(
            f"epsilon = {epsilon!r}, delta = {delta!r}: give exactly one of epsilon and delta"
        )
    epsilon = None if epsilon is None else check_epsilon("epsilon", epsilon)
    delta = None if delta is None else check_delta("delta", delta)
    steps = check_int("iterations", iterations, minimum=1)
    if not isinstance(basic_composition, bool):
        raise ValueError(f"basic_composition = {basic_composition!r} is not allowed: must be "
                         "True or False")
    schemes = resolve_schemes(methods, server, "methods")
    accountant_names = [accountants] if isinstance(accountants, str) else list(accountants)
    accountant_names = list(
        dict.fromkeys(check_choice("accountants", a, ACCOUNTANTS) for a in accountant_names)
    )
    options = options or AccountingOptions()
    results = [
        _per_iteration_result(scheme, s, noise_std, clip_norm, epsilon, delta, server)
        for scheme in schemes
    ]
    if steps > 1:
        for scheme in schemes:
            if scheme in COMPOSABLE_SCHEMES:
                if accountant_names:
                    results.extend(
                        composed_results(
                            scheme,
                            accountant_names,
                            s,
                            noise_std,
                            clip_norm,
                            steps,
                            epsilon,
                            delta,
                            options,
                            server,
                        )
                    )
            elif basic_composition:
                results.append(
                    _basic_composition(scheme, s, noise_std, clip_norm, steps, epsilon, delta,
                                       server)
                )
    return results
