"""The engine's per-example gradients, norms and clipped sums equal a per-example reference loop
and Opacus' per-sample gradients; ghost norms equal materialised norms; fallbacks agree."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from _engine_helpers import TinyCNN, perturbed_params, reference_per_example
from torch import nn

from privfl.fl import CohortTrainer, LocalTrainingSpec, load_params
from privfl.fl import grad_sample as gs
from privfl.models import build_model

SPEC = LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=0.5, noise_multiplier=1.0)


def _clipped_reference(per_example, clip_norm, mask=None):
    m, b = next(iter(per_example.values())).shape[:2]
    sq = sum(g.reshape(m, b, -1).square().sum(-1) for g in per_example.values())
    norms = sq.sqrt()
    factors = torch.clamp(clip_norm / norms, max=1.0)
    if mask is not None:
        factors = factors * mask
    sums = {
        n: (g * factors.reshape(m, b, *[1] * (g.dim() - 2))).sum(1)
        for n, g in per_example.items()
    }
    return norms, sums


def _check_engine(model, x, y, *, atol=1e-10, mask=None, **kwargs):
    trainer = CohortTrainer(model, SPEC, **kwargs)
    params = perturbed_params(model, x.shape[0])
    ref = reference_per_example(model, params, x, y)
    pe = trainer.per_example_gradients(params, x, y)
    for name in ref:
        torch.testing.assert_close(pe[name], ref[name], atol=atol, rtol=0)
    norms, sums = _clipped_reference(ref, SPEC.clip_norm, mask)
    result = trainer.clipped_sums(params, x, y, mask)
    expected_norms = norms if mask is None else norms * mask
    torch.testing.assert_close(result.norms, expected_norms, atol=atol, rtol=0)
    for name in ref:
        torch.testing.assert_close(result.sums[name], sums[name], atol=atol, rtol=0)
    return trainer


@pytest.mark.parametrize("layout", ["looped", "batched"])
def test_tiny_cnn_matches_reference_loop(layout):
    torch.manual_seed(0)
    model = TinyCNN().double()
    x = torch.randn(3, 4, 1, 10, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (3, 4))
    trainer = _check_engine(model, x, y, layout=layout)
    assert trainer.uses_fast_path


def test_padding_mask_drops_examples():
    torch.manual_seed(1)
    model = TinyCNN().double()
    x = torch.randn(2, 3, 1, 10, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (2, 3))
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]], dtype=torch.bool)
    _check_engine(model, x, y, mask=mask)


def test_zheng2021_mnist_cnn_matches_reference_loop():
    torch.manual_seed(2)
    model = build_model("zheng2021-mnist-cnn", dropout=False).double()
    x = torch.randn(2, 2, 1, 28, 28, dtype=torch.float64)
    y = torch.randint(0, 10, (2, 2))
    _check_engine(model, x, y)


def test_generic_layers_and_fallbacks_match_reference():
    """GroupNorm, and a module using a parameter directly in forward, go through the per-layer
    torch.func path; a layer called twice forces the whole-model vmap(grad) fallback."""
    torch.manual_seed(3)
    mlp = build_model("mlp", input_shape=(6,), num_classes=3, hidden=(8,), norm_groups=2).double()
    x = torch.randn(2, 3, 6, dtype=torch.float64)
    y = torch.randint(0, 3, (2, 3))
    trainer = _check_engine(mlp, x, y)
    assert trainer.uses_fast_path

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 3)
            self.scale = nn.Parameter(torch.tensor(1.5))

        def forward(self, z):
            return self.lin(z) * self.scale

    trainer = _check_engine(Scaled().double(), x, y)
    assert trainer.model.layer_kinds == ["GenericLayer"]

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)
            self.out = nn.Linear(6, 3)

        def forward(self, z):
            return self.out(torch.tanh(self.lin(torch.tanh(self.lin(z)))))

    shared = Shared().double()
    trainer = CohortTrainer(shared, SPEC)
    params = perturbed_params(shared, 2)
    ref = reference_per_example(Shared().double(), params, x, y)
    norms, sums = _clipped_reference(ref, SPEC.clip_norm)
    result = trainer.clipped_sums(params, x, y)  # discovers the reuse, falls back
    assert not trainer.uses_fast_path and "more than once" in trainer.fallback_reason
    for name in ref:
        torch.testing.assert_close(result.sums[name], sums[name], atol=1e-10, rtol=0)


def test_vmap_mode_matches_fast_path():
    torch.manual_seed(4)
    model = TinyCNN().double()
    x = torch.randn(2, 3, 1, 10, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (2, 3))
    params = perturbed_params(model, 2)
    fast = CohortTrainer(model, SPEC).clipped_sums(params, x, y)
    slow = CohortTrainer(model, SPEC, per_example="vmap").clipped_sums(params, x, y)
    for name in fast.sums:
        torch.testing.assert_close(fast.sums[name], slow.sums[name], atol=1e-10, rtol=0)


def test_dropout_masks_are_per_example_and_shared_by_forward_and_gradients():
    """With dropout on, the engine's per-example gradients equal the reference computed with the
    very masks the engine drew (so forward and per-example backward used the same masks)."""
    torch.manual_seed(5)
    model = TinyCNN(dropout=True).double()
    trainer = CohortTrainer(model, SPEC)
    trainer.model.keep_masks(True)
    x = torch.randn(2, 5, 1, 10, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (2, 5))
    params = perturbed_params(model, 2)
    gens = [torch.Generator().manual_seed(11), torch.Generator().manual_seed(12)]
    pe = trainer.per_example_gradients(params, x, y, generators=gens)
    masks = trainer.model.dropout_masks()
    mask1 = masks["drop1"].reshape(2, 5, 6, 1, 1)
    mask2 = masks["drop2"].reshape(2, 5, 12)
    assert (mask1[0, :, :, 0, 0] != mask1[0, :1, :, 0, 0]).any()  # differs between examples

    class Fixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = None

        def forward(self, z):
            return z * self.mask

    ref_model = copy.deepcopy(model)
    ref_model.drop1, ref_model.drop2 = Fixed(), Fixed()
    for j in range(2):
        load_params(ref_model, params, j)
        for i in range(5):
            ref_model.drop1.mask, ref_model.drop2.mask = mask1[j, i], mask2[j, i]
            loss = F.nll_loss(ref_model(x[j, i : i + 1]), y[j, i : i + 1], reduction="sum")
            names = [n for n, _ in ref_model.named_parameters()]
            grads = torch.autograd.grad(loss, list(ref_model.parameters()))
            for n, g in zip(names, grads, strict=True):
                torch.testing.assert_close(pe[n][j, i], g, atol=1e-10, rtol=0)
    # same generators -> same masks; the per-client masks do not depend on the other clients
    again = trainer.per_example_gradients(
        params, x, y, generators=[torch.Generator().manual_seed(11),
                                  torch.Generator().manual_seed(12)])
    solo = trainer.per_example_gradients(
        {n: v[1:] for n, v in params.items()}, x[1:], y[1:],
        generators=[torch.Generator().manual_seed(12)])
    for n in pe:
        assert torch.equal(again[n], pe[n])
        torch.testing.assert_close(solo[n][0], pe[n][1], atol=1e-12, rtol=0)


def test_ghost_norms_equal_materialised_norms():
    torch.manual_seed(6)
    a = torch.randn(5, 3, 9, 9, dtype=torch.float64)
    delta = torch.randn(5, 4, 5, 5, dtype=torch.float64)
    for method in ("grouped", "unfold"):
        g = gs.conv2d_per_example_grads(a, delta, 3, stride=2, padding=1, method=method)
        ghost = gs.conv2d_ghost_sq_norms(a, delta, 3, stride=2, padding=1)
        torch.testing.assert_close(ghost, g.reshape(5, -1).square().sum(1))
    # weighted sums without per-example gradients
    w = torch.rand(1, 5, dtype=torch.float64)
    summed = gs.conv2d_weighted_sum(a.unsqueeze(0), delta.unsqueeze(0), w, 3, stride=2, padding=1)
    torch.testing.assert_close(summed[0], (g * w[0].reshape(5, 1, 1, 1, 1)).sum(0))
    # Linear with several positions: Gram form vs materialised
    a2 = torch.randn(4, 7, 5, dtype=torch.float64)
    d2 = torch.randn(4, 7, 3, dtype=torch.float64)
    gw, gb = gs.linear_per_example_grads(a2, d2)
    full = gw.reshape(4, -1).square().sum(1) + gb.square().sum(1)
    torch.testing.assert_close(gs.linear_sq_norms(a2, d2, ghost=True), full)
    torch.testing.assert_close(gs.linear_sq_norms(a2, d2, ghost=False), full)
    # and the engine's conv layer with ghost norms forced on
    from privfl.fl._capture import Conv2dLayer

    torch.manual_seed(7)
    model = TinyCNN().double()
    x = torch.randn(2, 3, 1, 10, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (2, 3))
    params = perturbed_params(model, 2)
    default = CohortTrainer(model, SPEC).clipped_sums(params, x, y)
    Conv2dLayer.ghost = True
    try:
        ghost = CohortTrainer(model, SPEC).clipped_sums(params, x, y)
    finally:
        Conv2dLayer.ghost = "auto"
    torch.testing.assert_close(ghost.norms, default.norms)
    for name in default.sums:
        torch.testing.assert_close(ghost.sums[name], default.sums[name])


@pytest.mark.parametrize("name", ["zheng2021-mnist-cnn", "xie2023-mnist-cnn", "mlp"])
def test_matches_opacus_grad_sample(name):
    import opacus
    torch.manual_seed(8)
    kwargs = {"dropout": False} if name == "zheng2021-mnist-cnn" else {}
    model = build_model(name, **kwargs)
    x = torch.randn(2, 3, 1, 28, 28)
    y = torch.randint(0, 10 if name != "xie2023-mnist-cnn" else 2, (2, 3))
    params = perturbed_params(model, 2, scale=0.01)
    trainer = CohortTrainer(model, SPEC)
    pe = trainer.per_example_gradients(params, x, y)
    result = trainer.clipped_sums(params, x, y)
    for j in range(2):
        net = load_params(copy.deepcopy(model), params, j)
        gsm = opacus.GradSampleModule(net, loss_reduction="sum")
        with warnings.catch_warnings():  # opacus: full backward hook on input without grad
            warnings.simplefilter("ignore")
            loss = F.cross_entropy(gsm(x[j]), y[j], reduction="sum")
            loss.backward()
        samples = {n: p.grad_sample for n, p in net.named_parameters()}
        for n, g in samples.items():
            torch.testing.assert_close(pe[n][j], g, atol=1e-5, rtol=1e-5)
        norms = torch.sqrt(sum(g.reshape(3, -1).square().sum(1) for g in samples.values()))
        factors = torch.clamp(SPEC.clip_norm / norms, max=1.0)
        torch.testing.assert_close(result.norms[j], norms, atol=1e-5, rtol=1e-5)
        for n, g in samples.items():
            expected = (g * factors.reshape(3, *[1] * (g.dim() - 1))).sum(0)
            torch.testing.assert_close(result.sums[n][j], expected, atol=1e-5, rtol=1e-5)



class _StridedConvNet(nn.Module):
    """Convolutions with stride, padding, dilation, with and without bias."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.b = nn.Conv2d(4, 3, 2, dilation=2, bias=False)
        self.head = nn.Linear(3 * 3 * 3, 3)

    def forward(self, x):
        return F.log_softmax(self.head(torch.relu(self.b(torch.relu(self.a(x)))).flatten(1)), 1)


@pytest.mark.parametrize("net", [TinyCNN, _StridedConvNet])
def test_grouped_convolution_of_a_chunk_equals_the_per_client_loop(net, monkeypatch):
    """The accelerators' path (one grouped convolution for a chunk's clients) gives the CPU
    loop's per-example norms, clipped sums and trained parameters."""
    from privfl.fl._capture import Conv2dLayer

    torch.manual_seed(9)
    model = net().double()
    channels = 2 if net is _StridedConvNet else 1
    x = torch.randn(3, 4, channels, 10, 10, dtype=torch.float64)
    y = torch.randint(0, 3, (3, 4))
    params = perturbed_params(model, 3)
    spec = LocalTrainingSpec(local_steps=3, batch_size=4, clip_norm=0.5, noise_multiplier=0.0,
                             optimizer="adam", lr=0.01)
    results = {}
    for grouped in (False, True):
        monkeypatch.setattr(Conv2dLayer, "grouped", grouped)
        trainer = CohortTrainer(model, spec, layout="batched")
        sums = trainer.clipped_sums(params, x, y)
        trained, _, _ = trainer.train(params, [(x[j], y[j]) for j in range(3)], None,
                                      torch.Generator().manual_seed(1))
        results[grouped] = sums, trained
    (loop, loop_trained), (grouped, grouped_trained) = results[False], results[True]
    torch.testing.assert_close(grouped.norms, loop.norms, rtol=1e-12, atol=1e-12)
    for name in loop.sums:
        torch.testing.assert_close(grouped.sums[name], loop.sums[name], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(grouped_trained[name], loop_trained[name], rtol=1e-10,
                                   atol=1e-12)
