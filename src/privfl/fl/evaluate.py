"""Stacked forward and evaluation of ``M`` models at once (clients, or Monte Carlo replicas).

:func:`stacked_forward` and :func:`stacked_evaluate` (:meth:`CohortTrainer.forward` and
:meth:`CohortTrainer.evaluate`) run a :class:`~privfl.fl.stacked_model.StackedModel`'s captured
layers (:mod:`privfl.fl._capture`) in eval mode on stacked parameters ``name -> [M, ...]`` (or
a flat ``[M, d]`` tensor): ``M`` rows share one input batch, or each row has its own inputs
(``per_row=True``). A Linear layer becomes one ``bmm`` over the rows of a chunk, a Conv2d layer
one convolution per row; no per-row Python loop over layers and no ``load_state_dict``.

Per row ``j`` with ``N`` examples ``(x_i, y_i)`` and outputs ``o_ji = f(theta_j; x_i)``::

    prediction_ji = argmax_c o_ji[c]
    accuracy_j    = (1/N) sum_i [prediction_ji == y_i]
    loss_j        = (1/N) sum_i loss_fn(o_ji, y_i)        (the trainer's per-example loss)

Work is chunked: ``batch_size`` examples per forward (default: from ``memory_budget``, at
most 1024) and as many rows per forward as the budget allows. The values equal a per-row
``torch.func.functional_call`` up to float summation order (``bmm`` vs ``addmm``). Models
the captured layers cannot run fall back to that per-row ``functional_call``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from torch.func import functional_call

from privfl._validation import check_int
from privfl.fl._capture import UnsupportedModelError
from privfl.fl.pool import inputs_to
from privfl.fl.stacked_model import StackedModel

__all__ = ["Evaluation", "stacked_evaluate", "stacked_forward"]

#: Largest default number of examples per forward.
MAX_BATCH = 1024


@dataclass
class Evaluation:
    """Per-row results of :meth:`CohortTrainer.evaluate` on ``N`` examples.

    Computed from the data without noise: monitoring values, not covered by a privacy
    guarantee unless the evaluation data are public.
    """

    accuracy: torch.Tensor  #: [M] float64, fraction of correct argmax predictions
    loss: torch.Tensor  #: [M] float64, mean per-example loss
    correct: torch.Tensor  #: [M] int64, number of correct predictions
    predictions: torch.Tensor  #: [M, N] int64 (CPU), argmax class per row and example
    count: int  #: N, examples per row


def _stacked(model: StackedModel, params) -> dict[str, torch.Tensor]:
    layout = model.layout
    if isinstance(params, torch.Tensor):
        params = layout.unflatten(params)
    elif isinstance(params, Mapping):
        layout.check(params, "params")
    else:
        raise ValueError(
            f"params = {type(params).__name__} is not allowed: must be stacked parameters "
            "name -> [M, ...] or a flat [M, d] tensor"
        )
    # rows at equal alignment (a copy): a row's outputs do not depend on its position
    return layout.unflatten(layout.aligned_rows(params))


def _check_inputs(x, count: int, per_row: bool) -> int:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x = {type(x).__name__} is not allowed: must be a tensor")
    if per_row:
        if x.dim() < 2 or x.shape[0] != count:
            raise ValueError(
                f"x has shape {tuple(x.shape)}: with per_row=True it must be "
                f"[M={count}, N, *input_shape]"
            )
        n = x.shape[1]
    else:
        if x.dim() < 1:
            raise ValueError("x must be a tensor [N, *input_shape]")
        n = x.shape[0]
    if n < 1:
        raise ValueError("x has 0 examples: need at least one")
    return int(n)


def _budget(memory_budget: int | None, device: torch.device) -> int:
    if memory_budget is not None:
        return memory_budget
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free // 2
    return 128 << 20


def _example_bytes(model: StackedModel, x1: torch.Tensor) -> int:
    """Bytes of the input and every layer's input and output for one example (x 2 for
    temporaries); a fixed guess when the captured layers are not used."""
    if not model.uses_fast_path:
        return 16 * x1.numel() * x1.element_size()
    key = (tuple(x1.shape), x1.dtype, x1.device)
    if key not in model.eval_bytes:
        model.eval_bytes[key] = _probe(model, x1)
    return model.eval_bytes[key]


def _probe(model: StackedModel, x1: torch.Tensor) -> int:
    params = model.layout.zeros(1, x1.device)
    ctx = model.ctx
    ctx.begin(1, 1, params, capture=True, real=[1], generators=[None])
    try:
        with torch.no_grad(), _eval_mode(model):
            model.net(x1)
        total = x1.numel() + sum(r.a.numel() + r.out.numel() for r in ctx.records)
    except UnsupportedModelError:  # a layer called twice cannot be captured: guess
        return 16 * x1.numel() * x1.element_size()
    finally:
        ctx.end()
    return 2 * total * x1.element_size()


@contextlib.contextmanager
def _eval_mode(model: StackedModel):
    """The model's modules in eval mode (dropout off) for the duration; train mode after."""
    modules = model.modules()
    for module in modules:
        module.eval()
    try:
        yield
    finally:
        for module in modules:
            module.train()


def _forward_rows(model: StackedModel, params, xb: torch.Tensor, per_row: bool):
    """Outputs ``[m, b, *out]`` of ``m`` stacked rows on one batch (shared or per row)."""
    m = params[model.layout.param_names[0]].shape[0]
    b = xb.shape[1] if per_row else xb.shape[0]
    if model.uses_fast_path:
        if per_row:
            rows = xb.reshape(m * b, *xb.shape[2:])
        else:
            rows = xb.unsqueeze(0).expand(m, *xb.shape).reshape(m * b, *xb.shape[1:])
        ctx = model.ctx
        ctx.begin(m, b, params, capture=False, real=[b] * m, generators=[None] * m)
        try:
            out = model.net(rows)
        except UnsupportedModelError:
            out = None
        finally:
            ctx.end()
        if out is not None:
            if not isinstance(out, torch.Tensor) or out.dim() < 1 or out.shape[0] != m * b:
                raise ValueError(
                    f"the model returned {getattr(out, 'shape', type(out))}: need one output "
                    f"row per example ({m * b})"
                )
            return out.reshape(m, b, *out.shape[1:])
    module = model.plain
    return torch.stack([
        functional_call(module, {n: v[j] for n, v in params.items()},
                        (xb[j] if per_row else xb,))
        for j in range(m)
    ])


def _chunks(model, params, x, per_row, batch_size, memory_budget) -> Iterator[tuple]:
    """``(r0, r1, lo, hi, outputs [r1 - r0, hi - lo, ...])`` over all rows and examples."""
    m = params[model.layout.param_names[0]].shape[0]
    n = _check_inputs(x, m, per_row)
    device = params[model.layout.param_names[0]].device
    first = inputs_to(x[0, :1] if per_row else x[:1], device, model.layout.dtype)
    total = max(1, _budget(memory_budget, device) // max(1, _example_bytes(model, first)))
    if batch_size is None:
        batch = min(n, MAX_BATCH, total)
    else:
        batch = min(n, check_int("batch_size", batch_size, minimum=1))
    rows = max(1, min(m, total // batch))
    with torch.no_grad(), _eval_mode(model):
        for r0 in range(0, m, rows):
            r1 = min(m, r0 + rows)
            part = {k: v[r0:r1] for k, v in params.items()}
            for lo in range(0, n, batch):
                hi = min(n, lo + batch)
                xb = x[r0:r1, lo:hi] if per_row else x[lo:hi]
                xb = inputs_to(xb, device, model.layout.dtype)
                yield r0, r1, lo, hi, _forward_rows(model, part, xb, per_row)


def stacked_forward(model: StackedModel, params, x: torch.Tensor, *, per_row: bool = False,
                    batch_size: int | None = None,
                    memory_budget: int | None = None) -> torch.Tensor:
    """Outputs ``[M, N, *out]`` of the ``M`` stacked models (see :meth:`CohortTrainer.forward`)."""
    params = _stacked(model, params)
    m = params[model.layout.param_names[0]].shape[0]
    result = None
    for r0, r1, lo, hi, out in _chunks(model, params, x, per_row, batch_size, memory_budget):
        if result is None:
            n = x.shape[1] if per_row else x.shape[0]
            result = out.new_empty((m, n, *out.shape[2:]))
        result[r0:r1, lo:hi] = out
    return result


def stacked_evaluate(model: StackedModel, params, x: torch.Tensor, y: torch.Tensor, *,
                     per_row: bool = False, batch_size: int | None = None,
                     memory_budget: int | None = None) -> Evaluation:
    """Per-row accuracy and loss (see :meth:`CohortTrainer.evaluate`)."""
    params = _stacked(model, params)
    m = params[model.layout.param_names[0]].shape[0]
    n = _check_inputs(x, m, per_row)
    want = (m, n) if per_row else (n,)
    if not isinstance(y, torch.Tensor) or tuple(y.shape) != want:
        raise ValueError(
            f"y has shape {tuple(getattr(y, 'shape', ()))}: must be {list(want)} (class labels)"
        )
    if y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
        raise ValueError(f"y has dtype {y.dtype}: must hold integer class labels")
    device = params[model.layout.param_names[0]].device
    y = y.to(device)
    correct = torch.zeros(m, dtype=torch.int64, device=device)
    loss = torch.zeros(m, dtype=torch.float64, device=device)
    predictions = torch.empty((m, n), dtype=torch.int64, device=device)
    for r0, r1, lo, hi, out in _chunks(model, params, x, per_row, batch_size, memory_budget):
        if out.dim() != 3:
            raise ValueError(
                f"the model's outputs have shape {tuple(out.shape[2:])} per example: evaluate "
                "needs one score per class ([N, classes])"
            )
        rows, b = r1 - r0, hi - lo
        target = y[r0:r1, lo:hi] if per_row else y[lo:hi].unsqueeze(0).expand(rows, b)
        pred = out.argmax(-1)
        predictions[r0:r1, lo:hi] = pred
        correct[r0:r1] += (pred == target).sum(1)
        losses = model.losses(out.reshape(rows * b, -1), target.reshape(-1), None)
        loss[r0:r1] += losses.reshape(rows, b).to(torch.float64).sum(1)
    return Evaluation(
        accuracy=(correct.to(torch.float64) / n).cpu(),
        loss=(loss / n).cpu(),
        correct=correct.cpu(),
        predictions=predictions.cpu(),
        count=n,
    )
