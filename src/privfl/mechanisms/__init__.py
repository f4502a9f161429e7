"""Privacy mechanisms: flat per-example clipping, Gaussian noise, batch sampling.

* :mod:`~privfl.mechanisms.clipping` — ``clip_factors``, ``clip_and_sum``,
  ``per_example_norms`` (flat L2 clipping over all parameters).
* :mod:`~privfl.mechanisms.noise` — ``add_gaussian_noise`` (std ``z C`` on the sum, divided by
  the fixed expected batch size), ``gaussian_noise``, ``standard_normal_``, and
  ``secure_standard_normal`` (``os.urandom`` + Box–Muller in float64).
* :mod:`~privfl.mechanisms.sampling` — ``fixed_size_sample`` (B of n without replacement),
  ``poisson_sample`` (rate q, variable size, may be empty), ``sample_batch``, ``pad_batches``
  (index padding + masks for ragged cohorts), ``secure_generator``; every sampler takes a
  seeded ``torch.Generator`` or :data:`SECURE_RANDOM`.
* :mod:`~privfl.mechanisms.secure` — ``SecureRandom`` / ``SECURE_RANDOM`` and
  ``secure_uniform``: uniforms straight from ``os.urandom`` for secure mode's sampling
  decisions (batches, cohorts).

The federated training engine (:mod:`privfl.fl`) uses exactly these definitions, and
:meth:`privfl.fl.LocalTrainingSpec.privacy_step` describes them to the accountant.

Correlated noise without sampling (numpy/scipy only, never torch):

* :mod:`~privfl.mechanisms.tree` — tree aggregation for prefix sums (Kairouz et al. 2021).
* :mod:`~privfl.mechanisms.factorization` — matrix-factorization mechanisms ``A = B C``, their
  workloads, errors and optimiser (Denisov et al. 2022; Choquette-Choo et al. 2023).
* :mod:`~privfl.mechanisms.toeplitz` — banded Toeplitz encoders for long horizons (FFT series).
* :mod:`~privfl.mechanisms.banded_noise` — the streaming correlated-noise generator.
* :mod:`~privfl.mechanisms.sensitivity` — participation schemes and the sensitivity of ``C``.
* :mod:`~privfl.mechanisms.correlated_privacy` — (C, participation) to labelled privacy numbers.

The names below load their module on first use (PEP 562), so importing one of the numpy-only
modules above does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> the module that defines it
_NAMES = {
    "clip_and_sum": "clipping",
    "clip_factors": "clipping",
    "per_example_norms": "clipping",
    "add_gaussian_noise": "noise",
    "gaussian_noise": "noise",
    "secure_standard_normal": "noise",
    "standard_normal_": "noise",
    "BATCH_SAMPLING": "sampling",
    "fixed_size_sample": "sampling",
    "pad_batches": "sampling",
    "poisson_sample": "sampling",
    "sample_batch": "sampling",
    "secure_generator": "sampling",
    "SECURE_RANDOM": "secure",
    "SecureRandom": "secure",
    "secure_uniform": "secure",
}


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (keeps the numpy-only modules torch-free)."""
    if name in _NAMES:
        module = importlib.import_module(f"privfl.mechanisms.{_NAMES[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'privfl.mechanisms' has no attribute {name!r}")


__all__ = [
    "BATCH_SAMPLING",
    "SECURE_RANDOM",
    "SecureRandom",
    "add_gaussian_noise",
    "clip_and_sum",
    "clip_factors",
    "fixed_size_sample",
    "gaussian_noise",
    "pad_batches",
    "per_example_norms",
    "poisson_sample",
    "sample_batch",
    "secure_generator",
    "secure_standard_normal",
    "secure_uniform",
    "standard_normal_",
]
