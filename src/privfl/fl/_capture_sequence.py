"""Captured wrappers for text models: ``nn.Embedding`` and ``nn.LSTM`` on stacked rows.

Companions of :mod:`privfl.fl._capture` (same :class:`~privfl.fl._capture_base.Layer` protocol:
forward on ``m`` stacked clients, ``sq_norms``, ``weighted_sums``, ``per_example``).

* :class:`EmbeddingLayer`: ``y_it = E[ids_it]``; per client one lookup in its own table
  (the batched layout offsets client j's ids by ``j V`` into the ``[m V, D]`` tables). Norms
  and clipped sums from the captured ``(ids, delta)`` (:mod:`privfl.fl.grad_sample`); the
  ``padding_idx`` row gets no gradient, as in ``nn.Embedding``. A frozen embedding
  (``requires_grad=False``) is not wrapped: it runs unchanged and takes no gradient.
* :class:`LSTMModule`: ``nn.LSTM`` (``batch_first``, one direction, no projection, no
  inter-layer dropout) unrolled in Python as ``torch.func``-free tensor code, one
  :class:`LSTMPart` per layer. Layer k computes ``z = X W_ih^T + b_ih + b_hh`` for all T steps
  at once and records it; step t then adds ``W_hh h_{t-1}`` and applies the gates (PyTorch's
  order i, f, g, o). The gradient of the loss w.r.t. the recorded ``z[:, t]`` is the gradient
  w.r.t. step t's gate pre-activations, so the layer is a Linear over T positions with input
  ``[x_t, h_{t-1}]`` (recorded after the loop) and weight ``[W_ih | W_hh]``; ``b_ih`` and
  ``b_hh`` both get ``sum_t delta_t``. This is the decomposition of Opacus' ``DPLSTM``, done on
  one captured ``(a, delta)`` per layer instead of per-step hooks. ``nn.LSTM``'s fused kernel
  (``mkldnn_rnn_layer``) has no ``vmap`` batching rule, which is why the whole-model
  ``torch.func`` fallback is slow for LSTMs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from privfl.fl import grad_sample as gs
from privfl.fl._capture_base import Context, Layer, UnsupportedModelError

__all__ = ["EmbeddingLayer", "LSTMModule", "LSTMPart", "embedding_supported", "lstm_supported"]


def embedding_supported(module: nn.Module) -> bool:
    """A trainable ``nn.Embedding`` whose gradient is the plain scatter of ``delta``."""
    return (isinstance(module, nn.Embedding) and module.weight.requires_grad
            and module.max_norm is None and not module.scale_grad_by_freq)


def lstm_supported(module: nn.Module) -> bool:
    """An ``nn.LSTM`` the unrolled wrapper reproduces exactly (see the module docstring)."""
    return (isinstance(module, nn.LSTM) and module.batch_first and not module.bidirectional
            and module.proj_size == 0 and module.dropout == 0
            and all(p.requires_grad for p in module.parameters()))


class EmbeddingLayer(Layer):
    def __init__(self, ctx: Context, prefix: str, module: nn.Embedding) -> None:
        super().__init__(ctx, prefix, {"weight": prefix + "weight"})
        self.num_embeddings, self.embedding_dim = module.num_embeddings, module.embedding_dim
        self.padding_idx = module.padding_idx

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise ValueError(f"token ids have dtype {ids.dtype}: an Embedding needs integer ids")
        ctx, w = self.ctx, self.p("weight")
        if ctx.single:
            out = F.embedding(ids, w)
        else:
            shifted = ids.reshape(ctx.m, -1) + self.num_embeddings * torch.arange(
                ctx.m, device=ids.device).unsqueeze(1)
            out = F.embedding(shifted.reshape(ids.shape),
                              w.reshape(ctx.m * self.num_embeddings, self.embedding_dim))
        return ctx.record(self, ids, out)

    def sq_norms(self, rec, delta):
        return gs.embedding_sq_norms(rec.a, delta, padding_idx=self.padding_idx)

    def weighted_sums(self, rec, delta, weights):
        return {self.names["weight"]: gs.embedding_weighted_sum(
            rec.a, delta, weights, self.num_embeddings, padding_idx=self.padding_idx)}

    def per_example(self, rec, delta):
        return {self.names["weight"]: gs.embedding_per_example_grads(
            rec.a, delta, self.num_embeddings, padding_idx=self.padding_idx)}


class LSTMPart(Layer):
    """Layer ``k`` of an ``nn.LSTM``: recorded input ``[x_t, h_{t-1}]`` (``[N, T, in + H]``),
    recorded output the gate pre-activations without the recurrent term (``[N, T, 4H]``)."""

    def __init__(self, ctx: Context, prefix: str, module: nn.LSTM, k: int) -> None:
        names = {"weight_ih": f"{prefix}weight_ih_l{k}", "weight_hh": f"{prefix}weight_hh_l{k}"}
        if module.bias:
            names["bias_ih"] = f"{prefix}bias_ih_l{k}"
            names["bias_hh"] = f"{prefix}bias_hh_l{k}"
        super().__init__(ctx, f"{prefix}l{k}", names)
        self.hidden = module.hidden_size
        self.in_features = module.input_size if k == 0 else module.hidden_size

    def _input_gates(self, x):
        ctx, w, b_ih, b_hh = self.ctx, self.p("weight_ih"), self.p("bias_ih"), self.p("bias_hh")
        if ctx.single:
            z = F.linear(x, w, b_ih)
            return z if b_hh is None else z + b_hh
        z = torch.bmm(x.reshape(ctx.m, -1, self.in_features), w.transpose(1, 2))
        if b_ih is not None:
            z = z + (b_ih + b_hh).unsqueeze(1)
        return z.reshape(*x.shape[:2], 4 * self.hidden)

    def _recurrent(self, h, w):
        if self.ctx.single:
            return F.linear(h, w)
        m = self.ctx.m
        return torch.bmm(h.reshape(m, -1, self.hidden), w.transpose(1, 2)).reshape(h.shape[0], -1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x``: ``[N, T, in]`` -> (outputs ``[N, T, H]``, last h ``[N, H]``, last c)."""
        ctx, w_hh = self.ctx, self.p("weight_hh")
        z = ctx.record(self, x, self._input_gates(x))
        h = c = x.new_zeros(x.shape[0], self.hidden)
        outputs, previous = [], []
        for t in range(x.shape[1]):
            previous.append(h)
            i, f, g, o = (z[:, t] + self._recurrent(h, w_hh)).chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outputs.append(h)
        if ctx.capture:
            ctx.records[-1].a = torch.cat([x.detach(), torch.stack(previous, 1).detach()], -1)
        return torch.stack(outputs, 1), h, c

    def _split(self, g):  # [..., 4H, in + H] -> W_ih, W_hh gradients
        return g[..., : self.in_features], g[..., self.in_features:]

    def _bias_grads(self, gb):
        if "bias_ih" not in self.names:
            return {}
        return {self.names["bias_ih"]: gb, self.names["bias_hh"]: gb.clone()}

    def sq_norms(self, rec, delta):
        sq = gs.linear_sq_norms(rec.a, delta, bias=False)
        if "bias_ih" in self.names:
            sq = sq + 2 * delta.sum(1).square().sum(1)
        return sq

    def weighted_sums(self, rec, delta, weights):
        m, b = weights.shape
        positions, width = rec.a.shape[1], rec.a.shape[2]
        gw, gb = gs.linear_weighted_sum(
            rec.a.reshape(m, b * positions, width), delta.reshape(m, b * positions, -1),
            weights.repeat_interleave(positions, dim=1))
        w_ih, w_hh = self._split(gw)
        return {self.names["weight_ih"]: w_ih, self.names["weight_hh"]: w_hh,
                **self._bias_grads(gb)}

    def per_example(self, rec, delta):
        gw, gb = gs.linear_per_example_grads(rec.a, delta)
        w_ih, w_hh = self._split(gw)
        return {self.names["weight_ih"]: w_ih, self.names["weight_hh"]: w_hh,
                **self._bias_grads(gb)}


class LSTMModule(nn.Module):
    """Stand-in for an ``nn.LSTM``: returns ``(output, (h_n, c_n))`` as it does."""

    def __init__(self, ctx: Context, prefix: str, module: nn.LSTM) -> None:
        super().__init__()
        self.prefix = prefix
        self.parts = nn.ModuleList(LSTMPart(ctx, prefix, module, k)
                                   for k in range(module.num_layers))

    def forward(self, x: torch.Tensor, hx=None):
        if hx is not None or x.dim() != 3:
            raise UnsupportedModelError(
                f"LSTM {self.prefix[:-1]!r} called with an initial state or unbatched input: the "
                "engine's unrolled LSTM takes batch-first [N, T, in] inputs from a zero state")
        last_h, last_c = [], []
        for part in self.parts:
            x, h, c = part(x)
            last_h.append(h)
            last_c.append(c)
        return x, (torch.stack(last_h), torch.stack(last_c))
