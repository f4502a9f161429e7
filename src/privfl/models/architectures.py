"""The papers' models, layer for layer.

Rules for every model here (they are trained with per-example DP-SGD via ``torch.func``):

* **No BatchNorm**: its batch statistics couple examples and break per-example clipping. Where
  normalisation is wanted, :class:`MLP` offers GroupNorm, which is per example.
* No in-place activations, no buffers updated in ``forward``: the models work under
  ``torch.func.functional_call`` and ``vmap``.
* **Dropout** appears only in :class:`Zheng2021MnistCNN` (as in Zheng et al. 2021's code) and
  optionally in :class:`MLP`. A dropout mask is drawn per example, so per-example gradients stay
  independent; under ``vmap`` call it with ``randomness="different"`` (or pass ``dropout=False``).
* Each model has ``output`` (``"logits"`` or ``"log_probs"``) and ``input_shape``. Cross-entropy
  on log-probabilities equals NLL (``log_softmax`` is idempotent), so one loss serves both.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F  # noqa: N812 - the torch convention
from torch import nn

from privfl._validation import check_choice, check_int, check_range

__all__ = [
    "MLP",
    "LogisticRegression",
    "SmallConvNet",
    "Xie2023CifarCNN",
    "Zheng2021CifarCNN",
    "Zheng2021MnistCNN",
]

_ACTIVATIONS = {"relu": F.relu, "tanh": torch.tanh}


def _shape(input_shape: Sequence[int]) -> tuple[int, ...]:
    try:
        shape = tuple(check_int("input_shape", d, 1) for d in input_shape)
    except TypeError as error:
        raise ValueError(f"input_shape = {input_shape!r} is not a sequence of sizes") from error
    if len(shape) == 2:
        raise ValueError(
            f"input_shape = {shape} is out of range: must be (features,), (C, H, W) or another "
            "layout of one or >= 3 axes (images of H x W are (1, H, W))"
        )
    return shape


def _check_image(model: nn.Module, x: torch.Tensor) -> None:
    """A convolutional model takes images: refuse ``N x D`` (tabular) inputs, naming the fix."""
    if x.dim() < 3:
        raise ValueError(
            f"input shape {tuple(x.shape)} is not allowed: {type(model).__name__} is a "
            f"convolutional network for images {tuple(model.input_shape)} (C, H, W); for "
            "N x D (tabular) data use model mlp or logreg"
        )


def _check_input(model: nn.Module, x: torch.Tensor) -> None:
    expected = tuple(model.input_shape)
    if x.dim() < 1 or tuple(x.shape[-len(expected):]) != expected:
        raise ValueError(
            f"input shape {tuple(x.shape)} does not end in {type(model).__name__}.input_shape "
            f"{expected}"
        )


class Zheng2021MnistCNN(nn.Module):
    """Zheng et al. 2021's MNIST CNN (the PyTorch MNIST example net), 1,199,882 parameters.

    ==  =================================================  ===========
    #   layer                                              output
    ==  =================================================  ===========
    1   Conv2d(1->32, 3x3) + ReLU                          32x26x26
    2   Conv2d(32->64, 3x3) + ReLU                         64x24x24
    3   MaxPool 2x2                                        64x12x12
    4   Dropout2d(0.25)  (channel dropout)
    5   Flatten                                            9216
    6   Linear(9216->128) + ReLU                           128
    7   Dropout(0.5)  (the code's Dropout2d on a 2-D tensor acts element-wise)
    8   Linear(128->10) + log_softmax                      10
    ==  =================================================  ===========

    Returns log-probabilities (loss: NLL). ``dropout=False`` removes both dropout layers.
    """

    output = "log_probs"
    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, *, dropout: bool = True) -> None:
        super().__init__()
        num_classes = check_int("num_classes", num_classes, 2)
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25) if dropout else nn.Identity()
        self.dropout2 = nn.Dropout(0.5) if dropout else nn.Identity()
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_image(self, x)
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = torch.flatten(x, -3)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=-1)


class Zheng2021CifarCNN(nn.Module):
    """Zheng et al. 2021's CIFAR-10 CNN (TensorFlow tutorial CNN as in their code), 122,570
    parameters.

    Conv(3->32, 3x3)+ReLU+MaxPool2 -> Conv(32->64, 3x3)+ReLU+MaxPool2 -> Conv(64->64, 3x3)
    **without ReLU** (as in the reference code; the TF tutorial has one: ``conv3_relu=True``)
    -> Flatten(1024) -> Linear(1024->64)+ReLU -> Linear(64->10), logits.
    """

    output = "logits"
    input_shape = (3, 32, 32)

    def __init__(self, num_classes: int = 10, *, conv3_relu: bool = False) -> None:
        super().__init__()
        num_classes = check_int("num_classes", num_classes, 2)
        self.conv1 = nn.Conv2d(3, 32, 3)
        self.conv2 = nn.Conv2d(32, 64, 3)
        self.conv3 = nn.Conv2d(64, 64, 3)
        self.fc1 = nn.Linear(64 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, num_classes)
        self.conv3_relu = bool(conv3_relu)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_image(self, x)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = self.conv3(x)
        if self.conv3_relu:
            x = F.relu(x)
        x = torch.flatten(x, -3)
        return self.fc2(F.relu(self.fc1(x)))


class SmallConvNet(nn.Module):
    """The Opacus / TF-Privacy MNIST CNN: Xie et al. 2023's MNIST model, Hasircioglu and Gunduz
    2022's EMNIST model.

    Conv(1->16, 8x8, stride 2, pad 3) + act -> MaxPool(2, stride 1) -> Conv(16->32, 4x4,
    stride 2) + act -> MaxPool(2, stride 1) -> Flatten(512) -> Linear(512->32) + act ->
    Linear(32->num_classes), logits. Shapes 16x14x14 -> 16x13x13 -> 32x5x5 -> 32x4x4.

    Parameters: 25,746 with ``num_classes=2`` (Xie et al. 2023, MNIST 0 vs 1), 26,010 with 10,
    27,726 with 62 (Hasircioglu and Gunduz 2022, EMNIST byclass — privfl's best guess for the
    model of the paper's lost Figure 8; the activation is unknown there, ReLU by default,
    ``activation="tanh"`` available).
    """

    output = "logits"
    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, *, activation: str = "relu") -> None:
        super().__init__()
        num_classes = check_int("num_classes", num_classes, 2)
        self.activation = check_choice("activation", activation, _ACTIVATIONS)
        self.conv1 = nn.Conv2d(1, 16, 8, 2, padding=3)
        self.conv2 = nn.Conv2d(16, 32, 4, 2)
        self.fc1 = nn.Linear(32 * 4 * 4, 32)
        self.fc2 = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_image(self, x)
        act = _ACTIVATIONS[self.activation]
        x = F.max_pool2d(act(self.conv1(x)), 2, 1)
        x = F.max_pool2d(act(self.conv2(x)), 2, 1)
        x = torch.flatten(x, -3)
        return self.fc2(act(self.fc1(x)))


class Xie2023CifarCNN(nn.Module):
    """Xie et al. 2023's CIFAR model (the Opacus CIFAR-10 example CNN).

    Four blocks Conv(3x3, pad 1)+ReLU with channels 32, 64, 64, 128, each followed by
    AvgPool(2) (the last by AdaptiveAvgPool(1x1)), then Linear(128->num_classes). 143,076
    parameters with the 100-way CIFAR-100 pre-training head, 130,434 with the binary head.
    The paper fine-tunes a CIFAR-100 pre-trained body; the checkpoint is not part of privfl.
    """

    output = "logits"
    input_shape = (3, 32, 32)

    def __init__(self, num_classes: int = 2) -> None:
        super().__init__()
        num_classes = check_int("num_classes", num_classes, 2)
        self.conv1 = nn.Conv2d(3, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 64, 3, padding=1)
        self.conv4 = nn.Conv2d(64, 128, 3, padding=1)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_image(self, x)
        x = F.avg_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
        x = F.avg_pool2d(F.relu(self.conv3(x)), 2)
        x = F.adaptive_avg_pool2d(F.relu(self.conv4(x)), 1)
        return self.fc(torch.flatten(x, -3))


def _features(shape: tuple[int, ...]) -> int:
    total = 1
    for d in shape:
        total *= d
    return total


class LogisticRegression(nn.Module):
    """Multinomial logistic regression: flatten, one Linear layer, logits."""

    output = "logits"

    def __init__(self, input_shape: Sequence[int] = (1, 28, 28), num_classes: int = 10) -> None:
        super().__init__()
        self.input_shape = _shape(input_shape)
        num_classes = check_int("num_classes", num_classes, 2)
        self.linear = nn.Linear(_features(self.input_shape), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x)
        return self.linear(torch.flatten(x, x.dim() - len(self.input_shape)))


class MLP(nn.Module):
    """Fully connected network: flatten, hidden layers with activation, logits.

    Parameters
    ----------
    input_shape, num_classes
        Input size (``(C, H, W)`` or ``(features,)``) and number of classes.
    hidden
        Widths of the hidden layers (default ``(200, 200)``, McMahan et al.'s "2NN").
    activation
        ``"relu"`` or ``"tanh"``.
    norm_groups
        If > 0, GroupNorm with this many groups after each hidden Linear (per-example, DP-safe;
        must divide every hidden width). 0: no normalisation.
    dropout
        Dropout probability after each hidden activation (0: none).
    """

    output = "logits"

    def __init__(
        self,
        input_shape: Sequence[int] = (1, 28, 28),
        num_classes: int = 10,
        hidden: Sequence[int] = (200, 200),
        *,
        activation: str = "relu",
        norm_groups: int = 0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.input_shape = _shape(input_shape)
        num_classes = check_int("num_classes", num_classes, 2)
        widths = [check_int("hidden", h, 1) for h in hidden]
        self.activation = check_choice("activation", activation, _ACTIVATIONS)
        norm_groups = check_int("norm_groups", norm_groups, 0)
        p = check_range("dropout", dropout, 0.0, 1.0, high_open=True)
        for width in widths:
            if norm_groups and width % norm_groups:
                raise ValueError(
                    f"norm_groups = {norm_groups} is out of range: must divide every hidden "
                    f"width {widths}"
                )
        layers: list[nn.Module] = []
        previous = _features(self.input_shape)
        for width in widths:
            layers.append(nn.Linear(previous, width))
            layers.append(nn.GroupNorm(norm_groups, width) if norm_groups else nn.Identity())
            layers.append(nn.Dropout(p) if p > 0 else nn.Identity())
            previous = width
        self.hidden = nn.ModuleList(layers)
        self.out = nn.Linear(previous, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_input(self, x)
        x = torch.flatten(x, x.dim() - len(self.input_shape))
        act = _ACTIVATIONS[self.activation]
        for i in range(0, len(self.hidden), 3):
            linear, norm, drop = self.hidden[i : i + 3]
            x = drop(act(norm(linear(x))))
        return self.out(x)
