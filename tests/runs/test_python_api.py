"""Your own N x D data through the Python API: it trains, and the result holds the trained model,
the headline and its epsilon; progress is shown only when asked or watched."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privfl import Dataset, Experiment, config_from_dict, federate_iid
from privfl.config import ConfigError
from privfl.runs.headline import Headline
from privfl.runs.progress import round_status, with_progress
from privfl.runs.rounding import format_bound

CLASSES = 3


@pytest.fixture(scope="module")
def tabular():
    """1500 x 10 records, 3 classes (the argmax of a random linear map), 20 IID clients."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1500, 10))
    y = np.argmax(x @ rng.normal(size=(10, CLASSES)), axis=1)
    train = Dataset(x[:1200], y[:1200], "tabular/train", CLASSES)
    test = Dataset(x[1200:], y[1200:], "tabular/test", CLASSES)
    return federate_iid(train, test, num_clients=20, test_size=15, seed=0), x[1200:], y[1200:]


def _config(**changes):
    """The test's configuration; ``section__key=value`` changes a key (None removes it)."""
    raw = {
        "name": "tabular", "seed": 1, "data": {"dataset": "custom"},
        "model": {"name": "logreg"},
        "training": {"local_steps": 5, "batch_size": 20, "lr": 0.5},
        "privacy": {"noise_multiplier": 1.0, "clip_norm": 1.0, "delta": 1e-5,
                    "accountants": ["rdp"]},
        "federated": {"algorithm": "dp-fedavg", "rounds": 10, "client_rate": 0.5},
        "run": {"threads": 1},
    }
    for key, value in changes.items():
        section, name = key.split("__")
        raw[section][name] = value
        if value is None:
            del raw[section][name]
    return config_from_dict(raw)


def test_n_x_d_data_train_privately_end_to_end(tabular, tmp_path, capsys):
    data, x_test, y_test = tabular
    result = Experiment.create(_config(), tmp_path / "run", data=data).run()
    assert capsys.readouterr().err == ""  # no progress under pytest unless asked
    assert result.stop_reason == "rounds" and result.summary["rounds_completed"] == 10
    assert result.summary["final"]["global_accuracy"] > 0.8  # chance: 1/3
    # the trained model predicts from the same N x D layout
    assert isinstance(result.model, torch.nn.Module) and not result.model.training
    with torch.no_grad():
        predicted = result.model(torch.as_tensor(x_test, dtype=torch.float32)).argmax(-1)
    assert (predicted.numpy() == y_test).mean() > 0.8
    assert "global model" in result.model_note
    # a finite epsilon, with its labels, and the headline privfl run prints
    assert math.isfinite(result.epsilon) and result.epsilon > 0 and result.delta == 1e-5
    bound = result.headline_parts.result
    assert isinstance(result.headline_parts, Headline) and bound.epsilon == result.epsilon
    assert (bound.method, bound.kind, bound.unit) == ("rdp", "bound", "client")
    saved = result.summary["headline"]
    assert result.headline == "\n\n".join(
        saved[k] for k in ("sentence", "advice", "reading") if saved[k])
    assert "In plain words: for any one client" in result.headline
    assert result.headline.startswith(
        f"epsilon = {format_bound(result.epsilon, 4)} at delta = 1e-5 (RDP")
    assert "epsilon=" in repr(result) and "global_accuracy" in repr(result)
    with pytest.raises(ValueError, match="has no per-client models"):
        result.client_model(0)


def test_a_personalised_algorithm_says_which_model_it_returns(tabular, tmp_path):
    data = tabular[0]
    config = _config(federated__algorithm="prifedsync", federated__rounds=2,
                     federated__client_rate=None)
    result = Experiment.create(config, tmp_path / "run", data=data).run(progress=False)
    assert "global model" in result.model_note and "client_model(j)" in result.model_note
    mine = result.client_model(3)
    expected = result.client_params(3)
    assert all(torch.equal(p, expected[n]) for n, p in mine.named_parameters())
    assert result.headline.startswith("epsilon = ") and "weak scope" in result.headline


def test_progress_lines_when_asked(tabular, tmp_path, capsys):
    data = tabular[0]
    Experiment.create(_config(federated__rounds=2), tmp_path / "run", data=data).run(
        progress=True)
    err = capsys.readouterr().err
    assert "round 1/2: global " in err and "round 2/2: global " in err and "eps " in err


def test_progress_defaults(tmp_path):
    class Mine:  # callbacks of one's own (privfl run passes its display): no second display
        pass

    mine = Mine()
    assert with_progress(mine, None) == (mine, None)
    assert with_progress(None, None) == (None, None)  # pytest: nobody is watching
    both, display = with_progress(mine, True)
    assert display is not None and both.parts == (mine, display)
    with pytest.raises(ValueError, match="progress = 'yes' is not allowed"):
        with_progress(None, "yes")
    labels = {"global_accuracy": "global", "other_accuracy": "other", "third_accuracy": ""}
    assert round_status(labels, {"global_accuracy": 0.5, "epsilon": 1.234,
                                 "epsilon_method": "rdp"}) == \
        "global 50.0%  other n/a  eps 1.234 (RDP)"


def test_a_convolutional_model_refuses_tabular_data(tabular, tmp_path):
    with pytest.raises(ConfigError, match=r"model.name = 'xie2023-mnist-cnn' is a network for "
                       r"images of shape \(1, 28, 28\).*\(10,\), not images; .* mlp or logreg"):
        Experiment.create(_config(model__name="xie2023-mnist-cnn"), tmp_path / "run",
                          data=tabular[0])
    assert not (tmp_path / "run").exists()


def test_a_diverged_run_returns_no_model_and_says_why(tabular, tmp_path):
    config = _config(training__lr=1e38, privacy__noise_multiplier=None,
                     privacy__clip_norm=None, privacy__delta=None, privacy__accountants=None,
                     privacy__enabled=False, federated__rounds=3)
    result = Experiment.create(config, tmp_path / "run", data=tabular[0]).run()
    assert result.stop_reason == "diverged" and result.model is None
    assert result.model_note.startswith("no model: the run diverged")
    assert result.epsilon is None and result.delta is None
    assert result.headline.startswith("No privacy guarantee")


def test_who_is_watching(monkeypatch):
    import io

    from rich.console import Console

    from privfl.runs.progress import RunProgress, interactive

    terminal = Console(file=io.StringIO(), force_terminal=True)
    notebook = Console(file=io.StringIO(), force_jupyter=True)
    log = Console(file=io.StringIO(), force_terminal=False, force_jupyter=False)
    assert not interactive(terminal)  # under pytest: nobody
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    assert interactive(terminal) and interactive(notebook) and not interactive(log)
    assert not RunProgress(terminal).lines and RunProgress(log).lines
    try:
        import ipywidgets  # noqa: F401
    except ImportError:  # a notebook without ipywidgets: lines, not a broken live bar
        assert RunProgress(notebook).lines
