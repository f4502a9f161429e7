"""Clipping of client updates as the accountant sees it: which variants are accounted, and the
one Gaussian mechanism of adaptive clipping (Andrew et al. 2021, "Differentially private
learning with adaptive clipping", Theorem 1).

Torch-free, so that a configuration naming these settings (``federated.clipping``,
``federated.count_noise`` of DP-FedAvg) is checked before torch is imported; the aggregation
that applies them is :mod:`privfl.fl.aggregation`, which re-exports these names.

The noised update sum (noise multiplier ``z_u``) and the noised, centred unclipped count (std
``sigma_b``, add/remove sensitivity 1/2) form one Gaussian mechanism with noise multiplier
``z = (z_u^-2 + (2 sigma_b)^-2)^(-1/2)`` (:func:`effective_noise_multiplier`);
:func:`update_noise_multiplier` inverts it, possible only when ``z < 2 sigma_b``.
"""

from __future__ import annotations

from privfl._validation import check_positive

__all__ = ["CLIPPINGS", "MEDIAN_CLIPPINGS", "effective_noise_multiplier",
           "update_noise_multiplier"]

#: Clipping of client updates (Xie et al. 2023 Figure 2: flat, per-layer and their medians).
CLIPPINGS = ("flat", "per-layer", "flat-median", "per-layer-median")
#: Variants whose threshold is the round cohort's median norm (not covered by the accountant).
MEDIAN_CLIPPINGS = ("flat-median", "per-layer-median")


# --------------------------------------------------------------------- Andrew et al.'s formula
def effective_noise_multiplier(update_noise: float, count_noise: float) -> float:
    """``z = (z_u^-2 + (2 sigma_b)^-2)^(-1/2)``: the one Gaussian mechanism equivalent to
    noising the update sum with multiplier ``z_u`` and the centred unclipped count with std
    ``sigma_b`` (Andrew et al. 2021, Theorem 1)."""
    z_u = check_positive("update_noise", update_noise)
    sigma_b = check_positive("count_noise", count_noise)
    return (z_u**-2 + (2.0 * sigma_b) ** -2) ** -0.5


def update_noise_multiplier(noise_multiplier: float, count_noise: float) -> float:
    """The update noise ``z_u = (z^-2 - (2 sigma_b)^-2)^(-1/2)`` that, together with count noise
    ``sigma_b``, spends exactly the effective noise multiplier ``z`` (inverse of
    :func:`effective_noise_multiplier`). Requires ``z < 2 sigma_b``."""
    z = check_positive("noise_multiplier", noise_multiplier)
    sigma_b = check_positive("count_noise", count_noise)
    if z >= 2.0 * sigma_b:
        raise ValueError(
            f"noise_multiplier = {z!r} is out of range for count_noise = {sigma_b!r}: adaptive "
            f"clipping needs noise_multiplier < 2 * count_noise = {2.0 * sigma_b:g} (the "
            "count alone spends (2 count_noise)^-2 of the budget z^-2; raise count_noise or "
            "lower noise_multiplier)"
        )
    return (z**-2 - (2.0 * sigma_b) ** -2) ** -0.5
