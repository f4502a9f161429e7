"""Parameter counts (the papers' models), forward shapes, torch.func compatibility, bad inputs,
the deprecated names of earlier versions."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from privfl.models import (
    MLP,
    MODEL_ALIASES,
    MODELS,
    LogisticRegression,
    SmallConvNet,
    Zheng2021CifarCNN,
    Zheng2021MnistCNN,
    build_model,
    count_parameters,
    list_models,
    resolve_model_name,
)

# name, kwargs, parameters (specs: seed0 6.5, seed2 6.2, seed3 6), output classes
COUNTS = [
    ("zheng2021-mnist-cnn", {}, 1_199_882, 10),
    ("zheng2021-cifar-cnn", {}, 122_570, 10),
    ("zheng2021-cifar-cnn", {"conv3_relu": True}, 122_570, 10),
    ("xie2023-mnist-cnn", {}, 25_746, 2),
    ("xie2023-mnist-cnn", {"num_classes": 10}, 26_010, 10),
    ("xie2023-cifar-cnn", {"num_classes": 100}, 143_076, 100),
    ("xie2023-cifar-cnn", {}, 130_434, 2),
    ("hasircioglu2022-emnist-cnn", {}, 27_726, 62),
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
    assert list_models() == ["zheng2021-mnist-cnn", "zheng2021-cifar-cnn", "xie2023-mnist-cnn",
                             "xie2023-cifar-cnn", "hasircioglu2022-emnist-cnn", "logreg", "mlp",
                             "xie2023-sent140-lstm", "leaf-shakespeare-lstm"]



@pytest.mark.parametrize(("old", "new"), sorted(MODEL_ALIASES.items()))
def test_deprecated_names_build_the_same_model(old, new):
    """An old name resolves (with a DeprecationWarning) to the current one and builds the same
    architecture: equal parameters from the same seed."""
    assert new in list_models() and old not in list_models()
    with pytest.warns(DeprecationWarning, match=f"{old!r} is deprecated: it is {new!r}"):
        assert resolve_model_name(old) == new
    assert old in MODELS and MODELS[old] == MODELS[new]
    torch.manual_seed(3)
    with pytest.warns(DeprecationWarning):
        aliased = build_model(old)
    torch.manual_seed(3)
    current = build_model(new)
    assert type(aliased) is type(current)
    assert aliased.state_dict().keys() == current.state_dict().keys()
    for key, value in current.state_dict().items():
        assert torch.equal(aliased.state_dict()[key], value), key


def test_current_names_resolve_silently_and_unknown_names_are_refused(recwarn):
    assert [resolve_model_name(name) for name in list_models()] == list_models()
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
    assert len(MODELS) == len(list_models()) == len(set(MODELS))
    with pytest.raises(ValueError, match="name = 'seed9-mnist-cnn' is not allowed: must be one "
                       "of zheng2021-mnist-cnn, "):
        resolve_model_name("seed9-mnist-cnn")
    assert "seed9-mnist-cnn" not in MODELS


def test_deprecated_class_names_are_the_current_classes():
    import privfl.models as models

    with pytest.warns(DeprecationWarning, match="use privfl.models.Zheng2021MnistCNN"):
        assert models.Seed0MnistCNN is Zheng2021MnistCNN
    with pytest.warns(DeprecationWarning):
        assert models.Seed2CifarCNN is models.Xie2023CifarCNN
    with pytest.raises(AttributeError, match="Seed9CNN"):
        _ = models.Seed9CNN

def test_no_batchnorm_anywhere():
    for name in list_models():
        text = "vocabulary" in inspect.signature(MODELS[name][0]).parameters
        model = build_model(name, **({"vocabulary": ("<pad>", "<unk>", "a")} if text else {}))
        assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
        assert not list(model.buffers())  # nothing updated from batch statistics


def test_zheng2021_mnist_layers_and_dropout():
    model = Zheng2021MnistCNN()
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
    plain = Zheng2021MnistCNN(dropout=False).train()
    assert count_parameters(plain) == 1_199_882
    torch.testing.assert_close(plain(x), plain(x))


def test_zheng2021_cifar_conv3_without_relu():
    model = Zheng2021CifarCNN().eval()
    with_relu = Zheng2021CifarCNN(conv3_relu=True).eval()
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


@pytest.mark.parametrize("name", ["xie2023-mnist-cnn", "zheng2021-cifar-cnn", "mlp", "logreg"])
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


def test_zheng2021_mnist_vmap_with_dropout_randomness():
    model = Zheng2021MnistCNN().train()
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
        (lambda: build_model("zheng2021-mnist-cnn", num_classes=1), "num_classes = 1"),
        (lambda: build_model("hasircioglu2022-emnist-cnn", activation="gelu"),
         "activation = 'gelu'"),
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


@pytest.mark.parametrize("name", ["mlp", "logreg"])
def test_dense_models_take_n_x_d_inputs(name):
    model = build_model(name, input_shape=(10,), num_classes=3)
    assert model(torch.zeros(4, 10)).shape == (4, 3)
    per_example = vmap(lambda x: model(x[None])[0])(torch.zeros(4, 10))
    assert per_example.shape == (4, 3)


@pytest.mark.parametrize("name", ["zheng2021-mnist-cnn", "zheng2021-cifar-cnn",
                                  "xie2023-mnist-cnn", "xie2023-cifar-cnn"])
def test_convolutional_models_refuse_n_x_d_inputs(name):
    model = build_model(name)
    with pytest.raises(ValueError, match=r"input shape \(4, 10\) is not allowed: .* is a "
                       r"convolutional network for images .* use model mlp or logreg"):
        model(torch.zeros(4, 10))
    assert model(torch.zeros(2, *model.input_shape)).shape[0] == 2  # images still work
