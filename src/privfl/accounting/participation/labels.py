"""Random participation (Hasircioglu and Gunduz 2022): the words every result carries - what is
released under each server, what each scheme's number is for random participation, the notes of
per-iteration, composed and calibrated results, the sampling labels and a setting's extras."""

from __future__ import annotations

from privfl.accounting.events import Neighbouring, Unit
from privfl.accounting.participation.setting import Setting
from privfl.accounting.results import Kind, PrivacyResult

RELEASE = {
    "trusted": "every aggregated noisy gradient (trusted server)",
    "untrusted": (
        "every client message (untrusted server: every available client sends each iteration, "
        "non-participants send pure noise N(0, sigma^2 I), participants their clipped sum plus "
        "their own N(0, sigma^2 I))"
    ),
    "untrusted-participants-only": (
        "every client message (untrusted server: only participants send their clipped sum plus "
        "their own N(0, sigma^2 I), so participation is revealed)"
    ),
}


RELATION = {
    "theorem-4.1": (
        "estimate: exact delta of one configuration (all of the client's gradients aligned, "
        "norm C), hence a lower bound on the true delta, not a worst-case bound"
    ),
    "per-s1-convexity": "upper bound (proven, see docs/accountants/random-participation.md)",
    "wcs": "upper bound (participation revealed; exact for that release)",
    "ols": "upper bound (ignores client sampling; exact for p = 1)",
    "cs": (
        "reference (lower bound on the true delta): exact delta of the zero-gradient "
        "configuration; random participation cannot do better, so this is not a guarantee for "
        "Algorithm 1"
    ),
}


#: What a noise calibrated on each scheme means for random participation.
CALIBRATION_NOTES = {
    "theorem-4.1": (
        "estimate: solved on Theorem 4.1's delta, which can be below the true delta; this noise "
        "may NOT meet the target"
    ),
    "per-s1-convexity": "bound: this noise provably meets the target",
    "wcs": "bound: this noise meets the target (participation revealed: conservative)",
    "ols": "bound: this noise meets the target (client sampling ignored: conservative)",
    "cs": (
        "reference: random participation needs at least this noise; it does NOT meet the target "
        "for Algorithm 1 (rigorous only for centralised sampling at rate p q)"
    ),
}


NOTES = {
    "theorem-4.1": (
        "paper's Theorem 4.1 as stated (Eq. 6, forward direction only). Its proof fixes one "
        "aligned-gradient configuration (Eq. 27) instead of maximising over configurations, so "
        "it is that configuration's exact delta: a LOWER bound on the true delta, not an upper "
        "bound; it can fall below CS (Hasircioglu and Gunduz 2022, Theorem 4.1)"
    ),
    "per-s1-convexity": (
        "privfl's rigorous variant: advanced joint convexity, joint convexity over the client's "
        "own "
        "record sampling, aligned (forward) / anti-aligned (reverse) maximal gradients as the "
        "proven worst case of each term; max of both directions"
    ),
    "wcs": "Theorem 5.2 simplified: delta_WCS = p delta_OLS; max of both directions",
    "ols": "Theorem 5.1: Poisson-subsampled Gaussian at rate q; max of both directions",
    "cs": (
        "Corollary 5.3 with the typo fixed (rate p q): a rigorous bound for centralized "
        "shuffling only; for random participation it is a lower reference"
    ),
}


def sampling_label(p: float, q: float) -> str:
    return f"random participation (clients p={p:.6g}, records q={q:.6g})"


def scheme_sampling(scheme: str, p: float, q: float) -> str:
    if scheme == "cs":
        return f"centralized shuffling: poisson (q=p*q={p * q:.6g}); random participation is worse"
    return sampling_label(p, q)


def setting_extras(scheme: str, s: Setting, noise_std: float, clip_norm: float,
                    server: str) -> dict:
    """The setting part of a result's ``extras`` (shared by per-iteration and composed)."""
    return {
        "client_rate": s.p,
        "record_rate": s.q,
        "records": s.d,
        "noise": noise_std,
        "clip": clip_norm,
        "noise_multiplier": s.z,
        "server": server,
        "random_participation": RELATION[scheme],
    }


def _result(method: str, kind: Kind, epsilon: float, delta: float, *, sampling: str,
            server: str, steps: int, extras: dict, note: str) -> PrivacyResult:
    """A labelled result of random participation: record level, add/remove one record, the
    release of ``server``."""
    return PrivacyResult(
        method=method,
        kind=kind,
        epsilon=epsilon,
        delta=delta,
        unit=Unit.RECORD.value,
        neighbouring=Neighbouring.ADD_REMOVE.value,
        sampling=sampling,
        release=RELEASE[server],
        steps=steps,
        extras=extras,
        note=note,
    )
