"""Small models and reference per-example gradients for the engine tests."""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from privfl.fl import load_params, replicate_params


class TinyCNN(nn.Module):
    """Conv (bias) -> ReLU -> MaxPool -> Conv (stride 2, padding 1, no bias) -> Dropout2d ->
    Flatten -> Linear -> ReLU -> Dropout -> Linear -> log_softmax. Input 1 x 10 x 10."""

    output = "log_probs"
    input_shape = (1, 10, 10)

    def __init__(self, dropout: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False)
        self.drop1 = nn.Dropout2d(0.3) if dropout else nn.Identity()
        self.fc1 = nn.Linear(6 * 2 * 2, 12)
        self.drop2 = nn.Dropout(0.4) if dropout else nn.Identity()
        self.fc2 = nn.Linear(12, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = self.drop1(self.conv2(x))
        x = torch.flatten(x, -3)
        x = self.drop2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=-1)


def perturbed_params(model: nn.Module, count: int, seed: int = 0, scale: float = 0.05):
    """``count`` different stacked copies of the model's parameters."""
    gen = torch.Generator().manual_seed(seed)
    params = replicate_params(model, count)
    for value in params.values():
        value.add_(scale * torch.randn(value.shape, generator=gen, dtype=value.dtype))
    return params


def reference_per_example(model: nn.Module, params, x, y, loss_fn=None):
    """Per-example gradients by one backward per example, client by client (the reference)."""
    import copy

    loss_fn = loss_fn or (lambda out, t: F.cross_entropy(out, t, reduction="none"))
    m, b = x.shape[:2]
    net = copy.deepcopy(model).train()
    names = [n for n, p in net.named_parameters() if p.requires_grad]
    result = {n: torch.zeros(m, b, *params[n].shape[1:], dtype=params[n].dtype) for n in names}
    for j in range(m):
        load_params(net, params, j)
        for i in range(b):
            loss = loss_fn(net(x[j, i : i + 1]), y[j, i : i + 1]).sum()
            grads = torch.autograd.grad(loss, [dict(net.named_parameters())[n] for n in names])
            for n, g in zip(names, grads, strict=True):
                result[n][j, i] = g
    return result
