"""A model that runs ``M`` stacked parameter rows at once: the captured net and its fallback.

:class:`StackedModel` owns what the trainer's gradient kernels (:mod:`privfl.fl.kernels`) and
the stacked evaluation (:mod:`privfl.fl.evaluate`) run:

* the *captured net*: a deep copy of the model whose ``Linear`` / ``Conv2d`` / other
  parameter-owning modules read each row's parameters from stacked tensors and record their
  inputs and outputs, and whose ``Dropout*`` modules draw per-example masks from each row's
  stream (:mod:`privfl.fl._capture`); a client worker thread uses a replica of its own;
* the *plain copy*: a train-mode deep copy for the ``torch.func`` paths (``functional_call``,
  ``vmap(grad)``), used for models the captured net cannot run (a layer called twice) or when
  ``per_example="vmap"`` is asked for;
* the per-example loss ``loss_fn(output, target) -> [N]`` (masked for padded slots).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from privfl._validation import check_choice
from privfl.fl._capture import DropoutLayer, UnsupportedModelError, prepare_model
from privfl.fl.layout import ParamLayout

__all__ = ["StackedModel", "cross_entropy_loss"]


def cross_entropy_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy (equals NLL on log-probabilities: log_softmax is idempotent)."""
    return F.cross_entropy(output, target, reduction="none")


class StackedModel:
    """The captured net, the plain copy and the loss of one model (see the module docstring).

    Parameters
    ----------
    model
        Architecture template (its parameter values are not used). No BatchNorm.
    layout
        The :class:`~privfl.fl.layout.ParamLayout` of ``model``.
    loss_fn
        ``loss_fn(output, target) -> per-example losses [N]``; default cross-entropy.
    per_example
        ``"auto"`` (captured net, ``torch.func`` fallback) or ``"vmap"`` (always ``torch.func``).
    """

    def __init__(self, model: nn.Module, layout: ParamLayout, *,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                 per_example: str = "auto") -> None:
        if loss_fn is not None and not callable(loss_fn):
            raise ValueError(f"loss_fn = {loss_fn!r} is not callable")
        self.template = model
        self.layout = layout
        self.loss_fn = loss_fn or cross_entropy_loss
        self.per_example = check_choice("per_example", per_example, ("auto", "vmap"))
        self.plain = copy.deepcopy(model).train()
        #: ``() -> (net, ctx) or None``: the calling client worker's replica (set by the
        #: trainer while client workers run)
        self.replica: Callable[[], tuple | None] = lambda: None
        self._net = self._ctx = None
        self._layers: list = []
        self.fallback_reason: str | None = None
        if self.per_example == "vmap":
            self.fallback_reason = "per_example='vmap' requested"
        else:
            try:
                self._net, self._ctx, self._layers = prepare_model(model, layout.param_names)
            except UnsupportedModelError as error:
                self.fallback_reason = str(error)
        #: evaluation: bytes per example, by input shape (:mod:`privfl.fl.evaluate`)
        self.eval_bytes: dict = {}

    # ------------------------------------------------------------------ the captured net
    @property
    def uses_fast_path(self) -> bool:
        """Whether the captured net runs (False: the ``torch.func`` fallback)."""
        return self._net is not None

    @property
    def net(self) -> nn.Module | None:
        """The captured net (the calling client worker's replica, if any)."""
        replica = self.replica()
        return self._net if replica is None else replica[0]

    @property
    def ctx(self):
        """The capture context of :attr:`net`."""
        replica = self.replica()
        return self._ctx if replica is None else replica[1]

    def make_replica(self) -> tuple:
        """A new ``(net, ctx)`` for a client worker thread."""
        return prepare_model(self.template, self.layout.param_names)[:2]

    def disable_fast_path(self, reason: str) -> None:
        """Use the ``torch.func`` fallback from now on (a layer turned out unsupported)."""
        self.fallback_reason = reason
        self._net = self._ctx = None
        self._layers = []

    @property
    def layer_kinds(self) -> list[str]:
        """The captured layers' handlers in order (``"LinearLayer"``, ``"Conv2dLayer"``,
        ``"GenericLayer"``); empty on the fallback."""
        return [type(layer).__name__ for layer in self._layers]

    # ------------------------------------------------------------------ modes and masks
    def modules(self) -> list[nn.Module]:
        """Every module that runs a forward (the plain copy and the captured net)."""
        return [self.plain] + ([self._net] if self._net is not None else [])

    @property
    def training(self) -> bool:
        """Whether every module is in train mode (dropout on), as training needs."""
        return all(module.training for module in self.modules())

    def keep_masks(self, keep: bool = True) -> None:
        """Record the dropout masks of the next forwards (:meth:`dropout_masks`; checks)."""
        if self._ctx is not None:
            self._ctx.keep_masks = bool(keep)

    def dropout_masks(self) -> dict[str, torch.Tensor]:
        """The masks the captured net's dropout modules drew last (with :meth:`keep_masks`):
        module name -> ``[M * b, *mask shape]``."""
        if self._net is None:
            return {}
        return {name.removeprefix("net."): module.last_mask
                for name, module in self._net.named_modules()
                if isinstance(module, DropoutLayer) and module.last_mask is not None}

    # ------------------------------------------------------------------ loss
    def losses(self, out: torch.Tensor, y: torch.Tensor,
               mask: torch.Tensor | None) -> torch.Tensor:
        """Per-example losses ``[N]`` (times ``mask``: 0 in padded slots)."""
        losses = self.loss_fn(out, y)
        if not isinstance(losses, torch.Tensor) or losses.shape != (y.shape[0],):
            got = tuple(losses.shape) if isinstance(losses, torch.Tensor) else type(losses)
            raise ValueError(
                f"loss_fn returned {got}: must return one loss per example, shape ({y.shape[0]},)"
            )
        if mask is not None:
            losses = losses * mask.flatten().to(losses.dtype)
        return losses
