"""Per-example gradients of Embedding and LSTM layers (privfl.fl._capture_sequence): equal to a
per-example backward loop, to Opacus' DPLSTM on the same weights, and to materialised norms;
frozen embeddings take no gradient; integer token ids train through the engine."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F  # noqa: N812
from _engine_helpers import perturbed_params, reference_per_example
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from privfl.fl import CohortTrainer, LocalTrainingSpec, load_params
from privfl.fl import grad_sample as gs

SPEC = LocalTrainingSpec(local_steps=1, batch_size=4, clip_norm=0.5, noise_multiplier=1.0)
VOCAB, SEQ = 11, 7


class TinyTextLSTM(nn.Module):
    """Embedding(11, 5, pad 0) -> LSTM(5 -> 6, 2 layers) -> last step -> Linear(6 -> 3)."""

    def __init__(self, freeze: bool = False, lstm: type = nn.LSTM) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 5, padding_idx=0)
        self.emb.weight.requires_grad_(not freeze)
        self.lstm = lstm(5, 6, num_layers=2, batch_first=True)
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        out, _ = self.lstm(self.emb(x))
        return self.fc(out[:, -1])


def _tokens(m, b, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(0, VOCAB, (m, b, SEQ), generator=gen)
    x[:, :, :2] = 0  # some padding, and tokens repeated within an example
    return x, torch.randint(0, 3, (m, b), generator=gen)


def _max_diff(a, b):
    return max(float((a[n] - b[n]).abs().max()) for n in b)


@pytest.mark.parametrize("layout", ["looped", "batched"])
@pytest.mark.parametrize("freeze", [False, True])
def test_per_example_gradients_equal_a_per_example_loop(layout, freeze):
    torch.manual_seed(0)
    model = TinyTextLSTM(freeze).double()
    trainer = CohortTrainer(model, SPEC, layout=layout)
    expected_kinds = ["EmbeddingLayer"] * (not freeze) + ["LSTMPart", "LSTMPart", "LinearLayer"]
    assert trainer.uses_fast_path and trainer.model.layer_kinds == expected_kinds
    x, y = _tokens(3, 4)
    params = perturbed_params(model, 3)
    ref = reference_per_example(model, params, x, y)
    assert ("emb.weight" in ref) is not freeze
    pe = trainer.per_example_gradients(params, x, y)
    assert _max_diff(pe, ref) < 1e-12
    if not freeze:
        assert float(pe["emb.weight"][:, :, 0].abs().max()) == 0.0  # the pad row: no gradient
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    result = trainer.clipped_sums(params, x, y, mask, single_rows=layout == "looped")
    sq = sum(g.reshape(3, 4, -1).square().sum(-1) for g in ref.values())
    norms = sq.sqrt() * mask
    assert float((result.norms - norms).abs().max()) < 1e-12
    factors = torch.clamp(SPEC.clip_norm / sq.sqrt(), max=1.0) * mask
    for name, g in ref.items():
        expected = (g * factors.reshape(3, 4, *[1] * (g.dim() - 2))).sum(1)
        assert float((result.sums[name] - expected).abs().max()) < 1e-12, name


def test_matches_opacus_dplstm_on_the_same_weights():
    opacus = pytest.importorskip("opacus")
    from opacus.layers import DPLSTM

    torch.manual_seed(2)
    model = TinyTextLSTM()
    x, y = _tokens(2, 4, seed=2)
    params = perturbed_params(model, 2, scale=0.1)
    trainer = CohortTrainer(model, SPEC)
    pe = trainer.per_example_gradients(params, x, y)
    diffs = []
    for j in range(2):
        net = load_params(copy.deepcopy(model), params, j)
        dp = TinyTextLSTM(lstm=DPLSTM)
        for part in ("emb", "lstm", "fc"):  # DPLSTM takes nn.LSTM's parameter names
            getattr(dp, part).load_state_dict(getattr(net, part).state_dict())
        gsm = opacus.GradSampleModule(dp, loss_reduction="sum")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            F.cross_entropy(gsm(x[j]), y[j], reduction="sum").backward()
        samples = {f"{part}.{n}": p.grad_sample for part in ("emb", "lstm", "fc")
                   for n, p in getattr(dp, part).named_parameters()}
        assert set(samples) == set(pe)
        # Opacus' embedding sampler gives the padding_idx row the pad positions' gradient,
        # which autograd (and privfl) do not: compare the other rows, and that row apart
        pad_row = samples["emb.weight"][:, 0]
        assert float(pad_row.abs().max()) > 0 and float(pe["emb.weight"][j][:, 0].abs().max()) == 0
        samples["emb.weight"] = samples["emb.weight"][:, 1:]
        ours = dict(pe, **{"emb.weight": pe["emb.weight"][:, :, 1:]})
        diffs.append(max(float((ours[n][j] - g).abs().max()) for n, g in samples.items()))
    assert max(diffs) < 1e-5  # float32, two implementations of the same sums


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4), positions=st.integers(1, 6), vocab=st.integers(2, 5),
       seed=st.integers(0, 2**31 - 1), pad=st.sampled_from([None, 0, 1]))
def test_embedding_norms_and_sums_equal_materialised(n, positions, vocab, seed, pad):
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, positions), generator=gen)  # small vocab: repeats
    delta = torch.randn(n, positions, 3, generator=gen, dtype=torch.float64)
    per = gs.embedding_per_example_grads(ids, delta, vocab, padding_idx=pad)
    # reference: one scatter per example and position
    ref = torch.zeros(n, vocab, 3, dtype=torch.float64)
    for i in range(n):
        for t in range(positions):
            if ids[i, t] != pad:
                ref[i, ids[i, t]] += delta[i, t]
    assert torch.equal(per, ref)
    sq = gs.embedding_sq_norms(ids, delta, padding_idx=pad)
    torch.testing.assert_close(sq, ref.reshape(n, -1).square().sum(1), atol=1e-12, rtol=0)
    weights = torch.rand(1, n, generator=gen, dtype=torch.float64)
    total = gs.embedding_weighted_sum(ids, delta, weights, vocab, padding_idx=pad)
    torch.testing.assert_close(total[0], (weights[0].view(n, 1, 1) * ref).sum(0),
                               atol=1e-12, rtol=0)


def test_token_ids_train_and_a_frozen_embedding_never_moves():
    torch.manual_seed(3)
    model = TinyTextLSTM(freeze=True)
    spec = LocalTrainingSpec(local_steps=3, batch_size=4, clip_norm=1.0, noise_multiplier=1.0,
                             optimizer="sgd", lr=0.1)
    trainer = CohortTrainer(model, spec)
    assert "emb.weight" not in trainer.param_names
    x, y = _tokens(2, 8, seed=3)
    start = perturbed_params(model, 2)
    data = [(x[j], y[j]) for j in range(2)]
    out, _, stats = trainer.train(start, data, None, torch.Generator().manual_seed(0))
    again, _, _ = trainer.train(start, data, None, torch.Generator().manual_seed(0))
    assert all(torch.equal(out[n], again[n]) for n in out)  # same seed, same bits
    assert all(float((out[n] - start[n]).abs().max()) > 0 for n in out)
    assert torch.equal(trainer.model.plain.emb.weight, model.emb.weight)
    logits = trainer.forward(out, x[0])
    net = load_params(copy.deepcopy(model), out, 1)
    torch.testing.assert_close(logits[1], net(x[0]), atol=1e-5, rtol=1e-5)


def test_an_embedding_refuses_float_token_ids():
    model = TinyTextLSTM().double()
    trainer = CohortTrainer(model, SPEC)
    x, y = _tokens(1, 4)
    with pytest.raises(ValueError, match="integer ids"):
        trainer.clipped_sums(perturbed_params(model, 1), x.double(), y)


def test_batched_lstm_rows_do_not_depend_on_their_chunk():
    from privfl.fl import ClientStreams, DataPool, take_rows

    torch.manual_seed(4)
    model = TinyTextLSTM()
    spec = LocalTrainingSpec(local_steps=2, batch_size=3, clip_norm=1.0, noise_multiplier=0.7,
                             optimizer="adam", lr=0.01)
    x, y = _tokens(1, 5 * 6, seed=4)
    pool = DataPool(x[0], y[0])
    indices = [torch.arange(6 * j, 6 * j + 6) for j in range(5)]
    start = perturbed_params(model, 5)
    streams = ClientStreams.derive(7, 1, range(5))

    def train(rows, chunk):
        trainer = CohortTrainer(model, spec, layout="batched", chunk_size=chunk)
        params, _, _ = trainer.train_streams(take_rows(start, rows), pool,
                                             [indices[j] for j in rows], streams[rows], None)
        return trainer.flatten(params)

    whole = train(list(range(5)), 5)
    for rows, chunk in (([3], 1), ([4, 1], 2), ([0, 2, 3], 2)):
        flat = train(rows, chunk)
        for k, j in enumerate(rows):
            assert torch.equal(flat[k], whole[j]), (rows, chunk, j)


@pytest.mark.parametrize("rnn, what", [
    (lambda: nn.LSTM(5, 6, batch_first=True, bidirectional=True), "LSTM"),
    (lambda: nn.LSTM(5, 6, batch_first=False), "LSTM"),
    (lambda: nn.GRU(5, 6, batch_first=True), "GRU"),
])
def test_an_rnn_the_engine_cannot_unroll_is_refused_by_name(rnn, what):
    model = TinyTextLSTM()
    model.lstm = rnn()
    trainer = CohortTrainer(model, SPEC)
    x, y = _tokens(1, 4)
    with pytest.raises(ValueError, match=f"model has {what} at 'lstm' that the engine cannot "
                       "train with per-example gradients: it takes nn.LSTM with batch_first"):
        trainer.clipped_sums(perturbed_params(model, 1), x, y)
    supported = TinyTextLSTM()
    with pytest.raises(ValueError, match="per_example='vmap' requested"):
        CohortTrainer(supported, SPEC, per_example="vmap").clipped_sums(
            perturbed_params(supported, 1), x, y)


class _LSTMOnly(nn.Module):
    def __init__(self, features, hidden, layers, bias):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, num_layers=layers, batch_first=True, bias=bias)
        self.fc = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.fc(self.lstm(x)[0][:, -1])


@settings(max_examples=12, deadline=None)
@given(features=st.integers(1, 4), hidden=st.integers(1, 5), layers=st.integers(1, 3),
       steps=st.integers(1, 5), bias=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_lstm_per_example_gradients_equal_the_loop_for_any_shape(features, hidden, layers,
                                                                 steps, bias, seed):
    torch.manual_seed(seed)
    model = _LSTMOnly(features, hidden, layers, bias).double()
    trainer = CohortTrainer(model, SPEC)
    assert trainer.model.layer_kinds == ["LSTMPart"] * layers + ["LinearLayer"]
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, steps, features, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 2, (2, 3), generator=gen)
    params = perturbed_params(model, 2, seed=seed % 1000, scale=0.3)
    ref = reference_per_example(model, params, x, y)
    assert _max_diff(trainer.per_example_gradients(params, x, y), ref) < 1e-12
