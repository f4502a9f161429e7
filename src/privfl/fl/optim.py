"""Local optimizers on stacked, flattened parameters ``[M, d]`` with per-client state.

The optimizer only sees the noisy gradient (post-processing; Zheng et al. 2021, Sec. 3.4), so any
deterministic update rule is allowed. The rules follow PyTorch's single-tensor implementations:

* ``sgd``: ``theta -= lr * (g + wd * theta)``;
* ``momentum``: ``buf = mu * buf + (g + wd * theta)``; ``theta -= lr * buf`` (no dampening,
  no Nesterov; a zero initial buffer equals PyTorch's first-step ``buf = g``);
* ``adam``: ``torch.optim.Adam`` with L2 weight decay added to the gradient, bias corrections
  with each client's own step count.

State (one row per client, persistent across rounds; the caller stores it):
``{"step": [M] float32, "momentum_buffer": [M, d]}`` or
``{"step": [M] float32, "exp_avg": [M, d], "exp_avg_sq": [M, d]}``; ``step`` counts the
updates a client has made. The step is float32 because that is what the fused kernels read:
``torch.optim.Adam(fused=True)`` keeps its step in float32 and CUDA's ``_fused_adam_`` reads
the step tensor's memory as float32 whatever its dtype (a float64 step gave NaN after one
step). float32 counts exactly up to 2^24 steps; beyond, ``beta^step`` is 0 in float64 for any
beta < 1 - 1e-6, so the bias corrections are exactly 1 either way. States saved with a float64
step (runs checkpointed before this change) are converted by :meth:`StackedOptimizer.conform_state`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from privfl._validation import check_int
from privfl.fl.spec import LocalTrainingSpec

__all__ = ["StackedOptimizer"]

_FUSED = hasattr(torch, "_fused_adam_") and hasattr(torch, "_fused_sgd_")

#: dtype of the per-client step counts (what the fused kernels read, see the module docstring)
STEP_DTYPE = torch.float32

_KEYS = {
    "sgd": ("step",),
    "momentum": ("step", "momentum_buffer"),
    "adam": ("step", "exp_avg", "exp_avg_sq"),
}


class StackedOptimizer:
    """Applies ``spec``'s optimizer to ``[m, d]`` parameter rows in place."""

    def __init__(self, spec: LocalTrainingSpec) -> None:
        if not isinstance(spec, LocalTrainingSpec):
            raise ValueError(f"spec = {spec!r} is not a LocalTrainingSpec")
        self.spec = spec
        self._views: list[tuple[torch.Tensor, list[torch.Tensor]]] = []  # see _row_views

    @property
    def state_keys(self) -> tuple[str, ...]:
        return _KEYS[self.spec.optimizer]

    def init_state(
        self,
        count: int,
        dim: int,
        *,
        dtype: torch.dtype = torch.float32,
        device: str | torch.device | None = None,
    ) -> dict[str, torch.Tensor]:
        """Fresh state for ``count`` clients with ``dim`` parameters each."""
        count = check_int("count", count, minimum=1)
        dim = check_int("dim", dim, minimum=1)
        state = {"step": torch.zeros(count, dtype=STEP_DTYPE, device=device)}
        for key in self.state_keys[1:]:
            state[key] = torch.zeros(count, dim, dtype=dtype, device=device)
        return state

    def check_state(
        self, state: Mapping[str, torch.Tensor], count: int, dim: int, *, name: str = "state"
    ) -> None:
        if not isinstance(state, Mapping) or set(state) != set(self.state_keys):
            keys = sorted(state) if isinstance(state, Mapping) else state
            raise ValueError(
                f"{name} has keys {keys!r}: the {self.spec.optimizer!r} optimizer needs "
                f"{list(self.state_keys)}"
            )
        for key in self.state_keys:
            t = state[key]
            want = (count,) if key == "step" else (count, dim)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != want:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"{name}[{key!r}] has shape {got}: must be {want}")
            if not t.is_floating_point():
                raise ValueError(f"{name}[{key!r}] has dtype {t.dtype}: must be a floating "
                                 "point dtype")

    @staticmethod
    def conform_state(state: Mapping[str, torch.Tensor],
                      device: str | torch.device | None = None) -> dict[str, torch.Tensor]:
        """A copy of a (checked) ``state`` on ``device`` with its step counts in
        :data:`STEP_DTYPE` (a state saved with float64 steps loads unchanged in value)."""
        return {k: v.detach().to(device=device, dtype=STEP_DTYPE if k == "step" else v.dtype)
                .clone() for k, v in state.items()}

    def step_(
        self,
        params: torch.Tensor,
        grad: torch.Tensor,
        state: Mapping[str, torch.Tensor],
        lr: float | torch.Tensor,
    ) -> None:
        """One update of ``params`` (``[m, d]``, in place); ``grad`` may be modified in place.

        ``lr`` is a float or a ``[m, 1]`` tensor (per-client learning rates). Momentum and
        Adam use PyTorch's fused kernels (``torch._fused_sgd_`` / ``torch._fused_adam_``, one
        pass over the parameters) when available, else the reference implementation below.
        """
        if state["step"].dtype != STEP_DTYPE:
            raise ValueError(f"state['step'] has dtype {state['step'].dtype}: must be "
                             f"{STEP_DTYPE} (the fused kernels read it so; use conform_state)")
        state["step"].add_(1.0)
        if self.spec.optimizer != "sgd" and _FUSED and self._fused_ok:
            try:
                self._fused_step(params, grad, state, lr)
                return
            except (RuntimeError, NotImplementedError):  # device/dtype without a fused kernel
                self._fused_ok = False
        self._reference_step(params, grad, state, lr)

    _fused_ok = True

    def _fused_step(self, params, grad, state, lr) -> None:
        spec = self.spec
        m = params.shape[0]
        for rate, rows in self._rate_groups(lr, m).items():
            every = len(rows) == m

            def views(t: torch.Tensor, rows=rows, every=every) -> list[torch.Tensor]:
                return self._row_views(t) if every else [t[j] for j in rows]

            if spec.optimizer == "momentum":
                torch._fused_sgd_(
                    views(params), views(grad), views(state["momentum_buffer"]),
                    weight_decay=spec.weight_decay, momentum=spec.momentum, lr=rate,
                    dampening=0.0, nesterov=False, maximize=False, is_first_step=False,
                )
            else:
                beta1, beta2 = spec.betas
                torch._fused_adam_(
                    views(params), views(grad), views(state["exp_avg"]),
                    views(state["exp_avg_sq"]), [], views(state["step"]),
                    lr=rate, beta1=beta1, beta2=beta2, weight_decay=spec.weight_decay,
                    eps=spec.eps, amsgrad=False, maximize=False,
                )

    def _rate_groups(self, lr: float | torch.Tensor, m: int) -> dict[float, list[int]]:
        """Rows of equal learning rate (one kernel call each). A tensor of rates is read on
        the host once for the steps that reuse it (a chunk's K steps), not once per step: each
        read from a GPU waits for every kernel queued before it."""
        if not isinstance(lr, torch.Tensor):
            return {float(lr): list(range(m))}
        cached, version, groups = self._groups
        if cached is lr and version == lr._version:  # the same tensor, not changed in place
            return groups
        groups = {}
        for j, rate in enumerate(lr.reshape(m).tolist()):
            groups.setdefault(rate, []).append(j)
        self._groups = (lr, lr._version, groups)
        return groups

    _groups: tuple[torch.Tensor | None, int, dict[float, list[int]]] = (None, -1, {})

    def _row_views(self, t: torch.Tensor) -> list[torch.Tensor]:
        """The rows of ``t`` as tensors of their own (the fused kernels then compute every row
        alike, whatever the number of rows: on one ``[m, d]`` tensor their vectorised and
        scalar tails would split the elements differently). Cached for the tensors of the last
        steps (a chunk's K steps update the same buffers)."""
        for tensor, rows in self._views:
            if tensor is t:
                return rows
        rows = list(t.unbind(0))
        self._views = [*self._views[-4:], (t, rows)]
        return rows

    def _reference_step(self, params, grad, state, lr) -> None:
        spec = self.spec
        if spec.weight_decay:
            grad.add_(params, alpha=spec.weight_decay)
        if spec.optimizer == "sgd":
            if isinstance(lr, torch.Tensor):
                params.sub_(grad * lr)
            else:
                params.add_(grad, alpha=-lr)
            return
        if spec.optimizer == "momentum":
            buf = state["momentum_buffer"]
            buf.mul_(spec.momentum).add_(grad)
            if isinstance(lr, torch.Tensor):
                params.sub_(buf * lr)
            else:
                params.add_(buf, alpha=-lr)
            return
        beta1, beta2 = spec.betas
        step = state["step"]
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1.0 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        step = step.to(torch.float64)  # bias corrections in float64, as the fused kernels
        bias1 = (1.0 - torch.pow(beta1, step)).to(params.dtype).unsqueeze(1)  # [m, 1]
        bias2_sqrt = (1.0 - torch.pow(beta2, step)).sqrt().to(params.dtype).unsqueeze(1)
        step_size = lr / bias1
        denom = exp_avg_sq.sqrt().div_(bias2_sqrt).add_(spec.eps)
        params.sub_(exp_avg.div(denom).mul_(step_size))
