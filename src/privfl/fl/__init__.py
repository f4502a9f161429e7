"""The federated round engine: vectorised local (DP-)SGD for a cohort of clients.

* :class:`LocalTrainingSpec` — one client's local training (K steps, batch size and sampling,
  clip norm, noise multiplier, optimizer); :meth:`~LocalTrainingSpec.privacy_step` is the
  accountant's view derived from the same object.
* :class:`CohortTrainer` — runs the K local steps of all sampled clients together:
  ``train(start_params, client_data, optimizer_states, generator) -> (params, states, stats)``.
* Stacked parameters ``name -> [M, ...]``: :func:`stack_params`, :func:`replicate_params`,
  :func:`unstack_params`, :func:`load_params`, :func:`take_rows`, :func:`put_rows`.
* Per-layer per-example gradient maths: :mod:`privfl.fl.grad_sample`.

Algorithms (PriFedSync, FedAvg, ...) live in :mod:`privfl.fl.algorithms` and build on these.
"""

from privfl.fl.optim import StackedOptimizer
from privfl.fl.params import (
    load_params,
    num_stacked,
    put_rows,
    replicate_params,
    stack_params,
    take_rows,
    trainable_parameters,
    unstack_params,
)
from privfl.fl.spec import OPTIMIZERS, LocalTrainingSpec
from privfl.fl.trainer import (
    LAYOUTS,
    CohortTrainer,
    GradientResult,
    TrainingStats,
    cross_entropy_loss,
)

__all__ = [
    "LAYOUTS",
    "OPTIMIZERS",
    "CohortTrainer",
    "GradientResult",
    "LocalTrainingSpec",
    "StackedOptimizer",
    "TrainingStats",
    "cross_entropy_loss",
    "load_params",
    "num_stacked",
    "put_rows",
    "replicate_params",
    "stack_params",
    "take_rows",
    "trainable_parameters",
    "unstack_params",
]
