"""The text models: Xie et al. 2023's Sent140 LSTM and LEAF's Shakespeare LSTM (shapes,
parameter counts, GloVe rows, frozen embeddings) and their per-example gradients in the engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from privfl.fl import CohortTrainer, LocalTrainingSpec
from privfl.models import LeafShakespeareLSTM, Xie2023Sent140LSTM, build_model, count_parameters

sys.path.insert(0, str(Path(__file__).parents[1] / "fl"))
from _engine_helpers import perturbed_params, reference_per_example  # noqa: E402

WORDS = ("<pad>", "<unk>", "good", "bad", "day")


def _glove(tmp_path, dim):
    path = tmp_path / f"glove.{dim}d.txt"
    rows = [f"{w} " + " ".join(str(0.01 * (i + 1) * (k + 1)) for k in range(dim))
            for i, w in enumerate(("good", "day", "of"))]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_sent140_lstm_is_li_et_al_2018s_model_on_glove(tmp_path):
    torch.manual_seed(0)
    glove = str(_glove(tmp_path, 300))
    model = build_model("xie2023-sent140-lstm", vocabulary=WORDS, embeddings=glove)
    assert (model.embedding.embedding_dim, model.lstm.hidden_size, model.lstm.num_layers) == (
        300, 256, 2)
    assert model.fc.out_features == 2 and model.input_shape == (25,)
    assert not model.embedding.weight.requires_grad  # GloVe rows frozen by default
    assert count_parameters(model) == 1_098_242
    assert model.embedding.weight[2, :3].tolist() == pytest.approx([0.01, 0.02, 0.03])
    assert model.embedding.weight[4, 299].item() == pytest.approx(0.02 * 300)
    assert (model.glove.found, model.glove.missing) == (2, 1)
    assert torch.equal(model.embedding.weight[0], torch.zeros(300))
    out = model(torch.randint(0, 5, (3, 25)))
    assert out.shape == (3, 2)
    trained = Xie2023Sent140LSTM(WORDS, embeddings=str(_glove(tmp_path, 300)),
                                 freeze_embeddings=False)
    assert count_parameters(trained) == 1_098_242 + 5 * 300
    with pytest.raises(ValueError, match="300 values after the word: the model's embedding_dim"
                       " is 100"):
        Xie2023Sent140LSTM(WORDS, embeddings=str(_glove(tmp_path, 300)), embedding_dim=100)


def test_shakespeare_lstm_is_leafs_reference_model():
    chars = ("<pad>", "<unk>") + tuple("abcdefgh ")
    model = build_model("leaf-shakespeare-lstm", vocabulary=chars)
    v = len(chars)
    assert (model.embedding.embedding_dim, model.lstm.hidden_size, model.lstm.num_layers) == (
        8, 256, 2)
    assert model.fc.out_features == v and model.input_shape == (80,)
    assert model.embedding.weight.requires_grad
    assert count_parameters(model) == 798_720 + 265 * v
    assert model(torch.randint(0, v, (2, 80))).shape == (2, v)


def test_inputs_are_validated():
    model = LeafShakespeareLSTM(WORDS, input_shape=(6,))
    with pytest.raises(ValueError, match=r"takes token ids \[N, 6\]"):
        model(torch.randint(0, 5, (2, 7)))
    with pytest.raises(ValueError, match="shape \\(seq_len,\\)"):
        LeafShakespeareLSTM(WORDS, input_shape=(1, 6))
    with pytest.raises(ValueError, match="freeze_embeddings = 'yes' is not allowed"):
        Xie2023Sent140LSTM(WORDS, freeze_embeddings="yes")
    with pytest.raises(ValueError, match="hidden = 0 is out of range"):
        Xie2023Sent140LSTM(WORDS, hidden=0)
    with pytest.raises(ValueError, match="must start with '<pad>'"):
        Xie2023Sent140LSTM(("a", "b", "c"))


@pytest.mark.parametrize("frozen", [True, False])
def test_sent140_lstm_per_example_gradients_equal_a_loop(tmp_path, frozen):
    torch.manual_seed(1)
    model = Xie2023Sent140LSTM(WORDS, input_shape=(5,), embeddings=str(_glove(tmp_path, 300)),
                               freeze_embeddings=frozen, hidden=24).double()
    spec = LocalTrainingSpec(local_steps=1, batch_size=2, clip_norm=1.0, noise_multiplier=1.0)
    trainer = CohortTrainer(model, spec)
    assert trainer.uses_fast_path
    x = torch.randint(0, 5, (2, 2, 5), generator=torch.Generator().manual_seed(1))
    y = torch.tensor([[0, 1], [1, 1]])
    params = perturbed_params(model, 2, scale=0.01)
    ref = reference_per_example(model, params, x, y)
    pe = trainer.per_example_gradients(params, x, y)
    assert set(pe) == set(ref) and ("embedding.weight" in pe) is not frozen
    assert max(float((pe[n] - ref[n]).abs().max()) for n in ref) < 1e-12
