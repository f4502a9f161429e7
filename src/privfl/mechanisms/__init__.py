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
"""

from privfl.mechanisms.clipping import clip_and_sum, clip_factors, per_example_norms
from privfl.mechanisms.noise import (
    add_gaussian_noise,
    gaussian_noise,
    secure_standard_normal,
    standard_normal_,
)
from privfl.mechanisms.sampling import (
    BATCH_SAMPLING,
    fixed_size_sample,
    pad_batches,
    poisson_sample,
    sample_batch,
    secure_generator,
)
from privfl.mechanisms.secure import SECURE_RANDOM, SecureRandom, secure_uniform

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
