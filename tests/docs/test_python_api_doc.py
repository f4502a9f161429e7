"""docs/python-api.md's worked example runs as written, and does what its text says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def _blocks(numbered: bool = True) -> str:
    """The python blocks of the numbered sections (## 1. to ## 4., the worked example), or of
    the unnumbered ones (the tabular quick start)."""
    sections = re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]
    chosen = [text for text in sections if bool(re.match(r"\d+\.", text)) == numbered]
    return "\n".join(re.findall(r"```python\n(.*?)```", "".join(chosen), flags=re.S))


@pytest.fixture
def _fresh_models():
    from privfl.models import MODELS

    before = dict(MODELS._entries)
    yield
    MODELS._entries.clear()
    MODELS._entries.update(before)


@pytest.mark.slow  # 10-20 s on 2 cores: `make test-slow` (keeps `make test` under 10 min)
def test_the_worked_example_runs_and_resumes_exactly(tmp_path, monkeypatch, _fresh_models):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    namespace: dict = {}
    try:
        exec(compile(_blocks(), str(DOC), "exec"), namespace)  # noqa: S102 - our own doc
    finally:
        torch.set_num_threads(threads)
    first, result = namespace["first"], namespace["result"]
    assert first.stop_reason == "max_rounds" and first.summary["rounds_completed"] == 2
    assert result.summary["rounds_completed"] == 4
    assert [r.method for r in result.privacy] == ["rdp"]
    assert result.privacy[0].kind == "bound" and result.privacy[0].unit == "client"
    run = tmp_path / "runs" / "blobs"
    text = (run / "config.yaml").read_text()
    assert "dataset: custom" in text and "name: two-layer-net" in text
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 4

    # equals an uninterrupted run of the same configuration, bit for bit
    from privfl.runs.experiment import Experiment

    config = namespace["config"]
    whole = config.model_copy(update={"run": config.run.model_copy(update={"max_rounds": None})})
    straight = Experiment.create(whole, tmp_path / "straight", data=namespace["data"]).run()
    strip = [{k: v for k, v in m.items() if k != "seconds"} for m in straight.metrics]
    assert strip == [{k: v for k, v in m.items() if k != "seconds"} for m in result.metrics]


def test_resume_without_the_data_or_with_another_partition_is_refused(tmp_path, monkeypatch,
                                                                      _fresh_models):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(_blocks().split("resumed =")[0], str(DOC), "exec"), namespace)  # noqa: S102
    from privfl.config import ConfigError
    from privfl.data import federate_iid
    from privfl.runs.experiment import Experiment

    with pytest.raises(ConfigError, match="data come from Python"):
        Experiment.resume("runs/blobs")
    other = federate_iid(namespace["train"], namespace["test"], num_clients=6, test_size=50,
                         seed=99)
    with pytest.raises(ConfigError, match="no usable checkpoint.*data_fingerprint does not match"):
        Experiment.resume("runs/blobs", data=other)
    with pytest.raises(ConfigError, match="needs data.dataset: custom"):
        Experiment.create(namespace["config"].model_copy(
            update={"data": namespace["config"].data.model_copy(update={"dataset": "digits"})}),
            tmp_path / "x", data=namespace["data"])


def test_the_tabular_quick_start_runs_and_learns(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    namespace: dict = {}
    try:
        exec(compile(_blocks(numbered=False), str(DOC), "exec"), namespace)  # noqa: S102
    finally:
        torch.set_num_threads(threads)
    trained = namespace["trained"]
    out = capsys.readouterr().out.splitlines()
    headline = trained.headline.splitlines()  # sentence, advice?, reading: blank-separated
    assert out[:len(headline)] == headline and out[0].startswith("epsilon = ")
    assert "at delta = 1e-5" in out[0] and "bound, client level" in out[0]
    assert headline[-1].startswith("In plain words: for any one client")
    assert trained.epsilon > 0 and trained.delta == 1e-5
    assert trained.summary["final"]["global_accuracy"] > 0.8  # chance: 1/3
    assert out[-1].startswith("test accuracy") and float(out[-1].split()[-1]) > 0.8
    assert namespace["table"].input_shape == (10,)
