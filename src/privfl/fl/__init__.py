"""The federated round engine: vectorised local (DP-)SGD for a cohort of clients.

* :class:`LocalTrainingSpec` — one client's local training (K steps, batch size and sampling,
  clip norm, noise multiplier, optimizer); :meth:`~LocalTrainingSpec.privacy_step` is the
  accountant's view derived from the same object.
* :class:`CohortTrainer` — runs the K local steps of all sampled clients together:
  ``train(start_params, client_data, optimizer_states, generator) -> (params, states, stats)``;
  from a shared :class:`DataPool` and per-row indices (``train_pool``); as a pure function of
  public per-row seeds :class:`ClientStreams` (``train_streams``: shards give identical rows);
  stacked inference ``forward`` / ``evaluate`` (:class:`Evaluation`) for ``[M, ...]`` models.
* Stacked parameters ``name -> [M, ...]``: :func:`stack_params`, :func:`replicate_params`,
  :func:`unstack_params`, :func:`load_params`, :func:`take_rows`, :func:`put_rows`,
  :func:`cat_rows`.
* Per-layer per-example gradient maths: :mod:`privfl.fl.grad_sample`; the trainer's parts, one
  job each: :mod:`~privfl.fl.layout` (flat rows), :mod:`~privfl.fl.stacked_model` (captured
  net), :mod:`~privfl.fl.kernels` (gradient sums), :mod:`~privfl.fl.noise_fill` (noise).
* Streaming cohorts in chunks with an order-fixed sum: :mod:`privfl.fl.chunked_cohorts`; per-client
  state of a population, in memory or memory-mapped: :mod:`privfl.fl.client_store`.

Algorithms (PriFedSync, FedAvg, ...) live in :mod:`privfl.algorithms` and build on these.
"""

from privfl.fl.evaluate import Evaluation
from privfl.fl.optim import StackedOptimizer
from privfl.fl.params import (
    cat_rows,
    load_params,
    num_stacked,
    put_rows,
    replicate_params,
    stack_params,
    take_rows,
    trainable_parameters,
    unstack_params,
)
from privfl.fl.pool import DataPool
from privfl.fl.random_streams import NOISE_STREAMS, ClientStreams, noise_streams
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
    "NOISE_STREAMS",
    "OPTIMIZERS",
    "ClientStreams",
    "CohortTrainer",
    "DataPool",
    "Evaluation",
    "GradientResult",
    "LocalTrainingSpec",
    "StackedOptimizer",
    "TrainingStats",
    "cat_rows",
    "cross_entropy_loss",
    "load_params",
    "noise_streams",
    "num_stacked",
    "put_rows",
    "replicate_params",
    "stack_params",
    "take_rows",
    "trainable_parameters",
    "unstack_params",
]
