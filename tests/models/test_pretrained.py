"""model.init_from: a pretrained state dict (CIFAR-100 -> CIFAR-10 as Xie et al. 2023) loaded
with shape checks, the head replaced only when asked, hostile files refused; the privacy card
says the pretraining data must be public; text models get their vocabulary from the data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privfl.algorithms.builders import build_model as build_configured
from privfl.config import ConfigError, config_from_dict
from privfl.data.datasets import Dataset, FederatedDataset
from privfl.models import Xie2023CifarCNN
from privfl.models.pretrained import head_names, load_pretrained
from privfl.runs.model_card import PRETRAINING_ROW, model_card_rows


def _saved(tmp_path, model, name="pre.pt"):
    path = tmp_path / name
    torch.save(model.state_dict(), path)
    return path


def test_cifar100_body_starts_a_cifar10_model_and_the_head_only_when_asked(tmp_path):
    torch.manual_seed(0)
    pre = Xie2023CifarCNN(num_classes=100)
    path = _saved(tmp_path, pre)
    torch.manual_seed(1)
    model = Xie2023CifarCNN(num_classes=10)
    fresh_head = model.fc.weight.detach().clone()
    with pytest.raises(ValueError, match=r"parameter 'fc.weight' has shape \(100, 128\) in the "
                       r"file, the model has \(10, 128\); it is the output layer: set "
                       "model.replace_head: true"):
        load_pretrained(model, path)
    assert torch.equal(model.fc.weight, fresh_head)  # nothing half-loaded
    assert not torch.equal(model.conv1.weight, pre.conv1.weight)
    info = load_pretrained(model, path, replace_head=True)
    for name in ("conv1.weight", "conv2.bias", "conv4.weight"):
        assert torch.equal(model.state_dict()[name], pre.state_dict()[name])
    assert torch.equal(model.fc.weight, fresh_head)
    assert info.replaced == ("fc.bias", "fc.weight") == tuple(sorted(head_names(model)))
    assert len(info.sha256) == 64
    same = Xie2023CifarCNN(num_classes=100)
    load_pretrained(same, path)  # same class count: everything loaded, head included
    assert all(torch.equal(v, pre.state_dict()[k]) for k, v in same.state_dict().items())


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")  # torch on the junk file
def test_hostile_or_mismatched_files_are_refused(tmp_path):
    model = Xie2023CifarCNN(num_classes=2)
    state = Xie2023CifarCNN(num_classes=2).state_dict()
    bad = dict(state, **{"conv1.weight": torch.zeros(16, 3, 3, 3)})
    torch.save(bad, tmp_path / "shape.pt")
    with pytest.raises(ValueError, match=r"'conv1.weight' has shape \(16, 3, 3, 3\) in the file"
                       r", the model has \(32, 3, 3, 3\)$"):
        load_pretrained(model, tmp_path / "shape.pt")
    extra = dict(state, **{"conv9.weight": torch.zeros(1)})
    torch.save(extra, tmp_path / "extra.pt")
    with pytest.raises(ValueError, match=r"unexpected \['conv9.weight'\]"):
        load_pretrained(model, tmp_path / "extra.pt")
    missing = {k: v for k, v in state.items() if k != "conv2.bias"}
    torch.save(missing, tmp_path / "missing.pt")
    with pytest.raises(ValueError, match=r"missing \['conv2.bias'\]"):
        load_pretrained(model, tmp_path / "missing.pt")
    nan = dict(state, **{"conv3.bias": torch.full((64,), float("nan"))})
    torch.save(nan, tmp_path / "nan.pt")
    with pytest.raises(ValueError, match="'conv3.bias' holds NaN or inf"):
        load_pretrained(model, tmp_path / "nan.pt")
    torch.save({"state_dict": state}, tmp_path / "wrapped.pt")
    load_pretrained(model, tmp_path / "wrapped.pt")  # a training checkpoint's usual wrapping
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(ValueError, match="holds list: must be a state dict"):
        load_pretrained(model, tmp_path / "list.pt")
    (tmp_path / "junk.pt").write_bytes(b"\x80\x04not a pickle")
    with pytest.raises(ValueError, match="is not a readable state dict file"):
        load_pretrained(model, tmp_path / "junk.pt")
    torch.save({"w": np.zeros(2)}, tmp_path / "unsafe.pt")  # needs a global weights_only refuses
    with pytest.raises(ValueError, match="is not a readable state dict file"):
        load_pretrained(model, tmp_path / "unsafe.pt")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_pretrained(model, tmp_path / "absent.pt")


def _images(n=20, classes=10):
    rng = np.random.default_rng(0)
    train = Dataset(rng.random((n, 3, 32, 32), dtype=np.float32), np.arange(n) % classes,
                    num_classes=classes)
    return FederatedDataset(train, train, [np.arange(10), np.arange(10, 20)])


def test_a_configured_run_starts_from_init_from_and_the_card_says_it_must_be_public(tmp_path):
    path = _saved(tmp_path, Xie2023CifarCNN(num_classes=100))
    raw = {"model": {"name": "xie2023-cifar-cnn", "init_from": str(path)}}
    with pytest.raises(ConfigError, match="set model.replace_head: true"):
        build_configured(config_from_dict(raw), _images())
    raw["model"]["replace_head"] = True
    config = config_from_dict(raw)
    model = build_configured(config, _images())
    assert model.fc.out_features == 10 and model.pretrained.path == str(path)
    again = build_configured(config, _images())  # the fresh head comes from config.seed
    assert torch.equal(again.fc.weight, model.fc.weight)
    row = model_card_rows(config.model)[PRETRAINING_ROW]
    assert f"initial model from {path} (output layer started fresh)" in row
    digest = model.pretrained.sha256
    assert f"from {path}, sha256 {digest[:16]} (output layer started fresh)" in model_card_rows(
        config.model, model)[PRETRAINING_ROW]
    assert "only if this pretraining data is public" in row
    assert model_card_rows(config_from_dict({}).model) == {}
    with pytest.raises(ValueError, match="replace_head = true needs model.init_from"):
        config_from_dict({"model": {"name": "mlp", "replace_head": True}})


def test_a_text_model_takes_the_datas_vocabulary_and_glove_file(tmp_path):
    glove = tmp_path / "glove.txt"
    glove.write_text("good 1 2 3 4\nbad 4 3 2 1\n")
    ids = np.random.default_rng(1).integers(0, 5, (20, 6))
    data = FederatedDataset(*[Dataset(ids, np.arange(20) % 2)] * 2,
                            [np.arange(10), np.arange(10, 20)])
    raw = {"model": {"name": "xie2023-sent140-lstm", "embeddings": str(glove),
                     "kwargs": {"embedding_dim": 4, "hidden": 8}}}
    with pytest.raises(ConfigError, match="is a text model: data.dataset = .* has no vocabulary"):
        build_configured(config_from_dict(raw), data)
    data.train.vocabulary = ("<pad>", "<unk>", "good", "bad", "meh")
    model = build_configured(config_from_dict(raw), data)
    assert model.vocabulary == data.train.vocabulary
    assert model.embedding.weight[3].tolist() == [4.0, 3.0, 2.0, 1.0]
    assert not model.embedding.weight.requires_grad and model.glove.missing == 1
    row = model_card_rows(config_from_dict(raw).model)[PRETRAINING_ROW]
    assert f"word vectors from {glove} (frozen)" in row
    raw["model"]["freeze_embeddings"] = False
    assert build_configured(config_from_dict(raw), data).embedding.weight.requires_grad
    glove.write_text("good 1 2 3 4\ngood 1 2 3 4\n")
    with pytest.raises(ConfigError, match="model.embeddings = .*line 2: word 'good' appears "
                       "again"):
        build_configured(config_from_dict(raw), data)
    with pytest.raises(ConfigError, match="model.embeddings = .* is not allowed: model 'mlp' "
                       "has no embedding layer"):
        build_configured(config_from_dict({"model": {"name": "mlp", "embeddings": "g.txt"}}),
                         data)
