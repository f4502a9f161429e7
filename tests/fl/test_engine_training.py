"""CohortTrainer.train: noise scale z C / B (chi-square test), realised batch sizes, optimizers
equal torch.optim, reproducibility, layout invariance, bad input."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from _engine_helpers import TinyCNN, perturbed_params
from scipy import stats

from privfl.fl import CohortTrainer, LocalTrainingSpec, load_params
from privfl.fl import trainer as trainer_module

ALPHA = 1e-6


def _data(m, n, seed=0, sizes=None):
    gen = torch.Generator().manual_seed(seed)
    sizes = sizes or [n] * m
    return [
        (torch.randn(k, 1, 10, 10, generator=gen), torch.randint(0, 3, (k,), generator=gen))
        for k in sizes
    ]


def _zero_loss(out, target):
    return out.sum(-1) * 0.0


def _assert_std(sample: np.ndarray, std: float) -> None:
    n = sample.size
    chi2 = (sample**2).sum() / std**2  # mean 0 known: chi-square with n dof
    assert stats.chi2.ppf(ALPHA / 2, n) < chi2 < stats.chi2.ppf(1 - ALPHA / 2, n), (
        f"empirical std {math.sqrt((sample**2).mean())} vs {std}"
    )
    assert abs(sample.mean()) < stats.norm.ppf(1 - ALPHA / 2) * std / math.sqrt(n)


@pytest.mark.parametrize(("sampling", "secure"), [("without-replacement", False),
                                                  ("poisson", False),
                                                  ("without-replacement", True),
                                                  ("poisson", True)])
def test_noise_std_is_z_c_over_fixed_b(sampling, secure):
    """Zero gradients: K SGD steps (lr 1) move every coordinate by -sum_t N(0, (zC)^2) / B with
    the *fixed* B, whatever the realised (Poisson: often empty or larger) batch size."""
    model = TinyCNN()
    spec = LocalTrainingSpec(local_steps=3, batch_size=2, sampling=sampling, clip_norm=0.7,
                             noise_multiplier=1.3, optimizer="sgd", lr=1.0, secure=secure)
    m = 40
    sizes = [2 + 6 * (j % 5) for j in range(m)]  # ragged clients, q = 2 / n_j
    trainer = CohortTrainer(model, spec, loss_fn=_zero_loss, layout="batched")
    start = perturbed_params(model, m)
    params, _, st = trainer.train(start, _data(m, 0, sizes=sizes), None,
                                  torch.Generator().manual_seed(1))
    delta = torch.cat([(params[n] - start[n]).reshape(m, -1) for n in start], 1)
    std = 1.3 * 0.7 * math.sqrt(spec.local_steps)  # z C per step, from the raw settings
    _assert_std((-delta * spec.batch_size).double().numpy().ravel(), std)
    if sampling == "poisson":
        assert (st.batch_sizes == 0).any() and (st.batch_sizes > 2).any()
        # every client moved, also those whose batch was empty (noise is still added)
        assert (delta.abs().sum(1) > 0).all()


def test_clipped_sum_divided_by_b_in_training():
    """z = 0, B < n: one SGD step equals -lr / B times the sum of the clipped gradients of
    exactly B distinct records of the client (one of the n choose B subsets), for every client.
    Poisson batches (size B only on average), sampling with replacement or a batch-level clip
    cannot pass: the accountant's fixed-size scheme is what training does."""
    torch.manual_seed(2)
    model = TinyCNN()
    m, n, b, lr = 6, 6, 3, 0.5
    spec = LocalTrainingSpec(local_steps=1, batch_size=b, clip_norm=0.3, noise_multiplier=0.0,
                             optimizer="sgd", lr=lr)
    trainer = CohortTrainer(model, spec)
    data = _data(m, n)
    start = perturbed_params(model, m)
    params, _, st = trainer.train(start, data, None, torch.Generator().manual_seed(0))
    assert st.batch_sizes.tolist() == [[b]] * m
    assert (st.clipped_fraction > 0).all()
    x = torch.stack([d[0] for d in data])
    y = torch.stack([d[1] for d in data])
    # the clipped gradient of every record: clipped sums of one-record batches
    single = [trainer.clipped_sums(start, x[:, i : i + 1], y[:, i : i + 1]).sums for i in range(n)]
    for j in range(m):
        matches = [
            subset for subset in itertools.combinations(range(n), b)
            if all(torch.allclose(params[name][j],
                                  start[name][j] - lr * sum(single[i][name][j] for i in subset) / b,
                                  atol=1e-6, rtol=1e-5)
                   for name in start)
        ]  # fmt: skip
        assert len(matches) == 1, (j, matches)


def test_realised_batch_sizes_follow_the_scheme():  # ~1 s: guards the accountant's scheme
    model = TinyCNN()
    m, n, k, b = 30, 40, 20, 5
    fixed = LocalTrainingSpec(local_steps=k, batch_size=b, clip_norm=1.0, noise_multiplier=1.0)
    _, _, st = CohortTrainer(model, fixed, layout="batched").train(
        perturbed_params(model, m), _data(m, n), None, torch.Generator().manual_seed(3))
    assert st.batch_sizes.shape == (m, k) and (st.batch_sizes == b).all()
    poisson = LocalTrainingSpec(local_steps=k, batch_size=b, sampling="poisson", clip_norm=1.0,
                                noise_multiplier=1.0)
    _, _, st = CohortTrainer(model, poisson, layout="batched").train(
        perturbed_params(model, m), _data(m, n), None, torch.Generator().manual_seed(4))
    sizes = st.batch_sizes.double().numpy().ravel()
    q = b / n
    trials = sizes.size
    z = (sizes.mean() - n * q) / math.sqrt(n * q * (1 - q) / trials)
    assert abs(z) < stats.norm.ppf(1 - ALPHA / 2)
    chi2 = (trials - 1) * sizes.var(ddof=1) / (n * q * (1 - q))
    assert stats.chi2.ppf(ALPHA / 2, trials - 1) < chi2 < stats.chi2.ppf(1 - ALPHA / 2, trials - 1)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize(
    ("optimizer", "torch_opt"),
    [
        ("sgd", lambda p: torch.optim.SGD(p, lr=0.1, weight_decay=0.01)),
        ("momentum", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.8, weight_decay=0.01)),
        ("adam", lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.9), weight_decay=0.01)),
    ],
)
def test_optimizers_match_torch_and_state_persists(optimizer, torch_opt, fused, monkeypatch):
    """Non-private full-batch training (B = n) equals torch.optim on the mean loss, also when
    the optimizer state is carried over to a second train call (fused and reference kernels)."""
    from privfl.fl.optim import StackedOptimizer

    monkeypatch.setattr(StackedOptimizer, "_fused_ok", fused)
    torch.manual_seed(5)
    model = TinyCNN().double()
    lr = 0.01 if optimizer == "adam" else 0.1
    spec = LocalTrainingSpec(local_steps=3, batch_size=8, clip_norm=None, optimizer=optimizer,
                             lr=lr, momentum=0.8, betas=(0.8, 0.9), weight_decay=0.01)
    trainer = CohortTrainer(model, spec)
    data = [(x.double(), y) for x, y in _data(2, 8)]
    start = perturbed_params(model, 2)
    gen = torch.Generator().manual_seed(6)
    params, states, _ = trainer.train(start, data, None, gen)
    params, states, _ = trainer.train(params, data, states, gen)
    assert states["step"].tolist() == [6.0, 6.0]
    for j in range(2):
        net = load_params(copy.deepcopy(model), start, j)
        opt = torch_opt(net.parameters())
        for _ in range(6):
            opt.zero_grad()
            F.nll_loss(net(data[j][0]), data[j][1]).backward()
            opt.step()
        for name, p in net.named_parameters():
            torch.testing.assert_close(params[name][j], p.detach(), atol=1e-10, rtol=1e-8)


def test_per_client_learning_rates():
    model = TinyCNN().double()
    spec = LocalTrainingSpec(local_steps=1, batch_size=8, clip_norm=None, lr=0.1)
    trainer = CohortTrainer(model, spec)
    data = [(x.double(), y) for x, y in _data(2, 8)]
    start = perturbed_params(model, 2)
    p1, _, _ = trainer.train(start, data, None, torch.Generator().manual_seed(0),
                             lr=torch.tensor([0.1, 0.2]))
    p0, _, _ = trainer.train(start, data, None, torch.Generator().manual_seed(0))
    for name in start:
        torch.testing.assert_close(p1[name][0], p0[name][0])
        torch.testing.assert_close(p1[name][1] - start[name][1],
                                   2 * (p0[name][1] - start[name][1]))


@pytest.mark.parametrize("sampling", ["without-replacement", "poisson"])
def test_same_seed_same_result_in_every_layout(sampling):
    """Per-client random streams: looped, batched and chunked runs give the same models."""
    model = TinyCNN(dropout=True)
    spec = LocalTrainingSpec(local_steps=3, batch_size=3, sampling=sampling, clip_norm=1.0,
                             noise_multiplier=0.8, optimizer="adam", lr=0.01)
    data = _data(5, 0, sizes=[6, 9, 7, 12, 6])
    start = perturbed_params(model, 5)
    runs = []
    for layout, chunk in [("looped", None), ("batched", None), ("batched", 2), ("looped", None)]:
        trainer = CohortTrainer(model, spec, layout=layout, chunk_size=chunk)
        runs.append(trainer.train(start, data, None, torch.Generator().manual_seed(7)))
    base_params, base_states, base_stats = runs[0]
    for params, states, st in runs[1:]:
        assert torch.equal(st.batch_sizes, base_stats.batch_sizes)
        for name in start:
            torch.testing.assert_close(params[name], base_params[name], atol=1e-5, rtol=1e-4)
        for key in states:
            torch.testing.assert_close(states[key], base_states[key], atol=1e-5, rtol=1e-4)
    for name in start:  # the repeated looped run is bit-identical
        assert torch.equal(runs[3][0][name], base_params[name])
    other = CohortTrainer(model, spec).train(start, data, None, torch.Generator().manual_seed(8))
    assert not torch.equal(other[0]["fc1.weight"], base_params["fc1.weight"])


def _spy_batches(monkeypatch) -> list[tuple[torch.Tensor, torch.Tensor | None]]:
    """Record every ``(index, mask)`` the trainer samples (absolute record indices)."""
    seen = []
    sample = trainer_module.sample_steps

    def spy(*args):
        batches = sample(*args)
        for t in range(batches.counts.shape[1]):
            index, mask, _ = batches.step(t)
            seen.append((index.clone(), None if mask is None else mask.clone()))
        return batches

    monkeypatch.setattr(trainer_module, "sample_steps", spy)
    return seen


def _same_batches(a, b) -> bool:
    return len(a) == len(b) and all(
        torch.equal(ia, ib) and (ma is None) == (mb is None) and (ma is None or torch.equal(ma, mb))
        for (ia, ma), (ib, mb) in zip(a, b, strict=True))


@pytest.mark.parametrize("sampling", ["without-replacement", "poisson"])
def test_secure_mode_draws_fresh_batches_and_noise(sampling, monkeypatch):
    """The same generator state twice: secure mode gives other batches and other noise (zero
    gradients: the update is the noise alone), the seeded mode the same ones bit for bit."""
    model = TinyCNN()
    start = perturbed_params(model, 3)
    data = _data(3, 50)
    seen = _spy_batches(monkeypatch)
    for secure in (False, True):
        spec = LocalTrainingSpec(local_steps=3, batch_size=5, sampling=sampling, clip_norm=1.0,
                                 noise_multiplier=1.0, optimizer="sgd", lr=1.0, secure=secure)
        trainer = CohortTrainer(model, spec, loss_fn=_zero_loss, workers=1)  # ordered calls
        runs = []
        for _ in range(2):
            seen.clear()
            params, _, _ = trainer.train(start, data, None, torch.Generator().manual_seed(9))
            runs.append((list(seen), params))
        (seen_a, params_a), (seen_b, params_b) = runs
        assert len(seen_a) == 3 * spec.local_steps  # 3 clients, looped layout
        assert _same_batches(seen_a, seen_b) is not secure, secure
        assert torch.equal(params_a["fc2.bias"], params_b["fc2.bias"]) is not secure, secure


def test_secure_batches_follow_the_scheme(monkeypatch):
    """Secure mode keeps the sampling scheme: exactly B distinct records of the client's own
    n_j per step (fixed-size), Binomial(n_j, B / n_j) sizes (Poisson)."""
    model = TinyCNN()
    m, n, k, b = 24, 20, 5, 4
    fixed = LocalTrainingSpec(local_steps=k, batch_size=b, clip_norm=1.0, noise_multiplier=1.0,
                              secure=True)
    seen = _spy_batches(monkeypatch)
    _, _, st = CohortTrainer(model, fixed, loss_fn=_zero_loss, workers=1).train(  # in order
        perturbed_params(model, m), _data(m, n), None, torch.Generator().manual_seed(3))
    assert st.batch_sizes.shape == (m, k) and (st.batch_sizes == b).all()
    assert len(seen) == m * k  # looped layout: one client per step call
    for step, (index, mask) in enumerate(seen):
        client = step // k
        assert mask is None and index.shape == (1, b)
        assert torch.unique(index).numel() == b
        assert ((index >= client * n) & (index < (client + 1) * n)).all()
    poisson = LocalTrainingSpec(local_steps=k, batch_size=b, sampling="poisson", clip_norm=1.0,
                                noise_multiplier=1.0, secure=True)
    _, _, st = CohortTrainer(model, poisson, loss_fn=_zero_loss).train(
        perturbed_params(model, m), _data(m, n), None, torch.Generator().manual_seed(4))
    sizes = st.batch_sizes.double().numpy().ravel()
    q, trials = b / n, sizes.size
    z = (sizes.mean() - n * q) / math.sqrt(n * q * (1 - q) / trials)
    assert abs(z) < stats.norm.ppf(1 - ALPHA / 2)
    chi2 = (trials - 1) * sizes.var(ddof=1) / (n * q * (1 - q))
    assert stats.chi2.ppf(ALPHA / 2, trials - 1) < chi2 < stats.chi2.ppf(1 - ALPHA / 2, trials - 1)


def test_non_private_and_stats():
    model = TinyCNN()
    spec = LocalTrainingSpec(local_steps=2, batch_size=4, clip_norm=None)
    params, states, st = CohortTrainer(model, spec).train(
        perturbed_params(model, 2), _data(2, 10), None, torch.Generator().manual_seed(0))
    assert set(states) == {"step"} and torch.isnan(st.clipped_fraction).all()
    assert st.loss.shape == (2,) and torch.isfinite(st.loss).all()
    assert st.layout == "looped" and st.per_example == "layers"


def test_bad_input_names_the_argument():
    model = TinyCNN()
    spec = LocalTrainingSpec(local_steps=1, batch_size=4, clip_norm=1.0, noise_multiplier=1.0)
    trainer = CohortTrainer(model, spec)
    start = perturbed_params(model, 2)
    data = _data(2, 10)
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="layout"):
        CohortTrainer(model, spec, layout="grouped")
    with pytest.raises(ValueError, match="chunk_size = 0"):
        CohortTrainer(model, spec, chunk_size=0)
    with pytest.raises(ValueError, match="spec"):
        CohortTrainer(model, {"batch_size": 4})
    with pytest.raises(ValueError, match="client_data has 1 clients"):
        trainer.train(start, data[:1], None, gen)
    with pytest.raises(ValueError, match=r"client_data\[1\] records = 3"):
        trainer.train(start, [data[0], (data[1][0][:3], data[1][1][:3])], None, gen)
    with pytest.raises(ValueError, match="start_params"):
        trainer.train({k: v for k, v in start.items() if k != "fc2.bias"}, data, None, gen)
    with pytest.raises(ValueError, match=r"start_params\['fc2.bias'\] has shape"):
        trainer.train({**start, "fc2.bias": torch.zeros(2, 4)}, data, None, gen)
    with pytest.raises(ValueError, match="optimizer_states"):
        trainer.train(start, data, {"exp_avg": torch.zeros(2, 3)}, gen)
    with pytest.raises(ValueError, match="generator"):
        trainer.train(start, data, None, 42)
    with pytest.raises(ValueError, match="lr = -1"):
        trainer.train(start, data, None, gen, lr=-1.0)
    with pytest.raises(ValueError, match="loss_fn returned"):
        CohortTrainer(model, spec, loss_fn=lambda o, t: o.sum()).train(start, data, None, gen)
    with pytest.raises(ValueError, match="BatchNorm"):
        CohortTrainer(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)), spec)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_private_training_refuses_reduced_precision_parameters(dtype):
    """Noise is drawn and added in the parameters' dtype: never in a reduced precision."""
    spec = LocalTrainingSpec(local_steps=1, batch_size=4, clip_norm=1.0, noise_multiplier=1.0)
    with pytest.raises(ValueError, match=rf"dtype = {dtype} is not allowed for Gaussian noise"):
        CohortTrainer(TinyCNN().to(dtype), spec)
    plain = LocalTrainingSpec(local_steps=1, batch_size=4, clip_norm=None)
    CohortTrainer(TinyCNN().to(dtype), plain)  # non-private: allowed
