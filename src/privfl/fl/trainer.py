"""The cohort trainer: K local (DP-)SGD steps for every client sampled in a round, together.

:class:`CohortTrainer` takes the cohort's starting parameters stacked (``name -> [M, ...]``),
each client's data, and per-client persistent optimizer states, and returns the new stacked
parameters and states. Per step and client it does exactly what
:meth:`LocalTrainingSpec.privacy_step` tells the accountant (see :mod:`privfl.fl.spec`).

How the per-example work is done (one forward and one backward per step and chunk of clients):

1. the model's layers are wrapped (:mod:`privfl.fl._capture`) to run every client's rows with
   that client's parameters and to record each layer's input ``a`` and output ``y``;
2. ``autograd.grad(sum of per-example losses, [y...])`` gives every layer's output gradient
   ``delta`` (no weight gradients are computed);
3. per-example squared norms per layer: ghost norms ``||a_i||^2 ||delta_i||^2`` for Linear,
   materialised per-example conv gradients (cheaper than Gram matrices for the papers' CNNs);
4. clip factors ``c_i = min(1, C / ||g_i||)`` (0 for padded slots);
5. clipped sums ``(c * delta)^T a`` per client (``bmm``) and weighted sums of the materialised
   conv gradients; noise ``N(0, (zC)^2)`` from the client's own noise streams (drawn by worker
   threads on CPU while steps 1-5 run); divide by the fixed B;
6. the optimizer (SGD / momentum / Adam, per-client state; fused PyTorch kernels) on flat
   ``[m, d]`` rows.

Layouts: ``"looped"`` runs one client at a time (client-outer, step-inner: its parameters and
optimizer state stay in cache across its K steps); ``"batched"`` runs a chunk of clients per
forward (Linear via ``bmm`` over clients). ``"auto"`` picks looped on CPU (measured faster, see
``docs/engine.md``) and batched on accelerators.

Three entry points, one computation (``docs/engine.md``, "Engine seams"):

* ``train(start, client_data, states, generator)`` — per-client ``(x_j, y_j)`` pairs,
  concatenated into a :class:`~privfl.fl.DataPool` for the call;
* ``train_pool(start, pool, indices, states, generator)`` — the rows of client ``j`` are
  ``pool`` rows ``indices[j]`` (no data copies; replicas repeat a client's indices);
* ``train_streams(start, pool, indices, streams, states)`` — the pure function: every row's
  randomness comes from its public seeds (:class:`~privfl.fl.ClientStreams`). The two others
  draw ``ClientStreams.draw(generator, M, noise_streams(device))`` and call it.

Randomness: per row, a data stream (batches, dropout masks), an aux stream (seeds torch's
global RNG during the forward, for functional randomness inside models) and ``NOISE_STREAMS``
noise streams on CPU (each fills a fixed slice of the noise vector, so the draws can run on
several cores; one stream on CUDA). Parameter rows sit at the same 64-byte alignment whatever
their index (``ROW_ALIGN``), because BLAS kernels round differently at different operand
alignments. Each row's result therefore does not depend on the thread count, on its position
in the cohort or on the other rows: a shard of the cohort trained elsewhere with its rows'
seeds gives the same rows bit for bit (looped layout; batched with shards cut at multiples of
a fixed ``chunk_size``), and layouts agree up to float summation order.

Secure mode (``spec.secure``): the batches come from :data:`privfl.mechanisms.SECURE_RANDOM`
(fresh ``os.urandom`` uniforms per client and step, the same samplers) and the noise from
``os.urandom`` (:func:`privfl.mechanisms.secure_standard_normal`), and so do the rows' stream
seeds, which then drive only model-internal randomness such as dropout masks (the guarantee
does not rely on them: it holds for any fixed masks); the generator is not used. Nothing of a
secure step is reproducible.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import nn

from privfl._validation import check_choice, check_int, check_positive
from privfl.accounting.events import Sampling
from privfl.fl.batches import sample_steps
from privfl.fl.evaluate import Evaluation, stacked_evaluate, stacked_forward
from privfl.fl.kernels import GradientResult, clipped, per_example_gradients, plain_sums
from privfl.fl.layout import ROW_ALIGN, ParamLayout
from privfl.fl.noise_fill import fill_noise
from privfl.fl.optim import StackedOptimizer
from privfl.fl.pool import DataPool
from privfl.fl.random_streams import (
    SEED_HIGH,
    ClientStreams,
    noise_streams,
    seeded_generator,
)
from privfl.fl.spec import LocalTrainingSpec
from privfl.fl.stacked_model import StackedModel, cross_entropy_loss
from privfl.fl.workers import ClientWorkers, single_thread
from privfl.mechanisms.noise import check_noise_dtype
from privfl.mechanisms.secure import SECURE_RANDOM

__all__ = ["LAYOUTS", "ROW_ALIGN", "CohortTrainer", "GradientResult", "TrainingStats",
           "cross_entropy_loss"]

LAYOUTS = ("auto", "batched", "looped")

#: Examples per forward of a batched chunk on an accelerator when ``chunk_size`` is not set
#: (the memory budget may allow fewer): on an H200, the MNIST CNN of Zheng et al. 2021 trained
#: 45.5 client-updates/s in chunks of 128 clients x B = 16 and 15.9 in one chunk of 1,024.
ACCELERATOR_CHUNK_EXAMPLES = 2048


@dataclass
class TrainingStats:
    """Monitoring values of one :meth:`CohortTrainer.train` call, one row per client.

    They are computed from the clients' data **without noise**: use them to debug, never
    release them as part of a private result.
    """

    batch_sizes: torch.Tensor  #: [M, K] realised batch sizes
    loss: torch.Tensor  #: [M] mean per-example training loss over the K steps
    clipped_fraction: torch.Tensor  #: [M] fraction of examples with norm > C (NaN: no clipping)
    mean_grad_norm: torch.Tensor  #: [M] mean unclipped per-example gradient norm (NaN: none)
    layout: str  #: the layout used
    chunk_size: int  #: clients per forward
    per_example: str  #: "layers" (fast path) or "vmap" (torch.func fallback)
    workers: int = 1  #: clients trained at once (CPU, looped layout; privfl.fl.workers)


@dataclass
class _Client:
    """Per-client streams and data location (pool rows) of one train call; the noise
    generators are made when first used (training without per-step noise needs none)."""

    data: torch.Generator
    noise_seeds: list[int]
    aux: torch.Generator  #: on the host whatever the device (drawing its seed never waits)
    rows: torch.Tensor  #: [n_j] int64 pool rows of the client, on the training device
    _noise: list[torch.Generator] | None = None

    @property
    def noise(self) -> list[torch.Generator]:
        if self._noise is None:
            self._noise = [seeded_generator(self.data.device, s) for s in self.noise_seeds]
        return self._noise


class CohortTrainer:
    """Runs ``spec.local_steps`` local steps for all clients of a cohort.

    Client workers are used when a client's work, ``K * B * d`` (steps x batch x parameters),
    is at least :attr:`parallel_min_work`: below that (e.g. logistic regression on one record)
    a step is mostly Python overhead, which threads share through the GIL, so one thread is
    faster (measured: projected SGD on digits, 19,200 against 3,900 client-updates/s).

    Parameters
    ----------
    model
        Architecture template (its parameter values are not used; ``train`` gets them).
        No BatchNorm. Output: logits or log-probabilities.
    spec
        The :class:`LocalTrainingSpec` (the same object the accountant is built from).
    layout
        ``"auto"``, ``"batched"`` or ``"looped"`` (see the module docstring).
    chunk_size
        Clients per forward in the batched layout; ``None`` sizes chunks from a memory budget.
    loss_fn
        ``loss_fn(output, target) -> per-example losses [N]``; default cross-entropy.
    per_example
        ``"auto"`` (layer-wise fast path, torch.func fallback for unsupported models) or
        ``"vmap"`` (always torch.func ``vmap(grad)`` over the whole model; slow, for checks).
    memory_budget
        Bytes the batched layout may use for activations of one chunk (default 128 MiB on CPU,
        where larger chunks measured slower, and half the free memory on CUDA).
    workers
        Clients trained at once on CPU in the looped layout, each on one torch thread
        (:mod:`privfl.fl.workers`); ``None``: ``torch.get_num_threads()`` at each call. The
        result does not depend on it (every client's arithmetic is single-threaded).
    """

    #: smallest ``K * B * d`` of a client for which clients run on concurrent workers
    parallel_min_work: int = 1 << 22

    def __init__(
        self,
        model: nn.Module,
        spec: LocalTrainingSpec,
        *,
        layout: str = "auto",
        chunk_size: int | None = None,
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        per_example: str = "auto",
        memory_budget: int | None = None,
        workers: int | None = None,
    ) -> None:
        if not isinstance(model, nn.Module):
            raise ValueError(f"model = {type(model).__name__} is not allowed: must be a Module")
        if not isinstance(spec, LocalTrainingSpec):
            raise ValueError(f"spec = {spec!r} is not allowed: must be a LocalTrainingSpec")
        self.spec = spec
        self.layout = check_choice("layout", layout, LAYOUTS)
        self.chunk_size = None if chunk_size is None else check_int("chunk_size", chunk_size, 1)
        self.per_example_mode = check_choice("per_example", per_example, ("auto", "vmap"))
        self.memory_budget = (
            None if memory_budget is None else check_int("memory_budget", memory_budget, 1)
        )
        self.workers = None if workers is None else check_int("workers", workers, 1)
        #: optional ``progress(clients_done, clients)`` called after each client (or chunk) of
        #: a train call, possibly from a worker thread (e.g. a progress display)
        self.progress: Callable[[int, int], None] | None = None
        #: where each parameter sits in a flat row (:mod:`privfl.fl.layout`)
        self.params = ParamLayout(model)
        if spec.noise_std > 0:  # the noise is drawn and added in the parameters' dtype
            check_noise_dtype("the model parameters' dtype", self.params.dtype)
        #: the captured net, its torch.func fallback and the loss (:mod:`privfl.fl.stacked_model`)
        self.model = StackedModel(model, self.params, loss_fn=loss_fn,
                                  per_example=self.per_example_mode)
        self.model.replica = self._replica
        self.dtype = self.params.dtype
        self.param_names = self.params.param_names
        self.param_shapes = self.params.param_shapes
        self.num_params = self.params.num_params
        self.optimizer = StackedOptimizer(spec)
        self._client_workers: ClientWorkers | None = None
        self._rng_free: bool | None = None  # the wrapped net never draws from torch's global RNG
        self._row_bytes: int | None = None
        # single-row kernels for a chunk of one row: the looped layout only (set per train call);
        # the batched layout computes a one-row chunk like any other, so that a row's result
        # does not depend on the size of its chunk (Monte Carlo replicas, shards)
        self._single_rows = True

    # ------------------------------------------------------------------ public helpers
    @property
    def uses_fast_path(self) -> bool:
        """Whether the layer-wise captured net runs (False: the ``torch.func`` fallback)."""
        return self.model.uses_fast_path

    @property
    def fallback_reason(self) -> str | None:
        """Why the ``torch.func`` fallback is used (None on the captured net)."""
        return self.model.fallback_reason

    @property
    def loss_fn(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        return self.model.loss_fn

    @property
    def template(self) -> nn.Module:
        """The architecture template the trainer was built from."""
        return self.model.template

    def _replica(self):
        return None if self._client_workers is None else self._client_workers.replica

    def resolve_layout(self, device: torch.device | str) -> str:
        """The layout ``"auto"`` resolves to on ``device`` (looped on CPU, batched otherwise)."""
        if self.layout != "auto":
            return self.layout
        return "looped" if torch.device(device).type == "cpu" else "batched"

    def init_optimizer_state(
        self, num_clients: int, *, device: str | torch.device | None = None
    ) -> dict[str, torch.Tensor]:
        """Fresh per-client optimizer state ``{"step": [M], ...: [M, d]}``."""
        return self.optimizer.init_state(
            num_clients, self.num_params, dtype=self.dtype, device=device
        )

    def flatten(self, stacked: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Stacked parameters ``name -> [M, ...]`` as one new ``[M, d]`` tensor."""
        return self.params.flatten(stacked)

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Views ``name -> [M, *shape]`` into a flat ``[M, d]`` tensor (no copy)."""
        return self.params.unflatten(flat)

    # ------------------------------------------------------------------ stacked inference
    def forward(
        self,
        params: Mapping[str, torch.Tensor] | torch.Tensor,
        x: torch.Tensor,
        *,
        per_row: bool = False,
        batch_size: int | None = None,
    ) -> torch.Tensor:
        """Outputs ``[M, N, *out]`` of the ``M`` stacked models, in eval mode (no dropout).

        ``params``: ``name -> [M, ...]`` or a flat ``[M, d]`` tensor. ``x``: ``[N,
        *input_shape]`` shared by all rows, or ``[M, N, *input_shape]`` with ``per_row=True``
        (converted to the model's dtype and the parameters' device batch by batch).
        ``batch_size``: examples per forward (default from ``memory_budget``, at most 1024).
        Row ``j`` equals ``functional_call(model, params[j], x)`` up to float summation order
        (see :mod:`privfl.fl.evaluate`). No gradients are recorded.
        """
        return stacked_forward(self.model, params, x, per_row=per_row, batch_size=batch_size,
                               memory_budget=self.memory_budget)

    def evaluate(
        self,
        params: Mapping[str, torch.Tensor] | torch.Tensor,
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        per_row: bool = False,
        batch_size: int | None = None,
    ) -> Evaluation:
        """Per-row accuracy, mean loss (``loss_fn``) and predictions of the ``M`` stacked
        models on ``(x, y)``: ``y`` is ``[N]`` integer labels, or ``[M, N]`` with
        ``per_row=True``. Inputs as in :meth:`forward`; returns an :class:`Evaluation`.
        """
        return stacked_evaluate(self.model, params, x, y, per_row=per_row,
                                batch_size=batch_size, memory_budget=self.memory_budget)

    # ------------------------------------------------------------------ validation
    def _check_params(self, stacked, name) -> int:
        return self.params.check(stacked, name)

    def _check_data(self, client_data, count, device):
        if isinstance(client_data, (tuple, torch.Tensor)) or not isinstance(
            client_data, Sequence
        ):
            raise ValueError("client_data must be a list of (x, y) tensor pairs, one per client")
        if len(client_data) != count:
            raise ValueError(
                f"client_data has {len(client_data)} clients: must match start_params ({count})"
            )
        pool, rows = DataPool.from_clients(client_data, device=device, dtype=self.dtype)
        for j, index in enumerate(rows):
            self.spec.check_records(index.numel(), f"client_data[{j}] records")
        return pool, rows

    def _check_cohort(self, start_params) -> int:
        count = self._check_params(start_params, "start_params")
        if count < 1:
            raise ValueError("start_params has 0 rows: a training call needs at least one client")
        return count

    def _check_generator(self, generator):
        if generator is None:
            generator = torch.Generator().manual_seed(secrets.randbits(62))
        if not isinstance(generator, torch.Generator):
            raise ValueError(f"generator = {generator!r} is not allowed: must be a torch.Generator")
        return generator

    def _check_pool(self, pool, indices, count, device):
        if not isinstance(pool, DataPool):
            raise ValueError(f"pool = {type(pool).__name__} is not allowed: must be a DataPool")
        pool = pool.on(device, self.dtype)
        rows = pool.check_indices(indices, count)
        for j, index in enumerate(rows):
            self.spec.check_records(index.numel(), f"indices[{j}] records")
        return pool, rows

    def _check_states(self, optimizer_states, count, device):
        if optimizer_states is None:
            return self.init_optimizer_state(count, device=device)
        self.optimizer.check_state(optimizer_states, count, self.num_params,
                                   name="optimizer_states")
        return self.optimizer.conform_state(optimizer_states, device)

    # ------------------------------------------------------------------ training
    def train(
        self,
        start_params: Mapping[str, torch.Tensor],
        client_data: Sequence[tuple[torch.Tensor, torch.Tensor]],
        optimizer_states: Mapping[str, torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        *,
        lr: float | torch.Tensor | None = None,
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], TrainingStats]:
        """K local steps for each of the M clients.

        Equals :meth:`train_pool` on ``DataPool.from_clients(client_data)`` (the pairs
        concatenated for this call): prefer :meth:`train_pool` when the data stay the same
        across calls.

        Parameters
        ----------
        start_params
            ``name -> [M, *shape]``: each client's starting model (e.g. its helper model).
        client_data
            ``[(x_j, y_j)]``, M pairs; ``x_j``: ``[n_j, *input_shape]``, ``y_j``: ``[n_j]``;
            ``n_j >= batch_size``.
        optimizer_states
            The clients' persistent optimizer states (``{"step": [M], ...: [M, d]}`` as from
            :meth:`init_optimizer_state`); ``None`` starts fresh.
        generator
            Source of all randomness (``None`` seeds one from :mod:`secrets`, not
            reproducible): the per-client seeds are ``ClientStreams.draw(generator, M,
            noise_streams(device))``. With ``spec.secure`` it is not used: the seeds, batches
            and noise come from ``os.urandom``.
        lr
            Learning rate override: a float or a ``[M]`` tensor of per-client rates
            (default ``spec.lr``).

        Returns
        -------
        params, states, stats
            New stacked parameters (views into one new buffer whose rows start at multiples
            of ``ROW_ALIGN`` bytes), new optimizer states (new tensors) and
            :class:`TrainingStats`.
        """
        count = self._check_cohort(start_params)
        device = start_params[self.param_names[0]].device
        generator = self._check_generator(generator)
        pool, rows = self._check_data(client_data, count, device)
        states = self._check_states(optimizer_states, count, device)
        lr_rows = self._lr(lr, count, device)
        streams = ClientStreams.draw(generator, count, noise_streams(device),
                                     secure=self.spec.secure)
        return self._train(start_params, pool, rows, streams, states, lr_rows)

    def train_pool(
        self,
        start_params: Mapping[str, torch.Tensor],
        pool: DataPool,
        indices: Sequence[torch.Tensor] | torch.Tensor,
        optimizer_states: Mapping[str, torch.Tensor] | None = None,
        generator: torch.Generator | None = None,
        *,
        lr: float | torch.Tensor | None = None,
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], TrainingStats]:
        """:meth:`train` with the rows of client ``j`` given as ``pool`` rows ``indices[j]``.

        No data is copied per call: the batches are gathered from the pool. Replicas of one
        client repeat its index tensor. The seeds are drawn from ``generator`` exactly as in
        :meth:`train`, so ``train(start, [pool.rows(i) for i in indices], ...)`` gives the same
        result bit for bit.
        """
        count = self._check_cohort(start_params)
        device = start_params[self.param_names[0]].device
        generator = self._check_generator(generator)
        pool, rows = self._check_pool(pool, indices, count, device)
        states = self._check_states(optimizer_states, count, device)
        lr_rows = self._lr(lr, count, device)
        streams = ClientStreams.draw(generator, count, noise_streams(device),
                                     secure=self.spec.secure)
        return self._train(start_params, pool, rows, streams, states, lr_rows)

    def train_streams(
        self,
        start_params: Mapping[str, torch.Tensor],
        pool: DataPool,
        indices: Sequence[torch.Tensor] | torch.Tensor,
        streams: ClientStreams,
        optimizer_states: Mapping[str, torch.Tensor] | None = None,
        *,
        lr: float | torch.Tensor | None = None,
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], TrainingStats]:
        """The local work as a pure function of each row's inputs and public seeds.

        Row ``j``'s result depends only on ``start_params[:, j]``, ``optimizer_states`` row
        ``j``, ``lr[j]``, ``pool[indices[j]]`` and ``streams[j]`` (plus, in secure mode,
        ``os.urandom``). A shard of a cohort (its rows of every argument) run separately —
        in another process or machine — therefore gives the same rows bit for bit, provided
        every chunk of the shard is a chunk of the whole run: always in the looped layout
        (one row per chunk); in the batched layout, fix ``chunk_size`` and cut shards at
        multiples of it (a chunk seeds functional randomness from its first row's aux stream,
        and ``bmm`` over a different set of rows may round differently). The inputs are not
        modified.

        Parameters
        ----------
        streams
            :class:`ClientStreams` with one row per client (``ClientStreams.draw`` reproduces
            :meth:`train_pool`; ``ClientStreams.derive`` gives order-independent seeds).

        The other parameters and the returns are those of :meth:`train_pool`.
        """
        count = self._check_cohort(start_params)
        device = start_params[self.param_names[0]].device
        if not isinstance(streams, ClientStreams):
            raise ValueError(f"streams = {type(streams).__name__} is not allowed: must be a "
                             "ClientStreams")
        if len(streams) != count:
            raise ValueError(f"streams has {len(streams)} rows: must match start_params ({count})")
        pool, rows = self._check_pool(pool, indices, count, device)
        states = self._check_states(optimizer_states, count, device)
        lr_rows = self._lr(lr, count, device)
        return self._train(start_params, pool, rows, streams, states, lr_rows)

    def _train(self, start_params, pool, rows, streams, states, lr_rows):
        """The K local steps of all rows (inputs validated); see :meth:`train_streams`."""
        count = len(rows)
        device = pool.device
        x_all, y_all = pool.x, pool.y
        flat = self.params.aligned_rows(start_params)
        clients = []
        seeds = streams.seeds.tolist()
        for j in range(count):
            data, aux, *noise = seeds[j]
            clients.append(_Client(seeded_generator(device, data), noise,
                                   seeded_generator(torch.device("cpu"), aux), rows[j]))
        layout = self.resolve_layout(device)
        self._single_rows = layout == "looped"
        chunk = 1 if layout == "looped" else self._auto_chunk(count, x_all, y_all, device)
        k = self.spec.local_steps
        acc = {  # realised batch sizes; per client: sum of losses, #clipped, sum of norms
            "batch": torch.zeros(count, k, dtype=torch.int64),
            "sums": torch.zeros(count, 3, dtype=torch.float64, device=device),
        }
        budget = self.workers or torch.get_num_threads()
        done = [0]
        done_lock = threading.Lock()

        def report(finished: int) -> None:
            if self.progress is not None:
                with done_lock:
                    done[0] += finished
                    self.progress(done[0], count)

        def run(lo: int, noise_threads: int, private: bool = False) -> None:
            # private (client workers): views of one buffer share autograd's version counter,
            # so a worker trains a copy of its rows (64-byte aligned like every row) and another
            # client's in-place optimizer step cannot invalidate its saved tensors
            hi = min(count, lo + chunk)
            own = flat[lo:hi].clone() if private else flat[lo:hi]
            self._run_chunk(own, {key: v[lo:hi] for key, v in states.items()},
                            None if lr_rows is None else lr_rows[lo:hi], clients[lo:hi],
                            x_all, y_all, acc, lo, noise_threads)
            if private:
                flat[lo:hi].copy_(own)
            report(hi - lo)

        def run_block(block: range) -> None:  # one worker, its clients one by one
            for lo in block:
                run(lo, 0, private=True)

        workers = 1
        if layout == "looped" and device.type == "cpu":  # one torch thread per client
            workers = min(budget, count)
            work = self.spec.local_steps * self.spec.batch_size * self.num_params
            if (workers > 1 and work >= self.parallel_min_work
                    and self._parallel_safe(x_all, y_all)):
                pieces = min(count, 4 * workers)  # blocks of clients: fewer hand-overs
                bounds = [count * i // pieces for i in range(pieces + 1)]
                self._workers(workers).map(
                    run_block, [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False)])
            else:
                workers = 1
                with single_thread():
                    for lo in range(count):
                        run(lo, budget)
        else:
            for lo in range(0, count, chunk):
                run(lo, budget)
        means = acc["sums"].cpu() / acc["batch"].sum(1, keepdim=True).clamp_min(1)
        if self.spec.clip_norm is None:
            means[:, 1:] = math.nan
        stats = TrainingStats(
            batch_sizes=acc["batch"],
            loss=means[:, 0].clone(),
            clipped_fraction=means[:, 1].clone(),
            mean_grad_norm=means[:, 2].clone(),
            layout=layout,
            chunk_size=chunk,
            per_example="layers" if self.uses_fast_path else "vmap",
            workers=workers,
        )
        return self.unflatten(flat), states, stats

    def _workers(self, n: int) -> ClientWorkers:
        """The pool of ``n`` client workers (made once per size), each with a model replica."""
        if self._client_workers is None or self._client_workers.n != n:
            self._client_workers = ClientWorkers(n, self.model.make_replica)
        return self._client_workers

    def _parallel_safe(self, x_all, y_all) -> bool:
        """Whether clients may run on concurrent workers: the layer-wise fast path is used and
        the model draws nothing from torch's global RNG (which the workers would share; a
        model that does is trained serially, its draws seeded per step from the aux
        streams). Probed once on one example."""
        if self._rng_free is None and self.uses_fast_path:
            params = self.unflatten(torch.zeros(1, self.num_params, dtype=self.dtype,
                                                device=x_all.device))
            gens = [torch.Generator(device=x_all.device).manual_seed(0)]
            with torch.random.fork_rng(devices=[]), single_thread():
                torch.default_generator.manual_seed(0)
                before = torch.default_generator.get_state()
                self._accumulate_probe(params, x_all[:1], y_all[:1], gens)
                self._rng_free = torch.equal(before, torch.default_generator.get_state())
        return bool(self._rng_free) and self.uses_fast_path

    def _accumulate_probe(self, params, x, y, gens) -> None:
        if self.spec.clip_norm is None:
            plain_sums(self.model, params, x, y, None, [1], gens, self._single_rows)
        else:
            clipped(self.model, self.spec.clip_norm, params, x, y, None, [1], gens,
                    self._single_rows)

    def _lr(self, lr, count, device):
        if lr is None:
            return None
        if isinstance(lr, torch.Tensor):
            if lr.shape not in ((count,), (count, 1)):
                raise ValueError(f"lr has shape {tuple(lr.shape)}: must be a float or [M={count}]")
            rows = lr.detach().to(device=device, dtype=self.dtype).reshape(count, 1)
            if not torch.isfinite(rows).all() or (rows <= 0).any():
                raise ValueError(f"lr = {lr.tolist()!r} is out of range: must be in (0, inf)")
            return rows
        value = check_positive("lr", lr)
        return torch.full((count, 1), value, dtype=self.dtype, device=device)

    def _auto_chunk(self, count, x_all, y_all, device) -> int:
        if self.chunk_size is not None:
            return min(self.chunk_size, count)
        if not self.uses_fast_path:
            return 1
        budget = self.memory_budget
        if budget is None:
            if device.type == "cuda":
                free, _ = torch.cuda.mem_get_info(device)
                budget = free // 2
            else:  # on CPU, chunks beyond a few clients fall out of cache (docs/engine.md)
                budget = 128 << 20
        rows = self.spec.batch_size * (2 if self.spec.sampling == "poisson" else 1)
        fits = budget // max(1, self.example_bytes(x_all, y_all) * rows)
        if device.type != "cpu":  # more examples per forward than this was slower (docs/engine.md)
            fits = min(fits, ACCELERATOR_CHUNK_EXAMPLES // rows)
        return int(max(1, min(count, fits)))

    def example_bytes(self, x: torch.Tensor, y: torch.Tensor) -> int:
        """Rough bytes of the activations, gradients and per-example gradients of one example
        (probed once, on ``x[:1]``, and cached)."""
        if self._row_bytes is None:
            self._row_bytes = self._probe_row_bytes(x[:1], y[:1])
        return self._row_bytes

    def _probe_row_bytes(self, x, y) -> int:
        """Rough bytes of activations, gradients and per-example gradients of one example."""
        params = self.params.zeros(1, x.device)
        ctx = self.model.ctx
        ctx.begin(1, 1, params, capture=True, real=[1], generators=[None])
        try:
            with torch.random.fork_rng(devices=[]):
                self.model.net(x)
            total = x.numel()
            for rec in ctx.records:  # activations, outputs and their gradients, autograd buffers
                total += rec.a.numel() + 4 * rec.out.numel()
                total += rec.layer.per_example_numel  # materialised per-example gradients
        finally:
            ctx.end()
        return 2 * total * x.element_size()

    # ------------------------------------------------------------------ one chunk, K steps
    def _run_chunk(self, flat, states, lr_rows, clients, x_all, y_all, acc, lo,
                   noise_threads) -> None:
        """K steps of one chunk; ``noise_threads`` > 0: draw the noise on that many pool
        threads while the gradients are computed, 0: in the calling thread (client workers)."""
        spec = self.spec
        m = len(clients)
        params = self.unflatten(flat)
        grad_flat = torch.empty_like(flat)
        grads = self.unflatten(grad_flat)
        lr = lr_rows if lr_rows is not None else spec.lr
        if m == 1 and self._single_rows and isinstance(lr, torch.Tensor):
            lr = float(lr[0, 0])
        # g~ = (sum_i c_i g_i + N(0, (zC)^2)) / B, computed as N(0, (zC/B)^2) + sum / B
        inv_b = 1.0 / spec.batch_size
        std = spec.noise_std * inv_b
        batches = sample_steps(
            [SECURE_RANDOM if spec.secure else c.data for c in clients],
            [c.rows for c in clients], spec.local_steps, spec.batch_size,
            spec.sampling == Sampling.WITHOUT_REPLACEMENT.value, x_all.device)
        acc["batch"][lo : lo + m] = batches.counts.to(acc["batch"].dtype)
        for t in range(spec.local_steps):
            index, mask, real = batches.step(t)
            # the noise is drawn (on CPU: by worker threads) while the gradients are computed
            wait = (fill_noise(grad_flat, [c.noise for c in clients], std, spec.secure,
                               noise_threads) if std > 0 else None)
            sums = None
            try:
                if index.shape[1] > 0:
                    x = x_all[index.flatten()]
                    y = y_all[index.flatten()]
                    with self._rng_guard(clients[0], x_all.device):
                        sums = self._accumulate(params, x, y, mask, real, clients, acc, lo)
            finally:  # never leave a noise job running (also when the step raised)
                if wait is not None:
                    wait()
            if sums is None:
                if wait is None:
                    grad_flat.zero_()
            elif wait is None:
                for name, value in sums.items():
                    torch.mul(value, inv_b, out=grads[name])
            else:
                for name, value in sums.items():
                    grads[name].add_(value, alpha=inv_b)
            self.optimizer.step_(flat, grad_flat, states, lr)

    @contextlib.contextmanager
    def _rng_guard(self, client: _Client, device):
        """Seed torch's global RNG (used only by functional dropout & co.) from the aux stream."""
        seed = int(torch.randint(0, SEED_HIGH, (1,), generator=client.aux))  # on the host
        if self._replica() is not None:  # a client worker: the net never uses the global RNG
            yield
        elif device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            with torch.random.fork_rng(devices=[index], device_type="cuda"):
                torch.default_generator.manual_seed(seed)
                torch.cuda.default_generators[index].manual_seed(seed)
                yield
        else:  # torch.manual_seed would also (lazily) seed CUDA and record a traceback: slow
            with torch.random.fork_rng(devices=[]):
                torch.default_generator.manual_seed(seed)
                yield

    def _accumulate(self, params, x, y, mask, real, clients, acc, lo) -> dict[str, torch.Tensor]:
        """The (clipped) per-client gradient sums of one step; updates the stats."""
        spec = self.spec
        m = len(clients)
        b = x.shape[0] // m
        gens = [c.data for c in clients]
        if spec.clip_norm is None:
            sums, losses = plain_sums(self.model, params, x, y, mask, real, gens,
                                      self._single_rows)
            norms = None
        else:
            result = clipped(self.model, spec.clip_norm, params, x, y, mask, real, gens,
                             self._single_rows)
            sums, losses, norms = result.sums, result.losses, result.norms
        with torch.no_grad():  # norms and losses are 0 in padded slots
            loss = losses.detach().reshape(m, b).sum(1)
            if norms is None:
                acc["sums"][lo : lo + m, 0] += loss
            else:
                over = (norms > spec.clip_norm).sum(1).to(loss.dtype)
                acc["sums"][lo : lo + m] += torch.stack((loss, over, norms.sum(1)), 1)
        return sums

    # ------------------------------------------------------------------ batch-level API
    def _batch_inputs(self, params, x, y, mask):
        count = self._check_params(params, "params")
        if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[0] != count:
            raise ValueError(f"x must be a tensor [m={count}, b, *input_shape]")
        if not isinstance(y, torch.Tensor) or tuple(y.shape[:2]) != tuple(x.shape[:2]):
            raise ValueError(f"y has shape {tuple(getattr(y, 'shape', ()))}: must be [m, b]")
        if mask is not None and (
            not isinstance(mask, torch.Tensor) or tuple(mask.shape) != tuple(x.shape[:2])
        ):
            raise ValueError("mask must be a [m, b] tensor")
        m, b = x.shape[:2]
        real = [b] * m if mask is None else [int(v) for v in mask.sum(1)]
        return m, b, x.reshape(m * b, *x.shape[2:]), y.reshape(m * b), real

    def clipped_sums(
        self,
        params: Mapping[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        mask: torch.Tensor | None = None,
        *,
        generators: Sequence[torch.Generator | None] | None = None,
        single_rows: bool = True,
    ) -> GradientResult:
        """Per-client sums of flat-clipped per-example gradients of one batch (no noise).

        ``params``: ``name -> [m, ...]``; ``x``: ``[m, b, *input_shape]``; ``y``: ``[m, b]``;
        ``mask``: ``[m, b]`` (False for padded slots). Requires ``spec.clip_norm``. Dropout
        masks come from ``generators`` (one per client; default torch's global RNG).
        ``single_rows=False``: a call with one row runs the stacked kernels (``bmm``) like a
        call with many, so a row's bits do not depend on how many rows share the call
        (:mod:`privfl.fl.unit_sums`); True: one row uses the single-row kernels.
        """
        if self.spec.clip_norm is None:
            raise ValueError("clip_norm = None: clipped_sums needs a spec with a clip norm")
        if not isinstance(single_rows, bool):
            raise ValueError(f"single_rows = {single_rows!r} is not allowed: must be a bool")
        m, b, xf, yf, real = self._batch_inputs(params, x, y, mask)
        self._single_rows = single_rows
        gens = list(generators) if generators is not None else [None] * m
        params = {n: params[n].to(self.dtype) for n in self.param_names}
        mask_b = None if mask is None else mask.to(torch.bool)
        return clipped(self.model, self.spec.clip_norm, params, xf, yf, mask_b, real, gens,
                       single_rows)

    def per_example_gradients(
        self,
        params: Mapping[str, torch.Tensor],
        x: torch.Tensor,
        y: torch.Tensor,
        *,
        generators: Sequence[torch.Generator | None] | None = None,
    ) -> dict[str, torch.Tensor]:
        """Materialised per-example gradients ``name -> [m, b, *shape]`` (for checks; slow).

        Computed from the same captured ``(a, delta)`` as training when the fast path applies.
        """
        m, b, xf, yf, real = self._batch_inputs(params, x, y, None)
        self._single_rows = True
        gens = list(generators) if generators is not None else [None] * m
        params = {n: params[n].to(self.dtype) for n in self.param_names}
        return per_example_gradients(self.model, params, xf, yf, m, b, real, gens)


