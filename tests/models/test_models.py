"""Parameter counts (spec tables), forward shapes, torch.func compatibility, bad inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from privfl.models import (
    MLP,
    LogisticRegression,
    Seed0CifarCNN,
    Seed0MnistCNN,
    SmallConvNet,
    build_model,
    count_parameters,
    list_models,
)

# name, kwargs, parameters (spec seed0 6.5, seed2 6.2, seed3 6), output classes
COUNTS = [
    ("seed0-mnist-cnn", {}, 1_199_882, 10),
    ("seed0-cifar-cnn", {}, 122_570, 10),
    ("seed0-cifar-cnn", {"conv3_relu": True}, 122_570, 10),
    ("seed2-mnist-cnn", {}, 25_746, 2),
    ("seed2-mnist-cnn", {"num_classes": 10}, 26_010, 10),
    ("seed2-cifar-cnn", {"num_classes": 100}, 143_076, 100),
    ("seed2-cifar-cnn", {}, 130_434, 2),
    ("seed3-emnist-cnn", {}, 27_726, 62),
    ("logreg", {}, 7_850, 10),
    ("logreg", {"input_shape": (64,), "num_classes": 3}, 195, 3),
    ("mlp", {}, 199_210, 10),
    ("mlp", {"hidden": (32,), "norm_groups": 4}, 25_450 + 64, 10),
]


@pytest.mark.parametrize(("name", "kwargs", "params", "classes"), COUNTS)
def test_parameter_counts_and_forward_shapes(name, kwargs, params, classes):
    torch.manual_seed(0)
    model = build_model(name, **kwargs)
    assert count_parameters(model) == params
    model.eval()
    x = torch.randn(3, *model.input_shape)
    out = model(x)
    assert out.shape == (3, classes) and torch.isfinite(out).all()
    if model.output == "log_probs":
        torch.testing.assert_close(out.exp().sum(dim=1), torch.ones(3))


def test_registry_names():
    assert list_models() == ["seed0-mnist-cnn", "seed0-cifar-cnn", "seed2-mnist-cnn",
                             "seed2-cifar-cnn", "seed3-emnist-cnn", "logreg", "mlp"]


def test_no_batchnorm_anywhere():
    for name in list_models():
        model = build_model(name)
        assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
        assert not list(model.buffers())  # nothing updated from batch statistics


def test_seed0_mnist_layers_and_dropout():
    model = Seed0MnistCNN()
    assert isinstance(model.dropout1, nn.Dropout2d) and model.dropout1.p == 0.25
    assert isinstance(model.dropout2, nn.Dropout) and model.dropout2.p == 0.5
    assert model.fc1.in_features == 9216
    x = torch.randn(4, 1, 28, 28)
    model.eval()
    torch.testing.assert_close(model(x), model(x))  # eval: deterministic
    model.train()
    torch.manual_seed(0)
    a = model(x)
    b = model(x)
    assert not torch.allclose(a, b)  # train: dropout active
    plain = Seed0MnistCNN(dropout=False).train()
    assert count_parameters(plain) == 1_199_882
    torch.testing.assert_close(plain(x), plain(x))


def test_seed0_cifar_conv3_without_relu():
    model = Seed0CifarCNN().eval()
    with_relu = Seed0CifarCNN(conv3_relu=True).eval()
    with_relu.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 32, 32)
    assert not torch.allclose(model(x), with_relu(x))


def test_small_convnet_shapes_and_tanh():
    model = SmallConvNet(num_classes=2, activation="tanh")
    x = torch.randn(1, 1, 28, 28)
    h = torch.nn.functional.max_pool2d(torch.tanh(model.conv1(x)), 2, 1)
    assert h.shape == (1, 16, 13, 13)
    h = torch.nn.functional.max_pool2d(torch.tanh(model.conv2(h)), 2, 1)
    assert h.shape == (1, 32, 4, 4)


@pytest.mark.parametrize("name", ["seed2-mnist-cnn", "seed0-cifar-cnn", "mlp", "logreg"])
def test_per_example_gradients_with_torch_func(name):
    """vmap(grad(...)) per-example gradients equal one backward pass per example."""
    torch.manual_seed(1)
    kwargs = {"hidden": (16, 16), "norm_groups": 4} if name == "mlp" else {}
    model = build_model(name, **kwargs)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(3, *model.input_shape)
    y = torch.tensor([0, 1, 1])

    def loss(p, xi, yi):
        out = functional_call(model, p, (xi.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, yi.unsqueeze(0))

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)
    for i in range(3):
        model.zero_grad()
        torch.nn.functional.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        for k, p in model.named_parameters():
            torch.testing.assert_close(per_example[k][i], p.grad, rtol=1e-4, atol=1e-5)


def test_seed0_mnist_vmap_with_dropout_randomness():
    model = Seed0MnistCNN().train()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.randn(2, 1, 28, 28)

    def forward(p, xi):
        return functional_call(model, p, (xi.unsqueeze(0),)).squeeze(0)

    out = vmap(forward, in_dims=(None, 0), randomness="different")(params, x)
    assert out.shape == (2, 10)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: build_model("resnet"), "name = 'resnet' is not allowed"),
        (lambda: build_model("logreg", hidden=3), "hidden = 3 is not allowed for model 'logreg'"),
        (lambda: build_model("seed0-mnist-cnn", num_classes=1), "num_classes = 1"),
        (lambda: build_model("seed3-emnist-cnn", activation="gelu"), "activation = 'gelu'"),
        (lambda: MLP(hidden=(30,), norm_groups=4), "norm_groups = 4"),
        (lambda: MLP(hidden=(0,)), "hidden = 0"),
        (lambda: MLP(dropout=1.0), "dropout = 1.0"),
        (lambda: LogisticRegression(input_shape=(1, 28)), "input_shape = \\(1, 28\\)"),
        (lambda: LogisticRegression(input_shape=(0, 28, 28)), "input_shape = 0"),
        (lambda: count_parameters("model"), "model = str"),
    ],
)
def test_bad_arguments_name_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_wrong_input_shape_is_refused():
    with pytest.raises(ValueError, match="input_shape"):
        LogisticRegression()(torch.zeros(2, 3, 32, 32))
