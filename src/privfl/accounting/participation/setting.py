"""Random participation (Hasircioglu and Gunduz 2022): the schemes, the servers, and a checked
setting ``(p, q, d, z)`` with the argument checks every public query of the package shares."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from privfl._validation import (
    check_choice,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
    check_rate,
)
from privfl.accounting.results import Kind

#: Per-iteration schemes, from the paper's (unsound) Theorem 4.1 to the loosest bound.
SCHEMES = ("theorem-4.1", "per-s1-convexity", "wcs", "ols", "cs")

#: Schemes whose per-iteration mechanism has a known dominating pair (rigorous composition).
COMPOSABLE_SCHEMES = ("cs", "ols", "wcs")

#: ``max`` = the larger of the two directions (what a guarantee needs).
DIRECTIONS = ("max", "forward", "reverse")

#: Release models (Hasircioglu and Gunduz 2022, Sections 3.1 and 5.5; docs/accountants/
#: random-participation.md, "Release models").
SERVERS = ("trusted", "untrusted", "untrusted-participants-only")

#: Accountants used for composition over iterations.
ACCOUNTANTS = ("rdp", "pld")


def scheme_kind(scheme: str) -> Kind:
    """What a scheme's number is for random participation (see
    :mod:`privfl.accounting.participation`):
    ``"estimate"`` for Theorem 4.1, ``"reference"`` (a lower reference, rigorous only for
    centralised sampling at rate p q) for CS, ``"bound"`` for the others."""
    scheme = check_choice("scheme", scheme, SCHEMES)
    if scheme == "theorem-4.1":
        return "estimate"
    if scheme == "cs":
        return "reference"
    return "bound"


#: Schemes that are meaningful for each release model.
_SERVER_SCHEMES = {
    "trusted": SCHEMES,
    "untrusted": SCHEMES,
    "untrusted-participants-only": ("wcs", "ols"),
}


@dataclass(frozen=True)
class Setting:
    p: float  # client participation probability
    q: float  # local record sampling probability
    d: int  # other records of the client holding x'
    z: float  # noise multiplier: noise std / C

    @property
    def pq(self) -> float:
        return self.p * self.q


def _setting(client_rate, record_rate, records, noise, clip_norm) -> Setting:
    p = check_rate("client_rate", client_rate)
    q = check_rate("record_rate", record_rate)
    d = check_int("records", records, minimum=0)
    noise_std = check_positive("noise", noise)
    c = check_positive("clip_norm", clip_norm)
    z = noise_std / c
    if not math.isfinite(z) or z <= 0.0:
        raise ValueError(f"noise / clip_norm = {z!r} is out of range: must be a finite number > 0")
    return Setting(p, q, d, z)


def check_scheme(scheme: object, server: str = "trusted") -> str:
    name = check_choice("scheme", scheme, SCHEMES)
    allowed = _SERVER_SCHEMES[server]
    if name not in allowed:
        raise ValueError(
            f"scheme = {name!r} is not allowed with server = {server!r}: must be one of "
            f"{', '.join(allowed)} (participation is revealed to the server)"
        )
    return name


def _check_direction(direction: object, scheme: str) -> str:
    direction = check_choice("direction", direction, DIRECTIONS)
    if scheme == "theorem-4.1" and direction == "reverse":
        raise ValueError(
            "direction = 'reverse' is not allowed for scheme 'theorem-4.1': the paper's theorem "
            "states only the forward direction (must be 'forward' or 'max')"
        )
    return direction


def check_query(
    scheme: object,
    name: str,
    value: object,
    client_rate: object,
    record_rate: object,
    records: object,
    noise: object,
    clip_norm: object,
    direction: object,
) -> tuple[str, float, Setting, str]:
    """Checked ``(scheme, value, setting, direction)`` of a per-iteration query, in that order;
    ``name`` says whether ``value`` is an ``"epsilon"`` or a ``"delta"``."""
    scheme = check_scheme(scheme)
    value = (check_epsilon if name == "epsilon" else check_delta)(name, value)
    s = _setting(client_rate, record_rate, records, noise, clip_norm)
    return scheme, value, s, _check_direction(direction, scheme)


def resolve_schemes(methods: str | Iterable[str], server: str, name: str) -> tuple[str, ...]:
    names = [methods] if isinstance(methods, str) else list(methods)
    if not names:
        raise ValueError(f"{name} = {methods!r} is out of range: must name at least one scheme")
    allowed = _SERVER_SCHEMES[server]
    out: list[str] = []
    for item in names:
        if item == "all":
            out.extend(x for x in allowed if x not in out)
            continue
        scheme = check_choice(name, item, (*SCHEMES, "all"))
        if scheme not in allowed:
            raise ValueError(
                f"{name} = {scheme!r} is not allowed with server = {server!r}: must be one of "
                f"{', '.join(allowed)} (participation is revealed to the server)"
            )
        if scheme not in out:
            out.append(scheme)
    return tuple(out)
