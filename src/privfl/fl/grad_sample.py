"""Per-layer per-example gradient book-keeping: norms, materialised gradients, clipped sums.

For a layer ``y = f(theta, a)`` with input activations ``a_i`` and output gradients
``delta_i = dloss_i / dy_i`` (both captured in one forward/backward of the whole batch),
example ``i``'s gradient is a linear function of ``(a_i, delta_i)``:

* Linear, ``y = W a + b``: ``g_W,i = sum_t delta_it a_it^T`` (t over extra dims, e.g. tokens),
  ``g_b,i = sum_t delta_it``. For 2-D inputs (one position) the **ghost norm** is exact and
  free: ``||g_W,i||^2 = ||a_i||^2 ||delta_i||^2``. With T positions either the Gram form
  ``sum_{t,s} (a_it . a_is)(delta_it . delta_is)`` (cost T^2 (in + out)) or the materialised
  gradient (cost T in out) is used, whichever is cheaper.
* Conv2d: the same with ``a`` unfolded to patches ``U_i`` (k = C_in kh kw rows, L positions):
  ``g_W,i = delta_i U_i^T``. Ghost norms cost L^2 (k + O), materialising costs L k O; for the
  papers' CNNs (L in the hundreds) materialising is ~10x cheaper, so it is the default, done as
  one grouped ``convolution_backward`` (examples as groups) on CPU and with unfold + bmm on GPU.

* Embedding, ``y_it = E[ids_it]``: row v of ``g_E,i`` is ``sum_{t: ids_it = v} delta_it``;
  its norm from the ``T x T`` token-equality mask (cost T^2 D, not V D), its clipped sum by
  one ``index_add`` (:func:`embedding_sq_norms`, :func:`embedding_weighted_sum`).
* LSTM (one layer of ``nn.LSTM``): the gate pre-activations of step t are
  ``z_t = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh``, so with ``delta_t = dloss / dz_t`` the
  layer is a Linear over T positions with input ``[x_t, h_{t-1}]`` and weight
  ``[W_ih | W_hh]``; both biases get ``sum_t delta_t`` (``privfl.fl._capture_sequence``).

The **clipped sum** never needs per-example gradients: ``sum_i c_i g_W,i = (c * delta)^T a``,
one matmul per client (``bmm`` over clients), or a weighted sum of already-materialised ones.

Rows are ordered client-major: ``N = m * b`` rows = ``m`` clients x ``b`` rows each.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812

__all__ = [
    "conv2d_ghost_sq_norms",
    "conv2d_per_example_grads",
    "conv2d_weighted_sum",
    "embedding_per_example_grads",
    "embedding_sq_norms",
    "embedding_weighted_sum",
    "linear_per_example_grads",
    "linear_sq_norms",
    "linear_weighted_sum",
    "prefer_ghost_conv",
    "prefer_ghost_linear",
]


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


# ---------------------------------------------------------------------------------- Linear
def prefer_ghost_linear(positions: int, in_features: int, out_features: int) -> bool:
    """Ghost (Gram) norms are cheaper than materialising when T^2 (in+out) <= T in out."""
    return positions == 1 or positions * (in_features + out_features) <= in_features * out_features


def linear_sq_norms(
    a: torch.Tensor, delta: torch.Tensor, *, bias: bool = True, ghost: bool | None = None
) -> torch.Tensor:
    """Per-example squared norms of a Linear layer's (weight, bias) gradient.

    ``a``: ``[N, T, in]`` (or ``[N, in]``), ``delta``: ``[N, T, out]`` (or ``[N, out]``).
    ``ghost=None`` picks the cheaper of Gram and materialised norms.
    """
    if a.dim() == 2:
        a, delta = a.unsqueeze(1), delta.unsqueeze(1)
    positions, n_in, n_out = a.shape[1], a.shape[2], delta.shape[2]
    if ghost is None:
        ghost = prefer_ghost_linear(positions, n_in, n_out)
    if positions == 1:
        sq = a.square().sum((1, 2)) * delta.square().sum((1, 2))
    elif ghost:
        gram_a = torch.bmm(a, a.transpose(1, 2))
        gram_d = torch.bmm(delta, delta.transpose(1, 2))
        sq = (gram_a * gram_d).sum((1, 2))
    else:
        sq = torch.bmm(delta.transpose(1, 2), a).square().sum((1, 2))
    if bias:
        sq = sq + delta.sum(1).square().sum(1)
    return sq


def linear_per_example_grads(
    a: torch.Tensor, delta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Materialised per-example ``(g_W [N, out, in], g_b [N, out])`` of a Linear layer."""
    if a.dim() == 2:
        a, delta = a.unsqueeze(1), delta.unsqueeze(1)
    return torch.bmm(delta.transpose(1, 2), a), delta.sum(1)


def linear_weighted_sum(
    a: torch.Tensor, delta: torch.Tensor, weights: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-client ``sum_i w_i g_i`` of a Linear layer without per-example gradients.

    ``a``: ``[m, R, in]``, ``delta``: ``[m, R, out]`` with R rows per client (examples x
    positions), ``weights``: ``[m, R]`` (the clip factor of each row's example). Returns
    ``([m, out, in], [m, out])``.
    """
    scaled = delta * weights.unsqueeze(-1).to(delta.dtype)
    return torch.bmm(scaled.transpose(1, 2), a), scaled.sum(1)


# ---------------------------------------------------------------------------------- Conv2d
def prefer_ghost_conv(positions: int, patch: int, out_channels: int) -> bool:
    """Ghost norms cost L^2 (k + O), materialising L k O: ghost only when L <= kO/(k+O)."""
    return positions * (patch + out_channels) < patch * out_channels


def _unfold(a: torch.Tensor, kernel_size, stride, padding, dilation) -> torch.Tensor:
    return F.unfold(a, _pair(kernel_size), dilation=_pair(dilation), padding=_pair(padding),
                    stride=_pair(stride))


def _conv_weight_grad(delta, a, weight_shape, stride, padding, dilation, groups=1):
    """Weight gradient of ``conv2d(a, W)`` for output gradient ``delta`` (one aten call)."""
    return torch.ops.aten.convolution_backward(
        delta, a, a.new_empty(weight_shape), None, list(_pair(stride)), list(_pair(padding)),
        list(_pair(dilation)), False, [0, 0], groups, [False, True, False],
    )[1]


def conv2d_per_example_grads(
    a: torch.Tensor,
    delta: torch.Tensor,
    kernel_size,
    *,
    stride=1,
    padding=0,
    dilation=1,
    method: str = "auto",
) -> torch.Tensor:
    """Materialised per-example weight gradients ``[N, O, C, kh, kw]`` of a Conv2d (groups=1).

    ``method``: ``"grouped"`` (one grouped ``convolution_backward`` with the N examples as
    groups; fastest on CPU), ``"unfold"`` (unfold + bmm; Opacus' approach) or ``"auto"``
    (grouped on CPU, unfold elsewhere).
    """
    kh, kw = _pair(kernel_size)
    n, c, h, w = a.shape
    o = delta.shape[1]
    if method == "auto":
        method = "grouped" if a.device.type == "cpu" else "unfold"
    if n == 0:
        return a.new_zeros((0, o, c, kh, kw))
    if method == "grouped":
        a, delta = a.contiguous(), delta.contiguous()  # examples as groups need NCHW
        grad = _conv_weight_grad(
            delta.reshape(1, n * o, *delta.shape[2:]), a.reshape(1, n * c, h, w),
            (n * o, c, kh, kw), stride, padding, dilation, groups=n,
        )
        return grad.view(n, o, c, kh, kw)
    if method != "unfold":
        raise ValueError(
            f"method = {method!r} is not allowed: must be one of auto, grouped, unfold"
        )
    patches = _unfold(a, (kh, kw), stride, padding, dilation)  # [N, k, L]
    grad = torch.bmm(delta.reshape(n, o, -1), patches.transpose(1, 2))
    return grad.view(n, o, c, kh, kw)


def conv2d_ghost_sq_norms(
    a: torch.Tensor, delta: torch.Tensor, kernel_size, *, stride=1, padding=0, dilation=1
) -> torch.Tensor:
    """Per-example squared weight-gradient norms of a Conv2d from Gram matrices (no gradients).

    ``||delta_i U_i^T||_F^2 = sum_{l,l'} (U_i^T U_i)_{l l'} (delta_i^T delta_i)_{l l'}``.
    """
    n, o = a.shape[0], delta.shape[1]
    patches = _unfold(a, kernel_size, stride, padding, dilation)  # [N, k, L]
    d = delta.reshape(n, o, -1)
    gram_u = torch.bmm(patches.transpose(1, 2), patches)
    gram_d = torch.bmm(d.transpose(1, 2), d)
    return (gram_u * gram_d).sum((1, 2))


def conv2d_weighted_sum(
    a: torch.Tensor,
    delta: torch.Tensor,
    weights: torch.Tensor,
    kernel_size,
    *,
    stride=1,
    padding=0,
    dilation=1,
) -> torch.Tensor:
    """Per-client ``sum_i w_i g_W,i`` of a Conv2d, ``[m, O, C, kh, kw]``, without per-example
    gradients (one weight-gradient convolution per client with ``delta`` scaled by ``w``).

    ``a``: ``[m, b, C, H, W]``, ``delta``: ``[m, b, O, H', W']``, ``weights``: ``[m, b]``.
    """
    m, b = weights.shape
    kh, kw = _pair(kernel_size)
    c, o = a.shape[2], delta.shape[2]
    out = []
    for j in range(m):
        scaled = delta[j] * weights[j].to(delta.dtype).view(b, 1, 1, 1)
        out.append(_conv_weight_grad(scaled, a[j], (o, c, kh, kw), stride, padding, dilation))
    return torch.stack(out)


# ---------------------------------------------------------------------------------- Embedding
def _embedding_rows(ids: torch.Tensor, delta: torch.Tensor, padding_idx: int | None):
    """``ids`` as ``[N, T]`` and ``delta`` as ``[N, T, D]``, with the padding token's output
    gradients zeroed (``nn.Embedding`` never updates its ``padding_idx`` row)."""
    n = ids.shape[0]
    ids = ids.reshape(n, -1)
    delta = delta.reshape(n, ids.shape[1], -1)
    if padding_idx is not None:
        delta = delta * (ids != padding_idx).unsqueeze(-1).to(delta.dtype)
    return ids, delta


def embedding_sq_norms(ids: torch.Tensor, delta: torch.Tensor, *,
                       padding_idx: int | None = None) -> torch.Tensor:
    """Per-example squared norms of an Embedding's weight gradient, never materialised.

    Example i's gradient has row ``v`` equal to ``sum_{t: ids_it = v} delta_it``, so
    ``||g_i||^2 = sum_{t,s} [ids_it = ids_is] (delta_it . delta_is)`` (cost T^2 D, independent
    of the vocabulary size V). ``ids``: ``[N, T]``, ``delta``: ``[N, T, D]``.
    """
    ids, delta = _embedding_rows(ids, delta, padding_idx)
    same = (ids.unsqueeze(2) == ids.unsqueeze(1)).to(delta.dtype)
    return (same * torch.bmm(delta, delta.transpose(1, 2))).sum((1, 2))


def embedding_weighted_sum(ids: torch.Tensor, delta: torch.Tensor, weights: torch.Tensor,
                           num_embeddings: int, *, padding_idx: int | None = None
                           ) -> torch.Tensor:
    """Per-client ``sum_i w_i g_i`` of an Embedding, ``[m, V, D]``: every position's weighted
    ``delta`` added into its token's row of its client's gradient (one ``index_add``).

    ``ids``: ``[m b, T]``, ``delta``: ``[m b, T, D]``, ``weights``: ``[m, b]``.
    """
    m, b = weights.shape
    ids, delta = _embedding_rows(ids, delta, padding_idx)
    positions, dim = ids.shape[1], delta.shape[2]
    scaled = delta * weights.reshape(m * b, 1, 1).to(delta.dtype)
    client = torch.arange(m, device=ids.device).repeat_interleave(b * positions)
    rows = client * num_embeddings + ids.reshape(-1)
    out = delta.new_zeros(m * num_embeddings, dim)
    out.index_add_(0, rows, scaled.reshape(-1, dim))
    return out.reshape(m, num_embeddings, dim)


def embedding_per_example_grads(ids: torch.Tensor, delta: torch.Tensor, num_embeddings: int,
                                *, padding_idx: int | None = None) -> torch.Tensor:
    """Materialised per-example weight gradients ``[N, V, D]`` of an Embedding (checks only:
    ``N V D`` numbers)."""
    n = ids.shape[0]
    ones = delta.new_ones(n, 1)
    return embedding_weighted_sum(ids, delta, ones, num_embeddings, padding_idx=padding_idx
                                  ).reshape(n, num_embeddings, -1)
